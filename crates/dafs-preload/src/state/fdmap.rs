//! Lock-free descriptor sets: which descriptors are dafs descriptors, and which are the
//! library's own connections. Every fd-taking function tests one bit here before
//! anything else, so calls on other descriptors cost one atomic load.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// dafs descriptors are below this (a reserved number above it is refused with EMFILE).
pub const FD_MAX: usize = 65536;

/// Descriptors per word of a bitmap.
const WORD_BITS: usize = u64::BITS as usize;

/// One bit per descriptor below [`FD_MAX`].
struct FdBitmap([AtomicU64; FD_MAX / WORD_BITS]);

impl FdBitmap {
    const fn new() -> Self {
        FdBitmap([const { AtomicU64::new(0) }; FD_MAX / WORD_BITS])
    }

    /// Is `fd` in the set? (Negative and out-of-range numbers never are.)
    fn contains(&self, fd: c_int) -> bool {
        fd >= 0
            && (fd as usize) < FD_MAX
            && self.0[fd as usize / WORD_BITS].load(Relaxed) & (1 << (fd as usize % WORD_BITS)) != 0
    }

    /// Add (`on`) or remove `fd`, which must be below [`FD_MAX`].
    fn set(&self, fd: c_int, on: bool) {
        assert!(fd >= 0 && (fd as usize) < FD_MAX, "descriptor {fd} outside the bitmap");
        let (w, b) = (fd as usize / WORD_BITS, 1u64 << (fd as usize % WORD_BITS));
        if on {
            self.0[w].fetch_or(b, Relaxed);
        } else {
            self.0[w].fetch_and(!b, Relaxed);
        }
    }
}

/// The dafs descriptors: the fast path of every fd-taking function tests it without
/// locking, so calls on other descriptors cost one atomic load.
static FDMAP: FdBitmap = FdBitmap::new();
/// Number of open dafs directory streams (readdir on other DIRs skips the lock while 0).
pub static DIRS_OPEN: AtomicUsize = AtomicUsize::new(0);

/// Descriptors of the library's own connections (sockets, shared-memory files).
static INTERNAL: FdBitmap = FdBitmap::new();

/// Is `fd` one of the library's connection descriptors? (A program closing "all other
/// descriptors" must not cut the session it does not know about.)
pub fn is_internal_fd(fd: c_int) -> bool {
    INTERNAL.contains(fd)
}

/// Record (`on`) or forget a connection descriptor; numbers the bitmap cannot hold are
/// not recorded (such a descriptor is then simply not protected from `close`).
pub(super) fn mark_internal(fd: c_int, on: bool) {
    if fd < 0 || fd as usize >= FD_MAX {
        return;
    }
    INTERNAL.set(fd, on);
}

pub fn is_dafs_fd(fd: c_int) -> bool {
    FDMAP.contains(fd)
}

/// Record (`on`) or forget a dafs descriptor (below [`FD_MAX`]).
pub(super) fn mark(fd: c_int, on: bool) {
    FDMAP.set(fd, on);
}
