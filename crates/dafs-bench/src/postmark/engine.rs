//! The native PostMark engine: PostMark's workload (J. Katcher, NetApp TR 3022, as in
//! PostMark 1.51) run through a [`PmFs`] — local files (`std::fs`) or a connected dafs
//! [`Client`] — with every byte it writes derived from (file id, offset), so every read
//! is checked and the final pool can be compared with the engine's model.
//!
//! Phases, as PostMark: create the pool (`files` files, sizes uniform in
//! [min, max]), run `transactions` transactions, each = (read the whole file, or append
//! to it; `bias_read` in tenths) + (create a file, or delete one; `bias_create` in
//! tenths), then delete what is left (unless `keep_files`). Reads and writes go in
//! blocks of `read_block_bytes` / `write_block_bytes`. An append adds a uniform
//! number of bytes in [0, max - size] (a file never grows beyond `size_max_bytes`).
//!
//! Reused by the federation benchmark: give it any [`PmFs`] (one per client) and a
//! directory; it returns counts, timings and the model of the final pool.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use dafs_client::{Client, OpenOptions};
use serde::Serialize;

use crate::util::{cpu_self, heartbeat, Rng};

/// Largest file the engine will create or grow: files are held in memory to write and
/// to verify them, so this bounds the engine's memory (two buffers of this size).
pub const FILE_BYTES_MAX: u64 = 64 << 20;
/// Most files in the pool at once (the engine's table of live files).
pub const POOL_FILES_MAX: usize = 1_000_000;

/// The workload's parameters (PostMark's `set` commands).
#[derive(Debug, Clone, Serialize)]
pub struct PmParams {
    /// `set number`: files created before the transactions.
    pub files: usize,
    /// `set transactions`.
    pub transactions: usize,
    /// `set size MIN MAX`.
    pub size_min_bytes: u64,
    pub size_max_bytes: u64,
    /// `set read` / `set write`: block sizes of reads and of writes.
    pub read_block_bytes: usize,
    pub write_block_bytes: usize,
    /// `set bias read`: out of 10, how many transactions read (the rest append); -1:
    /// no read/append half.
    pub bias_read: i32,
    /// `set bias create`: out of 10, how many create (the rest delete); -1: none.
    pub bias_create: i32,
    /// `set seed`.
    pub seed: u64,
    /// Leave the final pool in place (no deletion phase), for verification.
    pub keep_files: bool,
}

