//! [`MemPtr`]: the one type that carries a raw pointer into registered memory.
//!
//! Providers keep pointers to memory the application registered, or that they allocated
//! or mapped for it: region tables, a placement being received, a pull answer queued for
//! the socket, the rings and regions of the shared-memory provider. A raw pointer is not
//! `Send`, so every type holding one needed its own `unsafe impl Send`, each with its own
//! argument. They hold a `MemPtr` instead, and the argument is made once, here.

use std::ptr::NonNull;

/// `len` bytes at a fixed address, named but not owned, borrowed or accessed.
///
/// A `MemPtr` is only an address range; it keeps nothing alive. What keeps the memory
/// valid is a contract outside the type — for application memory, the registration
/// contract of [`crate::ClientTransport::register`] (valid until deregistered, not
/// touched by the application while an I/O naming it is in flight); for a provider's own
/// allocations and mappings, the owner that frees them. Reading or writing through it is
/// `unsafe` ([`MemPtr::as_slice`], [`MemPtr::as_mut_slice`], or the raw pointer); the
/// safe methods only do bounds-checked address arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemPtr {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: `Send` asks whether handing this value to another thread can cause a data race
// or use memory after it is freed. A `MemPtr` owns nothing and grants no access by
// itself: it is an address and a length. The memory it names is ordinary process memory
// (the heap, a mapping, an application buffer) that every thread of the process can
// address; it is not thread-local, and the contracts that keep it valid and unaliased —
// registration (valid until deregistered, untouched by the application while an I/O
// names it) or ownership by a provider's allocation or mapping — say nothing about
// threads. Every access goes through an `unsafe` method or the raw pointer, whose caller
// must show, where and when it accesses, that the memory is valid and that no
// conflicting access exists; moving the value between threads (one owner at a time, as
// with the clients and connections that hold it) changes neither. It is deliberately
// not `Sync`: nothing needs to share one between threads.
unsafe impl Send for MemPtr {}

impl MemPtr {
    /// The range `[ptr, ptr + len)`, or `None` if `ptr` is null or the range wraps the
    /// address space or is longer than a slice may be (`isize::MAX`).
    pub fn new(ptr: *mut u8, len: usize) -> Option<MemPtr> {
        let ptr = NonNull::new(ptr)?;
        if len > isize::MAX as usize || (ptr.as_ptr() as usize).checked_add(len).is_none() {
            return None;
        }
        Some(MemPtr { ptr, len })
    }

    /// An empty range (a dangling, well-aligned address that is never accessed).
    pub const fn empty() -> MemPtr {
        MemPtr { ptr: NonNull::dangling(), len: 0 }
    }

    pub fn as_ptr(self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(self) -> usize {
        self.len
    }

    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The start address as a number (for a peer that reaches the memory by address).
    pub fn addr(self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// The sub-range `[offset, offset + len)`, or `None` if it does not lie inside.
    pub fn range(self, offset: usize, len: usize) -> Option<MemPtr> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // `wrapping_add` keeps this safe whatever the pointer's provenance; `new` checked
        // that the whole range does not wrap, so the result is non-null and in range.
        let ptr = NonNull::new(self.ptr.as_ptr().wrapping_add(offset))?;
        Some(MemPtr { ptr, len })
    }

    /// The range from `offset` to the end. Panics if `offset > len`.
    pub fn skip(self, offset: usize) -> MemPtr {
        assert!(offset <= self.len, "offset {offset} beyond a range of {} bytes", self.len);
        self.range(offset, self.len - offset).expect("checked against len")
    }

    /// The bytes, read-only.
    ///
    /// # Safety
    /// For all of `'a` the range must be valid for reads and nothing may write it (no
    /// `&mut` to it, no other thread, and — for shared memory — no other process).
    pub unsafe fn as_slice<'a>(self) -> &'a [u8] {
        // SAFETY: non-null, at most isize::MAX bytes (checked by `new`); validity and the
        // absence of writers are the caller's contract.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    ///
    /// # Safety
    /// For all of `'a` the range must be valid for reads and writes and nothing else may
    /// access it (no other reference, no other thread, no other process).
    pub unsafe fn as_mut_slice<'a>(self) -> &'a mut [u8] {
        // SAFETY: as in `as_slice`; exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_and_ranges_are_checked() {
        assert!(MemPtr::new(std::ptr::null_mut(), 1).is_none());
        assert!(MemPtr::new(usize::MAX as *mut u8, 2).is_none(), "wraps");
        let mut buf = [0u8; 16];
        let m = MemPtr::new(buf.as_mut_ptr(), buf.len()).unwrap();
        assert_eq!(m.range(4, 12).unwrap().addr(), m.addr() + 4);
        assert!(m.range(4, 13).is_none());
        assert!(m.range(usize::MAX, 2).is_none());
        assert_eq!(m.range(16, 0).unwrap().len(), 0);
        assert_eq!(m.skip(10).len(), 6);
        assert!(MemPtr::empty().is_empty());
        // SAFETY: an empty range is valid for zero-byte reads.
        assert!(unsafe { MemPtr::empty().as_slice() }.is_empty());
    }

    #[test]
    fn holders_are_send() {
        fn is_send<T: Send>() {}
        is_send::<MemPtr>();
    }
}
