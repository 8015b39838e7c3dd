//! What a server-side provider hands the server to fill ([`PlacementDst`], for a
//! placement: READ_DIRECT) or to drain ([`PlacementSrc`], for a synchronous pull:
//! WRITE_DIRECT).
//!
//! With shared memory these name the *client's* memory, mapped into the server from the
//! client's memfd. The client process can write that memory at any moment — it breaks
//! its own registration contract if it does, but the server cannot rely on another
//! process keeping a promise. A Rust reference (`&mut [u8]` or `&[u8]`) over such memory
//! would assert to the compiler that nobody else writes it while the reference lives:
//! undefined behaviour the moment the client does. So these types hold the raw range
//! ([`MemPtr`]) and never make a reference to it. The data moves either by the kernel
//! (`pread(2)` into it, `pwrite(2)` from it: the kernel copies, no Rust access at all) or
//! by one raw `copy_nonoverlapping` to or from memory this process owns. No extra copy:
//! the server's file I/O still reads into and writes from the client's memory directly.
//!
//! For memory the server owns (the TCP provider's pooled frame buffer, the staging
//! buffer for shm application memory reached through /proc/PID/mem) the same types wrap an
//! ordinary slice, so a fill callback is written once for every provider.

use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::mem_ptr::MemPtr;

/// Memory to place bytes into. Holds no reference to it (see the module docs).
pub struct PlacementDst<'a> {
    mem: MemPtr,
    /// Like a `&'a mut [u8]` for lifetimes (the memory is lent for `'a`), without the
    /// exclusivity claim.
    _lent: PhantomData<&'a mut [u8]>,
}

impl<'a> PlacementDst<'a> {
    /// Over a buffer this process owns.
    pub fn from_slice(buf: &'a mut [u8]) -> Self {
        let mem = MemPtr::new(buf.as_mut_ptr(), buf.len()).unwrap_or(MemPtr::empty());
        PlacementDst { mem, _lent: PhantomData }
    }

    /// Over memory shared with another process.
    ///
    /// # Safety
    /// `mem` must stay mapped and writable for `'a`, and no Rust reference to it may be
    /// made in this process during `'a`. Other processes may read and write it.
    pub(crate) unsafe fn shared(mem: MemPtr) -> Self {
        PlacementDst { mem, _lent: PhantomData }
    }

    pub fn len(&self) -> usize {
        self.mem.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }

    /// Fill from the file `fd` at `offset`: `pread(2)` until the destination is full or
    /// the file ends (interrupted calls are retried). Returns the bytes placed, short
    /// only at end of file.
    pub fn pread_from(&mut self, fd: BorrowedFd<'_>, offset: u64) -> io::Result<usize> {
        // SAFETY: `self.mem` is mapped and writable for `'a` (constructor contract) and
        // `&mut self` is held for the whole call.
        unsafe { pread_into(self.mem, fd, offset) }
    }

    /// The part `[at, at + len)` as a [`PlacementPart`] that another thread may fill
    /// while this destination stays lent (a server's copy engines split a large
    /// placement this way), or `None` if the range does not lie inside.
    pub fn part(&mut self, at: usize, len: usize) -> Option<PlacementPart> {
        self.mem.range(at, len).map(|mem| PlacementPart { mem })
    }

    /// Copy `src` to the start of the destination; returns `src.len()`. Panics if `src`
    /// is longer than the destination.
    pub fn copy_from(&mut self, src: &[u8]) -> usize {
        assert!(
            src.len() <= self.len(),
            "{} bytes into a {}-byte placement",
            src.len(),
            self.len()
        );
        // SAFETY: `src.len()` bytes fit (asserted); the destination is valid for writes
        // (constructor contract) and cannot overlap `src`, which this process reads
        // through a shared reference while it holds the destination lent mutably. The
        // copy writes through the raw pointer only: no reference to shared memory.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.mem.as_ptr(), src.len()) };
        src.len()
    }
}

