//! Read-ahead and write-behind with threads, for files reached through blocking calls
//! (local files with pread/pwrite, NFS with libnfs): one read-ahead thread keeps up to
//! QD blocks of every input filled ahead of the merge, one write-behind thread writes
//! the output blocks while the merge fills the next. What an asynchronous I/O library
//! over a blocking interface does underneath (TPIE's BTE over the kernel's NFS client
//! had nfsiod threads for this).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use super::engine::{MergeFn, Stop, Streams};

/// Blocking access to a set of files (one per thread: an NFS context is not shared).
pub trait BlockIo: Send {
    /// Read exactly `buf.len()` bytes of file `file` at `off`.
    fn read_at(&mut self, file: usize, buf: &mut [u8], off: u64) -> Result<(), String>;
    /// Write all of `buf` to file `file` at `off`.
    fn write_at(&mut self, file: usize, buf: &[u8], off: u64) -> Result<(), String>;
}

type Block = Result<Vec<u8>, String>;

pub struct Threaded {
    bs: usize,
    blocks: Vec<u64>,
    taken: Vec<u64>,
    cur: Vec<Option<Vec<u8>>>,
    free: Option<SyncSender<(usize, Vec<u8>)>>,
    full: Vec<Receiver<Block>>,
    reader: Option<JoinHandle<()>>,
    out: Vec<u8>,
    out_off: u64,
    wq: Option<SyncSender<(u64, Vec<u8>)>>,
    wfree: Receiver<Vec<u8>>,
    writer: Option<JoinHandle<Result<(), String>>>,
}

impl Threaded {
    /// `reader` reads input i as its file i (`blocks[i]` blocks of `bs`); `writer`
    /// writes the output as its file 0. `qd` blocks per input and for the output.
    pub fn start(
        mut reader: Box<dyn BlockIo>,
        mut writer: Box<dyn BlockIo>,
        blocks: Vec<u64>,
        bs: usize,
        qd: usize,
    ) -> Threaded {
        assert!(qd >= 1);
        let n = blocks.len();
        let (free_tx, free_rx) = sync_channel::<(usize, Vec<u8>)>(n * qd);
        let mut full_tx = Vec::new();
        let mut full = Vec::new();
        for _ in 0..n {
            let (t, r) = sync_channel::<Block>(qd);
            full_tx.push(t);
            full.push(r);
        }
        for i in 0..n {
            for _ in 0..qd {
                free_tx.send((i, vec![0u8; bs])).expect("room for every buffer");
            }
        }
        let nb = blocks.clone();
        let reader_h = std::thread::spawn(move || {
            let mut next = vec![0u64; nb.len()];
            // Buffers circulate: qd per input, so neither channel ever blocks a send.
            while let Ok((i, mut buf)) = free_rx.recv() {
                if next[i] >= nb[i] {
                    continue;
                }
                let r = reader.read_at(i, &mut buf, next[i] * bs as u64).map(|_| buf);
                next[i] += 1;
                let failed = r.is_err();
                if full_tx[i].send(r).is_err() || failed {
                    return;
                }
            }
        });
        let (wq_tx, wq_rx) = sync_channel::<(u64, Vec<u8>)>(qd);
        let (wfree_tx, wfree) = sync_channel::<Vec<u8>>(qd);
        for _ in 1..qd.max(2) {
            wfree_tx.send(vec![0u8; bs]).expect("room for every buffer");
        }
        let writer_h = std::thread::spawn(move || {
            while let Ok((off, buf)) = wq_rx.recv() {
                writer.write_at(0, &buf, off)?;
                let _ = wfree_tx.send(buf);
            }
            Ok(())
        });
        Threaded {
            bs,
            taken: vec![0; n],
            cur: vec![None; n],
            blocks,
            free: Some(free_tx),
            full,
            reader: Some(reader_h),
            out: vec![0u8; bs],
            out_off: 0,
            wq: Some(wq_tx),
            wfree,
            writer: Some(writer_h),
        }
    }

    fn writer_error(&mut self) -> String {
        self.wq = None;
        match self.writer.take().map(|h| h.join()) {
            Some(Ok(Err(e))) => format!("write-behind: {e}"),
            Some(Err(_)) => "the write-behind thread panicked".into(),
            _ => "the write-behind thread stopped".into(),
        }
    }

    fn write(&mut self, len: usize) -> Result<(), String> {
        let next = match self.wfree.recv() {
            Ok(b) => b,
            Err(_) => return Err(self.writer_error()),
        };
        let mut full = std::mem::replace(&mut self.out, next);
        full.truncate(len);
        let off = self.out_off;
        self.out_off += len as u64;
        if self.wq.as_ref().expect("writer running").send((off, full)).is_err() {
            return Err(self.writer_error());
        }
        Ok(())
    }
}

impl Streams for Threaded {
    fn advance(&mut self, i: usize) -> Result<bool, String> {
        if let Some(b) = self.cur[i].take() {
            // The reader may be gone after its last block: nothing more to refill then.
            let _ = self.free.as_ref().expect("reader running").send((i, b));
        }
        if self.taken[i] >= self.blocks[i] {
            return Ok(false);
        }
        let b = self.full[i]
            .recv()
            .map_err(|_| "the read-ahead thread stopped".to_string())?
            .map_err(|e| format!("read-ahead of input {i}: {e}"))?;
        assert_eq!(b.len(), self.bs);
        self.taken[i] += 1;
        self.cur[i] = Some(b);
        Ok(true)
    }

    fn output_full(&mut self) -> Result<(), String> {
        let len = self.out.len();
        self.write(len)?;
        if self.out.len() != self.bs {
            self.out.resize(self.bs, 0);
        }
        Ok(())
    }

    fn finish(&mut self, fill: usize) -> Result<(), String> {
        if fill > 0 {
            self.write(fill)?;
        }
        self.wq = None;
        match self.writer.take().map(|h| h.join()) {
            Some(Ok(r)) => r.map_err(|e| format!("write-behind: {e}"))?,
            _ => return Err("the write-behind thread panicked".into()),
        }
        self.free = None;
        if let Some(h) = self.reader.take() {
            h.join().map_err(|_| "the read-ahead thread panicked".to_string())?;
        }
        Ok(())
    }

    fn with_blocks(&mut self, f: &mut MergeFn) -> Result<Stop, String> {
        let ins: Vec<&[u8]> = self.cur.iter().map(|c| c.as_deref().unwrap_or(&[])).collect();
        Ok(f(&ins, &mut self.out))
    }
}

impl Drop for Threaded {
    fn drop(&mut self) {
        // On an error path: close the channels so both threads end.
        self.free = None;
        self.wq = None;
        self.full.clear();
    }
}

// ------------------------------------------------------------------ local files

/// Local files through pread/pwrite.
pub struct LocalIo(pub Vec<std::fs::File>);

impl BlockIo for LocalIo {
    fn read_at(&mut self, file: usize, buf: &mut [u8], off: u64) -> Result<(), String> {
        std::os::unix::fs::FileExt::read_exact_at(&self.0[file], buf, off)
            .map_err(|e| format!("pread at {off}: {e}"))
    }
    fn write_at(&mut self, file: usize, buf: &[u8], off: u64) -> Result<(), String> {
        std::os::unix::fs::FileExt::write_all_at(&self.0[file], buf, off)
            .map_err(|e| format!("pwrite at {off}: {e}"))
    }
}
