//! POSIX AIO (`aio_read`, `aio_write`, `aio_error`, `aio_return`, `aio_suspend`,
//! `aio_cancel`, `aio_fsync`, `lio_listio` and their `64` twins) on dafs descriptors.
//!
//! glibc would hand a dafs descriptor (an `O_PATH` placeholder) to its AIO thread,
//! whose `pread` gets EBADF from the kernel — or, for programs that only poll
//! `aio_error`, never completes at all (MPICH's non-blocking MPI-IO). Here a request
//! on a dafs descriptor is submitted to the client without blocking (`state::aio`), and
//! completes as the application's own AIO calls reap it. Requests on other descriptors,
//! and `aiocb`s this library did not submit, go to glibc untouched.
//!
//! Notification: see [`super::aio_notify`] (requests that ask for a signal or a thread
//! are done at submission).

use std::ffi::c_int;
use std::time::{Duration, Instant};

use super::aio_notify::{deliver, notify_of, Notify};
use super::args::{dafs_fd, neg};
use super::data::{do_fsync, do_read, do_write};
use crate::real::{set_errno, Entered};
use crate::state::AIO_ACTIVE;
use crate::state::{aio_requests_max, is_dafs_fd, with, AioState, Aiocb, State, Submitted};

/// The longest a wait holds the process-wide lock at a time (`aio_suspend`,
/// `lio_listio(LIO_WAIT)`, `aio_fsync`): a completion ends the wait at once; the slice
/// only bounds how long other threads' dafs calls wait behind it.
const AIO_WAIT_SLICE_MS: u64 = 10;
/// The slice when an `aio_suspend` list also names glibc requests, whose completion is
/// noticed by polling `aio_error` between slices.
const AIO_MIXED_SLICE_MS: u64 = 1;
/// glibc's `AIO_PRIO_DELTA_MAX`: the largest `aio_reqprio` accepted.
const AIO_PRIO_DELTA_MAX: c_int = 20;

/// The checks POSIX asks of `aio_read`/`aio_write` before queueing; the notification
/// the request asks for.
unsafe fn check_fields(cb: *const Aiocb, read: bool) -> Result<Notify, c_int> {
    // SAFETY: the caller's aiocb (non-null).
    let cb = unsafe { &*cb };
    if !(0..=AIO_PRIO_DELTA_MAX).contains(&cb.reqprio) || cb.offset < 0 {
        return Err(libc::EINVAL);
    }
    if cb.nbytes > isize::MAX as usize {
        return Err(libc::EINVAL);
    }
    if (cb.offset as u64).checked_add(cb.nbytes as u64).is_none_or(|e| e > i64::MAX as u64) {
        return Err(if read { libc::EOVERFLOW } else { libc::EFBIG });
    }
    if cb.buf.is_null() && cb.nbytes > 0 {
        return Err(libc::EFAULT);
    }
    notify_of(&cb.sigevent)
}

/// Queue one read or write of a dafs descriptor (fields already checked); one that
/// asks for a notification is done now, and notified.
unsafe fn submit(cb: *mut Aiocb, read: bool, notify: Notify) -> Result<(), c_int> {
    // SAFETY: the caller's aiocb.
    let (fd, buf, n, off) = unsafe { ((*cb).fildes, (*cb).buf, (*cb).nbytes, (*cb).offset) };
    if !notify.is_none() {
        with(|st| st.aio_room(cb as usize))?;
        let res = if read {
            do_read(fd, buf.cast(), n, Some(off))
        } else {
            do_write(fd, buf.cast(), n, Some(off))
        };
        with(|st| st.aio_record(cb, fd, read, res));
        deliver(&notify);
        return Ok(());
    }
    if n == 0 {
        return with(|st| {
            st.aio_room(cb as usize)?;
            st.aio_record(cb, fd, read, Ok(0));
            Ok(())
        });
    }
    match with(|st| st.aio_submit(cb, read))? {
        Submitted::Queued => Ok(()),
        Submitted::Synchronous => {
            let res = do_write(fd, buf.cast(), n, Some(off));
            with(|st| st.aio_record(cb, fd, false, res));
            Ok(())
        }
    }
}

unsafe fn read_or_write(cb: *mut Aiocb, read: bool) -> c_int {
    match unsafe { check_fields(cb, read) }.and_then(|n| unsafe { submit(cb, read, n) }) {
        Ok(()) => 0,
        Err(e) => neg(e),
    }
}

