//! One client connection: its session (slots, authentication, open files) and the
//! execution of every op. Runs on exactly one worker thread; nothing here blocks
//! except storage system calls.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use dafs_proto::auth;
use dafs_proto::header::RawHeader;
use dafs_proto::ops::NONCE_LEN;
use dafs_proto::session::{request_digest, Replay, ReplyCache, ServerSlots, SlotVerdict};
use dafs_proto::types::{
    access_mask, batch_flags, cache_hint, open_flags, setattr_mask, BatchResult, CHAIN_LEN_MAX,
    CURRENT_FH, CURRENT_OPEN_ID,
};
use dafs_proto::{
    limits, AuthMethod, DecodeError, DirEntry, FileType, Header, Opcode, RemoteRegion, Reply,
    Request, Status, HEADER_LEN,
};
use dafs_transport::{PutError, ServerConn, ServerEvent, TransportError};
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use tracing::{debug, info, warn};

use crate::fsops::{self, st, FsResult};
use crate::sessions::{SessionInfo, Take, REVOKE_DESTROY, REVOKE_NONE};
use crate::Shared;
use crate::{cred, locks, nattr, openstate};

/// Reused per-worker buffers: no allocation per request in steady state.
#[derive(Default)]
pub struct Scratch {
    out: Vec<u8>,
    data: Vec<u8>,
    entries: Vec<u8>,
}

struct OpenFile {
    /// Shared with WRITE_DIRECTs waiting for their data, so that a CLOSE executed
    /// meanwhile does not fail a write the client issued before it.
    fd: Arc<OwnedFd>,
    read: bool,
    write: bool,
    /// (dev, ino): the key of the server-wide open and lock tables.
    file: (u64, u64),
    /// Append mode: every write goes to the end of file, serialised by this lock.
    append: Option<Arc<Mutex<()>>>,
    /// Create-unlinked: where PUBLISH gives the file its name (directory, name, export).
    unlinked: Option<(Arc<OwnedFd>, Vec<u8>, u32)>,
}

pub(crate) struct Session {
    id: u64,
    /// What other threads may see of this session (admin listings, revocation).
    info: Arc<SessionInfo>,
    /// Exactly-once: the reply of every slot's last non-idempotent request.
    cache: ReplyCache,
    /// Digest of the request executing on each slot (stored with its reply).
    exec_digest: Vec<u64>,
    /// Negotiated message size (re-applied to a new connection on bind).
    max_msg: u32,
    /// Credential the session's requests run with (SET_CRED), if any.
    cred: Option<cred::Cred>,
    /// Exactly the bytes the client presented (the HMAC transcript covers these).
    client_id: Vec<u8>,
    slots: ServerSlots,
    auth_required: bool,
    authenticated: bool,
    server_nonce: [u8; NONCE_LEN],
    opens: HashMap<u64, OpenFile>,
    next_open_id: u64,
}

/// A WRITE_DIRECT waiting for its data to be pulled from the client.
struct PendingWrite {
    hdr: Header,
    fd: Arc<OwnedFd>,
    offset: u64,
    stable: bool,
    append: Option<Arc<Mutex<()>>>,
    /// Part of a BATCH_IO: (batch tag, I/O index) — the reply is the batch's.
    batch: Option<(u64, usize)>,
}

/// A BATCH_IO whose writes are still being pulled (TCP): results so far.
struct PendingBatch {
    hdr: Header,
    flags: u32,
    results: Vec<(Status, u64)>,
    pulls_left: usize,
}

/// What the connection asks of its worker after handling input.
#[derive(Debug, PartialEq, Eq)]
pub enum ConnFate {
    Keep,
    Close,
}

pub struct Conn {
    pub t: Box<dyn ServerConn>,
    session: Option<Session>,
    /// WRITE_DIRECTs waiting for their data, by pull tag.
    pending: HashMap<u64, PendingWrite>,
    /// Pull tags are never reused on a connection, so a late completion for a session
    /// that has ended cannot be mistaken for a new request's.
    next_tag: u64,
    batches: HashMap<u64, PendingBatch>,
    /// While executing a chain, replies are collected here instead of being sent.
    capture: Option<Vec<u8>>,
    pub read_paused: bool,
    /// (slot, sequence id) of the last reply encoded into the scratch buffer, so the
    /// reply cache stores exactly the reply of the request completing.
    last_reply: Option<(u32, u32)>,
    /// SESSION_DESTROY executed: release the session instead of parking it.
    destroying: bool,
}

enum Done {
    Replied,
    /// A pull is under way with this tag.
    Pending((u64, PendingWrite)),
    /// The reply comes later (a batch whose pulls are under way); the slot stays busy.
    Deferred,
}

/// Release everything a session held: its open files (share reservations, delete-on-
/// close), its locks, its place among the live sessions.
pub(crate) fn release_session(sh: &Shared, s: Session, why: &str) {
    let locks = sh.locks.release_owner(s.id);
    info!(session = s.id, client = %s.info.client_id, opens = s.opens.len(), locks, "{why}");
    for (open_id, of) in s.opens {
        sh.open_table.release(of.file, s.id, open_id);
        // A create-unlinked file never published vanishes with its descriptor.
    }
    s.info.connected.store(false, Relaxed);
    sh.sessions_live.fetch_sub(1, Relaxed);
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b).expect("the OS random source works");
    b
}

impl Conn {
    pub fn new(t: Box<dyn ServerConn>) -> Self {
        Conn {
            t,
            session: None,
            pending: HashMap::new(),
            next_tag: 1,
            batches: HashMap::new(),
            capture: None,
            read_paused: false,
            last_reply: None,
            destroying: false,
        }
    }

