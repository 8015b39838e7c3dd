//! Namespace ops: create, remove, rename, link, symlink, mknod, and directory listings.
//! Single-component names were validated by the decoder; every one is resolved beneath
//! the directory handle it comes with.

use std::ffi::CString;
use std::os::fd::AsFd;

use dafs_proto::{limits, rename_flags, DirEntry, FileHandle, FileType, Reply, Status, HEADER_LEN};
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, RenameFlags};

use super::check_writable;
use crate::fsops::{self, st};
use crate::Shared;

/// Room a READDIR reply needs besides its entries: the eof flag and the entry count (8
/// bytes) and the entries' heap reference (8) — 16 bytes, with a margin.
const READDIR_REPLY_FIXED_BYTES: usize = 32;

pub(super) fn create(
    sh: &Shared,
    dir: &FileHandle,
    ftype: FileType,
    mode: u32,
    exclusive: bool,
    name: &[u8],
) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(dir)?;
    check_writable(sh, d.export)?;
    match ftype {
        FileType::Directory => {
            let c = CString::new(name).map_err(|_| Status::BadName)?;
            rfs::mkdirat(d.fd.as_fd(), c.as_c_str(), Mode::from_raw_mode(mode)).map_err(st)?;
        }
        _ => {
            let mut fl = OFlags::RDONLY | OFlags::CREATE | OFlags::NOFOLLOW;
            if exclusive {
                fl |= OFlags::EXCL;
            }
            let f = sh.handles.retry_fds(|| fsops::open_in(d.fd.as_fd(), name, fl, mode))?;
            // The handle comes from the created file itself (no second lookup by name);
            // should that fail, an exclusive create is undone, or its retry would find
            // the file and answer EXIST.
            let (fh, stat) =
                fsops::undo_create_on_error(d.fd.as_fd(), name, &f, exclusive, || {
                    let fd = sh.handles.retry_fds(|| fsops::reopen(f.as_fd(), OFlags::PATH))?;
                    sh.handles.insert(fd, d.export)
                })?;
            return Ok(Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) });
        }
    }
    let fd = sh.handles.retry_fds(|| fsops::lookup(d.fd.as_fd(), name, false))?;
    let (fh, stat) = sh.handles.insert(fd, d.export)?;
    Ok(Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
}

/// REMOVE (`is_rmdir` false) or RMDIR.
pub(super) fn remove(
    sh: &Shared,
    dir: &FileHandle,
    name: &[u8],
    is_rmdir: bool,
) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(dir)?;
    check_writable(sh, d.export)?;
    let c = CString::new(name).map_err(|_| Status::BadName)?;
    let stat = rfs::statat(d.fd.as_fd(), c.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(st)?;
    let is_dir = FileType::from_mode(stat.st_mode) == FileType::Directory;
    if is_rmdir && !is_dir {
        return Err(Status::NotDir);
    }
    if !is_rmdir && is_dir {
        return Err(Status::IsDir);
    }
    let fl = if is_rmdir { AtFlags::REMOVEDIR } else { AtFlags::empty() };
    rfs::unlinkat(d.fd.as_fd(), c.as_c_str(), fl).map_err(st)?;
    if is_dir || stat.st_nlink <= 1 {
        sh.handles.forget(stat.st_dev, stat.st_ino, d.export);
    }
    Ok(Reply::Empty)
}

/// RENAME with `renameat2`: the wire's [`rename_flags`] are Linux's `RENAME_NOREPLACE`
/// and `RENAME_EXCHANGE`, so the file system itself answers EXIST (NOREPLACE onto an
/// existing name), NOENT (EXCHANGE with a missing side) and INVAL (a file system that
/// does not support the flag), atomically, with no check-then-act race here.
pub(super) fn rename(
    sh: &Shared,
    from_dir: &FileHandle,
    from_name: &[u8],
    to_dir: &FileHandle,
    to_name: &[u8],
    flags: u32,
) -> Result<Reply<'static>, Status> {
    // The decoder refused anything else; the asserts keep the wire and kernel values tied.
    debug_assert!(rename_flags::valid(flags));
    const _: () = assert!(rename_flags::NOREPLACE == libc::RENAME_NOREPLACE);
    const _: () = assert!(rename_flags::EXCHANGE == libc::RENAME_EXCHANGE);
    let f = sh.handles.resolve(from_dir)?;
    let t = sh.handles.resolve(to_dir)?;
    if f.export != t.export {
        return Err(Status::XDev);
    }
    check_writable(sh, f.export)?;
    let fc = CString::new(from_name).map_err(|_| Status::BadName)?;
    let tc = CString::new(to_name).map_err(|_| Status::BadName)?;
    let how = RenameFlags::from_bits_retain(flags);
    rfs::renameat_with(f.fd.as_fd(), fc.as_c_str(), t.fd.as_fd(), tc.as_c_str(), how)
        .map_err(st)?;
    Ok(Reply::Empty)
}

