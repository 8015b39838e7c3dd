//! The C shim's interface (shim/shim.c) and a safe owner around it. Every `unsafe` of
//! the crate that touches libfabric is in this module.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::RawFd;

use dafs_transport::TransportError;

#[repr(C)]
struct RawEp {
    _opaque: [u8; 0],
}
#[repr(C)]
struct RawMr {
    _opaque: [u8; 0],
}

/// One completion, as the shim reports it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Completion {
    pub ctx: u64,
    pub flags: u64,
    pub len: u64,
    pub data: u64,
    /// 0, or the libfabric error (positive) of a failed operation.
    pub err: i32,
    pub prov_err: i32,
}

extern "C" {
    fn dofi_strerror(err: c_int) -> *const c_char;
    fn dofi_open(prov: *const c_char, out: *mut *mut RawEp) -> c_int;
    fn dofi_reopen(e: *mut RawEp) -> c_int;
    fn dofi_close(e: *mut RawEp);
    fn dofi_prov_name(e: *const RawEp) -> *const c_char;
    fn dofi_virt_addr(e: *const RawEp) -> c_int;
    fn dofi_wait_fd(e: *const RawEp) -> c_int;
    fn dofi_sends_after_writes(e: *const RawEp) -> c_int;
    fn dofi_getname(e: *mut RawEp, buf: *mut c_void, len: *mut usize) -> c_int;
    fn dofi_set_peer(e: *mut RawEp, name: *const c_void) -> c_int;
    fn dofi_trywait(e: *mut RawEp) -> c_int;
    fn dofi_send(
        e: *mut RawEp,
        buf: *const c_void,
        len: usize,
        data: u64,
        with_data: c_int,
        ctx: u64,
    ) -> isize;
    fn dofi_recv(e: *mut RawEp, buf: *mut c_void, len: usize, ctx: u64) -> isize;
    fn dofi_write(
        e: *mut RawEp,
        buf: *const c_void,
        len: usize,
        raddr: u64,
        key: u64,
        ctx: u64,
    ) -> isize;
    fn dofi_read(
        e: *mut RawEp,
        buf: *mut c_void,
        len: usize,
        raddr: u64,
        key: u64,
        ctx: u64,
    ) -> isize;
    fn dofi_poll(e: *mut RawEp, out: *mut Completion, n: c_int) -> c_int;
    fn dofi_flag_recv() -> u64;
    fn dofi_flag_rma() -> u64;
    fn dofi_flag_remote_cq_data() -> u64;
    fn dofi_eagain() -> c_int;
    fn dofi_mr_reg(
        e: *mut RawEp,
        buf: *mut c_void,
        len: usize,
        remote_write: c_int,
        remote_read: c_int,
        want_key: u64,
        mr: *mut *mut RawMr,
        key: *mut u64,
    ) -> c_int;
    fn dofi_mr_close(mr: *mut RawMr);
}

/// Text of a libfabric error code.
pub fn strerror(err: i32) -> String {
    // SAFETY: fi_strerror returns a static NUL-terminated string for any code.
    unsafe { CStr::from_ptr(dofi_strerror(err)) }.to_string_lossy().into_owned()
}

fn check(what: &str, r: c_int) -> Result<(), TransportError> {
    if r == 0 {
        return Ok(());
    }
    Err(TransportError::Io(std::io::Error::other(format!("libfabric {what}: {}", strerror(r)))))
}

/// Completion-flag bits (read once from the headers through the shim).
#[derive(Debug, Clone, Copy)]
pub struct Flags {
    pub recv: u64,
    pub rma: u64,
    pub remote_cq_data: u64,
}

pub fn flags() -> Flags {
    // SAFETY: constant getters without arguments.
    unsafe {
        Flags {
            recv: dofi_flag_recv(),
            rma: dofi_flag_rma(),
            remote_cq_data: dofi_flag_remote_cq_data(),
        }
    }
}

/// Outcome of posting an operation.
#[derive(Debug, PartialEq, Eq)]
pub enum Posted {
    Yes,
    /// The provider's queue is full: progress, then post again.
    Again,
}

/// A libfabric stack for one peer: info, fabric, domain, completion queue, address
/// vector and reliable-datagram endpoint (see shim.c).
pub struct Fabric {
    raw: *mut RawEp,
    prov: String,
}

