//! Process-wide state: configuration, per-mount clients, descriptors, open file
//! descriptions, directory streams and the virtual working directory — all behind one
//! mutex, because a `Client` is used by one thread at a time.

use std::cell::UnsafeCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, CString};
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

use dafs_client::{Client, ClientConfig, Error, File, OpenOptions};
use dafs_proto::{FileHandle, FileType};

use crate::paths::{self, MountCfg};

// ------------------------------------------------------------------------ configuration

pub struct Config {
    pub mounts: Vec<MountCfg>,
    pub debug: bool,
    pub secret: Option<Result<Vec<u8>, String>>,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

pub fn config() -> &'static Config {
    CONFIG.get_or_init(|| {
        let debug =
            std::env::var("DAFS_PRELOAD_DEBUG").map(|v| !v.is_empty() && v != "0").unwrap_or(false);
        let mounts = match std::env::var("DAFS_MOUNT") {
            Ok(s) => paths::parse_mounts(&s).unwrap_or_else(|e| {
                eprintln!("dafs-preload: DAFS_MOUNT: {e}; no path is redirected to dafs");
                Vec::new()
            }),
            Err(_) => Vec::new(),
        };
        let secret = std::env::var("DAFS_SECRET_FILE").ok().filter(|p| !p.is_empty()).map(|p| {
            let s =
                std::fs::read(&p).map_err(|e| format!("cannot read DAFS_SECRET_FILE {p}: {e}"))?;
            let s = s.strip_suffix(b"\n").unwrap_or(&s).to_vec();
            if s.len() < 8 {
                return Err(format!("the secret in {p} is shorter than 8 bytes"));
            }
            Ok(s)
        });
        Config { mounts, debug, secret }
    })
}

macro_rules! debug {
    ($($a:tt)*) => {
        if $crate::state::config().debug {
            eprintln!("dafs-preload[{}]: {}", std::process::id(), format_args!($($a)*));
        }
    };
}

// ------------------------------------------------------------------------ fd bitmap

/// dafs descriptors are below this (a reserved number above it is refused with EMFILE).
pub const FD_MAX: usize = 65536;
/// One bit per descriptor: the fast path of every fd-taking function tests it without
/// locking, so calls on other descriptors cost one atomic load.
static FDMAP: [AtomicU64; FD_MAX / 64] = [const { AtomicU64::new(0) }; FD_MAX / 64];
/// Number of open dafs directory streams (readdir on other DIRs skips the lock while 0).
pub static DIRS_OPEN: AtomicUsize = AtomicUsize::new(0);

/// Descriptors of the library's own connections (sockets, shared-memory files).
static INTERNAL: [AtomicU64; FD_MAX / 64] = [const { AtomicU64::new(0) }; FD_MAX / 64];

/// Is `fd` one of the library's connection descriptors? (A program closing "all other
/// descriptors" must not cut the session it does not know about.)
pub fn is_internal_fd(fd: c_int) -> bool {
    fd >= 0
        && (fd as usize) < FD_MAX
        && INTERNAL[fd as usize / 64].load(Relaxed) & (1 << (fd as usize % 64)) != 0
}

fn mark_internal(fd: c_int, on: bool) {
    if fd < 0 || fd as usize >= FD_MAX {
        return;
    }
    let (w, b) = (fd as usize / 64, 1u64 << (fd as usize % 64));
    if on {
        INTERNAL[w].fetch_or(b, Relaxed);
    } else {
        INTERNAL[w].fetch_and(!b, Relaxed);
    }
}

pub fn is_dafs_fd(fd: c_int) -> bool {
    fd >= 0
        && (fd as usize) < FD_MAX
        && FDMAP[fd as usize / 64].load(Relaxed) & (1 << (fd as usize % 64)) != 0
}

fn mark(fd: c_int, on: bool) {
    let (w, b) = (fd as usize / 64, 1u64 << (fd as usize % 64));
    if on {
        FDMAP[w].fetch_or(b, Relaxed);
    } else {
        FDMAP[w].fetch_and(!b, Relaxed);
    }
}

// ------------------------------------------------------------------------ types

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// A regular (or other non-directory) file opened for I/O.
    File,
    /// A directory (readable with fdopendir, usable as an *at dirfd, fchdir).
    Dir,
    /// O_PATH: names an object, no I/O.
    Path,
}

