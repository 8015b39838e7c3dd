//! Message machinery both ends share: a ring of pre-posted receive buffers, sends
//! whose buffers live until their completion, and a bounded queue of sends the
//! provider could not take yet.
//!
//! The receive buffers are allocated once and reposted as they are: a message is
//! copied out of its buffer (its own length, into a pooled buffer) instead of handing
//! the 256 KiB buffer up and posting a fresh, zeroed one. Zeroing 256 KiB per message
//! at both ends was the largest cost of a small round trip (perf: memset on top).

use std::collections::VecDeque;

use dafs_transport::TransportError;

use crate::ffi::{self, Completion, Fabric, Posted};
use crate::{MSG_BYTES_MAX, POOL_MAX, RX_DEPTH, SENDS_INFLIGHT_MAX};

/// Completion contexts: kind in the top byte, an index or sequence number below.
pub const CTX_RECV: u64 = 1 << 56;
pub const CTX_SEND: u64 = 2 << 56;
pub const CTX_WRITE: u64 = 3 << 56;
pub const CTX_READ: u64 = 4 << 56;
pub const CTX_KIND: u64 = 0xff << 56;

/// What progress produced beyond message bookkeeping.
#[derive(Debug)]
pub enum LinkEvent {
    /// A message; `data` is the remote CQ data of a control message.
    Msg { buf: Vec<u8>, data: Option<u64> },
    /// An RMA operation finished (`err` 0 on success).
    Rma { ctx: u64, err: i32 },
}

pub struct Link {
    /// Declared first: dropped (endpoint closed) before the buffers posted on it.
    pub fab: Fabric,
    flags: ffi::Flags,
    /// [`RX_DEPTH`] buffers of [`MSG_BYTES_MAX`] bytes, allocated once.
    rx_bufs: Vec<Box<[u8]>>,
    /// Whether `rx_bufs[i]` is posted (the provider may write it until its completion).
    rx_posted: Vec<bool>,
    /// Receive slots whose repost the provider refused for now.
    recv_retry: Vec<usize>,
    sends: Vec<Option<Vec<u8>>>,
    free_sends: Vec<usize>,
    unposted: VecDeque<(Vec<u8>, Option<u64>)>,
    pool: Vec<Vec<u8>>,
    comps: Vec<Completion>,
    /// Largest message accepted or sent (lowered by negotiation).
    pub msg_size_bytes_max: usize,
}

/// A pooled buffer holding a copy of `bytes` (no zeroing: it is filled by the copy).
fn copy_into_pooled(pool: &mut Vec<Vec<u8>>, bytes: &[u8]) -> Vec<u8> {
    let mut b = pool.pop().unwrap_or_default();
    b.clear();
    b.extend_from_slice(bytes);
    b
}

impl Link {
    pub fn new(fab: Fabric) -> Self {
        Link {
            fab,
            flags: ffi::flags(),
            rx_bufs: (0..RX_DEPTH).map(|_| vec![0u8; MSG_BYTES_MAX].into_boxed_slice()).collect(),
            rx_posted: vec![false; RX_DEPTH],
            recv_retry: Vec::new(),
            sends: Vec::new(),
            free_sends: Vec::new(),
            unposted: VecDeque::new(),
            pool: Vec::new(),
            comps: vec![Completion::default(); 64],
            msg_size_bytes_max: MSG_BYTES_MAX,
        }
    }

    /// Post every empty receive slot.
    pub fn post_receives(&mut self) -> Result<(), TransportError> {
        let empty: Vec<usize> = (0..RX_DEPTH).filter(|&i| !self.rx_posted[i]).collect();
        for i in empty {
            self.post_recv(i)?;
        }
        Ok(())
    }

    fn post_recv(&mut self, i: usize) -> Result<(), TransportError> {
        debug_assert!(!self.rx_posted[i]);
        // Always the provider maximum: the peer may send up to it before negotiation.
        // SAFETY: `rx_bufs[i]` lives as long as the Link (dropped after `fab`, which is
        // declared first) and is not touched while posted: only after its completion
        // (`rx_posted[i]` false again) or the endpoint's reopen.
        match unsafe { self.fab.recv(&mut self.rx_bufs[i], CTX_RECV | i as u64) }? {
            Posted::Yes => self.rx_posted[i] = true,
            Posted::Again => self.recv_retry.push(i),
        }
        Ok(())
    }

    /// Fresh endpoint (reconnect): everything posted on the old one is dropped.
    pub fn reopen(&mut self) -> Result<(), TransportError> {
        self.fab.reopen()?;
        // The old endpoint is closed: libfabric no longer references these buffers.
        self.rx_posted.iter_mut().for_each(|p| *p = false);
        self.sends.clear();
        self.free_sends.clear();
        self.unposted.clear();
        self.recv_retry.clear();
        Ok(())
    }

