//! The interposed functions. Each one either serves a dafs path / descriptor / DIR*
//! (with the reentrancy guard held) or calls the next definition (glibc) unchanged.
//!
//! SAFETY (module-wide): every function here is called by C code with the contract of
//! the libc function it replaces (valid NUL-terminated paths, buffers of the stated
//! length, `iovec` arrays of `cnt` entries, out-pointers to writable storage). The
//! `unsafe` blocks that only forward those arguments — to the real libc function, or to
//! an `unsafe fn` here taking the same contract — rely on exactly that and carry no
//! comment of their own; blocks that do anything more (reinterpreting memory, writing
//! through out-pointers after checks, building slices) say why they are sound.

#![allow(non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_ulong, c_void, CStr, CString};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use dafs_client::Error;
use dafs_proto::types::{access_mask, setattr_mask};
use dafs_proto::{Attr, FileType, SetAttrs, Status};

use crate::real::{errno, ret, ret_ssize, set_errno, Entered};
use crate::state::{
    self, config, err, is_dafs_fd, open_options, with, DirStream, Fail, Kind, Ofd, Res, Target,
    DIRS_OPEN, FR,
};

type Mode = libc::mode_t;

// ------------------------------------------------------------------------ load

/// Runs when the library is loaded (before main): fork handlers, and the descriptors
/// and working directory an exec handed over.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    state::init();
    adopt_std_streams();
}

// ------------------------------------------------------------------------ classification

/// A path argument, classified.
enum P {
    /// Under a prefix: serve it (the guard is held until the value is dropped).
    Dafs(Target, Entered),
    /// Not a dafs path: call libc with this pointer (kept alive by the CString).
    Local(*const c_char, Option<CString>),
    Err(c_int),
}

unsafe fn classify(dirfd: c_int, path: *const c_char) -> P {
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
unsafe fn resolve_in(
    dirfd: c_int,
    path: *const c_char,
) -> Result<Option<Target>, Result<CString, c_int>> {
    if path.is_null() || config().mounts.is_empty() {
        return Ok(None);
    }
    // SAFETY: a NUL-terminated string from the caller.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    match state::resolve(dirfd, bytes) {
        Ok(Res::Dafs(t)) => Ok(Some(t)),
        Ok(Res::Local(Some(abs))) => Err(Ok(abs)),
        Ok(Res::Local(None)) => Ok(None),
        Err(e) => Err(Err(e)),
    }
}

/// The guard, if `fd` is a dafs descriptor and this thread is not already inside.
fn dafs_fd(fd: c_int) -> Option<Entered> {
    if is_dafs_fd(fd) {
        Entered::enter()
    } else {
        None
    }
}

fn neg(e: c_int) -> c_int {
    set_errno(e);
    -1
}

/// Run a client call for a path target.
fn on_path<T>(
    t: &Target,
    f: impl FnOnce(&mut dafs_client::Client, &str) -> FR<T>,
) -> Result<T, c_int> {
    with(|st| st.call(t.mount, |c| f(c, &t.rel)))
}

// ------------------------------------------------------------------------ stat helpers

fn type_bits(t: FileType) -> Mode {
    match t {
        FileType::Regular => libc::S_IFREG,
        FileType::Directory => libc::S_IFDIR,
        FileType::Symlink => libc::S_IFLNK,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Fifo => libc::S_IFIFO,
        FileType::Socket => libc::S_IFSOCK,
    }
}

/// Device number reported for dafs files: major 0xdaf, minor from the server's fsid.
fn dev_of(a: &Attr) -> (u32, u32) {
    (0xdaf, (a.fsid as u32) & 0xfffff)
}

unsafe fn fill_stat(a: &Attr, st: *mut libc::stat) {
    // SAFETY: the caller's out-buffer of the right type.
    let s = unsafe { &mut *st };
    // SAFETY: plain integers.
    *s = unsafe { std::mem::zeroed() };
    let (ma, mi) = dev_of(a);
    s.st_dev = libc::makedev(ma, mi);
    s.st_ino = a.fileid;
    s.st_mode = type_bits(a.ftype) | (a.mode & 0o7777);
    s.st_nlink = a.nlink as _;
    s.st_uid = a.uid;
    s.st_gid = a.gid;
    s.st_rdev = a.rdev;
    s.st_size = a.size as i64;
    s.st_blksize = 65536;
    s.st_blocks = a.used.div_ceil(512) as i64;
    s.st_atime = a.atime_ns.div_euclid(1_000_000_000);
    s.st_atime_nsec = a.atime_ns.rem_euclid(1_000_000_000);
    s.st_mtime = a.mtime_ns.div_euclid(1_000_000_000);
    s.st_mtime_nsec = a.mtime_ns.rem_euclid(1_000_000_000);
    s.st_ctime = a.ctime_ns.div_euclid(1_000_000_000);
    s.st_ctime_nsec = a.ctime_ns.rem_euclid(1_000_000_000);
}

/// `struct statx` (linux/stat.h), 256 bytes.
#[repr(C)]
pub struct StatxTs {
    tv_sec: i64,
    tv_nsec: u32,
    _r: i32,
}
#[repr(C)]
pub struct Statx {
    stx_mask: u32,
    stx_blksize: u32,
    stx_attributes: u64,
    stx_nlink: u32,
    stx_uid: u32,
    stx_gid: u32,
    stx_mode: u16,
    _spare0: u16,
    stx_ino: u64,
    stx_size: u64,
    stx_blocks: u64,
    stx_attributes_mask: u64,
    stx_atime: StatxTs,
    stx_btime: StatxTs,
    stx_ctime: StatxTs,
    stx_mtime: StatxTs,
    stx_rdev_major: u32,
    stx_rdev_minor: u32,
    stx_dev_major: u32,
    stx_dev_minor: u32,
    _spare2: [u64; 14],
}
const _: () = assert!(std::mem::size_of::<Statx>() == 256);

fn ts(ns: i64) -> StatxTs {
    StatxTs {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_nsec: ns.rem_euclid(1_000_000_000) as u32,
        _r: 0,
    }
}

unsafe fn fill_statx(a: &Attr, out: *mut Statx) {
    let (ma, mi) = dev_of(a);
    let v = Statx {
        stx_mask: 0x7ff, // STATX_BASIC_STATS
        stx_blksize: 65536,
        stx_attributes: 0,
        stx_nlink: a.nlink,
        stx_uid: a.uid,
        stx_gid: a.gid,
        stx_mode: (type_bits(a.ftype) | (a.mode & 0o7777)) as u16,
        _spare0: 0,
        stx_ino: a.fileid,
        stx_size: a.size,
        stx_blocks: a.used.div_ceil(512),
        stx_attributes_mask: 0,
        stx_atime: ts(a.atime_ns),
        stx_btime: ts(0),
        stx_ctime: ts(a.ctime_ns),
        stx_mtime: ts(a.mtime_ns),
        stx_rdev_major: libc::major(a.rdev),
        stx_rdev_minor: libc::minor(a.rdev),
        stx_dev_major: ma,
        stx_dev_minor: mi,
        _spare2: [0; 14],
    };
    // SAFETY: the caller's 256-byte out-buffer.
    unsafe { out.write(v) };
}

fn path_attr(t: &Target, follow: bool) -> Result<Attr, c_int> {
    on_path(t, |c, p| Ok(if follow { c.stat(p)? } else { c.lstat(p)? }))
}

fn fd_attr(fd: c_int) -> Result<Attr, c_int> {
    with(|st| st.with_ofd(fd, |c, o| Ok(c.getattr(o.fh)?)))
}

// ------------------------------------------------------------------------ open / close

