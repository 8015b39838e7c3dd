//! Attributes: mode, owner and times (by path and by descriptor), the umask, and the
//! extended attributes the protocol does not have.

use std::ffi::{c_char, c_int, c_void};

use dafs_proto::types::setattr_mask;
use dafs_proto::SetAttrs;

use super::args::{
    at_flags, classify, dafs_fd, neg, on_path, Mode, AT_NOFOLLOW_EMPTY, MODE_PERM_BITS, NS_PER_SEC,
    P,
};
use super::stat::path_attr;
use crate::real::{ret, Entered};
use crate::state::{config, err, is_dafs_fd, with, Target};

/// chown's "leave unchanged" owner or group: `(uid_t)-1` / `(gid_t)-1`.
const ID_UNCHANGED: u32 = u32::MAX;
/// Nanoseconds per microsecond (utimes takes `timeval`s).
const NS_PER_US: libc::c_long = 1000;
/// A umask has only permission bits (umask(2) ignores the others).
const UMASK_BITS: Mode = 0o777;

/// Apply `set` to a path, following a final symlink unless `nofollow`: then the link's
/// own owner and times change (its mode cannot: EOPNOTSUPP from the server's kernel,
/// as from a local one).
fn setattr_path(t: &Target, set: SetAttrs, nofollow: bool) -> Result<c_int, c_int> {
    on_path(t, |c, p| {
        // A trailing slash follows a final symlink and demands a directory.
        let (fh, a) =
            if nofollow && !t.tail.dir_only() { c.lookup_nofollow(p)? } else { c.lookup(p)? };
        if t.tail.dir_only() && !a.is_dir() {
            return err(libc::ENOTDIR);
        }
        c.setattr(fh, set)?;
        Ok(0)
    })
}

/// `utimes`' pair of timevals as `utimensat`'s timespecs (None: both now).
unsafe fn timevals(tv: *const libc::timeval) -> Option<[libc::timespec; 2]> {
    (!tv.is_null()).then(|| {
        // SAFETY: the caller's two timevals (checked non-null).
        let v = unsafe { std::slice::from_raw_parts(tv, 2) };
        [
            libc::timespec { tv_sec: v[0].tv_sec, tv_nsec: v[0].tv_usec * NS_PER_US },
            libc::timespec { tv_sec: v[1].tv_sec, tv_nsec: v[1].tv_usec * NS_PER_US },
        ]
    })
}

fn setattr_fd(fd: c_int, set: SetAttrs) -> Result<c_int, c_int> {
    with(|st| {
        st.with_ofd(fd, |c, o| {
            c.setattr(o.fh, set)?;
            Ok(0)
        })
    })
}

fn chmod_set(mode: Mode) -> SetAttrs {
    SetAttrs { mask: setattr_mask::MODE, mode: mode & MODE_PERM_BITS, ..Default::default() }
}

fn chown_set(uid: libc::uid_t, gid: libc::gid_t) -> SetAttrs {
    let mut s = SetAttrs::default();
    if uid != ID_UNCHANGED {
        s.mask |= setattr_mask::UID;
        s.uid = uid;
    }
    if gid != ID_UNCHANGED {
        s.mask |= setattr_mask::GID;
        s.gid = gid;
    }
    s
}

/// utimensat's timespec pair (NULL = both now; UTIME_NOW / UTIME_OMIT per field).
unsafe fn times_set(times: *const libc::timespec) -> Result<SetAttrs, c_int> {
    let mut s = SetAttrs::default();
    if times.is_null() {
        s.mask = setattr_mask::ATIME_NOW | setattr_mask::MTIME_NOW;
        return Ok(s);
    }
    // SAFETY: the caller's array of two timespecs.
    let t = unsafe { std::slice::from_raw_parts(times, 2) };
    for (i, x) in t.iter().enumerate() {
        let (now, set) = if i == 0 {
            (setattr_mask::ATIME_NOW, setattr_mask::ATIME)
        } else {
            (setattr_mask::MTIME_NOW, setattr_mask::MTIME)
        };
        match x.tv_nsec {
            libc::UTIME_OMIT => {}
            libc::UTIME_NOW => s.mask |= now,
            n if !(0..NS_PER_SEC).contains(&n) => return Err(libc::EINVAL),
            n => {
                s.mask |= set;
                let ns = x.tv_sec.saturating_mul(NS_PER_SEC).saturating_add(n);
                if i == 0 {
                    s.atime_ns = ns
                } else {
                    s.mtime_ns = ns
                }
            }
        }
    }
    Ok(s)
}

