//! One client connection: its session (slots, authentication, open files) and the
//! execution of every op. Runs on exactly one worker thread; nothing here blocks
//! except storage system calls.
//!
//! A request's way through, each step in its own module:
//! - [`Conn::drive`] (here) reads the transport's events: a message goes to
//!   `on_message`, pulled data to `on_pulled` (`pending`);
//! - `on_message` decodes, `dispatch` runs the session, slot and authentication checks
//!   (`dispatch`);
//! - `execute` hands the op to its handler (`ops`, one per op or family), which runs it
//!   and *returns* its reply;
//! - `respond` (`reply`) is the one place a reply is encoded, sent and its slot
//!   completed — for ordinary requests, refusals, WRITE_DIRECTs whose data arrived
//!   later and batches alike.
//!
//! The slot and reply-cache rules themselves live in `dafs_proto::session`.

mod dispatch;
mod forwarding;
mod ops;
mod parallel;
mod pending;
mod reply;
mod session;
mod trunk;

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

use dafs_transport::{ServerConn, ServerEvent, TransportError};
use tracing::{debug, info};

use crate::sessions::{REVOKE_DESTROY, REVOKE_NONE};
use crate::Shared;
use pending::{PendingBatch, PendingWrite};
pub use reply::Scratch;
pub(crate) use session::{release_session, Session};

/// Largest message a connection takes before its session is authenticated (and before
/// it has one): SESSION_CREATE, SESSION_BIND and SESSION_AUTH with a 255-byte client id
/// fit with room to spare. An unauthenticated peer can make the server buffer no more.
pub const HANDSHAKE_MSG_BYTES_MAX: u32 = 1024;

/// What the connection asks of its worker after handling input.
#[derive(Debug, PartialEq, Eq)]
pub enum ConnFate {
    Keep,
    Close,
}

pub struct Conn {
    /// The session's connections (one unless trunked).
    pub t: trunk::Trunk,
    /// Per slot: the channel (trunk member) its request came on, where a reply produced
    /// later goes and whose loss gives back the slot of a request waiting for data.
    slot_chan: Vec<u32>,
    /// A trunking SESSION_BIND verified: this connection goes to the session's worker.
    pub(crate) handover: Option<crate::Handover>,
    /// This worker's link (a session bound here names it as its owner).
    link: std::sync::Arc<crate::WorkerLink>,
    session: Option<Session>,
    /// WRITE_DIRECTs waiting for their data, by pull tag.
    pending: HashMap<u64, PendingWrite>,
    /// Pull tags are never reused on a connection, so a late completion for a session
    /// that has ended cannot be mistaken for a new request's.
    next_tag: u64,
    batches: HashMap<u64, PendingBatch>,
    pub read_paused: bool,
    /// SESSION_DESTROY executed: release the session instead of parking it.
    destroying: bool,
    /// The peer's source address (None for shared memory), as admitted at accept.
    pub peer_ip: Option<std::net::IpAddr>,
    /// When the connection was accepted: it must authenticate within
    /// `handshake_timeout_ms` of this.
    pub accepted_at: std::time::Instant,
    /// The connection's session has authenticated (it left the unauthenticated share).
    pub authenticated: bool,
    /// This connection's `backlog_bytes` as last counted in the global memory budget.
    memory_counted_bytes: usize,
    /// A READ_DIRECT queued its file range with `put_file`: its reply goes out with
    /// `send_file_reply` (see `respond`).
    file_reply: bool,
    /// A CHAIN's elements are executing: their replies are packed into the chain's, so a
    /// READ_DIRECT among them places with `put` (its count is final at once).
    in_chain: bool,
    /// Requests whose storage I/O runs in the I/O pool (`parallel`), at most
    /// `IoPool::session_inflight_max`.
    inflight: Vec<parallel::InFlight>,
    /// Where their results come back.
    done: std::sync::Arc<parallel::DoneBox>,
    /// Data buffers of finished parallel requests, reused (at most
    /// `IoPool::session_inflight_max`).
    spare: Vec<Vec<u8>>,
    /// Forwarded requests in flight (`forwarding`; at most `FORWARDS_PER_CONN_MAX`).
    forwards: Vec<forwarding::FwdInFlight>,
    /// Where they run, in arrival order.
    strand: std::sync::Arc<crate::forward::pool::Strand>,
    /// Closed by its peer or the server, waiting for its forwarded requests' results
    /// before its session is parked (see `forwarding`): reads nothing more.
    pub lingering: bool,
}

