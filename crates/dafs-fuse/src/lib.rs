//! # dafs-fuse — a DAFS export as a local directory
//!
//! [`DafsFs`] implements the kernel's FUSE protocol (through the pure-Rust `fuser`
//! crate) on top of one [`dafs_client::Client`]. Every kernel request becomes one or
//! a few DAFS requests on handles; nothing is cached in this process except the inode
//! table (FUSE inode ↔ DAFS file handle). The kernel caches attributes and directory
//! entries for `attr_ttl` (see [`MountOptions`]) and file data until the next open.
//!
//! [`mount`] mounts, serves until unmounted (by [`unmount`], `fusermount3 -u`, or a
//! SIGINT/SIGTERM/SIGHUP to this process) and returns.

use std::collections::{HashMap, VecDeque};
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dafs_client::dafs_proto::types::{nattr_flags, setattr_mask};
use dafs_client::dafs_proto::{Attr, FileHandle, FileType as DType, SetAttrs, Status};
use dafs_client::{Client, DirEntryAt, Error, File, OpenOptions};
use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, MountOption, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow,
};

/// The kernel's inode number of the export root.
const ROOT_INO: u64 = fuser::FUSE_ROOT_ID;
/// Inode numbers we make up when a server file id cannot be used as is (0, 1, or
/// already taken by an object of another file system inside the export) start here,
/// far above any file id a local file system hands out.
const SYNTHETIC_INO_BASE: u64 = 1 << 62;
/// Largest kernel write (and read) request: the kernel splits larger I/O. 1 MiB keeps
/// large sequential I/O on the client's direct (RDMA-style) path without making small
/// writes wait for a huge buffer.
pub const MAX_IO_BYTES: u32 = 1 << 20;
/// Entries asked of the server per READDIR round trip (0 = the server's default).
const READDIR_PAGE_ENTRIES: u32 = 0;
/// Longest extended-attribute value the protocol carries (NATTR_VALUE_MAX).
const XATTR_VALUE_MAX_BYTES: usize = 65536;

/// What the kernel may cache, and how the mount looks to other users.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// How long the kernel may use attributes and name lookups without asking again.
    /// Zero: every stat and every path walk asks the server (strict, slower).
    pub attr_ttl: Duration,
    /// Mount read-only (the kernel refuses writes with EROFS).
    pub read_only: bool,
    /// Let other users use the mount (needs `user_allow_other` in /etc/fuse.conf
    /// when not mounting as root).
    pub allow_other: bool,
    /// Let root (besides the mounting user) use the mount.
    pub allow_root: bool,
    /// Shown as the mount's source in /proc/mounts.
    pub fsname: String,
    /// The export name the client connected with ("" = the server's default): the
    /// root handle is fetched again by it when the server recycles it.
    pub export: String,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            attr_ttl: Duration::from_secs(1),
            read_only: false,
            allow_other: false,
            allow_root: false,
            fsname: "dafs".into(),
            export: String::new(),
        }
    }
}

impl MountOptions {
    /// Apply one comma-separated `-o` list (`ro,allow_other,attr_ttl_ms=500`).
    pub fn parse_list(&mut self, list: &str) -> Result<(), String> {
        for opt in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            match opt {
                "ro" => self.read_only = true,
                "rw" => self.read_only = false,
                "allow_other" => self.allow_other = true,
                "allow_root" => self.allow_root = true,
                _ => match opt.split_once('=') {
                    Some(("attr_ttl_ms", v)) => {
                        let ms: u64 = v.parse().map_err(|_| format!("-o attr_ttl_ms={v}: not a number of milliseconds"))?;
                        if ms > 3_600_000 {
                            return Err(format!("-o attr_ttl_ms={v}: at most 3600000 (one hour)"));
                        }
                        self.attr_ttl = Duration::from_millis(ms);
                    }
                    _ => return Err(format!("-o {opt}: unknown mount option (known: ro, rw, allow_other, allow_root, attr_ttl_ms=N)")),
                },
            }
        }
        if self.allow_other && self.allow_root {
            return Err("-o allow_other and allow_root exclude each other".into());
        }
        Ok(())
    }

    /// The `-o` list for fusermount3 (same options as [`Self::fuse_options`]).
    fn fusermount_options(&self) -> String {
        let mut v = vec![
            format!("fsname={}", self.fsname.replace(',', "_")),
            "subtype=dafs".to_string(),
            "default_permissions".into(),
            "nodev".into(),
            "nosuid".into(),
            "noatime".into(),
            if self.read_only { "ro" } else { "rw" }.into(),
        ];
        if self.allow_other {
            v.push("allow_other".into());
        }
        if self.allow_root {
            v.push("allow_root".into());
        }
        v.join(",")
    }

    fn acl(&self) -> fuser::SessionACL {
        if self.allow_other {
            fuser::SessionACL::All
        } else if self.allow_root {
            fuser::SessionACL::RootAndOwner
        } else {
            fuser::SessionACL::Owner
        }
    }

    fn fuse_options(&self) -> Vec<MountOption> {
        let mut v = vec![
            MountOption::FSName(self.fsname.clone()),
            MountOption::Subtype("dafs".into()),
            // The protocol carries no user credentials (the server acts with its own
            // ids), so the only per-user check possible is the kernel's, against the
            // mode bits and owners the server reports.
            MountOption::DefaultPermissions,
            MountOption::NoDev,
            MountOption::NoSuid,
            MountOption::NoAtime,
        ];
        v.push(if self.read_only { MountOption::RO } else { MountOption::RW });
        if self.allow_other {
            v.push(MountOption::AllowOther);
        }
        if self.allow_root {
            v.push(MountOption::AllowRoot);
        }
        v
    }
}

/// One inode the kernel knows.
struct Node {
    fh: FileHandle,
    fsid: u64,
    fileid: u64,
    /// Outstanding kernel lookups (entry replies minus forgets).
    lookups: u64,
    /// Where it was last seen: to look it up again if the server forgets its handle.
    parent: u64,
    name: Vec<u8>,
    /// Last attributes seen: answers fstat of a file deleted while open (its handle
    /// is STALE on the server from then on).
    attr: Attr,
}