fn do_open(t: &Target, flags: c_int, mode: Mode) -> Result<c_int, c_int> {
    if flags & libc::O_TMPFILE == libc::O_TMPFILE {
        return Err(libc::EOPNOTSUPP);
    }
    let acc = flags & libc::O_ACCMODE;
    if acc == libc::O_ACCMODE {
        return Err(libc::EINVAL);
    }
    with(|st| {
        let umask = st.umask;
        let root = t.rel == config().mounts[t.mount].base;
        let (kind, is_dir, fh, file) = st.call(t.mount, |c| {
            let rel = t.rel.as_str();
            if flags & libc::O_PATH != 0 {
                let (fh, a) = c.lookup(rel)?;
                if flags & libc::O_DIRECTORY != 0 && !a.is_dir() {
                    return err(libc::ENOTDIR);
                }
                return Ok((Kind::Path, a.is_dir(), fh, None));
            }
            if flags & libc::O_NOFOLLOW != 0 {
                match c.lstat(rel) {
                    Ok(a) if a.ftype == FileType::Symlink => return err(libc::ELOOP),
                    Ok(_) | Err(Error::Status(Status::NoEnt)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if flags & libc::O_DIRECTORY != 0 || root {
                let (fh, a) = c.lookup(rel)?;
                if !a.is_dir() {
                    return err(libc::ENOTDIR);
                }
                if acc != libc::O_RDONLY || flags & libc::O_CREAT != 0 {
                    return err(libc::EISDIR);
                }
                return Ok((Kind::Dir, true, fh, None));
            }
            match c.open(rel, open_options(flags, mode & !umask & 0o7777, true)) {
                Ok(f) if f.attr.is_dir() => {
                    let fh = f.fh;
                    let _ = c.close(f);
                    if acc != libc::O_RDONLY {
                        return err(libc::EISDIR);
                    }
                    Ok((Kind::Dir, true, fh, None))
                }
                Ok(f) => Ok((Kind::File, false, f.fh, Some(f))),
                Err(Error::Status(Status::IsDir))
                    if acc == libc::O_RDONLY && flags & libc::O_CREAT == 0 =>
                {
                    let (fh, _) = c.lookup(rel)?;
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

unsafe fn open_common(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: Mode,
    name: u8,
) -> c_int {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(do_open(&t, flags, mode)),
        P::Err(e) => neg(e),
        P::Local(p, _keep) => match (name, dirfd) {
            (0, _) => real!(open: fn(*const c_char, c_int, ...) -> c_int)(p, flags, mode),
            (1, _) => real!(open64: fn(*const c_char, c_int, ...) -> c_int)(p, flags, mode),
            // A rewritten (absolute) path ignores dirfd.
            (2, d) => {
                real!(openat: fn(c_int, *const c_char, c_int, ...) -> c_int)(d, p, flags, mode)
            }
            (_, d) => {
                real!(openat64: fn(c_int, *const c_char, c_int, ...) -> c_int)(d, p, flags, mode)
            }
        },
    }
}

// The variadic `open(const char *, int, ...)` family, defined with the mode argument
// fixed (see the crate documentation for why that is ABI-compatible): `mode` is only
// read when O_CREAT or O_TMPFILE says the caller passed one, exactly like glibc.
#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: Mode) -> c_int {
    unsafe { open_common(libc::AT_FDCWD, path, flags, mode, 0) }
}
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: Mode) -> c_int {
    unsafe { open_common(libc::AT_FDCWD, path, flags, mode, 1) }
}
#[no_mangle]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: Mode,
) -> c_int {
    unsafe { open_common(dirfd, path, flags, mode, 2) }
}
#[no_mangle]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: Mode,
) -> c_int {
    unsafe { open_common(dirfd, path, flags, mode, 3) }
}
/// _FORTIFY_SOURCE variants (no mode: they are only used without O_CREAT).
#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    unsafe { open_common(libc::AT_FDCWD, path, flags, 0, 0) }
}
#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    unsafe { open_common(libc::AT_FDCWD, path, flags, 0, 1) }
}
#[no_mangle]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    unsafe { open_common(dirfd, path, flags, 0, 2) }
}
#[no_mangle]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    unsafe { open_common(dirfd, path, flags, 0, 3) }
}
#[no_mangle]
pub unsafe extern "C" fn creat(path: *const c_char, mode: Mode) -> c_int {
    unsafe {
        open_common(libc::AT_FDCWD, path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, mode, 0)
    }
}
#[no_mangle]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: Mode) -> c_int {
    unsafe {
        open_common(libc::AT_FDCWD, path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, mode, 1)
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

// ------------------------------------------------------------------------ data

fn do_read(fd: c_int, buf: *mut u8, n: usize, at: Option<i64>) -> Result<usize, c_int> {
    with(|st| {
        st.with_ofd(fd, |c, o| {
            match o.kind {
                Kind::Dir => return err(libc::EISDIR),
                Kind::Path => return err(libc::EBADF),
                Kind::File => {}
            }
            if o.flags & libc::O_ACCMODE == libc::O_WRONLY {
                return err(libc::EBADF);
            }
            let off = match at {
                Some(a) if a < 0 => return err(libc::EINVAL),
                Some(a) => a as u64,
                None => o.offset,
            };
            if n == 0 {
                return Ok(0);
            }
            if buf.is_null() {
                return err(libc::EFAULT);
            }
            // SAFETY: the caller's buffer of n bytes.
            let b = unsafe { std::slice::from_raw_parts_mut(buf, n) };
            let got = c.pread(o.file.as_ref().unwrap(), b, off)?;
            if at.is_none() {
                o.offset = off + got as u64;
            }
            Ok(got)
        })
    })
}

fn do_write(fd: c_int, buf: *const u8, n: usize, at: Option<i64>) -> Result<usize, c_int> {
    with(|st| {
        st.with_ofd(fd, |c, o| {
            if o.kind != Kind::File || o.flags & libc::O_ACCMODE == libc::O_RDONLY {
                return err(libc::EBADF);
            }
            let off = match at {
                Some(a) if a < 0 => return err(libc::EINVAL),
                Some(a) => a as u64,
                None => o.offset,
            };
            if n == 0 {
                return Ok(0);
            }
            if buf.is_null() {
                return err(libc::EFAULT);
            }
            // SAFETY: the caller's buffer of n bytes.
            let data = unsafe { std::slice::from_raw_parts(buf, n) };
            let f = o.file.as_ref().unwrap();
            if o.flags & libc::O_APPEND != 0 {
                // O_APPEND (also for pwrite, as on Linux): the server picks the offset
                // atomically when the file was opened in append mode; after F_SETFL
                // turned O_APPEND on it is emulated (size, then write: not atomic).
                let end = if o.opened_append {
                    let mut end = 0;
                    for chunk in data.chunks(c.max_io_size().max(1)) {
                        end = c.append(f, chunk)? + chunk.len() as u64;
                    }
                    end
                } else {
                    let size = c.fstat(f)?.size;
                    c.pwrite(f, data, size)?;
                    size + n as u64
                };
                if at.is_none() {
                    o.offset = end;
                }
                if o.flags & (libc::O_SYNC | libc::O_DSYNC) != 0 {
                    c.fsync(f)?;
                }
                return Ok(n);
            }
            let w = c.pwrite(f, data, off)?;
            if at.is_none() {
                o.offset = off + w as u64;
            }
            // O_SYNC / O_DSYNC: the data is stable before write returns.
            if o.flags & (libc::O_SYNC | libc::O_DSYNC) != 0 {
                c.fsync(f)?;
            }
            Ok(w)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(do_read(fd, buf.cast(), n, None));
    }
    real!(read: fn(c_int, *mut c_void, usize) -> isize)(fd, buf, n)
}
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(do_write(fd, buf.cast(), n, None));
    }
    real!(write: fn(c_int, *const c_void, usize) -> isize)(fd, buf, n)
}
#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: usize, off: i64) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(do_read(fd, buf.cast(), n, Some(off)));
    }
    real!(pread: fn(c_int, *mut c_void, usize, i64) -> isize)(fd, buf, n, off)
}
#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, n: usize, off: i64) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(do_read(fd, buf.cast(), n, Some(off)));
    }
    real!(pread64: fn(c_int, *mut c_void, usize, i64) -> isize)(fd, buf, n, off)
}
#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: usize, off: i64) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(do_write(fd, buf.cast(), n, Some(off)));
    }
    real!(pwrite: fn(c_int, *const c_void, usize, i64) -> isize)(fd, buf, n, off)
}
#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, n: usize, off: i64) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(do_write(fd, buf.cast(), n, Some(off)));
    }
    real!(pwrite64: fn(c_int, *const c_void, usize, i64) -> isize)(fd, buf, n, off)
}

unsafe fn iovs<'a>(iov: *const libc::iovec, cnt: c_int) -> Result<&'a [libc::iovec], c_int> {
    if !(0..=1024).contains(&cnt) {
        return Err(libc::EINVAL);
    }
    if cnt == 0 {
        return Ok(&[]);
    }
    // SAFETY: the caller's array of cnt iovecs.
    Ok(unsafe { std::slice::from_raw_parts(iov, cnt as usize) })
}

/// readv: one read into a bounce buffer, scattered (one round trip, one offset update).
unsafe fn do_readv(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    at: Option<i64>,
) -> Result<usize, c_int> {
    let v = unsafe { iovs(iov, cnt) }?;
    let total: usize = v.iter().map(|x| x.iov_len).sum();
    let mut tmp = vec![0u8; total];
    let n = do_read(fd, tmp.as_mut_ptr(), total, at)?;
    let mut done = 0;
    for x in v {
        if done >= n {
            break;
        }
        let k = x.iov_len.min(n - done);
        // SAFETY: the caller's iovec buffer of iov_len >= k bytes.
        unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr().add(done), x.iov_base.cast(), k) };
        done += k;
    }
    Ok(n)
}

/// writev: gathered into one write (so an O_APPEND writev stays one atomic append).
unsafe fn do_writev(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    at: Option<i64>,
) -> Result<usize, c_int> {
    let v = unsafe { iovs(iov, cnt) }?;
    let mut tmp = Vec::with_capacity(v.iter().map(|x| x.iov_len).sum());
    for x in v {
        if x.iov_len > 0 {
            // SAFETY: the caller's iovec buffer.
            tmp.extend_from_slice(unsafe {
                std::slice::from_raw_parts(x.iov_base as *const u8, x.iov_len)
            });
        }
    }
    do_write(fd, tmp.as_ptr(), tmp.len(), at)
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(unsafe { do_readv(fd, iov, cnt, None) });
    }
    real!(readv: fn(c_int, *const libc::iovec, c_int) -> isize)(fd, iov, cnt)
}
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(unsafe { do_writev(fd, iov, cnt, None) });
    }
    real!(writev: fn(c_int, *const libc::iovec, c_int) -> isize)(fd, iov, cnt)
}
#[no_mangle]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const libc::iovec, cnt: c_int, off: i64) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(unsafe { do_readv(fd, iov, cnt, Some(off)) });
    }
    real!(preadv: fn(c_int, *const libc::iovec, c_int, i64) -> isize)(fd, iov, cnt, off)
}
#[no_mangle]
pub unsafe extern "C" fn preadv64(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: i64,
) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(unsafe { do_readv(fd, iov, cnt, Some(off)) });
    }
    real!(preadv64: fn(c_int, *const libc::iovec, c_int, i64) -> isize)(fd, iov, cnt, off)
}
#[no_mangle]
pub unsafe extern "C" fn pwritev(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: i64,
) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(unsafe { do_writev(fd, iov, cnt, Some(off)) });
    }
    real!(pwritev: fn(c_int, *const libc::iovec, c_int, i64) -> isize)(fd, iov, cnt, off)
}
#[no_mangle]
pub unsafe extern "C" fn pwritev64(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: i64,
) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return ret_ssize(unsafe { do_writev(fd, iov, cnt, Some(off)) });
    }
    real!(pwritev64: fn(c_int, *const libc::iovec, c_int, i64) -> isize)(fd, iov, cnt, off)
}

fn do_lseek(fd: c_int, off: i64, whence: c_int) -> Result<i64, c_int> {
    with(|st| {
        st.with_ofd(fd, |c, o| {
            let size = |c: &mut dafs_client::Client, o: &Ofd| -> FR<i64> {
                Ok(c.getattr(o.fh)?.size as i64)
            };
            let new = match whence {
                libc::SEEK_SET => off,
                libc::SEEK_CUR => {
                    (o.offset as i64).checked_add(off).ok_or(Fail::Errno(libc::EOVERFLOW))?
                }
                libc::SEEK_END => {
                    size(c, o)?.checked_add(off).ok_or(Fail::Errno(libc::EOVERFLOW))?
                }
                // No holes are reported: data everywhere up to the end of file.
                libc::SEEK_DATA | libc::SEEK_HOLE => {
                    let s = size(c, o)?;
                    if off < 0 {
                        return err(libc::EINVAL);
                    }
                    if off >= s {
                        return err(libc::ENXIO);
                    }
                    if whence == libc::SEEK_DATA {
                        off
                    } else {
                        s
                    }
                }
                _ => return err(libc::EINVAL),
            };
            if new < 0 {
                return err(libc::EINVAL);
            }
            o.offset = new as u64;
            Ok(new)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn lseek(fd: c_int, off: i64, whence: c_int) -> i64 {
    if let Some(_g) = dafs_fd(fd) {
        return do_lseek(fd, off, whence).unwrap_or_else(|e| neg(e) as i64);
    }
    real!(lseek: fn(c_int, i64, c_int) -> i64)(fd, off, whence)
}
#[no_mangle]
pub unsafe extern "C" fn lseek64(fd: c_int, off: i64, whence: c_int) -> i64 {
    if let Some(_g) = dafs_fd(fd) {
        return do_lseek(fd, off, whence).unwrap_or_else(|e| neg(e) as i64);
    }
    real!(lseek64: fn(c_int, i64, c_int) -> i64)(fd, off, whence)
}

fn do_fsync(fd: c_int) -> Result<c_int, c_int> {
    with(|st| {
        st.with_ofd(fd, |c, o| {
            if let Some(f) = &o.file {
                c.fsync(f)?;
            }
            Ok(0)
        })
    })
}
#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(do_fsync(fd));
    }
    real!(fsync: fn(c_int) -> c_int)(fd)
}
#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(do_fsync(fd));
    }
    real!(fdatasync: fn(c_int) -> c_int)(fd)
}

fn do_ftruncate(fd: c_int, len: i64) -> Result<c_int, c_int> {
    if len < 0 {
        return Err(libc::EINVAL);
    }
    with(|st| {
        st.with_ofd(fd, |c, o| {
            if o.kind != Kind::File || o.flags & libc::O_ACCMODE == libc::O_RDONLY {
                return err(libc::EINVAL);
            }
            c.setattr(
                o.fh,
                SetAttrs { mask: setattr_mask::SIZE, size: len as u64, ..Default::default() },
            )?;
            Ok(0)
        })
    })
}
#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: i64) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(do_ftruncate(fd, len));
    }
    real!(ftruncate: fn(c_int, i64) -> c_int)(fd, len)
}
#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: i64) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(do_ftruncate(fd, len));
    }
    real!(ftruncate64: fn(c_int, i64) -> c_int)(fd, len)
}
#[no_mangle]
pub unsafe extern "C" fn truncate(path: *const c_char, len: i64) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) if len < 0 => {
            let _ = t;
            neg(libc::EINVAL)
        }
        P::Dafs(t, _g) => ret(on_path(&t, |c, p| Ok(c.truncate(p, len as u64).map(|_| 0)?))),
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(truncate: fn(*const c_char, i64) -> c_int)(p, len),
    }
}
#[no_mangle]
pub unsafe extern "C" fn truncate64(path: *const c_char, len: i64) -> c_int {
    unsafe { truncate(path, len) }
}