impl Conn {
    pub(crate) fn new(mut t: Box<dyn ServerConn>, link: std::sync::Arc<crate::WorkerLink>) -> Self {
        t.set_msg_size_bytes_max(HANDSHAKE_MSG_BYTES_MAX as usize);
        Conn {
            peer_ip: crate::admission::peer_ip(&t.peer()),
            slot_chan: Vec::new(),
            handover: None,
            link: link.clone(),
            accepted_at: std::time::Instant::now(),
            authenticated: false,
            memory_counted_bytes: 0,
            t: trunk::Trunk::new(t),
            session: None,
            pending: HashMap::new(),
            next_tag: 1,
            batches: HashMap::new(),
            read_paused: false,
            destroying: false,
            file_reply: false,
            in_chain: false,
            inflight: Vec::new(),
            done: parallel::DoneBox::new(link),
            spare: Vec::new(),
            forwards: Vec::new(),
            strand: Default::default(),
            lingering: false,
        }
    }

    /// Read and handle events until the socket is drained or backpressure pauses us.
    pub fn drive(&mut self, sh: &Shared, sc: &mut Scratch) -> ConnFate {
        loop {
            if let Some(over_budget) = self.must_pause(sh) {
                if !self.read_paused {
                    sh.stats.backpressure_pauses.fetch_add(1, Relaxed);
                    if over_budget {
                        sh.stats.memory_pauses.fetch_add(1, Relaxed);
                    }
                }
                self.read_paused = true;
                // Resuming takes a writable event, which comes only if output is left
                // once the socket would block: if it all goes now, look again.
                if self.flush(sh) == ConnFate::Close {
                    return ConnFate::Close;
                }
                if self.must_pause(sh).is_some() {
                    return ConnFate::Keep;
                }
                continue;
            }
            self.read_paused = false;
            let ev = self.t.poll_event();
            self.reap_lost(sh);
            match ev {
                Ok(Some(ServerEvent::Message(buf))) => {
                    let fate = self.on_message(sh, sc, &buf);
                    self.t.recycle(buf);
                    if fate == ConnFate::Close {
                        return ConnFate::Close;
                    }
                }
                Ok(Some(ServerEvent::Pulled { tag, data })) => {
                    if self.on_pulled(sh, sc, tag, data) == ConnFate::Close {
                        return ConnFate::Close;
                    }
                }
                Ok(None) => break,
                Err(TransportError::Closed) => return ConnFate::Close,
                Err(e) => {
                    peer_warn!(sh, self.t.peer(), "closing connection: {e}");
                    sh.stats.malformed.fetch_add(1, Relaxed);
                    return ConnFate::Close;
                }
            }
        }
        self.flush(sh)
    }

    /// Must reading stop (backpressure)? `Some(false)`: this connection's backlog is over
    /// `backlog_bytes_max`; `Some(true)`: all connections together are over
    /// `memory_bytes_max` and this one has output queued. Only output counts there: a
    /// connection whose backlog is pulls in flight must be read for them to complete.
    fn must_pause(&mut self, sh: &Shared) -> Option<bool> {
        let backlog = self.t.backlog_bytes();
        sh.memory.update(&mut self.memory_counted_bytes, backlog);
        if backlog > sh.cfg.backlog_bytes_max {
            return Some(false);
        }
        let output_only = self.pending.is_empty() && self.batches.is_empty();
        let over_budget = sh.memory.used() > sh.cfg.memory_bytes_max;
        (backlog > 0 && output_only && over_budget).then_some(true)
    }