interpose! {
    fn aio_read | aio_read64 (cb: *mut Aiocb) -> c_int where next {
        if cb.is_null() {
            return neg(libc::EINVAL);
        }
        if let Some(_g) = dafs_fd(unsafe { (*cb).fildes }) {
            return unsafe { read_or_write(cb, true) };
        }
        next(cb)
    }
}
interpose! {
    fn aio_write | aio_write64 (cb: *mut Aiocb) -> c_int where next {
        if cb.is_null() {
            return neg(libc::EINVAL);
        }
        if let Some(_g) = dafs_fd(unsafe { (*cb).fildes }) {
            return unsafe { read_or_write(cb, false) };
        }
        next(cb)
    }
}

/// The guard, if `cb` may be a request of this library: the table is not empty, or
/// `cb` names a dafs descriptor.
fn ours(cb: *const Aiocb) -> Option<Entered> {
    if cb.is_null() {
        return None;
    }
    // SAFETY: the caller's aiocb (glibc reads it too).
    let fd = unsafe { (*cb).fildes };
    if AIO_ACTIVE.load(std::sync::atomic::Ordering::Relaxed) == 0 && !is_dafs_fd(fd) {
        return None;
    }
    Entered::enter()
}

/// Is `cb` an `aiocb` on a dafs descriptor that is not (or no longer) a request of this
/// library? (EINVAL from aio_error/aio_return: never submitted, or already returned.)
fn stale(cb: *const Aiocb) -> bool {
    // SAFETY: the caller's aiocb (non-null: `ours` checked it).
    is_dafs_fd(unsafe { (*cb).fildes })
}

/// The state of `cb` after reaping what has arrived (None: not this library's).
fn state_of(cb: *const Aiocb) -> Option<AioState> {
    with(|st| {
        if !st.aio_owns(cb as usize) {
            return None;
        }
        if st.aio_state(cb as usize) == Some(AioState::InProgress) {
            st.aio_reap();
        }
        st.aio_state(cb as usize)
    })
}

interpose! {
    fn aio_error | aio_error64 (cb: *const Aiocb) -> c_int where next {
        if let Some(_g) = ours(cb) {
            match state_of(cb) {
                Some(AioState::InProgress) => return libc::EINPROGRESS,
                Some(AioState::Done(Ok(_))) => return 0,
                Some(AioState::Done(Err(e))) => return e,
                None if stale(cb) => return neg(libc::EINVAL),
                None => {}
            }
        }
        next(cb)
    }
}
interpose! {
    fn aio_return | aio_return64 (cb: *mut Aiocb) -> isize where next {
        if let Some(_g) = ours(cb) {
            let _ = state_of(cb);
            match with(|st| st.aio_take(cb as usize)) {
                Some(AioState::InProgress) => return neg(libc::EINPROGRESS) as isize,
                Some(AioState::Done(Ok(n))) => return n as isize,
                Some(AioState::Done(Err(e))) => {
                    set_errno(e);
                    return -1;
                }
                None if stale(cb) => return neg(libc::EINVAL) as isize,
                None => {}
            }
        }
        next(cb)
    }
}

/// Wait until `done` holds (checked after reaping), or until `deadline`: true if it
/// holds. `slice`: the longest one wait holds the lock.
fn wait_until(
    mut done: impl FnMut(&mut State) -> bool,
    deadline: Option<Instant>,
    slice: Duration,
) -> bool {
    loop {
        if with(|st| {
            st.aio_reap();
            done(st)
        }) {
            return true;
        }
        let mut wait = slice;
        if let Some(d) = deadline {
            let now = Instant::now();
            if now >= d {
                return false;
            }
            wait = wait.min(d - now);
        }
        with(|st| st.aio_wait(wait));
    }
}

/// A relative `aio_suspend` timeout as a deadline (EINVAL for a malformed one).
unsafe fn deadline_of(t: *const libc::timespec) -> Result<Option<Instant>, c_int> {
    if t.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's timespec.
    let t = unsafe { &*t };
    if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
        return Err(libc::EINVAL);
    }
    let d = Duration::new(t.tv_sec as u64, t.tv_nsec as u32);
    Ok(Some(Instant::now().checked_add(d).unwrap_or_else(|| Instant::now() + Duration::MAX / 4)))
}