struct OpenFile {
    file: File,
    append: bool,
    ino: u64,
}

struct OpenDir {
    /// `cookies[k]`: the server cookie that continues the listing after the entry the
    /// kernel knows at offset `k` (offsets 1 and 2 are "." and "..", continued by 0).
    cookies: Vec<u64>,
    /// Entries fetched but not yet given to the kernel: they follow offset `pending_off`.
    pending: VecDeque<DirEntryAt>,
    pending_off: usize,
    /// The server said the page in `pending` ends the directory.
    pending_eof: bool,
}

/// The FUSE file system over one DAFS session.
pub struct DafsFs {
    c: Client,
    ttl: Duration,
    nodes: HashMap<u64, Node>,
    by_id: HashMap<(u64, u64), u64>,
    next_synthetic: u64,
    opens: HashMap<u64, OpenFile>,
    dirs: HashMap<u64, OpenDir>,
    next_fh: u64,
    /// Logged once: after the connection is lost every request fails the same way.
    reported_dead: bool,
    export: String,
    /// When a new session was last tried for a dead client (at most once a second).
    last_recovery: Option<std::time::Instant>,
}

fn errno(e: &Error) -> i32 {
    e.errno()
}

fn is_stale(e: &Error) -> bool {
    matches!(e.status(), Some(Status::Stale) | Some(Status::BadHandle))
}

fn ftype(t: DType) -> FileType {
    match t {
        DType::Regular => FileType::RegularFile,
        DType::Directory => FileType::Directory,
        DType::Symlink => FileType::Symlink,
        DType::CharDevice => FileType::CharDevice,
        DType::BlockDevice => FileType::BlockDevice,
        DType::Fifo => FileType::NamedPipe,
        DType::Socket => FileType::Socket,
    }
}

fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

fn time_ns(t: SystemTime) -> Result<i64, i32> {
    let ns = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).map_err(|_| libc::EINVAL)?,
        Err(e) => -i64::try_from(e.duration().as_nanos()).map_err(|_| libc::EINVAL)?,
    };
    Ok(ns)
}

fn file_attr(ino: u64, a: &Attr) -> FileAttr {
    FileAttr {
        ino,
        size: a.size,
        blocks: a.used.div_ceil(512),
        atime: time(a.atime_ns),
        mtime: time(a.mtime_ns),
        ctime: time(a.ctime_ns),
        crtime: time(a.ctime_ns),
        kind: ftype(a.ftype),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev as u32,
        // st_blksize: what stdio and cp size their buffers by; large I/O is what DAFS
        // is good at.
        blksize: 128 * 1024,
        flags: 0,
    }
}

/// `user.NAME` → `NAME`, when NAME can be a DAFS named attribute (printable ASCII
/// without space, 1..=200 bytes). Other namespaces (security., system., trusted.) have
/// no DAFS counterpart.
fn nattr_name(name: &OsStr) -> Option<&str> {
    let rest = name.as_bytes().strip_prefix(b"user.")?;
    if rest.is_empty() || rest.len() > 200 || !rest.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return None;
    }
    std::str::from_utf8(rest).ok()
}

impl DafsFs {
    /// A file system serving `c`'s export.
    pub fn new(mut c: Client, opts: &MountOptions) -> Result<DafsFs, Error> {
        let root = c.root_handle();
        let attr = c.getattr(root)?;
        let mut fs = DafsFs {
            c,
            ttl: opts.attr_ttl,
            nodes: HashMap::new(),
            by_id: HashMap::new(),
            next_synthetic: SYNTHETIC_INO_BASE,
            opens: HashMap::new(),
            dirs: HashMap::new(),
            next_fh: 1,
            reported_dead: false,
            export: opts.export.clone(),
            last_recovery: None,
        };
        fs.nodes.insert(
            ROOT_INO,
            Node {
                fh: root,
                fsid: attr.fsid,
                fileid: attr.fileid,
                lookups: 1,
                parent: ROOT_INO,
                name: Vec::new(),
                attr,
            },
        );
        fs.by_id.insert((attr.fsid, attr.fileid), ROOT_INO);
        Ok(fs)
    }

    fn fail(&mut self, e: &Error) -> i32 {
        if self.c.is_dead() {
            self.try_new_session();
        }
        if self.c.is_dead() && !self.reported_dead {
            self.reported_dead = true;
            tracing::error!("connection to the server lost ({e}): operations fail until the server is back (a new session is tried at most once a second)");
        }
        errno(e)
    }

