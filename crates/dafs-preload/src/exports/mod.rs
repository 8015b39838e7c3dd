//! The interposed functions. Each one either serves a dafs path / descriptor / DIR*
//! (with the reentrancy guard held) or calls the next definition (glibc) unchanged.
//!
//! SAFETY (module-wide): every function here is called by C code with the contract of
//! the libc function it replaces (valid NUL-terminated paths, buffers of the stated
//! length, `iovec` arrays of `cnt` entries, out-pointers to writable storage). The
//! `unsafe` blocks that only forward those arguments — to the real libc function, or to
//! an `unsafe fn` here taking the same contract — rely on exactly that and carry no
//! comment of their own; blocks that do anything more (reinterpreting memory, writing
//! through out-pointers after checks, building slices) say why they are sound. The
//! contract covers every submodule: one per family of functions.
//!
//! - [`args`]: classifying path and descriptor arguments (shared by every family);
//! - [`open`]: `open` and its variants, `creat`, `close`; [`tempfile`]: `mkstemp` & co.;
//! - [`data`]: `read`/`write` and their variants, `lseek`, `fsync`, truncation;
//!   [`aio`]: POSIX AIO on dafs descriptors, [`aio_notify`] its completion notification;
//! - [`stat`]: the stat family and `statx`; [`statfs`]: `statfs`/`statvfs`, `pathconf`;
//! - [`namespace`]: unlink, mkdir, rename, link, symlink, readlink, access; [`tails`]:
//!   the kernel's rules for trailing slashes and final '.' / '..' they apply;
//! - [`attrs`]: chmod, chown, utimes, umask, extended attributes;
//! - [`dirs`]: directory streams and `scandir`;
//! - [`descriptors`]: dup, fcntl, ioctl; [`locks`]: fcntl locks, `lockf`, `flock`;
//! - [`cwd`]: the working directory and `realpath`;
//! - [`exec`]: the exec family and `posix_spawn`;
//! - [`stdio`]: `FILE` streams; [`mmap`]: private mappings;
//! - [`sockets`]: `bind`/`connect` of UNIX-domain sockets named under a prefix.

#![allow(non_upper_case_globals)]

use crate::state;

#[macro_use]
mod macros;

pub mod aio;
mod aio_notify;
mod args;
pub mod attrs;
pub mod cwd;
pub mod data;
pub mod descriptors;
pub mod dirs;
pub mod exec;
pub mod locks;
pub mod mmap;
pub mod namespace;
pub mod open;
pub mod sockets;
pub mod stat;
pub mod statfs;
pub mod stdio;
mod tails;
pub mod tempfile;

pub use self::{
    aio::*, attrs::*, cwd::*, data::*, descriptors::*, dirs::*, exec::*, locks::*, mmap::*,
    namespace::*, open::*, sockets::*, stat::*, statfs::*, stdio::*, tempfile::*,
};

/// Runs when the library is loaded (before main): fork handlers, and the descriptors
/// and working directory an exec handed over.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    state::init();
    stdio::adopt_std_streams();
}

/// Runs at exit (`exit`, return from `main`; not `_exit` or a fatal signal, after which
/// the server's lease ends the session): end the sessions.
#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

extern "C" fn fini() {
    state::end_sessions();
}
