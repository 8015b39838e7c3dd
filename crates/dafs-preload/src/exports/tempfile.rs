//! Temporary files under a prefix: `mkstemp` and friends, `mkdtemp`.

use std::ffi::{c_char, c_int, CStr};

use super::args::{classify, neg, on_path, Mode, P};
use super::open::do_open;
use crate::real::{ret, set_errno};
use crate::state::{config, Target};

/// The "XXXXXX" a template ends with (before its suffix), replaced by the name.
const TEMPLATE_X: &[u8; 6] = b"XXXXXX";
/// Names tried before giving up with EEXIST: with 62^6 possible names, this many
/// collisions in a row means the names are not what collides.
const NAME_ATTEMPTS_MAX: usize = 100;
/// mkstemp creates the file readable and writable by its owner only (POSIX).
const MKSTEMP_MODE: Mode = 0o600;
/// mkdtemp creates the directory for its owner only (POSIX).
const MKDTEMP_MODE: Mode = 0o700;

/// mkstemp and friends with a template under a prefix: glibc creates the file with an
/// internal open no interposer sees, so the names are generated here (same alphabet,
/// O_EXCL, retried on EEXIST).
unsafe fn mktemp_dafs(
    t: &Target,
    tmpl: *mut c_char,
    suffix: c_int,
    flags: c_int,
    dir: bool,
) -> Result<c_int, c_int> {
    // SAFETY: the caller's writable, NUL-terminated template.
    let bytes = unsafe { CStr::from_ptr(tmpl) }.to_bytes().len();
    let suffix = suffix.max(0) as usize;
    let xs = TEMPLATE_X.len();
    if bytes < xs + suffix {
        return Err(libc::EINVAL);
    }
    let start = bytes - suffix - xs;
    // SAFETY: as above.
    let x = unsafe { std::slice::from_raw_parts_mut(tmpl as *mut u8, bytes) };
    if &x[start..start + xs] != TEMPLATE_X {
        return Err(libc::EINVAL);
    }
    const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let vstart = t.vpath.len() - (bytes - start);
    for _ in 0..NAME_ATTEMPTS_MAX {
        let mut r = [0u8; TEMPLATE_X.len()];
        // SAFETY: getrandom into a local buffer (no blocking flag needed for 6 bytes).
        if unsafe { libc::getrandom(r.as_mut_ptr().cast(), r.len(), 0) } != r.len() as isize {
            return Err(libc::EIO);
        }
        for (d, b) in x[start..start + xs].iter_mut().zip(r) {
            *d = ALPHA[b as usize % ALPHA.len()];
        }
        let mut vpath = t.vpath.clone();
        vpath.replace_range(
            vstart..vstart + xs,
            std::str::from_utf8(&x[start..start + xs]).unwrap_or("XXXXXX"),
        );
        let Some((mount, rel)) = crate::paths::split_mount(&config().mounts, &vpath) else {
            return Err(libc::EINVAL);
        };
        let t2 = Target { mount, rel, vpath, tail: t.tail };
        let r = if dir {
            on_path(&t2, |c, p| Ok(c.mkdir(p, MKDTEMP_MODE).map(|_| 0)?))
        } else {
            do_open(
                &t2,
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | (flags & !libc::O_ACCMODE),
                MKSTEMP_MODE,
            )
        };
        match r {
            Err(libc::EEXIST) => continue,
            r => return r,
        }
    }
    Err(libc::EEXIST)
}

/// mkstemp and friends on `tmpl`: a template under a prefix is served here; any other
/// goes to `next`.
unsafe fn mkstemp_at(
    tmpl: *mut c_char,
    suffix: c_int,
    flags: c_int,
    next: impl FnOnce() -> c_int,
) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, tmpl) } {
        P::Dafs(t, _g) => ret(unsafe { mktemp_dafs(&t, tmpl, suffix, flags, false) }),
        P::Err(e) => neg(e),
        // A template relative to a virtual working directory but outside the prefix is
        // left to glibc as given (rare; documented).
        P::Local(_, _k) => next(),
    }
}
interpose! {
    fn mkstemp | mkstemp64 => mkstemp (tmpl: *mut c_char) -> c_int where next {
        unsafe { mkstemp_at(tmpl, 0, 0, || next(tmpl)) }
    }
}
interpose! {
    fn mkostemp | mkostemp64 => mkostemp (tmpl: *mut c_char, flags: c_int) -> c_int where next {
        unsafe { mkstemp_at(tmpl, 0, flags, || next(tmpl, flags)) }
    }
}
#[no_mangle]
pub unsafe extern "C" fn mkstemps(tmpl: *mut c_char, suffix: c_int) -> c_int {
    let next = || real!(mkstemps: fn(*mut c_char, c_int) -> c_int)(tmpl, suffix);
    unsafe { mkstemp_at(tmpl, suffix, 0, next) }
}
#[no_mangle]
pub unsafe extern "C" fn mkostemps(tmpl: *mut c_char, suffix: c_int, flags: c_int) -> c_int {
    let next = || real!(mkostemps: fn(*mut c_char, c_int, c_int) -> c_int)(tmpl, suffix, flags);
    unsafe { mkstemp_at(tmpl, suffix, flags, next) }
}
#[no_mangle]
pub unsafe extern "C" fn mkdtemp(tmpl: *mut c_char) -> *mut c_char {
    match unsafe { classify(libc::AT_FDCWD, tmpl) } {
        P::Dafs(t, _g) => match unsafe { mktemp_dafs(&t, tmpl, 0, 0, true) } {
            Ok(_) => tmpl,
            Err(e) => {
                set_errno(e);
                std::ptr::null_mut()
            }
        },
        P::Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
        P::Local(_, _k) => real!(mkdtemp: fn(*mut c_char) -> *mut c_char)(tmpl),
    }
}
