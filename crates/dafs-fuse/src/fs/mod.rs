//! [`DafsFs`], the FUSE file system over one DAFS session: its state and the helpers
//! every family of operations uses. The kernel's requests are answered in `ops`
//! (the `fuser::Filesystem` implementation); what they share lives beside it:
//! `cred` (the caller stated to the server), `handles` (an inode's working handle, looked up again when the server says STALE),
//! `session` (failures and a new session after a server restart), `namespace` (new
//! objects), `file` (open files and writes), `dir` (paged directory listings), `dirplus` (listings with attributes) and
//! `xattr` (extended attributes over named attributes).

mod cache;
mod cred;
mod dir;
mod dirplus;
mod file;
mod handles;
mod namespace;
mod ops;
mod session;
mod workers;
mod xattr;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use dafs_client::dafs_proto::{Attr, FileHandle};
use dafs_client::{Client, Error};
use fuser::{Notifier, ReplyEntry};

use crate::convert::file_attr;
use crate::inode::{InodeTable, Node};
use crate::options::{CacheMode, MountOptions};
use dir::OpenDir;
use file::OpenFile;
pub use workers::Connect;

/// Largest kernel write (and read) request: the kernel splits larger I/O. 1 MiB keeps
/// large sequential I/O on the client's direct (RDMA-style) path without making small
/// writes wait for a huge buffer.
pub const IO_BYTES_MAX: u32 = 1 << 20;

/// The FUSE file system over one DAFS session.
pub struct DafsFs {
    /// The mount's main session: every request but large reads and writes (see
    /// `workers`), which fall back to it when their worker cannot serve them.
    c: Arc<Mutex<Client>>,
    /// The worker threads that serve large reads and writes over sessions of their own.
    io: workers::IoPool,
    ttl: Duration,
    /// How the kernel may cache file data.
    cache: CacheMode,
    /// The kernel buffers writes (`-o writeback_cache`, granted by the kernel at init).
    writeback: bool,
    /// The inodes the kernel knows.
    inodes: InodeTable,
    /// Open files by the handle number the kernel was given.
    opens: HashMap<u64, OpenFile>,
    /// Open directories by the handle number the kernel was given.
    dirs: HashMap<u64, OpenDir>,
    /// The next handle number for an open file or directory (one sequence for both).
    next_fh: u64,
    /// Logged once: after the connection is lost every request fails the same way.
    reported_dead: bool,
    export: String,
    /// When a new session was last tried for a dead client (at most once a second).
    last_recovery: Option<Instant>,
    /// The caller last stated to the server (identity mode `asserted`).
    cred: cred::CredState,
    /// Tells the kernel to drop what it cached (set once the session exists).
    notifier: Arc<OnceLock<Notifier>>,
}

impl DafsFs {
    /// A file system serving `c`'s export.
    /// `connect` makes the sessions of the I/O workers (`opts.io_threads` of them; a
    /// worker whose session cannot be made is left out, with a warning).
    pub fn new(
        mut c: Client,
        opts: &MountOptions,
        connect: workers::Connect,
    ) -> Result<DafsFs, Error> {
        let root = c.root_handle();
        let attr = c.getattr(root)?;
        let c = Arc::new(Mutex::new(c));
        let io = workers::IoPool::start(opts.io_threads, connect, c.clone());
        Ok(DafsFs {
            c,
            io,
            ttl: opts.attr_ttl,
            cache: opts.cache,
            writeback: opts.writeback(),
            inodes: InodeTable::new(root, attr),
            opens: HashMap::new(),
            dirs: HashMap::new(),
            next_fh: 1,
            reported_dead: false,
            export: opts.export.clone(),
            last_recovery: None,
            cred: cred::CredState::default(),
            notifier: Arc::default(),
        })
    }

    /// The main session (a worker may be using it for a moment: see `workers`).
    fn c(&self) -> MutexGuard<'_, Client> {
        self.c.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn node(&self, ino: u64) -> Result<&Node, i32> {
        self.inodes.get(ino).ok_or(libc::ESTALE)
    }

    fn entry(&mut self, parent: u64, name: &[u8], fh: FileHandle, attr: Attr, reply: ReplyEntry) {
        let ino = self.inodes.remember(parent, name, fh, attr);
        reply.entry(&self.ttl, &file_attr(ino, &attr), 0);
    }

    /// Where the mount puts the session's notifier once the session exists.
    pub fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        self.notifier.clone()
    }

    /// Drop the kernel's cached attributes of `ino` (not its pages: an open drops those
    /// by itself), so its next use asks again. Only attributes: invalidating pages from
    /// inside a request could wait on pages that request holds.
    fn invalidate_attrs(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            if let Err(e) = n.inval_inode(ino, -1, 0) {
                tracing::debug!("attribute invalidation of inode {ino} failed: {e}");
            }
        }
    }

    fn new_fh(&mut self) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        fh
    }
}
