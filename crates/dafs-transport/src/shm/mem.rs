//! The unsafe corner of the shared-memory provider: mappings, sealed memfds, rings over
//! shared memory and descriptor passing. Everything else in the
//! provider is safe code over these types, except where it sets the rings up and where
//! the server lends its mapping of a client region to a placement (`put`, `pull_sync`).
//!
//! Trust: the peer can write anything into shared memory at any time. Every value read
//! from it (ring indices, record lengths) is validated before use, message bytes are
//! copied out before they are decoded (no double fetch), and mappings the server makes
//! of client memory require the client to have sealed the memfd against shrinking, so
//! touching a mapping can never raise SIGBUS in the server.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use crate::mem_ptr::MemPtr;

pub const PAGE: usize = 4096;

pub fn round_up_page(n: usize) -> Option<usize> {
    n.checked_add(PAGE - 1).map(|v| v & !(PAGE - 1))
}

/// A shared, read-write mapping of (part of) a memfd. Unmapped on drop.
///
/// `Send` through [`MemPtr`]: the mapping belongs to the process, not to a thread, and is
/// unmapped by whichever thread drops its owner. This crate reaches the bytes only
/// through raw pointers (atomics for ring indices, raw copies and the kernel for data),
/// never through references, since the peer process may write them at any time.
pub struct Mapping {
    mem: MemPtr,
}

// SAFETY: `Sync` lets threads share `&Mapping` (a [`crate::PlacementLease`] holds an
// `Arc<Mapping>` on another thread). Through `&self` a `Mapping` only hands out its address
// range (`ptr`, `len`, `mem`, `range`): no method reads or writes the mapped bytes, so
// shared references cannot race. Whoever accesses the bytes through those addresses
// argues that access at its own `unsafe` block; unmapping needs the owner (`Drop`).
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes of `fd` shared read-write.
    pub fn map(fd: BorrowedFd, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: a fresh mapping chosen by the kernel; we own it until munmap in Drop.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        let mem = MemPtr::new(ptr.cast(), len).expect("mmap returns a non-null, in-range mapping");
        Ok(Mapping { mem })
    }
    pub fn ptr(&self) -> *mut u8 {
        self.mem.as_ptr()
    }
    pub fn len(&self) -> usize {
        self.mem.len()
    }
    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }

    /// The whole mapping, as a range valid while `self` lives.
    pub fn mem(&self) -> MemPtr {
        self.mem
    }

    /// The bytes `[off, off+len)`, bounds-checked; valid while `self` lives.
    pub fn range(&self, off: u64, len: usize) -> Option<MemPtr> {
        self.mem.range(usize::try_from(off).ok()?, len)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range came from our own mmap and is unmapped exactly once.
        unsafe {
            let _ = rustix::mm::munmap(self.mem.as_ptr().cast(), self.mem.len());
        }
    }
}

/// Create a memfd of `len` bytes, sealed so it can neither shrink nor grow (the peer's
/// mapping stays valid whatever this process does later).
pub fn sealed_memfd(name: &str, len: usize) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::ftruncate(&fd, len as u64)?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
    Ok(fd)
}

/// Check a memfd received from a peer: sealed against shrinking, at least `len` bytes.
pub fn check_sealed(fd: BorrowedFd, len: usize) -> Result<(), &'static str> {
    let seals = rustix::fs::fcntl_get_seals(fd).map_err(|_| "region is not a sealable memfd")?;
    if !seals.contains(SealFlags::SHRINK) {
        return Err("region memfd is not sealed against shrinking");
    }
    let st = rustix::fs::fstat(fd).map_err(|_| "cannot stat region memfd")?;
    if (st.st_size as u64) < len as u64 {
        return Err("region memfd is smaller than announced");
    }
    Ok(())
}

/// Most descriptors one [`send_with_fds`] passes (a control record carries at most one).
const SEND_FDS_MAX: usize = 2;
/// Descriptors one [`recv_with_fds`] has room for: more than one record ever carries, so
/// nothing a well-behaved peer sends is truncated.
const RECV_FDS_MAX: usize = 4;

