//! Session trunking: one session over several TCP connections (`ClientConfig::
//! connections`), as NFSv4.1 trunks a session.
//!
//! Channel 0 (`Client::t`) carries every request but direct READs/WRITEs and batches,
//! which are spread round-robin over all channels. The server answers on
//! the connection that carried the request (placements included), so a reply never
//! overtakes its data. Slots, sequence ids and the reply cache belong to the session,
//! not to a connection.
//!
//! Ordering: requests in flight on different connections at once have no order between
//! them, so the client keeps the order where it matters. A READ/WRITE that overlaps
//! requests in flight on the same open (either one writing) goes on their connection
//! (`channel_for_io`), so overlapping writes land in issue order as on one connection;
//! a request other than READ/WRITE first waits until nothing is in flight on another
//! channel (`settle_channels`): what the server's barrier rules promise for one
//! connection (CLOSE after the reads before it, COMMIT after the writes) still holds.
//!
//! A broken connection while others remain (`channel_failed`) is dropped alone: the
//! requests sent on it are resent on the others (the server answers what executed from
//! its reply cache and gives it up too, see docs/architecture.md), the rest keep going,
//! and a replacement connection is bound. Only when the last one breaks does the client
//! go through the full recovery (`recovery`: reconnect, SESSION_BIND, resend).

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use dafs_proto::limits::SESSION_CONNECTIONS_MAX;
use dafs_transport::{ClientTransport, TransportError, Wait};

use crate::inflight::Inflight;
use crate::{Client, Result};

/// What `recv_any` returns: (channel, message), or the channel that failed and why.
pub(crate) type RecvAny = std::result::Result<Option<(usize, Vec<u8>)>, (usize, TransportError)>;

impl Client {
    /// Connections the session uses now.
    pub fn connections(&self) -> usize {
        1 + self.extra.len()
    }

    /// Break connection `k` of the session (0 = the first) as a network failure would
    /// (fault injection and tests); the client notices at its next call.
    #[doc(hidden)]
    pub fn cut_connection(&mut self, k: usize) {
        if k < self.connections() {
            self.chan_mut(k).cut();
        }
    }

    pub(crate) fn chan_mut(&mut self, ch: usize) -> &mut dyn ClientTransport {
        if ch == 0 {
            self.t.as_mut()
        } else {
            self.extra[ch - 1].as_mut()
        }
    }

    /// Bind more connections until the session has `cfg.connections` (providers that
    /// cannot open more, or a server that refuses, leave it with fewer: trunking is an
    /// optimisation, never a reason to fail).
    pub(crate) fn add_channels(&mut self) {
        let want = self.cfg.connections.clamp(1, SESSION_CONNECTIONS_MAX) as usize;
        while !self.dead && self.connections() < want {
            if let Err(e) = self.add_channel() {
                tracing::debug!("session trunking: no connection added ({e})");
                break;
            }
        }
    }

    fn add_channel(&mut self) -> Result<()> {
        let mut t = self.t.sibling(self.cfg.connect_timeout)?;
        Self::keepalive(t.as_ref());
        self.bind_on(t.as_mut(), true)?;
        t.set_msg_size_bytes_max(self.msg_size_bytes_max);
        t.set_spin(self.spin_now);
        self.extra.push(t);
        Ok(())
    }

    /// Drop every connection but the first (before a full recovery: the server closes
    /// a session's other connections when it moves to a new one anyway).
    pub(crate) fn drop_extra_channels(&mut self) {
        // Closed as they are dropped.
        self.extra.clear();
        for s in self.inflight.iter_mut().flatten() {
            s.chan = 0;
        }
    }

    /// The channel for a request: direct transfers and batches round-robin, the rest
    /// (inline I/O: short, latency-bound) on channel 0.
    pub(crate) fn pick_channel(&mut self, what: &Inflight) -> usize {
        let hint = self.chan_hint.take();
        if let (Some(c), Inflight::Io(_)) = (hint, what) {
            if c < self.connections() {
                return c;
            }
        }
        self.pick(!spreads(what))
    }

    /// The channel a READ/WRITE of `len` bytes at `offset` of open `open_id` must go on:
    /// where the requests in flight it overlaps (either one writing) went, so they keep
    /// their issue order (one connection is read in order by the server); with none,
    /// round-robin for a direct transfer, channel 0 for inline I/O. Should it overlap
    /// requests on several channels, those finish first.
    pub(crate) fn channel_for_io(
        &mut self,
        open_id: u64,
        offset: u64,
        len: usize,
        read: bool,
        direct: bool,
    ) -> Result<usize> {
        loop {
            if self.extra.is_empty() {
                return Ok(0);
            }
            let end = offset.saturating_add(len as u64);
            let mut chan = None;
            let mut several = false;
            for s in self.inflight.iter().flatten() {
                let Inflight::Io(io) = &s.what else { continue };
                let overlaps = io.open_id == open_id
                    && io.offset < end
                    && offset < io.offset.saturating_add(io.len as u64);
                if overlaps && !(read && io.read) {
                    match chan {
                        None => chan = Some(s.chan),
                        Some(c) if c != s.chan => several = true,
                        Some(_) => {}
                    }
                }
            }
            match chan {
                Some(c) if !several => return Ok(c),
                Some(_) => {
                    self.progress(Wait::Forever)?;
                }
                None if direct => {
                    let n = self.connections();
                    let c = self.next_send % n;
                    self.next_send = self.next_send.wrapping_add(1);
                    return Ok(c);
                }
                None => return Ok(0),
            }
        }
    }

