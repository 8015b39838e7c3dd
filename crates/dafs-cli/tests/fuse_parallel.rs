//! The mount serves large reads and writes on worker threads with sessions of their own
//! (`-o threads=N`): many program threads reading and writing at once get their data
//! back intact, the workers' sessions do the transfers, a file removed while open still
//! reads and writes, and a file changed by another client is read anew at the next open
//! while an unchanged one keeps its cached pages. Needs root and /dev/fuse, like
//! scripts/test-fuse.sh.

mod common;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::Command;

use common::mount::Mount;
use common::{dafs_bin, TestServer};
use serde_json::Value;

const MIB: usize = 1 << 20;
/// Files written and read at once, one writer thread each.
const FILES: usize = 4;
/// Size of each file, in 1 MiB writes.
const FILE_MIB: usize = 8;

/// The byte at `off` of file `k`: differs between files and between 1 MiB blocks.
fn pattern(k: usize, off: usize) -> u8 {
    (off.wrapping_mul(31) ^ (off / MIB) ^ (k * 101)) as u8
}

fn block(k: usize, b: usize) -> Vec<u8> {
    (b * MIB..(b + 1) * MIB).map(|o| pattern(k, o)).collect()
}

/// Drop the kernel's clean pages of `f`, so the next reads reach the mount.
fn drop_pages(f: &File) {
    // SAFETY: an advisory call on a descriptor we own.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0);
}

fn check_file(path: &Path, k: usize) {
    let f = File::open(path).unwrap();
    drop_pages(&f);
    let mut buf = vec![0u8; MIB];
    for b in 0..FILE_MIB {
        f.read_exact_at(&mut buf, (b * MIB) as u64).unwrap();
        assert!(buf == block(k, b), "{}: block {b} differs", path.display());
    }
}

/// `dafs admin --json sessions` of the server behind `socket`.
fn sessions(socket: &Path) -> Vec<Value> {
    let out = Command::new(dafs_bin())
        .args(["admin", "--json", "--socket"])
        .arg(socket)
        .arg("sessions")
        .output()
        .expect("run dafs admin");
    assert!(out.status.success(), "dafs admin: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().cloned().unwrap_or_default()
}

#[test]
fn large_io_from_many_threads_keeps_its_data_and_runs_in_the_workers_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("admin.sock");
    let srv = TestServer::start(&["--admin-socket", admin.to_str().unwrap()]);
    let m = Mount::with_options(&format!("dafs://{}/", srv.addr()), &["-o", "threads=3"]);
    let paths: Vec<_> = (0..FILES).map(|k| m.path().join(format!("f{k}"))).collect();
    std::thread::scope(|s| {
        for (k, p) in paths.iter().enumerate() {
            s.spawn(move || {
                let mut f = File::create(p).unwrap();
                for b in 0..FILE_MIB {
                    f.write_all(&block(k, b)).unwrap();
                }
                f.sync_all().unwrap();
            });
        }
    });
    // What reached the server, byte for byte.
    for k in 0..FILES {
        let on_disk = std::fs::read(srv.dir().join(format!("f{k}"))).unwrap();
        assert_eq!(on_disk.len(), FILE_MIB * MIB);
        for b in 0..FILE_MIB {
            assert!(on_disk[b * MIB..(b + 1) * MIB] == block(k, b), "f{k} block {b} on disk");
        }
    }
    // Every file read by two threads at once, while a third rewrites the last block of
    // f0 with the same bytes (a writer beside the readers, data unchanged).
    let held = File::open(&paths[0]).unwrap();
    std::thread::scope(|s| {
        for _ in 0..2 {
            for (k, p) in paths.iter().enumerate() {
                s.spawn(move || check_file(p, k));
            }
        }
        s.spawn(|| {
            let f = OpenOptions::new().write(true).open(&paths[0]).unwrap();
            for _ in 0..4 {
                f.write_all_at(&block(0, FILE_MIB - 1), ((FILE_MIB - 1) * MIB) as u64).unwrap();
            }
        });
    });
    // The transfers ran in the workers' sessions: while `held` is open, besides the main
    // session's open of f0 a worker's own open of it is there too.
    let mut buf = vec![0u8; MIB];
    drop_pages(&held);
    held.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf == block(0, 0));
    let with_opens =
        sessions(&admin).iter().filter(|s| s["open_files"].as_u64().unwrap_or(0) > 0).count();
    assert!(with_opens >= 2, "only {with_opens} session(s) hold opens: no worker did the I/O");
    drop(held);
}

#[test]
fn a_file_removed_while_open_still_reads_and_writes_large_blocks() {
    let srv = TestServer::start(&[]);
    let m = Mount::with_options(&format!("dafs://{}/", srv.addr()), &["-o", "threads=2"]);
    let p = m.path().join("gone");
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    for b in 0..4 {
        f.write_all_at(&block(7, b), (b * MIB) as u64).unwrap();
    }
    f.sync_all().unwrap();
    drop_pages(&f);
    let mut buf = vec![0u8; MIB];
    for b in 0..4 {
        f.read_exact_at(&mut buf, (b * MIB) as u64).unwrap();
        assert!(buf == block(7, b), "block {b} of the removed file");
    }
    assert_eq!(f.metadata().unwrap().len(), 4 * MIB as u64);
}

/// Pages of `f` (of `len` bytes) in the kernel's page cache now (mincore of a mapping).
fn resident_pages(f: &File, len: usize) -> usize {
    let page = 4096;
    let pages = len.div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: a read-only shared mapping of `len` bytes of a file we hold open, only
    // passed to mincore (never read) and unmapped before returning; `vec` has a byte per
    // page.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0);
        libc::munmap(p, len);
    }
    vec.iter().filter(|b| **b & 1 != 0).count()
}

#[test]
fn an_unchanged_file_keeps_its_pages_across_opens_and_a_changed_one_is_read_anew() {
    let srv = TestServer::start(&[]);
    // A long attribute lifetime: only the check at open can see the change.
    let m = Mount::with_options(
        &format!("dafs://{}/", srv.addr()),
        &["-o", "attr_ttl_ms=60000,threads=2"],
    );
    let len = 2 * MIB;
    let on_server = srv.dir().join("doc");
    std::fs::write(&on_server, vec![b'a'; len]).unwrap();
    let path = m.path().join("doc");
    let read = |f: &mut File| {
        let mut v = Vec::new();
        f.read_to_end(&mut v).unwrap();
        v
    };
    assert!(read(&mut File::open(&path).unwrap()) == vec![b'a'; len]);
    // Unchanged: the next open keeps what the first one read.
    let mut f = File::open(&path).unwrap();
    assert_eq!(resident_pages(&f, len), len / 4096, "an unchanged file lost its pages");
    assert!(read(&mut f) == vec![b'a'; len]);
    drop(f);
    // Same size, other bytes, a later mtime (another client's write): the next open
    // drops the pages and reads the new contents.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&on_server, vec![b'b'; len]).unwrap();
    let mut f = File::open(&path).unwrap();
    assert_eq!(resident_pages(&f, len), 0, "the open kept pages of the old contents");
    assert!(read(&mut f) == vec![b'b'; len], "the open read the old contents");
}
