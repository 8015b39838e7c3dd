//! The file handle table. A handle names a slot in this table; the slot holds an
//! `O_PATH` descriptor of the object, so a handle survives renames, and a handle to an
//! object that was deleted (link count 0) answers STALE.
//!
//! Handle layout (32 bytes, opaque to clients):
//! `instance u64 | index u32 | generation u32 | fileid u64 | export u32 | check u32`.
//! `instance` is random per server start, so handles from an earlier server are STALE;
//! `generation` changes whenever a slot is reused, so an evicted handle is STALE, never
//! another object; `check` catches corrupted or invented handles (BADHANDLE).
//!
//! The table is bounded (`handles_max`); when full, the least recently used slot is
//! recycled. A client whose handle was recycled gets STALE and looks the path up again.

use std::collections::HashMap;
use std::ops::Range;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};

use dafs_proto::{FileHandle, Status};

use crate::fsops;

// Where each field sits in a handle's 32 bytes (little-endian).
const INSTANCE_AT: Range<usize> = 0..8;
const INDEX_AT: Range<usize> = 8..12;
const GENERATION_AT: Range<usize> = 12..16;
const FILEID_AT: Range<usize> = 16..24;
const EXPORT_AT: Range<usize> = 24..28;
const CHECK_AT: Range<usize> = 28..32;
/// The check word covers every field before it.
const CHECKED_BYTES: usize = CHECK_AT.start;

/// Smallest handle table (`handles_max`). One request may need several handles to stay
/// resolvable at once (a rename's two directories, a link's file and directory), so the
/// table must not recycle them under it; `scripts/test-fuse.sh` runs at this size to
/// keep the STALE-and-retry path busy.
pub const HANDLES_MIN: usize = 16;

#[derive(Debug)]
struct Entry {
    fd: Arc<OwnedFd>,
    dev: u64,
    ino: u64,
    export: u32,
    last_used: u64,
}

#[derive(Debug)]
struct Inner {
    entries: Vec<Option<Entry>>,
    generations: Vec<u32>,
    by_inode: HashMap<(u64, u64, u32), u32>,
    free: Vec<u32>,
    clock: u64,
}

#[derive(Debug)]
pub struct HandleTable {
    inner: Mutex<Inner>,
    instance: u64,
    max: usize,
}

/// A resolved handle: the object's `O_PATH` descriptor and its export.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub fd: Arc<OwnedFd>,
    pub export: u32,
}

