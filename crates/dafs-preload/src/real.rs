//! Reaching glibc: `real!` resolves the next definition of a symbol once and caches it;
//! `Entered` is the thread-local reentrancy guard; errno helpers.

use std::cell::Cell;
use std::ffi::c_int;

/// Resolve `name` (NUL-terminated) in the objects loaded after this library.
pub fn sym(name: &'static str) -> usize {
    // SAFETY: a NUL-terminated static string; dlsym is thread-safe.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) as usize }
}

/// The address of the next definition of `name` (NUL-terminated), looked up once and
/// kept in `cache`; a libc without it is a fatal configuration error.
pub fn cached_sym(cache: &std::sync::atomic::AtomicUsize, name: &'static str) -> usize {
    use std::sync::atomic::Ordering::Relaxed;
    let mut p = cache.load(Relaxed);
    if p == 0 {
        p = sym(name);
        if p == 0 {
            missing(name.trim_end_matches('\0'))
        }
        cache.store(p, Relaxed);
    }
    p
}

/// A symbol every glibc we support exports is missing: nothing sensible can continue.
#[cold]
pub fn missing(name: &str) -> ! {
    let msg = format!("dafs-preload: libc has no `{name}`\n");
    // SAFETY: writing a buffer we own to stderr.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    std::process::abort()
}

/// `real!(name: fn(args) -> ret)` evaluates to the next definition of `name` as a typed
/// function pointer. Variadic functions are written `fn(a, b, ...)`.
macro_rules! real {
    ($name:ident : fn($($t:ty),*) -> $r:ty) => {{
        static P: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let p = $crate::real::cached_sym(&P, concat!(stringify!($name), "\0"));
        // SAFETY: p is the address of the libc function of this name, whose C prototype
        // is the one spelled out at the call site.
        #[allow(unused_unsafe)]
        let f = unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> $r>(p) };
        f
    }};
    ($name:ident : fn($($t:ty),* , ...) -> $r:ty) => {{
        static P: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let p = $crate::real::cached_sym(&P, concat!(stringify!($name), "\0"));
        // SAFETY: as above, for a C-variadic prototype.
        #[allow(unused_unsafe)]
        let f = unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($t),* , ...) -> $r>(p) };
        f
    }};
}

thread_local! {
    // `const` initialisers and no destructors: no lazy registration (which could
    // allocate or recurse) on first use in a thread.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// Set when this library reported an error through errno while entered.
    static ERR_SET: Cell<bool> = const { Cell::new(false) };
}

/// Held while this library works on behalf of the application. While it is held on a
/// thread, every interposed function on that thread goes straight to glibc: the
/// client's own sockets, files and `/proc` reads never re-enter the interposer.
///
/// It also keeps the application's errno: the client's non-blocking socket calls leave
/// EAGAIN and the like behind even when the operation succeeds, and programs that test
/// errno after a successful call (readdir loops, for one) must not see that. When the
/// guard is dropped, errno is restored unless the library set an error on purpose.
pub struct Entered {
    saved: c_int,
}

impl Entered {
    /// `None` if this thread is already inside the library (then: pass through).
    pub fn enter() -> Option<Entered> {
        BUSY.try_with(|b| {
            if b.get() {
                None
            } else {
                b.set(true);
                let _ = ERR_SET.try_with(|e| e.set(false));
                Some(Entered { saved: errno() })
            }
        })
        .ok()
        .flatten()
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if !ERR_SET.try_with(|e| e.get()).unwrap_or(true) {
            // SAFETY: __errno_location returns this thread's errno.
            unsafe { *libc::__errno_location() = self.saved }
        }
        let _ = BUSY.try_with(|b| b.set(false));
    }
}

pub fn set_errno(e: c_int) {
    let _ = ERR_SET.try_with(|x| x.set(true));
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() = e }
}

pub fn errno() -> c_int {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() }
}

/// Convert a result to the C convention (-1 and errno).
pub fn ret(r: Result<c_int, c_int>) -> c_int {
    match r {
        Ok(v) => v,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

pub fn ret_ssize(r: Result<usize, c_int>) -> isize {
    match r {
        Ok(v) => v as isize,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}
