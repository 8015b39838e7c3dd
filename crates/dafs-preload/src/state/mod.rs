//! Process-wide state: configuration, per-mount clients, descriptors, open file
//! descriptions, directory streams and the virtual working directory — all behind one
//! mutex, because a `Client` is used by one thread at a time.
//!
//! - [`config`]: the environment, read once (and the `debug!` macro);
//! - [`lock`]: the fork-safe mutex; `with` runs code on the state under it;
//! - [`session`]: per mount a lazily connected client, errors mapped to errno;
//! - [`ofd`], [`fds`], [`fdmap`]: open file descriptions, the descriptor table, and the
//!   lock-free bitmaps every fd-taking function tests first;
//! - [`aio`]: POSIX AIO requests on dafs descriptors;
//! - [`dirs`]: directory streams; [`cwd`] and [`resolve`]: what a path argument names;
//! - [`vfork`] and [`handover`]: children that share the parent's memory, and the
//!   descriptors and working directory an exec hands to the next program.

use std::collections::{HashMap, HashSet};
use std::ffi::c_int;

use dafs_client::Error;

use crate::paths;

#[macro_use]
mod config;
mod aio;
mod cred;
mod cwd;
mod dirs;
mod fdmap;
mod fds;
mod handover;
mod lock;
mod ofd;
mod resolve;
mod session;
mod vfork;

pub use aio::{aio_requests_max, AioState, Aiocb, Submitted, AIO_ACTIVE};
pub use config::config;
pub use cwd::CWD;
pub use dirs::DirStream;
pub use fdmap::{is_dafs_fd, is_internal_fd, DIRS_OPEN};
pub use fds::real_close;
pub use handover::{CLOSE_ACTION, CWD_ENV, FDS_ENV};
pub use ofd::{open_options, Kind, Ofd};
pub use resolve::{resolve, Last, Res, Tail, Target};
pub use vfork::{in_vfork_child, vfork_note, VFORK_USED};

use lock::Locked;
use session::MountState;

/// The process's umask when `/proc/self/status` cannot tell (the usual default).
const UMASK_DEFAULT: u32 = 0o022;

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
    pub fds: HashMap<c_int, ofd::FdEnt>,
    next_ofd: u64,
    /// Addresses of our DirStreams.
    pub dirs: HashSet<usize>,
    /// The process umask (read at start, tracked through umask()).
    pub umask: u32,
    /// POSIX AIO requests on dafs descriptors.
    aio: aio::AioTable,
}

static G: Locked<Option<State>> = Locked::new(None);

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
    vfork::set_owner();
    // SAFETY: G is held (fork_prepare), and no reference to the state is live: the
    // thread that forked is in fork(), not inside `with`.
    unsafe {
        G.with_held(|st| {
            if let Some(st) = st {
                st.forget_sessions();
            }
        })
    };
    CWD.unlock_raw();
    G.unlock_raw();
}

/// End this process's sessions (SESSION_DESTROY): at exit, and before an exec, whose
/// new program starts sessions of its own (it re-opens the handed-over descriptors by
/// path). Left alone, each would stay parked on the server for its whole lease, and a
/// few hundred short commands would fill the server's session table. Not in a vfork
/// child, whose sessions are its parent's; not if the state is locked (an exit from
/// inside the library): then the server's lease ends the session.
pub fn end_sessions() {
    if in_vfork_child() {
        return;
    }
    let _g = crate::real::Entered::enter();
    G.try_with(|st| {
        if let Some(st) = st {
            st.end_sessions();
        }
    });
}

/// Called once at load (constructor): fork handlers, and descriptors and working
/// directory handed over by an exec.
pub fn init() {
    let _g = crate::real::Entered::enter();
    vfork::set_owner();
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

fn read_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Umask:").and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
        })
        .unwrap_or(UMASK_DEFAULT)
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
            aio: aio::AioTable::default(),
        }
    }
}
