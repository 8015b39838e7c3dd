//! File handles and the descriptor cache.
//!
//! A handle (see `handle_codec`) is sealed with a MAC under the server's secret, so a
//! client can neither forge one nor re-point one at another export. It names either
//! - a *kernel* handle (`name_to_handle_at`), when dafsd may `open_by_handle_at`
//!   (CAP_DAC_READ_SEARCH): it stays valid across evictions — a miss re-opens the object
//!   from the kernel handle — and across restarts when `state_dir` keeps the secret;
//! - or a *volatile* entry of this boot's cache: evicted, or from an earlier boot, it
//!   answers STALE and the client looks the path up again.
//!
//! The cache holds one `O_PATH` descriptor per entry, bounded by `handles_max` (derived
//! from RLIMIT_NOFILE, see `fd_budget`), least recently used first out. Deleted objects
//! leave it as soon as noticed — on use, and by a periodic sweep — so their space comes
//! back. Under descriptor pressure (EMFILE/ENFILE from any open), `retry_fds` evicts and
//! retries once.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dafs_proto::{FileHandle, Status};
use rustix::fs::OFlags;
use rustix::io::Errno;

use tracing::{info, warn};

use crate::fd_budget::FdBudget;
use crate::fsops;
use crate::handle_codec::{Body, Decoded, HandleId, Sealer, KERNEL_BYTES_MAX};
use crate::kernel_fh::{self, KernelHandle, PersistentExport};
use crate::stats::ServerStats;
use crate::{state_dir, ServerConfig, StartError};

/// Smallest descriptor cache (`handles_max`). One request may need several handles to
/// stay resolvable at once (a rename's two directories, a link's file and directory),
/// so the cache must not evict them under it; `scripts/test-fuse.sh` runs at this size
/// to keep the STALE-and-retry path busy.
pub const HANDLES_MIN: usize = 16;
/// Under EMFILE/ENFILE, evict this fraction of the cache (1/8) ...
const RELIEF_EVICT_DIVISOR: usize = 8;
/// ... but at least this many entries.
const RELIEF_EVICT_MIN: usize = 16;
/// How often the sweep looks for cached descriptors of deleted objects ...
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// ... and how many entries it checks per pass (bounds its cost on a large cache; a
/// full round takes `len / SWEEP_BATCH` passes).
const SWEEP_BATCH: usize = 4096;
/// The sweep thread's sleep between shutdown checks.
const SWEEP_TICK: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct Entry {
    fh: FileHandle,
    fd: Arc<OwnedFd>,
    inode: InodeKey,
    tick: u64,
}

/// (device, inode, export): one cache entry per object and export.
type InodeKey = (u64, u64, u32);

#[derive(Debug, Default)]
struct Cache {
    entries: HashMap<HandleId, Entry>,
    /// Entries by last use (tick), oldest first.
    lru: BTreeMap<u64, HandleId>,
    by_inode: HashMap<InodeKey, HandleId>,
    clock: u64,
    next_serial: u64,
    /// Where the sweep goes on (a tick; entries used since have moved past it).
    sweep_from: u64,
}

impl Cache {
    fn invariants(&self) {
        debug_assert_eq!(self.entries.len(), self.lru.len());
        debug_assert!(self.by_inode.len() <= self.entries.len());
    }

    fn touch(&mut self, id: &HandleId) -> Option<&Entry> {
        self.clock += 1;
        let now = self.clock;
        let e = self.entries.get_mut(id)?;
        self.lru.remove(&e.tick);
        e.tick = now;
        self.lru.insert(now, *id);
        Some(e)
    }

    fn add(&mut self, id: HandleId, fh: FileHandle, fd: Arc<OwnedFd>, inode: InodeKey) {
        self.clock += 1;
        let tick = self.clock;
        self.lru.insert(tick, id);
        self.by_inode.insert(inode, id);
        let old = self.entries.insert(id, Entry { fh, fd, inode, tick });
        assert!(old.is_none(), "add() only for ids not cached");
        self.invariants();
    }

