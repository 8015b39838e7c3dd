//! From a complete message to an executed op: decode (`on_message`), then the session,
//! slot and authentication checks (`dispatch`) before `execute` runs the op.

use dafs_transport::ServerConn as _;
use std::sync::atomic::Ordering::Relaxed;

use dafs_proto::header::RawHeader;
use dafs_proto::session::{request_digest, Replay, SlotVerdict};
use dafs_proto::{DecodeError, Header, Opcode, Reply, Request, Status};
use tracing::debug;

use super::ops::Outcome;
use super::reply::SlotUse;
use super::{Conn, ConnFate, Scratch};
use crate::sessions::REVOKE_NONE;
use crate::{cred, Shared};

impl Conn {
    pub(super) fn on_message(&mut self, sh: &Shared, sc: &mut Scratch, buf: &[u8]) -> ConnFate {
        sh.stats.requests.fetch_add(1, Relaxed);
        let max = self.t.msg_size_bytes_max();
        match dafs_proto::decode_request(buf, max) {
            Ok((h, req)) => self.dispatch(sh, sc, h, req, buf),
            Err((Some(h), e)) => {
                sh.stats.malformed.fetch_add(1, Relaxed);
                debug!(peer = %self.t.peer(), op = h.opcode.name(), "malformed request: {e}");
                // A name or path over the limits is the caller's ENAMETOOLONG, as on a
                // local file system; everything else is a malformed message.
                let st = match e {
                    DecodeError::NameTooLong => Status::NameTooLong,
                    _ => Status::BadXdr,
                };
                self.answer_without_executing(sh, sc, h, st)
            }
            Err((None, e)) => {
                sh.stats.malformed.fetch_add(1, Relaxed);
                // The header itself is unusable for an answer only if magic/lengths are bad.
                let Ok(raw) = RawHeader::parse(buf) else {
                    peer_warn!(sh, self.t.peer(), "undecodable message ({e}); closing connection");
                    return ConnFate::Close;
                };
                if raw.total_len() != buf.len() as u64 || raw.flags != 0 {
                    peer_warn!(sh, self.t.peer(), "inconsistent message ({e}); closing connection");
                    return ConnFate::Close;
                }
                let status = match e {
                    DecodeError::BadVersion(_) => Status::BadVersion,
                    DecodeError::UnknownOpcode(_) => Status::OpIllegal,
                    DecodeError::TooBig(_) => Status::MsgTooBig,
                    _ => Status::BadXdr,
                };
                let h = Header {
                    opcode: Opcode::from_wire(raw.opcode_raw).unwrap_or(Opcode::Null),
                    is_reply: false,
                    status: Status::Ok,
                    session_id: raw.session_id,
                    slot_id: raw.slot_id,
                    sequence_id: raw.sequence_id,
                    highest_slot: raw.highest_slot,
                };
                debug!(peer = %self.t.peer(), "refusing request: {e}");
                self.answer_without_executing(sh, sc, h, status)
            }
        }
    }

    /// Answer a request that will not execute, keeping the slot table consistent: a
    /// request that would have executed consumes its sequence id.
    fn answer_without_executing(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: Header,
        status: Status,
    ) -> ConnFate {
        let mut slot = SlotUse::Untouched;
        if let Some(s) = self.session.as_mut() {
            if s.id == h.session_id
                && !matches!(h.opcode, Opcode::SessionCreate | Opcode::SessionBind)
            {
                match s.slots.begin(h.slot_id, h.sequence_id) {
                    SlotVerdict::Execute => {
                        slot = SlotUse::Complete;
                        s.exec_digest[h.slot_id as usize] = 0;
                    }
                    SlotVerdict::InProgress => return ConnFate::Keep,
                    v => {
                        sh.stats.slot_refusals.fetch_add(1, Relaxed);
                        let st = verdict_status(v);
                        return self.respond(sh, &mut sc.out, &h, &Reply::Error(st), slot);
                    }
                }
            }
        }
        self.respond(sh, &mut sc.out, &h, &Reply::Error(status), slot)
    }

