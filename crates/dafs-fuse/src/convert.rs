//! Conversions between DAFS and the kernel's FUSE types: attributes, file types and
//! times, and DAFS errors to the errno the kernel passes on.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dafs_client::dafs_proto::{Attr, FileType as DType, Status};
use dafs_client::Error;
use fuser::{FileAttr, FileType};

/// The permission bits of a mode: rwx for owner, group and others plus set-user-ID,
/// set-group-ID and sticky (everything but the file type).
pub(crate) const MODE_PERM_BITS: u32 = 0o7777;
/// The rwx bits alone: what a umask takes away from.
pub(crate) const MODE_RWX_BITS: u32 = 0o777;
/// Set-user-ID, set-group-ID and sticky: what the server's file system decides.
pub(crate) const MODE_SPECIAL_BITS: u32 = 0o7000;
/// `st_blocks` counts 512-byte units whatever the file system's block size (POSIX).
const STAT_BLOCK_BYTES: u64 = 512;
/// `st_blksize`: what stdio and cp size their buffers by; large I/O is what DAFS is
/// good at.
const STAT_BLKSIZE_BYTES: u32 = 128 * 1024;

pub(crate) fn errno(e: &Error) -> i32 {
    e.errno()
}

pub(crate) fn is_stale(e: &Error) -> bool {
    matches!(e.status(), Some(Status::Stale) | Some(Status::BadHandle))
}

pub(crate) fn ftype(t: DType) -> FileType {
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

pub(crate) fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

pub(crate) fn time_ns(t: SystemTime) -> Result<i64, i32> {
    let ns = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).map_err(|_| libc::EINVAL)?,
        Err(e) => -i64::try_from(e.duration().as_nanos()).map_err(|_| libc::EINVAL)?,
    };
    Ok(ns)
}

pub(crate) fn file_attr(ino: u64, a: &Attr) -> FileAttr {
    FileAttr {
        ino,
        size: a.size,
        blocks: a.used.div_ceil(STAT_BLOCK_BYTES),
        atime: time(a.atime_ns),
        mtime: time(a.mtime_ns),
        ctime: time(a.ctime_ns),
        crtime: time(a.ctime_ns),
        kind: ftype(a.ftype),
        perm: (a.mode & MODE_PERM_BITS) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev as u32,
        blksize: STAT_BLKSIZE_BYTES,
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        for ns in [0i64, 1, 1_700_000_000_123_456_789, -1, -1_500_000_000] {
            assert_eq!(time_ns(time(ns)).unwrap(), ns);
        }
    }
}