// ------------------------------------------------------------------------ stat family

unsafe fn stat_common(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
    which: u8,
) -> c_int {
    // fstatat(fd, "", buf, AT_EMPTY_PATH) is fstat(fd).
    if flags & libc::AT_EMPTY_PATH != 0
        && !path.is_null()
        && unsafe { *path } == 0
        && is_dafs_fd(dirfd)
    {
        return unsafe { fstat(dirfd, buf) };
    }
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(path_attr(&t, flags & libc::AT_SYMLINK_NOFOLLOW == 0).map(|a| {
            unsafe { fill_stat(&a, buf) };
            0
        })),
        P::Err(e) => neg(e),
        P::Local(p, _k) => match which {
            0 => real!(stat: fn(*const c_char, *mut libc::stat) -> c_int)(p, buf),
            1 => real!(lstat: fn(*const c_char, *mut libc::stat) -> c_int)(p, buf),
            2 => real!(fstatat: fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int)(
                dirfd, p, buf, flags,
            ),
            3 => real!(stat64: fn(*const c_char, *mut libc::stat) -> c_int)(p, buf),
            4 => real!(lstat64: fn(*const c_char, *mut libc::stat) -> c_int)(p, buf),
            _ => real!(fstatat64: fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int)(
                dirfd, p, buf, flags,
            ),
        },
    }
}

#[no_mangle]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    unsafe { stat_common(libc::AT_FDCWD, path, buf, 0, 0) }
}
#[no_mangle]
pub unsafe extern "C" fn lstat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    unsafe { stat_common(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW, 1) }
}
#[no_mangle]
pub unsafe extern "C" fn fstatat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    unsafe { stat_common(dirfd, path, buf, flags, 2) }
}
// struct stat64 is struct stat on the supported (LP64) targets.
#[no_mangle]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut libc::stat) -> c_int {
    unsafe { stat_common(libc::AT_FDCWD, path, buf, 0, 3) }
}
#[no_mangle]
pub unsafe extern "C" fn lstat64(path: *const c_char, buf: *mut libc::stat) -> c_int {
    unsafe { stat_common(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW, 4) }
}
#[no_mangle]
pub unsafe extern "C" fn fstatat64(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    unsafe { stat_common(dirfd, path, buf, flags, 5) }
}
#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, buf: *mut libc::stat) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(fd_attr(fd).map(|a| {
            unsafe { fill_stat(&a, buf) };
            0
        }));
    }
    real!(fstat: fn(c_int, *mut libc::stat) -> c_int)(fd, buf)
}
#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, buf: *mut libc::stat) -> c_int {
    if is_dafs_fd(fd) {
        return unsafe { fstat(fd, buf) };
    }
    real!(fstat64: fn(c_int, *mut libc::stat) -> c_int)(fd, buf)
}
// The pre-2.33 wrappers old binaries import; `ver` selects the kernel layout, which is
// `struct stat` on the supported targets.
#[no_mangle]
pub unsafe extern "C" fn __xstat(_ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
    unsafe { stat(path, buf) }
}
#[no_mangle]
pub unsafe extern "C" fn __xstat64(
    _ver: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
) -> c_int {
    unsafe { stat64(path, buf) }
}
#[no_mangle]
pub unsafe extern "C" fn __lxstat(_ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
    unsafe { lstat(path, buf) }
}
#[no_mangle]
pub unsafe extern "C" fn __lxstat64(
    _ver: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
) -> c_int {
    unsafe { lstat64(path, buf) }
}
#[no_mangle]
pub unsafe extern "C" fn __fxstat(_ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
    unsafe { fstat(fd, buf) }
}
#[no_mangle]
pub unsafe extern "C" fn __fxstat64(_ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
    unsafe { fstat64(fd, buf) }
}
#[no_mangle]
pub unsafe extern "C" fn __fxstatat(
    _ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    unsafe { fstatat(dirfd, path, buf, flags) }
}
#[no_mangle]
pub unsafe extern "C" fn __fxstatat64(
    _ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    unsafe { fstatat64(dirfd, path, buf, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: u32,
    buf: *mut Statx,
) -> c_int {
    if flags & libc::AT_EMPTY_PATH != 0 && !path.is_null() && unsafe { *path } == 0 {
        if let Some(_g) = dafs_fd(dirfd) {
            return ret(fd_attr(dirfd).map(|a| {
                unsafe { fill_statx(&a, buf) };
                0
            }));
        }
    }
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(path_attr(&t, flags & libc::AT_SYMLINK_NOFOLLOW == 0).map(|a| {
            unsafe { fill_statx(&a, buf) };
            0
        })),
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(statx: fn(c_int, *const c_char, c_int, u32, *mut Statx) -> c_int)(
            dirfd, p, flags, mask, buf,
        ),
    }
}

fn fill_statfs(s: &dafs_proto::FsStat, out: *mut libc::statfs) {
    // SAFETY: the caller's out-buffer.
    let o = unsafe { &mut *out };
    *o = unsafe { std::mem::zeroed() };
    let bs = s.block_size.max(512) as u64;
    o.f_type = 0x6441_4653; // "dAFS"
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
    *o = unsafe { std::mem::zeroed() };
    let bs = s.block_size.max(512) as u64;
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

#[no_mangle]
pub unsafe extern "C" fn statfs(path: *const c_char, buf: *mut libc::statfs) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(on_path(&t, |c, p| {
            c.stat(p)?;
            Ok(c.statfs()?)
        })
        .map(|s| {
            fill_statfs(&s, buf);
            0
        })),
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(statfs: fn(*const c_char, *mut libc::statfs) -> c_int)(p, buf),
    }
}
#[no_mangle]
pub unsafe extern "C" fn statfs64(path: *const c_char, buf: *mut libc::statfs) -> c_int {
    unsafe { statfs(path, buf) }
}
#[no_mangle]
pub unsafe extern "C" fn fstatfs(fd: c_int, buf: *mut libc::statfs) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(fs_of_fd(fd).map(|s| {
            fill_statfs(&s, buf);
            0
        }));
    }
    real!(fstatfs: fn(c_int, *mut libc::statfs) -> c_int)(fd, buf)
}
#[no_mangle]
pub unsafe extern "C" fn fstatfs64(fd: c_int, buf: *mut libc::statfs) -> c_int {
    unsafe { fstatfs(fd, buf) }
}
#[no_mangle]
pub unsafe extern "C" fn statvfs(path: *const c_char, buf: *mut libc::statvfs) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(on_path(&t, |c, p| {
            c.stat(p)?;
            Ok(c.statfs()?)
        })
        .map(|s| {
            fill_statvfs(&s, buf);
            0
        })),
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(statvfs: fn(*const c_char, *mut libc::statvfs) -> c_int)(p, buf),
    }
}
#[no_mangle]
pub unsafe extern "C" fn statvfs64(path: *const c_char, buf: *mut libc::statvfs) -> c_int {
    unsafe { statvfs(path, buf) }
}
#[no_mangle]
pub unsafe extern "C" fn fstatvfs(fd: c_int, buf: *mut libc::statvfs) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(fs_of_fd(fd).map(|s| {
            fill_statvfs(&s, buf);
            0
        }));
    }
    real!(fstatvfs: fn(c_int, *mut libc::statvfs) -> c_int)(fd, buf)
}
#[no_mangle]
pub unsafe extern "C" fn fstatvfs64(fd: c_int, buf: *mut libc::statvfs) -> c_int {
    unsafe { fstatvfs(fd, buf) }
}

// ------------------------------------------------------------------------ namespace

#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    unsafe { unlinkat(libc::AT_FDCWD, path, 0) }
}
#[no_mangle]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(on_path(&t, |c, p| {
            if flags & libc::AT_REMOVEDIR != 0 {
                c.rmdir(p)?;
            } else {
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
#[no_mangle]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(on_path(&t, |c, p| Ok(c.rmdir(p).map(|_| 0)?))),
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
                Ok(c.mkdir(p, mode & !um & 0o7777).map(|_| 0)?)
            }))
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) if dirfd == libc::AT_FDCWD => {
            real!(mkdir: fn(*const c_char, Mode) -> c_int)(p, mode)
        }
        P::Local(p, _k) => real!(mkdirat: fn(c_int, *const c_char, Mode) -> c_int)(dirfd, p, mode),
    }
}

/// Two-path operations: both dafs on one mount, both local, or EXDEV.
enum P2 {
    Dafs(Target, Target, Entered),
    Local(*const c_char, *const c_char, Option<CString>, Option<CString>),
    Err(c_int),
}

