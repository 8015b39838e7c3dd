//! The namespace: removing, creating, renaming and linking names, symbolic links,
//! special files (mkfifo, mknod), and access checks.

use std::ffi::{c_char, c_int, CStr, CString};

use dafs_client::{Client, Error};
use dafs_proto::types::access_mask;
use dafs_proto::{FileType, Status};

use super::args::{
    at_flags, classify, neg, on_path, resolve_in, Mode, AT_NOFOLLOW_EMPTY, MODE_PERM_BITS, P,
};
use super::tails;
use crate::real::{ret, ret_ssize, Entered};
use crate::state::{config, err, is_dafs_fd, with, Tail, Target, FR};

#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    unsafe { unlinkat(libc::AT_FDCWD, path, 0) }
}
#[no_mangle]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(at_flags(flags, libc::AT_REMOVEDIR).and_then(|_| {
            on_path(&t, |c, p| unlink_dafs(c, p, t.tail, flags & libc::AT_REMOVEDIR != 0))
        })),
        P::Err(e) => neg(e),
        P::Local(p, _k) if dirfd == libc::AT_FDCWD && flags == 0 => {
            real!(unlink: fn(*const c_char) -> c_int)(p)
        }
        P::Local(p, _k) => {
            real!(unlinkat: fn(c_int, *const c_char, c_int) -> c_int)(dirfd, p, flags)
        }
    }
}
/// remove(3), as glibc does it: unlink, and rmdir when that says EISDIR. It must be
/// exported here because glibc's own `remove` calls its internal unlinkat, which no
/// interposer sees: without it `remove` of a dafs path went to the kernel (ENOENT), and
/// stock PostMark could delete none of its files.
#[no_mangle]
pub unsafe extern "C" fn remove(path: *const c_char) -> c_int {
    // SAFETY: the caller's NUL-terminated path (or null: unlinkat reports EFAULT/ENOENT).
    let r = unsafe { unlinkat(libc::AT_FDCWD, path, 0) };
    if r == 0 || crate::real::errno() != libc::EISDIR {
        return r;
    }
    // SAFETY: as above.
    unsafe { unlinkat(libc::AT_FDCWD, path, libc::AT_REMOVEDIR) }
}
/// unlink (`dir` false) or rmdir of a dafs path, after the kernel's path-tail rules.
fn unlink_dafs(c: &mut Client, p: &str, tail: Tail, dir: bool) -> FR<c_int> {
    if dir {
        tails::rmdir(tail)?;
        c.rmdir(p)?;
    } else {
        tails::unlink(c, p, tail)?;
        match c.remove(p) {
            Err(Error::Status(Status::IsDir)) | Err(Error::Status(Status::Perm))
                if c.lstat(p).map(|a| a.is_dir()).unwrap_or(false) =>
            {
                return err(libc::EISDIR)
            }
            r => r?,
        }
    }
    Ok(0)
}
#[no_mangle]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(on_path(&t, |c, p| unlink_dafs(c, p, t.tail, true))),
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(rmdir: fn(*const c_char) -> c_int)(p),
    }
}
#[no_mangle]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: Mode) -> c_int {
    unsafe { mkdirat(libc::AT_FDCWD, path, mode) }
}
#[no_mangle]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: Mode) -> c_int {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => {
            let um = with(|st| st.umask);
            ret(on_path(&t, |c, p| {
                if p == config().mounts[t.mount].base {
                    return err(libc::EEXIST);
                }
                Ok(c.mkdir(p, mode & !um & MODE_PERM_BITS).map(|_| 0)?)
            }))
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) if dirfd == libc::AT_FDCWD => {
            real!(mkdir: fn(*const c_char, Mode) -> c_int)(p, mode)
        }
        P::Local(p, _k) => real!(mkdirat: fn(c_int, *const c_char, Mode) -> c_int)(dirfd, p, mode),
    }
}