    /// Send (or queue) one message; `data` marks a control message.
    pub fn send(&mut self, msg: &[u8], data: Option<u64>) -> Result<(), TransportError> {
        if msg.len() > self.msg_size_bytes_max {
            return Err(TransportError::TooBig { len: msg.len(), max: self.msg_size_bytes_max });
        }
        if self.unposted.len() >= SENDS_INFLIGHT_MAX {
            return Err(TransportError::Protocol(
                "libfabric send queue full (peer not progressing)",
            ));
        }
        let b = copy_into_pooled(&mut self.pool, msg);
        self.unposted.push_back((b, data));
        self.post_sends()
    }

    /// Messages queued and not yet taken by the provider.
    pub fn sends_queued(&self) -> usize {
        self.unposted.len()
    }

    fn post_sends(&mut self) -> Result<(), TransportError> {
        while let Some((b, data)) = self.unposted.pop_front() {
            let i = match self.free_sends.pop() {
                Some(i) => i,
                None if self.sends.len() < SENDS_INFLIGHT_MAX => {
                    self.sends.push(None);
                    self.sends.len() - 1
                }
                None => {
                    self.unposted.push_front((b, data));
                    return Ok(());
                }
            };
            // SAFETY: on success the buffer moves into `sends[i]` untouched until its
            // completion (or the endpoint's reopen/close); the heap block does not move.
            match unsafe { self.fab.send(&b, data, CTX_SEND | i as u64) }? {
                Posted::Yes => self.sends[i] = Some(b),
                Posted::Again => {
                    self.free_sends.push(i);
                    self.unposted.push_front((b, data));
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Progress: read completions, recycle sends, repost receives, post queued sends.
    /// Messages and RMA completions go to `out`.
    pub fn progress(&mut self, out: &mut VecDeque<LinkEvent>) -> Result<(), TransportError> {
        loop {
            // The array goes back into `self.comps` on every path, errors included:
            // left empty by an early return, the next call polled for zero completions,
            // took that for a full batch and looped for ever (a failed completion, e.g.
            // at a dead peer, hung the client at its next progress, as after a restart).
            let mut comps = std::mem::take(&mut self.comps);
            assert!(!comps.is_empty(), "completion array lost");
            let full = self.take_completions(&mut comps, out);
            self.comps = comps;
            if !full? {
                break;
            }
        }
        for i in std::mem::take(&mut self.recv_retry) {
            self.post_recv(i)?;
        }
        self.post_sends()
    }

    /// Read one batch into `comps` and handle it: true if the batch was full (more may
    /// be waiting).
    fn take_completions(
        &mut self,
        comps: &mut [Completion],
        out: &mut VecDeque<LinkEvent>,
    ) -> Result<bool, TransportError> {
        let n = self.fab.poll(comps)?;
        for c in &comps[..n] {
            self.complete(c, out)?;
        }
        Ok(n == comps.len())
    }

    fn complete(
        &mut self,
        c: &Completion,
        out: &mut VecDeque<LinkEvent>,
    ) -> Result<(), TransportError> {
        let idx = (c.ctx & !CTX_KIND) as usize;
        match c.ctx & CTX_KIND {
            CTX_RECV => {
                if !self.rx_posted.get(idx).copied().unwrap_or(false) {
                    return Err(TransportError::Protocol("libfabric completed an unknown receive"));
                }
                self.rx_posted[idx] = false;
                if c.err != 0 {
                    return Err(fabric_error("receive", c));
                }
                let len = c.len as usize;
                if len == 0 || len > self.msg_size_bytes_max.max(crate::boot::REG_BYTES) {
                    return Err(TransportError::Protocol("bad message length from fabric peer"));
                }
                let b = copy_into_pooled(&mut self.pool, &self.rx_bufs[idx][..len]);
                let data = (c.flags & self.flags.remote_cq_data != 0).then_some(c.data);
                debug_assert!(c.flags & self.flags.recv != 0);
                out.push_back(LinkEvent::Msg { buf: b, data });
                self.post_recv(idx)?;
            }
            CTX_SEND => {
                let b = self
                    .sends
                    .get_mut(idx)
                    .and_then(Option::take)
                    .ok_or(TransportError::Protocol("libfabric completed an unknown send"))?;
                self.free_sends.push(idx);
                self.recycle(b);
                if c.err != 0 {
                    return Err(fabric_error("send", c));
                }
            }
            CTX_WRITE | CTX_READ => {
                debug_assert!(c.err != 0 || c.flags & self.flags.rma != 0);
                out.push_back(LinkEvent::Rma { ctx: c.ctx, err: c.err })
            }
            _ => {
                return Err(TransportError::Protocol("libfabric completion with a foreign context"))
            }
        }
        Ok(())
    }

    pub fn recycle(&mut self, b: Vec<u8>) {
        if self.pool.len() < POOL_MAX && b.capacity() <= MSG_BYTES_MAX {
            self.pool.push(b);
        }
    }
}

/// A failed message operation: the peer is gone or the fabric broke; the session layer
/// reconnects.
fn fabric_error(what: &str, c: &Completion) -> TransportError {
    tracing::debug!(
        err = c.err,
        prov_err = c.prov_err,
        "libfabric {what} failed: {}",
        ffi::strerror(c.err)
    );
    TransportError::Closed
}