/// An open file description (shared by dup'ed descriptors, like the kernel's).
pub struct Ofd {
    pub mount: usize,
    /// Path inside the export (for re-opening after fork/exec/reconnect).
    pub rel: String,
    /// Absolute virtual path (`/dafs/...`), the base for *at calls relative to it.
    pub vpath: String,
    pub kind: Kind,
    pub is_dir: bool,
    /// The client's open file (Kind::File only).
    pub file: Option<File>,
    pub fh: FileHandle,
    /// Session generation `file`/`fh` belong to; a mismatch means: re-open first.
    pub gen: u64,
    pub offset: u64,
    /// O_ACCMODE | O_APPEND | O_NONBLOCK | ... as F_GETFL reports them.
    pub flags: c_int,
    /// Opened with the client's atomic append mode.
    pub opened_append: bool,
    pub refs: u32,
}

pub struct FdEnt {
    pub ofd: u64,
    pub cloexec: bool,
}

#[derive(Default)]
pub struct MountState {
    pub client: Option<Client>,
    /// Bumped at every new session.
    pub gen: u64,
    /// Descriptors the client opened (closed, not used, in a forked child).
    conn_fds: Vec<c_int>,
    warned: bool,
    /// fileids this process holds POSIX locks on (closing any descriptor of the file
    /// releases them, as POSIX specifies).
    pub locked: HashSet<u64>,
}

/// A dafs directory stream (the `DIR*` handed out points to one of these).
pub struct DirStream {
    pub fd: c_int,
    pub entries: Vec<(Vec<u8>, u64, u8)>,
    pub pos: usize,
    pub ent: libc::dirent64,
}

pub struct Target {
    pub mount: usize,
    pub rel: String,
    pub vpath: String,
}

/// What a path argument resolves to.
pub enum Res {
    Dafs(Target),
    /// Not a dafs path. `Some(abs)`: relative to a virtual (dafs) working directory but
    /// outside the prefix — call libc with this absolute path instead.
    Local(Option<CString>),
}

/// A failed operation: an errno, or a client error (mapped, and checked for a lost
/// connection, by [`State::fail`]).
pub enum Fail {
    Errno(c_int),
    Client(Error),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Client(e)
    }
}

pub fn err<T>(e: c_int) -> Result<T, Fail> {
    Err(Fail::Errno(e))
}

pub type FR<T> = Result<T, Fail>;

pub struct State {
    pub mounts: Vec<MountState>,
    pub ofds: HashMap<u64, Ofd>,
    pub fds: HashMap<c_int, FdEnt>,
    next_ofd: u64,
    /// Addresses of our DirStreams.
    pub dirs: HashSet<usize>,
    /// The process umask (read at start, tracked through umask()).
    pub umask: u32,
}

// ------------------------------------------------------------------------ the lock

/// A value behind a plain pthread mutex (not std's): the fork handlers take it in
/// `prepare` and release it in both parent and child, so a child never inherits it
/// locked by a thread that does not exist there.
pub struct Locked<T> {
    mu: UnsafeCell<libc::pthread_mutex_t>,
    v: UnsafeCell<T>,
}
// SAFETY: `v` is only reached with `mu` held (see `with`), so one thread at a time
// uses it. (No `T: Send` bound: the client holds raw pointers to memory it owns, which
// makes it !Send in the type system, but nothing in it is tied to a thread.)
unsafe impl<T> Sync for Locked<T> {}

impl<T> Locked<T> {
    pub const fn new(v: T) -> Self {
        Locked { mu: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER), v: UnsafeCell::new(v) }
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        struct Unlock<'a, T>(&'a Locked<T>);
        impl<T> Drop for Unlock<'_, T> {
            fn drop(&mut self) {
                self.0.unlock_raw();
            }
        }
        self.lock_raw();
        let _u = Unlock(self);
        // SAFETY: the mutex is held: no other reference to the value exists.
        f(unsafe { &mut *self.v.get() })
    }

    fn lock_raw(&self) {
        // SAFETY: a statically initialised mutex.
        unsafe { libc::pthread_mutex_lock(self.mu.get()) };
    }

    fn unlock_raw(&self) {
        // SAFETY: locked by this thread (with / fork_prepare).
        unsafe { libc::pthread_mutex_unlock(self.mu.get()) };
    }
}

