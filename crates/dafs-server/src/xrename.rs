//! Cross-node rename (CLUSTER_RENAME): a regular file moves to the node its new name
//! hashes to, in two phases, so that a crash of either node leaves exactly one of the
//! two names once the nodes are back.
//!
//! The source node (the one holding the old name) coordinates, as a DAFS client of
//! the target node:
//!
//! 1. **Intent**: a record `{old name, its inode, new name, target, phase: copying}` is
//!    written to `STATE_DIR/xrename/ID.json` and made durable (file and directory
//!    fsync) before anything else happens.
//! 2. **Copy**: the data goes to a staging file `/.dafs-xrename/KEY-ID` on the target
//!    (created exclusive, mode, times, then fsync). Staging names are node-local: the
//!    node check lets them through and cluster clients never list them. If the old
//!    file changed meanwhile (size, mtime or ctime) the move is undone: `BUSY`.
//! 3. **Commit point**: the record's phase becomes `committing` (durable). From here
//!    the move only goes forward.
//! 4. **Link**: the target renames the staging file to the new name (rename(2) on one
//!    node: atomic, replacing an existing file as rename does).
//! 5. **Unlink**: the source removes the old name (if it still names the same inode),
//!    fsyncs its directory and deletes the record.
//!
//! Recovery (a thread, at start and every [`RECOVERY_INTERVAL`] while records remain):
//! a `copying` record is rolled back (the staging file is removed on the target; the
//! old name never left); a `committing` record is rolled forward (rename the staging
//! file if it is still there, then unlink the old name). A target that answers a
//! definite error for the rename (not a directory any more, ...) rolls back; a
//! target that cannot be reached keeps the record for the next round. Between a crash
//! and its recovery the old name is still visible (and, after step 4, the new one
//! too); never neither.
//!
//! The move holds a worker for its duration (the copy is a blocking DAFS client), so
//! at most half the workers ([`Mover::in_flight_max`]) move files at once; beyond that
//! the answer is `BUSY`. Test hook: `DAFSD_XRENAME_PAUSE=PHASE:DIR` (PHASE one of
//! `intent`, `copied`, `committing`, `renamed`) makes a move create `DIR/paused-PHASE`
//! when it reaches that point and wait until `DIR/go` exists.

use std::collections::HashSet;
use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use dafs_client::{Client, ClientConfig, Error as ClientError, OpenOptions};
use dafs_cluster::ClusterPath;
use dafs_proto::types::FileType;
use dafs_proto::{FileHandle, Reply, Status};
use rustix::fs::{self as rfs, AtFlags, OFlags};
use serde_json::{json, Value};

use crate::fsops::{self, st};
use crate::Shared;

/// Staging directory for incoming files, at the root of every node's export.
pub const STAGING_DIR: &str = dafs_cluster::XRENAME_STAGING_DIR;
/// Intent records, beneath the state directory.
const INTENT_DIR: &str = "xrename";
/// Bytes per read of the old file and write to the target.
const COPY_CHUNK_BYTES: usize = 256 * 1024;
/// How often unresolved records are retried.
pub const RECOVERY_INTERVAL: Duration = Duration::from_millis(500);
/// Most intent records read per recovery round (a bounded directory walk; the rest
/// wait for the next round).
const RECORDS_PER_ROUND_MAX: usize = 256;
/// Longest intent record accepted (ours are a few hundred bytes).
const RECORD_BYTES_MAX: u64 = 64 * 1024;
/// Test hook (see the module documentation).
pub const PAUSE_ENV: &str = "DAFSD_XRENAME_PAUSE";
const PAUSE_POLL: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Copying,
    Committing,
}

#[derive(Debug, Clone)]
struct Intent {
    id: u64,
    export: u32,
    /// The old name's cluster path ("/a/b").
    src: String,
    dev: u64,
    ino: u64,
    /// The new name's cluster path.
    dst: String,
    target_id: String,
    target_addr: String,
    /// The staging file's cluster path on the target.
    staging: String,
    phase: Phase,
}

