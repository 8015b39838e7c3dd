//! Descriptors: duplication (`dup`, `dup2`, `dup3`, `F_DUPFD`), `fcntl`, `ioctl` and
//! `isatty`.

use std::ffi::{c_int, c_ulong, c_void};
use std::sync::atomic::Ordering::Relaxed;

use super::args::{dafs_fd, neg};
use super::locks::do_lock;
use super::stdio::std_changed;
use crate::real::{errno, ret, set_errno, Entered};
use crate::state::{self, is_dafs_fd, open_options, with, Kind};

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

interpose! {
    /// `fcntl(int, int, ...)`, defined with one fixed `unsigned long` argument (an int or a
    /// pointer, as the command says; see the crate documentation).
    fn fcntl | fcntl64 (fd: c_int, cmd: c_int, arg: c_ulong) -> c_int
    where next: fn(c_int, c_int, ...)
    {
        if let Some(_g) = dafs_fd(fd) {
            return ret(do_fcntl(fd, cmd, arg));
        }
        next(fd, cmd, arg)
    }
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
