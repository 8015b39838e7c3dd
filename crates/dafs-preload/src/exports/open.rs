//! Opening and closing: the `open` family (with the `64`, `at` and `_FORTIFY_SOURCE`
//! variants), `creat`, and `close`.

use std::ffi::{c_char, c_int};

use dafs_client::{Client, Error};
use dafs_proto::types::{access_mask, setattr_mask, SetAttrs};
use dafs_proto::{FileHandle, FileType, Status};

use super::args::{classify, dafs_fd, neg, Mode, MODE_PERM_BITS, P};
use super::stdio::std_changed;
use crate::real::{errno, ret, Entered};
use crate::state::{self, config, err, open_options, with, Kind, Ofd, Target, FR};

pub(super) fn do_open(t: &Target, flags: c_int, mode: Mode) -> Result<c_int, c_int> {
    if flags & libc::O_TMPFILE == libc::O_TMPFILE {
        return Err(libc::EOPNOTSUPP);
    }
    let acc = flags & libc::O_ACCMODE;
    if acc == libc::O_ACCMODE {
        return Err(libc::EINVAL);
    }
    // Linux (6.4 on) refuses the combination: it never both created and opened a
    // directory.
    if flags & (libc::O_CREAT | libc::O_DIRECTORY) == libc::O_CREAT | libc::O_DIRECTORY {
        return Err(libc::EINVAL);
    }
    // "new/", "d/." with O_CREAT: the kernel cannot create a directory through open.
    if flags & libc::O_CREAT != 0 && t.tail.dir_only() {
        return Err(libc::EISDIR);
    }
    // A trailing slash (or a final '.') demands a directory, as O_DIRECTORY does.
    let want_dir = flags & libc::O_DIRECTORY != 0 || t.tail.dir_only();
    with(|st| {
        let umask = st.umask;
        let root = t.rel == config().mounts[t.mount].base;
        let (kind, is_dir, fh, file) = st.call(t.mount, |c| {
            let rel = t.rel.as_str();
            if flags & libc::O_PATH != 0 {
                let (fh, a) = c.lookup(rel)?;
                if want_dir && !a.is_dir() {
                    return err(libc::ENOTDIR);
                }
                return Ok((Kind::Path, a.is_dir(), fh, None));
            }
            // O_CREAT | O_EXCL never follows a final symlink (it fails with EEXIST, which
            // the exclusive OPEN reports by itself): no lstat round trip for it.
            let excl = libc::O_CREAT | libc::O_EXCL;
            if flags & libc::O_NOFOLLOW != 0 && flags & excl != excl {
                match c.lstat(rel) {
                    Ok(a) if a.ftype == FileType::Symlink => return err(libc::ELOOP),
                    Ok(_) | Err(Error::Status(Status::NoEnt)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if want_dir || root {
                let (fh, a) = c.lookup(rel)?;
                if !a.is_dir() {
                    return err(libc::ENOTDIR);
                }
                if acc != libc::O_RDONLY || flags & libc::O_CREAT != 0 {
                    return err(libc::EISDIR);
                }
                dir_readable(c, fh)?;
                return Ok((Kind::Dir, true, fh, None));
            }
            match c.open(rel, open_options(flags, mode & !umask & MODE_PERM_BITS, true)) {
                Ok(f) if f.attr.is_dir() => {
                    let fh = f.fh;
                    let _ = c.close(f);
                    if acc != libc::O_RDONLY {
                        return err(libc::EISDIR);
                    }
                    Ok((Kind::Dir, true, fh, None))
                }
                Ok(f) => {
                    if acc == libc::O_RDONLY && flags & libc::O_TRUNC != 0 {
                        if let Err(e) = truncate_read_only(c, &f, flags) {
                            let _ = c.close(f);
                            return Err(e);
                        }
                    }
                    Ok((Kind::File, false, f.fh, Some(f)))
                }
                Err(Error::Status(Status::IsDir))
                    if acc == libc::O_RDONLY && flags & libc::O_CREAT == 0 =>
                {
                    let (fh, _) = c.lookup(rel)?;
                    dir_readable(c, fh)?;
                    Ok((Kind::Dir, true, fh, None))
                }
                Err(e) => Err(e.into()),
            }
        })?;
        let gen = st.mounts[t.mount].gen;
        let keep = libc::O_ACCMODE
            | libc::O_APPEND
            | libc::O_NONBLOCK
            | libc::O_DIRECT
            | libc::O_NOATIME
            | libc::O_SYNC
            | libc::O_DSYNC
            | libc::O_PATH
            | libc::O_DIRECTORY
            | libc::O_NOFOLLOW;
        let ofd = Ofd {
            mount: t.mount,
            rel: t.rel.clone(),
            vpath: t.vpath.clone(),
            kind,
            is_dir,
            file,
            fh,
            gen,
            offset: 0,
            flags: (flags & keep) | libc::O_LARGEFILE,
            opened_append: flags & libc::O_APPEND != 0,
            refs: 0,
        };
        let fd = st.install(ofd, flags & libc::O_CLOEXEC != 0)?;
        debug!("open {} flags {:#o} -> fd {fd}", t.vpath, flags);
        Ok(fd)
    })
    .inspect(|&fd| std_changed(fd))
}

/// Opening a directory to list it needs read permission, which a LOOKUP does not check
/// (`open("d711", O_RDONLY | O_DIRECTORY)` by a user who may only search it: EACCES).
fn dir_readable(c: &mut Client, fh: FileHandle) -> FR<()> {
    if c.access_handle(fh, access_mask::READ)? & access_mask::READ == 0 {
        return err(libc::EACCES);
    }
    Ok(())
}

/// `O_RDONLY | O_TRUNC`: Linux asks for write permission and truncates (the DAFS OPEN
/// truncates only writable opens). A file this open just created (O_CREAT, still
/// empty) is not truncated, so it is not checked either, as the kernel does.
fn truncate_read_only(c: &mut Client, f: &dafs_client::File, flags: c_int) -> FR<()> {
    if f.attr.ftype != FileType::Regular || (flags & libc::O_CREAT != 0 && f.attr.size == 0) {
        return Ok(());
    }
    if c.access_handle(f.fh, access_mask::WRITE)? & access_mask::WRITE == 0 {
        return err(libc::EACCES);
    }
    let set = SetAttrs { mask: setattr_mask::SIZE, size: 0, ..Default::default() };
    c.setattr(f.fh, set)?;
    Ok(())
}

/// Open `path` relative to `dirfd`: a dafs path is served here; any other path goes to
/// `next` (as given, or rewritten to an absolute path — which then ignores `dirfd`).
unsafe fn open_at(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: Mode,
    next: impl FnOnce(*const c_char) -> c_int,
) -> c_int {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(do_open(&t, flags, mode)),
        P::Err(e) => neg(e),
        P::Local(p, _keep) => next(p),
    }
}

// The variadic `open(const char *, int, ...)` family, defined with the mode argument
// fixed (see the crate documentation for why that is ABI-compatible): `mode` is only
// read when O_CREAT or O_TMPFILE says the caller passed one, exactly like glibc.
interpose! {
    fn open | open64 (path: *const c_char, flags: c_int, mode: Mode) -> c_int
    where next: fn(*const c_char, c_int, ...)
    {
        unsafe { open_at(libc::AT_FDCWD, path, flags, mode, |p| next(p, flags, mode)) }
    }
}
interpose! {
    fn openat | openat64 (dirfd: c_int, path: *const c_char, flags: c_int, mode: Mode) -> c_int
    where next: fn(c_int, *const c_char, c_int, ...)
    {
        unsafe { open_at(dirfd, path, flags, mode, |p| next(dirfd, p, flags, mode)) }
    }
}
interpose! {
    /// _FORTIFY_SOURCE variants (no mode: they are only used without O_CREAT).
    fn __open_2 => open | __open64_2 => open64 (path: *const c_char, flags: c_int) -> c_int
    where next: fn(*const c_char, c_int, ...)
    {
        let mode: Mode = 0;
        unsafe { open_at(libc::AT_FDCWD, path, flags, mode, |p| next(p, flags, mode)) }
    }
}
interpose! {
    /// _FORTIFY_SOURCE variants of openat.
    fn __openat_2 => openat | __openat64_2 => openat64 (
        dirfd: c_int,
        path: *const c_char,
        flags: c_int,
    ) -> c_int
    where next: fn(c_int, *const c_char, c_int, ...)
    {
        let mode: Mode = 0;
        unsafe { open_at(dirfd, path, flags, mode, |p| next(dirfd, p, flags, mode)) }
    }
}
interpose! {
    fn creat => open | creat64 => open64 (path: *const c_char, mode: Mode) -> c_int
    where next: fn(*const c_char, c_int, ...)
    {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
        unsafe { open_at(libc::AT_FDCWD, path, flags, mode, |p| next(p, flags, mode)) }
    }
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        if state::in_vfork_child() {
            // Not our table to change (see in_vfork_child).
            state::vfork_note(fd, None);
            return state::real_close(fd);
        }
        let r = with(|st| st.drop_fd(fd));
        let k = state::real_close(fd);
        let ke = errno();
        std_changed(fd);
        debug!("close {fd}");
        return match r {
            Err(e) => neg(e),
            Ok(()) if k < 0 => neg(ke),
            Ok(()) => k,
        };
    }
    if state::is_internal_fd(fd) && !state::in_vfork_child() {
        if let Some(_g) = Entered::enter() {
            // A program closing every descriptor it did not open (daemons, some test
            // harnesses) would cut the session under open dafs files: report success
            // and keep it. (Inside the library the guard is held: real close.)
            debug!("close({fd}) of the library's connection ignored");
            return 0;
        }
    }
    real!(close: fn(c_int) -> c_int)(fd)
}
