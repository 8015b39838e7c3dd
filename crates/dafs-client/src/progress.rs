//! The progress engine: receive one reply and route it by slot (to the blocking caller
//! waiting for it, or as a completion), acquire slots, send requests and record them in
//! flight, and the synchronous request path every blocking call uses.

use std::time::Duration;

use dafs_proto::{Header, Opcode, Reply, Request};
use dafs_transport::Wait;

use crate::error::unexpected_reply;
use crate::inflight::Inflight;
use crate::{Client, Error, ProtocolViolation, Result};

impl Client {
    /// Mark the client dead and complete every request in flight with the error calls
    /// now get (their completion groups receive it; region pins are released).
    pub(crate) fn fail_all(&mut self, why: &str) {
        if !self.dead {
            tracing::debug!("client disconnected: {why}");
            self.dead = true;
        }
        for i in 0..self.inflight.len() {
            if let Some(slot) = self.inflight_take(i) {
                match slot.what {
                    Inflight::Io(io) => {
                        let e = self.dead_error();
                        self.finish_io(io, Err(e), false)
                    }
                    Inflight::Batch(b) => self.finish_batch(b, None),
                    Inflight::Sync { .. } => {}
                }
            }
        }
        assert!(self.small_inflight.is_zero(), "every request in flight was counted once");
        assert_eq!(self.io_bytes_inflight, 0, "every request's bytes were counted once");
    }

    /// Receive and route one reply. Returns false if nothing arrived within `wait`.
    pub(crate) fn progress(&mut self, wait: Wait) -> Result<bool> {
        if self.dead {
            return Err(self.dead_error());
        }
        let spin = if self.spin_worth_it() { self.base_spin } else { Duration::ZERO };
        if spin != self.spin_now {
            for ch in 0..self.connections() {
                self.chan_mut(ch).set_spin(spin);
            }
            self.spin_now = spin;
        }
        let (ch, msg) = match self.recv_any(self.wait_within_deadline(wait)) {
            Ok(Some(m)) => m,
            Ok(None) => {
                if let Some(why) = self.overdue() {
                    return Err(self.time_out(&why));
                }
                return Ok(false);
            }
            Err((ch, e)) if e.is_fatal() => {
                // Recovered: requests were resent; their replies come on later calls.
                self.channel_failed(ch, e)?;
                return Ok(true);
            }
            Err((_, e)) => {
                self.fail_all(&e.to_string());
                return Err(Error::Transport(e));
            }
        };
        let r = self.route(&msg);
        self.chan_mut(ch).recycle(msg);
        if let Err(e) = &r {
            self.fail_all(&e.to_string());
        }
        r.map(|_| true)
    }

    fn route(&mut self, msg: &[u8]) -> Result<()> {
        let (h, reply) = dafs_proto::decode_reply(msg, self.msg_size_bytes_max)?;
        let i = h.slot_id as usize;
        if h.session_id != self.session_id || i >= self.inflight.len() {
            return Err(ProtocolViolation::Misaddressed {
                session_id: h.session_id,
                slot_id: h.slot_id,
            }
            .into());
        }
        let matches = self.inflight[i].as_ref().is_some_and(|slot| slot.seq == h.sequence_id);
        if !matches {
            // An answer to a duplicate of a request already answered (a retransmission
            // that crossed the original reply): nothing waits for it. Dropping it is
            // safe; it never touches application memory.
            self.stats.stale_replies += 1;
            return Ok(());
        }
        let slot = self.inflight_take(i).expect("checked above");
        self.slots.release(h.slot_id, h.highest_slot);
        match slot.what {
            Inflight::Sync { req } => {
                self.sync_done = Some((req, msg.to_vec()));
            }
            Inflight::Batch(b) => {
                let results = match reply {
                    Reply::Batch { results, .. } => {
                        let r = dafs_proto::types::BatchResult::parse_all(results)?;
                        if let Some(x) = r.iter().find(|x| x.index as usize >= b.ios.len()) {
                            return Err(ProtocolViolation::BatchResultIndex {
                                index: x.index,
                                count: b.ios.len(),
                            }
                            .into());
                        }
                        Ok(r)
                    }
                    Reply::Error(s) => Err(s),
                    _ => return Err(unexpected_reply(Opcode::BatchIo)),
                };
                self.finish_batch(b, Some(results));
            }
            Inflight::Io(mut io) => {
                let (res, eof) = match reply {
                    Reply::Error(s) => (Err(Error::Status(s)), false),
                    Reply::ReadInline { eof, data } if io.read && !io.direct => {
                        if data.len() > io.len {
                            return Err(io.count_exceeds(data.len()));
                        }
                        let n = data.len();
                        self.copy_into_target(&mut io, data);
                        self.stats.inline_bytes += n as u64;
                        (Ok(n), eof)
                    }
                    Reply::ReadDirect { count, eof } if io.read && io.direct => {
                        if count as usize > io.len {
                            return Err(io.count_exceeds(count as usize));
                        }
                        self.stats.direct_bytes += count as u64;
                        (Ok(count as usize), eof)
                    }
                    Reply::Write { count, .. } if !io.read => {
                        if count as usize > io.len {
                            return Err(io.count_exceeds(count as usize));
                        }
                        if io.direct {
                            self.stats.direct_bytes += count as u64
                        } else {
                            self.stats.inline_bytes += count as u64
                        }
                        (Ok(count as usize), false)
                    }
                    _ => return Err(unexpected_reply(io.opcode())),
                };
                self.finish_io(io, res, eof);
            }
        }
        Ok(())
    }

