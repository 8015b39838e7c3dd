//! Classifying arguments: is a path a dafs path (and which), is a descriptor a dafs
//! descriptor — with the reentrancy guard taken for the dafs case — and the small
//! conversions every family shares.

use std::ffi::{c_char, c_int, CStr, CString};

use crate::real::{set_errno, Entered};
use crate::state::{self, config, is_dafs_fd, with, Res, Target, FR};

pub(super) type Mode = libc::mode_t;

/// The part of a mode that is not the file type: permissions, set-uid, set-gid, sticky.
pub(super) const MODE_PERM_BITS: Mode = 0o7777;

/// Nanoseconds per second (the protocol's times are nanoseconds since the epoch).
pub(super) const NS_PER_SEC: i64 = 1_000_000_000;

/// A path argument, classified.
pub(super) enum P {
    /// Under a prefix: serve it (the guard is held until the value is dropped).
    Dafs(Target, Entered),
    /// Not a dafs path: call libc with this pointer (kept alive by the CString).
    Local(*const c_char, Option<CString>),
    Err(c_int),
}

pub(super) unsafe fn classify(dirfd: c_int, path: *const c_char) -> P {
    if path.is_null() {
        return P::Local(path, None);
    }
    let Some(g) = Entered::enter() else { return P::Local(path, None) };
    match unsafe { resolve_in(dirfd, path) } {
        Ok(Some(t)) => P::Dafs(t, g),
        Ok(None) => P::Local(path, None),
        Err(Ok(abs)) => P::Local(abs.as_ptr(), Some(abs)),
        Err(Err(e)) => P::Err(e),
    }
}

/// Resolution with the guard already held: Ok(Some) dafs, Ok(None) local unchanged,
/// Err(Ok(abs)) local with a rewritten path, Err(Err(errno)).
#[allow(clippy::type_complexity)]
pub(super) unsafe fn resolve_in(
    dirfd: c_int,
    path: *const c_char,
) -> Result<Option<Target>, Result<CString, c_int>> {
    if path.is_null() || config().mounts.is_empty() {
        return Ok(None);
    }
    // SAFETY: a NUL-terminated string from the caller.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    match state::resolve(dirfd, bytes) {
        // PATH_MAX bounds the path the caller gave, as the kernel's does: not the one
        // it makes with a (virtual) working directory in front, which the client
        // library walks in pieces when it exceeds one LOOKUP.
        Ok(Res::Dafs(_)) if bytes.len() >= libc::PATH_MAX as usize => Err(Err(libc::ENAMETOOLONG)),
        Ok(Res::Dafs(t)) => Ok(Some(t)),
        Ok(Res::Local(Some(abs))) => Err(Ok(abs)),
        Ok(Res::Local(None)) => Ok(None),
        Err(e) => Err(Err(e)),
    }
}

/// The guard, if `fd` is a dafs descriptor and this thread is not already inside.
pub(super) fn dafs_fd(fd: c_int) -> Option<Entered> {
    if is_dafs_fd(fd) {
        Entered::enter()
    } else {
        None
    }
}

/// The flags most `*at` calls take (fchmodat, fchownat, utimensat; faccessat adds
/// AT_EACCESS).
pub(super) const AT_NOFOLLOW_EMPTY: c_int = libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH;

/// An `*at` call's flags: any bit outside `allowed` is EINVAL, as the kernel checks
/// before it looks at the path.
pub(super) fn at_flags(flags: c_int, allowed: c_int) -> Result<(), c_int> {
    if flags & !allowed != 0 {
        return Err(libc::EINVAL);
    }
    Ok(())
}

pub(super) fn neg(e: c_int) -> c_int {
    set_errno(e);
    -1
}

/// Run a client call for a path target.
pub(super) fn on_path<T>(
    t: &Target,
    f: impl FnOnce(&mut dafs_client::Client, &str) -> FR<T>,
) -> Result<T, c_int> {
    with(|st| st.call(t.mount, |c| f(c, &t.rel)))
}