static G: Locked<Option<State>> = Locked::new(None);

/// The working directory, under its own lock: resolving a relative local path never
/// waits for dafs I/O another thread is doing under the state lock.
pub struct Cwd {
    /// Virtual working directory (set by chdir/fchdir into a prefix).
    pub vcwd: Option<String>,
    /// Cached real working directory (for relative paths when vcwd is None).
    real: Option<String>,
}
pub static CWD: Locked<Cwd> = Locked::new(Cwd { vcwd: None, real: None });

/// Run `f` on the state with the process-wide lock held.
pub fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    G.with(|st| f(st.get_or_insert_with(State::new)))
}

// Lock order: G, then CWD.
extern "C" fn fork_prepare() {
    G.lock_raw();
    CWD.lock_raw();
}

extern "C" fn fork_parent() {
    CWD.unlock_raw();
    G.unlock_raw();
}

extern "C" fn fork_child() {
    // The calling thread is the only one in the child, and holds the locks.
    let _g = crate::real::Entered::enter();
    set_owner();
    // SAFETY: G is held (fork_prepare).
    if let Some(st) = unsafe { &mut *G.v.get() } {
        st.forget_sessions();
    }
    CWD.unlock_raw();
    G.unlock_raw();
}

/// Called once at load (constructor): fork handlers, and descriptors and working
/// directory handed over by an exec.
pub fn init() {
    let _g = crate::real::Entered::enter();
    set_owner();
    let cfg = config();
    // SAFETY: registering plain extern "C" functions.
    unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    if cfg.mounts.is_empty() {
        return;
    }
    // A working directory under a prefix, handed down by the parent (see chdir).
    if let Ok(c) = std::env::var(CWD_ENV) {
        let n = paths::normalize(&c);
        if c.starts_with('/') && paths::split_mount(&cfg.mounts, &n).is_some() {
            CWD.with(|w| w.vcwd = Some(n));
        }
    }
    if let Ok(spec) = std::env::var(FDS_ENV) {
        with(|st| st.adopt_inherited(&spec));
        // Our own variable: read once, never seen by anything else (single-threaded here).
        std::env::remove_var(FDS_ENV);
    }
    with(|_| ());
}

// ------------------------------------------------------------------------ vfork children

/// The process the state belongs to (set at load and in a forked child).
static OWNER: AtomicI32 = AtomicI32::new(0);

pub fn set_owner() {
    // SAFETY: getpid has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Relaxed);
}

/// True in a `vfork()`ed child (Python's subprocess, for one, uses vfork): it shares
/// this memory with the suspended parent and ran no fork handler, so it must not change
/// the parent's descriptor table. Its `dup2`/`close`/`F_DUPFD` on dafs descriptors go
/// into an overlay, which its `execve` uses to describe the descriptors it hands over.
pub fn in_vfork_child() -> bool {
    let o = OWNER.load(Relaxed);
    // SAFETY: getpid has no preconditions.
    o != 0 && o != unsafe { libc::getpid() }
}

/// Per vfork child (pid): fd -> Some((open file description, cloexec)) or None (closed).
type Overlay = HashMap<c_int, Option<(u64, bool)>>;
static VFORK: std::sync::Mutex<Option<HashMap<i32, Overlay>>> = std::sync::Mutex::new(None);
/// Set once any vfork child recorded something (then dup2 of non-dafs numbers is checked).
pub static VFORK_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn overlay<T>(f: impl FnOnce(&mut Overlay) -> T) -> T {
    let mut g = VFORK.lock().unwrap_or_else(|e| e.into_inner());
    let all = g.get_or_insert_with(HashMap::new);
    // SAFETY: getpid / kill(pid, 0) have no preconditions.
    let me = unsafe { libc::getpid() };
    // Forget children that are gone (exec'd children keep their pid but never come
    // back here; entries are tiny).
    if all.len() > 16 {
        all.retain(|&pid, _| pid == me || unsafe { libc::kill(pid, 0) } == 0);
    }
    f(all.entry(me).or_default())
}