// SAFETY: the stack is opened with FI_THREAD_DOMAIN: libfabric requires only that one
// thread at a time uses it, which `&mut self` on every call that touches it (and `Fabric`
// not being `Sync`) guarantees; nothing in it is tied to the opening thread.
unsafe impl Send for Fabric {}

impl Fabric {
    /// Open provider `prov` (libfabric's name, e.g. "tcp;ofi_rxm").
    pub fn open(prov: &str) -> Result<Fabric, TransportError> {
        let c =
            CString::new(prov).map_err(|_| TransportError::Protocol("provider name has NUL"))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid C string; `raw` receives an owned stack on success.
        let r = unsafe { dofi_open(c.as_ptr(), &mut raw) };
        if r != 0 {
            return Err(TransportError::Io(std::io::Error::other(format!(
                "libfabric provider {prov:?} is not usable here: {}",
                strerror(r)
            ))));
        }
        // SAFETY: `raw` is a live stack; the name is owned by its fi_info.
        let prov = unsafe { CStr::from_ptr(dofi_prov_name(raw)) }.to_string_lossy().into_owned();
        Ok(Fabric { raw, prov })
    }

    /// Replace the endpoint (CQ, AV, endpoint) by a fresh one; registrations stay.
    /// Every buffer posted on the old endpoint is released by libfabric here.
    pub fn reopen(&mut self) -> Result<(), TransportError> {
        // SAFETY: live stack, used by this thread only (&mut self).
        check("reopen endpoint", unsafe { dofi_reopen(self.raw) })
    }

    /// The provider libfabric chose, e.g. "tcp;ofi_rxm".
    pub fn prov(&self) -> &str {
        &self.prov
    }

    /// Remote addresses are virtual addresses (FI_MR_VIRT_ADDR), not region offsets.
    pub fn virt_addr(&self) -> bool {
        // SAFETY: live stack.
        unsafe { dofi_virt_addr(self.raw) != 0 }
    }

    /// A send is delivered only after the writes posted before it (FI_ORDER_SAW), and
    /// operations complete once transmitted; else they complete once delivered.
    pub fn sends_after_writes(&self) -> bool {
        // SAFETY: live stack.
        unsafe { dofi_sends_after_writes(self.raw) != 0 }
    }

    /// The completion queue's wait descriptor, if the provider has one.
    pub fn wait_fd(&self) -> Option<RawFd> {
        // SAFETY: live stack.
        let fd = unsafe { dofi_wait_fd(self.raw) };
        (fd >= 0).then_some(fd)
    }

    /// This endpoint's fabric address.
    pub fn name(&mut self) -> Result<Vec<u8>, TransportError> {
        let mut buf = vec![0u8; crate::boot::NAME_BYTES_MAX];
        let mut len = buf.len();
        // SAFETY: `buf` has `len` writable bytes; the shim writes at most that.
        check("getname", unsafe { dofi_getname(self.raw, buf.as_mut_ptr().cast(), &mut len) })?;
        buf.truncate(len);
        Ok(buf)
    }

    /// Make `name` (from the peer's hello) the destination of every operation.
    pub fn set_peer(&mut self, name: &[u8]) -> Result<(), TransportError> {
        if name.is_empty() || name.len() > crate::boot::NAME_BYTES_MAX {
            return Err(TransportError::Protocol("bad fabric address in hello"));
        }
        // The provider reads an address of its own format and length from `name`; pad
        // to the maximum so a short (hostile) name cannot make it read past the buffer.
        let mut padded = name.to_vec();
        padded.resize(crate::boot::NAME_BYTES_MAX, 0);
        // SAFETY: `padded` covers the largest address any provider reads.
        check("av_insert", unsafe { dofi_set_peer(self.raw, padded.as_ptr().cast()) })
    }

    /// 0 if the caller may sleep on the wait fd now, else something is pending.
    pub fn may_sleep(&mut self) -> bool {
        // SAFETY: live stack.
        unsafe { dofi_trywait(self.raw) == 0 }
    }

