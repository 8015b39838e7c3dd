//! The mount workloads, each run the same way on a local directory and in the mount:
//! dd-style sequential 1 MiB writes and reads, 4 KiB random reads, and untar + find +
//! stat of a generated source tree.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::util::{self, Rng};

/// Request size of the sequential workloads: dd bs=1M.
pub const SEQ_BLOCK_BYTES: usize = 1 << 20;
/// Request size of the random reads.
pub const RANDOM_BLOCK_BYTES: usize = 4096;
/// Subdirectories of the generated tree: about a hundred files each, like a source tree.
const TREE_FILES_PER_DIR: usize = 100;
/// Largest file of the generated tree (sizes are uniform below it: mean 4 KiB).
const TREE_FILE_BYTES_MAX: u64 = 8192;

/// Drop the page cache's clean pages of `path` (written and fsynced before): the next
/// read comes from below the cache. Through the mount it drops the kernel's pages of
/// the FUSE file; on the export it drops the server's.
pub fn drop_pages(path: &Path) -> Result<(), String> {
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: a plain advisory call on a descriptor we own.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r != 0 {
        return Err(format!("{}: posix_fadvise: errno {r}", path.display()));
    }
    Ok(())
}

/// Write `size` bytes to `path` in 1 MiB writes, then fsync (dd bs=1M conv=fsync).
/// Returns MB/s (10^6 bytes).
pub fn seq_write(path: &Path, size: u64) -> Result<f64, String> {
    let mut buf = vec![0u8; SEQ_BLOCK_BYTES];
    util::fill(&mut buf, 7);
    let t = Instant::now();
    let mut f = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut left = size;
    while left > 0 {
        let n = left.min(SEQ_BLOCK_BYTES as u64) as usize;
        f.write_all(&buf[..n]).map_err(|e| format!("write {}: {e}", path.display()))?;
        left -= n as u64;
    }
    f.sync_all().map_err(|e| format!("fsync {}: {e}", path.display()))?;
    drop(f);
    Ok(size as f64 / t.elapsed().as_secs_f64() / 1e6)
}

/// Read all of `path` in 1 MiB reads (dd bs=1M). Returns MB/s and checks the length.
pub fn seq_read(path: &Path, size: u64) -> Result<f64, String> {
    let mut buf = vec![0u8; SEQ_BLOCK_BYTES];
    let t = Instant::now();
    let mut f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| format!("read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    if total != size {
        return Err(format!("{}: read {total} bytes, wrote {size}", path.display()));
    }
    Ok(size as f64 / secs / 1e6)
}

/// `count` 4 KiB preads at random aligned offsets of `path` (read-ahead off:
/// POSIX_FADV_RANDOM). Returns the latencies in microseconds, sorted.
pub fn random_reads(path: &Path, size: u64, count: usize, seed: u64) -> Result<Vec<f64>, String> {
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: a plain advisory call on a descriptor we own.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let blocks = (size / RANDOM_BLOCK_BYTES as u64).max(1);
    let mut rng = Rng::new(seed);
    let mut buf = vec![0u8; RANDOM_BLOCK_BYTES];
    let mut lat = Vec::with_capacity(count);
    for _ in 0..count {
        let off = (rng.next() % blocks) * RANDOM_BLOCK_BYTES as u64;
        let t = Instant::now();
        let n = f.read_at(&mut buf, off).map_err(|e| format!("pread {}: {e}", path.display()))?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        if n != RANDOM_BLOCK_BYTES {
            return Err(format!("{}: short read at {off}: {n}", path.display()));
        }
    }
    lat.sort_by(f64::total_cmp);
    Ok(lat)
}

/// The `q` quantile (0..=1) of sorted values.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Build the workload tree: `files` small files (deterministic names, sizes and
/// contents) in directories of [`TREE_FILES_PER_DIR`], packed into `tar` (a file in
/// the run's temporary directory; the tree itself is removed). Returns its bytes.
pub fn make_tree_tar(work: &Path, files: usize, tar: &Path) -> Result<u64, String> {
    let src = work.join("tree-src");
    let mut rng = Rng::new(0x7ee);
    let mut buf = vec![0u8; TREE_FILE_BYTES_MAX as usize];
    util::fill(&mut buf, 3);
    for i in 0..files {
        let dir = src.join(format!("d{:03}", i / TREE_FILES_PER_DIR));
        if i % TREE_FILES_PER_DIR == 0 {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let len = (rng.next() % TREE_FILE_BYTES_MAX) as usize;
        let p = dir.join(format!("f{i:05}.c"));
        std::fs::write(&p, &buf[..len]).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    run(Command::new("tar").arg("-cf").arg(tar).arg("-C").arg(&src).arg("."))?;
    std::fs::remove_dir_all(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    Ok(std::fs::metadata(tar).map_err(|e| e.to_string())?.len())
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// `tar -xf tar -C dir` (dir is made first). Returns seconds.
pub fn untar(tar: &Path, dir: &Path) -> Result<f64, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let t = Instant::now();
    run(Command::new("tar").arg("-xf").arg(tar).arg("-C").arg(dir))?;
    Ok(t.elapsed().as_secs_f64())
}

/// `find dir` (names only, the listing itself). Returns seconds and the entries found.
pub fn find(dir: &Path) -> Result<(f64, usize), String> {
    let t = Instant::now();
    let out = Command::new("find").arg(dir).output().map_err(|e| format!("find: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!("find {}: {}", dir.display(), out.status));
    }
    Ok((secs, out.stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count()))
}

/// lstat every entry under `dir` (walking it with readdir). Returns seconds and the
/// entries stated.
pub fn stat_all(dir: &Path) -> Result<(f64, usize), String> {
    let t = Instant::now();
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    let mut n = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let p = e.map_err(|e| format!("{}: {e}", d.display()))?.path();
            let md = std::fs::symlink_metadata(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            n += 1;
            if md.is_dir() {
                stack.push(p);
            }
        }
    }
    Ok((t.elapsed().as_secs_f64(), n))
}