    fn pick(&mut self, sync: bool) -> usize {
        let n = self.connections();
        if n == 1 || sync {
            return 0;
        }
        let ch = self.next_send % n;
        self.next_send = self.next_send.wrapping_add(1);
        ch
    }

    /// Before a request other than READ/WRITE: let requests in flight on other channels
    /// finish, so it is ordered after them as on one connection.
    pub(crate) fn settle_channels(&mut self) -> Result<()> {
        while !self.extra.is_empty() && self.inflight.iter().flatten().any(|s| s.chan != 0) {
            self.progress(Wait::Forever)?;
        }
        Ok(())
    }

    /// The next message from any channel, waiting as `wait` says: (channel, message),
    /// or the channel that failed and why.
    pub(crate) fn recv_any(&mut self, wait: Wait) -> RecvAny {
        // Only a channel with requests in flight can have anything for us. With one such
        // channel (always the case at queue depth 1) its own wait serves, spin and all.
        let busy = self.busy_channel();
        if let Some(ch) = busy {
            return self.chan_mut(ch).recv(wait).map(|m| m.map(|m| (ch, m))).map_err(|e| (ch, e));
        }
        let start = Instant::now();
        let deadline = match wait {
            Wait::Timeout(d) => Some(start + d),
            _ => None,
        };
        let spin_until = start + self.spin_now;
        loop {
            let n = self.connections();
            for k in 0..n {
                let ch = (self.next_recv + k) % n;
                match self.chan_mut(ch).recv(Wait::NoWait) {
                    Ok(Some(m)) => {
                        self.next_recv = (ch + 1) % n;
                        return Ok(Some((ch, m)));
                    }
                    Ok(None) => {}
                    Err(e) => return Err((ch, e)),
                }
            }
            if wait == Wait::NoWait {
                return Ok(None);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            if now < spin_until {
                std::hint::spin_loop();
                continue;
            }
            // Sleep until any connection has input (or can take queued output).
            let chans: Vec<(i32, bool)> = std::iter::once(&self.t)
                .chain(self.extra.iter())
                .map(|t| (t.raw_fd(), t.wants_write()))
                .collect();
            // SAFETY: the descriptors belong to this client's transports, which stay
            // open for the duration of the call (nothing here closes them).
            let fds: Vec<(BorrowedFd<'_>, bool)> =
                chans.iter().map(|(fd, w)| (unsafe { BorrowedFd::borrow_raw(*fd) }, *w)).collect();
            // Wake at least every 100 ms: input a provider buffers itself (TLS records
            // already read) shows only in a non-blocking look.
            let cap = now + Duration::from_millis(100);
            let until = deadline.map_or(cap, |d| d.min(cap));
            if let Err(e) = dafs_transport::wait::sleep_on_fds(&fds, Some(until)) {
                return Err((0, TransportError::Io(e)));
            }
        }
    }

    /// The one channel with requests in flight (channel 0 if none has any), or None when
    /// several have.
    fn busy_channel(&self) -> Option<usize> {
        if self.extra.is_empty() {
            return Some(0);
        }
        let mut busy = None;
        for s in self.inflight.iter().flatten() {
            match busy {
                None => busy = Some(s.chan),
                Some(c) if c != s.chan => return None,
                Some(_) => {}
            }
        }
        Some(busy.unwrap_or(0))
    }

    /// Channel `ch` failed with `e`. With other channels left it is dropped alone: its
    /// requests are resent on the others and a replacement is bound; the last one
    /// failing is the connection failing (full recovery).
    pub(crate) fn channel_failed(&mut self, ch: usize, e: TransportError) -> Result<()> {
        if self.extra.is_empty() || !self.cfg.reconnect || self.dead {
            // The last connection, or recovery is off (the first error fails all).
            return self.connection_broke(e);
        }
        if let Some(why) = self.overdue() {
            // The same bounds as a full recovery: a link that breaks during every
            // attempt must not have its requests resent for ever.
            return Err(self.time_out(&format!("{e}; {why}")));
        }
        tracing::debug!(channel = ch, "trunked connection lost ({e}); going on over the others");
        self.stats.connections_lost += 1;
        let dead = if ch == 0 {
            // The next connection becomes the first (they share the registrations).
            let next = self.extra.remove(0);
            std::mem::replace(&mut self.t, next)
        } else {
            self.extra.remove(ch - 1)
        };
        // Closing it is what the server sees (it may still be up on its side).
        drop(dead);
        let mut resend = Vec::new();
        for (slot, s) in self.inflight.iter_mut().enumerate() {
            let Some(s) = s else { continue };
            if s.chan == ch {
                resend.push(slot);
            } else if s.chan > ch {
                s.chan -= 1;
            }
        }
        for slot in resend {
            let first = !spreads(&self.inflight[slot].as_ref().expect("listed above").what);
            let c = self.pick(first);
            let s = self.inflight[slot].as_mut().expect("listed above");
            s.chan = c;
            s.resends += 1;
            self.stats.retransmits += 1;
            let buf = std::mem::take(&mut self.reqbufs[slot]);
            let r = self.chan_mut(c).send(&buf);
            self.reqbufs[slot] = buf;
            if let Err(e) = r {
                if e.is_fatal() {
                    // That one broke too: it takes this request with it (resent again).
                    return self.channel_failed(c, e);
                }
            }
        }
        self.add_channels();
        Ok(())
    }
}

/// True for requests spread over the connections: direct transfers and batches.
fn spreads(what: &Inflight) -> bool {
    match what {
        Inflight::Io(io) => io.direct,
        Inflight::Batch(_) => true,
        Inflight::Sync { .. } => false,
    }
}