/// Send `bytes` with optional descriptors on a unix stream socket (blocking until sent).
pub fn send_with_fds(sock: BorrowedFd, bytes: &[u8], fds: &[BorrowedFd]) -> io::Result<()> {
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(SEND_FDS_MAX))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !cmsg.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut sent = 0;
    let mut first = true;
    while sent < bytes.len() {
        let r = if first {
            rustix::net::sendmsg(
                sock,
                &[IoSlice::new(&bytes[sent..])],
                &mut cmsg,
                SendFlags::NOSIGNAL,
            )
        } else {
            rustix::net::send(sock, &bytes[sent..], SendFlags::NOSIGNAL)
        };
        match r {
            Ok(n) => {
                sent += n;
                first = false;
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::AGAIN) => {
                crate::wait::sleep_on_fd(sock, true, None)?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Receive up to `buf.len()` bytes without blocking, collecting any descriptors.
/// Ok(0) means end of stream; Err(WouldBlock) means nothing to read.
pub fn recv_with_fds(
    sock: BorrowedFd,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> io::Result<usize> {
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(RECV_FDS_MAX))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    loop {
        match rustix::net::recvmsg(
            sock,
            &mut [IoSliceMut::new(buf)],
            &mut cmsg,
            RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(r) => {
                for m in cmsg.drain() {
                    if let RecvAncillaryMessage::ScmRights(it) = m {
                        fds.extend(it);
                    }
                }
                return Ok(r.bytes);
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// The peer of a connected unix socket as the kernel recorded it at connect
/// (SO_PEERCRED): (pid, uid). The pid is 0 when the peer is in a pid namespace this
/// process cannot see (read into a plain integer: a zero pid is a value, not an error).
pub fn peer_cred(sock: BorrowedFd) -> io::Result<(i32, u32)> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes and `len` is the size of `cred`;
    // the kernel writes at most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((cred.pid, cred.uid))
}

// ------------------------------------------------------------------------------ rings

/// Layout of the shared ring area (one memfd per connection):
/// `[c2s header 256 B][s2c header 256 B][pad to 4 KiB][c2s data cap][s2c data cap]`.
/// A ring header: `head u64 @0` (producer), `tail u64 @64` (consumer),
/// `consumer_sleeping u32 @128`. Separate cache lines so the two sides don't false-share.
pub const RING_HEADER_LEN: usize = 256;
pub const RING_DATA_OFFSET: usize = PAGE;
/// Offsets of the ring header's fields (see above).
const HEAD_OFFSET: usize = 0;
const TAIL_OFFSET: usize = 64;
const SLEEPING_OFFSET: usize = 128;
/// A record is `len u32, pad u32`, then the message, padded to 8 bytes.
const REC_HDR: u64 = 8;
/// Records are 8-byte aligned, so a record header never straddles the ring's end.
const REC_ALIGN: u64 = 8;
/// Record length meaning "skip to the start of the ring" (the record did not fit before
/// the end).
const PAD_RECORD: u32 = u32::MAX;

pub fn ring_area_len(cap: usize) -> usize {
    RING_DATA_OFFSET + 2 * cap
}

/// One direction of the ring pair. Holds ranges of a [`Mapping`] that the owner keeps
/// alive for as long as the Ring exists (`Send` through [`MemPtr`]).
pub struct Ring {
    hdr: MemPtr,
    data: MemPtr,
    cap: u64,
    max_record: usize,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Pop {
    Empty,
    Message,
}

impl Ring {
    /// `index` 0 = client-to-server, 1 = server-to-client. `cap` is a power of two.
    ///
    /// # Safety
    /// `area` must be a mapping of at least `ring_area_len(cap)` bytes that outlives the Ring.
    pub unsafe fn new(area: &Mapping, index: usize, cap: usize, max_record: usize) -> Ring {
        assert!(cap.is_power_of_two() && area.len() >= ring_area_len(cap) && index < 2);
        let range = |off, len| area.mem().range(off, len).expect("checked against ring_area_len");
        Ring {
            hdr: range(index * RING_HEADER_LEN, RING_HEADER_LEN),
            data: range(RING_DATA_OFFSET + index * cap, cap),
            cap: cap as u64,
            max_record,
        }
    }
    fn head(&self) -> &AtomicU64 {
        // SAFETY: 8-aligned (page-aligned mapping + a multiple of 64), inside the header,
        // lives as long as self (`Ring::new`'s contract). Both processes access it only
        // atomically, so a shared reference to an atomic is sound.
        unsafe { &*(self.hdr.as_ptr().add(HEAD_OFFSET) as *const AtomicU64) }
    }
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as in `head`.
        unsafe { &*(self.hdr.as_ptr().add(TAIL_OFFSET) as *const AtomicU64) }
    }
    fn sleeping(&self) -> &AtomicU32 {
        // SAFETY: as in `head`.
        unsafe { &*(self.hdr.as_ptr().add(SLEEPING_OFFSET) as *const AtomicU32) }
    }

    /// Producer: append one record. Ok(false) if there is no room now.
    pub fn push(&self, msg: &[u8]) -> Result<bool, &'static str> {
        assert!(msg.len() <= self.max_record);
        let head = self.head().load(Ordering::Relaxed);
        let tail = self.tail().load(Ordering::Acquire);
        if tail > head || head - tail > self.cap {
            return Err("ring indices corrupted by peer");
        }
        let need = REC_HDR + (msg.len() as u64).next_multiple_of(REC_ALIGN);
        let pos = head & (self.cap - 1);
        let to_end = self.cap - pos;
        let pad = if to_end < need { to_end } else { 0 };
        if self.cap - (head - tail) < need + pad {
            return Ok(false);
        }
        let mut h = head;
        if pad > 0 {
            // SAFETY: pos + 8 <= cap (records are 8-aligned and pos < cap).
            unsafe {
                std::ptr::write_volatile(
                    self.data.as_ptr().add(pos as usize) as *mut u32,
                    PAD_RECORD,
                )
            };
            h += pad;
        }
        let p = (h & (self.cap - 1)) as usize;
        // SAFETY: room was checked: p + need <= cap.
        unsafe {
            std::ptr::write_volatile(self.data.as_ptr().add(p) as *mut u32, msg.len() as u32);
            std::ptr::copy_nonoverlapping(
                msg.as_ptr(),
                self.data.as_ptr().add(p + REC_HDR as usize),
                msg.len(),
            );
        }
        self.head().store(h + need, Ordering::Release);
        Ok(true)
    }

    /// Consumer: copy the next record into `out`. Validates everything the peer wrote.
    pub fn pop_into(&self, out: &mut Vec<u8>) -> Result<Pop, &'static str> {
        loop {
            let tail = self.tail().load(Ordering::Relaxed);
            let head = self.head().load(Ordering::Acquire);
            if head == tail {
                return Ok(Pop::Empty);
            }
            if head < tail || head - tail > self.cap {
                return Err("ring indices corrupted by peer");
            }
            let pos = tail & (self.cap - 1);
            if head - tail < REC_HDR || pos + REC_HDR > self.cap {
                return Err("truncated ring record");
            }
            // SAFETY: pos + 8 <= cap.
            let len = unsafe {
                std::ptr::read_volatile(self.data.as_ptr().add(pos as usize) as *const u32)
            };
            if len == PAD_RECORD {
                self.tail().store(tail + (self.cap - pos), Ordering::Release);
                continue;
            }
            let len = len as usize;
            let need = REC_HDR + (len as u64).next_multiple_of(REC_ALIGN);
            if len == 0 || len > self.max_record || pos + need > self.cap || need > head - tail {
                return Err("bad ring record length");
            }
            out.clear();
            out.reserve(len);
            // SAFETY: [pos+8, pos+8+len) is inside the data area (checked above); we copy
            // before interpreting, so later writes by the peer cannot change what we decode.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.data.as_ptr().add(pos as usize + REC_HDR as usize),
                    out.as_mut_ptr(),
                    len,
                );
                out.set_len(len);
            }
            self.tail().store(tail + need, Ordering::Release);
            return Ok(Pop::Message);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.head().load(Ordering::Acquire) == self.tail().load(Ordering::Relaxed)
    }

    /// Consumer: announce that it is about to sleep. Returns false (and withdraws the
    /// announcement) if a record arrived meanwhile: then it must not sleep.
    pub fn arm_sleep(&self) -> bool {
        self.sleeping().store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !self.is_empty() {
            self.sleeping().store(0, Ordering::SeqCst);
            return false;
        }
        true
    }

    pub fn disarm_sleep(&self) {
        self.sleeping().store(0, Ordering::Relaxed);
    }

    /// Producer, after pushing: true if the consumer sleeps and must be woken (the flag
    /// is cleared so one wake-up is sent per sleep).
    pub fn needs_wakeup(&self) -> bool {
        fence(Ordering::SeqCst);
        self.sleeping().swap(0, Ordering::SeqCst) == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn area(cap: usize) -> (OwnedFd, Mapping) {
        let fd = sealed_memfd("test", ring_area_len(cap)).unwrap();
        let m = Mapping::map(fd.as_fd(), ring_area_len(cap)).unwrap();
        (fd, m)
    }

    #[test]
    fn ring_wraps_and_fills() {
        let (_fd, m) = area(4096);
        // SAFETY: m is large enough and outlives the rings.
        let (p, c) = unsafe { (Ring::new(&m, 0, 4096, 1000), Ring::new(&m, 0, 4096, 1000)) };
        let mut out = Vec::new();
        for round in 0..200u32 {
            let msg = vec![(round % 251) as u8; 1 + (round as usize * 37) % 999];
            assert!(p.push(&msg).unwrap());
            assert_eq!(c.pop_into(&mut out).unwrap(), Pop::Message);
            assert_eq!(out, msg);
        }
        let mut n = 0;
        while p.push(&[1u8; 500]).unwrap() {
            n += 1;
        }
        assert!((6..=8).contains(&n), "4 KiB holds about eight 508-byte records, got {n}");
        assert_eq!(c.pop_into(&mut out).unwrap(), Pop::Message);
        assert!(p.push(&[2u8; 500]).unwrap(), "room again after a pop");
    }

    #[test]
    fn corrupted_indices_and_lengths_are_errors() {
        let (_fd, m) = area(4096);
        // SAFETY: as above.
        let r = unsafe { Ring::new(&m, 1, 4096, 1000) };
        r.head().store(10_000, Ordering::Relaxed);
        assert!(r.pop_into(&mut Vec::new()).is_err());
        r.head().store(16, Ordering::Relaxed);
        // SAFETY: writing the record header at offset 0 of the data area.
        unsafe { std::ptr::write(m.ptr().add(RING_DATA_OFFSET + 4096) as *mut u32, 5000) };
        assert!(r.pop_into(&mut Vec::new()).is_err(), "record longer than max");
    }

    #[test]
    fn sleep_flag_handshake() {
        let (_fd, m) = area(4096);
        // SAFETY: as above.
        let r = unsafe { Ring::new(&m, 0, 4096, 100) };
        assert!(r.arm_sleep());
        r.push(b"x").unwrap();
        assert!(r.needs_wakeup());
        assert!(!r.needs_wakeup(), "one wake-up per sleep");
        assert!(!r.arm_sleep(), "data pending: must not sleep");
    }

    #[test]
    fn unsealed_memfd_is_refused() {
        let fd = rustix::fs::memfd_create("x", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 8192).unwrap();
        assert!(check_sealed(fd.as_fd(), 4096).is_err());
        let ok = sealed_memfd("y", 8192).unwrap();
        assert!(check_sealed(ok.as_fd(), 8192).is_ok());
        assert!(check_sealed(ok.as_fd(), 8193).is_err());
    }
}