    fn remove(&mut self, id: &HandleId) -> Option<Entry> {
        let e = self.entries.remove(id)?;
        self.lru.remove(&e.tick);
        if self.by_inode.get(&e.inode) == Some(id) {
            self.by_inode.remove(&e.inode);
        }
        self.invariants();
        Some(e)
    }

    /// Evict the `n` least recently used entries; returns how many went.
    fn evict(&mut self, n: usize) -> usize {
        let victims: Vec<HandleId> = self.lru.values().take(n).copied().collect();
        for id in &victims {
            self.remove(id);
        }
        victims.len()
    }
}

#[derive(Debug)]
pub struct HandleTable {
    sealer: Sealer,
    /// Per export: how its handles are re-opened, if they persist.
    persistent: Vec<Option<PersistentExport>>,
    inner: Mutex<Cache>,
    max: usize,
    stats: Arc<ServerStats>,
}

/// A resolved handle: the object's `O_PATH` descriptor and its export.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub fd: Arc<OwnedFd>,
    pub export: u32,
    /// The object's device and inode number (from the fstat that checked it is alive).
    pub dev: u64,
    pub ino: u64,
}

impl HandleTable {
    pub fn new(
        sealer: Sealer,
        persistent: Vec<Option<PersistentExport>>,
        max: usize,
        stats: Arc<ServerStats>,
    ) -> Self {
        assert!(max >= HANDLES_MIN);
        HandleTable { sealer, persistent, inner: Mutex::new(Cache::default()), max, stats }
    }

    /// The table of a server configured by `cfg`: its secret (kept in `state_dir`, else
    /// random for this boot) and, per export, whether its handles are kernel handles
    /// (they persist across restarts when the secret does).
    pub fn for_server(
        cfg: &ServerConfig,
        roots: &[OwnedFd],
        instance: u64,
        budget: &FdBudget,
        stats: &Arc<ServerStats>,
    ) -> Result<HandleTable, StartError> {
        let key = match &cfg.state_dir {
            Some(d) => state_dir::handle_key(d),
            None => state_dir::random_key(),
        }
        .map_err(|source| StartError::StateDir {
            path: cfg.state_dir.clone().unwrap_or_default(),
            source,
        })?;
        if cfg.state_dir.is_none() {
            info!("no state_dir: file handles are valid until dafsd restarts (random secret)");
        }
        let sealer = Sealer::new(&key, &cfg.exports, instance);
        let persistent = persistent_exports(cfg, roots);
        Ok(HandleTable::new(sealer, persistent, budget.handles_max, stats.clone()))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Descriptors cached now.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().entries.len()
    }

    /// The cache's bound (`handles_max`).
    pub fn max(&self) -> usize {
        self.max
    }

    /// Do handles of `export` persist (kernel handles)?
    pub fn persistent(&self, export: u32) -> bool {
        self.persistent.get(export as usize).is_some_and(|p| p.is_some())
    }

    /// Check a handle's MAC and return its export, without resolving it: BADHANDLE (and
    /// a counted refusal) for one this server did not issue.
    pub fn export_of(&self, fh: &FileHandle) -> Result<u32, Status> {
        self.unseal(fh).map(|d| d.export)
    }

    fn unseal(&self, fh: &FileHandle) -> Result<Decoded, Status> {
        self.sealer.unseal(fh).inspect_err(|&e| {
            if e == Status::BadHandle {
                self.stats.handle_refusals.fetch_add(1, Relaxed);
            }
        })
    }

    /// Enter an object (given as an `O_PATH` descriptor) and return its handle. An object
    /// already cached keeps its handle.
    pub fn insert(
        &self,
        fd: OwnedFd,
        export: u32,
    ) -> Result<(FileHandle, rustix::fs::Stat), Status> {
        let s = fsops::fstat(fd.as_fd())?;
        let kernel = self.kernel_body(fd.as_fd(), &s, export);
        let fh = self.enter(fd, &s, export, kernel);
        Ok((fh, s))
    }

