//! A fault-injecting wrapper around any client transport, for testing session recovery
//! (and for users who want to check their own application against a flaky network).
//!
//! Deterministic: the same seed and the same sequence of calls inject the same faults.
//! Faults, each with its own probability per call:
//! - **drop**: a message is not sent and the connection is cut (the request is lost with
//!   the connection, as when a network fails mid-send);
//! - **cut after send**: the message goes out, then the connection is cut (the server
//!   may execute it; its reply is lost);
//! - **cut before receive**: the connection is cut when the client next looks for a reply
//!   (a reply in transit is lost);
//! - **duplicate**: the message is sent twice (the server must execute it once);
//! - **delay**: the message is held back and sent after the next one (reordering across
//!   slots).
//!
//! A cut shuts the real connection down in both directions, so the server sees it too.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::{Access, ClientTransport, TransportError, TransportStats, Wait};

/// Fault probabilities are in parts per million.
const PPM_SCALE: u64 = 1_000_000;

/// Probabilities, each in parts per million per call.
#[derive(Debug, Clone, Copy, Default)]
pub struct FaultPlan {
    pub drop_ppm: u32,
    pub cut_after_send_ppm: u32,
    pub cut_before_recv_ppm: u32,
    pub duplicate_ppm: u32,
    pub delay_ppm: u32,
}

/// What was injected so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub cuts: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub delayed: u64,
}

/// Shared with the test that owns the client: counters, and a way to cut the connection
/// from outside (another thread, or while the client is idle).
#[derive(Debug, Default)]
pub struct FaultControl {
    cuts: AtomicU64,
    dropped: AtomicU64,
    duplicated: AtomicU64,
    delayed: AtomicU64,
    /// The current connection's descriptor (changes on reconnect).
    fd: AtomicI32,
    /// Refuse reconnects while set (simulates a partition that outlasts the lease).
    pub block_reconnect: AtomicBool,
    /// While nonzero: a receive during which the server placed at least this many bytes
    /// into client memory loses its reply and cuts the connection — a link that breaks
    /// during every large transfer while small messages (binds, metadata) get through.
    pub cut_after_placed_bytes: AtomicU64,
}

impl FaultControl {
    pub fn counts(&self) -> FaultCounts {
        FaultCounts {
            cuts: self.cuts.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            duplicated: self.duplicated.load(Relaxed),
            delayed: self.delayed.load(Relaxed),
        }
    }

    /// Break the connection now, from any thread: both directions are shut down, so the
    /// server sees the loss at once and the client notices on its next call.
    pub fn cut(&self) {
        let fd = self.fd.load(Relaxed);
        if fd >= 0 {
            // SAFETY: shutdown(2) on a descriptor number; at worst it names a descriptor
            // that was closed meanwhile and fails with EBADF/ENOTSOCK, which is ignored.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            self.cuts.fetch_add(1, Relaxed);
        }
    }
}

pub struct FaultyTransport {
    inner: Box<dyn ClientTransport>,
    plan: FaultPlan,
    rng: u64,
    /// Held back by a delay, sent before the next message or receive.
    held: Option<Vec<u8>>,
    /// The connection was cut: every call fails until `reconnect`.
    broken: bool,
    /// Faults are off until this many more calls have passed (lets a session be set up).
    quiet_calls: u64,
    ctl: Arc<FaultControl>,
}

impl FaultyTransport {
    pub fn new(inner: Box<dyn ClientTransport>, plan: FaultPlan, seed: u64) -> Self {
        let ctl =
            Arc::new(FaultControl { fd: AtomicI32::new(inner.cut_fd()), ..Default::default() });
        FaultyTransport {
            inner,
            plan,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
            held: None,
            broken: false,
            quiet_calls: 0,
            ctl,
        }
    }

    /// The control shared with whoever created the transport.
    pub fn control(&self) -> Arc<FaultControl> {
        self.ctl.clone()
    }

    /// No faults for the next `n` calls.
    pub fn quiet_for(&mut self, n: u64) {
        self.quiet_calls = n;
    }

    pub fn set_plan(&mut self, plan: FaultPlan) {
        self.plan = plan;
    }

    pub fn counts(&self) -> FaultCounts {
        self.ctl.counts()
    }

    /// splitmix64 (its published constants): tiny, fast, and deterministic (no dependency needed for test faults).
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn hit(&mut self, ppm: u32) -> bool {
        if self.quiet_calls > 0 || ppm == 0 {
            return false;
        }
        self.next() % PPM_SCALE < ppm as u64
    }

    fn tick(&mut self) {
        self.quiet_calls = self.quiet_calls.saturating_sub(1);
    }