#[no_mangle]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: Mode) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(setattr_path(&t, chmod_set(mode), false)),
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(chmod: fn(*const c_char, Mode) -> c_int)(p, mode),
    }
}
#[no_mangle]
pub unsafe extern "C" fn fchmodat(
    dirfd: c_int,
    path: *const c_char,
    mode: Mode,
    flags: c_int,
) -> c_int {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(at_flags(flags, AT_NOFOLLOW_EMPTY).and_then(|_| {
            setattr_path(&t, chmod_set(mode), flags & libc::AT_SYMLINK_NOFOLLOW != 0)
        })),
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(fchmodat: fn(c_int, *const c_char, Mode, c_int) -> c_int)(dirfd, p, mode, flags)
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: Mode) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(setattr_fd(fd, chmod_set(mode)));
    }
    real!(fchmod: fn(c_int, Mode) -> c_int)(fd, mode)
}
#[no_mangle]
pub unsafe extern "C" fn chown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(setattr_path(&t, chown_set(uid, gid), false)),
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(chown: fn(*const c_char, libc::uid_t, libc::gid_t) -> c_int)(p, uid, gid)
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn lchown(path: *const c_char, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(setattr_path(&t, chown_set(uid, gid), true)),
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(lchown: fn(*const c_char, libc::uid_t, libc::gid_t) -> c_int)(p, uid, gid)
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: libc::uid_t,
    gid: libc::gid_t,
    flags: c_int,
) -> c_int {
    if flags & libc::AT_EMPTY_PATH != 0
        && !path.is_null()
        && unsafe { *path } == 0
        && is_dafs_fd(dirfd)
    {
        return unsafe { fchown(dirfd, uid, gid) };
    }
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(at_flags(flags, AT_NOFOLLOW_EMPTY).and_then(|_| {
            setattr_path(&t, chown_set(uid, gid), flags & libc::AT_SYMLINK_NOFOLLOW != 0)
        })),
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(fchownat: fn(c_int, *const c_char, libc::uid_t, libc::gid_t, c_int) -> c_int)(
                dirfd, p, uid, gid, flags,
            )
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn fchown(fd: c_int, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(setattr_fd(fd, chown_set(uid, gid)));
    }
    real!(fchown: fn(c_int, libc::uid_t, libc::gid_t) -> c_int)(fd, uid, gid)
}
#[no_mangle]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    if path.is_null() && is_dafs_fd(dirfd) {
        return unsafe { futimens(dirfd, times) };
    }
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(at_flags(flags, AT_NOFOLLOW_EMPTY)
            .and_then(|_| unsafe { times_set(times) })
            .and_then(|s| setattr_path(&t, s, flags & libc::AT_SYMLINK_NOFOLLOW != 0))),
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(utimensat: fn(c_int, *const c_char, *const libc::timespec, c_int) -> c_int)(
                dirfd, p, times, flags,
            )
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const libc::timespec) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(unsafe { times_set(times) }.and_then(|s| setattr_fd(fd, s)));
    }
    real!(futimens: fn(c_int, *const libc::timespec) -> c_int)(fd, times)
}
#[no_mangle]
pub unsafe extern "C" fn utimes(path: *const c_char, tv: *const libc::timeval) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => {
            // SAFETY: the caller's timevals, as utimes(2) takes them.
            let ts = unsafe { timevals(tv) };
            let p = ts.as_ref().map(|a| a.as_ptr()).unwrap_or(std::ptr::null());
            ret(unsafe { times_set(p) }.and_then(|s| setattr_path(&t, s, false)))
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(utimes: fn(*const c_char, *const libc::timeval) -> c_int)(p, tv),
    }
}
/// glibc's lutimes calls utimensat inside the library, past this one: interposed here.
#[no_mangle]
pub unsafe extern "C" fn lutimes(path: *const c_char, tv: *const libc::timeval) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => {
            // SAFETY: the caller's timevals, as lutimes(3) takes them.
            let ts = unsafe { timevals(tv) };
            let p = ts.as_ref().map(|a| a.as_ptr()).unwrap_or(std::ptr::null());
            ret(unsafe { times_set(p) }.and_then(|s| setattr_path(&t, s, true)))
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(lutimes: fn(*const c_char, *const libc::timeval) -> c_int)(p, tv),
    }
}
/// glibc's futimes calls utimensat inside the library too.
#[no_mangle]
pub unsafe extern "C" fn futimes(fd: c_int, tv: *const libc::timeval) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        // SAFETY: the caller's timevals, as futimes(3) takes them.
        let ts = unsafe { timevals(tv) };
        let p = ts.as_ref().map(|a| a.as_ptr()).unwrap_or(std::ptr::null());
        return ret(unsafe { times_set(p) }.and_then(|s| setattr_fd(fd, s)));
    }
    real!(futimes: fn(c_int, *const libc::timeval) -> c_int)(fd, tv)
}
#[no_mangle]
pub unsafe extern "C" fn utime(path: *const c_char, tb: *const libc::utimbuf) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => {
            let ts: Option<[libc::timespec; 2]> = (!tb.is_null()).then(|| {
                // SAFETY: the caller's utimbuf.
                let b = unsafe { &*tb };
                [
                    libc::timespec { tv_sec: b.actime, tv_nsec: 0 },
                    libc::timespec { tv_sec: b.modtime, tv_nsec: 0 },
                ]
            });
            let p = ts.as_ref().map(|a| a.as_ptr()).unwrap_or(std::ptr::null());
            ret(unsafe { times_set(p) }.and_then(|s| setattr_path(&t, s, false)))
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(utime: fn(*const c_char, *const libc::utimbuf) -> c_int)(p, tb),
    }
}