/// `pread(2)` from `fd` at `offset` into `mem` until it is full or the file ends
/// (interrupted calls are retried); the bytes placed, short only at end of file.
///
/// # Safety
/// `mem` must be mapped and writable for the whole call, and no Rust reference to it may
/// exist meanwhile (other processes may read and write it).
unsafe fn pread_into(mem: MemPtr, fd: BorrowedFd<'_>, offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < mem.len() {
        let at = mem.skip(done);
        let pos = file_offset(offset, done)?;
        // SAFETY: `at` lies inside `mem`, which the caller keeps mapped and writable; the
        // kernel writes at most `at.len()` bytes into it and no Rust reference to the
        // memory exists, so a concurrent writer in another process can only change which
        // bytes end up there.
        let n = unsafe { libc::pread(fd.as_raw_fd(), at.as_ptr().cast(), at.len(), pos) };
        match n {
            0 => break,
            n if n > 0 => done += n as usize,
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(done)
}

/// A piece of a [`PlacementDst`] for another thread to fill while the destination's
/// holder waits: the server's copy engines `pread` the pieces of one large READ_DIRECT
/// at the same time. It carries no lifetime (it crosses to long-lived threads), so
/// filling it is `unsafe`: the caller shows the destination is still lent.
#[derive(Debug, Clone, Copy)]
pub struct PlacementPart {
    mem: MemPtr,
}

impl PlacementPart {
    pub fn len(&self) -> usize {
        self.mem.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }

    /// The sub-range `[at, at + len)`, or `None` if it does not lie inside.
    pub fn sub(&self, at: usize, len: usize) -> Option<PlacementPart> {
        self.mem.range(at, len).map(|mem| PlacementPart { mem })
    }

    /// Fill from `fd` at `offset`, as [`PlacementDst::pread_from`].
    ///
    /// # Safety
    /// The [`PlacementDst`] this part came from must still be lent (the fill callback it
    /// was handed to has not returned) for the whole call, and the caller must be the
    /// only one filling this part (parts of one destination do not overlap when taken
    /// as disjoint ranges).
    pub unsafe fn pread_from(&self, fd: BorrowedFd<'_>, offset: u64) -> io::Result<usize> {
        // SAFETY: a lent destination is mapped and writable (its constructor's contract),
        // and `self.mem` lies inside it (checked by `PlacementDst::part`).
        unsafe { pread_into(self.mem, fd, offset) }
    }
}

/// Client memory a server may fill (READ_DIRECT) or drain (WRITE_DIRECT) on another
/// thread, with no further call into the provider: the lease keeps the memory mapped for
/// as long as it lives (it holds the provider's mapping), so it may outlive the call that
/// made it and even a deregistration by the client. Only shared memory hands these out
/// ([`crate::ServerConn::lease`]).
pub struct PlacementLease {
    mem: MemPtr,
    /// What keeps `mem` mapped.
    _keep: std::sync::Arc<dyn Send + Sync>,
}

impl PlacementLease {
    /// # Safety
    /// `mem` must stay mapped, readable and writable while `keep` lives, and no Rust
    /// reference to it may be made in this process. Other processes may read and write it.
    pub(crate) unsafe fn shared(mem: MemPtr, keep: std::sync::Arc<dyn Send + Sync>) -> Self {
        PlacementLease { mem, _keep: keep }
    }

    pub fn len(&self) -> usize {
        self.mem.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }

    /// The memory as a placement destination, lent while `self` is borrowed.
    pub fn dst(&mut self) -> PlacementDst<'_> {
        // SAFETY: mapped and writable while `self` (and so `_keep`) lives, and `&mut self`
        // is held for the destination's lifetime; no reference is made to the memory.
        unsafe { PlacementDst::shared(self.mem) }
    }

    /// The memory as a source of bytes to write, lent while `self` is borrowed.
    pub fn src(&self) -> PlacementSrc<'_> {
        // SAFETY: mapped and readable while `self` (and so `_keep`) lives; no reference is
        // made to the memory.
        unsafe { PlacementSrc::shared(self.mem) }
    }
}

/// Memory to take bytes from. Holds no reference to it (see the module docs).
#[derive(Clone, Copy)]
pub struct PlacementSrc<'a> {
    mem: MemPtr,
    /// Like a `&'a [u8]` for lifetimes, without the claim that nobody writes the bytes.
    _lent: PhantomData<&'a [u8]>,
}

impl<'a> PlacementSrc<'a> {
    /// Over bytes this process owns.
    pub fn from_slice(buf: &'a [u8]) -> Self {
        // `MemPtr` is a mutable-looking pointer, but nothing writes through a source.
        let mem = MemPtr::new(buf.as_ptr().cast_mut(), buf.len()).unwrap_or(MemPtr::empty());
        PlacementSrc { mem, _lent: PhantomData }
    }

    /// Over memory shared with another process.
    ///
    /// # Safety
    /// `mem` must stay mapped and readable for `'a`, and no Rust reference to it may be
    /// made in this process during `'a`. Other processes may read and write it.
    pub(crate) unsafe fn shared(mem: MemPtr) -> Self {
        PlacementSrc { mem, _lent: PhantomData }
    }

