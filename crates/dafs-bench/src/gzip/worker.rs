//! One process of the DAFS gzip (seed 001: gzip modified for the DAFS API): compress a
//! range of the input into one gzip member, reading 16 KiB blocks into two registered
//! buffers (the next read in flight while this block is compressed) and writing the
//! compressed stream from two registered buffers (a write in flight while the next
//! fills). `dafs bench gzip` runs it as a child process (`--worker`), one per CPU.

use std::io::Write;
use std::time::Instant;

use dafs_client::{CgId, Client, File as DFile, IoBuf, OpenOptions, Provider, RegionId};
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};

use crate::backends::WAIT_TIMEOUT;
use crate::util::cpu_self;

/// What one worker does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub url: String,
    /// Shared memory when the URL offers it (dafs+shm://), else TCP.
    pub shm: bool,
    pub input: String,
    pub output: String,
    /// Input byte range [start, end).
    pub start: u64,
    pub end: u64,
    pub block_bytes: usize,
    pub level: u32,
}

/// What one worker reports (one JSON line on stdout).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct WorkerResult {
    pub secs: f64,
    pub cpu_s: f64,
    pub in_bytes: u64,
    pub out_bytes: u64,
}

/// Buffers in flight per direction: double buffering, as the seed's gzip.
const BUFFERS: usize = 2;
/// User data of write completions: read slot k is k, write slot k is WRITE_TAG + k.
const WRITE_TAG: u64 = 1 << 32;

struct Io<'a> {
    c: &'a mut Client,
    cg: CgId,
    bs: usize,
    out: DFile,
    wbuf: Vec<RegionId>,
    wbusy: [bool; BUFFERS],
    wnext: usize,
    out_off: u64,
    rdone: [Option<usize>; BUFFERS],
}

impl Io<'_> {
    /// Reap one completion; a read's length is kept for its slot.
    fn reap(&mut self) -> Result<(), String> {
        let d = self
            .c
            .wait_one(self.cg, Some(WAIT_TIMEOUT))
            .map_err(|e| format!("wait: {e}"))?
            .ok_or_else(|| format!("no completion within {} s", WAIT_TIMEOUT.as_secs()))?;
        let n = d.result.map_err(|e| format!("asynchronous I/O failed: {e}"))?;
        if d.user_data >= WRITE_TAG {
            self.wbusy[(d.user_data - WRITE_TAG) as usize] = false;
        } else {
            self.rdone[d.user_data as usize] = Some(n);
        }
        Ok(())
    }

    /// Write `data` (at most a block) behind, from the next free registered buffer.
    fn write(&mut self, data: &[u8]) -> Result<(), String> {
        assert!(data.len() <= self.bs);
        let k = self.wnext;
        while self.wbusy[k] {
            self.reap()?;
        }
        let r = self.wbuf[k];
        self.c.region_mut(r).map_err(|e| e.to_string())?[..data.len()].copy_from_slice(data);
        let buf = IoBuf::Region { region: r, offset: 0, len: data.len() };
        self.c
            .submit_write(&self.out, self.out_off, buf, self.cg, WRITE_TAG + k as u64)
            .map_err(|e| format!("submit_write at {}: {e}", self.out_off))?;
        self.wbusy[k] = true;
        self.out_off += data.len() as u64;
        self.wnext = (k + 1) % BUFFERS;
        Ok(())
    }

    /// Write every whole block of `pending` behind (all of it when `last`).
    fn drain(&mut self, pending: &mut Vec<u8>, last: bool) -> Result<(), String> {
        let mut at = 0;
        while pending.len() - at >= self.bs || (last && at < pending.len()) {
            let n = (pending.len() - at).min(self.bs);
            self.write(&pending[at..at + n])?;
            at += n;
        }
        pending.drain(..at);
        Ok(())
    }
}

/// Compress `spec.input[start..end)` into `spec.output` (created or truncated).
pub fn compress(spec: &WorkerSpec) -> Result<WorkerResult, String> {
    let provider = if spec.shm { Provider::Auto } else { Provider::Tcp };
    let mut c = crate::apps::connect(&spec.url, provider, None)?;
    let bs = spec.block_bytes;
    let cpu0 = cpu_self();
    let t0 = Instant::now();
    let input = c
        .open(&spec.input, OpenOptions::read())
        .map_err(|e| format!("open {}: {e}", spec.input))?;
    let out = c
        .open(&spec.output, OpenOptions::read_write().create(true).truncate(true))
        .map_err(|e| format!("create {}: {e}", spec.output))?;
    let cg = c.create_cg().map_err(|e| format!("create_cg: {e}"))?;
    let mut regions = Vec::new();
    for _ in 0..2 * BUFFERS {
        regions.push(c.alloc_registered(bs).map_err(|e| format!("alloc_registered: {e}"))?);
    }
    let (rbuf, wbuf) = (regions[..BUFFERS].to_vec(), regions[BUFFERS..].to_vec());
    let mut io = Io {
        c: &mut c,
        cg,
        bs,
        out,
        wbuf,
        wbusy: [false; BUFFERS],
        wnext: 0,
        out_off: 0,
        rdone: [None; BUFFERS],
    };
    let len = spec.end - spec.start;
    let blocks = len.div_ceil(bs as u64);
    let block_len = |b: u64| (len - b * bs as u64).min(bs as u64) as usize;
    let submit_read = |io: &mut Io, b: u64| -> Result<(), String> {
        let k = (b % BUFFERS as u64) as usize;
        io.rdone[k] = None;
        let buf = IoBuf::Region { region: rbuf[k], offset: 0, len: block_len(b) };
        let off = spec.start + b * bs as u64;
        io.c.submit_read(&input, off, buf, io.cg, k as u64)
            .map(|_| ())
            .map_err(|e| format!("submit_read at {off}: {e}"))
    };
    for b in 0..blocks.min(BUFFERS as u64) {
        submit_read(&mut io, b)?;
    }
    let mut enc = GzEncoder::new(Vec::with_capacity(2 * bs), Compression::new(spec.level));
    for b in 0..blocks {
        let k = (b % BUFFERS as u64) as usize;
        while io.rdone[k].is_none() {
            io.reap()?;
        }
        let want = block_len(b);
        if io.rdone[k] != Some(want) {
            return Err(format!("short read: {:?} of {want} bytes (input changed?)", io.rdone[k]));
        }
        let data = io.c.region(rbuf[k]).map_err(|e| e.to_string())?;
        enc.write_all(&data[..want]).map_err(|e| format!("compress: {e}"))?;
        if b + (BUFFERS as u64) < blocks {
            submit_read(&mut io, b + BUFFERS as u64)?;
        }
        io.drain(enc.get_mut(), false)?;
    }
    let mut rest = enc.finish().map_err(|e| format!("compress: {e}"))?;
    io.drain(&mut rest, true)?;
    while io.c.outstanding(cg) > 0 {
        io.reap()?;
    }
    let out_bytes = io.out_off;
    let out = io.out;
    c.destroy_cg(cg).map_err(|e| e.to_string())?;
    for r in regions {
        c.unregister(r).map_err(|e| e.to_string())?;
    }
    c.close(input).map_err(|e| format!("close: {e}"))?;
    c.close(out).map_err(|e| format!("close: {e}"))?;
    Ok(WorkerResult {
        secs: t0.elapsed().as_secs_f64(),
        cpu_s: cpu_self() - cpu0,
        in_bytes: len,
        out_bytes,
    })
}
