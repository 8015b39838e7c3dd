//! Data: `read`/`write` and their positioned and vectored variants, `lseek`, `fsync`,
//! truncation, and the offload and allocation calls (answered for dafs descriptors
//! without the kernel).

use std::ffi::{c_char, c_int, c_void};

use dafs_proto::types::setattr_mask;
use dafs_proto::SetAttrs;

use super::args::{classify, dafs_fd, neg, on_path, P};
use crate::real::{ret, ret_ssize};
use crate::state::{err, is_dafs_fd, with, Fail, Kind, Ofd, FR};

pub(super) fn do_read(fd: c_int, buf: *mut u8, n: usize, at: Option<i64>) -> Result<usize, c_int> {
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

pub(super) fn do_write(
    fd: c_int,
    buf: *const u8,
    n: usize,
    at: Option<i64>,
) -> Result<usize, c_int> {
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
                let (end, written) = if o.opened_append {
                    let mut end = 0;
                    for chunk in data.chunks(c.io_bytes_max().max(1)) {
                        end = c.append(f, chunk)? + chunk.len() as u64;
                    }
                    (end, n)
                } else {
                    let size = c.fstat(f)?.size;
                    // A short write (file system full) is reported as such.
                    let w = c.pwrite(f, data, size)?;
                    (size + w as u64, w)
                };
                if at.is_none() {
                    o.offset = end;
                }
                if o.flags & (libc::O_SYNC | libc::O_DSYNC) != 0 {
                    c.fsync(f)?;
                }
                return Ok(written);
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
interpose! {
    fn pread | pread64 (fd: c_int, buf: *mut c_void, n: usize, off: i64) -> isize where next {
        if let Some(_g) = dafs_fd(fd) {
            return ret_ssize(do_read(fd, buf.cast(), n, Some(off)));
        }
        next(fd, buf, n, off)
    }
}
interpose! {
    fn pwrite | pwrite64 (fd: c_int, buf: *const c_void, n: usize, off: i64) -> isize where next {
        if let Some(_g) = dafs_fd(fd) {
            return ret_ssize(do_write(fd, buf.cast(), n, Some(off)));
        }
        next(fd, buf, n, off)
    }
}

/// The most iovecs one call takes (Linux's UIO_MAXIOV; more is EINVAL, as from the
/// kernel).
const IOVECS_MAX: c_int = 1024;
/// The preadv2/pwritev2 offset that means "at the file offset" (and moves it).
const OFFSET_CURRENT: i64 = -1;

unsafe fn iovs<'a>(iov: *const libc::iovec, cnt: c_int) -> Result<&'a [libc::iovec], c_int> {
    if !(0..=IOVECS_MAX).contains(&cnt) {
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
interpose! {
    fn preadv | preadv64 (fd: c_int, iov: *const libc::iovec, cnt: c_int, off: i64) -> isize
    where next
    {
        if let Some(_g) = dafs_fd(fd) {
            return ret_ssize(unsafe { do_readv(fd, iov, cnt, Some(off)) });
        }
        next(fd, iov, cnt, off)
    }
}
interpose! {
    fn pwritev | pwritev64 (fd: c_int, iov: *const libc::iovec, cnt: c_int, off: i64) -> isize
    where next
    {
        if let Some(_g) = dafs_fd(fd) {
            return ret_ssize(unsafe { do_writev(fd, iov, cnt, Some(off)) });
        }
        next(fd, iov, cnt, off)
    }
}

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
    let at = if off == OFFSET_CURRENT { None } else { Some(off) };
    ret_ssize(if write {
        unsafe { do_writev(fd, iov, cnt, at) }
    } else {
        unsafe { do_readv(fd, iov, cnt, at) }
    })
}
interpose! {
    fn preadv2 | preadv64v2 (
        fd: c_int,
        iov: *const libc::iovec,
        cnt: c_int,
        off: i64,
        flags: c_int,
    ) -> isize
    where next
    {
        if let Some(_g) = dafs_fd(fd) {
            return unsafe { v2(fd, iov, cnt, off, flags, false) };
        }
        next(fd, iov, cnt, off, flags)
    }
}
interpose! {
    fn pwritev2 | pwritev64v2 (
        fd: c_int,
        iov: *const libc::iovec,
        cnt: c_int,
        off: i64,
        flags: c_int,
    ) -> isize
    where next
    {
        if let Some(_g) = dafs_fd(fd) {
            return unsafe { v2(fd, iov, cnt, off, flags, true) };
        }
        next(fd, iov, cnt, off, flags)
    }
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

interpose! {
    fn lseek | lseek64 (fd: c_int, off: i64, whence: c_int) -> i64 where next {
        if let Some(_g) = dafs_fd(fd) {
            return do_lseek(fd, off, whence).unwrap_or_else(|e| neg(e) as i64);
        }
        next(fd, off, whence)
    }
}

pub(super) fn do_fsync(fd: c_int) -> Result<c_int, c_int> {
    with(|st| {
        st.with_ofd(fd, |c, o| {
            if let Some(f) = &o.file {
                c.fsync(f)?;
            }
            Ok(0)
        })
    })
}
interpose! {
    /// fdatasync is fsync: the protocol's COMMIT has no data-only variant.
    fn fsync | fdatasync (fd: c_int) -> c_int where next {
        if let Some(_g) = dafs_fd(fd) {
            return ret(do_fsync(fd));
        }
        next(fd)
    }
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
interpose! {
    fn ftruncate | ftruncate64 (fd: c_int, len: i64) -> c_int where next {
        if let Some(_g) = dafs_fd(fd) {
            return ret(do_ftruncate(fd, len));
        }
        next(fd, len)
    }
}
interpose! {
    fn truncate | truncate64 => truncate (path: *const c_char, len: i64) -> c_int where next {
        match unsafe { classify(libc::AT_FDCWD, path) } {
            P::Dafs(t, _g) if len < 0 => {
                let _ = t;
                neg(libc::EINVAL)
            }
            P::Dafs(t, _g) => ret(on_path(&t, |c, p| Ok(c.truncate(p, len as u64).map(|_| 0)?))),
            P::Err(e) => neg(e),
            P::Local(p, _k) => next(p, len),
        }
    }
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
interpose! {
    fn sendfile | sendfile64 (out: c_int, inp: c_int, off: *mut i64, n: usize) -> isize where next {
        if is_dafs_fd(out) || is_dafs_fd(inp) {
            return neg(libc::EINVAL) as isize;
        }
        next(out, inp, off, n)
    }
}
interpose! {
    fn posix_fadvise | posix_fadvise64 (fd: c_int, off: i64, len: i64, adv: c_int) -> c_int
    where next
    {
        if is_dafs_fd(fd) {
            return 0; // advice only
        }
        next(fd, off, len, adv)
    }
}
interpose! {
    fn fallocate | fallocate64 (fd: c_int, mode: c_int, off: i64, len: i64) -> c_int where next {
        if is_dafs_fd(fd) {
            return neg(libc::EOPNOTSUPP);
        }
        next(fd, mode, off, len)
    }
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
interpose! {
    fn posix_fallocate | posix_fallocate64 (fd: c_int, off: i64, len: i64) -> c_int where next {
        if let Some(_g) = dafs_fd(fd) {
            return do_posix_fallocate(fd, off, len);
        }
        next(fd, off, len)
    }
}