unsafe fn classify2(d1: c_int, p1: *const c_char, d2: c_int, p2: *const c_char) -> P2 {
    let Some(g) = Entered::enter() else { return P2::Local(p1, p2, None, None) };
    let a = unsafe { resolve_in(d1, p1) };
    let b = unsafe { resolve_in(d2, p2) };
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

fn do_rename(a: &Target, b: &Target, flags: u32) -> Result<c_int, c_int> {
    if flags & !libc::RENAME_NOREPLACE != 0 {
        return Err(libc::EINVAL);
    }
    on_path(a, |c, from| {
        if flags & libc::RENAME_NOREPLACE != 0 && c.lstat(&b.rel).is_ok() {
            return err(libc::EEXIST);
        }
        c.rename(from, &b.rel)?;
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
#[no_mangle]
pub unsafe extern "C" fn link(old: *const c_char, new: *const c_char) -> c_int {
    match unsafe { classify2(libc::AT_FDCWD, old, libc::AT_FDCWD, new) } {
        P2::Dafs(a, b, _g) => ret(on_path(&a, |c, p| Ok(c.link(p, &b.rel).map(|_| 0)?))),
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
        P2::Dafs(a, b, _g) => ret(on_path(&a, |c, p| Ok(c.link(p, &b.rel).map(|_| 0)?))),
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
            ret(on_path(&t, |c, p| Ok(c.symlink(&tg, p).map(|_| 0)?)))
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
        P::Dafs(t, _g) => ret(do_access(&t, mode, flags & libc::AT_SYMLINK_NOFOLLOW == 0)),
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(faccessat: fn(c_int, *const c_char, c_int, c_int) -> c_int)(dirfd, p, mode, flags)
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn euidaccess(path: *const c_char, mode: c_int) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => ret(do_access(&t, mode, true)),
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(euidaccess: fn(*const c_char, c_int) -> c_int)(p, mode),
    }
}
#[no_mangle]
pub unsafe extern "C" fn eaccess(path: *const c_char, mode: c_int) -> c_int {
    unsafe { euidaccess(path, mode) }
}

// ------------------------------------------------------------------------ attributes

/// Apply `set` to a path (following symlinks unless `nofollow`; the protocol has no
/// way to change a symlink's own attributes: EOPNOTSUPP then).
fn setattr_path(t: &Target, set: SetAttrs, nofollow: bool) -> Result<c_int, c_int> {
    on_path(t, |c, p| {
        if nofollow && c.lstat(p)?.ftype == FileType::Symlink {
            return err(libc::EOPNOTSUPP);
        }
        let (fh, _) = c.lookup(p)?;
        c.setattr(fh, set)?;
        Ok(0)
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
    SetAttrs { mask: setattr_mask::MODE, mode: mode & 0o7777, ..Default::default() }
}

fn chown_set(uid: libc::uid_t, gid: libc::gid_t) -> SetAttrs {
    let mut s = SetAttrs::default();
    if uid != u32::MAX {
        s.mask |= setattr_mask::UID;
        s.uid = uid;
    }
    if gid != u32::MAX {
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
            n if !(0..1_000_000_000).contains(&n) => return Err(libc::EINVAL),
            n => {
                s.mask |= set;
                let ns = x.tv_sec.saturating_mul(1_000_000_000).saturating_add(n);
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
        P::Dafs(t, _g) => {
            ret(setattr_path(&t, chmod_set(mode), flags & libc::AT_SYMLINK_NOFOLLOW != 0))
        }
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
        P::Dafs(t, _g) => {
            ret(setattr_path(&t, chown_set(uid, gid), flags & libc::AT_SYMLINK_NOFOLLOW != 0))
        }
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
        P::Dafs(t, _g) => ret(unsafe { times_set(times) }
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
            let ts: Option<[libc::timespec; 2]> = (!tv.is_null()).then(|| {
                // SAFETY: the caller's two timevals.
                let v = unsafe { std::slice::from_raw_parts(tv, 2) };
                [
                    libc::timespec { tv_sec: v[0].tv_sec, tv_nsec: v[0].tv_usec * 1000 },
                    libc::timespec { tv_sec: v[1].tv_sec, tv_nsec: v[1].tv_usec * 1000 },
                ]
            });
            let p = ts.as_ref().map(|a| a.as_ptr()).unwrap_or(std::ptr::null());
            ret(unsafe { times_set(p) }.and_then(|s| setattr_path(&t, s, false)))
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(utimes: fn(*const c_char, *const libc::timeval) -> c_int)(p, tv),
    }
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
            with(|st| st.umask = mask & 0o777);
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

// ------------------------------------------------------------------------ descriptors

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(with(|st| {
            let id = st.ofd_id(fd)?;
            let n = real!(dup: fn(c_int) -> c_int)(fd);
            if n < 0 {
                return Err(errno());
            }
            st.add_fd(n, id, false);
            Ok(n)
        }));
    }
    real!(dup: fn(c_int) -> c_int)(fd)
}

/// dup2/dup3: the kernel duplicates the placeholder (closing `new` first, atomically);
/// the table follows: `new` now shares `old`'s open file description.
unsafe fn dup_to(old: c_int, new: c_int, flags: c_int, three: bool) -> c_int {
    let call = || {
        if three {
            real!(dup3: fn(c_int, c_int, c_int) -> c_int)(old, new, flags)
        } else {
            real!(dup2: fn(c_int, c_int) -> c_int)(old, new)
        }
    };
    if !is_dafs_fd(old) && !is_dafs_fd(new) && !state::VFORK_USED.load(Relaxed) {
        return call();
    }
    let Some(_g) = Entered::enter() else { return call() };
    // (errors of the real call are re-raised with neg: the guard restores errno.)
    if state::in_vfork_child() {
        let src = with(|st| st.vfork_view(old));
        let r = call();
        if r < 0 {
            return neg(errno());
        }
        if old != new {
            state::vfork_note(new, src.map(|(id, _)| (id, flags & libc::O_CLOEXEC != 0)));
        }
        return r;
    }
    if !is_dafs_fd(old) && !is_dafs_fd(new) {
        return call();
    }
    if old == new {
        if three {
            return neg(libc::EINVAL);
        }
        return if is_dafs_fd(old) { new } else { call() };
    }
    let r = with(|st| {
        let id = if is_dafs_fd(old) { Some(st.ofd_id(old)) } else { None };
        if let Some(Err(e)) = id {
            return neg(e);
        }
        let r = call();
        if r < 0 {
            return neg(errno());
        }
        let _ = st.drop_fd(new);
        if let Some(Ok(id)) = id {
            st.add_fd(new, id, flags & libc::O_CLOEXEC != 0);
        }
        r
    });
    if r >= 0 {
        std_changed(new);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    unsafe { dup_to(old, new, 0, false) }
}
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    unsafe { dup_to(old, new, flags, true) }
}

fn do_lock(fd: c_int, cmd: c_int, fl: *mut libc::flock) -> Result<c_int, c_int> {
    if fl.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's struct flock.
    let l = unsafe { &mut *fl };
    let mut backoff = Duration::from_micros(100);
    loop {
        let r = with(|st| {
            let r = st.with_ofd(fd, |c, o| {
                let Some(f) = o.file.as_ref() else { return err(libc::EBADF) };
                let base = match l.l_whence as c_int {
                    libc::SEEK_SET => 0,
                    libc::SEEK_CUR => o.offset as i64,
                    libc::SEEK_END => c.fstat(f)?.size as i64,
                    _ => return err(libc::EINVAL),
                };
                let (mut start, mut len) = (base.saturating_add(l.l_start), l.l_len);
                if len < 0 {
                    start += len;
                    len = -len;
                }
                if start < 0 {
                    return err(libc::EINVAL);
                }
                let (start, len) = (start as u64, len as u64);
                let acc = o.flags & libc::O_ACCMODE;
                match (cmd, l.l_type as c_int) {
                    (libc::F_GETLK, t @ (libc::F_RDLCK | libc::F_WRLCK)) => {
                        match c.test_lock(f, start, len, t == libc::F_WRLCK)? {
                            None => l.l_type = libc::F_UNLCK as i16,
                            Some(i) => {
                                l.l_type =
                                    if i.exclusive { libc::F_WRLCK } else { libc::F_RDLCK } as i16;
                                l.l_whence = libc::SEEK_SET as i16;
                                l.l_start = i.offset as i64;
                                l.l_len = i.len as i64;
                                // The holder is another session (another process or
                                // host): no local pid to report.
                                l.l_pid = -1;
                            }
                        }
                        Ok((0, None))
                    }
                    (libc::F_GETLK, _) => err(libc::EINVAL),
                    (_, libc::F_UNLCK) => {
                        c.unlock(f, start, len)?;
                        Ok((0, None))
                    }
                    (_, libc::F_RDLCK) if acc == libc::O_WRONLY => err(libc::EBADF),
                    (_, libc::F_WRLCK) if acc == libc::O_RDONLY => err(libc::EBADF),
                    (_, t @ (libc::F_RDLCK | libc::F_WRLCK)) => {
                        c.lock(f, start, len, t == libc::F_WRLCK)?;
                        Ok((0, Some((o.mount, f.attr.fileid))))
                    }
                    _ => err(libc::EINVAL),
                }
            });
            if let Ok((_, Some((m, fid)))) = r {
                st.mounts[m].locked.insert(fid);
            }
            r.map(|(v, _)| v)
        });
        match r {
            // F_SETLKW: wait (without holding the process-wide lock) and retry.
            Err(libc::EAGAIN) if cmd == libc::F_SETLKW => {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

/// `fcntl(int, int, ...)`, defined with one fixed `unsigned long` argument (an int or a
/// pointer, as the command says; see the crate documentation).
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(do_fcntl(fd, cmd, arg));
    }
    real!(fcntl: fn(c_int, c_int, ...) -> c_int)(fd, cmd, arg)
}
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(do_fcntl(fd, cmd, arg));
    }
    real!(fcntl64: fn(c_int, c_int, ...) -> c_int)(fd, cmd, arg)
}

fn do_fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> Result<c_int, c_int> {
    let rf = real!(fcntl: fn(c_int, c_int, ...) -> c_int);
    match cmd {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC if state::in_vfork_child() => with(|st| {
            let src = st.vfork_view(fd);
            // SAFETY: F_DUPFD* with an int argument.
            let n = unsafe { rf(fd, cmd, arg) };
            if n < 0 {
                return Err(errno());
            }
            state::vfork_note(n, src.map(|(id, _)| (id, cmd == libc::F_DUPFD_CLOEXEC)));
            Ok(n)
        }),
        libc::F_SETFD if state::in_vfork_child() => with(|st| {
            // SAFETY: F_SETFD with an int argument.
            if unsafe { rf(fd, cmd, arg) } < 0 {
                return Err(errno());
            }
            let src = st.vfork_view(fd);
            state::vfork_note(fd, src.map(|(id, _)| (id, arg as c_int & libc::FD_CLOEXEC != 0)));
            Ok(0)
        }),
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => with(|st| {
            let id = st.ofd_id(fd)?;
            // SAFETY: F_DUPFD* on a descriptor, with an int argument.
            let n = unsafe { rf(fd, cmd, arg) };
            if n < 0 {
                return Err(errno());
            }
            st.add_fd(n, id, cmd == libc::F_DUPFD_CLOEXEC);
            Ok(n)
        }),
        libc::F_GETFD => with(|st| {
            st.fds.get(&fd).map(|e| if e.cloexec { libc::FD_CLOEXEC } else { 0 }).ok_or(libc::EBADF)
        }),
        libc::F_SETFD => with(|st| {
            // SAFETY: F_SETFD with an int argument.
            if unsafe { rf(fd, cmd, arg) } < 0 {
                return Err(errno());
            }
            let e = st.fds.get_mut(&fd).ok_or(libc::EBADF)?;
            e.cloexec = arg as c_int & libc::FD_CLOEXEC != 0;
            Ok(0)
        }),
        libc::F_GETFL => with(|st| {
            let id = st.ofd_id(fd)?;
            Ok(st.ofds[&id].flags)
        }),
        libc::F_SETFL => with(|st| {
            let changeable = libc::O_APPEND
                | libc::O_NONBLOCK
                | libc::O_DIRECT
                | libc::O_NOATIME
                | libc::O_ASYNC;
            st.with_ofd(fd, |c, o| {
                let flags = (o.flags & !changeable) | (arg as c_int & changeable);
                let append = flags & libc::O_APPEND != 0;
                // The server appends every write of an append-mode open: switching
                // O_APPEND re-opens the file in the other mode (locks belong to the
                // session, not the open, so nothing is lost).
                if o.kind == Kind::File && append != o.opened_append {
                    let f = c.open(&o.rel, open_options(flags, 0, false))?;
                    if let Some(old) = o.file.replace(f) {
                        let _ = c.close(old);
                    }
                    o.opened_append = append;
                }
                o.flags = flags;
                Ok(0)
            })
        }),
        libc::F_GETLK | libc::F_SETLK | libc::F_SETLKW => do_lock(fd, cmd, arg as *mut libc::flock),
        // Open file description locks would need per-description owners in the
        // protocol; refused clearly rather than approximated.
        libc::F_OFD_GETLK | libc::F_OFD_SETLK | libc::F_OFD_SETLKW => Err(libc::EINVAL),
        _ => Err(libc::EINVAL),
    }
}

/// `ioctl(int, unsigned long, ...)`: no ioctl applies to a dafs file (FICLONE and
/// friends fail, so cp copies the data itself; isatty says no).
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    if is_dafs_fd(fd) {
        return neg(libc::ENOTTY);
    }
    real!(ioctl: fn(c_int, c_ulong, ...) -> c_int)(fd, req, arg)
}

/// Offload copies between descriptors: EXDEV for dafs descriptors, which makes cp,
/// Python's shutil and others fall back to read/write.
#[no_mangle]
pub unsafe extern "C" fn copy_file_range(
    fi: c_int,
    oi: *mut i64,
    fo: c_int,
    oo: *mut i64,
    len: usize,
    flags: u32,
) -> isize {
    if is_dafs_fd(fi) || is_dafs_fd(fo) {
        return neg(libc::EXDEV) as isize;
    }
    real!(copy_file_range: fn(c_int, *mut i64, c_int, *mut i64, usize, u32) -> isize)(
        fi, oi, fo, oo, len, flags,
    )
}
#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut i64, n: usize) -> isize {
    if is_dafs_fd(out) || is_dafs_fd(inp) {
        return neg(libc::EINVAL) as isize;
    }
    real!(sendfile: fn(c_int, c_int, *mut i64, usize) -> isize)(out, inp, off, n)
}
#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, inp: c_int, off: *mut i64, n: usize) -> isize {
    if is_dafs_fd(out) || is_dafs_fd(inp) {
        return neg(libc::EINVAL) as isize;
    }
    real!(sendfile64: fn(c_int, c_int, *mut i64, usize) -> isize)(out, inp, off, n)
}
#[no_mangle]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, off: i64, len: i64, adv: c_int) -> c_int {
    if is_dafs_fd(fd) {
        return 0; // advice only
    }
    real!(posix_fadvise: fn(c_int, i64, i64, c_int) -> c_int)(fd, off, len, adv)
}
#[no_mangle]
pub unsafe extern "C" fn posix_fadvise64(fd: c_int, off: i64, len: i64, adv: c_int) -> c_int {
    if is_dafs_fd(fd) {
        return 0;
    }
    real!(posix_fadvise64: fn(c_int, i64, i64, c_int) -> c_int)(fd, off, len, adv)
}
#[no_mangle]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, off: i64, len: i64) -> c_int {
    if is_dafs_fd(fd) {
        return neg(libc::EOPNOTSUPP);
    }
    real!(fallocate: fn(c_int, c_int, i64, i64) -> c_int)(fd, mode, off, len)
}
#[no_mangle]
pub unsafe extern "C" fn fallocate64(fd: c_int, mode: c_int, off: i64, len: i64) -> c_int {
    if is_dafs_fd(fd) {
        return neg(libc::EOPNOTSUPP);
    }
    real!(fallocate64: fn(c_int, c_int, i64, i64) -> c_int)(fd, mode, off, len)
}
/// posix_fallocate: the size grows to off+len (no space reservation in the protocol).
/// Returns an error number, not -1.
fn do_posix_fallocate(fd: c_int, off: i64, len: i64) -> c_int {
    if off < 0 || len <= 0 {
        return libc::EINVAL;
    }
    let r = with(|st| {
        st.with_ofd(fd, |c, o| {
            if o.kind != Kind::File || o.flags & libc::O_ACCMODE == libc::O_RDONLY {
                return err(libc::EBADF);
            }
            let end = (off as u64).saturating_add(len as u64);
            if c.getattr(o.fh)?.size < end {
                c.setattr(
                    o.fh,
                    SetAttrs { mask: setattr_mask::SIZE, size: end, ..Default::default() },
                )?;
            }
            Ok(0)
        })
    });
    r.unwrap_or_else(|e| e)
}
#[no_mangle]
pub unsafe extern "C" fn posix_fallocate(fd: c_int, off: i64, len: i64) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return do_posix_fallocate(fd, off, len);
    }
    real!(posix_fallocate: fn(c_int, i64, i64) -> c_int)(fd, off, len)
}
#[no_mangle]
pub unsafe extern "C" fn posix_fallocate64(fd: c_int, off: i64, len: i64) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return do_posix_fallocate(fd, off, len);
    }
    real!(posix_fallocate64: fn(c_int, i64, i64) -> c_int)(fd, off, len)
}
/// mmap of a dafs file. A private mapping (MAP_PRIVATE) is emulated: anonymous memory
/// filled with the file's bytes at map time, then given the requested protection —
/// what the program writes there stays private, as with any private mapping; later
/// changes of the file are not seen (POSIX leaves that unspecified for MAP_PRIVATE).
/// Shared mappings would need page-cache coherence the client does not have: ENODEV,
/// the errno for "this file system does not support mmap".
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    let real_mmap = real!(mmap: fn(*mut c_void, usize, c_int, c_int, c_int, i64) -> *mut c_void);
    if flags & libc::MAP_ANONYMOUS == 0 && is_dafs_fd(fd) {
        let Some(_g) = Entered::enter() else { return real_mmap(addr, len, prot, flags, fd, off) };
        let fail = |e: c_int| {
            set_errno(e);
            libc::MAP_FAILED
        };
        if flags & libc::MAP_TYPE != libc::MAP_PRIVATE {
            return fail(libc::ENODEV);
        }
        if len == 0 || off < 0 || off % 4096 != 0 {
            return fail(libc::EINVAL);
        }
        let readable = with(|st| {
            st.ofd_id(fd).map(|id| (st.ofds[&id].kind, st.ofds[&id].flags & libc::O_ACCMODE))
        });
        match readable {
            Err(e) => return fail(e),
            Ok((Kind::File, acc)) if acc != libc::O_WRONLY => {}
            Ok(_) => return fail(libc::EACCES),
        }
        let keep = flags
            & (libc::MAP_FIXED
                | libc::MAP_FIXED_NOREPLACE
                | libc::MAP_NORESERVE
                | libc::MAP_POPULATE
                | libc::MAP_32BIT);
        let p = real_mmap(
            addr,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            keep | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return fail(errno());
        }
        // Read the bytes: a short read (end of file) leaves zeros.
        let mut done = 0usize;
        while done < len {
            match do_read(
                fd,
                unsafe { (p as *mut u8).add(done) },
                len - done,
                Some(off + done as i64),
            ) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) => {
                    unsafe { libc::munmap(p, len) };
                    return fail(e);
                }
            }
        }
        // SAFETY: our fresh mapping of `len` bytes.
        if unsafe { libc::mprotect(p, len, prot) } != 0 {
            let e = errno();
            unsafe { libc::munmap(p, len) };
            return fail(e);
        }
        return p;
    }
    real_mmap(addr, len, prot, flags, fd, off)
}
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    unsafe { mmap(addr, len, prot, flags, fd, off) }
}