#[no_mangle]
pub unsafe extern "C" fn umask(mask: Mode) -> Mode {
    let old = real!(umask: fn(Mode) -> Mode)(mask);
    if let Some(_g) = Entered::enter() {
        if !config().mounts.is_empty() {
            with(|st| st.umask = mask & UMASK_BITS);
        }
    }
    old
}

// Extended attributes: not in the protocol (named attributes are a different, explicit
// API); ENOTSUP is what tools treat as "this file system has none".
macro_rules! xattr_path {
    ($name:ident, ($($a:ident : $t:ty),*), $r:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, $($a: $t),*) -> $r {
            match unsafe { classify(libc::AT_FDCWD, path) } {
                P::Dafs(t, _g) => {
                    let r = path_attr(&t, true).and(Err::<(), c_int>(libc::ENOTSUP));
                    neg(r.unwrap_err()) as $r
                }
                P::Err(e) => neg(e) as $r,
                P::Local(p, _k) => real!($name: fn(*const c_char, $($t),*) -> $r)(p, $($a),*),
            }
        }
    };
}
macro_rules! xattr_fd {
    ($name:ident, ($($a:ident : $t:ty),*), $r:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, $($a: $t),*) -> $r {
            if is_dafs_fd(fd) {
                return neg(libc::ENOTSUP) as $r;
            }
            real!($name: fn(c_int, $($t),*) -> $r)(fd, $($a),*)
        }
    };
}
xattr_path!(getxattr, (name: *const c_char, value: *mut c_void, size: usize), isize);
xattr_path!(lgetxattr, (name: *const c_char, value: *mut c_void, size: usize), isize);
xattr_path!(setxattr, (name: *const c_char, value: *const c_void, size: usize, flags: c_int), c_int);
xattr_path!(lsetxattr, (name: *const c_char, value: *const c_void, size: usize, flags: c_int), c_int);
xattr_path!(listxattr, (list: *mut c_char, size: usize), isize);
xattr_path!(llistxattr, (list: *mut c_char, size: usize), isize);
xattr_path!(removexattr, (name: *const c_char), c_int);
xattr_path!(lremovexattr, (name: *const c_char), c_int);
xattr_fd!(fgetxattr, (name: *const c_char, value: *mut c_void, size: usize), isize);
xattr_fd!(fsetxattr, (name: *const c_char, value: *const c_void, size: usize, flags: c_int), c_int);
xattr_fd!(flistxattr, (list: *mut c_char, size: usize), isize);
xattr_fd!(fremovexattr, (name: *const c_char), c_int);
