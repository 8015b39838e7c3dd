//! Read-ahead and write-behind with the DAFS asynchronous API: every input has QD
//! registered blocks with reads in flight ahead of the merge, the output QD registered
//! blocks with writes in flight behind it; one completion group, reaped as needed. No
//! helper thread: the client library is the I/O engine (as TPIE's DAFS BTE).

use dafs_client::{CgId, Client, File as DFile, IoBuf, RegionId};

use super::engine::{MergeFn, Stop, Streams};
use crate::backends::WAIT_TIMEOUT;

struct Input {
    file: DFile,
    blocks: u64,
    /// Blocks submitted so far (block b lives in slot b % qd).
    submitted: u64,
    /// Current block + 1 (0: none yet).
    taken: u64,
    slots: Vec<RegionId>,
}

pub struct DafsStreams<'c> {
    c: &'c mut Client,
    cg: CgId,
    bs: usize,
    qd: usize,
    ins: Vec<Input>,
    /// Completion seen, by user data (input i slot s: i*qd+s; output slot s: n*qd+s).
    done: Vec<bool>,
    out_file: DFile,
    out_slots: Vec<RegionId>,
    out_cur: usize,
    out_off: u64,
    /// Output slots with a write in flight.
    out_busy: Vec<bool>,
}

impl<'c> DafsStreams<'c> {
    /// Open the inputs (`blocks[i]` blocks of `bs` each) and create the output, register
    /// the blocks and start the read-ahead.
    pub fn start(
        c: &'c mut Client,
        inputs: &[(String, u64)],
        output: &str,
        bs: usize,
        qd: usize,
    ) -> Result<DafsStreams<'c>, String> {
        if bs > c.io_bytes_max() {
            return Err(format!("block size {bs} above the server's max I/O {}", c.io_bytes_max()));
        }
        let cg = c.create_cg().map_err(|e| format!("create_cg: {e}"))?;
        let mut ins = Vec::new();
        for (name, blocks) in inputs {
            let file = c
                .open(name, dafs_client::OpenOptions::read())
                .map_err(|e| format!("open {name}: {e}"))?;
            let slots = alloc(c, bs, qd)?;
            ins.push(Input { file, blocks: *blocks, submitted: 0, taken: 0, slots });
        }
        let out_file = c
            .open(output, dafs_client::OpenOptions::read_write().create(true).truncate(true))
            .map_err(|e| format!("create {output}: {e}"))?;
        let out_slots = alloc(c, bs, qd.max(2))?;
        let n = ins.len();
        let mut s = DafsStreams {
            c,
            cg,
            bs,
            qd,
            ins,
            done: vec![false; n * qd + qd.max(2)],
            out_busy: vec![false; out_slots.len()],
            out_file,
            out_slots,
            out_cur: 0,
            out_off: 0,
        };
        for i in 0..n {
            for _ in 0..qd {
                s.submit_read(i)?;
            }
        }
        Ok(s)
    }

    fn submit_read(&mut self, i: usize) -> Result<(), String> {
        let inp = &mut self.ins[i];
        if inp.submitted >= inp.blocks {
            return Ok(());
        }
        let slot = (inp.submitted % self.qd as u64) as usize;
        let ud = i * self.qd + slot;
        self.done[ud] = false;
        let buf = IoBuf::Region { region: inp.slots[slot], offset: 0, len: self.bs };
        let off = inp.submitted * self.bs as u64;
        self.c
            .submit_read(&inp.file, off, buf, self.cg, ud as u64)
            .map_err(|e| format!("submit_read input {i} at {off}: {e}"))?;
        inp.submitted += 1;
        Ok(())
    }

    /// Reap one completion (any request of the group).
    fn reap(&mut self) -> Result<(), String> {
        let d = self.c.wait_one(self.cg, Some(WAIT_TIMEOUT)).map_err(|e| format!("wait: {e}"))?;
        let d = d.ok_or_else(|| format!("no completion within {} s", WAIT_TIMEOUT.as_secs()))?;
        let ud = d.user_data as usize;
        let n = d.result.map_err(|e| format!("asynchronous I/O {ud} failed: {e}"))?;
        let outs = self.ins.len() * self.qd;
        if ud >= outs {
            self.out_busy[ud - outs] = false;
        } else if n != self.bs {
            return Err(format!("short read: {n} of {} bytes", self.bs));
        }
        self.done[ud] = true;
        Ok(())
    }

    fn write_current(&mut self, len: usize) -> Result<(), String> {
        let slot = self.out_cur;
        let ud = self.ins.len() * self.qd + slot;
        self.done[ud] = false;
        let buf = IoBuf::Region { region: self.out_slots[slot], offset: 0, len };
        self.c
            .submit_write(&self.out_file, self.out_off, buf, self.cg, ud as u64)
            .map_err(|e| format!("submit_write at {}: {e}", self.out_off))?;
        self.out_busy[slot] = true;
        self.out_off += len as u64;
        self.out_cur = (slot + 1) % self.out_slots.len();
        while self.out_busy[self.out_cur] {
            self.reap()?;
        }
        Ok(())
    }

    /// Release every resource (after `finish`, or on an error path).
    pub fn close(mut self) -> Result<(), String> {
        while self.c.outstanding(self.cg) > 0 {
            self.reap()?;
        }
        self.c.destroy_cg(self.cg).map_err(|e| format!("destroy_cg: {e}"))?;
        let mut regions = std::mem::take(&mut self.out_slots);
        for inp in self.ins.drain(..) {
            regions.extend(inp.slots);
            self.c.close(inp.file).map_err(|e| format!("close: {e}"))?;
        }
        for r in regions {
            self.c.unregister(r).map_err(|e| format!("unregister: {e}"))?;
        }
        self.c.close(self.out_file).map_err(|e| format!("close output: {e}"))
    }
}