// ------------------------------------------------------------------------ directories

fn new_stream(fd: c_int) -> Result<*mut libc::DIR, c_int> {
    with(|st| {
        let id = st.ofd_id(fd)?;
        if !st.ofds[&id].is_dir {
            return Err(libc::ENOTDIR);
        }
        let entries = st.list_dir(id)?;
        // SAFETY: plain integers and a byte array.
        let ent: libc::dirent64 = unsafe { std::mem::zeroed() };
        let p = Box::into_raw(Box::new(DirStream { fd, entries, pos: 0, ent }));
        st.dirs.insert(p as usize);
        DIRS_OPEN.fetch_add(1, Relaxed);
        Ok(p.cast())
    })
}

/// Run `f` on a dafs directory stream; None if `d` is not one of ours.
fn with_stream<T>(
    d: *mut libc::DIR,
    f: impl FnOnce(&mut state::State, &mut DirStream) -> T,
) -> Option<T> {
    if DIRS_OPEN.load(Relaxed) == 0 || d.is_null() {
        return None;
    }
    with(|st| {
        if !st.dirs.contains(&(d as usize)) {
            return None;
        }
        // SAFETY: a live DirStream we allocated (it is in `dirs`), used under the lock.
        let s = unsafe { &mut *(d as *mut DirStream) };
        Some(f(st, s))
    })
}

#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => {
            let r = do_open(&t, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC, 0).and_then(
                |fd| {
                    new_stream(fd).inspect_err(|_| {
                        let _ = with(|st| st.drop_fd(fd));
                        state::real_close(fd);
                    })
                },
            );
            r.unwrap_or_else(|e| {
                set_errno(e);
                std::ptr::null_mut()
            })
        }
        P::Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
        P::Local(p, _k) => real!(opendir: fn(*const c_char) -> *mut libc::DIR)(p),
    }
}
#[no_mangle]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut libc::DIR {
    if let Some(_g) = dafs_fd(fd) {
        return new_stream(fd).unwrap_or_else(|e| {
            set_errno(e);
            std::ptr::null_mut()
        });
    }
    real!(fdopendir: fn(c_int) -> *mut libc::DIR)(fd)
}

fn next_entry(d: *mut libc::DIR) -> Option<*mut libc::dirent64> {
    with_stream(d, |_, s| {
        let (name, ino, ty) = s.entries.get(s.pos)?.clone();
        s.pos += 1;
        let e = &mut s.ent;
        e.d_ino = ino;
        e.d_off = s.pos as i64;
        e.d_type = ty;
        let n = name.len().min(255);
        for (dst, src) in e.d_name.iter_mut().zip(name[..n].iter()) {
            *dst = *src as c_char;
        }
        e.d_name[n] = 0;
        e.d_reclen = std::mem::size_of::<libc::dirent64>() as u16;
        Some(e as *mut libc::dirent64)
    })
    .map(|o| o.unwrap_or(std::ptr::null_mut()))
}

// struct dirent and struct dirent64 have the same layout on the supported targets.
#[no_mangle]
pub unsafe extern "C" fn readdir(d: *mut libc::DIR) -> *mut libc::dirent {
    if let Some(_g) = Entered::enter() {
        if let Some(e) = next_entry(d) {
            return e.cast();
        }
    }
    real!(readdir: fn(*mut libc::DIR) -> *mut libc::dirent)(d)
}
#[no_mangle]
pub unsafe extern "C" fn readdir64(d: *mut libc::DIR) -> *mut libc::dirent64 {
    if let Some(_g) = Entered::enter() {
        if let Some(e) = next_entry(d) {
            return e;
        }
    }
    real!(readdir64: fn(*mut libc::DIR) -> *mut libc::dirent64)(d)
}
#[no_mangle]
pub unsafe extern "C" fn closedir(d: *mut libc::DIR) -> c_int {
    if let Some(_g) = Entered::enter() {
        let r = with_stream(d, |st, s| {
            let fd = s.fd;
            st.dirs.remove(&(d as usize));
            DIRS_OPEN.fetch_sub(1, Relaxed);
            // SAFETY: allocated by new_stream, removed from `dirs` above: freed once.
            drop(unsafe { Box::from_raw(d as *mut DirStream) });
            let r = st.drop_fd(fd);
            state::real_close(fd);
            r
        });
        if let Some(r) = r {
            return ret(r.map(|_| 0));
        }
    }
    real!(closedir: fn(*mut libc::DIR) -> c_int)(d)
}
#[no_mangle]
pub unsafe extern "C" fn dirfd(d: *mut libc::DIR) -> c_int {
    if let Some(_g) = Entered::enter() {
        if let Some(fd) = with_stream(d, |_, s| s.fd) {
            return fd;
        }
    }
    real!(dirfd: fn(*mut libc::DIR) -> c_int)(d)
}
#[no_mangle]
pub unsafe extern "C" fn rewinddir(d: *mut libc::DIR) {
    if let Some(_g) = Entered::enter() {
        let done = with_stream(d, |st, s| {
            if let Ok(id) = st.ofd_id(s.fd) {
                if let Ok(v) = st.list_dir(id) {
                    s.entries = v;
                }
            }
            s.pos = 0;
        });
        if done.is_some() {
            return;
        }
    }
    real!(rewinddir: fn(*mut libc::DIR) -> ())(d)
}
#[no_mangle]
pub unsafe extern "C" fn telldir(d: *mut libc::DIR) -> libc::c_long {
    if let Some(_g) = Entered::enter() {
        if let Some(p) = with_stream(d, |_, s| s.pos as libc::c_long) {
            return p;
        }
    }
    real!(telldir: fn(*mut libc::DIR) -> libc::c_long)(d)
}
#[no_mangle]
pub unsafe extern "C" fn seekdir(d: *mut libc::DIR, pos: libc::c_long) {
    if let Some(_g) = Entered::enter() {
        if with_stream(d, |_, s| s.pos = pos.max(0) as usize).is_some() {
            return;
        }
    }
    real!(seekdir: fn(*mut libc::DIR, libc::c_long) -> ())(d, pos)
}

