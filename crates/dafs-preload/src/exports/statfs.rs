//! File system statistics: `statfs`/`statvfs` (and their `f` and `64` twins) and the
//! `pathconf` limits glibc derives from them.

use std::ffi::{c_char, c_int};

use super::args::{classify, dafs_fd, neg, on_path, P};
use crate::real::ret;
use crate::state::{with, Target};

/// The block size reported when the server's is smaller (or 0): every block count is
/// divided by it, and no file system has blocks smaller than a 512-byte sector.
const FS_BLOCK_BYTES_MIN: u32 = 512;
/// `f_type`: "dAFS" in ASCII, in the manner of the kernel's `*_SUPER_MAGIC` numbers.
const DAFS_SUPER_MAGIC: i64 = 0x6441_4653;
/// `_PC_FILESIZEBITS`: sizes and offsets are 64-bit in the protocol.
const FILE_SIZE_BITS: libc::c_long = 64;

fn fill_statfs(s: &dafs_proto::FsStat, out: *mut libc::statfs) {
    // SAFETY: the caller's out-buffer.
    let o = unsafe { &mut *out };
    // SAFETY: a C struct of integers: all zeroes is a valid value.
    *o = unsafe { std::mem::zeroed() };
    let bs = s.block_size.max(FS_BLOCK_BYTES_MIN) as u64;
    o.f_type = DAFS_SUPER_MAGIC as _;
    o.f_bsize = bs as _;
    o.f_frsize = bs as _;
    o.f_blocks = s.total_bytes / bs;
    o.f_bfree = s.free_bytes / bs;
    o.f_bavail = s.avail_bytes / bs;
    o.f_files = s.total_files;
    o.f_ffree = s.free_files;
    o.f_namelen = s.name_max as _;
}

fn fill_statvfs(s: &dafs_proto::FsStat, out: *mut libc::statvfs) {
    // SAFETY: the caller's out-buffer.
    let o = unsafe { &mut *out };
    // SAFETY: a C struct of integers: all zeroes is a valid value.
    *o = unsafe { std::mem::zeroed() };
    let bs = s.block_size.max(FS_BLOCK_BYTES_MIN) as u64;
    o.f_bsize = bs;
    o.f_frsize = bs;
    o.f_blocks = s.total_bytes / bs;
    o.f_bfree = s.free_bytes / bs;
    o.f_bavail = s.avail_bytes / bs;
    o.f_files = s.total_files;
    o.f_ffree = s.free_files;
    o.f_favail = s.free_files;
    o.f_namemax = s.name_max as u64;
}

fn fs_of_fd(fd: c_int) -> Result<dafs_proto::FsStat, c_int> {
    with(|st| st.with_ofd(fd, |c, _| Ok(c.statfs()?)))
}

/// The statistics of the file system `t` is on (once `t` is known to exist).
fn fs_of_path(t: &Target) -> Result<dafs_proto::FsStat, c_int> {
    on_path(t, |c, p| {
        c.stat(p)?;
        Ok(c.statfs()?)
    })
}

/// `statfs` and `statvfs` are one family in two C structs: by path and by descriptor,
/// each with a `64` twin (the same struct on the supported targets) that does what the
/// plain function does, down to calling glibc's plain function for a local path.
macro_rules! fs_stat_family {
    ($by_path:ident | $by_path64:ident, $by_fd:ident | $by_fd64:ident, $out:ty, $fill:ident) => {
        interpose! {
            fn $by_path | $by_path64 => $by_path (path: *const c_char, buf: *mut $out) -> c_int
            where next
            {
                match unsafe { classify(libc::AT_FDCWD, path) } {
                    P::Dafs(t, _g) => ret(fs_of_path(&t).map(|s| {
                        $fill(&s, buf);
                        0
                    })),
                    P::Err(e) => neg(e),
                    P::Local(p, _k) => next(p, buf),
                }
            }
        }
        interpose! {
            fn $by_fd | $by_fd64 => $by_fd (fd: c_int, buf: *mut $out) -> c_int where next {
                if let Some(_g) = dafs_fd(fd) {
                    return ret(fs_of_fd(fd).map(|s| {
                        $fill(&s, buf);
                        0
                    }));
                }
                next(fd, buf)
            }
        }
    };
}
fs_stat_family!(statfs | statfs64, fstatfs | fstatfs64, libc::statfs, fill_statfs);
fs_stat_family!(statvfs | statvfs64, fstatvfs | fstatvfs64, libc::statvfs, fill_statvfs);

/// pathconf/fpathconf (glibc answers them with an internal statfs): NAME_MAX from the
/// server, the other limits as the local root file system reports them.
fn conf_value(name: c_int, name_max: u32) -> libc::c_long {
    match name {
        libc::_PC_NAME_MAX => name_max as libc::c_long,
        libc::_PC_PATH_MAX => libc::PATH_MAX as libc::c_long,
        libc::_PC_FILESIZEBITS => FILE_SIZE_BITS,
        // SAFETY: a static path.
        _ => unsafe {
            real!(pathconf: fn(*const c_char, c_int) -> libc::c_long)(c"/".as_ptr(), name)
        },
    }
}
#[no_mangle]
pub unsafe extern "C" fn pathconf(path: *const c_char, name: c_int) -> libc::c_long {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => match fs_of_path(&t) {
            Ok(s) => conf_value(name, s.name_max),
            Err(e) => neg(e) as libc::c_long,
        },
        P::Err(e) => neg(e) as libc::c_long,
        P::Local(p, _k) => real!(pathconf: fn(*const c_char, c_int) -> libc::c_long)(p, name),
    }
}
#[no_mangle]
pub unsafe extern "C" fn fpathconf(fd: c_int, name: c_int) -> libc::c_long {
    if let Some(_g) = dafs_fd(fd) {
        return match fs_of_fd(fd) {
            Ok(s) => conf_value(name, s.name_max),
            Err(e) => neg(e) as libc::c_long,
        };
    }
    real!(fpathconf: fn(c_int, c_int) -> libc::c_long)(fd, name)
}