impl State {
    /// A vfork child's view of descriptor `fd`.
    pub fn vfork_view(&self, fd: c_int) -> Option<(u64, bool)> {
        match overlay(|o| o.get(&fd).copied()) {
            Some(v) => v,
            None => self.fds.get(&fd).map(|e| (e.ofd, e.cloexec)),
        }
    }
}

pub fn vfork_note(fd: c_int, v: Option<(u64, bool)>) {
    VFORK_USED.store(true, Relaxed);
    overlay(|o| o.insert(fd, v));
}

fn vfork_overlay() -> Overlay {
    overlay(|o| o.clone())
}

pub const FDS_ENV: &str = "DAFS_PRELOAD_FDS";
pub const CWD_ENV: &str = "DAFS_PRELOAD_CWD";

// ------------------------------------------------------------------------ helpers

fn real_open(path: &std::ffi::CStr, flags: c_int) -> c_int {
    // SAFETY: a NUL-terminated path; glibc's open.
    unsafe {
        real!(open: fn(*const libc::c_char, c_int, ...) -> c_int)(
            path.as_ptr(),
            flags,
            0 as libc::c_uint,
        )
    }
}

pub fn real_close(fd: c_int) -> c_int {
    // SAFETY: glibc's close.
    unsafe { real!(close: fn(c_int) -> c_int)(fd) }
}

fn list_fds() -> Vec<c_int> {
    match std::fs::read_dir("/proc/self/fd") {
        Ok(d) => d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect(),
        Err(_) => Vec::new(),
    }
}

fn read_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Umask:").and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
        })
        .unwrap_or(0o022)
}

pub fn dtype(t: FileType) -> u8 {
    match t {
        FileType::Regular => libc::DT_REG,
        FileType::Directory => libc::DT_DIR,
        FileType::Symlink => libc::DT_LNK,
        FileType::CharDevice => libc::DT_CHR,
        FileType::BlockDevice => libc::DT_BLK,
        FileType::Fifo => libc::DT_FIFO,
        FileType::Socket => libc::DT_SOCK,
    }
}

pub fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let b: Option<Vec<u8>> =
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(b?).ok()
}

/// Client OPEN options for POSIX open flags (creation flags only when `create_ok`).
pub fn open_options(flags: c_int, mode: u32, create_ok: bool) -> OpenOptions {
    let o = match flags & libc::O_ACCMODE {
        libc::O_WRONLY => OpenOptions::write_only(),
        libc::O_RDWR => OpenOptions::read_write(),
        _ => OpenOptions::read(),
    };
    let creat = create_ok && flags & libc::O_CREAT != 0;
    o.create(creat)
        .exclusive(creat && flags & libc::O_EXCL != 0)
        .truncate(
            create_ok && flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY,
        )
        .append(flags & libc::O_APPEND != 0)
        .mode(mode)
}

impl State {
    fn new() -> State {
        let cfg = config();
        State {
            mounts: cfg.mounts.iter().map(|_| MountState::default()).collect(),
            ofds: HashMap::new(),
            fds: HashMap::new(),
            next_ofd: 1,
            dirs: HashSet::new(),
            umask: read_umask(),
        }
    }

    // -------------------------------------------------------------------- sessions

    /// Connect mount `m` if it has no session (lazily: at its first use).
    pub fn connect(&mut self, m: usize) -> Result<(), c_int> {
        if self.mounts[m].client.is_some() {
            return Ok(());
        }
        let mc = &config().mounts[m];
        let secret = match &config().secret {
            None => None,
            Some(Ok(s)) => Some(s.clone()),
            Some(Err(e)) => {
                if !self.mounts[m].warned {
                    eprintln!("dafs-preload: {e}");
                    self.mounts[m].warned = true;
                }
                return Err(libc::EACCES);
            }
        };
        let before = list_fds();
        match Client::connect(&mc.target, ClientConfig { secret, ..Default::default() }) {
            Ok(c) => {
                let ms = &mut self.mounts[m];
                ms.conn_fds = list_fds().into_iter().filter(|fd| !before.contains(fd)).collect();
                for &fd in &ms.conn_fds {
                    mark_internal(fd, true);
                }
                debug!(
                    "connected {} -> {} ({}, session {})",
                    mc.prefix,
                    mc.url,
                    c.provider(),
                    c.session_id()
                );
                ms.client = Some(c);
                ms.gen += 1;
                ms.warned = false;
                Ok(())
            }
            Err(e) => {
                let ms = &mut self.mounts[m];
                if !ms.warned {
                    eprintln!("dafs-preload: cannot connect to {} for {}: {e}", mc.url, mc.prefix);
                    ms.warned = true;
                }
                Err(match e.errno() {
                    0 => libc::EIO,
                    n => n,
                })
            }
        }
    }

