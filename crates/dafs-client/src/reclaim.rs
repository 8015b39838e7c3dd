//! Reclaim after a server restart (docs/protocol.md §9.5): when the session's bind
//! answers BADSESSION, start a new session with RECLAIM; if the server restarted (a
//! new boot verifier) and is in its grace period, re-open every open file under its old
//! open id (OPEN + RECLAIM), re-take every lock (LOCK + RECLAIM), send
//! RECLAIM_COMPLETE, then resend what was in flight. `File`s of the old session keep
//! working. Otherwise the new session is dropped again and the client reports the lost
//! session as before (BADSESSION; files fail with ESTALE after `reestablish`).
//!
//! Runs inside the recovery path of the call that noticed the break: no thread.

use std::time::{Duration, Instant};

use dafs_proto::types::{lock_flags, open_flags, session_flags};
use dafs_proto::{Opcode, Reply, Request, Status};

use crate::inflight::{Inflight, Slot};
use crate::{Client, Error, Result};

/// First pause before sending a request answered GRACE again; doubles up to
/// [`GRACE_BACKOFF_MAX`]. A grace period ends early when every client reclaimed,
/// typically within milliseconds of a restart.
const GRACE_BACKOFF_START: Duration = Duration::from_millis(20);

/// Longest pause between GRACE retries: the end of a full grace period is noticed
/// within a second, at one request a second.
const GRACE_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A request that was in flight when the server went away.
struct Parked {
    slot: Slot,
    buf: Vec<u8>,
}

impl Client {
    /// The bind after a broken connection answered BADSESSION: reclaim if the server
    /// restarted within reach of its grace period. `Err` leaves the caller to fail the
    /// session as lost (BADSESSION), as without reclaim.
    pub(crate) fn reclaim_after_restart(&mut self) -> Result<()> {
        if self.reclaiming || (self.held.opens.is_empty() && self.held.locks.is_empty()) {
            // Nothing to reclaim (or a second restart during a reclaim): lost as before.
            return Err(Error::Status(Status::BadSession));
        }
        let parked = self.park_inflight();
        self.reclaiming = true;
        let r = self.reclaim_session();
        self.reclaiming = false;
        match r {
            Ok(()) => {
                self.resend_parked(parked);
                Ok(())
            }
            Err(e) => {
                for p in parked {
                    self.fail_parked(p.slot.what, Error::Status(Status::BadSession));
                }
                Err(e)
            }
        }
    }

    /// Take every request in flight out of its slot, keeping its encoded bytes.
    fn park_inflight(&mut self) -> Vec<Parked> {
        let mut parked = Vec::new();
        for i in 0..self.inflight.len() {
            if let Some(slot) = self.inflight_take(i) {
                parked.push(Parked { slot, buf: std::mem::take(&mut self.reqbufs[i]) });
            }
        }
        parked
    }

    /// New session with RECLAIM; then the opens, the locks and RECLAIM_COMPLETE.
    fn reclaim_session(&mut self) -> Result<()> {
        let old_verifier = self.boot_verifier;
        self.drop_extra_channels();
        self.t.reconnect(self.cfg.connect_timeout)?;
        let cfg = self.cfg.clone();
        let n = Self::negotiate_flags(self.t.as_mut(), &cfg, session_flags::RECLAIM)?;
        self.start_session(&n)?;
        if n.boot_verifier == old_verifier || n.grace_ms == 0 {
            // A lease expiry (same server instance), or a restart without a grace period
            // (no state_dir, grace over): nothing can be reclaimed.
            tracing::info!(grace_ms = n.grace_ms, "session lost; the server offers no reclaim");
            let _ = self.call(&Request::SessionDestroy);
            self.held.clear();
            return Err(Error::Status(Status::BadSession));
        }
        tracing::info!(
            opens = self.held.opens.len(),
            locks = self.held.locks.len(),
            grace_ms = n.grace_ms,
            "server restarted; reclaiming"
        );
        self.reclaim_opens()?;
        self.reclaim_locks()?;
        let m = self.call(&Request::ReclaimComplete)?;
        self.decode(&m)?;
        Ok(())
    }