impl PmParams {
    /// PostMark 1.51's defaults (`postmark` then `show`).
    pub fn postmark_defaults() -> PmParams {
        PmParams {
            files: 500,
            transactions: 500,
            size_min_bytes: 500,
            size_max_bytes: 10_000,
            read_block_bytes: 512,
            write_block_bytes: 512,
            bias_read: 5,
            bias_create: 5,
            seed: 42,
            keep_files: false,
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.size_min_bytes == 0 || self.size_min_bytes > self.size_max_bytes {
            return Err(format!(
                "file sizes: need 1 <= min <= max (got {}..{})",
                self.size_min_bytes, self.size_max_bytes
            ));
        }
        if self.size_max_bytes > FILE_BYTES_MAX {
            return Err(format!(
                "largest file {} above the limit {FILE_BYTES_MAX} (FILE_BYTES_MAX)",
                self.size_max_bytes
            ));
        }
        if self.read_block_bytes == 0 || self.write_block_bytes == 0 {
            return Err("read and write block sizes must be at least 1 byte".into());
        }
        if self.files == 0 || self.files > POOL_FILES_MAX {
            return Err(format!("files must be 1..={POOL_FILES_MAX} (POOL_FILES_MAX)"));
        }
        for (what, b) in [("read", self.bias_read), ("create", self.bias_create)] {
            if !(-1..=10).contains(&b) {
                return Err(format!("bias {what} must be -1 (off) or 0..=10, not {b}"));
            }
        }
        Ok(())
    }
}

/// What the engine needs of a file system. Paths are relative to the backend's root.
pub trait PmFs {
    fn mkdir(&mut self, dir: &str) -> Result<(), String>;
    fn rmdir(&mut self, dir: &str) -> Result<(), String>;
    /// Create a new file (it must not exist) holding `data`, written in `block`-byte writes.
    fn create(&mut self, path: &str, data: &[u8], block: usize) -> Result<(), String>;
    /// Open, append `data` at the end of file in `block`-byte writes, close.
    fn append(&mut self, path: &str, data: &[u8], block: usize) -> Result<(), String>;
    /// Open, read the whole file into `out` in `block`-byte reads, close.
    fn read_all(&mut self, path: &str, block: usize, out: &mut Vec<u8>) -> Result<(), String>;
    fn delete(&mut self, path: &str) -> Result<(), String>;
}

/// Counts like PostMark's report.
#[derive(Debug, Clone, Serialize, Default, PartialEq, Eq)]
pub struct PmCounts {
    pub created_alone: u64,
    pub created_mixed: u64,
    pub read: u64,
    pub appended: u64,
    pub deleted_mixed: u64,
    pub deleted_alone: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// A file of the final pool as the model has it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PmFile {
    pub name: String,
    pub id: u64,
    pub size_bytes: u64,
    /// FNV-1a 64 of its contents.
    pub fnv64: u64,
}

/// One run of the engine.
#[derive(Debug, Clone, Serialize)]
pub struct PmRun {
    pub counts: PmCounts,
    pub create_secs: f64,
    pub transactions_secs: f64,
    pub delete_secs: f64,
    pub total_secs: f64,
    /// Transactions per second of the transaction phase (PostMark's figure, exact).
    pub tx_per_s: f64,
    /// Transactions over the whole run (pool creation and deletion included), the
    /// figure comparable with the stock program timed from outside.
    pub tx_per_s_wall: f64,
    /// This process's CPU seconds over the whole run.
    pub client_cpu_s: f64,
    /// The pool after the transactions (the model), sorted by id.
    pub final_files: Vec<PmFile>,
}

/// Byte contents of file `id` from `offset`, into `buf`: a 64-bit mix of (id, word
/// index), so appends continue the pattern and any misplaced byte shows.
pub fn pattern(id: u64, offset: u64, buf: &mut [u8]) {
    let key = id.wrapping_mul(0x1_0000_0001);
    let mut i = 0usize;
    while i < buf.len() {
        // One mix per 8-byte word of the file: bytes o..o+n of word o/8.
        let o = offset + i as u64;
        let word = mix(key ^ (o / 8)).to_le_bytes();
        let skip = (o % 8) as usize;
        let n = (8 - skip).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&word[skip..skip + n]);
        i += n;
    }
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The expected contents of file `id` at `size_bytes`.
pub fn expected_contents(id: u64, size_bytes: u64) -> Vec<u8> {
    let mut v = vec![0u8; size_bytes as usize];
    pattern(id, 0, &mut v);
    v
}

pub fn fnv64(data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in data {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

struct Live {
    id: u64,
    size: u64,
}

struct Engine<'a> {
    fs: &'a mut dyn PmFs,
    p: &'a PmParams,
    dir: String,
    rng: Rng,
    live: Vec<Live>,
    next_id: u64,
    counts: PmCounts,
    wbuf: Vec<u8>,
    rbuf: Vec<u8>,
}

impl Engine<'_> {
    fn path(&self, id: u64) -> String {
        format!("{}/{id}", self.dir)
    }

    fn pick(&mut self) -> Option<usize> {
        if self.live.is_empty() {
            None
        } else {
            Some((self.rng.next() % self.live.len() as u64) as usize)
        }
    }

    fn create(&mut self, mixed: bool) -> Result<(), String> {
        if self.live.len() >= POOL_FILES_MAX {
            return Err(format!("pool full ({POOL_FILES_MAX} files, POOL_FILES_MAX)"));
        }
        let span = self.p.size_max_bytes - self.p.size_min_bytes + 1;
        let size = self.p.size_min_bytes + self.rng.next() % span;
        let id = self.next_id;
        self.next_id += 1;
        self.wbuf.resize(size as usize, 0);
        pattern(id, 0, &mut self.wbuf);
        let path = self.path(id);
        self.fs.create(&path, &self.wbuf, self.p.write_block_bytes)?;
        self.live.push(Live { id, size });
        self.counts.bytes_written += size;
        if mixed {
            self.counts.created_mixed += 1;
        } else {
            self.counts.created_alone += 1;
        }
        Ok(())
    }

    fn delete(&mut self, k: usize, mixed: bool) -> Result<(), String> {
        let f = self.live.swap_remove(k);
        self.fs.delete(&self.path(f.id))?;
        if mixed {
            self.counts.deleted_mixed += 1;
        } else {
            self.counts.deleted_alone += 1;
        }
        Ok(())
    }

    fn read(&mut self, k: usize) -> Result<(), String> {
        let (id, size) = (self.live[k].id, self.live[k].size);
        let path = self.path(id);
        self.rbuf.clear();
        self.fs.read_all(&path, self.p.read_block_bytes, &mut self.rbuf)?;
        if self.rbuf.len() as u64 != size {
            return Err(format!("read {path}: {} bytes, the model says {size}", self.rbuf.len()));
        }
        self.wbuf.resize(size as usize, 0);
        pattern(id, 0, &mut self.wbuf);
        if let Some(at) = self.rbuf.iter().zip(&self.wbuf).position(|(a, b)| a != b) {
            return Err(format!("read {path}: wrong contents at byte {at} of {size}"));
        }
        self.counts.read += 1;
        self.counts.bytes_read += size;
        Ok(())
    }

    fn append(&mut self, k: usize) -> Result<(), String> {
        let (id, size) = (self.live[k].id, self.live[k].size);
        let room = self.p.size_max_bytes.saturating_sub(size);
        let n = self.rng.next() % (room + 1);
        self.wbuf.resize(n as usize, 0);
        pattern(id, size, &mut self.wbuf);
        let path = self.path(id);
        self.fs.append(&path, &self.wbuf, self.p.write_block_bytes)?;
        self.live[k].size += n;
        self.counts.appended += 1;
        self.counts.bytes_written += n;
        Ok(())
    }

    fn transaction(&mut self) -> Result<(), String> {
        if self.p.bias_read >= 0 {
            let read = (self.rng.next() % 10) < self.p.bias_read as u64;
            if let Some(k) = self.pick() {
                if read {
                    self.read(k)?
                } else {
                    self.append(k)?
                }
            }
        }
        if self.p.bias_create >= 0 {
            if (self.rng.next() % 10) < self.p.bias_create as u64 {
                self.create(true)?;
            } else if let Some(k) = self.pick() {
                self.delete(k, true)?;
            }
        }
        Ok(())
    }

    /// The model's view of the pool (contents recomputed from the pattern).
    fn model(&self) -> Vec<PmFile> {
        let mut v: Vec<PmFile> = self
            .live
            .iter()
            .map(|f| PmFile {
                name: f.id.to_string(),
                id: f.id,
                size_bytes: f.size,
                fnv64: fnv64(&expected_contents(f.id, f.size)),
            })
            .collect();
        v.sort_by_key(|f| f.id);
        v
    }
}

/// Run PostMark in `dir` (created if missing; removed at the end unless `keep_files`).
pub fn run(fs: &mut dyn PmFs, dir: &str, p: &PmParams) -> Result<PmRun, String> {
    p.check()?;
    fs.mkdir(dir)?;
    let mut e = Engine {
        fs,
        p,
        dir: dir.trim_end_matches('/').to_string(),
        rng: Rng::new(p.seed),
        live: Vec::with_capacity(p.files),
        next_id: 1,
        counts: PmCounts::default(),
        wbuf: Vec::new(),
        rbuf: Vec::new(),
    };
    let cpu0 = cpu_self();
    let t0 = Instant::now();
    for _ in 0..p.files {
        e.create(false)?;
    }
    let t1 = Instant::now();
    for i in 0..p.transactions {
        if i % 1000 == 0 {
            heartbeat(&format!("postmark transaction {i} in {dir}"));
        }
        e.transaction()?;
    }
    let t2 = Instant::now();
    let final_files = e.model();
    if !p.keep_files {
        while !e.live.is_empty() {
            let k = e.live.len() - 1;
            e.delete(k, false)?;
        }
        e.fs.rmdir(dir)?;
    }
    let t3 = Instant::now();
    let tx_secs = (t2 - t1).as_secs_f64();
    let total = (t3 - t0).as_secs_f64();
    Ok(PmRun {
        counts: e.counts,
        create_secs: (t1 - t0).as_secs_f64(),
        transactions_secs: tx_secs,
        delete_secs: (t3 - t2).as_secs_f64(),
        total_secs: total,
        tx_per_s: p.transactions as f64 / tx_secs.max(1e-9),
        tx_per_s_wall: p.transactions as f64 / total.max(1e-9),
        client_cpu_s: cpu_self() - cpu0,
        final_files,
    })
}

// ------------------------------------------------------------------ local files

/// Local files under `root` (`std::fs`: one system call per block, no user-space
/// buffering, like the dafs backend).
pub struct LocalFs {
    pub root: PathBuf,
}

fn io_err(op: &str, p: &std::path::Path, e: std::io::Error) -> String {
    format!("{op} {}: {e}", p.display())
}

fn write_blocks(w: &mut impl Write, data: &[u8], block: usize) -> std::io::Result<()> {
    for c in data.chunks(block) {
        w.write_all(c)?;
    }
    Ok(())
}

impl PmFs for LocalFs {
    fn mkdir(&mut self, dir: &str) -> Result<(), String> {
        let p = self.root.join(dir);
        std::fs::create_dir_all(&p).map_err(|e| io_err("mkdir", &p, e))
    }
    fn rmdir(&mut self, dir: &str) -> Result<(), String> {
        let p = self.root.join(dir);
        std::fs::remove_dir(&p).map_err(|e| io_err("rmdir", &p, e))
    }
    fn create(&mut self, path: &str, data: &[u8], block: usize) -> Result<(), String> {
        let p = self.root.join(path);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .map_err(|e| io_err("create", &p, e))?;
        write_blocks(&mut f, data, block).map_err(|e| io_err("write", &p, e))
    }
    fn append(&mut self, path: &str, data: &[u8], block: usize) -> Result<(), String> {
        let p = self.root.join(path);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .map_err(|e| io_err("open(append)", &p, e))?;
        write_blocks(&mut f, data, block).map_err(|e| io_err("append", &p, e))
    }
    fn read_all(&mut self, path: &str, block: usize, out: &mut Vec<u8>) -> Result<(), String> {
        let p = self.root.join(path);
        let mut f = std::fs::File::open(&p).map_err(|e| io_err("open", &p, e))?;
        let mut buf = vec![0u8; block];
        loop {
            let n = f.read(&mut buf).map_err(|e| io_err("read", &p, e))?;
            if n == 0 {
                return Ok(());
            }
            out.extend_from_slice(&buf[..n]);
        }
    }
    fn delete(&mut self, path: &str) -> Result<(), String> {
        let p = self.root.join(path);
        std::fs::remove_file(&p).map_err(|e| io_err("unlink", &p, e))
    }
}

// ------------------------------------------------------------------ dafs

/// A connected dafs client; paths are relative to `root` in the export ("" = its root).
pub struct DafsFs<'a> {
    pub c: &'a mut Client,
    pub root: String,
    /// Reused read buffer.
    buf: Vec<u8>,
}