    pub fn len(&self) -> usize {
        self.mem.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }

    /// Write all the bytes to the file `fd` at `offset` with `pwrite(2)` (interrupted and
    /// short writes are continued; a write that makes no progress is `ENOSPC`). Returns
    /// the bytes written: all of them, or fewer when the file system failed after some
    /// (a short write); an error only when none could be written.
    pub fn pwrite_to(&self, fd: BorrowedFd<'_>, offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < self.len() {
            let at = self.mem.skip(done);
            let pos = file_offset(offset, done)?;
            // SAFETY: `at` lies inside `self.mem`, which the constructor's contract keeps
            // mapped and readable; the kernel only reads it, and no Rust reference to the
            // memory exists, so a concurrent writer can only change which bytes get written.
            let n = unsafe { libc::pwrite(fd.as_raw_fd(), at.as_ptr().cast(), at.len(), pos) };
            // Once some bytes reached the file, a failure (ENOSPC, EDQUOT, EFBIG) makes
            // this a short write, as write(2) reports it: those bytes are written, and
            // the error comes with the next call.
            if n > 0 {
                done += n as usize;
                continue;
            }
            let e = match n {
                0 => io::Error::from_raw_os_error(libc::ENOSPC),
                _ => io::Error::last_os_error(),
            };
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return if done > 0 { Ok(done) } else { Err(e) };
        }
        Ok(done)
    }

    /// Append the bytes to `out` (one copy).
    pub fn append_to(&self, out: &mut Vec<u8>) {
        out.reserve(self.len());
        let spare = out.spare_capacity_mut();
        // SAFETY: `spare` has room for `self.len()` bytes (reserved above) and is this
        // process's own memory, disjoint from the source; the source is valid for reads
        // (constructor contract). The copy reads the source through the raw pointer, each
        // byte once, and nothing is decided on the bytes: a concurrent writer in another
        // process can make them arbitrary, never make this code misbehave. (A volatile or
        // per-byte atomic copy would add nothing but cost the memcpy speed of the data
        // path.) After the copy the first `self.len()` spare bytes are initialised.
        unsafe {
            std::ptr::copy_nonoverlapping(self.mem.as_ptr(), spare.as_mut_ptr().cast(), self.len());
            out.set_len(out.len() + self.len());
        }
    }
}

impl<'a> From<&'a [u8]> for PlacementSrc<'a> {
    fn from(buf: &'a [u8]) -> Self {
        PlacementSrc::from_slice(buf)
    }
}

impl<'a> From<&'a Vec<u8>> for PlacementSrc<'a> {
    fn from(buf: &'a Vec<u8>) -> Self {
        PlacementSrc::from_slice(buf)
    }
}

/// `offset + done` as the kernel's file offset; beyond `i64::MAX` it is `EINVAL`, as the
/// kernel would say.
fn file_offset(offset: u64, done: usize) -> io::Result<libc::off_t> {
    offset
        .checked_add(done as u64)
        .and_then(|p| libc::off_t::try_from(p).ok())
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsFd;

    #[test]
    fn pread_fills_and_stops_at_end_of_file() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"hello world").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(PlacementDst::from_slice(&mut buf).pread_from(f.as_fd(), 0).unwrap(), 8);
        assert_eq!(&buf, b"hello wo");
        let mut buf = [0u8; 8];
        assert_eq!(PlacementDst::from_slice(&mut buf).pread_from(f.as_fd(), 6).unwrap(), 5);
        assert_eq!(&buf[..5], b"world");
        assert!(PlacementDst::from_slice(&mut buf).pread_from(f.as_fd(), u64::MAX).is_err());
    }

    #[test]
    fn pwrite_copy_and_append() {
        let mut f = tempfile::tempfile().unwrap();
        let src = PlacementSrc::from(&b"abcdef"[..]);
        assert_eq!(src.pwrite_to(f.as_fd(), 2).unwrap(), 6);
        let mut back = Vec::new();
        f.rewind().unwrap();
        f.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"\0\0abcdef");
        let mut out = b"xy".to_vec();
        src.append_to(&mut out);
        assert_eq!(out, b"xyabcdef");
        let mut buf = [0u8; 4];
        assert_eq!(PlacementDst::from_slice(&mut buf).copy_from(b"ab"), 2);
        assert_eq!(&buf, b"ab\0\0");
        assert_eq!(PlacementSrc::from_slice(&[]).pwrite_to(f.as_fd(), 0).unwrap(), 0);
    }
}