    /// Read and handle events until the socket is drained or backpressure pauses us.
    pub fn drive(&mut self, sh: &Shared, sc: &mut Scratch) -> ConnFate {
        loop {
            if self.t.backlog_bytes() > sh.cfg.backlog_bytes_max {
                if !self.read_paused {
                    sh.stats.backpressure_pauses.fetch_add(1, Relaxed);
                }
                self.read_paused = true;
                break;
            }
            self.read_paused = false;
            match self.t.poll_event() {
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
                    warn!(peer = %self.t.peer(), "closing connection: {e}");
                    sh.stats.malformed.fetch_add(1, Relaxed);
                    return ConnFate::Close;
                }
            }
        }
        self.flush()
    }

    /// Write queued output; true = everything written. Resumes reading if it had paused.
    pub fn flush(&mut self) -> ConnFate {
        match self.t.flush() {
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
        if let Some(s) = self.session.take() {
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

    fn send(&mut self, sh: &Shared, sc: &mut Scratch, req_h: &Header, reply: &Reply) -> ConnFate {
        let target = self.session.as_ref().map(|s| s.slots.target_highest()).unwrap_or(0);
        let h = Header::reply_to(req_h, Status::Ok, target);
        if reply.status() != Status::Ok {
            sh.stats.errors_replied.fetch_add(1, Relaxed);
            // Every limit refusal, whichever limit (sessions, connections per client, open
            // files, handles, locks per file...), is counted here, once.
            if reply.status() == Status::Limit {
                sh.stats.limit_refusals.fetch_add(1, Relaxed);
            }
        }
        sc.out.clear();
        self.last_reply =
            if self.capture.is_none() { Some((req_h.slot_id, req_h.sequence_id)) } else { None };
        let max = self.t.max_msg_size();
        if let Err(e) = dafs_proto::encode_reply(&h, reply, &mut sc.out, max) {
            // Only a server bug can produce an oversized reply (sizes are checked before
            // executing); answer with a fault rather than dropping the slot.
            warn!("reply does not fit: {e}");
            sc.out.clear();
            dafs_proto::encode_reply(&h, &Reply::Error(Status::ServerFault), &mut sc.out, max)
                .expect("an empty reply fits");
        }
        if let Some(cap) = self.capture.as_mut() {
            dafs_proto::types::pack_messages([sc.out.as_slice()], cap);
            return ConnFate::Keep;
        }
        match self.t.send(&sc.out) {
            Ok(()) => ConnFate::Keep,
            Err(e) => {
                debug!("send failed: {e}");
                ConnFate::Close
            }
        }
    }

    fn on_message(&mut self, sh: &Shared, sc: &mut Scratch, buf: &[u8]) -> ConnFate {
        sh.stats.requests.fetch_add(1, Relaxed);
        let max = self.t.max_msg_size();
        match dafs_proto::decode_request(buf, max) {
            Ok((h, req)) => self.dispatch(sh, sc, h, req, buf),
            Err((Some(h), e)) => {
                sh.stats.malformed.fetch_add(1, Relaxed);
                debug!(peer = %self.t.peer(), op = h.opcode.name(), "malformed request: {e}");
                self.answer_without_executing(sh, sc, h, Status::BadXdr)
            }
            Err((None, e)) => {
                sh.stats.malformed.fetch_add(1, Relaxed);
                // The header itself is unusable for an answer only if magic/lengths are bad.
                let Ok(raw) = RawHeader::parse(buf) else {
                    warn!(peer = %self.t.peer(), "undecodable message ({e}); closing connection");
                    return ConnFate::Close;
                };
                if raw.total_len() != buf.len() as u64 || raw.flags != 0 {
                    warn!(peer = %self.t.peer(), "inconsistent message ({e}); closing connection");
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
        let mut complete = false;
        if let Some(s) = self.session.as_mut() {
            if s.id == h.session_id
                && !matches!(h.opcode, Opcode::SessionCreate | Opcode::SessionBind)
            {
                match s.slots.begin(h.slot_id, h.sequence_id) {
                    SlotVerdict::Execute => {
                        complete = true;
                        s.exec_digest[h.slot_id as usize] = 0;
                    }
                    SlotVerdict::InProgress => return ConnFate::Keep,
                    v => {
                        sh.stats.slot_refusals.fetch_add(1, Relaxed);
                        let st = verdict_status(v);
                        return self.send(sh, sc, &h, &Reply::Error(st));
                    }
                }
            }
        }
        let fate = self.send(sh, sc, &h, &Reply::Error(status));
        if complete {
            self.complete_slot(sc, &h);
        }
        fate
    }

    fn dispatch(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: Header,
        req: Request,
        raw: &[u8],
    ) -> ConnFate {
        match req {
            Request::Null if h.session_id == 0 => return self.send(sh, sc, &h, &Reply::Empty),
            Request::SessionCreate { max_msg_size, slots, auth, client_id } => {
                return self.session_create(sh, sc, h, max_msg_size, slots, auth, client_id);
            }
            Request::SessionBind { client_nonce, proof, client_id } => {
                return self.session_bind(sh, sc, h, &client_nonce, &proof, client_id);
            }
            _ => {}
        }
        let Some(s) = self.session.as_mut() else {
            return self.send(sh, sc, &h, &Reply::Error(Status::BadSession));
        };
        if s.id != h.session_id {
            return self.send(sh, sc, &h, &Reply::Error(Status::BadSession));
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
                // A duplicate that overtook the original's reply: that reply answers it.
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
                    return self.send(sh, sc, &h, &Reply::Error(Status::RetryUncachedRep));
                }
                Replay::FalseRetry => {
                    sh.stats.false_retries.fetch_add(1, Relaxed);
                    warn!(
                        session = s.id,
                        slot = h.slot_id,
                        seq = h.sequence_id,
                        "a different request reused a slot and sequence id"
                    );
                    return self.send(sh, sc, &h, &Reply::Error(Status::SeqFalseRetry));
                }
            },
            v => {
                sh.stats.slot_refusals.fetch_add(1, Relaxed);
                return self.send(sh, sc, &h, &Reply::Error(verdict_status(v)));
            }
        }
        s.info.slots_busy.store(s.slots.busy_count(), Relaxed);
        if s.auth_required && !s.authenticated && !h.opcode.allowed_before_auth() {
            let fate = self.send(sh, sc, &h, &Reply::Error(Status::AuthRequired));
            self.complete_slot(sc, &h);
            return fate;
        }
        // Run with the session's credential (no-op when it is already this thread's).
        if let Err(status) = cred::apply(sh, s.cred.as_ref()) {
            let fate = self.send(sh, sc, &h, &Reply::Error(status));
            self.complete_slot(sc, &h);
            return fate;
        }
        let destroy = matches!(req, Request::SessionDestroy);
        let result = self.execute(sh, sc, &h, req);
        let fate = match result {
            Ok(Done::Replied) => ConnFate::Keep,
            Ok(Done::Pending((tag, p))) => {
                self.pending.insert(tag, p);
                return ConnFate::Keep;
            }
            Ok(Done::Deferred) => return ConnFate::Keep,
            Err(status) => self.send(sh, sc, &h, &Reply::Error(status)),
        };
        self.complete_slot(sc, &h);
        if destroy {
            self.destroying = true;
            self.close(sh);
        }
        fate
    }

    /// The request on `h`'s slot has been answered (its reply is the last one encoded
    /// into `sc.out`): keep the reply for retransmissions and free the slot.
    fn complete_slot(&mut self, sc: &Scratch, h: &Header) {
        let Some(s) = self.session.as_mut() else { return };
        let slot = h.slot_id;
        let digest = s.exec_digest[slot as usize];
        if self.last_reply == Some((slot, h.sequence_id)) {
            s.cache.store(slot, digest, h.opcode.is_idempotent(), &sc.out);
        } else {
            // Not the reply we think it is (cannot happen; be safe): never replay it.
            debug_assert!(false, "completing slot {slot} without its reply encoded");
            s.cache.store_uncached(slot, digest);
        }
        s.slots.complete(slot);
        s.info.slots_busy.store(s.slots.busy_count(), Relaxed);
        s.info.cache_bytes.store(s.cache.bytes_held() as u64, Relaxed);
        s.info.opens.store(s.opens.len() as u32, Relaxed);
    }

    #[allow(clippy::too_many_arguments)]
    fn session_create(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: Header,
        max_msg: u32,
        slots: u32,
        auth: AuthMethod,
        client_id: &[u8],
    ) -> ConnFate {
        if self.session.is_some() {
            return self.send(sh, sc, &h, &Reply::Error(Status::Inval));
        }
        if max_msg < limits::MSG_SIZE_MIN || slots == 0 {
            return self.send(sh, sc, &h, &Reply::Error(Status::Inval));
        }
        let auth_required = sh.cfg.secret.is_some();
        if auth_required && auth != AuthMethod::HmacSha256 {
            sh.stats.auth_failures.fetch_add(1, Relaxed);
            return self.send(sh, sc, &h, &Reply::Error(Status::AuthRequired));
        }
        let client_name = String::from_utf8_lossy(client_id).into_owned();
        if let Err(st) = self.admit_client(sh, &client_name) {
            return self.send(sh, sc, &h, &Reply::Error(st));
        }
        if sh.sessions_live.fetch_add(1, Relaxed) >= sh.cfg.sessions_max {
            sh.sessions_live.fetch_sub(1, Relaxed);
            return self.send(sh, sc, &h, &Reply::Error(Status::Limit));
        }
        let max_msg = max_msg.min(sh.cfg.msg_size_max);
        let slots = slots.min(sh.cfg.slots_max);
        let id = (u64::from_le_bytes(random_bytes()) >> 1) | 1;
        let server_nonce = random_bytes();
        info!(session = id, client = %client_name, peer = %self.t.peer(), slots, max_msg, "session created");
        sh.stats.sessions_created.fetch_add(1, Relaxed);
        let info = Arc::new(SessionInfo::new(id, client_name, slots, self.t.peer(), server_nonce));
        sh.sessions.insert(info.clone());
        self.session = Some(Session {
            id,
            info,
            cache: ReplyCache::new(slots, sh.cfg.reply_cache_slot_bytes),
            exec_digest: vec![0; slots as usize],
            max_msg,
            cred: None,
            client_id: client_id.to_vec(),
            slots: ServerSlots::new(slots),
            auth_required,
            authenticated: false,
            server_nonce,
            opens: HashMap::new(),
            next_open_id: 1,
        });
        // The reply carries the new session id in its header.
        let mut rh = h;
        rh.session_id = id;
        let reply = Reply::SessionCreate {
            max_msg_size: max_msg,
            slots,
            inline_threshold: sh.cfg.inline_threshold.min(max_msg - 1024),
            auth: if auth_required { AuthMethod::HmacSha256 } else { AuthMethod::None },
            server_nonce,
            direct_max: sh.cfg.direct_max,
            batch_max: sh.cfg.batch_max,
            host_id: sh.host_id,
            shm_path: sh.shm_path.as_bytes(),
        };
        let fate = self.send(sh, sc, &rh, &reply);
        self.t.set_max_msg_size(max_msg as usize);
        fate
    }

    /// May `client` have a session on this connection (SESSION_CREATE, SESSION_BIND)?
    /// Not if it is fenced, nor beyond its connections-per-client limit.
    fn admit_client(&self, sh: &Shared, client: &str) -> Result<(), Status> {
        if sh.sessions.is_fenced(client) {
            sh.stats.fenced_refusals.fetch_add(1, Relaxed);
            warn!(client, peer = %self.t.peer(), "session refused: client is fenced");
            return Err(Status::Fenced);
        }
        if sh.sessions.bound_count(client) >= sh.cfg.connections_per_client_max {
            warn!(
                client,
                limit = sh.cfg.connections_per_client_max,
                "session refused: connections per client"
            );
            return Err(Status::Limit);
        }
        Ok(())
    }

    /// SESSION_BIND: take a session whose connection broke (within its lease) onto this
    /// connection. Its slots, reply cache and open files continue; the client then
    /// retransmits what it had in flight, and the slot rules execute each request once.
    fn session_bind(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: Header,
        client_nonce: &[u8; NONCE_LEN],
        proof: &[u8; NONCE_LEN],
        client_id: &[u8],
    ) -> ConnFate {
        if self.session.is_some() {
            return self.send(sh, sc, &h, &Reply::Error(Status::Inval));
        }
        let client_name = String::from_utf8_lossy(client_id);
        if let Err(st) = self.admit_client(sh, &client_name) {
            return self.send(sh, sc, &h, &Reply::Error(st));
        }
        let secret = sh.cfg.secret.as_deref();
        let verify = |nonce: &[u8; NONCE_LEN]| {
            secret.is_none_or(|k| {
                auth::verify_bind(k, h.session_id, nonce, client_nonce, client_id, proof)
            })
        };
        let next_nonce = random_bytes();
        let (s, info) = match sh.sessions.take(h.session_id, client_id, verify, next_nonce) {
            Take::Bound(s, info) => (s, info),
            Take::Busy => {
                // The old connection is being closed by its worker; the client retries.
                sh.wake_workers();
                sh.stats.binds_delayed.fetch_add(1, Relaxed);
                return self.send(sh, sc, &h, &Reply::Error(Status::Delay));
            }
            Take::AuthFailed => {
                sh.stats.auth_failures.fetch_add(1, Relaxed);
                warn!(session = h.session_id, client = %client_name, peer = %self.t.peer(), "bind refused: authentication failed");
                return self.send(sh, sc, &h, &Reply::Error(Status::AuthFailed));
            }
            Take::Unknown | Take::WrongClient => {
                sh.stats.binds_refused.fetch_add(1, Relaxed);
                debug!(session = h.session_id, client = %client_name, "bind refused: no such session for this client");
                return self.send(sh, sc, &h, &Reply::Error(Status::BadSession));
            }
        };
        let server_proof = match secret {
            Some(k) => auth::bind_server_proof(k, s.id, client_nonce, &next_nonce, &s.client_id),
            None => [0u8; NONCE_LEN],
        };
        sh.stats.binds.fetch_add(1, Relaxed);
        *info.peer.lock().unwrap() = self.t.peer();
        info!(session = s.id, client = %s.info.client_id, peer = %self.t.peer(), "session bound to a new connection");
        let reply = Reply::SessionBind {
            slots: s.slots.granted(),
            target_highest: s.slots.target_highest(),
            next_nonce,
            server_proof,
        };
        let max_msg = s.max_msg;
        self.session = Some(*s);
        let fate = self.send(sh, sc, &h, &reply);
        self.t.set_max_msg_size(max_msg as usize);
        fate
    }

    fn on_pulled(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        tag: u64,
        data: Result<Vec<u8>, TransportError>,
    ) -> ConnFate {
        let Some(p) = self.pending.remove(&tag) else {
            // The session that asked for it has ended (SESSION_DESTROY): drop the data.
            debug!("pull completion for a write whose session ended; dropped");
            if let Ok(buf) = data {
                self.t.recycle(buf);
            }
            return ConnFate::Keep;
        };
        let result: FsResult<(usize, u64)> = match &data {
            Err(_) => Err(Status::BadRegion),
            Ok(buf) => {
                write_at(p.fd.as_fd(), buf, p.offset, p.append.as_deref()).and_then(|(n, off)| {
                    if p.stable {
                        rfs::fdatasync(&p.fd).map_err(st)?;
                    }
                    sh.stats.bytes_written.fetch_add(n as u64, Relaxed);
                    sh.stats.direct_bytes.fetch_add(n as u64, Relaxed);
                    Ok((n, off))
                })
            }
        };
        if let Ok(buf) = data {
            self.t.recycle(buf);
        }
        if let Some((btag, idx)) = p.batch {
            let Some(b) = self.batches.get_mut(&btag) else { return ConnFate::Keep };
            match result {
                Ok((n, _)) => b.results[idx].1 += n as u64,
                Err(e) => {
                    if b.results[idx].0 == Status::Ok {
                        b.results[idx].0 = e;
                    }
                }
            }
            b.pulls_left -= 1;
            if b.pulls_left > 0 {
                return ConnFate::Keep;
            }
            let b = self.batches.remove(&btag).unwrap();
            let fate = self.send_batch_reply(sh, sc, &b.hdr, b.flags, &b.results);
            self.complete_slot(sc, &b.hdr);
            return fate;
        }
        let fate = match result {
            Ok((n, off)) => self.send(
                sh,
                sc,
                &p.hdr,
                &Reply::Write { count: n as u32, stable: p.stable, offset: off },
            ),
            Err(e) => self.send(sh, sc, &p.hdr, &Reply::Error(e)),
        };
        self.complete_slot(sc, &p.hdr);
        fate
    }

    fn send_batch_reply(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: &Header,
        flags: u32,
        results: &[(Status, u64)],
    ) -> ConnFate {
        let mut packed = Vec::with_capacity(results.len() * BatchResult::WIRE_LEN);
        let mut n = 0;
        for (i, (status, count)) in results.iter().enumerate() {
            if flags & batch_flags::ERRORS_ONLY != 0 && *status == Status::Ok {
                continue;
            }
            BatchResult { index: i as u32, status: *status, count: *count }.pack(&mut packed);
            n += 1;
        }
        self.send(sh, sc, h, &Reply::Batch { count: n, results: &packed })
    }

    fn execute(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: &Header,
        req: Request,
    ) -> Result<Done, Status> {
        let reply_fate = |c: &mut Conn, sc: &mut Scratch, r: &Reply| -> Result<Done, Status> {
            // A failed send closes the connection on the next read; the slot is done.
            let _ = c.send(sh, sc, h, r);
            Ok(Done::Replied)
        };
        match req {
            Request::Null => reply_fate(self, sc, &Reply::Empty),
            Request::SessionCreate { .. } | Request::SessionBind { .. } => {
                unreachable!("handled in dispatch")
            }
            Request::SetCred { uid, gid, groups } => {
                if !sh.cfg.identity.accepts_set_cred() {
                    return Err(Status::NotSupp);
                }
                let s = self.session.as_mut().expect("dispatch checked the session");
                s.cred = Some(cred::Cred { uid, gid, groups: cred::parse_groups(groups) });
                // At once: later elements of a chain run with it too.
                cred::apply(sh, s.cred.as_ref())?;
                reply_fate(self, sc, &Reply::Empty)
            }
            Request::SessionAuth { client_nonce, proof } => {
                let s = self.session.as_mut().expect("dispatch checked the session");
                if !s.auth_required || s.authenticated {
                    return Err(Status::Inval);
                }
                let secret = sh.cfg.secret.as_deref().expect("auth_required implies a secret");
                if !auth::verify_client(
                    secret,
                    s.id,
                    &s.server_nonce,
                    &client_nonce,
                    &s.client_id,
                    &proof,
                ) {
                    sh.stats.auth_failures.fetch_add(1, Relaxed);
                    warn!(session = s.id, client = %s.info.client_id, "authentication failed");
                    return Err(Status::AuthFailed);
                }
                s.authenticated = true;
                let server_proof =
                    auth::server_proof(secret, s.id, &s.server_nonce, &client_nonce, &s.client_id);
                reply_fate(self, sc, &Reply::SessionAuth { server_proof })
            }
            Request::SessionDestroy => reply_fate(self, sc, &Reply::Empty),
            Request::GetRootHandle { export } => {
                let idx = if export.is_empty() {
                    0
                } else {
                    let name = export.strip_prefix(b"/").unwrap_or(export);
                    sh.cfg
                        .exports
                        .iter()
                        .position(|e| e.name.as_bytes() == name)
                        .ok_or(Status::NoEnt)?
                };
                let s = self.session.as_ref().expect("dispatch checked the session");
                if !sh.cfg.exports[idx].admits(&s.info.client_id) {
                    sh.stats.access_refusals.fetch_add(1, Relaxed);
                    warn!(client = %s.info.client_id, export = %sh.cfg.exports[idx].name, "attach refused by the export's client rules");
                    return Err(Status::Access);
                }
                let fd = sh.roots[idx].try_clone().map_err(fsops::io_st)?;
                let (fh, stat) = sh.handles.insert(fd, idx as u32)?;
                reply_fate(self, sc, &Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
            }
            Request::Lookup { dir, path, follow } => {
                let d = sh.handles.resolve(&dir)?;
                let fd = fsops::lookup(d.fd.as_fd(), path, follow)?;
                let (fh, stat) = sh.handles.insert(fd, d.export)?;
                reply_fate(self, sc, &Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
            }
            Request::LookupParent { fh } => {
                let d = sh.handles.resolve(&fh)?;
                let me = fsops::fstat(d.fd.as_fd())?;
                let root = fsops::fstat(sh.roots[d.export as usize].as_fd())?;
                if me.st_dev == root.st_dev && me.st_ino == root.st_ino {
                    return Err(Status::NoEnt); // the export root has no parent
                }
                if FileType::from_mode(me.st_mode) != FileType::Directory {
                    return Err(Status::NotDir);
                }
                // The parent of a directory beneath the root is the root or beneath it.
                let p =
                    rfs::openat(d.fd.as_fd(), c"..", OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
                        .map_err(st)?;
                let (fh, stat) = sh.handles.insert(p, d.export)?;
                reply_fate(self, sc, &Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
            }
            Request::GetAttr { fh } => {
                let d = sh.handles.resolve(&fh)?;
                let attr = fsops::getattr(d.fd.as_fd())?;
                reply_fate(self, sc, &Reply::Attr { attr })
            }
            Request::SetAttr { fh, set } => {
                let d = sh.handles.resolve(&fh)?;
                self.check_writable(sh, d.export)?;
                let fd = d.fd.as_fd();
                let path = fsops::proc_path(fd);
                if set.mask & setattr_mask::SIZE != 0 {
                    let f = fsops::reopen(fd, OFlags::WRONLY)?;
                    rfs::ftruncate(&f, set.size).map_err(st)?;
                }
                if set.mask & setattr_mask::MODE != 0 {
                    rfs::chmod(path.as_c_str(), Mode::from_raw_mode(set.mode)).map_err(st)?;
                }
                if set.mask & (setattr_mask::UID | setattr_mask::GID) != 0 {
                    if (set.mask & setattr_mask::UID != 0 && set.uid == u32::MAX)
                        || (set.mask & setattr_mask::GID != 0 && set.gid == u32::MAX)
                    {
                        return Err(Status::Inval); // -1 means "unchanged" to the kernel; use the mask instead
                    }
                    // SAFETY: from_raw is unsafe only because -1 is special; excluded above.
                    let uid = (set.mask & setattr_mask::UID != 0)
                        .then(|| unsafe { rustix::fs::Uid::from_raw(set.uid) });
                    // SAFETY: as above.
                    let gid = (set.mask & setattr_mask::GID != 0)
                        .then(|| unsafe { rustix::fs::Gid::from_raw(set.gid) });
                    rfs::chownat(fd, c"", uid, gid, AtFlags::EMPTY_PATH).map_err(st)?;
                }
                let tmask = setattr_mask::ATIME
                    | setattr_mask::ATIME_NOW
                    | setattr_mask::MTIME
                    | setattr_mask::MTIME_NOW;
                if set.mask & tmask != 0 {
                    let pick = |set_bit: u32, now_bit: u32, ns: i64| {
                        if set.mask & now_bit != 0 {
                            rfs::Timespec { tv_sec: 0, tv_nsec: rfs::UTIME_NOW }
                        } else if set.mask & set_bit != 0 {
                            fsops::timespec_from_ns(ns)
                        } else {
                            rfs::Timespec { tv_sec: 0, tv_nsec: rfs::UTIME_OMIT }
                        }
                    };
                    let ts = rfs::Timestamps {
                        last_access: pick(
                            setattr_mask::ATIME,
                            setattr_mask::ATIME_NOW,
                            set.atime_ns,
                        ),
                        last_modification: pick(
                            setattr_mask::MTIME,
                            setattr_mask::MTIME_NOW,
                            set.mtime_ns,
                        ),
                    };
                    rfs::utimensat(rfs::CWD, path.as_c_str(), &ts, AtFlags::empty()).map_err(st)?;
                }
                let attr = fsops::getattr(fd)?;
                reply_fate(self, sc, &Reply::Attr { attr })
            }
            Request::Access { fh, mask } => {
                let d = sh.handles.resolve(&fh)?;
                let path = fsops::proc_path(d.fd.as_fd());
                let ro = sh.cfg.exports[d.export as usize].read_only;
                let mut granted = 0;
                for (bit, acc) in [
                    (access_mask::READ, rfs::Access::READ_OK),
                    (access_mask::WRITE, rfs::Access::WRITE_OK),
                    (access_mask::EXECUTE, rfs::Access::EXEC_OK),
                ] {
                    if mask & bit == 0 || (bit == access_mask::WRITE && ro) {
                        continue;
                    }
                    if rfs::accessat(rfs::CWD, path.as_c_str(), acc, AtFlags::EACCESS).is_ok() {
                        granted |= bit;
                    }
                }
                reply_fate(self, sc, &Reply::Access { granted })
            }
            Request::Create { dir, ftype, mode, exclusive, name } => {
                let d = sh.handles.resolve(&dir)?;
                self.check_writable(sh, d.export)?;
                match ftype {
                    FileType::Directory => {
                        let c = std::ffi::CString::new(name).map_err(|_| Status::BadName)?;
                        rfs::mkdirat(d.fd.as_fd(), c.as_c_str(), Mode::from_raw_mode(mode))
                            .map_err(st)?;
                    }
                    _ => {
                        let mut fl = OFlags::RDONLY | OFlags::CREATE | OFlags::NOFOLLOW;
                        if exclusive {
                            fl |= OFlags::EXCL;
                        }
                        drop(fsops::open_in(d.fd.as_fd(), name, fl, mode)?);
                    }
                }
                let fd = fsops::lookup(d.fd.as_fd(), name, false)?;
                let (fh, stat) = sh.handles.insert(fd, d.export)?;
                reply_fate(self, sc, &Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
            }
            Request::Open { fh, flags, mode, name, key } => {
                self.open(sh, sc, h, fh, flags, mode, name, key)
            }
            Request::Close { open_id } => {
                let s = self.session.as_mut().expect("session");
                let of = s.opens.remove(&open_id).ok_or(Status::BadOpenId)?;
                let sid = s.id;
                sh.open_table.release(of.file, sid, open_id);
                reply_fate(self, sc, &Reply::Empty)
            }
            Request::ReadInline { open_id, offset, len } => {
                let max = self.t.max_msg_size() - HEADER_LEN - 64;
                if len as usize > max {
                    return Err(Status::MsgTooBig);
                }
                let of = self.open_file(open_id, true)?;
                sc.data.resize(len as usize, 0);
                let n = fsops::pread_full(of.fd.as_fd(), &mut sc.data[..len as usize], offset)
                    .map_err(fsops::io_st)?;
                sh.stats.bytes_read.fetch_add(n as u64, Relaxed);
                sh.stats.inline_bytes.fetch_add(n as u64, Relaxed);
                let data = std::mem::take(&mut sc.data);
                let r = reply_fate(
                    self,
                    sc,
                    &Reply::ReadInline { eof: n < len as usize, data: &data[..n] },
                );
                sc.data = data;
                r
            }
            Request::WriteInline { open_id, offset, stable, data } => {
                let of = self.open_file(open_id, false)?;
                check_range(offset, data.len() as u64)?;
                let (n, off) = write_at(of.fd.as_fd(), data, offset, of.append.as_deref())?;
                if stable {
                    rfs::fdatasync(&of.fd).map_err(st)?;
                }
                sh.stats.bytes_written.fetch_add(n as u64, Relaxed);
                sh.stats.inline_bytes.fetch_add(n as u64, Relaxed);
                reply_fate(self, sc, &Reply::Write { count: n as u32, stable, offset: off })
            }
            Request::ReadDirect { open_id, offset, len, region } => {
                if len > sh.cfg.direct_max {
                    return Err(Status::Inval);
                }
                let s = self.session.as_ref().expect("session");
                let of = s.opens.get(&open_id).ok_or(Status::BadOpenId)?;
                if !of.read {
                    return Err(Status::OpenMode);
                }
                let fd = of.fd.as_fd();
                let n = self
                    .t
                    .put(region, len as usize, &mut |dst| dst.pread_from(fd, offset))
                    .map_err(placement_status)?;
                sh.stats.bytes_read.fetch_add(n as u64, Relaxed);
                sh.stats.direct_bytes.fetch_add(n as u64, Relaxed);
                reply_fate(self, sc, &Reply::ReadDirect { count: n as u32, eof: n < len as usize })
            }
            Request::WriteDirect { open_id, offset, len, stable, region } => {
                if len > sh.cfg.direct_max {
                    return Err(Status::Inval);
                }
                self.open_file(open_id, false)?;
                check_range(offset, len as u64)?;
                if len == 0 {
                    return reply_fate(self, sc, &Reply::Write { count: 0, stable, offset });
                }
                // Providers that reach client memory directly (shared memory) let us
                // pwrite straight from it: one copy in total.
                {
                    let s = self.session.as_ref().expect("session");
                    let of = s.opens.get(&open_id).expect("checked by open_file");
                    let (fd, append) = (of.fd.as_fd(), of.append.clone());
                    let mut at = offset;
                    let r = self.t.pull_sync(region, len as usize, &mut |src| {
                        let (n, off) = write_at(fd, src, offset, append.as_deref())
                            .map_err(|s| std::io::Error::from_raw_os_error(s.to_errno()))?;
                        at = off;
                        Ok(n)
                    });
                    match r {
                        Ok(Some(n)) => {
                            if stable {
                                rfs::fdatasync(fd).map_err(st)?;
                            }
                            sh.stats.bytes_written.fetch_add(n as u64, Relaxed);
                            sh.stats.direct_bytes.fetch_add(n as u64, Relaxed);
                            return reply_fate(
                                self,
                                sc,
                                &Reply::Write { count: n as u32, stable, offset: at },
                            );
                        }
                        Ok(None) => {}
                        Err(e) => return Err(placement_status(e)),
                    }
                }
                let of = self.open_file(open_id, false)?;
                let (fd, append) = (of.fd.clone(), of.append.clone());
                let tag = self.next_tag;
                self.next_tag += 1;
                match self.t.pull(region, len as usize, tag) {
                    Ok(()) => Ok(Done::Pending((
                        tag,
                        PendingWrite { hdr: *h, fd, offset, stable, append, batch: None },
                    ))),
                    Err(TransportError::BadRegion) => Err(Status::BadRegion),
                    Err(e) => {
                        debug!("pull failed: {e}");
                        Err(Status::TransferFailed)
                    }
                }
            }
            Request::ReadDir { dir, cookie, max_entries, max_bytes } => {
                let d = sh.handles.resolve(&dir)?;
                let max_entries = if max_entries == 0 {
                    limits::READDIR_ENTRIES_MAX
                } else {
                    max_entries.min(limits::READDIR_ENTRIES_MAX)
                };
                let room = self.t.max_msg_size() - HEADER_LEN - 32;
                let max_bytes = if max_bytes == 0 { room } else { (max_bytes as usize).min(room) };
                sc.entries.clear();
                let mut count = 0u32;
                let mut too_small = false;
                let eof = fsops::read_dir(d.fd.as_fd(), cookie, |off, ino, ftype, name| {
                    if count >= max_entries {
                        return false;
                    }
                    if sc.entries.len() + DirEntry::wire_len(name.len()) > max_bytes {
                        too_small = count == 0;
                        return false;
                    }
                    DirEntry { cookie: off, fileid: ino, ftype, name }.pack(&mut sc.entries);
                    count += 1;
                    true
                })?;
                if too_small {
                    return Err(Status::TooSmall);
                }
                let entries = std::mem::take(&mut sc.entries);
                let r = reply_fate(self, sc, &Reply::ReadDir { eof, count, entries: &entries });
                sc.entries = entries;
                r
            }
            Request::Remove { dir, name } | Request::RmDir { dir, name } => {
                let is_rmdir = h.opcode == Opcode::RmDir;
                let d = sh.handles.resolve(&dir)?;
                self.check_writable(sh, d.export)?;
                let c = std::ffi::CString::new(name).map_err(|_| Status::BadName)?;
                let stat = rfs::statat(d.fd.as_fd(), c.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(st)?;
                let is_dir = FileType::from_mode(stat.st_mode) == FileType::Directory;
                if is_rmdir && !is_dir {
                    return Err(Status::NotDir);
                }
                if !is_rmdir && is_dir {
                    return Err(Status::IsDir);
                }
                let fl = if is_rmdir { AtFlags::REMOVEDIR } else { AtFlags::empty() };
                rfs::unlinkat(d.fd.as_fd(), c.as_c_str(), fl).map_err(st)?;
                if is_dir || stat.st_nlink <= 1 {
                    sh.handles.forget(stat.st_dev, stat.st_ino, d.export);
                }
                reply_fate(self, sc, &Reply::Empty)
            }
            Request::Rename { from_dir, from_name, to_dir, to_name } => {
                let f = sh.handles.resolve(&from_dir)?;
                let t = sh.handles.resolve(&to_dir)?;
                if f.export != t.export {
                    return Err(Status::XDev);
                }
                self.check_writable(sh, f.export)?;
                let fc = std::ffi::CString::new(from_name).map_err(|_| Status::BadName)?;
                let tc = std::ffi::CString::new(to_name).map_err(|_| Status::BadName)?;
                rfs::renameat(f.fd.as_fd(), fc.as_c_str(), t.fd.as_fd(), tc.as_c_str())
                    .map_err(st)?;
                reply_fate(self, sc, &Reply::Empty)
            }
            Request::Link { fh, dir, name } => {
                let o = sh.handles.resolve(&fh)?;
                let d = sh.handles.resolve(&dir)?;
                if o.export != d.export {
                    return Err(Status::XDev);
                }
                self.check_writable(sh, d.export)?;
                let ostat = fsops::fstat(o.fd.as_fd())?;
                if FileType::from_mode(ostat.st_mode) == FileType::Directory {
                    return Err(Status::Perm);
                }
                let c = std::ffi::CString::new(name).map_err(|_| Status::BadName)?;
                let src = fsops::proc_path(o.fd.as_fd());
                rfs::linkat(
                    rfs::CWD,
                    src.as_c_str(),
                    d.fd.as_fd(),
                    c.as_c_str(),
                    AtFlags::SYMLINK_FOLLOW,
                )
                .map_err(st)?;
                let attr = fsops::getattr(o.fd.as_fd())?;
                reply_fate(self, sc, &Reply::Attr { attr })
            }
            Request::Symlink { dir, name, target } => {
                let d = sh.handles.resolve(&dir)?;
                self.check_writable(sh, d.export)?;
                let c = std::ffi::CString::new(name).map_err(|_| Status::BadName)?;
                let t = std::ffi::CString::new(target).map_err(|_| Status::Inval)?;
                rfs::symlinkat(t.as_c_str(), d.fd.as_fd(), c.as_c_str()).map_err(st)?;
                let fd = fsops::lookup(d.fd.as_fd(), name, false)?;
                let (fh, stat) = sh.handles.insert(fd, d.export)?;
                reply_fate(self, sc, &Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
            }
            Request::ReadLink { fh } => {
                let d = sh.handles.resolve(&fh)?;
                let target = rfs::readlinkat(d.fd.as_fd(), c"", Vec::new()).map_err(|e| {
                    if e == rustix::io::Errno::NOENT {
                        Status::Inval
                    } else {
                        st(e)
                    }
                })?;
                let bytes = target.into_bytes();
                if bytes.len() > limits::PATH_LEN_MAX {
                    return Err(Status::NameTooLong);
                }
                reply_fate(self, sc, &Reply::ReadLink { target: &bytes })
            }
            Request::Commit { open_id, .. } => {
                let s = self.session.as_ref().expect("session");
                let of = s.opens.get(&open_id).ok_or(Status::BadOpenId)?;
                rfs::fsync(&of.fd).map_err(st)?;
                reply_fate(self, sc, &Reply::Empty)
            }
            Request::FsStat { fh } => {
                let d = sh.handles.resolve(&fh)?;
                let s = fsops::fsstat(d.fd.as_fd())?;
                reply_fate(self, sc, &Reply::FsStat(s))
            }
            Request::CacheHint { open_id, offset, len, hint } => {
                let s = self.session.as_ref().expect("session");
                let of = s.opens.get(&open_id).ok_or(Status::BadOpenId)?;
                let advice = match hint {
                    cache_hint::SEQUENTIAL => rfs::Advice::Sequential,
                    cache_hint::RANDOM => rfs::Advice::Random,
                    cache_hint::WILL_NEED => rfs::Advice::WillNeed,
                    cache_hint::DONT_NEED => rfs::Advice::DontNeed,
                    cache_hint::NO_REUSE => rfs::Advice::NoReuse,
                    _ => rfs::Advice::Normal,
                };
                rfs::fadvise(&of.fd, offset, len, advice).map_err(st)?;
                reply_fate(self, sc, &Reply::Empty)
            }
            Request::Lock { fh, offset, len, ltype }
            | Request::LockTest { fh, offset, len, ltype } => {
                let file = lockable(sh, &fh)?;
                let r = locks::range(offset, len).ok_or(Status::Inval)?;
                let owner = self.session.as_ref().expect("session").id;
                if h.opcode == Opcode::LockTest {
                    let reply = match sh.locks.test(file, owner, r, ltype) {
                        None => Reply::LockTest {
                            conflict: false,
                            ltype: 0,
                            owner: 0,
                            offset: 0,
                            len: 0,
                        },
                        Some(l) => Reply::LockTest {
                            conflict: true,
                            ltype: l.ltype,
                            owner: l.owner,
                            offset: l.start,
                            len: if l.end == u64::MAX { 0 } else { l.end - l.start },
                        },
                    };
                    return reply_fate(self, sc, &reply);
                }
                match sh.locks.lock(file, owner, r, ltype) {
                    locks::LockResult::Granted => reply_fate(self, sc, &Reply::Empty),
                    locks::LockResult::Conflict(_) => Err(Status::Denied),
                    locks::LockResult::Limit => Err(Status::Limit),
                }
            }
            Request::Unlock { fh, offset, len } => {
                let file = lockable(sh, &fh)?;
                let r = locks::range(offset, len).ok_or(Status::Inval)?;
                let owner = self.session.as_ref().expect("session").id;
                sh.locks.unlock(file, owner, r);
                reply_fate(self, sc, &Reply::Empty)
            }
            Request::GetNamedAttr { fh, name } => {
                let d = sh.handles.resolve(&fh)?;
                let value = nattr::get(d.fd.as_fd(), name)?;
                reply_fate(self, sc, &Reply::NamedAttr { value: &value })
            }
            Request::SetNamedAttr { fh, flags, name, value } => {
                let d = sh.handles.resolve(&fh)?;
                self.check_writable(sh, d.export)?;
                nattr::set(d.fd.as_fd(), name, value, flags)?;
                reply_fate(self, sc, &Reply::Empty)
            }
            Request::ListNamedAttr { fh } => {
                let d = sh.handles.resolve(&fh)?;
                let names = nattr::list(d.fd.as_fd())?;
                reply_fate(self, sc, &Reply::NamedAttrList { names: &names })
            }
            Request::RemoveNamedAttr { fh, name } => {
                let d = sh.handles.resolve(&fh)?;
                self.check_writable(sh, d.export)?;
                nattr::remove(d.fd.as_fd(), name)?;
                reply_fate(self, sc, &Reply::Empty)
            }
            Request::Publish { open_id } => {
                let s = self.session.as_mut().expect("session");
                let of = s.opens.get_mut(&open_id).ok_or(Status::BadOpenId)?;
                let (dir, name, export) = of.unlinked.clone().ok_or(Status::Inval)?;
                let c = std::ffi::CString::new(name.clone()).map_err(|_| Status::BadName)?;
                let src = fsops::proc_path(of.fd.as_fd());
                rfs::linkat(
                    rfs::CWD,
                    src.as_c_str(),
                    dir.as_fd(),
                    c.as_c_str(),
                    AtFlags::SYMLINK_FOLLOW,
                )
                .map_err(st)?;
                of.unlinked = None;
                let fd = fsops::lookup(dir.as_fd(), &name, false)?;
                let (fh, stat) = sh.handles.insert(fd, export)?;
                reply_fate(self, sc, &Reply::Handle { fh, attr: fsops::attr_from_stat(&stat) })
            }
            Request::BatchIo { open_id, flags, count, ios } => {
                self.batch_io(sh, sc, h, open_id, flags, count, ios)
            }
            Request::Chain { elements, .. } => self.chain(sh, sc, h, elements),
            Request::Reserved(_) => Err(Status::NotSupp),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn batch_io(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: &Header,
        open_id: u64,
        flags: u32,
        count: u32,
        ios: &[u8],
    ) -> Result<Done, Status> {
        if count > sh.cfg.batch_max {
            return Err(Status::TooMany);
        }
        let ios = dafs_proto::types::parse_batch(ios, count, sh.cfg.direct_max as u64)
            .map_err(|_| Status::BadXdr)?;
        let (fd, read_ok, write_ok, append) = {
            let s = self.session.as_ref().expect("session");
            let of = s.opens.get(&open_id).ok_or(Status::BadOpenId)?;
            (of.fd.clone(), of.read, of.write, of.append.clone())
        };
        let btag = self.next_tag;
        self.next_tag += 1;
        let mut results = vec![(Status::Ok, 0u64); ios.len()];
        let mut pulls: Vec<(u64, PendingWrite, RemoteRegion, usize)> = Vec::new();
        for (i, io) in ios.iter().enumerate() {
            if (io.write && !write_ok) || (!io.write && !read_ok) {
                results[i].0 = Status::OpenMode;
                continue;
            }
            // Walk the file segments and the memory segments side by side.
            let (mut fi, mut foff, mut mi, mut moff) = (0usize, 0u64, 0usize, 0u64);
            'io: while fi < io.file.len() && mi < io.mem.len() {
                let (fstart, flen) = io.file[fi];
                let (region, mlen) = io.mem[mi];
                let piece = (flen - foff).min(mlen - moff);
                if piece > 0 {
                    let at = fstart + foff;
                    let mr = RemoteRegion {
                        key: region.key,
                        offset: region.offset.checked_add(moff).ok_or(Status::BadRegion)?,
                    };
                    if io.write {
                        match self.t.pull_sync(mr, piece as usize, &mut |src| {
                            write_at(fd.as_fd(), src, at, append.as_deref())
                                .map(|(n, _)| n)
                                .map_err(|s| std::io::Error::from_raw_os_error(s.to_errno()))
                        }) {
                            Ok(Some(n)) => results[i].1 += n as u64,
                            Ok(None) => {
                                let tag = self.next_tag;
                                self.next_tag += 1;
                                pulls.push((
                                    tag,
                                    PendingWrite {
                                        hdr: *h,
                                        fd: fd.clone(),
                                        offset: at,
                                        stable: false,
                                        append: append.clone(),
                                        batch: Some((btag, i)),
                                    },
                                    mr,
                                    piece as usize,
                                ));
                            }
                            Err(e) => {
                                results[i].0 = placement_status(e);
                                break 'io;
                            }
                        }
                    } else {
                        match self
                            .t
                            .put(mr, piece as usize, &mut |dst| dst.pread_from(fd.as_fd(), at))
                        {
                            Ok(n) => {
                                results[i].1 += n as u64;
                                if (n as u64) < piece {
                                    break 'io; // end of file
                                }
                            }
                            Err(e) => {
                                results[i].0 = placement_status(e);
                                break 'io;
                            }
                        }
                    }
                }
                foff += piece;
                moff += piece;
                if foff == flen {
                    fi += 1;
                    foff = 0;
                }
                if moff == mlen {
                    mi += 1;
                    moff = 0;
                }
            }
        }
        let bytes: u64 = results.iter().map(|r| r.1).sum();
        sh.stats.direct_bytes.fetch_add(bytes, Relaxed);
        if pulls.is_empty() {
            let _ = self.send_batch_reply(sh, sc, h, flags, &results);
            return Ok(Done::Replied);
        }
        // Writes over a provider without synchronous pulls (TCP): finish when every
        // piece has arrived.
        let n = pulls.len();
        for (tag, pw, mr, len) in pulls {
            if let Err(e) = self.t.pull(mr, len, tag) {
                debug!("batch pull failed: {e}");
                return Err(Status::TransferFailed);
            }
            self.pending.insert(tag, pw);
        }
        self.batches.insert(btag, PendingBatch { hdr: *h, flags, results, pulls_left: n });
        Ok(Done::Deferred)
    }

    /// Execute a chain: elements run in order; a current file handle and open id flow
    /// from one to the next (CURRENT_FH / CURRENT_OPEN_ID); execution stops at the first
    /// element that fails, and the reply carries every executed element's reply.
    fn chain(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: &Header,
        elements: &[u8],
    ) -> Result<Done, Status> {
        let elems = dafs_proto::types::unpack_messages(elements, CHAIN_LEN_MAX)
            .map_err(|_| Status::BadXdr)?;
        let max = self.t.max_msg_size();
        let mut cur_fh: Option<dafs_proto::FileHandle> = None;
        let mut cur_open: Option<u64> = None;
        self.capture = Some(Vec::new());
        let mut executed = 0u32;
        let mut failed = u32::MAX;
        for (i, m) in elems.iter().enumerate() {
            executed += 1;
            let outcome = match dafs_proto::decode_request(m, max) {
                Err((sub_h, _)) => {
                    let sub_h = sub_h.unwrap_or(*h);
                    Err((sub_h, Status::BadXdr))
                }
                Ok((sub_h, req)) => match substitute(req, cur_fh, cur_open) {
                    Err(e) => Err((sub_h, e)),
                    Ok(req) if !chainable(&req) => Err((sub_h, Status::NotChainable)),
                    Ok(req) => match self.execute(sh, sc, &sub_h, req) {
                        Ok(Done::Replied) => Ok(()),
                        Ok(Done::Pending(_)) | Ok(Done::Deferred) => {
                            Err((sub_h, Status::NotChainable))
                        }
                        Err(e) => Err((sub_h, e)),
                    },
                },
            };
            if let Err((sub_h, status)) = outcome {
                let _ = self.send(sh, sc, &sub_h, &Reply::Error(status));
                failed = i as u32;
                break;
            }
            // Pick up the handle / open id this element produced.
            let cap = self.capture.as_ref().unwrap();
            if let Some(last) = dafs_proto::types::unpack_messages(cap, CHAIN_LEN_MAX)
                .ok()
                .and_then(|v| v.last().copied())
            {
                if let Ok((_, r)) = dafs_proto::decode_reply(last, max) {
                    match r {
                        Reply::Handle { fh, .. } => cur_fh = Some(fh),
                        Reply::Open { open_id, fh, .. } => {
                            cur_fh = Some(fh);
                            cur_open = Some(open_id);
                        }
                        _ => {}
                    }
                }
            }
        }
        let replies = self.capture.take().unwrap();
        let _ = self.send(sh, sc, h, &Reply::Chain { executed, failed, replies: &replies });
        Ok(Done::Replied)
    }

    #[allow(clippy::too_many_arguments)]
    fn open(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        h: &Header,
        fh: dafs_proto::FileHandle,
        flags: u32,
        mode: u32,
        name: &[u8],
        key: &[u8],
    ) -> Result<Done, Status> {
        let read = flags & open_flags::READ != 0;
        let write = flags & open_flags::WRITE != 0;
        let mut of = match (read, write) {
            (true, true) => OFlags::RDWR,
            (false, true) => OFlags::WRONLY,
            _ => OFlags::RDONLY,
        };
        // O_TRUNC is applied only after the open is admitted (share reservations, key):
        // a refused open must not have truncated a file another session holds.
        let truncate = flags & open_flags::TRUNCATE != 0;
        if truncate && !write {
            return Err(Status::Inval);
        }
        if flags & open_flags::CREATE != 0 {
            of |= OFlags::CREATE;
            if flags & open_flags::EXCLUSIVE != 0 {
                of |= OFlags::EXCL | OFlags::NOFOLLOW;
            }
        }
        {
            let s = self.session.as_ref().expect("session");
            if s.opens.len() >= sh.cfg.open_files_max {
                return Err(Status::Limit);
            }
        }
        let d = sh.handles.resolve(&fh)?;
        if write || flags & open_flags::CREATE != 0 {
            self.check_writable(sh, d.export)?;
        }
        let unlinked = flags & open_flags::UNLINKED != 0;
        if flags & open_flags::DELETE_ON_CLOSE != 0 && (name.is_empty() || unlinked) {
            return Err(Status::Inval); // the name to delete must be known
        }
        let (file, handle) = if unlinked {
            // An anonymous file in the directory: O_TMPFILE; PUBLISH links it in.
            let tmp = rfs::openat(
                d.fd.as_fd(),
                c".",
                OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
                Mode::from_raw_mode(mode),
            )
            .map_err(st)?;
            let path_fd = fsops::reopen(tmp.as_fd(), OFlags::PATH)?;
            // Enter it by descriptor; its handle answers STALE until published.
            let (handle, _) = sh.handles.insert(path_fd, d.export)?;
            (tmp, handle)
        } else if name.is_empty() {
            let st0 = fsops::fstat(d.fd.as_fd())?;
            match FileType::from_mode(st0.st_mode) {
                FileType::Directory => return Err(Status::IsDir),
                FileType::Symlink => return Err(Status::Loop),
                _ => {}
            }
            (fsops::reopen(d.fd.as_fd(), of)?, fh)
        } else {
            // The mode is for CREATE only (openat2 refuses a mode without O_CREAT).
            let mode = if flags & open_flags::CREATE != 0 { mode } else { 0 };
            let file = fsops::open_in(d.fd.as_fd(), name, of, mode)?;
            let path_fd = fsops::lookup(d.fd.as_fd(), name, true)?;
            let (a, b) = (fsops::fstat(file.as_fd())?, fsops::fstat(path_fd.as_fd())?);
            if a.st_ino != b.st_ino || a.st_dev != b.st_dev {
                return Err(Status::Stale); // replaced between open and lookup: retry
            }
            let (handle, _) = sh.handles.insert(path_fd, d.export)?;
            (file, handle)
        };
        let stat = fsops::fstat(file.as_fd())?;
        if FileType::from_mode(stat.st_mode) == FileType::Directory {
            return Err(Status::IsDir);
        }
        let s = self.session.as_mut().expect("session");
        let open_id = s.next_open_id;
        let file_key = (stat.st_dev, stat.st_ino);
        let dir_fd = d.fd.clone();
        let append_lock = sh.open_table.admit(
            file_key,
            openstate::OpenRequest {
                session: s.id,
                open_id,
                read,
                write,
                deny_read: flags & open_flags::DENY_READ != 0,
                deny_write: flags & open_flags::DENY_WRITE != 0,
                key,
                delete_on_close: (flags & open_flags::DELETE_ON_CLOSE != 0)
                    .then(|| (dir_fd.clone(), name.to_vec())),
            },
        )?;
        if truncate {
            if let Err(e) = rfs::ftruncate(&file, 0) {
                sh.open_table.release(file_key, s.id, open_id);
                return Err(st(e));
            }
        }
        let stat = if truncate { fsops::fstat(file.as_fd())? } else { stat };
        s.next_open_id += 1;
        s.opens.insert(
            open_id,
            OpenFile {
                fd: Arc::new(file),
                read,
                write,
                file: file_key,
                append: (flags & open_flags::APPEND != 0).then_some(append_lock),
                unlinked: unlinked.then(|| (dir_fd, name.to_vec(), d.export)),
            },
        );
        let _ = self.send(
            sh,
            sc,
            h,
            &Reply::Open { open_id, fh: handle, attr: fsops::attr_from_stat(&stat) },
        );
        Ok(Done::Replied)
    }

    fn open_file(&self, open_id: u64, for_read: bool) -> Result<&OpenFile, Status> {
        let s = self.session.as_ref().expect("session");
        let of = s.opens.get(&open_id).ok_or(Status::BadOpenId)?;
        if (for_read && !of.read) || (!for_read && !of.write) {
            return Err(Status::OpenMode);
        }
        Ok(of)
    }

    fn check_writable(&self, sh: &Shared, export: u32) -> Result<(), Status> {
        if sh.cfg.exports[export as usize].read_only {
            Err(Status::RoFs)
        } else {
            Ok(())
        }
    }
}

/// The status for a failed placement or pull: the file's error, a region the client
/// did not register for it, or a transport failure (nothing was written to the file).
fn placement_status(e: PutError) -> Status {
    match e {
        PutError::Fill(e) => fsops::io_st(e),
        PutError::Transport(TransportError::BadRegion) => Status::BadRegion,
        PutError::Transport(e) => {
            debug!("direct transfer failed: {e}");
            Status::TransferFailed
        }
    }
}

/// pwrite, or — for an append-mode open — an atomic append: under the file's append
/// lock, at the end of file. Returns (bytes, offset written at).
fn write_at<'a>(
    fd: std::os::fd::BorrowedFd,
    data: impl Into<dafs_transport::PlacementSrc<'a>>,
    offset: u64,
    append: Option<&Mutex<()>>,
) -> Result<(usize, u64), Status> {
    // A source, not a `&[u8]`: with shared memory the bytes are the client's, which it
    // may write meanwhile; `pwrite_to` lets the kernel copy them without a reference.
    let data = data.into();
    match append {
        None => Ok((data.pwrite_to(fd, offset).map_err(fsops::io_st)?, offset)),
        Some(lock) => {
            let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
            let end = fsops::fstat(fd)?.st_size as u64;
            check_range(end, data.len() as u64)?;
            Ok((data.pwrite_to(fd, end).map_err(fsops::io_st)?, end))
        }
    }
}

/// The lock-table key of a handle; locks apply to regular files only.
fn lockable(sh: &Shared, fh: &dafs_proto::FileHandle) -> Result<(u64, u64), Status> {
    let d = sh.handles.resolve(fh)?;
    let s = fsops::fstat(d.fd.as_fd())?;
    match FileType::from_mode(s.st_mode) {
        FileType::Regular => Ok((s.st_dev, s.st_ino)),
        FileType::Directory => Err(Status::IsDir),
        _ => Err(Status::Inval),
    }
}

/// Ops that may appear in a chain: everything that completes synchronously and is not
/// itself a session or multi-op request.
fn chainable(r: &Request) -> bool {
    !matches!(
        r,
        Request::SessionCreate { .. }
            | Request::SessionAuth { .. }
            | Request::SessionBind { .. }
            | Request::SessionDestroy
            | Request::Chain { .. }
            | Request::BatchIo { .. }
            | Request::Reserved(_)
    )
}

/// Replace CURRENT_FH / CURRENT_OPEN_ID with the chain's current values.
fn substitute(
    r: Request,
    fh: Option<dafs_proto::FileHandle>,
    open: Option<u64>,
) -> Result<Request, Status> {
    let f = |x: dafs_proto::FileHandle| -> Result<dafs_proto::FileHandle, Status> {
        if x == CURRENT_FH {
            fh.ok_or(Status::BadHandle)
        } else {
            Ok(x)
        }
    };
    let o = |x: u64| -> Result<u64, Status> {
        if x == CURRENT_OPEN_ID {
            open.ok_or(Status::BadOpenId)
        } else {
            Ok(x)
        }
    };
    use Request as R;
    Ok(match r {
        R::Lookup { dir, path, follow } => R::Lookup { dir: f(dir)?, path, follow },
        R::LookupParent { fh } => R::LookupParent { fh: f(fh)? },
        R::GetAttr { fh } => R::GetAttr { fh: f(fh)? },
        R::SetAttr { fh, set } => R::SetAttr { fh: f(fh)?, set },
        R::Access { fh, mask } => R::Access { fh: f(fh)?, mask },
        R::Create { dir, ftype, mode, exclusive, name } => {
            R::Create { dir: f(dir)?, ftype, mode, exclusive, name }
        }
        R::Open { fh, flags, mode, name, key } => R::Open { fh: f(fh)?, flags, mode, name, key },
        R::Close { open_id } => R::Close { open_id: o(open_id)? },
        R::ReadInline { open_id, offset, len } => {
            R::ReadInline { open_id: o(open_id)?, offset, len }
        }
        R::WriteInline { open_id, offset, stable, data } => {
            R::WriteInline { open_id: o(open_id)?, offset, stable, data }
        }
        R::ReadDirect { open_id, offset, len, region } => {
            R::ReadDirect { open_id: o(open_id)?, offset, len, region }
        }
        R::WriteDirect { open_id, offset, len, stable, region } => {
            R::WriteDirect { open_id: o(open_id)?, offset, len, stable, region }
        }
        R::ReadDir { dir, cookie, max_entries, max_bytes } => {
            R::ReadDir { dir: f(dir)?, cookie, max_entries, max_bytes }
        }
        R::Remove { dir, name } => R::Remove { dir: f(dir)?, name },
        R::RmDir { dir, name } => R::RmDir { dir: f(dir)?, name },
        R::Rename { from_dir, from_name, to_dir, to_name } => {
            R::Rename { from_dir: f(from_dir)?, from_name, to_dir: f(to_dir)?, to_name }
        }
        R::Link { fh, dir, name } => R::Link { fh: f(fh)?, dir: f(dir)?, name },
        R::Symlink { dir, name, target } => R::Symlink { dir: f(dir)?, name, target },
        R::ReadLink { fh } => R::ReadLink { fh: f(fh)? },
        R::Commit { open_id, offset, len } => R::Commit { open_id: o(open_id)?, offset, len },
        R::FsStat { fh } => R::FsStat { fh: f(fh)? },
        R::CacheHint { open_id, offset, len, hint } => {
            R::CacheHint { open_id: o(open_id)?, offset, len, hint }
        }
        R::Lock { fh, offset, len, ltype } => R::Lock { fh: f(fh)?, offset, len, ltype },
        R::LockTest { fh, offset, len, ltype } => R::LockTest { fh: f(fh)?, offset, len, ltype },
        R::Unlock { fh, offset, len } => R::Unlock { fh: f(fh)?, offset, len },
        R::GetNamedAttr { fh, name } => R::GetNamedAttr { fh: f(fh)?, name },
        R::SetNamedAttr { fh, flags, name, value } => {
            R::SetNamedAttr { fh: f(fh)?, flags, name, value }
        }
        R::ListNamedAttr { fh } => R::ListNamedAttr { fh: f(fh)? },
        R::RemoveNamedAttr { fh, name } => R::RemoveNamedAttr { fh: f(fh)?, name },
        R::Publish { open_id } => R::Publish { open_id: o(open_id)? },
        other => other,
    })
}

fn check_range(offset: u64, len: u64) -> Result<(), Status> {
    // Files are limited to i64::MAX bytes; refuse ranges beyond, instead of letting the
    // kernel answer with something less clear.
    match offset.checked_add(len) {
        Some(end) if end <= i64::MAX as u64 => Ok(()),
        _ => Err(Status::FBig),
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
