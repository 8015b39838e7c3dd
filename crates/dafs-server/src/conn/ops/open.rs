//! OPEN, CLOSE and PUBLISH: a session's open files, admitted through the server-wide
//! open table (share reservations, open keys, delete-on-close, append).

use std::ffi::CString;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use dafs_proto::types::open_flags;
use dafs_proto::{FileHandle, FileType, Reply, Status};
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};

use super::check_writable;
use crate::conn::session::{OpenFile, Session};
use crate::conn::Conn;
use crate::fd_budget::OpenFileClaim;
use crate::fsops::{self, st};
use crate::{openstate, Shared};

/// Open flags that change the export (or lock other readers out) even on an open for
/// reading only: refused with ROFS on a read-only export.
const OPEN_FLAGS_THAT_MODIFY: u32 = open_flags::CREATE
    | open_flags::EXCLUSIVE
    | open_flags::TRUNCATE
    | open_flags::UNLINKED
    | open_flags::DELETE_ON_CLOSE
    | open_flags::DENY_READ;

impl Conn {
    pub(super) fn open(
        &mut self,
        sh: &Shared,
        fh: FileHandle,
        flags: u32,
        mode: u32,
        name: &[u8],
        key: &[u8],
    ) -> Result<Reply<'static>, Status> {
        let read = flags & open_flags::READ != 0;
        let write = flags & open_flags::WRITE != 0;
        let mut of = match (read, write) {
            (true, true) => OFlags::RDWR,
            (false, true) => OFlags::WRONLY,
            _ => OFlags::RDONLY,
        };
        // O_TRUNC is applied only after the open is admitted (share reservations, key):
        // a refused open must not have truncated a file another session holds.
        let truncate = flags & open_flags::TRUNCATE != 0;
        if truncate && !write {
            return Err(Status::Inval);
        }
        if flags & open_flags::CREATE != 0 {
            of |= OFlags::CREATE;
            if flags & open_flags::EXCLUSIVE != 0 {
                of |= OFlags::EXCL | OFlags::NOFOLLOW;
            }
        }
        let claim = claim_open_file(sh, self.session().opens.len())?;
        // Never block a worker: a FIFO without a writer, a tty or a device would hang
        // open(2) (and later reads) for every connection on this thread. No effect on
        // regular files; I/O on non-regular files is refused (`Session::open_file`).
        of |= OFlags::NONBLOCK;
        let d = sh.handles.resolve(&fh)?;
        // An open key, like deny-read, would lock other readers out of the file.
        if write || flags & OPEN_FLAGS_THAT_MODIFY != 0 || !key.is_empty() {
            check_writable(sh, d.export)?;
        }
        let unlinked = flags & open_flags::UNLINKED != 0;
        if flags & open_flags::DELETE_ON_CLOSE != 0 && (name.is_empty() || unlinked) {
            return Err(Status::Inval); // the name to delete must be known
        }
        let (file, handle) = if unlinked {
            // An anonymous file in the directory: O_TMPFILE; PUBLISH links it in.
            let tmp = sh.handles.retry_fds(|| {
                rfs::openat(
                    d.fd.as_fd(),
                    c".",
                    OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
                    Mode::from_raw_mode(mode),
                )
                .map_err(st)
            })?;
            let path_fd = sh.handles.retry_fds(|| fsops::reopen(tmp.as_fd(), OFlags::PATH))?;
            // Enter it by descriptor; its handle answers STALE until published.
            let (handle, _) = sh.handles.insert(path_fd, d.export)?;
            (tmp, handle)
        } else if name.is_empty() {
            let st0 = fsops::fstat(d.fd.as_fd())?;
            match FileType::from_mode(st0.st_mode) {
                FileType::Directory => return Err(Status::IsDir),
                FileType::Symlink => return Err(Status::Loop),
                _ => {}
            }
            (sh.handles.retry_fds(|| fsops::reopen(d.fd.as_fd(), of))?, fh)
        } else {
            // The mode is for CREATE only (openat2 refuses a mode without O_CREAT).
            let mode = if flags & open_flags::CREATE != 0 { mode } else { 0 };
            let file = sh.handles.retry_fds(|| fsops::open_in(d.fd.as_fd(), name, of, mode))?;
            // The handle comes from the opened file itself (no second lookup by name,
            // which could find a replacement); should that fail, an exclusive create is
            // undone, or its retry would find the file and answer EXIST.
            let exclusive = of.contains(OFlags::EXCL);
            let handle = fsops::undo_create_on_error(d.fd.as_fd(), name, &file, exclusive, || {
                let path_fd = sh.handles.retry_fds(|| fsops::reopen(file.as_fd(), OFlags::PATH))?;
                Ok(sh.handles.insert(path_fd, d.export)?.0)
            })?;
            (file, handle)
        };
        let stat = fsops::fstat(file.as_fd())?;
        if FileType::from_mode(stat.st_mode) == FileType::Directory {
            return Err(Status::IsDir);
        }
        let s = self.session_mut();
        let open_id = open_id_for(s, flags, mode)?;
        let file_key = (stat.st_dev, stat.st_ino);
        let dir_fd = d.fd.clone();
        let append_lock = sh.open_table.admit(
            file_key,
            openstate::OpenRequest {
                session: s.id,
                open_id,
                read,
                write,
                deny_read: flags & open_flags::DENY_READ != 0,
                deny_write: flags & open_flags::DENY_WRITE != 0,
                key,
                delete_on_close: (flags & open_flags::DELETE_ON_CLOSE != 0)
                    .then(|| (dir_fd.clone(), name.to_vec())),
            },
        )?;
        if truncate {
            if let Err(e) = fsops::set_size(file.as_fd(), 0, stat.st_size as u64) {
                sh.open_table.release(file_key, s.id, open_id);
                return Err(e);
            }
        }
        let stat = if truncate { fsops::fstat(file.as_fd())? } else { stat };
        s.next_open_id = s.next_open_id.max(open_id + 1);
        s.opens.insert(
            open_id,
            OpenFile {
                fd: Arc::new(file),
                regular: FileType::from_mode(stat.st_mode) == FileType::Regular,
                read,
                write,
                file: file_key,
                append: (flags & open_flags::APPEND != 0).then_some(append_lock),
                _claim: claim,
                unlinked: unlinked.then(|| (dir_fd, name.to_vec(), d.export)),
            },
        );
        Ok(Reply::Open { open_id, fh: handle, attr: fsops::attr_from_stat(&stat) })
    }

    /// CLOSE: the open ends here and in the server-wide open table (which carries out a
    /// delete-on-close at the file's last close).
    pub(super) fn close_open(
        &mut self,
        sh: &Shared,
        open_id: u64,
    ) -> Result<Reply<'static>, Status> {
        let s = self.session_mut();
        let of = s.opens.remove(&open_id).ok_or(Status::BadOpenId)?;
        let sid = s.id;
        sh.open_table.release(of.file, sid, open_id);
        Ok(Reply::Empty)
    }

    /// PUBLISH: give a create-unlinked file its name (never replacing an entry).
    pub(super) fn publish(&mut self, sh: &Shared, open_id: u64) -> Result<Reply<'static>, Status> {
        let s = self.session_mut();
        let of = s.opens.get_mut(&open_id).ok_or(Status::BadOpenId)?;
        let (dir, name, export) = of.unlinked.clone().ok_or(Status::Inval)?;
        let c = CString::new(name.clone()).map_err(|_| Status::BadName)?;
        let src = fsops::proc_path(of.fd.as_fd());
        rfs::linkat(rfs::CWD, src.as_c_str(), dir.as_fd(), c.as_c_str(), AtFlags::SYMLINK_FOLLOW)
            .map_err(st)?;
        of.unlinked = None;
        let fd = sh.handles.retry_fds(|| fsops::lookup(dir.as_fd(), &name, false))?;
        let (fh, stat) = sh.handles.insert(fd, export)?;
        Ok(Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
    }
}

/// The id of a new open: the next of the session's, or for a reclaim (OPEN + RECLAIM,
/// which creates nothing, so `mode` is free) the id `mode` asks back (§9.5), which
/// the session must not use already (`RECLAIM_BAD`). Later opens count on from above it.
fn open_id_for(s: &Session, flags: u32, mode: u32) -> Result<u64, Status> {
    if flags & open_flags::RECLAIM == 0 || mode == 0 {
        return Ok(s.next_open_id);
    }
    let id = u64::from(mode);
    if s.opens.contains_key(&id) {
        return Err(Status::ReclaimBad);
    }
    Ok(id)
}

/// A place for one more open file: within the session's share (`open_files_max`) and
/// the server's (`open_files_total_max`), so one session cannot take every descriptor.
fn claim_open_file(sh: &Shared, session_opens: usize) -> Result<OpenFileClaim, Status> {
    let b = &sh.fd_budget;
    let claim = (session_opens < b.open_files_per_session_max)
        .then(|| OpenFileClaim::try_new(&sh.open_files_live, b.open_files_total_max))
        .flatten();
    claim.ok_or_else(|| {
        sh.stats.limit_refusals.fetch_add(1, Relaxed);
        Status::Limit
    })
}
