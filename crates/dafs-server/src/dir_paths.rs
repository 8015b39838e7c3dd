//! The path of a directory beneath its export root, cached for the cluster's name check.
//!
//! A cluster node checks every request that names a path by the name's full path
//! beneath the export root (`cluster::check_request`). The kernel gives a directory
//! descriptor's path through readlink of `/proc/self/fd/N`, a walk of /proc costing
//! several microseconds, twice per request (the root and the directory): a tenth of a
//! quota'd node's CPU under PostMark. This cache keeps each directory's path as last
//! read and, before using it, checks that the path still leads from the root to the
//! same directory — one openat2 of the path, never following a symlink
//! (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), and an fstat. So
//! a directory renamed or moved (itself or any ancestor, through DAFS or behind
//! dafsd's back), removed, shadowed by a mount or replaced by a symlink fails the
//! check, and its path is read from the kernel again. Renaming the export root changes
//! nothing: paths are relative to the root's descriptor. The root itself (path "")
//! needs no lookup at all.
//!
//! A path checked here is as current as the kernel's answer was: a rename racing the
//! request can make either stale, as it could the readlink before.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use dafs_proto::Status;
use rustix::fs::{self as rfs, Mode, OFlags, ResolveFlags};

use crate::fsops;

/// Most bytes of paths cached (the keys and bookkeeping add ~64 bytes per entry): a
/// million bytes hold thousands of directories' paths of typical length. Above it the
/// cache starts over (every path is read from the kernel again once).
pub const DIR_PATHS_BYTES_MAX: usize = 1 << 20;

/// Paths longer than this are not cached (read from the kernel each time): rare, and
/// one of them must not take a large share of the cache.
pub const DIR_PATH_CACHED_BYTES_MAX: usize = 4096;

/// A directory: device, inode number, export.
type Key = (u64, u64, u32);

#[derive(Debug, Default)]
struct Inner {
    paths: HashMap<Key, Vec<u8>>,
    bytes: usize,
}

/// See the module documentation.
#[derive(Debug)]
pub struct DirPaths {
    inner: Mutex<Inner>,
    bytes_max: usize,
    /// Paths served from the cache (checked), and read from the kernel.
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

/// What the check needs of a resolved directory.
#[derive(Debug, Clone, Copy)]
pub struct Dir<'a> {
    pub fd: BorrowedFd<'a>,
    pub dev: u64,
    pub ino: u64,
    pub export: u32,
}

impl Default for DirPaths {
    fn default() -> Self {
        DirPaths::with_bytes_max(DIR_PATHS_BYTES_MAX)
    }
}