pub(super) fn link(
    sh: &Shared,
    fh: &FileHandle,
    dir: &FileHandle,
    name: &[u8],
) -> Result<Reply<'static>, Status> {
    let o = sh.handles.resolve(fh)?;
    let d = sh.handles.resolve(dir)?;
    if o.export != d.export {
        return Err(Status::XDev);
    }
    check_writable(sh, d.export)?;
    let ostat = fsops::fstat(o.fd.as_fd())?;
    if FileType::from_mode(ostat.st_mode) == FileType::Directory {
        return Err(Status::Perm);
    }
    let c = CString::new(name).map_err(|_| Status::BadName)?;
    let src = fsops::proc_path(o.fd.as_fd());
    rfs::linkat(rfs::CWD, src.as_c_str(), d.fd.as_fd(), c.as_c_str(), AtFlags::SYMLINK_FOLLOW)
        .map_err(st)?;
    let attr = fsops::getattr(o.fd.as_fd())?;
    Ok(Reply::Attr { attr })
}

pub(super) fn symlink(
    sh: &Shared,
    dir: &FileHandle,
    name: &[u8],
    target: &[u8],
) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(dir)?;
    check_writable(sh, d.export)?;
    let c = CString::new(name).map_err(|_| Status::BadName)?;
    let t = CString::new(target).map_err(|_| Status::Inval)?;
    rfs::symlinkat(t.as_c_str(), d.fd.as_fd(), c.as_c_str()).map_err(st)?;
    let fd = sh.handles.retry_fds(|| fsops::lookup(d.fd.as_fd(), name, false))?;
    let (fh, stat) = sh.handles.insert(fd, d.export)?;
    Ok(Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
}

/// MKNOD: a FIFO, socket or device node made as the real object (`mknodat`), so the
/// export holds what a local file system would. Its contents are never served: OPEN
/// refuses special files (a FIFO opened by a worker could block it).
pub(super) fn mknod(
    sh: &Shared,
    dir: &FileHandle,
    ftype: FileType,
    mode: u32,
    rdev: u64,
    name: &[u8],
) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(dir)?;
    check_writable(sh, d.export)?;
    let kind = match ftype {
        FileType::Fifo => rfs::FileType::Fifo,
        FileType::Socket => rfs::FileType::Socket,
        FileType::CharDevice => rfs::FileType::CharacterDevice,
        FileType::BlockDevice => rfs::FileType::BlockDevice,
        // The decoder admits only the four special types.
        _ => return Err(Status::Inval),
    };
    let c = CString::new(name).map_err(|_| Status::BadName)?;
    rfs::mknodat(d.fd.as_fd(), c.as_c_str(), kind, Mode::from_raw_mode(mode), rdev).map_err(st)?;
    let fd = fsops::lookup(d.fd.as_fd(), name, false)?;
    let (fh, stat) = sh.handles.insert(fd, d.export)?;
    Ok(Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
}

/// READDIR from `cookie`: as many entries as fit both the client's limits and a reply
/// within `msg_size` (the connection's message size), packed into `entries`, which the
/// reply borrows. `TOO_SMALL` if not even the first entry fits.
pub(super) fn read_dir<'a>(
    sh: &Shared,
    entries: &'a mut Vec<u8>,
    msg_size: usize,
    dir: &FileHandle,
    cookie: u64,
    max_entries: u32,
    max_bytes: u32,
) -> Result<Reply<'a>, Status> {
    let d = sh.handles.resolve(dir)?;
    let max_entries = if max_entries == 0 {
        limits::READDIR_ENTRIES_MAX
    } else {
        max_entries.min(limits::READDIR_ENTRIES_MAX)
    };
    let room = msg_size - HEADER_LEN - READDIR_REPLY_FIXED_BYTES;
    let max_bytes = if max_bytes == 0 { room } else { (max_bytes as usize).min(room) };
    entries.clear();
    let mut count = 0u32;
    let mut too_small = false;
    let dir_fd = sh.handles.retry_fds(|| fsops::open_dir(d.fd.as_fd()))?;
    let eof = fsops::read_dir(dir_fd, cookie, |off, ino, ftype, name| {
        if count >= max_entries {
            return false;
        }
        if entries.len() + DirEntry::wire_len(name.len()) > max_bytes {
            too_small = count == 0;
            return false;
        }
        DirEntry { cookie: off, fileid: ino, ftype, name }.pack(entries);
        count += 1;
        true
    })?;
    if too_small {
        return Err(Status::TooSmall);
    }
    Ok(Reply::ReadDir { eof, count, entries })
}