    fn cut_now(&mut self) {
        self.inner.cut();
        self.broken = true;
        self.held = None;
        self.ctl.cuts.fetch_add(1, Relaxed);
    }

    fn release_held(&mut self) -> Result<(), TransportError> {
        if let Some(m) = self.held.take() {
            self.inner.send(&m)?;
        }
        Ok(())
    }
}

impl ClientTransport for FaultyTransport {
    fn msg_size_bytes_max(&self) -> usize {
        self.inner.msg_size_bytes_max()
    }
    fn set_msg_size_bytes_max(&mut self, n: usize) {
        self.inner.set_msg_size_bytes_max(n)
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        if self.broken {
            return Err(TransportError::Closed);
        }
        self.tick();
        if self.hit(self.plan.drop_ppm) {
            self.ctl.dropped.fetch_add(1, Relaxed);
            self.cut_now();
            // Reported as sent: the loss shows when the reply never comes.
            return Ok(());
        }
        if self.hit(self.plan.delay_ppm) && self.held.is_none() {
            self.ctl.delayed.fetch_add(1, Relaxed);
            self.held = Some(msg.to_vec());
            return Ok(());
        }
        self.inner.send(msg)?;
        self.release_held()?;
        if self.hit(self.plan.duplicate_ppm) {
            self.ctl.duplicated.fetch_add(1, Relaxed);
            self.inner.send(msg)?;
        }
        if self.hit(self.plan.cut_after_send_ppm) {
            self.cut_now();
        }
        Ok(())
    }

    fn recv(&mut self, wait: Wait) -> Result<Option<Vec<u8>>, TransportError> {
        if self.broken {
            return Err(TransportError::Closed);
        }
        self.tick();
        self.release_held()?;
        if self.hit(self.plan.cut_before_recv_ppm) {
            self.cut_now();
            return Err(TransportError::Closed);
        }
        let cut_at = self.ctl.cut_after_placed_bytes.load(Relaxed);
        let placed_before = self.inner.stats().placed_bytes;
        let m = self.inner.recv(wait)?;
        if cut_at > 0 && self.inner.stats().placed_bytes - placed_before >= cut_at {
            self.cut_now();
            return Err(TransportError::Closed);
        }
        Ok(m)
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        self.inner.recycle(buf)
    }
    fn set_spin(&mut self, spin: Duration) {
        self.inner.set_spin(spin)
    }
    fn default_spin(&self) -> Duration {
        self.inner.default_spin()
    }

    unsafe fn register(
        &mut self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<u64, TransportError> {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { self.inner.register(ptr, len, access) }
    }
    fn deregister(&mut self, key: u64) -> Result<(), TransportError> {
        self.inner.deregister(key)
    }
    fn alloc_registered(&mut self, len: usize) -> Result<(u64, *mut u8), TransportError> {
        self.inner.alloc_registered(len)
    }

    fn reconnect(&mut self, timeout: Duration) -> Result<(), TransportError> {
        if self.ctl.block_reconnect.load(Relaxed) {
            return Err(TransportError::Io(std::io::Error::from_raw_os_error(libc::ETIMEDOUT)));
        }
        self.inner.reconnect(timeout)?;
        self.ctl.fd.store(self.inner.cut_fd(), Relaxed);
        self.broken = false;
        self.held = None;
        Ok(())
    }

    fn cut(&mut self) {
        self.cut_now();
    }

    fn provider(&self) -> &'static str {
        self.inner.provider()
    }
    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }
    fn raw_fd(&self) -> RawFd {
        self.inner.raw_fd()
    }
    fn wants_write(&self) -> bool {
        self.inner.wants_write()
    }
    fn cut_fd(&self) -> RawFd {
        self.inner.cut_fd()
    }
    /// A sibling injects faults by the same plan (its own random sequence, the same
    /// counters); `FaultControl::cut` still cuts the first connection only.
    fn sibling(&self, timeout: Duration) -> Result<Box<dyn ClientTransport>, TransportError> {
        if self.ctl.block_reconnect.load(Relaxed) {
            return Err(TransportError::Io(std::io::Error::from_raw_os_error(libc::ETIMEDOUT)));
        }
        let inner = self.inner.sibling(timeout)?;
        let rng = self.rng ^ (inner.raw_fd() as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
        Ok(Box::new(FaultyTransport {
            inner,
            plan: self.plan,
            rng,
            held: None,
            broken: false,
            // The trunking bind (one send, one receive) gets through.
            quiet_calls: 2,
            ctl: self.ctl.clone(),
        }))
    }
}