    /// The kernel handle body for an object of a persistent export, if it has one that
    /// fits and is on the export root's mount (a submount's handles name another file
    /// system than the one they would be re-opened on).
    fn kernel_body(&self, fd: BorrowedFd, s: &rustix::fs::Stat, export: u32) -> Option<Body> {
        let p = self.persistent.get(export as usize)?.as_ref()?;
        if s.st_dev != p.dev {
            return None;
        }
        let h = kernel_fh::name_of(fd).ok()?;
        let handle_type = u8::try_from(h.handle_type).ok()?;
        (h.mount_id == p.mount_id && h.bytes.len() <= KERNEL_BYTES_MAX)
            .then_some(Body::Kernel { handle_type, bytes: h.bytes })
    }

    fn enter(
        &self,
        fd: OwnedFd,
        s: &rustix::fs::Stat,
        export: u32,
        kernel: Option<Body>,
    ) -> FileHandle {
        let inode = (s.st_dev, s.st_ino, export);
        let mut g = self.inner.lock().unwrap();
        if let Some(id) = g.by_inode.get(&inode).copied() {
            let e = &g.entries[&id];
            // Same device and inode number: the same object, unless the one cached was
            // deleted and its number reused. Then its handle must stay STALE: drop the
            // entry rather than re-point it.
            let alive = fsops::fstat(e.fd.as_fd())
                .map(|old| old.st_nlink > 0 && old.st_ino == s.st_ino)
                .unwrap_or(false);
            if alive {
                return g.touch(&id).expect("entry present").fh;
            }
            g.remove(&id);
        }
        let body = kernel.unwrap_or_else(|| {
            g.next_serial += 1;
            Body::Volatile { serial: g.next_serial }
        });
        let fh = self.sealer.seal(export, &body);
        let id: HandleId = fh.0[..crate::handle_codec::ID_BYTES].try_into().unwrap();
        if let Some(e) = g.touch(&id) {
            return e.fh; // a kernel handle cached under another inode key (re-opened)
        }
        self.make_room(&mut g);
        g.add(id, fh, Arc::new(fd), inode);
        fh
    }

    fn make_room(&self, g: &mut Cache) {
        if g.entries.len() >= self.max {
            let n = g.evict(g.entries.len() + 1 - self.max);
            self.stats.descriptors_evicted.fetch_add(n as u64, Relaxed);
        }
    }

    /// Resolve a handle. BADHANDLE for one this server never made (or made for another
    /// export's objects under another secret); STALE for one whose object is gone, or a
    /// volatile handle evicted or of an earlier boot.
    pub fn resolve(&self, fh: &FileHandle) -> Result<Resolved, Status> {
        let d = self.unseal(fh)?;
        let cached = self.inner.lock().unwrap().touch(&d.id).map(|e| e.fd.clone());
        let fd = match (cached, &d.body) {
            (Some(fd), _) => fd,
            (None, Body::Kernel { handle_type, bytes }) => {
                self.reopen(&d, *handle_type, bytes, fh)?
            }
            (None, Body::Volatile { .. }) => return Err(Status::Stale),
        };
        // Deleted since it was entered? (An open file stays usable through its open id.)
        // Its descriptor goes now, so the file's space comes back.
        let s = fsops::fstat(fd.as_fd())?;
        if s.st_nlink == 0 {
            self.drop_entry(&d.id, &fd);
            return Err(Status::Stale);
        }
        Ok(Resolved { fd, export: d.export, dev: s.st_dev, ino: s.st_ino })
    }

