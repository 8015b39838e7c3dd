//! Locks: POSIX record locks (`fcntl`'s `F_GETLK`/`F_SETLK`/`F_SETLKW`), `lockf` and
//! `flock`, all on the protocol's byte-range locks.

use std::ffi::c_int;
use std::time::Duration;

use super::args::{dafs_fd, neg};
use crate::real::ret;
use crate::state::{err, with};

/// F_SETLKW waits by polling, with the bounds of `Client::lock_wait` (the protocol has no
/// lock-granted notice), but without holding the process-wide lock while it sleeps. The
/// first retry comes soon, for a lock that is handed over quickly...
const LOCK_RETRY_WAIT_MIN: Duration = Duration::from_micros(100);
/// ...and the wait doubles up to this, so a lock released later is noticed within about
/// this much time without keeping the server busy.
const LOCK_RETRY_WAIT_MAX: Duration = Duration::from_millis(10);

pub(super) fn do_lock(fd: c_int, cmd: c_int, fl: *mut libc::flock) -> Result<c_int, c_int> {
    if fl.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's struct flock.
    let l = unsafe { &mut *fl };
    let mut backoff = LOCK_RETRY_WAIT_MIN;
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
                backoff = (backoff * 2).min(LOCK_RETRY_WAIT_MAX);
            }
            r => return r,
        }
    }
}

/// lockf: glibc implements it with an internal fcntl no interposer sees, so it is
/// mapped here onto the same POSIX locks (from the current offset, `len` bytes).
fn do_lockf(fd: c_int, cmd: c_int, len: i64) -> Result<c_int, c_int> {
    // SAFETY: `struct flock` is plain integers: all zeroes is a valid value.
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
interpose! {
    fn lockf | lockf64 (fd: c_int, cmd: c_int, len: i64) -> c_int where next {
        if let Some(_g) = dafs_fd(fd) {
            return ret(do_lockf(fd, cmd, len));
        }
        next(fd, cmd, len)
    }
}

/// flock: a whole-file lock held by the process (the protocol's locks belong to the
/// session): it conflicts with other processes' flock and fcntl locks on the file, but
/// not — unlike the kernel's flock — with another open of the same file in this
/// process. Documented in the README.
#[no_mangle]
pub unsafe extern "C" fn flock(fd: c_int, op: c_int) -> c_int {
    if let Some(_g) = dafs_fd(fd) {
        // SAFETY: `struct flock` is plain integers: all zeroes is a valid value.
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
    let mut backoff = LOCK_RETRY_WAIT_MIN;
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
                backoff = (backoff * 2).min(LOCK_RETRY_WAIT_MAX);
            }
            Err(libc::EAGAIN) => return Err(libc::EWOULDBLOCK),
            r => return r,
        }
    }
}