#[no_mangle]
pub unsafe extern "C" fn mkfifo(path: *const c_char, mode: Mode) -> c_int {
    unsafe { mknodat(libc::AT_FDCWD, path, libc::S_IFIFO | (mode & MODE_PERM_BITS), 0) }
}
#[no_mangle]
pub unsafe extern "C" fn mkfifoat(dirfd: c_int, path: *const c_char, mode: Mode) -> c_int {
    unsafe { mknodat(dirfd, path, libc::S_IFIFO | (mode & MODE_PERM_BITS), 0) }
}
#[no_mangle]
pub unsafe extern "C" fn mknod(path: *const c_char, mode: Mode, dev: libc::dev_t) -> c_int {
    unsafe { mknodat(libc::AT_FDCWD, path, mode, dev) }
}
/// `mknod(2)`'s types: a regular file (type 0 or S_IFREG), or a special file the
/// server makes as the real object (its contents are never served through dafs).
#[no_mangle]
pub unsafe extern "C" fn mknodat(
    dirfd: c_int,
    path: *const c_char,
    mode: Mode,
    dev: libc::dev_t,
) -> c_int {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => {
            let perm = mode & !with(|st| st.umask) & MODE_PERM_BITS;
            let ftype = match mode & libc::S_IFMT {
                0 | libc::S_IFREG => None,
                libc::S_IFIFO => Some(FileType::Fifo),
                libc::S_IFSOCK => Some(FileType::Socket),
                libc::S_IFCHR => Some(FileType::CharDevice),
                libc::S_IFBLK => Some(FileType::BlockDevice),
                // mknod(2): "EPERM: ... the file system does not support the type"; a
                // directory is made with mkdir only.
                libc::S_IFDIR => return neg(libc::EPERM),
                _ => return neg(libc::EINVAL),
            };
            ret(on_path(&t, |c, p| {
                if p == config().mounts[t.mount].base {
                    return err(libc::EEXIST);
                }
                tails::new_name(c, p, t.tail)?;
                match ftype {
                    None => c.create_file(p, perm, true).map(|_| 0)?,
                    Some(ft) => c.mknod(p, ft, perm, dev).map(|_| 0)?,
                };
                Ok(0)
            }))
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(mknodat: fn(c_int, *const c_char, Mode, libc::dev_t) -> c_int)(
            dirfd, p, mode, dev,
        ),
    }
}
/// glibc before 2.33 compiled `mknod` calls into these (the `ver` argument is the
/// `struct stat` version, unused here); binaries built then still call them.
#[no_mangle]
pub unsafe extern "C" fn __xmknod(
    _ver: c_int,
    path: *const c_char,
    mode: Mode,
    dev: *const libc::dev_t,
) -> c_int {
    unsafe { __xmknodat(_ver, libc::AT_FDCWD, path, mode, dev) }
}
#[no_mangle]
pub unsafe extern "C" fn __xmknodat(
    _ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    mode: Mode,
    dev: *const libc::dev_t,
) -> c_int {
    if dev.is_null() {
        return neg(libc::EFAULT);
    }
    // SAFETY: the caller passes a pointer to its dev_t (checked non-null above), as
    // glibc's own wrapper does.
    let d = unsafe { *dev };
    unsafe { mknodat(dirfd, path, mode, d) }
}

/// Two-path operations: both dafs on one mount, both local, or EXDEV.
enum P2 {
    Dafs(Target, Target, Entered),
    Local(*const c_char, *const c_char, Option<CString>, Option<CString>),
    Err(c_int),
}

unsafe fn classify2(d1: c_int, p1: *const c_char, d2: c_int, p2: *const c_char) -> P2 {
    let Some(g) = Entered::enter() else { return P2::Local(p1, p2, None, None) };
    // SAFETY: NUL-terminated strings from the caller (or null, checked first).
    let empty = |p: *const c_char| !p.is_null() && unsafe { *p } == 0;
    let a = unsafe { resolve_in(d1, p1) };
    let b = unsafe { resolve_in(d2, p2) };
    // An empty path names nothing (ENOENT): it is not a local path the other, dafs,
    // one could be on another file system than (EXDEV).
    if (empty(p1) || empty(p2)) && (matches!(a, Ok(Some(_))) || matches!(b, Ok(Some(_)))) {
        return P2::Err(libc::ENOENT);
    }
    let local = |r: Result<Option<Target>, Result<CString, c_int>>, p: *const c_char| match r {
        Err(Ok(abs)) => (abs.as_ptr(), Some(abs)),
        _ => (p, None),
    };
    match (a, b) {
        (Err(Err(e)), _) | (_, Err(Err(e))) => P2::Err(e),
        (Ok(Some(x)), Ok(Some(y))) if x.mount == y.mount => P2::Dafs(x, y, g),
        (a @ (Ok(None) | Err(Ok(_))), b @ (Ok(None) | Err(Ok(_)))) => {
            let (x, kx) = local(a, p1);
            let (y, ky) = local(b, p2);
            P2::Local(x, y, kx, ky)
        }
        _ => P2::Err(libc::EXDEV),
    }
}