    /// A persistent handle not cached (evicted, or from before a restart): open it
    /// again from the kernel handle and cache it.
    fn reopen(
        &self,
        d: &Decoded,
        handle_type: u8,
        bytes: &[u8],
        fh: &FileHandle,
    ) -> Result<Arc<OwnedFd>, Status> {
        // An export that no longer persists (restarted without the capability): STALE.
        let p = self.persistent[d.export as usize].as_ref().ok_or(Status::Stale)?;
        let h = KernelHandle {
            handle_type: handle_type as i32,
            bytes: bytes.to_vec(),
            mount_id: p.mount_id,
        };
        let fd = self.retry_fds(|| {
            let r = kernel_fh::with_root_fsuid(|| {
                kernel_fh::open(p.mount_fd.as_fd(), &h, OFlags::PATH)
            });
            r.map_err(|e| match e {
                // PERM: not permitted after all (dafsd lost the capability): the client
                // looks the path up again.
                Errno::STALE | Errno::NOENT | Errno::PERM => Status::Stale,
                e => fsops::st(e),
            })
        })?;
        let s = fsops::fstat(fd.as_fd())?;
        if s.st_dev != p.dev {
            return Err(Status::Stale);
        }
        self.stats.handles_reopened.fetch_add(1, Relaxed);
        let mut g = self.inner.lock().unwrap();
        if let Some(e) = g.touch(&d.id) {
            return Ok(e.fd.clone()); // another request re-opened it meanwhile
        }
        self.make_room(&mut g);
        let fd = Arc::new(fd);
        g.add(d.id, *fh, fd.clone(), (s.st_dev, s.st_ino, d.export));
        Ok(fd)
    }

    /// Drop the entry `id` if it still holds `fd`.
    fn drop_entry(&self, id: &HandleId, fd: &Arc<OwnedFd>) -> bool {
        let mut g = self.inner.lock().unwrap();
        if g.entries.get(id).is_some_and(|e| Arc::ptr_eq(&e.fd, fd)) {
            g.remove(id);
            return true;
        }
        false
    }

    /// Forget the entry for an object (after it was removed), if present.
    pub fn forget(&self, dev: u64, ino: u64, export: u32) {
        let mut g = self.inner.lock().unwrap();
        if let Some(id) = g.by_inode.get(&(dev, ino, export)).copied() {
            g.remove(&id);
        }
    }

    /// Run an open (`f`); if it fails for want of descriptors (EMFILE/ENFILE answer
    /// LIMIT), evict part of the cache and run it once more.
    pub fn retry_fds<T>(&self, mut f: impl FnMut() -> Result<T, Status>) -> Result<T, Status> {
        match f() {
            Err(Status::Limit) if self.relieve_pressure() > 0 => f(),
            r => r,
        }
    }

    /// Evict an eighth of the cache (at least `RELIEF_EVICT_MIN` entries); returns how
    /// many went.
    pub fn relieve_pressure(&self) -> usize {
        let mut g = self.inner.lock().unwrap();
        let n = (g.entries.len() / RELIEF_EVICT_DIVISOR).max(RELIEF_EVICT_MIN);
        let n = g.evict(n);
        self.stats.descriptors_evicted.fetch_add(n as u64, Relaxed);
        n
    }

    /// One sweep pass: close cached descriptors of deleted objects (link count 0), up to
    /// `SWEEP_BATCH` entries from where the last pass stopped. Returns how many went.
    pub fn sweep_unlinked(&self) -> usize {
        let batch: Vec<(HandleId, Arc<OwnedFd>)> = {
            let mut g = self.inner.lock().unwrap();
            let from = g.sweep_from;
            let ids: Vec<(u64, HandleId)> =
                g.lru.range(from..).take(SWEEP_BATCH).map(|(&t, &id)| (t, id)).collect();
            g.sweep_from = match ids.last() {
                Some(&(t, _)) if ids.len() == SWEEP_BATCH => t + 1,
                _ => 0, // at the end: the next pass starts over
            };
            ids.iter().map(|(_, id)| (*id, g.entries[id].fd.clone())).collect()
        };
        // fstat outside the lock: requests go on meanwhile.
        let mut dropped = 0;
        for (id, fd) in batch {
            let gone = fsops::fstat(fd.as_fd()).map(|s| s.st_nlink == 0).unwrap_or(true);
            if gone && self.drop_entry(&id, &fd) {
                dropped += 1;
            }
        }
        self.stats.descriptors_unlinked.fetch_add(dropped as u64, Relaxed);
        dropped
    }
}