    /// Write as much queued output as the socket takes now; `Close` if the connection
    /// broke. (A connection paused for backpressure resumes reading in `drive`.)
    pub fn flush(&mut self, sh: &Shared) -> ConnFate {
        let r = self.t.flush();
        self.reap_lost(sh);
        sh.memory.update(&mut self.memory_counted_bytes, self.t.backlog_bytes());
        match r {
            Ok(_) => ConnFate::Keep,
            Err(TransportError::Closed) => ConnFate::Close,
            Err(e) => {
                debug!(peer = %self.t.peer(), "write failed: {e}");
                ConnFate::Close
            }
        }
    }

    /// True if another thread asked this connection to give up its session.
    pub fn revoked(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.info.revoke.load(Relaxed) != REVOKE_NONE)
    }

    /// The connection is closing. Requests that never executed (WRITE_DIRECTs and
    /// batches still waiting for their data) give their slots back, so that the client's
    /// retransmission after reconnecting executes them once. The session itself is
    /// parked for its lease (a SESSION_BIND on a new connection takes it back), or
    /// released if it was destroyed, fenced, or the server is stopping.
    pub fn close(&mut self, sh: &Shared) {
        // Requests executing in the I/O pool finish first and their replies go into the
        // reply cache: they have executed, so a retransmission must find them there.
        // So do forwarded ones (a closing connection lingers for them: `linger`; here
        // only at shutdown or SESSION_DESTROY, bounded by the forwarding deadline).
        self.drain(sh, &mut Vec::new());
        self.wait_forwarded(sh, &mut Vec::new());
        if let Some(s) = self.session.as_mut() {
            for p in self.pending.values() {
                if p.batch.is_none() {
                    s.slots.abort(p.hdr.slot_id);
                }
            }
            for b in self.batches.values() {
                s.slots.abort(b.hdr.slot_id);
            }
            s.info.slots_busy.store(s.slots.busy_count(), Relaxed);
        }
        self.pending.clear();
        self.batches.clear();
        sh.memory.update(&mut self.memory_counted_bytes, 0);
        if let Some(s) = self.session.take() {
            if s.auth_required && !s.authenticated {
                // Never counted nor entered in the table (see `session_auth`): an
                // unauthenticated session ends with its connection, parking nothing.
                debug_assert!(s.opens.is_empty(), "no op runs before authentication");
                return;
            }
            let destroy = self.destroying
                || s.info.revoke.load(Relaxed) == REVOKE_DESTROY
                || sh.shutdown.load(Relaxed)
                || sh.cfg.lease_secs == 0;
            if destroy {
                sh.sessions.remove(s.id);
                release_session(sh, s, "session ended");
            } else {
                info!(session = s.id, client = %s.info.client_id, lease_secs = sh.cfg.lease_secs, "connection lost; session kept for its lease");
                let info = s.info.clone();
                sh.sessions.park(
                    Box::new(s),
                    &info,
                    std::time::Duration::from_secs(sh.cfg.lease_secs),
                );
            }
        }
    }

    /// Trunk members that broke (or were given up) and were dropped: their share of the
    /// connection limits comes back, and requests that were waiting there for data
    /// pulled from the client give their slots back (the client retransmits them on
    /// another connection, where they execute once).
    fn reap_lost(&mut self, sh: &Shared) {
        for lost in self.t.take_lost() {
            sh.admission.closed(lost.peer_ip, true);
            sh.connections_live.release();
            sh.stats.connections_closed.fetch_add(1, Relaxed);
            sh.stats.trunk_connections_lost.fetch_add(1, Relaxed);
            self.forget_answers_on(lost.id);
            self.abort_waiting_on(lost.id);
        }
    }

    /// Replies that went out on channel `chan` may be lost with it: a copy of their
    /// requests arriving on another member is a retransmission, not a duplicate of a
    /// request answered here (see `Session::answered_here`).
    fn forget_answers_on(&mut self, chan: u32) {
        let Some(s) = self.session.as_mut() else { return };
        for (slot, answered) in s.answered_here.iter_mut().enumerate() {
            if self.slot_chan.get(slot) == Some(&chan) {
                *answered = false;
            }
        }
    }

    /// Give back the slots of requests on channel `chan` still waiting for pulled data.
    fn abort_waiting_on(&mut self, chan: u32) {
        let on = |slot_chan: &[u32], slot: u32| slot_chan.get(slot as usize) == Some(&chan);
        let Some(s) = self.session.as_mut() else { return };
        let batches: Vec<u64> = self
            .batches
            .iter()
            .filter(|(_, b)| on(&self.slot_chan, b.hdr.slot_id))
            .map(|(t, _)| *t)
            .collect();
        for t in &batches {
            let b = self.batches.remove(t).expect("listed above");
            s.slots.abort(b.hdr.slot_id);
        }
        let slot_chan = &self.slot_chan;
        self.pending.retain(|_, p| match p.batch {
            Some((btag, _)) => !batches.contains(&btag),
            None if on(slot_chan, p.hdr.slot_id) => {
                s.slots.abort(p.hdr.slot_id);
                false
            }
            None => true,
        });
        s.info.slots_busy.store(s.slots.busy_count(), Relaxed);
    }

    /// Remember that the request on `slot` came on the current channel.
    fn note_channel(&mut self, slot: u32) {
        let i = slot as usize;
        if self.slot_chan.len() <= i {
            self.slot_chan.resize(i + 1, 0);
        }
        self.slot_chan[i] = self.t.channel();
    }

    /// Send from now on on the channel the request on `slot` came on (a reply produced
    /// after other requests were read: I/O pool jobs, forwarded requests).
    fn select_slot_channel(&mut self, slot: u32) {
        let chan = self.slot_chan.get(slot as usize).copied().unwrap_or(0);
        self.t.set_channel(chan);
    }

    /// A trunked connection handed over by the worker that verified its bind: join it
    /// to this connection's session if that is still `session_id` and has room, and
    /// send it the bind's reply. Gives the connection back if not.
    pub(crate) fn attach_trunk(&mut self, sh: &Shared, h: &mut crate::Handover) -> Option<u32> {
        let s = self.session.as_ref()?;
        if s.id != h.session_id
            || self.lingering
            || s.info.revoke.load(Relaxed) != REVOKE_NONE
            || self.t.len() >= dafs_proto::limits::SESSION_CONNECTIONS_MAX as usize
            || self.t.is_shared_memory()
        {
            return None;
        }
        // Only now does the bind take effect (its nonce rotation included).
        if !sh.sessions.rotate_for_trunk(&h.info, &h.proved) {
            return None;
        }
        let mut t = h.t.take().expect("a handover carries its connection");
        if t.send(&h.reply).is_err() {
            h.t = Some(t);
            return None;
        }
        Some(self.t.attach(t, h.peer_ip))
    }

    /// The id of the session this connection holds, if any.
    pub(crate) fn session_id(&self) -> Option<u64> {
        self.session.as_ref().map(|s| s.id)
    }

    /// The transport of a connection without a session that is handed over to another
    /// worker (trunking bind).
    pub(crate) fn into_transport(self) -> Box<dyn ServerConn> {
        debug_assert!(self.session.is_none() && self.inflight.is_empty());
        self.t.into_single()
    }

    /// The connection is to close: true if it must linger first, until its forwarded
    /// requests are answered (the worker calls `close` when `has_inflight` turns false).
    pub fn linger(&mut self) -> bool {
        self.lingering = !self.forwards.is_empty();
        self.lingering
    }

    /// The session on this connection is now authenticated (or needs no proof).
    fn admitted(&mut self, sh: &Shared) {
        if !self.authenticated {
            self.authenticated = true;
            sh.admission.authenticated();
        }
    }

    /// A fresh pull tag (WRITE_DIRECT pulls, batches and their pieces).
    fn take_tag(&mut self) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        tag
    }

    /// The session of a request that passed `dispatch`'s checks.
    fn session(&self) -> &Session {
        self.session.as_ref().expect("dispatch checked the session")
    }

    fn session_mut(&mut self) -> &mut Session {
        self.session.as_mut().expect("dispatch checked the session")
    }
}
