//! Metadata ops: the export's root handle, lookups, attributes, access checks, symlink
//! targets and file system statistics.

use std::os::fd::AsFd;
use std::sync::atomic::Ordering::Relaxed;

use dafs_proto::types::{access_mask, setattr_mask, SetAttrs};
use dafs_proto::{limits, FileHandle, FileType, Reply, Status};
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use tracing::warn;

use super::check_writable;
use crate::fsops::{self, st};
use crate::Shared;

/// GET_ROOTHANDLE: the named export's root (the first export for an empty name), if
/// its client rules admit `client_id`.
pub(super) fn get_root_handle(
    sh: &Shared,
    client_id: &str,
    export: &[u8],
) -> Result<Reply<'static>, Status> {
    let idx = if export.is_empty() {
        0
    } else {
        let name = export.strip_prefix(b"/").unwrap_or(export);
        sh.cfg.exports.iter().position(|e| e.name.as_bytes() == name).ok_or(Status::NoEnt)?
    };
    if !sh.cfg.exports[idx].admits(client_id) {
        sh.stats.access_refusals.fetch_add(1, Relaxed);
        warn!(client = %client_id, export = %sh.cfg.exports[idx].name, "attach refused by the export's client rules");
        return Err(Status::Access);
    }
    let fd = sh.handles.retry_fds(|| sh.roots[idx].try_clone().map_err(fsops::io_st))?;
    let (fh, stat) = sh.handles.insert(fd, idx as u32)?;
    Ok(Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
}

pub(super) fn lookup(
    sh: &Shared,
    dir: &FileHandle,
    path: &[u8],
    follow: bool,
) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(dir)?;
    let fd = sh.handles.retry_fds(|| fsops::lookup(d.fd.as_fd(), path, follow))?;
    let (fh, stat) = sh.handles.insert(fd, d.export)?;
    Ok(Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
}

pub(super) fn lookup_parent(sh: &Shared, fh: &FileHandle) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(fh)?;
    let me = fsops::fstat(d.fd.as_fd())?;
    let root = fsops::fstat(sh.roots[d.export as usize].as_fd())?;
    if me.st_dev == root.st_dev && me.st_ino == root.st_ino {
        return Err(Status::NoEnt); // the export root has no parent
    }
    if FileType::from_mode(me.st_mode) != FileType::Directory {
        return Err(Status::NotDir);
    }
    // The parent of a directory beneath the root is the root or beneath it.
    let p = sh.handles.retry_fds(|| {
        rfs::openat(d.fd.as_fd(), c"..", OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).map_err(st)
    })?;
    let (fh, stat) = sh.handles.insert(p, d.export)?;
    Ok(Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
}

pub(super) fn get_attr(sh: &Shared, fh: &FileHandle) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(fh)?;
    let attr = fsops::getattr(d.fd.as_fd())?;
    Ok(Reply::Attr { attr })
}