impl<'a> DafsFs<'a> {
    pub fn new(c: &'a mut Client, root: &str) -> DafsFs<'a> {
        DafsFs { c, root: root.trim_matches('/').to_string(), buf: Vec::new() }
    }
    fn full(&self, p: &str) -> String {
        if self.root.is_empty() {
            p.to_string()
        } else {
            format!("{}/{p}", self.root)
        }
    }
}

fn derr(op: &str, p: &str, e: dafs_client::Error) -> String {
    format!("{op} {p}: {e}")
}

impl PmFs for DafsFs<'_> {
    fn mkdir(&mut self, dir: &str) -> Result<(), String> {
        let p = self.full(dir);
        match self.c.mkdir(&p, 0o755) {
            Ok(_) | Err(dafs_client::Error::Status(dafs_client::dafs_proto::Status::Exist)) => {
                Ok(())
            }
            Err(e) => Err(derr("mkdir", &p, e)),
        }
    }
    fn rmdir(&mut self, dir: &str) -> Result<(), String> {
        let p = self.full(dir);
        self.c.rmdir(&p).map_err(|e| derr("rmdir", &p, e))
    }
    fn create(&mut self, path: &str, data: &[u8], block: usize) -> Result<(), String> {
        let p = self.full(path);
        let opts = OpenOptions::write_only().exclusive(true).mode(0o644);
        let f = self.c.open(&p, opts).map_err(|e| derr("create", &p, e))?;
        let mut off = 0u64;
        for chunk in data.chunks(block) {
            let n = self.c.pwrite(&f, chunk, off).map_err(|e| derr("pwrite", &p, e))?;
            if n != chunk.len() {
                return Err(format!("pwrite {p}: short write {n} of {}", chunk.len()));
            }
            off += n as u64;
        }
        self.c.close(f).map_err(|e| derr("close", &p, e))
    }
    fn append(&mut self, path: &str, data: &[u8], block: usize) -> Result<(), String> {
        let p = self.full(path);
        let opts = OpenOptions::write_only().append(true);
        let f = self.c.open(&p, opts).map_err(|e| derr("open(append)", &p, e))?;
        for chunk in data.chunks(block) {
            self.c.append(&f, chunk).map_err(|e| derr("append", &p, e))?;
        }
        self.c.close(f).map_err(|e| derr("close", &p, e))
    }
    fn read_all(&mut self, path: &str, block: usize, out: &mut Vec<u8>) -> Result<(), String> {
        let p = self.full(path);
        let f = self.c.open(&p, OpenOptions::read()).map_err(|e| derr("open", &p, e))?;
        self.buf.resize(block, 0);
        let mut off = 0u64;
        loop {
            let n = self.c.pread(&f, &mut self.buf, off).map_err(|e| derr("pread", &p, e))?;
            if n == 0 {
                break;
            }
            out.extend_from_slice(&self.buf[..n]);
            off += n as u64;
        }
        self.c.close(f).map_err(|e| derr("close", &p, e))
    }
    fn delete(&mut self, path: &str) -> Result<(), String> {
        let p = self.full(path);
        self.c.remove(&p).map_err(|e| derr("remove", &p, e))
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