    /// The client library recovers broken connections by itself (the session re-bound
    /// within its lease). What reaches here is a session the server no longer has (it
    /// restarted, the lease ran out) or a server that is gone: start a new session if the
    /// server answers. Nodes keep working (their handles are looked up again by name when
    /// the server says STALE); files opened before fail with EBADF.
    fn try_new_session(&mut self) {
        let now = std::time::Instant::now();
        if self
            .last_recovery
            .is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(1))
        {
            return;
        }
        self.last_recovery = Some(now);
        match self.c.reestablish() {
            Ok(()) => {
                self.reported_dead = false;
                tracing::warn!("the server lost this mount's session (restarted?): a new session is up; files opened before fail with EBADF");
            }
            Err(e) => tracing::debug!("new session not possible yet: {e}"),
        }
    }

    /// The inode number for the object (fsid, fileid): the server's file id itself, so
    /// `stat` shows the same numbers as on the server and hard links share one, unless
    /// that number is reserved or taken.
    fn ino_for(&mut self, a: &Attr) -> u64 {
        if let Some(&ino) = self.by_id.get(&(a.fsid, a.fileid)) {
            return ino;
        }
        let want = a.fileid;
        if want > ROOT_INO && want < SYNTHETIC_INO_BASE && !self.nodes.contains_key(&want) {
            return want;
        }
        while self.nodes.contains_key(&self.next_synthetic) {
            self.next_synthetic += 1;
        }
        self.next_synthetic
    }

    /// Record a kernel lookup of `name` in `parent` resolving to (fh, attr); returns the
    /// inode number to answer with.
    fn remember(&mut self, parent: u64, name: &[u8], fh: FileHandle, attr: Attr) -> u64 {
        let ino = self.ino_for(&attr);
        match self.nodes.get_mut(&ino) {
            Some(n) => {
                n.fh = fh;
                n.lookups += 1;
                n.parent = parent;
                n.name = name.to_vec();
                n.attr = attr;
            }
            None => {
                self.nodes.insert(
                    ino,
                    Node {
                        fh,
                        fsid: attr.fsid,
                        fileid: attr.fileid,
                        lookups: 1,
                        parent,
                        name: name.to_vec(),
                        attr,
                    },
                );
                self.by_id.insert((attr.fsid, attr.fileid), ino);
            }
        }
        ino
    }

    fn node(&self, ino: u64) -> Result<&Node, i32> {
        self.nodes.get(&ino).ok_or(libc::ESTALE)
    }

    /// Look `ino` up again by its last known name after the server answered STALE for
    /// its handle (the server's handle table recycles the least recently used slots).
    fn refresh(&mut self, ino: u64, depth: u32) -> Result<FileHandle, i32> {
        if depth > 64 {
            return Err(libc::ESTALE);
        }
        if ino == ROOT_INO {
            // The root has no name to look up: ask for the export's root handle again.
            let (fsid, fileid) = self.node(ino).map(|n| (n.fsid, n.fileid))?;
            return match self.c.refresh_root(&self.export) {
                Ok((fh, attr)) if attr.fsid == fsid && attr.fileid == fileid => {
                    tracing::debug!("server root handle was STALE; fetched it again");
                    if let Some(n) = self.nodes.get_mut(&ino) {
                        n.fh = fh;
                        n.attr = attr;
                    }
                    Ok(fh)
                }
                Ok(_) => Err(libc::ESTALE),
                Err(e) => Err(self.fail(&e)),
            };
        }
        let (parent, name, fsid, fileid) = {
            let n = self.node(ino)?;
            (n.parent, n.name.clone(), n.fsid, n.fileid)
        };
        let pfh = self.node(parent)?.fh;
        let found = match self.c.lookup_at(pfh, &name, false) {
            Err(e) if is_stale(&e) => {
                let pfh = self.refresh(parent, depth + 1)?;
                self.c.lookup_at(pfh, &name, false)
            }
            r => r,
        };
        match found {
            Ok((fh, attr)) if attr.fsid == fsid && attr.fileid == fileid => {
                tracing::debug!(ino, "server handle was STALE; looked up again by name");
                if let Some(n) = self.nodes.get_mut(&ino) {
                    n.fh = fh;
                    n.attr = attr;
                }
                Ok(fh)
            }
            // The name now names another object, or nothing: the object we knew is gone.
            Ok(_) => Err(libc::ESTALE),
            Err(e) if e.status() == Some(Status::NoEnt) => Err(libc::ESTALE),
            Err(e) => Err(self.fail(&e)),
        }
    }

    /// Run `f` on `ino`'s handle; on STALE, look the inode up again once and retry.
    fn with_fh<T>(
        &mut self,
        ino: u64,
        mut f: impl FnMut(&mut Client, FileHandle) -> Result<T, Error>,
    ) -> Result<T, i32> {
        let fh = self.node(ino)?.fh;
        match f(&mut self.c, fh) {
            Ok(v) => Ok(v),
            Err(e) if is_stale(&e) => {
                let fh = self.refresh(ino, 0)?;
                f(&mut self.c, fh).map_err(|e| self.fail(&e))
            }
            Err(e) => Err(self.fail(&e)),
        }
    }

    fn dir_fh(&mut self, ino: u64) -> Result<FileHandle, i32> {
        Ok(self.node(ino)?.fh)
    }

    /// Run a call on directory `parent`'s handle (retrying once after STALE).
    fn in_dir<T>(
        &mut self,
        parent: u64,
        f: impl FnMut(&mut Client, FileHandle) -> Result<T, Error>,
    ) -> Result<T, i32> {
        self.with_fh(parent, f)
    }

    /// The server creates objects with its own ids and under its own umask; give a new
    /// object the owner and permission bits the caller asked for, as a local file
    /// system would. Failures are ignored: a server not running as root cannot change
    /// owners, and the object exists either way.
    fn fix_new(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        fh: FileHandle,
        mut attr: Attr,
        perm: Option<u32>,
    ) -> Attr {
        // In a set-group-ID directory the new object takes the directory's group (and a
        // new directory keeps the bit): the server's file system has done that already.
        let setgid_parent = self.nodes.get(&parent).is_some_and(|n| n.attr.mode & 0o2000 != 0);
        let mut set = SetAttrs::default();
        if attr.uid != req.uid() {
            set.mask |= setattr_mask::UID;
            set.uid = req.uid();
        }
        if attr.gid != req.gid() && !setgid_parent {
            set.mask |= setattr_mask::GID;
            set.gid = req.gid();
        }
        if let Some(p) = perm {
            // Only the rwx bits can differ (the server's umask); set-id and sticky bits
            // are what the server's file system decided.
            if attr.mode & 0o777 != p & 0o777 {
                set.mask |= setattr_mask::MODE;
                set.mode = (attr.mode & 0o7000) | (p & 0o777);
            }
        }
        if set.mask != 0 {
            match self.c.setattr(fh, set) {
                Ok(a) => attr = a,
                Err(e) => tracing::debug!("setting owner/mode of a new object: {e}"),
            }
        }
        attr
    }

    fn entry(&mut self, parent: u64, name: &[u8], fh: FileHandle, attr: Attr, reply: ReplyEntry) {
        let ino = self.remember(parent, name, fh, attr);
        reply.entry(&self.ttl, &file_attr(ino, &attr), 0);
    }

    fn new_fh(&mut self) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        fh
    }

    fn forget_one(&mut self, ino: u64, nlookup: u64) {
        if ino == ROOT_INO {
            return;
        }
        let gone = match self.nodes.get_mut(&ino) {
            Some(n) => {
                n.lookups = n.lookups.saturating_sub(nlookup);
                n.lookups == 0
            }
            None => false,
        };
        if gone {
            if let Some(n) = self.nodes.remove(&ino) {
                self.by_id.remove(&(n.fsid, n.fileid));
            }
        }
    }

    fn open_opts(flags: i32) -> OpenOptions {
        let base = match flags & libc::O_ACCMODE {
            libc::O_WRONLY => OpenOptions::write_only(),
            libc::O_RDWR => OpenOptions::read_write(),
            _ => OpenOptions::read(),
        };
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY;
        base.append(writes && flags & libc::O_APPEND != 0)
            .truncate(writes && flags & libc::O_TRUNC != 0)
    }

    fn do_write(&mut self, fh: u64, offset: i64, data: &[u8]) -> Result<u32, i32> {
        let of = self.opens.get(&fh).ok_or(libc::EBADF)?;
        let ino = of.ino;
        let r = if of.append {
            // O_APPEND: the server places every piece at the end of file as of that
            // moment, across all clients (the kernel's offset is only its own idea of
            // the size). Pieces go one at a time so they land in order.
            let max = self.c.max_io_size().max(1);
            let mut res = Ok((0, 0));
            for piece in data.chunks(max) {
                match self.c.append(&of.file, piece) {
                    Ok(at) => res = Ok((at + piece.len() as u64, data.len())),
                    Err(e) => {
                        res = Err(e);
                        break;
                    }
                }
            }
            res
        } else {
            let off = u64::try_from(offset).map_err(|_| libc::EINVAL)?;
            self.c.pwrite(&of.file, data, off).map(|n| (off + n as u64, n))
        };
        match r {
            Ok((end, n)) => {
                // The last-known size stands in for a file deleted while open, whose
                // attributes the server can no longer give (see getattr).
                if let Some(node) = self.nodes.get_mut(&ino) {
                    node.attr.size = node.attr.size.max(end);
                }
                Ok(n as u32)
            }
            Err(e) => Err(self.fail(&e)),
        }
    }

    fn do_setattr(&mut self, ino: u64, fh: Option<u64>, set: SetAttrs) -> Result<Attr, i32> {
        // Through the open file when there is one: it still names the file after its
        // last name is removed (ftruncate of an unlinked temporary file).
        if let Some(of) = fh.and_then(|fh| self.opens.get(&fh)) {
            let h = of.file.fh;
            match self.c.setattr(h, set) {
                Ok(a) => return Ok(a),
                Err(e) if is_stale(&e) => {}
                Err(e) => return Err(self.fail(&e)),
            }
        }
        self.with_fh(ino, |c, h| c.setattr(h, set))
    }

    fn readdir_inner(
        &mut self,
        ino: u64,
        fh: u64,
        offset: i64,
        reply: &mut ReplyDirectory,
    ) -> Result<(), i32> {
        let mut off = usize::try_from(offset).map_err(|_| libc::EINVAL)?;
        let parent = self.node(ino)?.parent;
        if off == 0 {
            if reply.add(ino, 1, FileType::Directory, ".") {
                return Ok(());
            }
            off = 1;
        }
        if off == 1 {
            if reply.add(parent, 2, FileType::Directory, "..") {
                return Ok(());
            }
            off = 2;
        }
        let mut d = self.dirs.remove(&fh).ok_or(libc::EBADF)?;
        let r = self.fill_dir(ino, &mut d, off, reply);
        self.dirs.insert(fh, d);
        r
    }

    /// Entries after kernel offset `off`, until the kernel's buffer is full or the
    /// directory ends. A server page holds up to thousands of entries and the kernel
    /// takes about a hundred per call: the rest waits in `d.pending` for the call that
    /// continues exactly there.
    fn fill_dir(
        &mut self,
        ino: u64,
        d: &mut OpenDir,
        mut off: usize,
        reply: &mut ReplyDirectory,
    ) -> Result<(), i32> {
        if d.pending_off != off {
            d.pending.clear();
        }
        loop {
            if d.pending.is_empty() {
                if d.pending_eof && d.pending_off == off {
                    return Ok(());
                }
                let cookie = *d.cookies.get(off).ok_or(libc::EINVAL)?;
                let (page, eof) =
                    self.with_fh(ino, |c, h| c.readdir_at(h, cookie, READDIR_PAGE_ENTRIES))?;
                d.pending = page.into();
                d.pending_eof = eof;
                d.pending_off = off;
                if d.pending.is_empty() {
                    return Ok(());
                }
            }
            while let Some(e) = d.pending.front() {
                let next = off + 1;
                if next < d.cookies.len() {
                    d.cookies[next] = e.cookie;
                } else {
                    d.cookies.push(e.cookie);
                }
                // d_ino only (the kernel takes inode numbers from lookups): the server's
                // file id, which is the inode number lookups give in the usual case.
                if reply.add(
                    e.entry.fileid,
                    next as i64,
                    ftype(e.entry.ftype),
                    OsStr::from_bytes(&e.entry.name),
                ) {
                    return Ok(());
                }
                d.pending.pop_front();
                off = next;
                d.pending_off = off;
            }
        }
    }
}

