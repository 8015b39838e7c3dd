//! The process-wide lock: a pthread mutex the fork handlers can hold across `fork`.

use std::cell::UnsafeCell;

/// A value behind a plain pthread mutex (not std's): the fork handlers take it in
/// `prepare` and release it in both parent and child, so a child never inherits it
/// locked by a thread that does not exist there.
pub struct Locked<T> {
    mu: UnsafeCell<libc::pthread_mutex_t>,
    v: UnsafeCell<T>,
}
// SAFETY: `v` is only reached with `mu` held (see `with`), so one thread at a time
// uses it. (No `T: Send` bound: the client holds raw pointers to memory it owns, which
// makes it !Send in the type system, but nothing in it is tied to a thread.)
unsafe impl<T> Sync for Locked<T> {}

impl<T> Locked<T> {
    pub const fn new(v: T) -> Self {
        Locked { mu: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER), v: UnsafeCell::new(v) }
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        struct Unlock<'a, T>(&'a Locked<T>);
        impl<T> Drop for Unlock<'_, T> {
            fn drop(&mut self) {
                self.0.unlock_raw();
            }
        }
        self.lock_raw();
        let _u = Unlock(self);
        // SAFETY: the mutex is held: no other reference to the value exists.
        f(unsafe { &mut *self.v.get() })
    }

    /// Run `f` on the value while this thread already holds the mutex through
    /// [`Locked::lock_raw`] (the fork handlers).
    ///
    /// # Safety
    /// The calling thread holds the mutex, and no reference to the value is live.
    pub(super) unsafe fn with_held<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the caller holds the mutex (see above): no other reference exists.
        f(unsafe { &mut *self.v.get() })
    }

    /// Like [`Locked::with`], or None at once if another thread holds the mutex (or
    /// this one does: an exit from inside the library must not deadlock).
    pub fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        // SAFETY: a statically initialised mutex.
        if unsafe { libc::pthread_mutex_trylock(self.mu.get()) } != 0 {
            return None;
        }
        struct Unlock<'a, T>(&'a Locked<T>);
        impl<T> Drop for Unlock<'_, T> {
            fn drop(&mut self) {
                self.0.unlock_raw();
            }
        }
        let _u = Unlock(self);
        // SAFETY: the mutex is held: no other reference to the value exists.
        Some(f(unsafe { &mut *self.v.get() }))
    }

    pub(super) fn lock_raw(&self) {
        // SAFETY: a statically initialised mutex.
        unsafe { libc::pthread_mutex_lock(self.mu.get()) };
    }

    pub(super) fn unlock_raw(&self) {
        // SAFETY: locked by this thread (with / fork_prepare).
        unsafe { libc::pthread_mutex_unlock(self.mu.get()) };
    }
}