    fn dispatch(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: Header,
        req: Request,
        raw: &[u8],
    ) -> ConnFate {
        let untouched = SlotUse::Untouched;
        if matches!(req, Request::SessionCreate { .. } | Request::SessionBind { .. }) {
            // These may replace the connection's session: the old one's parallel and
            // forwarded requests are answered (and their slots completed) first.
            self.drain(sh, &mut sc.out);
            self.wait_forwarded(sh, &mut sc.out);
        }
        match req {
            Request::Null if h.session_id == 0 => {
                return self.respond(sh, &mut sc.out, &h, &Reply::Empty, untouched);
            }
            Request::SessionCreate { msg_size_bytes_max, slots, auth, flags, client_id } => {
                let r = self.session_create(sh, msg_size_bytes_max, slots, auth, flags, client_id);
                return self.respond_attached(sh, &mut sc.out, h, r);
            }
            Request::SessionBind { client_nonce, proof, client_id }
                if h.slot_id == dafs_proto::limits::BIND_TRUNK =>
            {
                return self.session_trunk(sh, &mut sc.out, &h, &client_nonce, &proof, client_id);
            }
            Request::SessionBind { client_nonce, proof, client_id } => {
                let r = self.session_bind(sh, &h, &client_nonce, &proof, client_id);
                return self.respond_attached(sh, &mut sc.out, h, r);
            }
            _ => {}
        }
        let Some(s) = self.session.as_mut() else {
            return self.respond(sh, &mut sc.out, &h, &Reply::Error(Status::BadSession), untouched);
        };
        if s.id != h.session_id {
            return self.respond(sh, &mut sc.out, &h, &Reply::Error(Status::BadSession), untouched);
        }
        // Revoked (fenced, killed, or bound elsewhere) while this request was on its way:
        // it must not execute here; the worker's scan would close us anyway.
        if s.info.revoke.load(Relaxed) != REVOKE_NONE {
            return ConnFate::Close;
        }
        // Server-directed flow control: the administrator (or policy) may have moved
        // this session's target; every reply carries it and the client follows.
        let target = s.info.target_highest.load(Relaxed);
        if target != s.slots.target_highest() {
            s.slots.set_target_highest(target);
        }
        s.info.requests.fetch_add(1, Relaxed);
        let digest = request_digest(raw);
        match s.slots.begin(h.slot_id, h.sequence_id) {
            SlotVerdict::Execute => s.exec_digest[h.slot_id as usize] = digest,
            SlotVerdict::InProgress => {
                let orig = self.slot_chan.get(h.slot_id as usize).copied().unwrap_or(0);
                if self.t.len() > 1 && orig != self.t.channel() {
                    // Trunked, and the retransmission came on another connection: the
                    // client gave the original's connection up (it resends only then).
                    // Drop that connection here too, so the original's slot is given
                    // back if it was waiting for data from there (then this copy
                    // executes), and its reply, if it is running, comes here.
                    return self.retransmitted_elsewhere(sh, sc, h, req, raw, orig);
                }
                // A duplicate that overtook the original's reply: that reply answers it.
                sh.stats.duplicates_dropped.fetch_add(1, Relaxed);
                return ConnFate::Keep;
            }
            // A copy of a READ_DIRECT already answered on this connection: that reply is
            // on its way, and executing it again would place data into client memory
            // the client may have reused or withdrawn (see `Session::answered_here`).
            // Of a trunked session, only a copy on the member that carried the answer: a
            // copy on another one is the client resending after it gave that member up
            // (maybe before this worker saw the member go), and must be answered.
            SlotVerdict::Replay
                if h.opcode == Opcode::ReadDirect
                    && s.answered_here[h.slot_id as usize]
                    && self.slot_chan.get(h.slot_id as usize) == Some(&self.t.channel())
                    && s.exec_digest[h.slot_id as usize] == digest =>
            {
                sh.stats.duplicates_dropped.fetch_add(1, Relaxed);
                return ConnFate::Keep;
            }
            SlotVerdict::Replay => match s.cache.replay(h.slot_id, digest) {
                Replay::Cached(bytes) => {
                    sh.stats.replays.fetch_add(1, Relaxed);
                    debug!(
                        session = s.id,
                        slot = h.slot_id,
                        seq = h.sequence_id,
                        op = h.opcode.name(),
                        "answering a retransmission from the reply cache"
                    );
                    // Already encoded: the cached bytes go out as they are.
                    return match self.t.send(bytes) {
                        Ok(()) => ConnFate::Keep,
                        Err(_) => ConnFate::Close,
                    };
                }
                Replay::Reexecute => {
                    sh.stats.replays_reexecuted.fetch_add(1, Relaxed);
                    s.slots.begin_reexecute(h.slot_id);
                    s.exec_digest[h.slot_id as usize] = digest;
                }
                Replay::Uncached => {
                    sh.stats.replays_uncached.fetch_add(1, Relaxed);
                    let reply = Reply::Error(Status::RetryUncachedRep);
                    return self.respond(sh, &mut sc.out, &h, &reply, untouched);
                }
                Replay::FalseRetry => {
                    sh.stats.false_retries.fetch_add(1, Relaxed);
                    let peer = self.t.peer();
                    peer_warn!(
                        sh,
                        peer,
                        session = s.id,
                        slot = h.slot_id,
                        seq = h.sequence_id,
                        "a different request reused a slot and sequence id"
                    );
                    let reply = Reply::Error(Status::SeqFalseRetry);
                    return self.respond(sh, &mut sc.out, &h, &reply, untouched);
                }
            },
            v => {
                sh.stats.slot_refusals.fetch_add(1, Relaxed);
                let reply = Reply::Error(verdict_status(v));
                return self.respond(sh, &mut sc.out, &h, &reply, untouched);
            }
        }
        // From here on the request holds its slot: every answer completes it.
        self.note_channel(h.slot_id);
        let complete = SlotUse::Complete;
        let s = self.session.as_mut().expect("checked above");
        s.info.slots_busy.store(s.slots.busy_count(), Relaxed);
        if s.auth_required && !s.authenticated && !h.opcode.allowed_before_auth() {
            let reply = Reply::Error(Status::AuthRequired);
            return self.respond(sh, &mut sc.out, &h, &reply, complete);
        }
        // Run with the session's credential (no-op when it is already this thread's).
        if let Err(status) = cred::apply(sh, s.cred.as_ref()) {
            return self.respond(sh, &mut sc.out, &h, &Reply::Error(status), complete);
        }
        // Parallel requests of this session it must follow finish first; a plain data
        // request may itself go to the I/O pool (`parallel`). Finished ones are answered
        // first: a worker reading request after request would otherwise see its session's
        // jobs in flight long after they finished, and run every later request itself.
        self.reap(sh, &mut sc.out);
        let plan = self.plan(&req);
        self.order(sh, &mut sc.out, &plan);
        if self.try_parallel(sh, &h, &req, &plan) {
            return ConnFate::Keep;
        }
        let destroy = matches!(req, Request::SessionDestroy);
        let fate = match self.execute(sh, &mut sc.bufs, &h, req) {
            Ok(Outcome::Reply(reply)) if destroy => {
                // End the session (locks, opens, leases) before answering, so a client
                // that has its answer knows another session can take its locks: the
                // way close(2) releases a process's locks before it returns.
                self.destroying = true;
                self.close(sh);
                let _ = self.respond(sh, &mut sc.out, &h, &reply, complete);
                return ConnFate::Keep;
            }
            Ok(Outcome::Reply(reply)) => {
                // The op has executed: a failed send shows at the connection's next
                // read, and the slot is done.
                let _ = self.respond(sh, &mut sc.out, &h, &reply, complete);
                ConnFate::Keep
            }
            Ok(Outcome::Pending(tag, p)) => {
                self.pending.insert(tag, p);
                return ConnFate::Keep;
            }
            Ok(Outcome::Deferred) => return ConnFate::Keep,
            Err(status) => {
                let reply = crate::cluster::error_reply(sh, status);
                self.respond(sh, &mut sc.out, &h, &reply, complete)
            }
        };
        if destroy {
            // SESSION_DESTROY refused (an error reply): the session still ends.
            self.destroying = true;
            self.close(sh);
        }
        fate
    }
}

