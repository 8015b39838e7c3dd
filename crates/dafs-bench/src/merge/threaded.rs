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

/// A filled input block (a read error stops the thread; see `reader_error`).
type Block = Vec<u8>;

pub struct Threaded {
    bs: usize,
    blocks: Vec<u64>,
    taken: Vec<u64>,
    cur: Vec<Option<Vec<u8>>>,
    free: Option<SyncSender<(usize, Vec<u8>)>>,
    full: Vec<Receiver<Block>>,
    reader: Option<JoinHandle<Result<(), String>>>,
    out: Vec<u8>,
    out_off: u64,
    wq: Option<SyncSender<(u64, Vec<u8>)>>,
    wfree: Receiver<Vec<u8>>,
    writer: Option<JoinHandle<Result<Box<dyn BlockIo>, String>>>,
    /// The writer's files after `finish`, still open: closing them (for NFS, the COMMIT
    /// that makes the data stable) is left to the caller, outside the timed region, as
    /// local and DAFS writes are not made stable either.
    pub spent_writer: Option<Box<dyn BlockIo>>,
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
                let off = next[i] * bs as u64;
                reader.read_at(i, &mut buf, off).map_err(|e| format!("input {i}: {e}"))?;
                next[i] += 1;
                if full_tx[i].send(buf).is_err() {
                    break;
                }
            }
            Ok(())
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
            Ok(writer)
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
            spent_writer: None,
        }
    }

    /// Why the read-ahead thread stopped (it failed on some input, maybe not the one
    /// the merge waits for).
    fn reader_error(&mut self) -> String {
        match self.reader.take().map(|h| h.join()) {
            Some(Ok(Err(e))) => format!("read-ahead of {e}"),
            Some(Err(_)) => "the read-ahead thread panicked".into(),
            _ => "the read-ahead thread stopped".into(),
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
        let b = match self.full[i].recv() {
            Ok(b) => b,
            Err(_) => return Err(self.reader_error()),
        };
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
            Some(Ok(r)) => self.spent_writer = Some(r.map_err(|e| format!("write-behind: {e}"))?),
            _ => return Err("the write-behind thread panicked".into()),
        }
        self.free = None;
        if let Some(h) = self.reader.take() {
            h.join().map_err(|_| "the read-ahead thread panicked".to_string())??;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::engine;
    use crate::merge::records::{Checksum, Generator, Verifier};

    fn inputs(dir: &std::path::Path, n: usize, rec: usize, bs: usize, blocks: usize) -> Checksum {
        let mut sum = Checksum::default();
        for i in 0..n {
            let mut g = Generator::new(i, rec, 5);
            let mut d = vec![0u8; bs * blocks];
            for b in d.chunks_exact_mut(bs) {
                g.fill(b);
            }
            sum.merge(&g.sum);
            std::fs::write(dir.join(format!("in{i}")), d).unwrap();
        }
        sum
    }

    fn open(dir: &std::path::Path, n: usize, out: std::fs::File) -> (LocalIo, LocalIo) {
        let ins = (0..n).map(|i| std::fs::File::open(dir.join(format!("in{i}"))).unwrap());
        (LocalIo(ins.collect()), LocalIo(vec![out]))
    }

    #[test]
    fn merges_local_files_with_read_ahead_and_write_behind() {
        let d = tempfile::tempdir().unwrap();
        let (n, rec, bs) = (3, 64, 4096);
        let sum = inputs(d.path(), n, rec, bs, 7);
        let out = std::fs::File::create(d.path().join("out")).unwrap();
        let (r, w) = open(d.path(), n, out);
        let mut t = Threaded::start(Box::new(r), Box::new(w), vec![7; n], bs, 2);
        assert_eq!(engine::run(&mut t, n, rec).unwrap(), (n * 7 * bs) as u64);
        drop(t);
        let mut v = Verifier::new(rec);
        v.feed(&std::fs::read(d.path().join("out")).unwrap()).unwrap();
        v.finish(&sum).unwrap();
    }

    #[test]
    fn a_short_input_or_a_failing_write_is_an_error_not_a_hang() {
        let d = tempfile::tempdir().unwrap();
        let (n, rec, bs) = (2, 64, 4096);
        inputs(d.path(), n, rec, bs, 3);
        // The inputs are said to hold 4 blocks: the 4th read comes up short.
        let out = std::fs::File::create(d.path().join("out")).unwrap();
        let (r, w) = open(d.path(), n, out);
        let mut t = Threaded::start(Box::new(r), Box::new(w), vec![4; n], bs, 2);
        let e = engine::run(&mut t, n, rec).unwrap_err();
        assert!(e.contains("read-ahead of input"), "{e}");
        // The output opened read-only: every write fails.
        std::fs::write(d.path().join("ro"), b"").unwrap();
        let ro = std::fs::File::open(d.path().join("ro")).unwrap();
        let (r, w) = open(d.path(), n, ro);
        let mut t = Threaded::start(Box::new(r), Box::new(w), vec![3; n], bs, 1);
        let e = engine::run(&mut t, n, rec).unwrap_err();
        assert!(e.contains("write-behind"), "{e}");
    }
}