/// `renameat2` flags are the protocol's (RENAME_NOREPLACE, RENAME_EXCHANGE): the server
/// checks and renames in one call, so NOREPLACE is atomic against other clients (no
/// lookup first). Other flags are EINVAL from the client library.
fn do_rename(a: &Target, b: &Target, flags: u32) -> Result<c_int, c_int> {
    on_path(a, |c, from| {
        tails::rename(c, (from, a.tail), b.tail, flags & libc::RENAME_NOREPLACE != 0)?;
        c.rename_with_flags(from, &b.rel, flags)?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn rename(old: *const c_char, new: *const c_char) -> c_int {
    match unsafe { classify2(libc::AT_FDCWD, old, libc::AT_FDCWD, new) } {
        P2::Dafs(a, b, _g) => ret(do_rename(&a, &b, 0)),
        P2::Err(e) => neg(e),
        P2::Local(x, y, _a, _b) => real!(rename: fn(*const c_char, *const c_char) -> c_int)(x, y),
    }
}
#[no_mangle]
pub unsafe extern "C" fn renameat(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
) -> c_int {
    match unsafe { classify2(od, old, nd, new) } {
        P2::Dafs(a, b, _g) => ret(do_rename(&a, &b, 0)),
        P2::Err(e) => neg(e),
        P2::Local(x, y, _a, _b) => {
            real!(renameat: fn(c_int, *const c_char, c_int, *const c_char) -> c_int)(od, x, nd, y)
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn renameat2(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
    flags: u32,
) -> c_int {
    match unsafe { classify2(od, old, nd, new) } {
        P2::Dafs(a, b, _g) => ret(do_rename(&a, &b, flags)),
        P2::Err(e) => neg(e),
        P2::Local(x, y, _a, _b) => {
            real!(renameat2: fn(c_int, *const c_char, c_int, *const c_char, u32) -> c_int)(
                od, x, nd, y, flags,
            )
        }
    }
}
/// link/linkat: AT_SYMLINK_FOLLOW links what a symlink names (link(2) itself links the
/// symlink, as Linux does).
fn do_link(a: &Target, b: &Target, flags: c_int) -> Result<c_int, c_int> {
    at_flags(flags, libc::AT_SYMLINK_FOLLOW)?;
    on_path(a, |c, p| {
        tails::existing_dir(c, p, a.tail)?;
        tails::new_name(c, &b.rel, b.tail)?;
        if flags & libc::AT_SYMLINK_FOLLOW != 0 {
            c.link_follow(p, &b.rel)?;
        } else {
            c.link(p, &b.rel)?;
        }
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn link(old: *const c_char, new: *const c_char) -> c_int {
    match unsafe { classify2(libc::AT_FDCWD, old, libc::AT_FDCWD, new) } {
        P2::Dafs(a, b, _g) => ret(do_link(&a, &b, 0)),
        P2::Err(e) => neg(e),
        P2::Local(x, y, _a, _b) => real!(link: fn(*const c_char, *const c_char) -> c_int)(x, y),
    }
}
#[no_mangle]
pub unsafe extern "C" fn linkat(
    od: c_int,
    old: *const c_char,
    nd: c_int,
    new: *const c_char,
    flags: c_int,
) -> c_int {
    match unsafe { classify2(od, old, nd, new) } {
        P2::Dafs(a, b, _g) => ret(do_link(&a, &b, flags)),
        P2::Err(e) => neg(e),
        P2::Local(x, y, _a, _b) => {
            real!(linkat: fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int)(
                od, x, nd, y, flags,
            )
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn symlink(target: *const c_char, path: *const c_char) -> c_int {
    unsafe { symlinkat(target, libc::AT_FDCWD, path) }
}
#[no_mangle]
pub unsafe extern "C" fn symlinkat(
    target: *const c_char,
    dirfd: c_int,
    path: *const c_char,
) -> c_int {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => {
            let tg = unsafe { CStr::from_ptr(target) }.to_string_lossy().into_owned();
            // An empty target names nothing: Linux refuses it before any lookup.
            if tg.is_empty() {
                return neg(libc::ENOENT);
            }
            ret(on_path(&t, |c, p| {
                tails::new_name(c, p, t.tail)?;
                Ok(c.symlink(&tg, p).map(|_| 0)?)
            }))
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) if dirfd == libc::AT_FDCWD => {
            real!(symlink: fn(*const c_char, *const c_char) -> c_int)(target, p)
        }
        P::Local(p, _k) => {
            real!(symlinkat: fn(*const c_char, c_int, *const c_char) -> c_int)(target, dirfd, p)
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: usize) -> isize {
    unsafe { readlinkat(libc::AT_FDCWD, path, buf, size) }
}
#[no_mangle]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> isize {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret_ssize(on_path(&t, |c, p| {
            if c.lstat(p)?.ftype != FileType::Symlink {
                return err(libc::EINVAL);
            }
            let v = c.readlink(p)?;
            let n = v.len().min(size);
            // SAFETY: the caller's buffer of `size` bytes.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), buf.cast(), n) };
            Ok(n)
        })),
        P::Err(e) => ret_ssize(Err(e)),
        P::Local(p, _k)
            if dirfd == libc::AT_FDCWD
                && unsafe { CStr::from_ptr(p) }.to_bytes().starts_with(b"/proc/") =>
        {
            let target = Entered::enter()
                .and_then(|_g| proc_fd_target(unsafe { CStr::from_ptr(p) }.to_bytes()));
            match target {
                Some(v) => {
                    let n = v.len().min(size);
                    // SAFETY: the caller's buffer of `size` bytes.
                    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), buf.cast(), n) };
                    n as isize
                }
                None => {
                    real!(readlink: fn(*const c_char, *mut c_char, usize) -> isize)(p, buf, size)
                }
            }
        }
        P::Local(p, _k) if dirfd == libc::AT_FDCWD => {
            real!(readlink: fn(*const c_char, *mut c_char, usize) -> isize)(p, buf, size)
        }
        P::Local(p, _k) => {
            real!(readlinkat: fn(c_int, *const c_char, *mut c_char, usize) -> isize)(
                dirfd, p, buf, size,
            )
        }
    }
}

/// `/proc/self/fd/N` (or `/proc/<own pid>/fd/N`) for a dafs descriptor N names its
/// virtual path (the kernel would say /dev/null, the placeholder).
fn proc_fd_target(path: &[u8]) -> Option<String> {
    let rest = path.strip_prefix(b"/proc/")?;
    let slash = rest.iter().position(|&b| b == b'/')?;
    let (who, rest) = rest.split_at(slash);
    // SAFETY: getpid has no preconditions.
    if who != b"self"
        && who != b"thread-self"
        && who != unsafe { libc::getpid() }.to_string().as_bytes()
    {
        return None;
    }
    let n: c_int = std::str::from_utf8(rest.strip_prefix(b"/fd/")?).ok()?.parse().ok()?;
    if !is_dafs_fd(n) {
        return None;
    }
    with(|st| st.ofd_id(n).ok().map(|id| st.ofds[&id].vpath.clone()))
}

fn do_access(t: &Target, mode: c_int, follow: bool) -> Result<c_int, c_int> {
    if mode & !(libc::R_OK | libc::W_OK | libc::X_OK) != 0 {
        return Err(libc::EINVAL);
    }
    on_path(t, |c, p| {
        if follow {
            c.stat(p)?;
        } else {
            c.lstat(p)?;
        }
        if mode == libc::F_OK {
            return Ok(0);
        }
        let mut mask = 0;
        if mode & libc::R_OK != 0 {
            mask |= access_mask::READ;
        }
        if mode & libc::W_OK != 0 {
            mask |= access_mask::WRITE;
        }
        if mode & libc::X_OK != 0 {
            mask |= access_mask::EXECUTE;
        }
        if c.access(p, mask)? & mask == mask {
            Ok(0)
        } else {
            err(libc::EACCES)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(do_access(&t, mode, true)),
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(access: fn(*const c_char, c_int) -> c_int)(p, mode),
    }
}
#[no_mangle]
pub unsafe extern "C" fn faccessat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_int,
    flags: c_int,
) -> c_int {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(at_flags(flags, libc::AT_EACCESS | AT_NOFOLLOW_EMPTY)
            .and_then(|_| do_access(&t, mode, flags & libc::AT_SYMLINK_NOFOLLOW == 0))),
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(faccessat: fn(c_int, *const c_char, c_int, c_int) -> c_int)(dirfd, p, mode, flags)
        }
    }
}
interpose! {
    /// eaccess is glibc's other name for euidaccess.
    fn euidaccess | eaccess => euidaccess (path: *const c_char, mode: c_int) -> c_int where next {
        match unsafe { classify(libc::AT_FDCWD, path) } {
            P::Dafs(t, _g) => ret(do_access(&t, mode, true)),
            P::Err(e) => neg(e),
            P::Local(p, _k) => next(p, mode),
        }
    }
}