impl Conn {
    /// A retransmission of the request in flight on its slot arrived on channel
    /// `self.t.channel()`, the original on `orig`, another member of the trunk.
    fn retransmitted_elsewhere(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: Header,
        req: Request,
        raw: &[u8],
        orig: u32,
    ) -> ConnFate {
        let here = self.t.channel();
        if self.t.has_channel(orig) {
            self.t.drop_channel(orig);
            self.t.set_channel(here);
            self.reap_lost(sh);
        }
        if self.job_on_slot(h.slot_id) {
            // Executing in the I/O pool: its reply goes where the client now listens.
            self.slot_chan[h.slot_id as usize] = here;
            sh.stats.duplicates_dropped.fetch_add(1, Relaxed);
            return ConnFate::Keep;
        }
        // It was waiting for data pulled over the dropped connection: its slot was given
        // back, so this copy executes (once). Should it still be in progress, the
        // channel noted here makes the next look drop it as a plain duplicate.
        self.note_channel(h.slot_id);
        self.dispatch(sh, sc, h, req, raw)
    }
}

fn verdict_status(v: SlotVerdict) -> Status {
    match v {
        SlotVerdict::Execute => Status::Ok,
        SlotVerdict::Replay | SlotVerdict::Misordered => Status::SeqMisordered,
        SlotVerdict::BadSlot => Status::BadSlot,
        SlotVerdict::Busy | SlotVerdict::InProgress => Status::SlotBusy,
    }
}