fn alloc(c: &mut Client, bs: usize, k: usize) -> Result<Vec<RegionId>, String> {
    (0..k).map(|_| c.alloc_registered(bs).map_err(|e| format!("alloc_registered: {e}"))).collect()
}

impl Streams for DafsStreams<'_> {
    fn advance(&mut self, i: usize) -> Result<bool, String> {
        if self.ins[i].taken > 0 {
            // Its slot is free again: refill it with the block qd ahead.
            self.submit_read(i)?;
        }
        let inp = &mut self.ins[i];
        if inp.taken >= inp.blocks {
            // Past the end: no current block any more (see `with_blocks`).
            inp.taken = inp.blocks + 1;
            return Ok(false);
        }
        let ud = i * self.qd + (inp.taken % self.qd as u64) as usize;
        while !self.done[ud] {
            self.reap()?;
        }
        self.ins[i].taken += 1;
        Ok(true)
    }

    fn output_full(&mut self) -> Result<(), String> {
        self.write_current(self.bs)
    }

    fn finish(&mut self, fill: usize) -> Result<(), String> {
        if fill > 0 {
            self.write_current(fill)?;
        }
        while self.out_busy.iter().any(|b| *b) {
            self.reap()?;
        }
        Ok(())
    }

    fn with_blocks(&mut self, f: &mut MergeFn) -> Result<Stop, String> {
        let mut raw: Vec<(*const u8, usize)> = Vec::with_capacity(self.ins.len());
        for inp in &self.ins {
            if inp.taken == 0 || inp.taken > inp.blocks {
                raw.push((std::ptr::null(), 0));
                continue;
            }
            let slot = ((inp.taken - 1) % self.qd as u64) as usize;
            let r = self.c.region(inp.slots[slot]).map_err(|e| format!("input block: {e}"))?;
            raw.push((r.as_ptr(), r.len()));
        }
        let out = self
            .c
            .region_mut(self.out_slots[self.out_cur])
            .map_err(|e| format!("output block: {e}"))?;
        let ins: Vec<&[u8]> = raw
            .iter()
            .map(|&(p, len)| {
                if p.is_null() {
                    &[][..]
                } else {
                    // SAFETY: each (p, len) is a registered region distinct from the
                    // output region (separate allocations), checked idle by
                    // `Client::region` just above; the client stays mutably borrowed by
                    // `out` while these slices live, so no progress (no placement into
                    // any region) can happen meanwhile, and no region is unregistered.
                    unsafe { std::slice::from_raw_parts(p, len) }
                }
            })
            .collect();
        Ok(f(&ins, out))
    }
}