    fn reclaim_opens(&mut self) -> Result<()> {
        let ids: Vec<u64> = self.held.opens.keys().copied().collect();
        for id in ids {
            let rec = self.held.opens[&id].clone();
            let (fh, name) = match &rec.by_name {
                Some((dir, name)) => (*dir, name.as_slice()),
                None => (rec.fh, &b""[..]),
            };
            // The id is asked back through `mode` (a reclaim creates nothing).
            let Ok(mode) = u32::try_from(id) else {
                self.reclaim_refused(id, Status::ReclaimBad);
                continue;
            };
            let flags = rec.flags | open_flags::RECLAIM;
            let m = self.call(&Request::Open { fh, flags, mode, name, key: &rec.key })?;
            match self.decode(&m) {
                Ok((_, Reply::Open { open_id, .. })) if open_id == id => {
                    self.stats.opens_reclaimed += 1;
                }
                Ok((_, Reply::Open { open_id, .. })) => {
                    // Not the id asked for: useless to the `File` that holds the old one.
                    let _ = self.call(&Request::Close { open_id });
                    self.reclaim_refused(id, Status::ReclaimBad);
                }
                Ok(_) => return Err(crate::error::unexpected_reply(Opcode::Open)),
                Err(Error::Status(st)) => self.reclaim_refused(id, st),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn reclaim_refused(&mut self, open_id: u64, st: Status) {
        tracing::warn!(open_id, "open not reclaimed after a server restart: {st}");
        self.stats.reclaims_refused += 1;
        self.held.closed(open_id);
    }

    fn reclaim_locks(&mut self) -> Result<()> {
        let locks = std::mem::take(&mut self.held.locks);
        for l in locks {
            let (offset, len) = l.offset_len();
            let req =
                Request::Lock { fh: l.fh, offset, len, ltype: l.ltype, flags: lock_flags::RECLAIM };
            let m = self.call(&req)?;
            match self.decode(&m) {
                Ok(_) => {
                    self.stats.locks_reclaimed += 1;
                    self.held.locks.push(l);
                }
                Err(Error::Status(st)) => {
                    tracing::warn!(offset, len, "lock not reclaimed after a server restart: {st}");
                    self.stats.reclaims_refused += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Send what was in flight again, into the new session (same open ids: the reclaim
    /// kept them). Each may have executed before the server died, so only what is safe
    /// to execute once more is resent (see [`resendable`]); the rest fails.
    fn resend_parked(&mut self, parked: Vec<Parked>) {
        for p in parked {
            let max = p.buf.len().max(dafs_proto::limits::MSG_SIZE_BYTES_MIN as usize);
            let req = match dafs_proto::decode_request(&p.buf, max) {
                Ok((_, req)) if self.resendable(&req) => req,
                _ => {
                    self.fail_parked(p.slot.what, Error::Disconnected);
                    continue;
                }
            };
            let Some((slot, seq)) = self.slots.acquire() else {
                // The new session has fewer slots than were in use.
                self.fail_parked(p.slot.what, Error::Disconnected);
                continue;
            };
            if self.encode_on_slot(slot, seq, &req).is_err() {
                self.slots.abandon(slot);
                self.fail_parked(p.slot.what, Error::Disconnected);
                continue;
            }
            self.stats.retransmits += 1;
            let what = Slot { seq, resends: p.slot.resends + 1, chan: 0, ..p.slot };
            self.inflight_restore(slot, what);
            if let Err(e) = self.t.send(&self.reqbufs[slot as usize]) {
                // The caller's next progress notices the broken connection and recovers.
                tracing::debug!("resend after reclaim failed: {e}");
            }
        }
    }

    /// Safe to execute once more after the server may have executed it: everything
    /// but appends (each would add its data again) and chains (their elements' effects
    /// are not known one by one). Writes at an offset write the same bytes again;
    /// namespace ops fail the second time (EXIST, NOENT) rather than act twice.
    fn resendable(&self, req: &Request) -> bool {
        let append = |open_id: &u64| {
            self.held.opens.get(open_id).is_some_and(|r| r.flags & open_flags::APPEND != 0)
        };
        match req {
            Request::Chain { .. } => false,
            Request::WriteInline { open_id, .. }
            | Request::WriteDirect { open_id, .. }
            | Request::BatchIo { open_id, .. } => !append(open_id),
            _ => true,
        }
    }

    /// Put a parked request back in flight on `slot` (its completion group counts it
    /// still: it never left).
    fn inflight_restore(&mut self, slot: u32, s: Slot) {
        self.count_in(&s.what);
        let prev = self.inflight[slot as usize].replace(s);
        assert!(prev.is_none(), "slot {slot} was just acquired");
    }

    /// Complete a parked request with `e`.
    fn fail_parked(&mut self, what: Inflight, e: Error) {
        match what {
            Inflight::Io(io) => self.finish_io(io, Err(e), false),
            Inflight::Batch(b) => self.finish_batch(b, None),
            Inflight::Sync { req } => self.sync_failed = Some((req, e)),
        }
    }

    /// A synchronous request answered GRACE (the server's grace period after a
    /// restart): sent again after a pause, within the request deadline. Reclaims are
    /// never answered GRACE.
    pub(crate) fn call(&mut self, req: &Request) -> Result<Vec<u8>> {
        self.cluster_refuses()?;
        let give_up = Instant::now() + self.cfg.request_deadline;
        let mut backoff = GRACE_BACKOFF_START;
        loop {
            let m = self.call_once(req)?;
            let grace = matches!(
                dafs_proto::decode_reply(&m, self.msg_size_bytes_max),
                Ok((h, _)) if h.status == Status::Grace
            );
            let now = Instant::now();
            if !grace || now + backoff >= give_up {
                return Ok(m);
            }
            self.stats.grace_retries += 1;
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(GRACE_BACKOFF_MAX);
        }
    }
}