// ------------------------------------------------------------------------ working directory

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
            let id = st.ofd_id(fd)?;
            let o = &st.ofds[&id];
            if !o.is_dir {
                return Err(libc::ENOTDIR);
            }
            Ok(o.vpath.clone())
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

// ------------------------------------------------------------------------ exec

extern "C" {
    static mut environ: *const *const c_char;
}

/// The environment for a new program: `envp` without stale DAFS_PRELOAD_* entries,
/// plus the dafs descriptors it inherits (DAFS_PRELOAD_FDS) and the virtual working
/// directory (DAFS_PRELOAD_CWD).
unsafe fn exec_env(
    envp: *const *const c_char,
    fa: usize,
) -> Option<(Vec<CString>, Vec<*const c_char>)> {
    let _g = Entered::enter()?;
    if config().mounts.is_empty() {
        return None;
    }
    let actions = fa_actions(fa);
    let fds = with(|st| st.exec_fds(&actions));
    let cwd = state::CWD.with(|w| w.vcwd.clone());
    let mut own: Vec<CString> = Vec::new();
    let mut ptrs: Vec<*const c_char> = Vec::new();
    let mut p = envp;
    while !p.is_null() && unsafe { !(*p).is_null() } {
        let e = unsafe { CStr::from_ptr(*p) }.to_bytes();
        if !e.starts_with(b"DAFS_PRELOAD_FDS=") && !e.starts_with(b"DAFS_PRELOAD_CWD=") {
            ptrs.push(unsafe { *p });
        }
        p = unsafe { p.add(1) };
    }
    if let Some(f) = fds {
        own.push(CString::new(format!("{}={f}", state::FDS_ENV)).ok()?);
    }
    if let Some(c) = cwd {
        own.push(CString::new(format!("{}={c}", state::CWD_ENV)).ok()?);
    }
    ptrs.extend(own.iter().map(|c| c.as_ptr()));
    ptrs.push(std::ptr::null());
    Some((own, ptrs))
}

/// A program stored under a prefix cannot be exec'd by the kernel: copy it into an
/// anonymous memory file and exec that (argv[0] is kept). The memory file stays open
/// (not close-on-exec) so that a `#!` script's interpreter can read it via /dev/fd.
fn stage_program(t: &Target) -> Result<CString, c_int> {
    let data = on_path(t, |c, p| {
        let a = c.stat(p)?;
        if !a.is_dir() && a.mode & 0o111 == 0 {
            return err(libc::EACCES);
        }
        if a.is_dir() {
            return err(libc::EACCES);
        }
        let f = c.open(p, dafs_client::OpenOptions::read())?;
        let mut v = vec![0u8; a.size as usize];
        let n = c.pread(&f, &mut v, 0)?;
        v.truncate(n);
        let _ = c.close(f);
        Ok(v)
    })?;
    // SAFETY: a static name; plain syscalls on a descriptor we own.
    let fd = unsafe { libc::memfd_create(c"dafs-exec".as_ptr(), 0) };
    if fd < 0 {
        return Err(errno());
    }
    let mut off = 0;
    while off < data.len() {
        // SAFETY: writing our buffer to our memfd.
        let w = unsafe {
            real!(write: fn(c_int, *const c_void, usize) -> isize)(
                fd,
                data[off..].as_ptr().cast(),
                data.len() - off,
            )
        };
        if w <= 0 {
            let e = errno();
            state::real_close(fd);
            return Err(e);
        }
        off += w as usize;
    }
    CString::new(format!("/proc/self/fd/{fd}")).map_err(|_| libc::EINVAL)
}

#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let env = unsafe { exec_env(envp, 0) };
    let envp2 = env.as_ref().map(|(_, p)| p.as_ptr()).unwrap_or(envp);
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, g) => {
            let staged = stage_program(&t);
            drop(g);
            match staged {
                Ok(p) => {
                    real!(execve: fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int)(
                        p.as_ptr(),
                        argv,
                        envp2,
                    )
                }
                Err(e) => neg(e),
            }
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(execve: fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int)(
                p, argv, envp2,
            )
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    unsafe { execve(path, argv, environ) }
}
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // A name with a slash is a path (possibly a dafs one); PATH search is glibc's
    // (directories under a prefix in PATH are not searched).
    if !file.is_null() && unsafe { CStr::from_ptr(file) }.to_bytes().contains(&b'/') {
        return unsafe { execve(file, argv, envp) };
    }
    let env = unsafe { exec_env(envp, 0) };
    let envp2 = env.as_ref().map(|(_, p)| p.as_ptr()).unwrap_or(envp);
    real!(execvpe: fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int)(
        file, argv, envp2,
    )
}
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    unsafe { execvpe(file, argv, environ) }
}
/// dup2/close file actions recorded per `posix_spawn_file_actions_t` (by address), so
/// that posix_spawn can describe the dafs descriptors the new program will have.
/// (actions object address, [(from, to)]); `from == -1`: close(to).
type Recorded = Vec<(usize, Vec<(c_int, c_int)>)>;
static FILE_ACTIONS: std::sync::Mutex<Recorded> = std::sync::Mutex::new(Vec::new());

fn fa_actions(fa: usize) -> Vec<(c_int, c_int)> {
    if fa == 0 {
        return Vec::new();
    }
    let g = FILE_ACTIONS.lock().unwrap_or_else(|e| e.into_inner());
    g.iter().find(|(a, _)| *a == fa).map(|(_, v)| v.clone()).unwrap_or_default()
}

fn fa_record(fa: usize, act: Option<(c_int, c_int)>) {
    let mut g = FILE_ACTIONS.lock().unwrap_or_else(|e| e.into_inner());
    match act {
        None => g.retain(|(a, _)| *a != fa),
        Some(x) => match g.iter_mut().find(|(a, _)| *a == fa) {
            Some((_, v)) => v.push(x),
            None => g.push((fa, vec![x])),
        },
    }
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_init(
    fa: *mut libc::posix_spawn_file_actions_t,
) -> c_int {
    fa_record(fa as usize, None);
    real!(posix_spawn_file_actions_init: fn(*mut libc::posix_spawn_file_actions_t) -> c_int)(fa)
}
#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_destroy(
    fa: *mut libc::posix_spawn_file_actions_t,
) -> c_int {
    fa_record(fa as usize, None);
    real!(posix_spawn_file_actions_destroy: fn(*mut libc::posix_spawn_file_actions_t) -> c_int)(fa)
}
#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_adddup2(
    fa: *mut libc::posix_spawn_file_actions_t,
    fd: c_int,
    newfd: c_int,
) -> c_int {
    let r = real!(posix_spawn_file_actions_adddup2: fn(*mut libc::posix_spawn_file_actions_t, c_int, c_int) -> c_int)(
        fa, fd, newfd,
    );
    if r == 0 {
        fa_record(fa as usize, Some((fd, newfd)));
    }
    r
}
#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_addclose(
    fa: *mut libc::posix_spawn_file_actions_t,
    fd: c_int,
) -> c_int {
    let r = real!(posix_spawn_file_actions_addclose: fn(*mut libc::posix_spawn_file_actions_t, c_int) -> c_int)(
        fa, fd,
    );
    if r == 0 {
        fa_record(fa as usize, Some((-1, fd)));
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const c_char,
    fa: *const libc::posix_spawn_file_actions_t,
    at: *const libc::posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    let env = unsafe { exec_env(envp.cast(), fa as usize) };
    let envp2 = env.as_ref().map(|(_, p)| p.as_ptr().cast()).unwrap_or(envp);
    real!(posix_spawn: fn(*mut libc::pid_t, *const c_char, *const libc::posix_spawn_file_actions_t, *const libc::posix_spawnattr_t, *const *mut c_char, *const *mut c_char) -> c_int)(
        pid, path, fa, at, argv, envp2,
    )
}
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    file: *const c_char,
    fa: *const libc::posix_spawn_file_actions_t,
    at: *const libc::posix_spawnattr_t,
    argv: *const *mut c_char,
    envp: *const *mut c_char,
) -> c_int {
    let env = unsafe { exec_env(envp.cast(), fa as usize) };
    let envp2 = env.as_ref().map(|(_, p)| p.as_ptr().cast()).unwrap_or(envp);
    real!(posix_spawnp: fn(*mut libc::pid_t, *const c_char, *const libc::posix_spawn_file_actions_t, *const libc::posix_spawnattr_t, *const *mut c_char, *const *mut c_char) -> c_int)(
        pid, file, fa, at, argv, envp2,
    )
}

// ------------------------------------------------------------------------ stdio

#[repr(C)]
struct CookieIo {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> isize>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> isize>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, funcs: CookieIo) -> *mut libc::FILE;
}

// The cookie is the dafs descriptor; the callbacks go through the interposed
// functions, so a FILE on a dafs file shares the descriptor's offset like any FILE.
unsafe extern "C" fn ck_read(c: *mut c_void, buf: *mut c_char, n: usize) -> isize {
    unsafe { read(c as usize as c_int, buf.cast(), n) }
}
unsafe extern "C" fn ck_write(c: *mut c_void, buf: *const c_char, n: usize) -> isize {
    let mut done = 0;
    while done < n {
        let w = unsafe { write(c as usize as c_int, buf.add(done).cast(), n - done) };
        if w <= 0 {
            // fopencookie: "0 on error" (errno is set).
            return done as isize;
        }
        done += w as usize;
    }
    done as isize
}
unsafe extern "C" fn ck_seek(c: *mut c_void, off: *mut i64, whence: c_int) -> c_int {
    let r = unsafe { lseek64(c as usize as c_int, *off, whence) };
    if r < 0 {
        return -1;
    }
    unsafe { *off = r };
    0
}
unsafe extern "C" fn ck_close(c: *mut c_void) -> c_int {
    unsafe { close(c as usize as c_int) }
}

/// glibc's `struct _IO_FILE` keeps the descriptor at this offset on LP64 targets
/// (`int _flags`, padding, 12 pointers). A cookie stream has -2 there; putting the
/// dafs descriptor in its place makes `fileno()` (and so `fstat(fileno(f))`, which
/// e.g. the linker does) work. Verified against a real FILE before the first use.
const FILENO_OFFSET: usize = 112;

fn fileno_offset_ok() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        // SAFETY: static strings.
        let fp = unsafe {
            real!(fopen: fn(*const c_char, *const c_char) -> *mut libc::FILE)(
                c"/dev/null".as_ptr(),
                c"r".as_ptr(),
            )
        };
        if fp.is_null() {
            return false;
        }
        // SAFETY: a FILE glibc just returned; reading an int inside the struct.
        let ok = unsafe {
            *((fp as *const u8).add(FILENO_OFFSET) as *const c_int)
                == real!(fileno: fn(*mut libc::FILE) -> c_int)(fp)
        };
        // SAFETY: the FILE opened above.
        unsafe { real!(fclose: fn(*mut libc::FILE) -> c_int)(fp) };
        ok
    })
}

/// A stdio stream on dafs descriptor `fd` (closing the stream closes `fd`).
unsafe fn cookie_stream(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    let io = CookieIo {
        read: Some(ck_read),
        write: Some(ck_write),
        seek: Some(ck_seek),
        close: Some(ck_close),
    };
    let fp = unsafe { fopencookie(fd as usize as *mut c_void, mode, io) };
    set_fileno(fp, fd);
    fp
}