impl DirPaths {
    pub fn with_bytes_max(bytes_max: usize) -> Self {
        DirPaths {
            inner: Mutex::default(),
            bytes_max,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The path of `dir` beneath `root` (its export's root), without a leading '/'
    /// ("" for the root itself).
    pub fn rel_path(&self, root: BorrowedFd, dir: Dir) -> Result<Vec<u8>, Status> {
        let key = (dir.dev, dir.ino, dir.export);
        let cached = self.inner.lock().unwrap().paths.get(&key).cloned();
        if let Some(rel) = cached {
            if still_leads(root, &rel, dir) {
                self.hits.fetch_add(1, Relaxed);
                return Ok(rel);
            }
        }
        self.misses.fetch_add(1, Relaxed);
        let rel = kernel_rel_path(root, dir.fd)?;
        if rel.len() <= DIR_PATH_CACHED_BYTES_MAX.min(self.bytes_max) {
            let mut g = self.inner.lock().unwrap();
            if g.bytes + rel.len() > self.bytes_max {
                g.paths.clear();
                g.bytes = 0;
            }
            g.bytes += rel.len();
            if let Some(old) = g.paths.insert(key, rel.clone()) {
                g.bytes -= old.len();
            }
            debug_assert!(g.bytes <= self.bytes_max);
        }
        Ok(rel)
    }

    /// Directories cached now.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Does `rel` still lead from `root` to `dir` (no symlink followed)?
fn still_leads(root: BorrowedFd, rel: &[u8], dir: Dir) -> bool {
    let same = |s: rfs::Stat| s.st_dev == dir.dev && s.st_ino == dir.ino;
    if rel.is_empty() {
        return fsops::fstat(root).is_ok_and(same);
    }
    let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rfs::openat2(root, rel, flags, Mode::empty(), how) {
        Ok(fd) => fsops::fstat(fd.as_fd()).is_ok_and(same),
        Err(_) => false,
    }
}

/// The kernel's answer: the directory's path minus the root's.
pub fn kernel_rel_path(root: BorrowedFd, dir: BorrowedFd) -> Result<Vec<u8>, Status> {
    let root_path = proc_link(root)?;
    let dir_path = proc_link(dir)?;
    let rel = dir_path.strip_prefix(root_path.as_slice()).ok_or(Status::Stale)?;
    match rel {
        [] => Ok(Vec::new()),
        [b'/', rest @ ..] => Ok(rest.to_vec()),
        _ => Err(Status::Stale), // a sibling of the root sharing its prefix
    }
}

fn proc_link(fd: BorrowedFd) -> Result<Vec<u8>, Status> {
    let link =
        rfs::readlink(fsops::proc_path(fd).as_c_str(), Vec::new()).map_err(|_| Status::Stale)?;
    let mut bytes = link.into_bytes();
    if bytes == b"/" {
        bytes.clear();
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    fn open_path(p: &Path) -> OwnedFd {
        rfs::open(p, OFlags::PATH, Mode::empty()).unwrap()
    }

    fn dir<'a>(fd: &'a OwnedFd, p: &Path) -> Dir<'a> {
        let m = std::fs::metadata(p).unwrap();
        Dir { fd: fd.as_fd(), dev: m.dev(), ino: m.ino(), export: 0 }
    }

    fn rel(c: &DirPaths, root: &OwnedFd, fd: &OwnedFd, d: Dir) -> String {
        let d = Dir { fd: fd.as_fd(), ..d };
        String::from_utf8(c.rel_path(root.as_fd(), d).unwrap()).unwrap()
    }

    #[test]
    fn cached_paths_follow_renames_of_the_directory_its_ancestors_and_the_root() {
        let t = tempfile::tempdir().unwrap();
        let exp = t.path().join("exp");
        std::fs::create_dir_all(exp.join("a/b")).unwrap();
        let root = open_path(&exp);
        let b = open_path(&exp.join("a/b"));
        let d = dir(&b, &exp.join("a/b"));
        let c = DirPaths::default();
        assert_eq!(rel(&c, &root, &b, d), "a/b");
        assert_eq!(rel(&c, &root, &b, d), "a/b");
        assert_eq!((c.hits.load(Relaxed), c.misses.load(Relaxed)), (1, 1));
        // An ancestor renamed behind the cache's back.
        std::fs::rename(exp.join("a"), exp.join("x")).unwrap();
        assert_eq!(rel(&c, &root, &b, d), "x/b");
        // The directory itself renamed.
        std::fs::rename(exp.join("x/b"), exp.join("x/c")).unwrap();
        assert_eq!(rel(&c, &root, &b, d), "x/c");
        // The export root renamed: paths beneath it stay.
        std::fs::rename(&exp, t.path().join("exp2")).unwrap();
        assert_eq!(rel(&c, &root, &b, d), "x/c");
        assert_eq!(c.misses.load(Relaxed), 3);
        // The root is "" and needs no lookup.
        let rd = dir(&root, &t.path().join("exp2"));
        assert_eq!(rel(&c, &root, &root, rd), "");
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn a_symlink_in_place_of_an_ancestor_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let exp = t.path().join("exp");
        std::fs::create_dir_all(exp.join("a/b")).unwrap();
        let root = open_path(&exp);
        let b = open_path(&exp.join("a/b"));
        let d = dir(&b, &exp.join("a/b"));
        let c = DirPaths::default();
        assert_eq!(rel(&c, &root, &b, d), "a/b");
        // a moves to a2 and a symlink a -> a2 takes its place: "a/b" still reaches the
        // directory, but only through the symlink; its path is a2/b.
        std::fs::rename(exp.join("a"), exp.join("a2")).unwrap();
        std::os::unix::fs::symlink("a2", exp.join("a")).unwrap();
        assert_eq!(rel(&c, &root, &b, d), "a2/b");
    }

    #[test]
    fn a_removed_directory_is_not_served_from_the_cache() {
        let t = tempfile::tempdir().unwrap();
        let exp = t.path().join("exp");
        std::fs::create_dir_all(exp.join("a")).unwrap();
        let root = open_path(&exp);
        let a = open_path(&exp.join("a"));
        let d = dir(&a, &exp.join("a"));
        let c = DirPaths::default();
        assert_eq!(rel(&c, &root, &a, d), "a");
        std::fs::remove_dir(exp.join("a")).unwrap();
        // Another directory of the same name is not the removed one.
        std::fs::create_dir(exp.join("a")).unwrap();
        let r = c.rel_path(root.as_fd(), d);
        assert_ne!(r, Ok(b"a".to_vec()), "a removed directory's cached path was used");
        assert_eq!(c.hits.load(Relaxed), 0);
    }

    #[test]
    fn a_sibling_of_the_root_sharing_its_prefix_is_refused() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("exp")).unwrap();
        std::fs::create_dir_all(t.path().join("exp2")).unwrap();
        let root = open_path(&t.path().join("exp"));
        let sib = open_path(&t.path().join("exp2"));
        let d = dir(&sib, &t.path().join("exp2"));
        assert_eq!(DirPaths::default().rel_path(root.as_fd(), d), Err(Status::Stale));
    }

    #[test]
    fn the_cache_stays_within_its_bytes() {
        let t = tempfile::tempdir().unwrap();
        let exp = t.path().join("exp");
        std::fs::create_dir_all(&exp).unwrap();
        let root = open_path(&exp);
        let bytes_max = 1000;
        let c = DirPaths::with_bytes_max(bytes_max);
        // 20 directories of ~100-byte paths: twice the bound.
        let name = "d".repeat(96);
        let dirs: Vec<_> = (10..30)
            .map(|i| {
                let p = exp.join(format!("{i}")).join(&name);
                std::fs::create_dir_all(&p).unwrap();
                (open_path(&p), p)
            })
            .collect();
        for round in 0..3 {
            for (fd, p) in &dirs {
                let got = c.rel_path(root.as_fd(), dir(fd, p)).unwrap();
                assert_eq!(got, p.strip_prefix(&exp).unwrap().as_os_str().as_encoded_bytes());
                let bytes = c.inner.lock().unwrap().bytes;
                assert!(bytes <= bytes_max, "round {round}: {bytes} bytes cached");
            }
        }
        assert!(c.len() < dirs.len());
    }
}