    /// Map a failure to errno; a lost connection drops the session (the next call
    /// reconnects, and open files are re-opened by path).
    pub fn fail(&mut self, m: usize, f: Fail) -> c_int {
        match f {
            Fail::Errno(e) => e,
            Fail::Client(e) => {
                // The client library recovers broken connections by itself (re-binding the
                // session); what reaches here is a connection it could not recover, or a
                // session the server no longer knows (restarted, lease expired, fenced).
                if matches!(
                    e,
                    Error::Transport(_)
                        | Error::Disconnected
                        | Error::Protocol(_)
                        | Error::Status(
                            dafs_proto::Status::BadSession | dafs_proto::Status::Fenced
                        )
                ) {
                    eprintln!("dafs-preload: connection to {} lost: {e}", config().mounts[m].url);
                    let ms = &mut self.mounts[m];
                    for fd in ms.conn_fds.drain(..) {
                        mark_internal(fd, false);
                    }
                    if let Some(c) = ms.client.take() {
                        drop(c);
                    }
                    ms.locked.clear();
                }
                match e.errno() {
                    0 => libc::EIO,
                    n => n,
                }
            }
        }
    }

    /// Run `f` with mount `m`'s client.
    pub fn call<T>(&mut self, m: usize, f: impl FnOnce(&mut Client) -> FR<T>) -> Result<T, c_int> {
        self.connect(m)?;
        let c = self.mounts[m].client.as_mut().ok_or(libc::ENOTCONN)?;
        f(c).map_err(|e| self.fail(m, e))
    }

    /// In a forked child: the inherited session belongs to the parent. Forget it
    /// without sending anything on it (the parent keeps using it), close the child's
    /// copies of its descriptors, and let the next call open a new session and re-open
    /// the inherited files by path.
    fn forget_sessions(&mut self) {
        for ms in &mut self.mounts {
            if let Some(c) = ms.client.take() {
                // Dropping would end the parent's session (SESSION_DESTROY): forget it.
                std::mem::forget(c);
            }
            for fd in ms.conn_fds.drain(..) {
                mark_internal(fd, false);
                real_close(fd);
            }
            // POSIX locks are not inherited by a child.
            ms.locked.clear();
        }
    }

    /// Make the open file description usable in the current session (re-open by path
    /// after fork, exec or a reconnect).
    pub fn ensure(&mut self, id: u64) -> Result<(), c_int> {
        let m = self.ofds.get(&id).ok_or(libc::EBADF)?.mount;
        self.connect(m)?;
        let gen = self.mounts[m].gen;
        let o = self.ofds.get(&id).ok_or(libc::EBADF)?;
        if o.gen == gen {
            return Ok(());
        }
        let (rel, kind, flags) = (o.rel.clone(), o.kind, o.flags);
        debug!("re-opening {} in the new session", o.vpath);
        let r = self.call(m, |c| match kind {
            Kind::File => {
                let f = c.open(&rel, open_options(flags, 0, false))?;
                Ok((f.fh, Some(f)))
            }
            _ => Ok((c.lookup(&rel)?.0, None)),
        });
        let (fh, file) = r?;
        let o = self.ofds.get_mut(&id).ok_or(libc::EBADF)?;
        o.fh = fh;
        o.file = file;
        o.gen = gen;
        Ok(())
    }

    pub fn ofd_id(&self, fd: c_int) -> Result<u64, c_int> {
        self.fds.get(&fd).map(|e| e.ofd).ok_or(libc::EBADF)
    }

    /// Run `f` on the client and open file description of dafs descriptor `fd`.
    pub fn with_ofd<T>(
        &mut self,
        fd: c_int,
        f: impl FnOnce(&mut Client, &mut Ofd) -> FR<T>,
    ) -> Result<T, c_int> {
        let id = self.ofd_id(fd)?;
        self.ensure(id)?;
        let o = self.ofds.get_mut(&id).ok_or(libc::EBADF)?;
        let m = o.mount;
        let c = self.mounts[m].client.as_mut().ok_or(libc::ENOTCONN)?;
        f(c, o).map_err(|e| self.fail(m, e))
    }