pub(super) fn set_attr(
    sh: &Shared,
    fh: &FileHandle,
    set: &SetAttrs,
) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(fh)?;
    check_writable(sh, d.export)?;
    let fd = d.fd.as_fd();
    let path = fsops::proc_path(fd);
    if set.mask & setattr_mask::SIZE != 0 {
        // Only regular files have a size to set (truncate(2): EISDIR for a directory,
        // EINVAL for anything else — and a FIFO must not even be opened).
        let now = fsops::fstat(fd)?;
        match FileType::from_mode(now.st_mode) {
            FileType::Regular => {}
            FileType::Directory => return Err(Status::IsDir),
            _ => return Err(Status::Inval),
        }
        let f = sh.handles.retry_fds(|| fsops::reopen(fd, OFlags::WRONLY))?;
        fsops::set_size(f.as_fd(), set.size, now.st_size as u64)?;
    }
    if set.mask & setattr_mask::MODE != 0 {
        rfs::chmod(path.as_c_str(), Mode::from_raw_mode(set.mode)).map_err(st)?;
    }
    if set.mask & (setattr_mask::UID | setattr_mask::GID) != 0 {
        if (set.mask & setattr_mask::UID != 0 && set.uid == u32::MAX)
            || (set.mask & setattr_mask::GID != 0 && set.gid == u32::MAX)
        {
            return Err(Status::Inval); // -1 means "unchanged" to the kernel; use the mask instead
        }
        // SAFETY: from_raw is unsafe only because -1 is special; excluded above.
        let uid = (set.mask & setattr_mask::UID != 0)
            .then(|| unsafe { rustix::fs::Uid::from_raw(set.uid) });
        // SAFETY: as above.
        let gid = (set.mask & setattr_mask::GID != 0)
            .then(|| unsafe { rustix::fs::Gid::from_raw(set.gid) });
        rfs::chownat(fd, c"", uid, gid, AtFlags::EMPTY_PATH).map_err(st)?;
    }
    let tmask = setattr_mask::ATIME
        | setattr_mask::ATIME_NOW
        | setattr_mask::MTIME
        | setattr_mask::MTIME_NOW;
    if set.mask & tmask != 0 {
        let pick = |set_bit: u32, now_bit: u32, ns: i64| {
            if set.mask & now_bit != 0 {
                rfs::Timespec { tv_sec: 0, tv_nsec: rfs::UTIME_NOW }
            } else if set.mask & set_bit != 0 {
                fsops::timespec_from_ns(ns)
            } else {
                rfs::Timespec { tv_sec: 0, tv_nsec: rfs::UTIME_OMIT }
            }
        };
        let ts = rfs::Timestamps {
            last_access: pick(setattr_mask::ATIME, setattr_mask::ATIME_NOW, set.atime_ns),
            last_modification: pick(setattr_mask::MTIME, setattr_mask::MTIME_NOW, set.mtime_ns),
        };
        rfs::utimensat(rfs::CWD, path.as_c_str(), &ts, AtFlags::empty()).map_err(st)?;
    }
    let attr = fsops::getattr(fd)?;
    Ok(Reply::Attr { attr })
}

pub(super) fn access(sh: &Shared, fh: &FileHandle, mask: u32) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(fh)?;
    let path = fsops::proc_path(d.fd.as_fd());
    let ro = sh.cfg.exports[d.export as usize].read_only;
    let mut granted = 0;
    for (bit, acc) in [
        (access_mask::READ, rfs::Access::READ_OK),
        (access_mask::WRITE, rfs::Access::WRITE_OK),
        (access_mask::EXECUTE, rfs::Access::EXEC_OK),
    ] {
        if mask & bit == 0 || (bit == access_mask::WRITE && ro) {
            continue;
        }
        if rfs::accessat(rfs::CWD, path.as_c_str(), acc, AtFlags::EACCESS).is_ok() {
            granted |= bit;
        }
    }
    Ok(Reply::Access { granted })
}

/// READLINK: the target goes into `held`, which the reply borrows.
pub(super) fn read_link<'a>(
    sh: &Shared,
    fh: &FileHandle,
    held: &'a mut Vec<u8>,
) -> Result<Reply<'a>, Status> {
    let d = sh.handles.resolve(fh)?;
    let target = rfs::readlinkat(d.fd.as_fd(), c"", Vec::new()).map_err(|e| {
        if e == rustix::io::Errno::NOENT {
            Status::Inval
        } else {
            st(e)
        }
    })?;
    let bytes = target.into_bytes();
    if bytes.len() > limits::PATH_BYTES_MAX {
        return Err(Status::NameTooLong);
    }
    *held = bytes;
    Ok(Reply::ReadLink { target: held })
}

pub(super) fn fs_stat(sh: &Shared, fh: &FileHandle) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(fh)?;
    let s = fsops::fsstat(d.fd.as_fd())?;
    Ok(Reply::FsStat(s))
}
