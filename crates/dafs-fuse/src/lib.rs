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
//!
//! Modules: `options` (mount options), `inode` (the inode table), `convert` (DAFS
//! attributes, types, times and errors as the kernel wants them), `fs` (the file
//! system: its state, the `fuser::Filesystem` implementation and the helpers of each
//! family of operations), `mount` and `fusermount` (mounting, unmounting, signals),
//! `mountinfo` (recognizing a dafs mount), `error` (what can go wrong).

mod convert;
mod error;
mod fs;
mod fusermount;
mod inode;
mod mount;
mod mountinfo;
mod options;

pub use error::{MountError, OptionError};
pub use fs::{Connect, DafsFs, IO_BYTES_MAX};
pub use mount::{mount, unmount};
pub use mountinfo::is_dafs_mount;
pub use options::{CacheMode, MountOptions, IO_THREADS_MAX};