impl Intent {
    fn to_json(&self) -> Value {
        let phase = match self.phase {
            Phase::Copying => "copying",
            Phase::Committing => "committing",
        };
        json!({"id": self.id, "export": self.export, "src": self.src, "dev": self.dev,
               "ino": self.ino, "dst": self.dst, "target_id": self.target_id,
               "target_addr": self.target_addr, "staging": self.staging, "phase": phase})
    }

    fn from_json(v: &Value) -> Option<Intent> {
        let s = |k: &str| v.get(k)?.as_str().map(str::to_string);
        let n = |k: &str| v.get(k)?.as_u64();
        let phase = match v.get("phase")?.as_str()? {
            "copying" => Phase::Copying,
            "committing" => Phase::Committing,
            _ => return None,
        };
        Some(Intent {
            id: n("id")?,
            export: u32::try_from(n("export")?).ok()?,
            src: s("src")?,
            dev: n("dev")?,
            ino: n("ino")?,
            dst: s("dst")?,
            target_id: s("target_id")?,
            target_addr: s("target_addr")?,
            staging: s("staging")?,
            phase,
        })
    }
}

/// The node's cross-node renames: records, moves in flight, the client settings used
/// to reach targets.
pub struct Mover {
    dir: PathBuf,
    active: Mutex<HashSet<u64>>,
    in_flight_max: usize,
    next_id: AtomicU64,
    client_cfg: ClientConfig,
    pause: Option<(String, PathBuf)>,
}

/// A move's claim on its record: released when dropped.
struct Claim<'a> {
    m: &'a Mover,
    id: u64,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.m.active.lock().expect("xrename lock").remove(&self.id);
    }
}

/// Why a step failed: a definite answer (nothing changed there), or the other node
/// could not be asked (the outcome of the last request is unknown).
enum Fail {
    Definite(Status),
    Unreachable(String),
}

impl Fail {
    fn into_message(self) -> String {
        match self {
            Fail::Unreachable(e) => e,
            Fail::Definite(s) => s.to_string(),
        }
    }
}

fn fail_of(e: ClientError) -> Fail {
    match e {
        ClientError::Status(s) => Fail::Definite(s),
        e => Fail::Unreachable(e.to_string()),
    }
}

impl Mover {
    /// The mover of a cluster node with state directory `state_dir`.
    pub fn new(
        state_dir: &Path,
        me: &str,
        security: crate::forward::PeerSecurity,
        workers: usize,
    ) -> std::io::Result<Mover> {
        let dir = state_dir.join(INTENT_DIR);
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        let mut seed = [0u8; 8];
        getrandom::getrandom(&mut seed).map_err(|e| std::io::Error::other(e.to_string()))?;
        let pause = std::env::var(PAUSE_ENV).ok().and_then(|v| {
            let (phase, d) = v.split_once(':')?;
            Some((phase.to_string(), PathBuf::from(d)))
        });
        let client_cfg = ClientConfig {
            client_id: format!("dafsd-xrename:{me}"),
            // As forwarding sessions: the cluster's secret, TLS when the node has it.
            secret: security.secret,
            tls: security.tls,
            connect_timeout: Duration::from_secs(2),
            request_deadline: Duration::from_secs(10),
            reconnect: false,
            ..ClientConfig::default()
        };
        Ok(Mover {
            dir,
            active: Mutex::new(HashSet::new()),
            in_flight_max: (workers / 2).max(1),
            next_id: AtomicU64::new(u64::from_le_bytes(seed) >> 1),
            client_cfg,
            pause,
        })
    }

    /// Moves that may run at once (each holds a worker).
    pub fn in_flight_max(&self) -> usize {
        self.in_flight_max
    }