/// Per export, how its kernel handles are re-opened — None where handles are volatile:
/// `volatile_handles`, no CAP_DAC_READ_SEARCH (said once), or no usable kernel handles.
/// Kernel handles are used even without `state_dir`: they survive eviction.
fn persistent_exports(cfg: &ServerConfig, roots: &[OwnedFd]) -> Vec<Option<PersistentExport>> {
    if cfg.volatile_handles {
        info!("volatile_handles: file handles are valid while cached, until dafsd restarts");
        return roots.iter().map(|_| None).collect();
    }
    let mut told = false;
    let probe = |(e, root): (&crate::Export, &OwnedFd)| match kernel_fh::probe(root.as_fd()) {
        Ok(p) => Some(p),
        Err(Errno::PERM) => {
            if !std::mem::replace(&mut told, true) {
                warn!("file handles are volatile (valid while cached, until a restart): dafsd lacks CAP_DAC_READ_SEARCH (open_by_handle_at); clients look paths up again on STALE");
            }
            None
        }
        Err(err) => {
            warn!(export = %e.name, "file handles of this export are volatile: its file system offers no usable handles ({err})");
            None
        }
    };
    cfg.exports.iter().zip(roots).map(probe).collect()
}

/// The sweep thread: `sweep_unlinked` every `SWEEP_INTERVAL` until `shutdown`.
pub fn sweep_loop(table: &HandleTable, shutdown: &AtomicBool) {
    let mut since = Duration::ZERO;
    while !shutdown.load(Relaxed) {
        std::thread::sleep(SWEEP_TICK);
        since += SWEEP_TICK;
        if since >= SWEEP_INTERVAL {
            since = Duration::ZERO;
            table.sweep_unlinked();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Export;

    fn table(dir: &std::path::Path, max: usize) -> HandleTable {
        let sealer = Sealer::new(b"k", &[Export::new("e", dir, false)], 1);
        HandleTable::new(sealer, vec![None], max, Arc::default())
    }

    fn path_fd(p: &std::path::Path) -> OwnedFd {
        rustix::fs::open(p, OFlags::PATH | OFlags::CLOEXEC, rustix::fs::Mode::empty()).unwrap()
    }

    #[test]
    fn the_cache_is_bounded_and_evicted_volatile_handles_are_stale() {
        let d = tempfile::tempdir().unwrap();
        let t = table(d.path(), HANDLES_MIN);
        let mut fhs = Vec::new();
        for i in 0..HANDLES_MIN * 2 {
            let p = d.path().join(format!("f{i}"));
            std::fs::write(&p, b"x").unwrap();
            fhs.push(t.insert(path_fd(&p), 0).unwrap().0);
        }
        assert_eq!(t.len(), HANDLES_MIN);
        assert_eq!(t.resolve(&fhs[0]).unwrap_err(), Status::Stale);
        assert!(t.resolve(&fhs[HANDLES_MIN * 2 - 1]).is_ok());
        assert_eq!(t.stats.descriptors_evicted.load(Relaxed), HANDLES_MIN as u64);
    }

    #[test]
    fn evicted_kernel_handles_are_reopened() {
        let d = tempfile::tempdir().unwrap();
        let root = path_fd(d.path());
        let Ok(p) = kernel_fh::probe(root.as_fd()) else {
            return; // not permitted (not root) or no handles on this file system
        };
        let sealer = Sealer::new(b"k", &[Export::new("e", d.path(), false)], 1);
        let t = HandleTable::new(sealer, vec![Some(p)], HANDLES_MIN, Arc::default());
        let mut fhs = Vec::new();
        for i in 0..HANDLES_MIN * 2 {
            let p = d.path().join(format!("f{i}"));
            std::fs::write(&p, format!("{i}")).unwrap();
            fhs.push(t.insert(path_fd(&p), 0).unwrap().0);
        }
        let r = t.resolve(&fhs[0]).expect("an evicted kernel handle re-opens");
        let want = std::fs::metadata(d.path().join("f0")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(fsops::fstat(r.fd.as_fd()).unwrap().st_ino, want.ino());
        assert_eq!(t.stats.handles_reopened.load(Relaxed), 1);
        std::fs::remove_file(d.path().join("f1")).unwrap();
        assert_eq!(t.resolve(&fhs[1]).unwrap_err(), Status::Stale, "deleted: STALE");
    }

    /// A worker running with a client's file-system ids (identity asserted or squash)
    /// has no CAP_DAC_READ_SEARCH: an evicted kernel handle is still re-opened there
    /// (as dafsd's own fsuid, restored after), as a cached one resolves.
    #[test]
    fn a_reopen_under_a_client_identity_works() {
        let d = tempfile::tempdir().unwrap();
        let Ok(p) = kernel_fh::probe(path_fd(d.path()).as_fd()) else {
            return; // not permitted (not root) or no handles on this file system
        };
        let sealer = Sealer::new(b"k", &[Export::new("e", d.path(), false)], 1);
        let t = HandleTable::new(sealer, vec![Some(p)], HANDLES_MIN, Arc::default());
        let fhs: Vec<FileHandle> = (0..HANDLES_MIN * 2)
            .map(|i| {
                let p = d.path().join(format!("f{i}"));
                std::fs::write(&p, b"x").unwrap();
                t.insert(path_fd(&p), 0).unwrap().0
            })
            .collect();
        let (r, fsuid_after) = std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setfsuid(2) changes only this thread's file-system uid; the
                // thread ends right after. setfsuid(-1) fails and returns the current one.
                unsafe { libc::setfsuid(65534) };
                let r = t.resolve(&fhs[0]).map(drop);
                (r, unsafe { libc::setfsuid(u32::MAX) })
            })
            .join()
            .unwrap()
        });
        assert_eq!(r, Ok(()));
        assert_eq!(fsuid_after, 65534, "the client's fsuid is restored");
        assert_eq!(t.stats.handles_reopened.load(Relaxed), 1);
    }

    #[test]
    fn deleted_files_leave_the_cache_on_sweep() {
        let d = tempfile::tempdir().unwrap();
        let t = table(d.path(), HANDLES_MIN);
        let p = d.path().join("big");
        std::fs::write(&p, b"x").unwrap();
        let (fh, _) = t.insert(path_fd(&p), 0).unwrap();
        assert_eq!(t.sweep_unlinked(), 0);
        std::fs::remove_file(&p).unwrap();
        assert_eq!(t.sweep_unlinked(), 1);
        assert!(t.is_empty());
        assert_eq!(t.resolve(&fh).unwrap_err(), Status::Stale);
    }

    #[test]
    fn pressure_relief_evicts_and_retries_once() {
        let d = tempfile::tempdir().unwrap();
        let t = table(d.path(), 64);
        for i in 0..40 {
            let p = d.path().join(format!("f{i}"));
            std::fs::write(&p, b"x").unwrap();
            t.insert(path_fd(&p), 0).unwrap();
        }
        let mut calls = 0;
        let r = t.retry_fds(|| {
            calls += 1;
            if calls == 1 {
                Err(Status::Limit)
            } else {
                Ok(())
            }
        });
        assert_eq!((r, calls, t.len()), (Ok(()), 2, 40 - RELIEF_EVICT_MIN));
    }
}