    // -------------------------------------------------------------------- descriptors

    /// Reserve a kernel descriptor for a new open file description and register it.
    pub fn install(&mut self, ofd: Ofd, cloexec: bool) -> Result<c_int, c_int> {
        let fd = real_open(c"/dev/null", libc::O_PATH | if cloexec { libc::O_CLOEXEC } else { 0 });
        if fd < 0 {
            let e = crate::real::errno();
            self.release_ofd_value(ofd);
            return Err(e);
        }
        if fd as usize >= FD_MAX {
            real_close(fd);
            self.release_ofd_value(ofd);
            return Err(libc::EMFILE);
        }
        let id = self.next_ofd;
        self.next_ofd += 1;
        self.ofds.insert(id, ofd);
        self.add_fd(fd, id, cloexec);
        Ok(fd)
    }

    fn release_ofd_value(&mut self, o: Ofd) {
        let m = o.mount;
        let current = o.gen == self.mounts[m].gen;
        if let (Some(f), Some(c), true) = (o.file, self.mounts[m].client.as_mut(), current) {
            let _ = c.close(f);
        }
    }

    /// Make `fd` (a reserved kernel descriptor) name open file description `id`.
    pub fn add_fd(&mut self, fd: c_int, id: u64, cloexec: bool) {
        if self.fds.contains_key(&fd) {
            let _ = self.drop_fd(fd);
        }
        if let Some(o) = self.ofds.get_mut(&id) {
            o.refs += 1;
        }
        self.fds.insert(fd, FdEnt { ofd: id, cloexec });
        mark(fd, true);
    }

    /// Forget descriptor `fd` (the caller closes the kernel descriptor): release the
    /// process's POSIX locks on the file, and close the file when it was the last
    /// descriptor of its open file description.
    pub fn drop_fd(&mut self, fd: c_int) -> Result<(), c_int> {
        let Some(ent) = self.fds.remove(&fd) else { return Ok(()) };
        mark(fd, false);
        let Some(o) = self.ofds.get_mut(&ent.ofd) else { return Ok(()) };
        o.refs = o.refs.saturating_sub(1);
        let (m, last, fileid) = (o.mount, o.refs == 0, o.file.as_ref().map(|f| f.attr.fileid));
        let current = o.gen == self.mounts[m].gen;
        let mut res = Ok(());
        if let Some(fid) = fileid {
            if current && self.mounts[m].locked.remove(&fid) {
                let id = ent.ofd;
                // POSIX: closing any descriptor of a file releases all of the process's
                // locks on it.
                res = self.with_ofd_id(id, |c, o| Ok(c.unlock(o.file.as_ref().unwrap(), 0, 0)?));
            }
        }
        if last {
            let o = self.ofds.remove(&ent.ofd).unwrap();
            if let (Some(f), true) = (o.file, current) {
                if let Some(c) = self.mounts[m].client.as_mut() {
                    if let Err(e) = c.close(f) {
                        let e = self.fail(m, e.into());
                        res = res.and(Err(e));
                    }
                }
            }
        }
        res
    }

    fn with_ofd_id<T>(
        &mut self,
        id: u64,
        f: impl FnOnce(&mut Client, &mut Ofd) -> FR<T>,
    ) -> Result<T, c_int> {
        let o = self.ofds.get_mut(&id).ok_or(libc::EBADF)?;
        let m = o.mount;
        let c = self.mounts[m].client.as_mut().ok_or(libc::ENOTCONN)?;
        f(c, o).map_err(|e| self.fail(m, e))
    }

    // -------------------------------------------------------------------- exec