/// `aio_suspend` over a list naming at least one of this library's requests.
unsafe fn suspend(
    list: &[*const Aiocb],
    t: *const libc::timespec,
    error_next: unsafe extern "C" fn(*const Aiocb) -> c_int,
) -> c_int {
    let deadline = match unsafe { deadline_of(t) } {
        Ok(d) => d,
        Err(e) => return neg(e),
    };
    let (mine, theirs): (Vec<usize>, Vec<*const Aiocb>) = with(|st| {
        let mine = list.iter().map(|&p| p as usize).filter(|&p| st.aio_owns(p)).collect();
        let theirs = list.iter().copied().filter(|&p| !st.aio_owns(p as usize)).collect();
        (mine, theirs)
    });
    // SAFETY: the caller's aiocbs, not this library's: glibc reads their status.
    let theirs_done = || theirs.iter().any(|&p| unsafe { error_next(p) } != libc::EINPROGRESS);
    let mine_ready = |st: &mut State| {
        mine.iter().any(|&p| st.aio_state(p).is_none_or(|s| s != AioState::InProgress))
    };
    let mine_pending = with(|st| {
        st.aio_reap();
        mine.iter().any(|&p| st.aio_state(p) == Some(AioState::InProgress))
    });
    if !mine_pending {
        // Every listed request of this library is complete (the list names one).
        return 0;
    }
    let slice = Duration::from_millis(if theirs.is_empty() {
        AIO_WAIT_SLICE_MS
    } else {
        AIO_MIXED_SLICE_MS
    });
    if wait_until(|st| mine_ready(st) || theirs_done(), deadline, slice) {
        0
    } else {
        neg(libc::EAGAIN)
    }
}

interpose! {
    fn aio_suspend | aio_suspend64 (
        list: *const *const Aiocb,
        nent: c_int,
        t: *const libc::timespec,
    ) -> c_int
    where next
    {
        if nent < 0 {
            return neg(libc::EINVAL);
        }
        if list.is_null() || nent == 0 || AIO_ACTIVE.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return next(list, nent, t);
        }
        let Some(_g) = Entered::enter() else { return next(list, nent, t) };
        // SAFETY: the caller's array of nent pointers (NULL entries are ignored).
        let all = unsafe { std::slice::from_raw_parts(list, nent as usize) };
        let entries: Vec<*const Aiocb> = all.iter().copied().filter(|p| !p.is_null()).collect();
        if !with(|st| entries.iter().any(|&p| st.aio_owns(p as usize))) {
            return next(list, nent, t);
        }
        let error_next = real!(aio_error: fn(*const Aiocb) -> c_int);
        unsafe { suspend(&entries, t, error_next) }
    }
}

interpose! {
    fn aio_cancel | aio_cancel64 (fd: c_int, cb: *mut Aiocb) -> c_int where next {
        if let Some(_g) = dafs_fd(fd) {
            // SAFETY: the caller's aiocb, when given.
            if !cb.is_null() && unsafe { (*cb).fildes } != fd {
                return neg(libc::EINVAL);
            }
            let key = (!cb.is_null()).then_some(cb as usize);
            return with(|st| st.aio_cancel(fd, key));
        }
        next(fd, cb)
    }
}

/// `aio_fsync`: waits for the descriptor's requests in progress, then makes the file
/// stable (COMMIT), and completes before it returns.
unsafe fn fsync_dafs(op: c_int, cb: *mut Aiocb, fd: c_int) -> c_int {
    if op != libc::O_SYNC && op != libc::O_DSYNC {
        return neg(libc::EINVAL);
    }
    // SAFETY: the caller's aiocb.
    let notify = match notify_of(unsafe { &(*cb).sigevent }) {
        Ok(n) => n,
        Err(e) => return neg(e),
    };
    if let Err(e) = with(|st| st.aio_room(cb as usize)) {
        return neg(e);
    }
    let slice = Duration::from_millis(AIO_WAIT_SLICE_MS);
    wait_until(|st| !st.aio_fd_busy(fd), None, slice);
    let res = do_fsync(fd).map(|_| 0);
    with(|st| st.aio_record(cb, fd, false, res));
    deliver(&notify);
    0
}

interpose! {
    fn aio_fsync | aio_fsync64 (op: c_int, cb: *mut Aiocb) -> c_int where next {
        if cb.is_null() {
            return neg(libc::EINVAL);
        }
        let fd = unsafe { (*cb).fildes };
        if let Some(_g) = dafs_fd(fd) {
            return unsafe { fsync_dafs(op, cb, fd) };
        }
        next(op, cb)
    }
}

