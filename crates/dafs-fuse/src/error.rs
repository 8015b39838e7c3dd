//! Why a mount option list was refused ([`OptionError`]), and why mounting or
//! unmounting failed ([`MountError`]). The messages are what `dafs mount` and `dafs
//! umount` print: each names the path or option concerned and, where there is one,
//! the way out.

use std::io;
use std::path::PathBuf;

use crate::options::ATTR_TTL_MS_MAX;

/// A `-o` list that [`crate::MountOptions::parse_list`] refused: a usage error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionError {
    /// `attr_ttl_ms=` with something other than a whole number.
    #[error("-o attr_ttl_ms={value}: not a number of milliseconds")]
    AttrTtlNotNumber { value: String },
    /// `attr_ttl_ms=` above the limit.
    #[error("-o attr_ttl_ms={value}: at most {max} (one hour)", max = ATTR_TTL_MS_MAX)]
    AttrTtlTooLong { value: String },
    /// `cache=` with something other than a cache mode.
    #[error("-o cache={value}: not a cache mode (cto or strict)")]
    CacheMode { value: String },
    /// `threads=` with something other than 0 to `IO_THREADS_MAX`.
    #[error("-o threads={value}: not a number of I/O threads from 0 to 32")]
    Threads { value: String },
    /// An option this mount does not know.
    #[error(
        "-o {option}: unknown mount option (known: ro, rw, allow_other, allow_root, attr_ttl_ms=N, cache=cto|strict, writeback_cache, threads=N)"
    )]
    Unknown { option: String },
    /// `allow_other` and `allow_root` together.
    #[error("-o allow_other and allow_root exclude each other")]
    AllowOtherAndRoot,
}

/// Why [`crate::mount`] or [`crate::unmount`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// `path` cannot be examined (missing, no permission, no current directory).
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The mount point is not a directory.
    #[error("{}: not a directory", path.display())]
    NotDirectory { path: PathBuf },
    /// A dafs mount is on this mount point already.
    #[error("{}: already a dafs mount point", path.display())]
    AlreadyMounted { path: PathBuf },
    /// Nothing to unmount: `path` is not a dafs mount point.
    #[error("{}: not a dafs mount point (see /proc/mounts)", path.display())]
    NotMounted { path: PathBuf },
    /// A path the kernel cannot be given (it holds a NUL byte).
    #[error("{}: path contains NUL", path.display())]
    PathNul { path: PathBuf },
    /// No FUSE device on this machine.
    #[error(
        "/dev/fuse does not exist: load the fuse kernel module (modprobe fuse) or, in a container, pass the device in"
    )]
    NoFuseDevice,
    /// The export's root could not be read (the first request of the mount).
    #[error("export root: {0}")]
    ExportRoot(#[source] dafs_client::Error),
    /// mount(2) (through fuser) failed.
    #[error("mount on {}: {source}", path.display())]
    Mount {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The fusermount3 helper could not be started.
    #[error("cannot run fusermount3 (install the fuse3 package): {0}")]
    FusermountMissing(#[source] io::Error),
    /// fusermount3 refused to mount; `stderr` is what it said.
    #[error("mount on {}: fusermount3: {stderr}", path.display())]
    Fusermount { path: PathBuf, stderr: String },
    /// fusermount3 mounted but did not hand over the /dev/fuse descriptor (the mount
    /// has been detached again).
    #[error("mount on {}: fusermount3 mounted but passed no /dev/fuse descriptor", path.display())]
    FusermountNoDescriptor { path: PathBuf },
    /// The socket pair for fusermount3's descriptor could not be made.
    #[error("socketpair: {0}")]
    SocketPair(#[source] io::Error),
    /// The thread that unmounts on SIGINT/SIGTERM/SIGHUP could not be started.
    #[error("signal thread: {0}")]
    SignalThread(#[source] io::Error),
    /// Serving the mount ended with an error (not by an unmount).
    #[error("serving {}: {source}", path.display())]
    Serve {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// umount2(2) failed.
    #[error("{}: {source}", path.display())]
    Unmount {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// umount2(2) failed because programs still use the mount.
    #[error("{}: {source} (still in use; retry later or use --lazy)", path.display())]
    Busy {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// `fusermount3 -u` refused; `stderr` is what it said.
    #[error("fusermount3 -u {}: {stderr}", path.display())]
    FusermountUnmount { path: PathBuf, stderr: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_errors_read_as_before() {
        let p = || PathBuf::from("/mnt/x");
        let busy = || io::Error::from_raw_os_error(libc::EBUSY);
        assert_eq!(
            MountError::Busy { path: p(), source: busy() }.to_string(),
            format!("/mnt/x: {} (still in use; retry later or use --lazy)", busy())
        );
        assert_eq!(
            MountError::NotMounted { path: p() }.to_string(),
            "/mnt/x: not a dafs mount point (see /proc/mounts)"
        );
        assert_eq!(
            MountError::Fusermount { path: p(), stderr: "no".into() }.to_string(),
            "mount on /mnt/x: fusermount3: no"
        );
        assert_eq!(
            MountError::FusermountUnmount { path: p(), stderr: "no".into() }.to_string(),
            "fusermount3 -u /mnt/x: no"
        );
        assert!(MountError::NoFuseDevice.to_string().starts_with("/dev/fuse does not exist: "));
    }
}