    /// The DAFS_PRELOAD_FDS value describing the descriptors an exec keeps
    /// (`fd:kind:flags:offset:hexpath`, comma separated), or None.
    /// `actions`: posix_spawn file actions to apply first, in order: (from, to) is
    /// dup2(from, to), (-1, fd) is close(fd).
    pub fn exec_fds(&self, actions: &[(c_int, c_int)]) -> Option<String> {
        let mut v: Vec<String> = Vec::new();
        let mut table: HashMap<c_int, (u64, bool)> =
            self.fds.iter().map(|(fd, e)| (*fd, (e.ofd, e.cloexec))).collect();
        if in_vfork_child() {
            for (fd, e) in vfork_overlay() {
                match e {
                    Some(x) => table.insert(fd, x),
                    None => table.remove(&fd),
                };
            }
        }
        for &(from, to) in actions {
            if from < 0 {
                table.remove(&to);
            } else if from != to {
                match table.get(&from).copied() {
                    Some((id, _)) => table.insert(to, (id, false)),
                    None => table.remove(&to),
                };
            } else if let Some(e) = table.get_mut(&to) {
                // dup2(fd, fd) in a file action clears close-on-exec.
                e.1 = false;
            }
        }
        for (fd, (ofd, cloexec)) in &table {
            if *cloexec {
                continue;
            }
            let Some(o) = self.ofds.get(ofd) else { continue };
            let k = match o.kind {
                Kind::File => 'f',
                Kind::Dir => 'd',
                Kind::Path => 'p',
            };
            v.push(format!("{fd}:{k}:{}:{}:{}", o.flags, o.offset, hex(&o.vpath)));
        }
        if v.is_empty() {
            None
        } else {
            Some(v.join(","))
        }
    }

    /// In a freshly exec'd program: take over the descriptors the parent described,
    /// if they still are our placeholders (an O_PATH descriptor of /dev/null).
    fn adopt_inherited(&mut self, spec: &str) {
        let mut null: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid path and an out-buffer we own.
        if unsafe { libc::stat(c"/dev/null".as_ptr(), &mut null) } != 0 {
            return;
        }
        let mut by_ofd: HashMap<(String, u64, c_int), u64> = HashMap::new();
        for ent in spec.split(',') {
            let f: Vec<&str> = ent.split(':').collect();
            if f.len() != 5 {
                continue;
            }
            let (Ok(fd), Ok(flags), Ok(offset), Some(vpath)) =
                (f[0].parse::<c_int>(), f[2].parse::<c_int>(), f[3].parse::<u64>(), unhex(f[4]))
            else {
                continue;
            };
            let kind = match f[1] {
                "f" => Kind::File,
                "d" => Kind::Dir,
                _ => Kind::Path,
            };
            if fd < 0 || fd as usize >= FD_MAX {
                continue;
            }
            // SAFETY: F_GETFL takes no argument.
            let fl = unsafe { real!(fcntl: fn(c_int, c_int, ...) -> c_int)(fd, libc::F_GETFL) };
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: an out-buffer we own.
            let ok = fl >= 0
                && fl & libc::O_PATH != 0
                && unsafe { real!(fstat: fn(c_int, *mut libc::stat) -> c_int)(fd, &mut st) } == 0
                && st.st_rdev == null.st_rdev
                && st.st_mode & libc::S_IFMT == libc::S_IFCHR;
            if !ok {
                continue;
            }
            let Some((mount, rel)) = paths::split_mount(&config().mounts, &vpath) else { continue };
            // Descriptors that shared one description (dup) before the exec share one
            // again only if they agree on everything; otherwise each gets its own.
            let key = (vpath.clone(), offset, flags);
            let id = match by_ofd.get(&key) {
                Some(&id) => id,
                None => {
                    let id = self.next_ofd;
                    self.next_ofd += 1;
                    let is_dir = kind == Kind::Dir;
                    self.ofds.insert(
                        id,
                        Ofd {
                            mount,
                            rel,
                            vpath,
                            kind,
                            is_dir,
                            file: None,
                            fh: FileHandle([0; 32]),
                            gen: 0,
                            offset,
                            flags,
                            opened_append: flags & libc::O_APPEND != 0,
                            refs: 0,
                        },
                    );
                    by_ofd.insert(key, id);
                    id
                }
            };
            self.add_fd(fd, id, false);
            debug!("inherited dafs descriptor {fd}");
        }
    }