type ListioFn = unsafe extern "C" fn(c_int, *const *mut Aiocb, c_int, *mut libc::sigevent) -> c_int;

/// `lio_listio` over a list with at least one dafs entry: glibc's entries go to glibc's
/// `lio_listio`, this library's are submitted one by one (an entry that cannot be
/// submitted records its error for `aio_error`).
unsafe fn listio(
    mode: c_int,
    all: &[*mut Aiocb],
    sig: *mut libc::sigevent,
    next: ListioFn,
) -> c_int {
    // LIO_NOWAIT with a notification of the whole list: done as LIO_WAIT, then notified.
    let list_notify = match mode {
        // SAFETY: the caller's sigevent.
        libc::LIO_NOWAIT if !sig.is_null() => match notify_of(unsafe { &*sig }) {
            Ok(n) => n,
            Err(e) => return neg(e),
        },
        _ => Notify::None,
    };
    let (mode, sig) =
        if list_notify.is_none() { (mode, sig) } else { (libc::LIO_WAIT, std::ptr::null_mut()) };
    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
    for &p in all.iter().filter(|p| !p.is_null()) {
        // SAFETY: the caller's aiocbs.
        let (fd, op) = unsafe { ((*p).fildes, (*p).lio_opcode) };
        if op == libc::LIO_NOP {
            continue;
        }
        if is_dafs_fd(fd) {
            mine.push(p)
        } else {
            theirs.push(p)
        }
    }
    let mut failed = false;
    for &p in &mine {
        // SAFETY: the caller's aiocb.
        let (fd, op) = unsafe { ((*p).fildes, (*p).lio_opcode) };
        let r = match op {
            libc::LIO_READ => unsafe { check_fields(p, true).and_then(|n| submit(p, true, n)) },
            libc::LIO_WRITE => unsafe { check_fields(p, false).and_then(|n| submit(p, false, n)) },
            _ => Err(libc::EINVAL),
        };
        if let Err(e) = r {
            failed = true;
            with(|st| st.aio_record(p, fd, op == libc::LIO_READ, Err(e)));
        }
    }
    if !theirs.is_empty() {
        // SAFETY: a list of the caller's aiocbs, with its mode and notification.
        failed |= unsafe { next(mode, theirs.as_ptr(), theirs.len() as c_int, sig) } != 0;
    }
    if mode == libc::LIO_WAIT {
        let keys: Vec<usize> = mine.iter().map(|&p| p as usize).collect();
        let slice = Duration::from_millis(AIO_WAIT_SLICE_MS);
        let in_progress = |st: &State, k: &usize| st.aio_state(*k) == Some(AioState::InProgress);
        wait_until(|st| !keys.iter().any(|k| in_progress(st, k)), None, slice);
        failed |= with(|st| {
            keys.iter().any(|k| matches!(st.aio_state(*k), Some(AioState::Done(Err(_)))))
        });
    }
    deliver(&list_notify);
    if failed {
        neg(libc::EIO)
    } else {
        0
    }
}

interpose! {
    fn lio_listio | lio_listio64 (
        mode: c_int,
        list: *const *mut Aiocb,
        nent: c_int,
        sig: *mut libc::sigevent,
    ) -> c_int
    where next
    {
        if mode != libc::LIO_WAIT && mode != libc::LIO_NOWAIT {
            return neg(libc::EINVAL);
        }
        if list.is_null() || nent <= 0 {
            return next(mode, list, nent, sig);
        }
        // SAFETY: the caller's array of nent pointers (NULL entries are ignored).
        let all = unsafe { std::slice::from_raw_parts(list, nent as usize) };
        // SAFETY: the caller's aiocbs.
        let any_dafs = all.iter().any(|&p| !p.is_null() && is_dafs_fd(unsafe { (*p).fildes }));
        if !any_dafs {
            return next(mode, list, nent, sig);
        }
        // AIO_LISTIO_MAX: a list longer than the request table could ever hold.
        if nent as usize > aio_requests_max() {
            return neg(libc::EINVAL);
        }
        let Some(_g) = Entered::enter() else { return next(mode, list, nent, sig) };
        unsafe { listio(mode, all, sig, next) }
    }
}
