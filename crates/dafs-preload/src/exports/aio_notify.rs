//! Completion notification of AIO on dafs descriptors (`aio_sigevent`, `lio_listio`'s
//! `sig`).
//!
//! The client has no thread that could notice a completion while the application does
//! not call in, so a request that asks to be notified (`SIGEV_SIGNAL` with a signal,
//! `SIGEV_THREAD`) is done synchronously at submission and notified at once: the signal
//! is queued to the process with `sigqueue` (`si_code` `SI_QUEUE`, glibc's own AIO gives
//! `SI_ASYNCIO`; `si_value` is `sigev_value` either way), the function runs on a new
//! detached thread, with `sigev_notify_attributes` when given, as glibc's does.
//! `SIGEV_NONE` (and `SIGEV_SIGNAL` with signal 0, which delivers nothing: what ROMIO
//! leaves in its zeroed `aiocb`s, `SIGEV_SIGNAL` being 0 on Linux) stays asynchronous.

use std::ffi::{c_int, c_void};

/// The `SIGEV_THREAD` view of glibc's `struct sigevent` (the union after
/// `sigev_notify` holds the function and its thread attributes).
#[repr(C)]
struct SigeventThread {
    value: libc::sigval,
    signo: c_int,
    notify: c_int,
    function: Option<extern "C" fn(libc::sigval)>,
    attributes: *mut libc::pthread_attr_t,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<SigeventThread>() <= size_of::<libc::sigevent>());
    assert!(offset_of!(SigeventThread, notify) == offset_of!(libc::sigevent, sigev_notify));
    assert!(offset_of!(SigeventThread, signo) == offset_of!(libc::sigevent, sigev_signo));
};

extern "C" {
    // glibc's; the libc crate declares only the setter.
    fn pthread_attr_getdetachstate(attr: *const libc::pthread_attr_t, state: *mut c_int) -> c_int;
}

/// What a request asks for when it completes.
pub(super) enum Notify {
    None,
    Signal(c_int, libc::sigval),
    Thread(extern "C" fn(libc::sigval), libc::sigval, *mut libc::pthread_attr_t),
}

impl Notify {
    pub(super) fn is_none(&self) -> bool {
        matches!(self, Notify::None)
    }
}

/// The notification `ev` asks for (EINVAL for a kind or signal glibc would refuse).
pub(super) fn notify_of(ev: &libc::sigevent) -> Result<Notify, c_int> {
    match ev.sigev_notify {
        libc::SIGEV_NONE => Ok(Notify::None),
        libc::SIGEV_SIGNAL if ev.sigev_signo == 0 => Ok(Notify::None),
        libc::SIGEV_SIGNAL if (1..=libc::SIGRTMAX()).contains(&ev.sigev_signo) => {
            Ok(Notify::Signal(ev.sigev_signo, ev.sigev_value))
        }
        libc::SIGEV_THREAD => {
            // SAFETY: the caller's sigevent, read through glibc's layout of it.
            let t = unsafe { &*(ev as *const libc::sigevent).cast::<SigeventThread>() };
            match t.function {
                Some(f) => Ok(Notify::Thread(f, t.value, t.attributes)),
                None => Err(libc::EINVAL),
            }
        }
        _ => Err(libc::EINVAL),
    }
}

extern "C" fn run_notify(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the Box leaked by `deliver` for this thread alone.
    let b = unsafe { Box::from_raw(arg.cast::<(extern "C" fn(libc::sigval), libc::sigval)>()) };
    (b.0)(b.1);
    std::ptr::null_mut()
}

/// Deliver notification `n` (the request has completed). A thread that cannot be
/// started, or a signal that cannot be queued, is reported on stderr: the request's
/// result stays available through `aio_error`/`aio_return`.
pub(super) fn deliver(n: &Notify) {
    match *n {
        Notify::None => {}
        Notify::Signal(signo, value) => {
            // SAFETY: queueing a signal to this process.
            if unsafe { libc::sigqueue(libc::getpid(), signo, value) } != 0 {
                eprintln!("dafs-preload: cannot queue the AIO completion signal {signo}");
            }
        }
        Notify::Thread(f, value, attrs) => {
            let arg = Box::into_raw(Box::new((f, value))).cast::<c_void>();
            let mut tid: libc::pthread_t = 0;
            // SAFETY: `attrs` is the caller's initialised attribute object or NULL;
            // run_notify takes ownership of `arg`.
            let rc = unsafe { libc::pthread_create(&mut tid, attrs, run_notify, arg) };
            if rc != 0 {
                // SAFETY: the thread was not started: `arg` is still ours.
                drop(unsafe {
                    Box::from_raw(arg.cast::<(extern "C" fn(libc::sigval), libc::sigval)>())
                });
                eprintln!("dafs-preload: cannot start the AIO notification thread (error {rc})");
                return;
            }
            let mut state = libc::PTHREAD_CREATE_JOINABLE;
            if !attrs.is_null() {
                // SAFETY: the caller's initialised attribute object.
                unsafe { pthread_attr_getdetachstate(attrs, &mut state) };
            }
            if state == libc::PTHREAD_CREATE_JOINABLE {
                // Nobody joins it: its resources go when it ends.
                // SAFETY: a joinable thread just created, detached once.
                unsafe { libc::pthread_detach(tid) };
            }
        }
    }
}