impl Filesystem for DafsFs {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        if let Err(nearest) = config.set_max_write(MAX_IO_BYTES) {
            let _ = config.set_max_write(nearest);
        }
        let _ = config.set_max_readahead(MAX_IO_BYTES);
        // Timestamps are nanoseconds end to end.
        let _ = config.set_time_granularity(Duration::from_nanos(1));
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let n = name.as_bytes();
        match self.in_dir(parent, |c, d| c.lookup_at(d, n, false)) {
            Ok((fh, attr)) => self.entry(parent, n, fh, attr, reply),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        self.forget_one(ino, nlookup);
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, fh: Option<u64>, reply: ReplyAttr) {
        if let Some(of) = fh.and_then(|fh| self.opens.get(&fh)) {
            let h = of.file.fh;
            match self.c.getattr(h) {
                Ok(a) => {
                    if let Some(n) = self.nodes.get_mut(&ino) {
                        n.attr = a;
                    }
                    return reply.attr(&self.ttl, &file_attr(ino, &a));
                }
                // Recycled by the server, or deleted: the inode's own handle (looked up
                // again by name if need be) tells which, below.
                Err(e) if is_stale(&e) => {}
                Err(e) => {
                    let e = self.fail(&e);
                    return reply.error(e);
                }
            }
        }
        match self.with_fh(ino, |c, h| c.getattr(h)) {
            Ok(a) => {
                if let Some(n) = self.nodes.get_mut(&ino) {
                    n.attr = a;
                }
                reply.attr(&self.ttl, &file_attr(ino, &a))
            }
            // A file deleted while still open (fstat(2) need not say which open it
            // comes from): what we last knew, with no links.
            Err(libc::ESTALE) if self.opens.values().any(|o| o.ino == ino) => {
                match self.nodes.get(&ino) {
                    Some(n) => {
                        let mut a = n.attr;
                        a.nlink = 0;
                        reply.attr(&Duration::ZERO, &file_attr(ino, &a))
                    }
                    None => reply.error(libc::ESTALE),
                }
            }
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let mut set = SetAttrs::default();
        if let Some(m) = mode {
            set.mask |= setattr_mask::MODE;
            set.mode = m & 0o7777;
        }
        if let Some(u) = uid {
            set.mask |= setattr_mask::UID;
            set.uid = u;
        }
        if let Some(g) = gid {
            set.mask |= setattr_mask::GID;
            set.gid = g;
        }
        if let Some(s) = size {
            set.mask |= setattr_mask::SIZE;
            set.size = s;
        }
        match atime {
            Some(TimeOrNow::Now) => set.mask |= setattr_mask::ATIME_NOW,
            Some(TimeOrNow::SpecificTime(t)) => match time_ns(t) {
                Ok(ns) => {
                    set.mask |= setattr_mask::ATIME;
                    set.atime_ns = ns;
                }
                Err(e) => return reply.error(e),
            },
            None => {}
        }
        match mtime {
            Some(TimeOrNow::Now) => set.mask |= setattr_mask::MTIME_NOW,
            Some(TimeOrNow::SpecificTime(t)) => match time_ns(t) {
                Ok(ns) => {
                    set.mask |= setattr_mask::MTIME;
                    set.mtime_ns = ns;
                }
                Err(e) => return reply.error(e),
            },
            None => {}
        }
        let r = if set.mask == 0 {
            // Only ctime (or flags) asked for: nothing DAFS can set; answer the attributes.
            self.with_fh(ino, |c, h| c.getattr(h))
        } else {
            self.do_setattr(ino, fh, set)
        };
        match r {
            Ok(a) => {
                if let Some(n) = self.nodes.get_mut(&ino) {
                    n.attr = a;
                }
                reply.attr(&self.ttl, &file_attr(ino, &a))
            }
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        match self.with_fh(ino, |c, h| c.readlink_handle(h)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // DAFS creates regular files and directories only: device nodes, FIFOs and
        // sockets have no protocol counterpart.
        if mode & libc::S_IFMT != libc::S_IFREG && mode & libc::S_IFMT != 0 {
            return reply.error(libc::EPERM);
        }
        let n = name.as_bytes();
        let perm = mode & !umask & 0o7777;
        match self.in_dir(parent, |c, d| c.create_at(d, n, DType::Regular, perm, true)) {
            Ok((fh, attr)) => {
                let attr = self.fix_new(req, parent, fh, attr, Some(perm));
                self.entry(parent, n, fh, attr, reply)
            }
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let n = name.as_bytes();
        let perm = mode & !umask & 0o7777;
        match self.in_dir(parent, |c, d| c.create_at(d, n, DType::Directory, perm, true)) {
            Ok((fh, attr)) => {
                let attr = self.fix_new(req, parent, fh, attr, Some(perm));
                self.entry(parent, n, fh, attr, reply)
            }
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let n = name.as_bytes();
        match self.in_dir(parent, |c, d| c.remove_at(d, n)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let n = name.as_bytes();
        match self.in_dir(parent, |c, d| c.rmdir_at(d, n)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let n = link_name.as_bytes();
        let t = target.as_os_str().as_bytes();
        match self.in_dir(parent, |c, d| c.symlink_at(d, n, t)) {
            Ok((fh, attr)) => {
                let attr = self.fix_new(req, parent, fh, attr, None);
                self.entry(parent, n, fh, attr, reply)
            }
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        // RENAME_NOREPLACE / RENAME_EXCHANGE: DAFS RENAME always replaces, and emulating
        // either with a lookup first would not be atomic against other clients. EINVAL
        // is what rename2 callers (mv, cp) take as "not supported here" and fall back.
        if flags != 0 {
            return reply.error(libc::EINVAL);
        }
        let (from, to) = (name.as_bytes(), newname.as_bytes());
        let to_dir = match self.dir_fh(newparent) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let r = self.in_dir(parent, |c, d| c.rename_at(d, from, to_dir, to));
        let r = match r {
            // The target directory's handle may be the stale one.
            Err(libc::ESTALE) => match self.refresh(newparent, 0) {
                Ok(to_dir) => self.in_dir(parent, |c, d| c.rename_at(d, from, to_dir, to)),
                Err(e) => Err(e),
            },
            r => r,
        };
        match r {
            Ok(()) => {
                // Keep the moved inode's name current (for looking it up again later).
                if let Some(n) =
                    self.nodes.values_mut().find(|n| n.parent == parent && n.name == from)
                {
                    n.parent = newparent;
                    n.name = to.to_vec();
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let n = newname.as_bytes();
        let dir = match self.dir_fh(newparent) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        match self.with_fh(ino, |c, h| c.link_at(h, dir, n)) {
            Ok(attr) => match self.nodes.get_mut(&ino) {
                // Same object, one more kernel lookup; its existing name stays the one
                // used to look it up again.
                Some(node) => {
                    node.lookups += 1;
                    node.attr = attr;
                    reply.entry(&self.ttl, &file_attr(ino, &attr), 0)
                }
                None => reply.error(libc::ESTALE),
            },
            Err(e) => reply.error(e),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let opts = Self::open_opts(flags);
        match self.with_fh(ino, |c, h| c.open_handle(h, opts)) {
            Ok(file) => {
                let fh = self.new_fh();
                if let Some(n) = self.nodes.get_mut(&ino) {
                    n.attr = file.attr;
                }
                self.opens.insert(
                    fh,
                    OpenFile {
                        file,
                        append: flags & libc::O_APPEND != 0
                            && flags & libc::O_ACCMODE != libc::O_RDONLY,
                        ino,
                    },
                );
                // No FOPEN_KEEP_CACHE: the kernel drops this file's cached pages at every
                // open, so an open sees what other clients wrote before it (close-to-open).
                reply.opened(fh, 0)
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyData,
    ) {
        let Some(of) = self.opens.get(&fh) else { return reply.error(libc::EBADF) };
        let Ok(off) = u64::try_from(offset) else { return reply.error(libc::EINVAL) };
        tracing::trace!(fh, offset, len = size, "read");
        let mut buf = vec![0u8; size as usize];
        match self.c.pread(&of.file, &mut buf, off) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => {
                let e = self.fail(&e);
                reply.error(e)
            }
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _wflags: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyWrite,
    ) {
        tracing::trace!(fh, offset, len = data.len(), "write");
        match self.do_write(fh, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _lock_owner: u64,
        reply: ReplyEmpty,
    ) {
        // Writes are write-through (each reached the server before write(2) returned),
        // so close has nothing to send; only report a connection that died meanwhile.
        if !self.opens.contains_key(&fh) {
            return reply.error(libc::EBADF);
        }
        if self.c.is_dead() {
            return reply.error(libc::EIO);
        }
        reply.ok()
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        match self.opens.remove(&fh) {
            Some(of) => match self.c.close(of.file) {
                Ok(()) => reply.ok(),
                Err(e) => {
                    let e = self.fail(&e);
                    reply.error(e)
                }
            },
            None => reply.error(libc::EBADF),
        }
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let Some(of) = self.opens.get(&fh) else { return reply.error(libc::EBADF) };
        match self.c.fsync(&of.file) {
            Ok(()) => reply.ok(),
            Err(e) => {
                let e = self.fail(&e);
                reply.error(e)
            }
        }
    }

    fn opendir(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        match self.with_fh(ino, |c, h| c.getattr(h)) {
            Ok(a) if a.ftype != DType::Directory => reply.error(libc::ENOTDIR),
            Ok(_) => {
                let fh = self.new_fh();
                self.dirs.insert(
                    fh,
                    OpenDir {
                        cookies: vec![0, 0, 0],
                        pending: VecDeque::new(),
                        pending_off: 0,
                        pending_eof: false,
                    },
                );
                reply.opened(fh, 0)
            }
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        match self.readdir_inner(ino, fh, offset, &mut reply) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        reply: ReplyEmpty,
    ) {
        self.dirs.remove(&fh);
        reply.ok()
    }

    fn fsyncdir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Namespace operations are synchronous on the server (each returned after the
        // server's file system call did); nothing is buffered here.
        reply.ok()
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        match self.c.statfs() {
            Ok(s) => {
                let bs = u64::from(s.block_size.max(512));
                reply.statfs(
                    s.total_bytes / bs,
                    s.free_bytes / bs,
                    s.avail_bytes / bs,
                    s.total_files,
                    s.free_files,
                    bs as u32,
                    s.name_max,
                    bs as u32,
                )
            }
            Err(e) => {
                let e = self.fail(&e);
                reply.error(e)
            }
        }
    }

    fn setxattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let Some(n) = nattr_name(name) else { return reply.error(libc::ENOTSUP) };
        if value.len() > XATTR_VALUE_MAX_BYTES {
            return reply.error(libc::E2BIG);
        }
        let mut f = 0;
        if flags & libc::XATTR_CREATE != 0 {
            f |= nattr_flags::CREATE;
        }
        if flags & libc::XATTR_REPLACE != 0 {
            f |= nattr_flags::REPLACE;
        }
        match self.with_fh(ino, |c, h| c.set_nattr_handle(h, n, value, f)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        let Some(n) = nattr_name(name) else {
            // security.capability is asked for on every write; "none" keeps writes working.
            return reply.error(if name.as_bytes().starts_with(b"user.") {
                libc::ENODATA
            } else {
                libc::ENOTSUP
            });
        };
        match self.with_fh(ino, |c, h| c.get_nattr_handle(h, n)) {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(libc::ERANGE),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&mut self, _req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        match self.with_fh(ino, |c, h| c.list_nattr_handle(h)) {
            Ok(names) => {
                let mut out = Vec::new();
                for n in names {
                    out.extend_from_slice(b"user.");
                    out.extend_from_slice(&n);
                    out.push(0);
                }
                if size == 0 {
                    reply.size(out.len() as u32)
                } else if out.len() > size as usize {
                    reply.error(libc::ERANGE)
                } else {
                    reply.data(&out)
                }
            }
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&mut self, _req: &Request<'_>, ino: u64, name: &OsStr, reply: ReplyEmpty) {
        let Some(n) = nattr_name(name) else {
            return reply.error(if name.as_bytes().starts_with(b"user.") {
                libc::ENODATA
            } else {
                libc::ENOTSUP
            });
        };
        match self.with_fh(ino, |c, h| c.remove_nattr_handle(h, n)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn access(&mut self, _req: &Request<'_>, ino: u64, _mask: i32, reply: ReplyEmpty) {
        // With default_permissions the kernel checks mode bits itself and does not ask;
        // should it ask, the object's existence is what we can vouch for.
        match self.with_fh(ino, |c, h| c.getattr(h)) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let n = name.as_bytes();
        let perm = mode & !umask & 0o7777;
        let opts =
            Self::open_opts(flags).create(true).exclusive(flags & libc::O_EXCL != 0).mode(perm);
        // A create may be O_RDONLY (open(O_CREAT|O_RDONLY)); DAFS OPEN with CREATE
        // needs nothing more than READ, so the access mode stays as asked.
        match self.in_dir(parent, |c, d| c.open_at(d, n, opts)) {
            Ok(file) => {
                let attr = self.fix_new(req, parent, file.fh, file.attr, Some(perm));
                let ino = self.remember(parent, n, file.fh, attr);
                let fh = self.new_fh();
                self.opens.insert(
                    fh,
                    OpenFile {
                        file,
                        append: flags & libc::O_APPEND != 0
                            && flags & libc::O_ACCMODE != libc::O_RDONLY,
                        ino,
                    },
                );
                reply.created(&self.ttl, &file_attr(ino, &attr), 0, fh, 0)
            }
            Err(e) => reply.error(e),
        }
    }
}

/// Is `path` the mount point of a dafs FUSE mount (per /proc/self/mountinfo)? Works on
/// a mount whose server process died (where stat of the path fails with ENOTCONN).
pub fn is_dafs_mount(path: &Path) -> bool {
    let Ok(abs) = absolute(path) else { return false };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    info.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let Some(sep) = f.iter().position(|x| *x == "-") else { return false };
        if f.len() < sep + 3 || f.get(4).map(|m| unescape_mountinfo(m)) != Some(abs.clone()) {
            return false;
        }
        // Mounted by fusermount3 the type carries our subtype; mounted directly (as
        // root) it is plain "fuse" and our source name tells.
        let (fstype, source) = (f[sep + 1], f[sep + 2]);
        fstype == "fuse.dafs" || (fstype == "fuse" && source.starts_with("dafs:"))
    })
}

fn unescape_mountinfo(s: &str) -> PathBuf {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            match u8::try_from(v) {
                Ok(v) => out.push(v),
                // Not an escape the kernel writes (above \377): keep it as text.
                Err(_) => out.extend_from_slice(&b[i..i + 4]),
            }
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

/// The absolute, lexically normalized form of `path`, without touching the mount
/// itself (canonicalize would stat it, which hangs or fails on a dead mount).
fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    let p = std::path::absolute(path)?;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Unmount the dafs mount at `path`. `lazy`: detach it now even while programs still
/// use it (they keep their open files; the mount disappears from the namespace).
pub fn unmount(path: &Path, lazy: bool) -> Result<(), String> {
    let abs = absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !is_dafs_mount(&abs) {
        return Err(format!("{}: not a dafs mount point (see /proc/mounts)", abs.display()));
    }
    let c = CString::new(abs.as_os_str().as_bytes())
        .map_err(|_| format!("{}: path contains NUL", abs.display()))?;
    // SAFETY: c is a valid NUL-terminated path for the duration of the call.
    let r = unsafe { libc::umount2(c.as_ptr(), if lazy { libc::MNT_DETACH } else { 0 }) };
    if r == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EPERM) {
        return Err(format!(
            "{}: {err}{}",
            abs.display(),
            if err.raw_os_error() == Some(libc::EBUSY) {
                " (still in use; retry later or use --lazy)"
            } else {
                ""
            }
        ));
    }
    // Not root: the setuid helper unmounts what this user mounted.
    let mut cmd = std::process::Command::new("fusermount3");
    cmd.arg("-u");
    if lazy {
        cmd.arg("-z");
    }
    cmd.arg("--").arg(&abs);
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "fusermount3 -u {}: {}",
            abs.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run fusermount3 (install the fuse3 package): {e}")),
    }
}

/// Mount `c`'s export on `mountpoint` and serve it until it is unmounted. SIGINT,
/// SIGTERM and SIGHUP unmount it (lazily when it is busy, so the process always ends
/// once programs let go). `on_mounted` runs once the mount is in place.
///
/// Call this before starting other threads: it blocks those signals in the calling
/// thread so that every thread started later inherits the mask and only the
/// dedicated signal thread receives them.
pub fn mount(
    c: Client,
    mountpoint: &Path,
    opts: &MountOptions,
    on_mounted: impl FnOnce(),
) -> Result<(), String> {
    let md = std::fs::metadata(mountpoint).map_err(|e| format!("{}: {e}", mountpoint.display()))?;
    if !md.is_dir() {
        return Err(format!("{}: not a directory", mountpoint.display()));
    }
    if is_dafs_mount(mountpoint) {
        return Err(format!("{}: already a dafs mount point", mountpoint.display()));
    }
    if !Path::new("/dev/fuse").exists() {
        return Err("/dev/fuse does not exist: load the fuse kernel module (modprobe fuse) or, in a container, pass the device in".into());
    }
    let fs = DafsFs::new(c, opts).map_err(|e| format!("export root: {e}"))?;
    let abs = absolute(mountpoint).map_err(|e| format!("{}: {e}", mountpoint.display()))?;

    // SAFETY: plain signal-mask manipulation on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    // Root mounts with mount(2) (fuser). Anyone else goes through the setuid helper
    // fusermount3 directly: fuser first opens /dev/fuse itself, which fails with EACCES
    // where the device is root-only (common in containers), while fusermount3 opens it
    // as root and hands us the descriptor.
    // DAFS_MOUNT_VIA_FUSERMOUNT=1 takes the helper's path as root too (the tests use it:
    // where /dev/fuse is root-only, nobody but root can mount at all).
    // SAFETY: geteuid has no preconditions.
    let via_helper = unsafe { libc::geteuid() } != 0
        || std::env::var_os("DAFS_MOUNT_VIA_FUSERMOUNT").is_some_and(|v| v == "1");
    let mut session = if via_helper {
        let fd = fusermount(&abs, &opts.fusermount_options())?;
        fuser::Session::from_fd(fs, fd, opts.acl())
    } else {
        fuser::Session::new(fs, &abs, &opts.fuse_options())
            .map_err(|e| format!("mount on {}: {e}", abs.display()))?
    };
    on_mounted();
    let sig_path = abs.clone();
    std::thread::Builder::new()
        .name("dafs-mount-signals".into())
        .spawn(move || loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: waits for one of the signals blocked above.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::sigaddset(&mut set, s);
                }
                if libc::sigwait(&set, &mut sig) != 0 {
                    return;
                }
            }
            tracing::info!("signal {sig}: unmounting {}", sig_path.display());
            if let Err(e) = unmount(&sig_path, false).or_else(|_| unmount(&sig_path, true)) {
                eprintln!("dafs: unmount {}: {e}", sig_path.display());
            }
        })
        .map_err(|e| format!("signal thread: {e}"))?;
    // Returns when the kernel ends the connection: after any unmount of the mount.
    let r = session.run().map_err(|e| format!("serving {}: {e}", abs.display()));
    if r.is_err() && via_helper && is_dafs_mount(&abs) {
        // Ended for another reason: do not leave a dead mount behind (a session made
        // from a descriptor does not unmount on drop).
        let _ = unmount(&abs, true);
    }
    r
}

/// Mount with fusermount3 and receive the /dev/fuse descriptor it opened (the
/// `_FUSE_COMMFD` protocol: one SCM_RIGHTS message on a socket pair).
fn fusermount(mountpoint: &Path, options: &str) -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::process::CommandExt;
    let (ours, theirs) =
        std::os::unix::net::UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
    let theirs_fd = theirs.as_raw_fd();
    let mut cmd = std::process::Command::new("fusermount3");
    cmd.arg("-o")
        .arg(options)
        .arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", theirs_fd.to_string())
        .stdin(std::process::Stdio::null());
    // SAFETY: fcntl is async-signal-safe; only the child's copy loses close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(theirs_fd, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run fusermount3 (install the fuse3 package): {e}"))?;
    drop(theirs);
    if !out.status.success() {
        return Err(format!(
            "mount on {}: fusermount3: {}",
            mountpoint.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // u64 elements: cmsg buffers must be aligned like struct cmsghdr.
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; every pointer in it refers to live locals above.
    let fd = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(ours.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if n < 0
            || cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            let _ = unmount(mountpoint, true);
            return Err(format!(
                "mount on {}: fusermount3 mounted but passed no /dev/fuse descriptor",
                mountpoint.display()
            ));
        }
        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>())
    };
    // SAFETY: SCM_RIGHTS gave this process a new descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let mut o = MountOptions::default();
        assert_eq!(o.attr_ttl, Duration::from_secs(1));
        o.parse_list("ro,allow_other,attr_ttl_ms=250").unwrap();
        assert!(o.read_only && o.allow_other);
        assert_eq!(o.attr_ttl, Duration::from_millis(250));
        o.parse_list("attr_ttl_ms=0,rw").unwrap();
        assert!(!o.read_only);
        assert_eq!(o.attr_ttl, Duration::ZERO);
        assert!(o.parse_list("attr_ttl_ms=soon").is_err());
        assert!(o.parse_list("attr_ttl_ms=99999999").is_err());
        assert!(o.parse_list("bogus").unwrap_err().contains("unknown mount option"));
        let mut o = MountOptions::default();
        assert!(o.parse_list("allow_other,allow_root").is_err());
    }

    #[test]
    fn xattr_names() {
        assert_eq!(nattr_name(OsStr::new("user.color")), Some("color"));
        assert_eq!(nattr_name(OsStr::new("user.a/b")), Some("a/b"));
        assert_eq!(nattr_name(OsStr::new("security.capability")), None);
        assert_eq!(nattr_name(OsStr::new("user.")), None);
        assert_eq!(nattr_name(OsStr::new("user.has space")), None);
        assert_eq!(nattr_name(OsStr::new(&format!("user.{}", "x".repeat(201)))), None);
    }

    #[test]
    fn times_round_trip() {
        for ns in [0i64, 1, 1_700_000_000_123_456_789, -1, -1_500_000_000] {
            assert_eq!(time_ns(time(ns)).unwrap(), ns);
        }
    }

    #[test]
    fn mountinfo_unescape() {
        assert_eq!(unescape_mountinfo("/tmp/a\\040b"), PathBuf::from("/tmp/a b"));
        assert_eq!(unescape_mountinfo("/x\\134y"), PathBuf::from("/x\\y"));
        assert_eq!(unescape_mountinfo("/plain"), PathBuf::from("/plain"));
        assert_eq!(unescape_mountinfo("/odd\\777"), PathBuf::from("/odd\\777"));
        assert_eq!(unescape_mountinfo("/end\\04"), PathBuf::from("/end\\04"));
    }

    #[test]
    fn absolute_is_lexical() {
        assert_eq!(absolute(Path::new("/a/./b/../c")).unwrap(), PathBuf::from("/a/c"));
    }

    #[test]
    fn open_flag_mapping() {
        use dafs_client::dafs_proto::types::open_flags as f;
        // OpenOptions keeps its flags private; its Debug form shows them.
        let flags = |o: OpenOptions| format!("{o:?}");
        let want = |bits: u32| format!("OpenOptions {{ flags: {bits}, ");
        assert!(flags(DafsFs::open_opts(libc::O_RDONLY)).starts_with(&want(f::READ)));
        // Only write-capable opens truncate or append.
        assert!(flags(DafsFs::open_opts(libc::O_RDONLY | libc::O_TRUNC | libc::O_APPEND))
            .starts_with(&want(f::READ)));
        assert!(flags(DafsFs::open_opts(libc::O_WRONLY | libc::O_TRUNC))
            .starts_with(&want(f::WRITE | f::TRUNCATE)));
        assert!(flags(DafsFs::open_opts(libc::O_RDWR | libc::O_APPEND))
            .starts_with(&want(f::READ | f::WRITE | f::APPEND)));
    }
}
