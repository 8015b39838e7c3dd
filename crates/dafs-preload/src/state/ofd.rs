//! Open file descriptions and the descriptors that name them.

use std::ffi::c_int;

use dafs_client::{File, OpenOptions};
use dafs_proto::FileHandle;

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

/// A descriptor: the open file description it names, and its close-on-exec flag.
pub struct FdEnt {
    pub ofd: u64,
    pub cloexec: bool,
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