fn set_fileno(fp: *mut libc::FILE, fd: c_int) {
    if !fp.is_null() && fileno_offset_ok() {
        // SAFETY: fp is a cookie FILE; FILENO_OFFSET was checked against glibc.
        unsafe {
            let p = (fp as *mut u8).add(FILENO_OFFSET) as *mut c_int;
            if *p == -2 {
                *p = fd;
            }
        }
    }
}

/// fopen mode string -> open flags.
fn mode_flags(mode: &[u8]) -> Option<c_int> {
    let plus = mode.contains(&b'+');
    let mut f = match mode.first()? {
        b'r' if plus => libc::O_RDWR,
        b'r' => libc::O_RDONLY,
        b'w' if plus => libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC,
        b'w' => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        b'a' if plus => libc::O_RDWR | libc::O_CREAT | libc::O_APPEND,
        b'a' => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
        _ => return None,
    };
    let opts = mode.split(|&b| b == b',').next().unwrap_or(mode);
    if opts.contains(&b'x') {
        f |= libc::O_EXCL;
    }
    if opts.contains(&b'e') {
        f |= libc::O_CLOEXEC;
    }
    Some(f)
}

unsafe fn fopen_common(path: *const c_char, mode: *const c_char, is64: bool) -> *mut libc::FILE {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => {
            let Some(flags) = (!mode.is_null())
                .then(|| mode_flags(unsafe { CStr::from_ptr(mode) }.to_bytes()))
                .flatten()
            else {
                set_errno(libc::EINVAL);
                return std::ptr::null_mut();
            };
            match do_open(&t, flags, 0o666) {
                Ok(fd) => {
                    let fp = unsafe { cookie_stream(fd, mode) };
                    if fp.is_null() {
                        let e = errno();
                        let _ = with(|st| st.drop_fd(fd));
                        state::real_close(fd);
                        set_errno(e);
                    }
                    fp
                }
                Err(e) => {
                    set_errno(e);
                    std::ptr::null_mut()
                }
            }
        }
        P::Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
        P::Local(p, _k) if is64 => {
            real!(fopen64: fn(*const c_char, *const c_char) -> *mut libc::FILE)(p, mode)
        }
        P::Local(p, _k) => {
            real!(fopen: fn(*const c_char, *const c_char) -> *mut libc::FILE)(p, mode)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    unsafe { fopen_common(path, mode, false) }
}
#[no_mangle]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    unsafe { fopen_common(path, mode, true) }
}
#[no_mangle]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    if let Some(_g) = dafs_fd(fd) {
        return unsafe { cookie_stream(fd, mode) };
    }
    real!(fdopen: fn(c_int, *const c_char) -> *mut libc::FILE)(fd, mode)
}
/// freopen cannot turn an existing FILE into a dafs stream (glibc's FILE does its I/O
/// with internal system calls no interposer sees): refused with EOPNOTSUPP for a dafs
/// path, and the stream is left open and unchanged.
#[no_mangle]
pub unsafe extern "C" fn freopen(
    path: *const c_char,
    mode: *const c_char,
    fp: *mut libc::FILE,
) -> *mut libc::FILE {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(_, _g) => {
            set_errno(libc::EOPNOTSUPP);
            std::ptr::null_mut()
        }
        P::Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
        P::Local(p, _k) => {
            real!(freopen: fn(*const c_char, *const c_char, *mut libc::FILE) -> *mut libc::FILE)(
                p, mode, fp,
            )
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn freopen64(
    path: *const c_char,
    mode: *const c_char,
    fp: *mut libc::FILE,
) -> *mut libc::FILE {
    unsafe { freopen(path, mode, fp) }
}

extern "C" {
    static mut stdin: *mut libc::FILE;
    static mut stdout: *mut libc::FILE;
    static mut stderr: *mut libc::FILE;
}

unsafe extern "C" fn ck_keep(_c: *mut c_void) -> c_int {
    0
}

/// Standard streams replaced while descriptor 0, 1 or 2 is a dafs descriptor: the
/// original FILE (to put back) per descriptor. Only touched with the state lock held.
struct StdSwap([Option<usize>; 3]);
static STD_SWAP: std::sync::Mutex<StdSwap> = std::sync::Mutex::new(StdSwap([None; 3]));

/// Keep `stdin`/`stdout`/`stderr` usable when descriptor 0, 1 or 2 is (or stops being)
/// a dafs descriptor — after an exec that handed one over (`prog < /dafs/in` in a
/// preloaded shell), or a `dup2(dafsfd, 1)` (a shell's `echo x >> /dafs/f`). glibc's
/// standard streams do their I/O with internal system calls no interposer sees, so
/// while the descriptor is a dafs one the stream is a cookie stream on it (which does
/// not own the descriptor), and the original stream is put back afterwards.
fn sync_std_streams() {
    let mut sw = STD_SWAP.lock().unwrap_or_else(|e| e.into_inner());
    for fd in 0..3 {
        let dafs = is_dafs_fd(fd);
        // SAFETY: the standard stream variables of the program (copy-relocated
        // globals, so the program sees the change); streams we created are freed
        // only here.
        unsafe {
            let slot: *mut *mut libc::FILE = match fd {
                0 => &raw mut stdin,
                1 => &raw mut stdout,
                _ => &raw mut stderr,
            };
            match (dafs, sw.0[fd as usize]) {
                (true, None) => {
                    let flags = with(|st| st.ofd_id(fd).map(|id| st.ofds[&id].flags).ok());
                    let Some(flags) = flags else { continue };
                    let mode: &CStr = match fd {
                        0 => c"r",
                        _ if flags & libc::O_APPEND != 0 => c"a",
                        _ => c"w",
                    };
                    let io = CookieIo {
                        read: Some(ck_read),
                        write: Some(ck_write),
                        seek: None,
                        close: Some(ck_keep),
                    };
                    let fp = fopencookie(fd as usize as *mut c_void, mode.as_ptr(), io);
                    if fp.is_null() {
                        continue;
                    }
                    set_fileno(fp, fd);
                    if fd == 2 {
                        libc::setvbuf(fp, std::ptr::null_mut(), libc::_IONBF, 0);
                    }
                    sw.0[fd as usize] = Some(*slot as usize);
                    *slot = fp;
                }
                (false, Some(orig)) => {
                    let ours = *slot;
                    *slot = orig as *mut libc::FILE;
                    sw.0[fd as usize] = None;
                    // Pending output goes to the dafs file it was written for... which
                    // is already gone from this descriptor: glibc flushed it at fflush
                    // time in every program we know (shells flush before restoring).
                    real!(fclose: fn(*mut libc::FILE) -> c_int)(ours);
                }
                _ => {}
            }
        }
    }
}

fn adopt_std_streams() {
    if config().mounts.is_empty() || !(0..3).any(is_dafs_fd) {
        return;
    }
    if let Some(_g) = Entered::enter() {
        sync_std_streams();
    }
}

/// After a descriptor change that may involve 0, 1 or 2.
fn std_changed(fd: c_int) {
    if (0..3).contains(&fd) {
        sync_std_streams();
    }
}

// ------------------------------------------------------------------------ more I/O entry points

/// preadv2/pwritev2: offset -1 means the file offset; RWF_* flags are hints the client
/// has no use for (RWF_NOWAIT cannot be honoured: EOPNOTSUPP, as for files that do not
/// support it).
unsafe fn v2(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: i64,
    flags: c_int,
    write: bool,
) -> isize {
    const RWF_NOWAIT: c_int = 0x8;
    if flags & RWF_NOWAIT != 0 {
        return neg(libc::EOPNOTSUPP) as isize;
    }
    let at = if off == -1 { None } else { Some(off) };
    ret_ssize(if write {
        unsafe { do_writev(fd, iov, cnt, at) }
    } else {
        unsafe { do_readv(fd, iov, cnt, at) }
    })
}
#[no_mangle]
pub unsafe extern "C" fn preadv2(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: i64,
    flags: c_int,
) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return unsafe { v2(fd, iov, cnt, off, flags, false) };
    }
    real!(preadv2: fn(c_int, *const libc::iovec, c_int, i64, c_int) -> isize)(
        fd, iov, cnt, off, flags,
    )
}
#[no_mangle]
pub unsafe extern "C" fn preadv64v2(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: i64,
    flags: c_int,
) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return unsafe { v2(fd, iov, cnt, off, flags, false) };
    }
    real!(preadv64v2: fn(c_int, *const libc::iovec, c_int, i64, c_int) -> isize)(
        fd, iov, cnt, off, flags,
    )
}
#[no_mangle]
pub unsafe extern "C" fn pwritev2(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: i64,
    flags: c_int,
) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return unsafe { v2(fd, iov, cnt, off, flags, true) };
    }
    real!(pwritev2: fn(c_int, *const libc::iovec, c_int, i64, c_int) -> isize)(
        fd, iov, cnt, off, flags,
    )
}
#[no_mangle]
pub unsafe extern "C" fn pwritev64v2(
    fd: c_int,
    iov: *const libc::iovec,
    cnt: c_int,
    off: i64,
    flags: c_int,
) -> isize {
    if let Some(_g) = dafs_fd(fd) {
        return unsafe { v2(fd, iov, cnt, off, flags, true) };
    }
    real!(pwritev64v2: fn(c_int, *const libc::iovec, c_int, i64, c_int) -> isize)(
        fd, iov, cnt, off, flags,
    )
}

/// lockf: glibc implements it with an internal fcntl no interposer sees, so it is
/// mapped here onto the same POSIX locks (from the current offset, `len` bytes).
fn do_lockf(fd: c_int, cmd: c_int, len: i64) -> Result<c_int, c_int> {
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_whence = libc::SEEK_CUR as i16;
    fl.l_start = 0;
    fl.l_len = len;
    match cmd {
        libc::F_TEST => {
            fl.l_type = libc::F_WRLCK as i16;
            do_lock(fd, libc::F_GETLK, &mut fl)?;
            if fl.l_type as c_int == libc::F_UNLCK {
                Ok(0)
            } else {
                Err(libc::EACCES)
            }
        }
        libc::F_ULOCK => {
            fl.l_type = libc::F_UNLCK as i16;
            do_lock(fd, libc::F_SETLK, &mut fl)
        }
        libc::F_LOCK | libc::F_TLOCK => {
            fl.l_type = libc::F_WRLCK as i16;
            do_lock(fd, if cmd == libc::F_LOCK { libc::F_SETLKW } else { libc::F_SETLK }, &mut fl)
        }
        _ => Err(libc::EINVAL),
    }
}
#[no_mangle]
pub unsafe extern "C" fn lockf(fd: c_int, cmd: c_int, len: i64) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(do_lockf(fd, cmd, len));
    }
    real!(lockf: fn(c_int, c_int, i64) -> c_int)(fd, cmd, len)
}
#[no_mangle]
pub unsafe extern "C" fn lockf64(fd: c_int, cmd: c_int, len: i64) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        return ret(do_lockf(fd, cmd, len));
    }
    real!(lockf64: fn(c_int, c_int, i64) -> c_int)(fd, cmd, len)
}