    fn claim(&self, id: u64, limit: bool) -> Option<Claim<'_>> {
        let mut a = self.active.lock().expect("xrename lock");
        if (limit && a.len() >= self.in_flight_max) || !a.insert(id) {
            return None;
        }
        Some(Claim { m: self, id })
    }

    fn record_path(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id:016x}.json"))
    }

    /// Write `i` durably: a temporary file, fsync, rename over the record, fsync the
    /// directory (a crash leaves the old record or the new one, never a torn one).
    fn save(&self, i: &Intent) -> std::io::Result<()> {
        let tmp = self.dir.join(format!("{:016x}.tmp", i.id));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(i.to_json().to_string().as_bytes())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, self.record_path(i.id))?;
        std::fs::File::open(&self.dir)?.sync_all()
    }

    fn drop_record(&self, id: u64) -> std::io::Result<()> {
        match std::fs::remove_file(self.record_path(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::File::open(&self.dir)?.sync_all()
    }

    fn pause_at(&self, phase: &str) {
        let Some((p, dir)) = &self.pause else { return };
        if p != phase {
            return;
        }
        let _ = std::fs::write(dir.join(format!("paused-{phase}")), b"");
        tracing::warn!("cross-node rename paused at {phase} ({PAUSE_ENV})");
        while !dir.join("go").exists() {
            std::thread::sleep(PAUSE_POLL);
        }
    }

    fn connect(&self, addr: &str) -> Result<Client, Fail> {
        Client::connect(addr, self.client_cfg.clone()).map_err(|e| Fail::Unreachable(e.to_string()))
    }

    /// Copy the open old file to the staging file on the target, with its mode and
    /// times, and fsync it there. The old file must not change meanwhile.
    fn copy(&self, c: &mut Client, i: &Intent, src: BorrowedFd) -> Result<(), Fail> {
        let before = fsops::fstat(src).map_err(Fail::Definite)?;
        if dev_ino(&before) != (i.dev, i.ino) {
            return Err(Fail::Definite(Status::Busy));
        }
        // The new name's directory must exist on the target, and the new name must not
        // be a directory: found now, not at the commit point.
        let dst =
            ClusterPath::new(i.dst.as_bytes()).map_err(|_| Fail::Definite(Status::BadName))?;
        if let Some(parent) = dst.parent().filter(|p| !p.is_root()) {
            let a = c.lstat(&parent.to_string()).map_err(fail_of)?;
            if a.ftype != FileType::Directory {
                return Err(Fail::Definite(Status::NotDir));
            }
        }
        match c.lstat(&i.dst) {
            Ok(a) if a.ftype == FileType::Directory => return Err(Fail::Definite(Status::IsDir)),
            Ok(_) | Err(ClientError::Status(Status::NoEnt)) => {}
            Err(e) => return Err(fail_of(e)),
        }
        match c.mkdir(&format!("/{STAGING_DIR}"), 0o700) {
            Ok(_) | Err(ClientError::Status(Status::Exist)) => {}
            Err(e) => return Err(fail_of(e)),
        }
        let opts = OpenOptions::write_only().create(true).exclusive(true).mode(0o600);
        let f = c.open(&i.staging, opts).map_err(fail_of)?;
        let mut buf = vec![0u8; COPY_CHUNK_BYTES];
        let mut off = 0u64;
        loop {
            let n = fsops::pread_full(src, &mut buf, off)
                .map_err(|e| Fail::Definite(fsops::io_st(e)))?;
            if n == 0 {
                break;
            }
            let mut done = 0;
            while done < n {
                let w = c.pwrite(&f, &buf[done..n], off + done as u64).map_err(fail_of)?;
                if w == 0 {
                    return Err(Fail::Definite(Status::Io));
                }
                done += w;
            }
            off += n as u64;
        }
        c.chmod(&i.staging, before.st_mode & 0o7777).map_err(fail_of)?;
        let atime = fsops::ts_ns(before.st_atime as i64, before.st_atime_nsec as i64);
        let mtime = fsops::ts_ns(before.st_mtime as i64, before.st_mtime_nsec as i64);
        c.set_times(&i.staging, atime, mtime).map_err(fail_of)?;
        c.fsync(&f).map_err(fail_of)?;
        c.close(f).map_err(fail_of)?;
        let after = fsops::fstat(src).map_err(Fail::Definite)?;
        let same =
            |s: &rfs::Stat| (s.st_size, s.st_mtime, s.st_mtime_nsec, s.st_ctime, s.st_ctime_nsec);
        if same(&before) != same(&after) || after.st_size as u64 != off {
            return Err(Fail::Definite(Status::Busy)); // written to while it was copied
        }
        Ok(())
    }

    /// Undo a move that has not reached its commit point: remove the staging file on
    /// the target, then the record. A target out of reach keeps the record.
    fn roll_back(&self, i: &Intent) -> Result<(), String> {
        let mut c = self.connect(&i.target_addr).map_err(Fail::into_message)?;
        match c.remove(&i.staging) {
            Ok(()) | Err(ClientError::Status(Status::NoEnt)) => {}
            Err(e) => return Err(e.to_string()),
        }
        self.drop_record(i.id).map_err(|e| e.to_string())
    }

    /// Go forward from the commit point: the target renames the staging file to the
    /// new name (unless it already did), then the old name goes. `Ok(Err(status))`:
    /// the target refused the rename for good, and the move was rolled back.
    fn roll_forward(&self, sh: &Shared, i: &Intent) -> Result<Result<(), Status>, String> {
        let mut c = self.connect(&i.target_addr).map_err(Fail::into_message)?;
        match c.lstat(&i.staging) {
            Ok(_) => match c.rename(&i.staging, &i.dst) {
                Ok(()) => {}
                Err(ClientError::Status(s)) => {
                    tracing::warn!("cross-node rename {} -> {}: target refused: {s}", i.src, i.dst);
                    self.roll_back(i)?;
                    return Ok(Err(s));
                }
                Err(e) => return Err(e.to_string()),
            },
            Err(ClientError::Status(Status::NoEnt)) => {
                // Renamed before a crash; unless the new name is missing too (the
                // staging file was removed by hand): then keep the old name.
                match c.lstat(&i.dst) {
                    Ok(_) => {}
                    Err(ClientError::Status(Status::NoEnt)) => {
                        tracing::warn!(
                            "cross-node rename {} -> {}: staging file and new name both gone; keeping the old name",
                            i.src,
                            i.dst
                        );
                        self.drop_record(i.id).map_err(|e| e.to_string())?;
                        return Ok(Err(Status::Io));
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
            Err(e) => return Err(e.to_string()),
        }
        self.pause_at("renamed");
        unlink_old(sh, i).map_err(|s| format!("removing the old name {}: {s}", i.src))?;
        self.drop_record(i.id).map_err(|e| e.to_string())?;
        Ok(Ok(()))
    }

    /// One recovery round: every record not being moved now is rolled back or forward.
    /// Returns how many remain unresolved.
    pub fn recover(&self, sh: &Shared) -> usize {
        let Ok(rd) = std::fs::read_dir(&self.dir) else { return 0 };
        let mut left = 0;
        for ent in rd.flatten().take(RECORDS_PER_ROUND_MAX) {
            let p = ent.path();
            if p.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Some(i) = read_record(&p) else {
                tracing::error!("{}: unreadable cross-node rename record; left alone", p.display());
                continue;
            };
            let Some(_claim) = self.claim(i.id, false) else { continue };
            let r = match i.phase {
                Phase::Copying => self.roll_back(&i).map(|_| Ok(())),
                Phase::Committing => self.roll_forward(sh, &i),
            };
            match r {
                Ok(_) => tracing::info!("cross-node rename {} -> {}: recovered", i.src, i.dst),
                Err(e) => {
                    left += 1;
                    tracing::debug!("cross-node rename {} -> {}: not yet: {e}", i.src, i.dst);
                }
            }
        }
        left
    }
}

/// A file's identity. `st_dev`/`st_ino` are not u64 on every target.
#[allow(clippy::unnecessary_cast)]
fn dev_ino(s: &rfs::Stat) -> (u64, u64) {
    (s.st_dev as u64, s.st_ino as u64)
}

fn read_record(p: &Path) -> Option<Intent> {
    if std::fs::metadata(p).ok()?.len() > RECORD_BYTES_MAX {
        return None;
    }
    let v: Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
    Intent::from_json(&v)
}

/// Remove the old name if it still names the moved inode, and make that durable.
fn unlink_old(sh: &Shared, i: &Intent) -> Result<(), Status> {
    let root = sh.roots.get(i.export as usize).ok_or(Status::Stale)?;
    let cp = ClusterPath::new(i.src.as_bytes()).map_err(|_| Status::BadName)?;
    let parent = cp.parent().unwrap_or_else(ClusterPath::root);
    let rel = parent.to_string();
    let rel = rel.trim_start_matches('/');
    let dir_path = if rel.is_empty() {
        fsops::lookup(root.as_fd(), b".", true)
    } else {
        fsops::lookup(root.as_fd(), rel.as_bytes(), false)
    };
    let dir = match dir_path {
        Ok(d) => fsops::open_dir(d.as_fd())?,
        Err(Status::NoEnt) => return Ok(()),
        Err(s) => return Err(s),
    };
    let name = CString::new(cp.file_name()).map_err(|_| Status::BadName)?;
    match rfs::statat(&dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(s) if dev_ino(&s) == (i.dev, i.ino) => {
            rfs::unlinkat(&dir, name.as_c_str(), AtFlags::empty()).map_err(st)?;
        }
        Ok(_) | Err(rustix::io::Errno::NOENT) => {} // gone already, or another file now
        Err(e) => return Err(st(e)),
    }
    rfs::fsync(&dir).map_err(st)
}

/// CLUSTER_RENAME: move the regular file `from_name` in `from_dir` to `to_path`, which
/// another node manages (see the module documentation).
pub(crate) fn cluster_rename(
    sh: &Shared,
    from_dir: &FileHandle,
    from_name: &[u8],
    to_path: &[u8],
) -> Result<Reply<'static>, Status> {
    let node = sh.cfg.cluster.as_ref().ok_or(Status::NotSupp)?;
    // Without a state directory there is nowhere durable for the intent: the caller
    // copies and removes, as across file systems.
    let m = sh.xrename.as_ref().ok_or(Status::XDev)?;
    let map = node.map().ok_or(Status::Delay)?;
    let d = sh.handles.resolve(from_dir)?;
    if sh.cfg.exports[d.export as usize].read_only {
        return Err(Status::RoFs);
    }
    let root = sh.roots[d.export as usize].as_fd();
    let src = crate::cluster::cluster_path(root, d.fd.as_fd(), from_name)?;
    let to = std::str::from_utf8(to_path).map_err(|_| Status::BadName)?;
    let dst = ClusterPath::new(format!("/{to}")).map_err(|_| Status::BadName)?;
    if is_staging(&dst) || is_staging(&src) || dst.is_root() {
        return Err(Status::Inval);
    }
    let target = map.manager(&dst).clone();
    if target.id == *node.me() {
        // The client's map is older than ours: to it, the new name is ours.
        return Err(Status::WrongNode);
    }
    let src_str = String::from_utf8(src.as_bytes().to_vec()).map_err(|_| Status::BadName)?;
    let file = fsops::open_in(d.fd.as_fd(), from_name, OFlags::RDONLY | OFlags::NOFOLLOW, 0)
        .map_err(|s| if s == Status::Loop { Status::Inval } else { s })?;
    let stat = fsops::fstat(file.as_fd())?;
    match FileType::from_mode(stat.st_mode) {
        FileType::Regular => {}
        FileType::Directory => return Err(Status::IsDir),
        _ => return Err(Status::Inval),
    }
    let id = m.next_id.fetch_add(1, Relaxed);
    let Some(_claim) = m.claim(id, true) else { return Err(Status::Busy) };
    let mut i = Intent {
        id,
        export: d.export,
        src: src_str,
        dev: dev_ino(&stat).0,
        ino: dev_ino(&stat).1,
        dst: dst.to_string(),
        target_id: target.id.as_str().to_string(),
        target_addr: target.addr.clone(),
        staging: format!(
            "/{STAGING_DIR}/{:016x}-{id:016x}",
            dafs_cluster::hash::key(node.me().as_str().as_bytes())
        ),
        phase: Phase::Copying,
    };
    m.save(&i).map_err(|e| {
        tracing::error!("cross-node rename: cannot write its record: {e}");
        fsops::io_st(e)
    })?;
    m.pause_at("intent");
    let copied = m.connect(&i.target_addr).and_then(|mut c| m.copy(&mut c, &i, file.as_fd()));
    drop(file);
    if let Err(f) = copied {
        let status = match f {
            Fail::Definite(s) => s,
            Fail::Unreachable(e) => {
                tracing::warn!(
                    "cross-node rename {} -> {}: target {}: {e}",
                    i.src,
                    i.dst,
                    i.target_id
                );
                Status::Io
            }
        };
        if let Err(e) = m.roll_back(&i) {
            tracing::warn!("cross-node rename {}: undo waits for the target: {e}", i.src);
        }
        return Err(status);
    }
    m.pause_at("copied");
    i.phase = Phase::Committing;
    if let Err(e) = m.save(&i) {
        tracing::error!("cross-node rename: cannot write its record: {e}");
        let _ = m.roll_back(&i);
        return Err(fsops::io_st(e));
    }
    m.pause_at("committing");
    match m.roll_forward(sh, &i) {
        Ok(r) => r.map(|()| Reply::Empty),
        Err(e) => {
            // Past the commit point: recovery finishes the move once the target answers.
            tracing::warn!("cross-node rename {} -> {}: finishing later: {e}", i.src, i.dst);
            Err(Status::Io)
        }
    }
}

fn is_staging(p: &ClusterPath) -> bool {
    let b = p.as_bytes();
    b.strip_prefix(b"/")
        .and_then(|r| r.strip_prefix(STAGING_DIR.as_bytes()))
        .is_some_and(|r| r.is_empty() || r[0] == b'/')
}

/// Whether a cluster path lies in the staging directory (node-local: not checked
/// against the map).
pub(crate) fn in_staging(p: &ClusterPath) -> bool {
    is_staging(p)
}

/// The recovery thread: a round at start, then one every [`RECOVERY_INTERVAL`].
pub(crate) fn recovery_loop(sh: &Shared) {
    let Some(m) = sh.xrename.as_ref() else { return };
    while !sh.shutdown.load(Relaxed) {
        m.recover(sh);
        std::thread::sleep(RECOVERY_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(phase: Phase) -> Intent {
        Intent {
            id: 7,
            export: 0,
            src: "/a/b".into(),
            dev: 1,
            ino: 2,
            dst: "/c".into(),
            target_id: "n2".into(),
            target_addr: "127.0.0.1:1".into(),
            staging: "/.dafs-xrename/1-7".into(),
            phase,
        }
    }

    #[test]
    fn records_round_trip_and_bad_ones_are_refused() {
        for ph in [Phase::Copying, Phase::Committing] {
            let i = Intent::from_json(&sample(ph).to_json()).unwrap();
            assert_eq!(
                (i.phase, i.src.as_str(), i.ino, i.staging.as_str()),
                (ph, "/a/b", 2, "/.dafs-xrename/1-7")
            );
        }
        let mut v = sample(Phase::Copying).to_json();
        v["phase"] = json!("done");
        assert!(Intent::from_json(&v).is_none());
        v["phase"] = json!("copying");
        v.as_object_mut().unwrap().remove("dst");
        assert!(Intent::from_json(&v).is_none());
    }

    #[test]
    fn records_are_saved_durably_and_dropped() {
        let t = tempfile::tempdir().unwrap();
        let m = Mover::new(t.path(), "n1", Default::default(), 2).unwrap();
        let i = sample(Phase::Committing);
        m.save(&i).unwrap();
        let back = read_record(&m.record_path(7)).unwrap();
        assert_eq!(back.phase, Phase::Committing);
        assert!(m.claim(7, true).is_some());
        let held = m.claim(8, true).unwrap();
        assert!(m.claim(9, true).is_none(), "one move in flight with two workers");
        drop(held);
        m.drop_record(7).unwrap();
        assert!(!m.record_path(7).exists());
        m.drop_record(7).unwrap();
    }

    #[test]
    fn staging_paths_are_recognized() {
        let p = |s: &str| ClusterPath::new(s).unwrap();
        assert!(is_staging(&p("/.dafs-xrename")));
        assert!(is_staging(&p("/.dafs-xrename/x")));
        assert!(!is_staging(&p("/.dafs-xrenamex")));
        assert!(!is_staging(&p("/a/.dafs-xrename/x")));
    }
}