fn check_word(b: &[u8]) -> u32 {
    // FNV-1a over the fields (CHECKED_BYTES): detects corruption and invented handles
    // cheaply.
    let mut h: u32 = 0x811c_9dc5;
    for &x in b {
        h ^= x as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

impl HandleTable {
    pub fn new(instance: u64, max: usize) -> Self {
        assert!(max >= HANDLES_MIN);
        HandleTable {
            inner: Mutex::new(Inner {
                entries: Vec::new(),
                generations: Vec::new(),
                by_inode: HashMap::new(),
                free: Vec::new(),
                clock: 0,
            }),
            instance,
            max,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        let g = self.inner.lock().unwrap();
        g.by_inode.len()
    }

    fn encode(&self, index: u32, gen: u32, ino: u64, export: u32) -> FileHandle {
        let mut b = [0u8; 32];
        b[INSTANCE_AT].copy_from_slice(&self.instance.to_le_bytes());
        b[INDEX_AT].copy_from_slice(&index.to_le_bytes());
        b[GENERATION_AT].copy_from_slice(&gen.to_le_bytes());
        b[FILEID_AT].copy_from_slice(&ino.to_le_bytes());
        b[EXPORT_AT].copy_from_slice(&export.to_le_bytes());
        let c = check_word(&b[..CHECKED_BYTES]);
        b[CHECK_AT].copy_from_slice(&c.to_le_bytes());
        FileHandle(b)
    }

    /// Enter an object (given as an `O_PATH` descriptor) and return its handle. An object
    /// already in the table keeps its handle.
    pub fn insert(
        &self,
        fd: OwnedFd,
        export: u32,
    ) -> Result<(FileHandle, rustix::fs::Stat), Status> {
        let s = fsops::fstat(fd.as_fd())?;
        let fh = self.insert_stat(fd, &s, export);
        Ok((fh, s))
    }

    fn insert_stat(&self, fd: OwnedFd, s: &rustix::fs::Stat, export: u32) -> FileHandle {
        let (dev, ino) = (s.st_dev, s.st_ino);
        let mut g = self.inner.lock().unwrap();
        g.clock += 1;
        let now = g.clock;
        if let Some(&idx) = g.by_inode.get(&(dev, ino, export)) {
            let e = g.entries[idx as usize].as_ref().expect("indexed entry exists");
            // Same device and inode number: the same object, unless the one we hold was
            // deleted and its number reused. Then the old handle must stay STALE: retire
            // the slot (its generation changes below) instead of re-pointing it.
            let alive = fsops::fstat(e.fd.as_fd())
                .map(|old| old.st_nlink > 0 && old.st_ino == ino)
                .unwrap_or(false);
            if alive {
                let gen = g.generations[idx as usize];
                g.entries[idx as usize].as_mut().unwrap().last_used = now;
                return self.encode(idx, gen, ino, export);
            }
            g.entries[idx as usize] = None;
            g.by_inode.remove(&(dev, ino, export));
            g.free.push(idx);
        }
        let idx = if let Some(i) = g.free.pop() {
            i
        } else if g.entries.len() < self.max {
            g.entries.push(None);
            g.generations.push(0);
            (g.entries.len() - 1) as u32
        } else {
            // Full: recycle the least recently used slot.
            let (victim, _) = g
                .entries
                .iter()
                .enumerate()
                .filter_map(|(i, e)| e.as_ref().map(|e| (i, e.last_used)))
                .min_by_key(|&(_, t)| t)
                .expect("a full table has entries");
            let old = g.entries[victim].take().expect("victim exists");
            g.by_inode.remove(&(old.dev, old.ino, old.export));
            victim as u32
        };
        g.generations[idx as usize] = g.generations[idx as usize].wrapping_add(1);
        let gen = g.generations[idx as usize];
        g.entries[idx as usize] =
            Some(Entry { fd: Arc::new(fd), dev, ino, export, last_used: now });
        g.by_inode.insert((dev, ino, export), idx);
        self.encode(idx, gen, ino, export)
    }

    /// Resolve a handle. BADHANDLE for one this server never made; STALE for one whose
    /// object is gone, was recycled, or belongs to an earlier server instance.
    pub fn resolve(&self, fh: &FileHandle) -> Result<Resolved, Status> {
        let b = &fh.0;
        let u32_at = |r: Range<usize>| u32::from_le_bytes(b[r].try_into().unwrap());
        let u64_at = |r: Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap());
        if check_word(&b[..CHECKED_BYTES]) != u32_at(CHECK_AT) {
            return Err(Status::BadHandle);
        }
        if u64_at(INSTANCE_AT) != self.instance {
            return Err(Status::Stale);
        }
        let idx = u32_at(INDEX_AT) as usize;
        let gen = u32_at(GENERATION_AT);
        let ino = u64_at(FILEID_AT);
        let export = u32_at(EXPORT_AT);
        let r = {
            let mut g = self.inner.lock().unwrap();
            g.clock += 1;
            let now = g.clock;
            if g.generations.get(idx) != Some(&gen) {
                return Err(Status::Stale);
            }
            let Some(e) = g.entries[idx].as_mut() else { return Err(Status::Stale) };
            if e.ino != ino || e.export != export {
                return Err(Status::Stale);
            }
            e.last_used = now;
            Resolved { fd: e.fd.clone(), export }
        };
        // Deleted since it was entered? (An open file stays usable through its open id.)
        let s = fsops::fstat(r.fd.as_fd())?;
        if s.st_nlink == 0 {
            return Err(Status::Stale);
        }
        Ok(r)
    }

    /// Forget the entry for an object (after it was removed), if present.
    pub fn forget(&self, dev: u64, ino: u64, export: u32) {
        let mut g = self.inner.lock().unwrap();
        if let Some(idx) = g.by_inode.remove(&(dev, ino, export)) {
            g.entries[idx as usize] = None;
            g.free.push(idx);
        }
    }
}