    fn posted(what: &str, r: isize) -> Result<Posted, TransportError> {
        // SAFETY: constant getter.
        if r == unsafe { dofi_eagain() } as isize {
            return Ok(Posted::Again);
        }
        check(what, r as c_int).map(|_| Posted::Yes)
    }

    /// Post a send of `buf`.
    ///
    /// # Safety
    /// `buf` must stay allocated and unmodified until the completion for `ctx` is read.
    pub unsafe fn send(
        &mut self,
        buf: &[u8],
        data: Option<u64>,
        ctx: u64,
    ) -> Result<Posted, TransportError> {
        let (d, w) = data.map_or((0, 0), |d| (d, 1));
        // SAFETY: caller keeps `buf` alive until completion.
        let r = unsafe { dofi_send(self.raw, buf.as_ptr().cast(), buf.len(), d, w, ctx) };
        Self::posted("send", r)
    }

    /// Post a receive into `buf`.
    ///
    /// # Safety
    /// `buf` must stay allocated and untouched until the completion for `ctx` is read
    /// or the endpoint is reopened / closed.
    pub unsafe fn recv(&mut self, buf: &mut [u8], ctx: u64) -> Result<Posted, TransportError> {
        // SAFETY: caller keeps `buf` alive and unaliased until completion.
        let r = unsafe { dofi_recv(self.raw, buf.as_mut_ptr().cast(), buf.len(), ctx) };
        Self::posted("recv", r)
    }

    /// RMA write of `buf` to the peer's `raddr` under `key`.
    ///
    /// # Safety
    /// As [`Fabric::send`].
    pub unsafe fn write(
        &mut self,
        buf: &[u8],
        raddr: u64,
        key: u64,
        ctx: u64,
    ) -> Result<Posted, TransportError> {
        // SAFETY: caller keeps `buf` alive until completion.
        let r = unsafe { dofi_write(self.raw, buf.as_ptr().cast(), buf.len(), raddr, key, ctx) };
        Self::posted("write", r)
    }

    /// RMA read of the peer's `raddr` under `key` into `buf`.
    ///
    /// # Safety
    /// As [`Fabric::recv`].
    pub unsafe fn read(
        &mut self,
        buf: &mut [u8],
        raddr: u64,
        key: u64,
        ctx: u64,
    ) -> Result<Posted, TransportError> {
        // SAFETY: caller keeps `buf` alive and unaliased until completion.
        let r = unsafe { dofi_read(self.raw, buf.as_mut_ptr().cast(), buf.len(), raddr, key, ctx) };
        Self::posted("read", r)
    }

    /// Progress the endpoint and read completions into `out`; returns how many.
    pub fn poll(&mut self, out: &mut [Completion]) -> Result<usize, TransportError> {
        let n = out.len().min(c_int::MAX as usize) as c_int;
        // SAFETY: `out` has room for `n` entries.
        let r = unsafe { dofi_poll(self.raw, out.as_mut_ptr(), n) };
        if r < 0 {
            check("cq_read", r)?;
        }
        Ok(r as usize)
    }

    /// Register `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The memory must stay valid until the returned [`Mr`] is dropped.
    pub unsafe fn register(
        &mut self,
        ptr: *mut u8,
        len: usize,
        remote_write: bool,
        remote_read: bool,
        want_key: u64,
    ) -> Result<Mr, TransportError> {
        let mut mr = std::ptr::null_mut();
        let mut key = 0;
        // SAFETY: the caller keeps the memory valid for the registration's life.
        let r = unsafe {
            dofi_mr_reg(
                self.raw,
                ptr.cast(),
                len,
                remote_write as c_int,
                remote_read as c_int,
                want_key,
                &mut mr,
                &mut key,
            )
        };
        check("mr_reg", r)?;
        Ok(Mr { raw: mr, key })
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        // SAFETY: owned stack, closed once.
        unsafe { dofi_close(self.raw) }
    }
}

/// A memory registration; closed (and its key revoked) on drop. Must be dropped before
/// the [`Fabric`] whose domain holds it.
pub struct Mr {
    raw: *mut RawMr,
    pub key: u64,
}

// SAFETY: a registration handle is only closed, once, by its owner; libfabric does not
// tie it to a thread.
unsafe impl Send for Mr {}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: owned registration, closed once.
        unsafe { dofi_mr_close(self.raw) }
    }
}