    /// The error every call returns once the client is dead.
    fn dead_error(&self) -> Error {
        match self.dead_status {
            Some(st) => Error::Status(st),
            None if self.timed_out => Error::TimedOut,
            None => Error::Disconnected,
        }
    }

    /// Get a slot, making progress (never sleeping longer than needed) if `block`.
    pub(crate) fn acquire_slot(&mut self, block: bool) -> Result<(u32, u32)> {
        loop {
            if self.dead {
                return Err(self.dead_error());
            }
            if let Some(s) = self.slots.acquire() {
                return Ok(s);
            }
            self.stats.slot_waits += 1;
            if !block {
                // one non-blocking look for replies before giving up
                if self.progress(Wait::NoWait)? {
                    continue;
                }
                return Err(Error::WouldBlock);
            }
            self.progress(Wait::Forever)?;
        }
    }

    pub(crate) fn send_on_slot(
        &mut self,
        slot: u32,
        seq: u32,
        req: &Request,
        what: Inflight,
    ) -> Result<()> {
        if let Err(e) = self.encode_on_slot(slot, seq, req) {
            self.slots.abandon(slot);
            self.inflight_undo(what);
            return Err(e.into());
        }
        self.send_slot_buf(slot, seq, what)
    }

    /// Encode `req` with its header for `slot`/`seq` into the slot's request buffer
    /// (where a resend finds it).
    pub(crate) fn encode_on_slot(
        &mut self,
        slot: u32,
        seq: u32,
        req: &Request,
    ) -> std::result::Result<(), dafs_proto::EncodeError> {
        let h =
            Header::request(req.opcode(), self.session_id, slot, seq, self.slots.highest_in_use());
        let mut buf = std::mem::take(&mut self.reqbufs[slot as usize]);
        buf.clear();
        let enc = dafs_proto::encode_request(&h, req, &mut buf, self.msg_size_bytes_max);
        self.reqbufs[slot as usize] = buf;
        enc.map(|_| ())
    }

    /// Send the request encoded in `reqbufs[slot]` and record it in flight. A broken
    /// connection here is recovered like one noticed while receiving: the request is in
    /// flight and is resent after the session is re-bound.
    pub(crate) fn send_slot_buf(&mut self, slot: u32, seq: u32, what: Inflight) -> Result<()> {
        let ch = self.pick_channel(&what);
        let buf = std::mem::take(&mut self.reqbufs[slot as usize]);
        let sent = self.chan_mut(ch).send(&buf);
        self.reqbufs[slot as usize] = buf;
        self.stats.requests += 1;
        self.inflight_record(slot, seq, what);
        self.inflight[slot as usize].as_mut().expect("recorded just now").chan = ch;
        if let Err(e) = sent {
            if !e.is_fatal() {
                // Refused before anything was sent (e.g. too big): nothing in flight.
                let what = self.inflight_unrecord(slot);
                self.slots.abandon(slot);
                self.inflight_undo(what);
                return Err(Error::Transport(e));
            }
            self.channel_failed(ch, e)?;
        }
        Ok(())
    }

    /// Synchronous request: send, then make progress until its reply arrives (GRACE
    /// answers are retried by `call`, in `reclaim`).
    pub(crate) fn call_once(&mut self, req: &Request) -> Result<Vec<u8>> {
        self.settle_channels()?;
        let (slot, seq) = self.acquire_slot(true)?;
        let id = self.next_req;
        self.next_req += 1;
        self.send_on_slot(slot, seq, req, Inflight::Sync { req: id })?;
        loop {
            if let Some((rid, _)) = &self.sync_done {
                if *rid == id {
                    return Ok(self.sync_done.take().unwrap().1);
                }
            }
            if let Some((rid, _)) = &self.sync_failed {
                if *rid == id {
                    return Err(self.sync_failed.take().unwrap().1);
                }
            }
            self.progress(Wait::Forever)?;
        }
    }

    pub(crate) fn decode<'a>(&self, m: &'a [u8]) -> Result<(Header, Reply<'a>)> {
        let (h, r) = dafs_proto::decode_reply(m, self.msg_size_bytes_max)?;
        match r {
            Reply::Error(s) => return Err(Error::Status(s)),
            Reply::WrongNode { .. } => return Err(Error::Status(dafs_proto::Status::WrongNode)),
            _ => {}
        }
        Ok((h, r))
    }
}