/// flock: a whole-file lock held by the process (the protocol's locks belong to the
/// session): it conflicts with other processes' flock and fcntl locks on the file, but
/// not — unlike the kernel's flock — with another open of the same file in this
/// process. Documented in the README.
#[no_mangle]
pub unsafe extern "C" fn flock(fd: c_int, op: c_int) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_whence = libc::SEEK_SET as i16;
        let cmd = if op & libc::LOCK_NB != 0 { libc::F_SETLK } else { libc::F_SETLKW };
        fl.l_type = match op & !libc::LOCK_NB {
            libc::LOCK_SH => libc::F_RDLCK,
            libc::LOCK_EX => libc::F_WRLCK,
            libc::LOCK_UN => libc::F_UNLCK,
            _ => return neg(libc::EINVAL),
        } as i16;
        // flock does not care about the access mode: lock through a shared lock when
        // the descriptor is write-only, an exclusive one is allowed on read-only.
        let r = with(|st| st.ofd_id(fd).map(|id| st.ofds[&id].flags & libc::O_ACCMODE));
        if let (Ok(libc::O_RDONLY), libc::F_WRLCK) = (r, fl.l_type as c_int) {
            return ret(flock_any(fd, cmd, fl));
        }
        return ret(do_lock(fd, cmd, &mut fl).map_err(|e| {
            if e == libc::EAGAIN {
                libc::EWOULDBLOCK
            } else {
                e
            }
        }));
    }
    real!(flock: fn(c_int, c_int) -> c_int)(fd, op)
}

fn flock_any(fd: c_int, cmd: c_int, fl: libc::flock) -> Result<c_int, c_int> {
    // An exclusive flock on a read-only descriptor: take it through the description
    // directly, without fcntl's access-mode check.
    let mut backoff = Duration::from_micros(100);
    loop {
        let r = with(|st| {
            let r = st.with_ofd(fd, |c, o| {
                let Some(f) = o.file.as_ref() else { return err(libc::EBADF) };
                c.lock(f, 0, 0, fl.l_type as c_int == libc::F_WRLCK)?;
                Ok((o.mount, f.attr.fileid))
            });
            r.map(|(m, fid)| {
                st.mounts[m].locked.insert(fid);
                0
            })
        });
        match r {
            Err(libc::EAGAIN) if cmd == libc::F_SETLKW => {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(10));
            }
            Err(libc::EAGAIN) => return Err(libc::EWOULDBLOCK),
            r => return r,
        }
    }
}

// ------------------------------------------------------------------------ temporary files

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
    if bytes < 6 + suffix {
        return Err(libc::EINVAL);
    }
    let start = bytes - suffix - 6;
    // SAFETY: as above.
    let x = unsafe { std::slice::from_raw_parts_mut(tmpl as *mut u8, bytes) };
    if &x[start..start + 6] != b"XXXXXX" {
        return Err(libc::EINVAL);
    }
    const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let vstart = t.vpath.len() - (bytes - start);
    for _ in 0..100 {
        let mut r = [0u8; 6];
        // SAFETY: getrandom into a local buffer (no blocking flag needed for 6 bytes).
        if unsafe { libc::getrandom(r.as_mut_ptr().cast(), 6, 0) } != 6 {
            return Err(libc::EIO);
        }
        for (d, b) in x[start..start + 6].iter_mut().zip(r) {
            *d = ALPHA[b as usize % ALPHA.len()];
        }
        let mut vpath = t.vpath.clone();
        vpath.replace_range(
            vstart..vstart + 6,
            std::str::from_utf8(&x[start..start + 6]).unwrap_or("XXXXXX"),
        );
        let Some((mount, rel)) = crate::paths::split_mount(&config().mounts, &vpath) else {
            return Err(libc::EINVAL);
        };
        let t2 = Target { mount, rel, vpath };
        let r = if dir {
            on_path(&t2, |c, p| Ok(c.mkdir(p, 0o700).map(|_| 0)?))
        } else {
            do_open(
                &t2,
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | (flags & !libc::O_ACCMODE),
                0o600,
            )
        };
        match r {
            Err(libc::EEXIST) => continue,
            r => return r,
        }
    }
    Err(libc::EEXIST)
}

unsafe fn mkstemp_common(tmpl: *mut c_char, suffix: c_int, flags: c_int, which: u8) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, tmpl) } {
        P::Dafs(t, _g) => ret(unsafe { mktemp_dafs(&t, tmpl, suffix, flags, false) }),
        P::Err(e) => neg(e),
        // A template relative to a virtual working directory but outside the prefix is
        // left to glibc as given (rare; documented).
        P::Local(_, _k) => match which {
            0 => real!(mkstemp: fn(*mut c_char) -> c_int)(tmpl),
            1 => real!(mkostemp: fn(*mut c_char, c_int) -> c_int)(tmpl, flags),
            2 => real!(mkstemps: fn(*mut c_char, c_int) -> c_int)(tmpl, suffix),
            _ => real!(mkostemps: fn(*mut c_char, c_int, c_int) -> c_int)(tmpl, suffix, flags),
        },
    }
}
#[no_mangle]
pub unsafe extern "C" fn mkstemp(tmpl: *mut c_char) -> c_int {
    unsafe { mkstemp_common(tmpl, 0, 0, 0) }
}
#[no_mangle]
pub unsafe extern "C" fn mkstemp64(tmpl: *mut c_char) -> c_int {
    unsafe { mkstemp_common(tmpl, 0, 0, 0) }
}
#[no_mangle]
pub unsafe extern "C" fn mkostemp(tmpl: *mut c_char, flags: c_int) -> c_int {
    unsafe { mkstemp_common(tmpl, 0, flags, 1) }
}
#[no_mangle]
pub unsafe extern "C" fn mkostemp64(tmpl: *mut c_char, flags: c_int) -> c_int {
    unsafe { mkstemp_common(tmpl, 0, flags, 1) }
}
#[no_mangle]
pub unsafe extern "C" fn mkstemps(tmpl: *mut c_char, suffix: c_int) -> c_int {
    unsafe { mkstemp_common(tmpl, suffix, 0, 2) }
}
#[no_mangle]
pub unsafe extern "C" fn mkostemps(tmpl: *mut c_char, suffix: c_int, flags: c_int) -> c_int {
    unsafe { mkstemp_common(tmpl, suffix, flags, 3) }
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

/// isatty: a dafs file is not a terminal (answered without the ioctl glibc would make
/// on the placeholder).
#[no_mangle]
pub unsafe extern "C" fn isatty(fd: c_int) -> c_int {
    if is_dafs_fd(fd) {
        set_errno(libc::ENOTTY);
        return 0;
    }
    real!(isatty: fn(c_int) -> c_int)(fd)
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

/// pathconf/fpathconf (glibc answers them with an internal statfs): NAME_MAX from the
/// server, the other limits as the local root file system reports them.
fn conf_value(name: c_int, name_max: u32) -> libc::c_long {
    match name {
        libc::_PC_NAME_MAX => name_max as libc::c_long,
        libc::_PC_PATH_MAX => libc::PATH_MAX as libc::c_long,
        libc::_PC_FILESIZEBITS => 64,
        // SAFETY: a static path.
        _ => unsafe {
            real!(pathconf: fn(*const c_char, c_int) -> libc::c_long)(c"/".as_ptr(), name)
        },
    }
}
#[no_mangle]
pub unsafe extern "C" fn pathconf(path: *const c_char, name: c_int) -> libc::c_long {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => match on_path(&t, |c, p| {
            c.stat(p)?;
            Ok(c.statfs()?.name_max)
        }) {
            Ok(nm) => conf_value(name, nm),
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

type DirentFilter = Option<unsafe extern "C" fn(*const libc::dirent64) -> c_int>;
type DirentCompar = Option<
    unsafe extern "C" fn(*const *const libc::dirent64, *const *const libc::dirent64) -> c_int,
>;

/// scandir on a dafs directory (glibc's opens the directory with an internal call):
/// the same contract — malloc'd entries in a malloc'd array, filtered and sorted.
unsafe fn scandir_dafs(
    t: &Target,
    list: *mut *mut *mut libc::dirent64,
    filter: DirentFilter,
    compar: DirentCompar,
) -> c_int {
    let entries = match do_open(t, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC, 0) {
        Ok(fd) => {
            let r = with(|st| st.ofd_id(fd).and_then(|id| st.list_dir(id)));
            let _ = with(|st| st.drop_fd(fd));
            state::real_close(fd);
            match r {
                Ok(v) => v,
                Err(e) => return neg(e),
            }
        }
        Err(e) => return neg(e),
    };
    let mut out: Vec<*mut libc::dirent64> = Vec::new();
    let free_all = |v: &Vec<*mut libc::dirent64>| {
        for &p in v {
            // SAFETY: allocated with malloc below.
            unsafe { libc::free(p.cast()) };
        }
    };
    for (i, (name, ino, ty)) in entries.iter().enumerate() {
        // SAFETY: a zeroed, malloc'd dirent64 the caller frees with free().
        let e = unsafe { libc::calloc(1, std::mem::size_of::<libc::dirent64>()) }
            as *mut libc::dirent64;
        if e.is_null() {
            free_all(&out);
            return neg(libc::ENOMEM);
        }
        let d = unsafe { &mut *e };
        d.d_ino = *ino;
        d.d_off = i as i64 + 1;
        d.d_type = *ty;
        d.d_reclen = std::mem::size_of::<libc::dirent64>() as u16;
        for (dst, src) in d.d_name.iter_mut().zip(name.iter().take(255)) {
            *dst = *src as c_char;
        }
        if let Some(f) = filter {
            // SAFETY: the caller's filter on a valid entry.
            if unsafe { f(e) } == 0 {
                unsafe { libc::free(e.cast()) };
                continue;
            }
        }
        out.push(e);
    }
    if let Some(c) = compar {
        // SAFETY: qsort over our array with the caller's comparison of entry pointers.
        unsafe {
            libc::qsort(
                out.as_mut_ptr().cast(),
                out.len(),
                std::mem::size_of::<*mut libc::dirent64>(),
                Some(std::mem::transmute::<
                    unsafe extern "C" fn(
                        *const *const libc::dirent64,
                        *const *const libc::dirent64,
                    ) -> c_int,
                    unsafe extern "C" fn(*const c_void, *const c_void) -> c_int,
                >(c)),
            )
        };
    }
    // SAFETY: a malloc'd array the caller frees with free().
    let arr = unsafe { libc::malloc(out.len().max(1) * std::mem::size_of::<*mut libc::dirent64>()) }
        as *mut *mut libc::dirent64;
    if arr.is_null() {
        free_all(&out);
        return neg(libc::ENOMEM);
    }
    unsafe {
        std::ptr::copy_nonoverlapping(out.as_ptr(), arr, out.len());
        *list = arr;
    }
    out.len() as c_int
}

// struct dirent and dirent64 have one layout on the supported targets.
#[no_mangle]
pub unsafe extern "C" fn scandir(
    dir: *const c_char,
    list: *mut *mut *mut libc::dirent64,
    filter: DirentFilter,
    compar: DirentCompar,
) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, dir) } {
        P::Dafs(t, _g) => unsafe { scandir_dafs(&t, list, filter, compar) },
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(scandir: fn(*const c_char, *mut *mut *mut libc::dirent64, DirentFilter, DirentCompar) -> c_int)(
                p, list, filter, compar,
            )
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn scandir64(
    dir: *const c_char,
    list: *mut *mut *mut libc::dirent64,
    filter: DirentFilter,
    compar: DirentCompar,
) -> c_int {
    match unsafe { classify(libc::AT_FDCWD, dir) } {
        P::Dafs(t, _g) => unsafe { scandir_dafs(&t, list, filter, compar) },
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            real!(scandir64: fn(*const c_char, *mut *mut *mut libc::dirent64, DirentFilter, DirentCompar) -> c_int)(
                p, list, filter, compar,
            )
        }
    }
}
