//! The working directory: `chdir`/`fchdir` into a prefix set a virtual one, which
//! `getcwd`, `get_current_dir_name` and `realpath` report.

use std::ffi::{c_char, c_int};

use dafs_proto::types::access_mask;

use super::args::{classify, dafs_fd, neg, on_path, P};
use super::stat::path_attr;
use crate::real::{ret, set_errno, Entered};
use crate::state::{self, config, err, with, FR};

/// A working directory must be searchable (chdir(2): EACCES); the server answers for
/// the caller's identity, which a LOOKUP of the directory itself does not check.
fn searchable(granted: u32) -> FR<()> {
    if granted & access_mask::EXECUTE == 0 {
        return err(libc::EACCES);
    }
    Ok(())
}

fn set_vcwd(v: Option<String>) {
    state::CWD.with(|w| w.set(v));
}

#[no_mangle]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(path_attr(&t, true).and_then(|a| {
            if !a.is_dir() {
                return Err(libc::ENOTDIR);
            }
            on_path(&t, |c, p| searchable(c.access(p, access_mask::EXECUTE)?))?;
            set_vcwd(Some(t.vpath.clone()));
            debug!("chdir {} (virtual)", t.vpath);
            Ok(0)
        })),
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            let r = real!(chdir: fn(*const c_char) -> c_int)(p);
            if r == 0 {
                if let Some(_g) = Entered::enter() {
                    if !config().mounts.is_empty() {
                        set_vcwd(None);
                    }
                }
            }
            r
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        let r = with(|st| {
            st.with_ofd(fd, |c, o| {
                if !o.is_dir {
                    return err(libc::ENOTDIR);
                }
                searchable(c.access_handle(o.fh, access_mask::EXECUTE)?)?;
                Ok(o.vpath.clone())
            })
        });
        return ret(r.map(|v| {
            set_vcwd(Some(v));
            0
        }));
    }
    let r = real!(fchdir: fn(c_int) -> c_int)(fd);
    if r == 0 {
        if let Some(_g) = Entered::enter() {
            if !config().mounts.is_empty() {
                set_vcwd(None);
            }
        }
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn getcwd(buf: *mut c_char, size: usize) -> *mut c_char {
    if let Some(_g) = Entered::enter() {
        if !config().mounts.is_empty() {
            if let Some(v) = state::CWD.with(|w| w.vcwd.clone()) {
                return unsafe { copy_out(&v, buf, size) };
            }
        }
    }
    real!(getcwd: fn(*mut c_char, usize) -> *mut c_char)(buf, size)
}

/// Copy a path to the caller's buffer, or to malloc'd memory when `buf` is NULL
/// (getcwd/realpath conventions).
unsafe fn copy_out(s: &str, buf: *mut c_char, size: usize) -> *mut c_char {
    let need = s.len() + 1;
    let out = if buf.is_null() {
        let n = if size == 0 { need } else { size };
        if n < need {
            set_errno(libc::ERANGE);
            return std::ptr::null_mut();
        }
        // SAFETY: allocation for the caller to free().
        let p = unsafe { libc::malloc(n) } as *mut c_char;
        if p.is_null() {
            set_errno(libc::ENOMEM);
            return p;
        }
        p
    } else {
        if size < need {
            set_errno(libc::ERANGE);
            return std::ptr::null_mut();
        }
        buf
    };
    // SAFETY: `out` has room for need bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), out.cast(), s.len());
        *out.add(s.len()) = 0;
    }
    out
}

/// realpath of a dafs path: the normalised virtual path, if the object exists
/// (lexical: symlinks on the server are not expanded in the result).
#[no_mangle]
pub unsafe extern "C" fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => match path_attr(&t, true) {
            Ok(_) => unsafe {
                copy_out(
                    &t.vpath,
                    resolved,
                    if resolved.is_null() { 0 } else { libc::PATH_MAX as usize },
                )
            },
            Err(e) => {
                set_errno(e);
                std::ptr::null_mut()
            }
        },
        P::Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
        P::Local(p, _k) => {
            real!(realpath: fn(*const c_char, *mut c_char) -> *mut c_char)(p, resolved)
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn canonicalize_file_name(path: *const c_char) -> *mut c_char {
    unsafe { realpath(path, std::ptr::null_mut()) }
}

/// get_current_dir_name: glibc's checks $PWD with internal calls; the virtual working
/// directory is answered here.
#[no_mangle]
pub unsafe extern "C" fn get_current_dir_name() -> *mut c_char {
    if let Some(_g) = Entered::enter() {
        if !config().mounts.is_empty() {
            if let Some(v) = state::CWD.with(|w| w.vcwd.clone()) {
                return unsafe { copy_out(&v, std::ptr::null_mut(), 0) };
            }
        }
    }
    real!(get_current_dir_name: fn() -> *mut c_char)()
}