    /// The entries of directory `id`: ".", "..", then the server's.
    pub fn list_dir(&mut self, id: u64) -> Result<Vec<(Vec<u8>, u64, u8)>, c_int> {
        self.ensure(id)?;
        let (fh, is_root) = {
            let o = &self.ofds[&id];
            (o.fh, o.rel == config().mounts[o.mount].base)
        };
        self.with_ofd_id(id, |c, _| {
            let me = c.getattr(fh)?.fileid;
            let parent =
                if is_root { me } else { c.lookup_parent(fh).map(|(_, a)| a.fileid).unwrap_or(me) };
            let mut v =
                vec![(b".".to_vec(), me, libc::DT_DIR), (b"..".to_vec(), parent, libc::DT_DIR)];
            let mut cookie = 0;
            loop {
                let (page, next, eof) = c.readdir_page(fh, cookie, 0)?;
                v.extend(page.into_iter().map(|e| (e.name, e.fileid, dtype(e.ftype))));
                if eof {
                    return Ok(v);
                }
                cookie = next;
            }
        })
    }
}

// ------------------------------------------------------------------------ paths

impl Cwd {
    fn real(&mut self) -> Option<&str> {
        if self.real.is_none() {
            let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
            // SAFETY: a buffer of buf.len() bytes.
            let p = unsafe {
                real!(getcwd: fn(*mut libc::c_char, usize) -> *mut libc::c_char)(
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if !p.is_null() {
                let n = buf.iter().position(|&b| b == 0).unwrap_or(0);
                self.real = String::from_utf8(buf[..n].to_vec()).ok();
            }
        }
        self.real.as_deref()
    }

    /// Set (Some) or clear the virtual working directory; the environment carries it to
    /// child programs, however they are started.
    pub fn set(&mut self, v: Option<String>) {
        match &v {
            Some(p) => std::env::set_var(CWD_ENV, p),
            None if self.vcwd.is_some() || std::env::var_os(CWD_ENV).is_some() => {
                std::env::remove_var(CWD_ENV)
            }
            None => {}
        }
        self.vcwd = v;
        self.real = None;
    }
}

/// Resolve a path argument relative to `dirfd` (AT_FDCWD, a dafs directory, or a local
/// directory descriptor). Absolute paths outside every prefix take no lock at all.
pub fn resolve(dirfd: c_int, path: &[u8]) -> Result<Res, c_int> {
    let mounts = &config().mounts;
    if mounts.is_empty() || path.is_empty() {
        return Ok(Res::Local(None));
    }
    let Ok(p) = std::str::from_utf8(path) else { return Ok(Res::Local(None)) };
    let abs = if p.starts_with('/') {
        if !paths::maybe_mounted(mounts, path) {
            return Ok(Res::Local(None));
        }
        paths::normalize(p)
    } else if dirfd == libc::AT_FDCWD {
        let r = CWD.with(|w| match &w.vcwd {
            Some(v) => Some((paths::absolute(v, p), true)),
            None => w.real().map(|c| (paths::absolute(c, p), false)),
        });
        match r {
            Some((abs, true)) if paths::split_mount(mounts, &abs).is_none() => {
                return Ok(Res::Local(CString::new(abs).ok()))
            }
            Some((abs, _)) => abs,
            None => return Ok(Res::Local(None)),
        }
    } else if is_dafs_fd(dirfd) {
        let (is_dir, vpath) = with(|st| {
            st.ofd_id(dirfd).map(|id| (st.ofds[&id].is_dir, st.ofds[&id].vpath.clone()))
        })?;
        if !is_dir {
            return Err(libc::ENOTDIR);
        }
        let abs = paths::absolute(&vpath, p);
        if paths::split_mount(mounts, &abs).is_none() {
            return Ok(Res::Local(CString::new(abs).ok()));
        }
        abs
    } else {
        return Ok(Res::Local(None));
    };
    Ok(match paths::split_mount(mounts, &abs) {
        Some((mount, rel)) => Res::Dafs(Target { mount, rel, vpath: abs }),
        // "/dafs/../x" leaves the prefix: the kernel cannot walk through "/dafs" (it
        // does not exist locally), so libc gets the normalised path.
        None if p.starts_with('/') && !paths::through_prefix(mounts, path) => Res::Local(None),
        // Relative to the real working directory and not under a prefix: unchanged.
        None if !p.starts_with('/') && dirfd == libc::AT_FDCWD => Res::Local(None),
        None => Res::Local(CString::new(abs).ok()),
    })
}
