//! Session ops: SESSION_CREATE and SESSION_BIND (which attach a session to this
//! connection, before any slot exists), SESSION_AUTH and SET_CRED. SESSION_DESTROY
//! needs no handler: `dispatch` releases the session once its reply has gone out.

use dafs_transport::ServerConn as _;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use dafs_proto::auth;
use dafs_proto::ops::NONCE_LEN;
use dafs_proto::session::{ReplyCache, ServerSlots};
use dafs_proto::types::session_flags;
use dafs_proto::{limits, AuthMethod, Header, Reply, Status};
use tracing::{debug, info};

use super::super::reply::SlotUse;
use super::super::{release_session, Conn, ConnFate, Session};
use crate::cred;
use crate::sessions::{SessionInfo, Take, Trunk};
use crate::Shared;

/// The inline threshold offered leaves this much of the negotiated message size for
/// the message header and the op's fixed part, so an inline read or write of exactly
/// the threshold still fits in one message.
const INLINE_HEADROOM_BYTES: u32 = 1024;

/// A session now attached to this connection (SESSION_CREATE, SESSION_BIND).
pub(in crate::conn) struct Attached<'a> {
    reply: Reply<'a>,
    session_id: u64,
    /// The session's message size, applied once the reply has gone out.
    msg_size_bytes_max: u32,
}

/// One more session counts against `sessions_max`. At the limit, parked sessions (their
/// connection gone, the lease not yet over) are released oldest first to make room, so
/// clients that vanished without SESSION_DESTROY cannot lock live ones out; `LIMIT` only
/// when every session is bound to a connection.
fn count_session(sh: &Shared) -> Result<(), Status> {
    while !sh.sessions_live.try_acquire(sh.cfg.sessions_max) {
        let Some((s, _)) = sh.sessions.take_oldest_parked() else {
            sh.stats.limit_refusals.fetch_add(1, Relaxed);
            return Err(Status::Limit);
        };
        sh.stats.sessions_reclaimed.fetch_add(1, Relaxed);
        release_session(sh, *s, "sessions_max reached; oldest parked session released");
    }
    Ok(())
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::getrandom(&mut b).expect("the OS random source works");
    b
}

impl Conn {
    /// Answer SESSION_CREATE or SESSION_BIND. Neither holds a slot (the session's slots
    /// begin with it). The reply carries the session id in its header (new for
    /// SESSION_CREATE), and goes out under the connection's message size before the
    /// session's applies.
    pub(in crate::conn) fn respond_attached(
        &mut self,
        sh: &Shared,
        out: &mut Vec<u8>,
        h: Header,
        r: Result<Attached, Status>,
    ) -> ConnFate {
        let a = match r {
            Ok(a) => a,
            Err(st) => return self.respond(sh, out, &h, &Reply::Error(st), SlotUse::Untouched),
        };
        let mut rh = h;
        rh.session_id = a.session_id;
        let fate = self.respond(sh, out, &rh, &a.reply, SlotUse::Untouched);
        self.t.set_msg_size_bytes_max(a.msg_size_bytes_max as usize);
        fate
    }

    pub(in crate::conn) fn session_create<'a>(
        &mut self,
        sh: &'a Shared,
        msg_size_bytes_max: u32,
        slots: u32,
        auth: AuthMethod,
        flags: u32,
        client_id: &[u8],
    ) -> Result<Attached<'a>, Status> {
        if self.session.is_some() {
            return Err(Status::Inval);
        }
        if msg_size_bytes_max < limits::MSG_SIZE_BYTES_MIN || slots == 0 {
            return Err(Status::Inval);
        }
        let auth_required = sh.cfg.secret.is_some();
        if auth_required && auth != AuthMethod::HmacSha256 {
            sh.stats.auth_failures.fetch_add(1, Relaxed);
            return Err(Status::AuthRequired);
        }
        if sh.memory.used() > sh.cfg.memory_bytes_max {
            // Existing clients' output fills the memory budget: no new sessions now.
            sh.stats.limit_refusals.fetch_add(1, Relaxed);
            return Err(Status::Limit);
        }
        let client_name = String::from_utf8_lossy(client_id).into_owned();
        self.admit_client(sh, &client_name)?;
        // With a shared secret the session counts against `sessions_max` (and enters the
        // session table) only once SESSION_AUTH has proven it: an unauthenticated peer
        // holds nothing but its own connection's small handshake state.
        if !auth_required {
            count_session(sh)?;
        }
        let msg_size_bytes_max = msg_size_bytes_max.min(sh.cfg.msg_size_bytes_max);
        let slots = slots.min(sh.cfg.slots_max);
        let id = (u64::from_le_bytes(random_bytes()) >> 1) | 1;
        let server_nonce = random_bytes();
        let session_token = random_bytes();
        let bind_key = auth::bind_key(sh.cfg.secret.as_deref(), &session_token);
        let reclaim = flags & session_flags::RECLAIM != 0;
        info!(session = id, client = %client_name, peer = %self.t.peer(), slots, msg_size_bytes_max, reclaim, "session created");
        sh.stats.sessions_created.fetch_add(1, Relaxed);
        if !reclaim && !auth_required {
            // Nothing to reclaim: the grace period need not wait for this client. (With a
            // secret, once SESSION_AUTH proves the client id: an unauthenticated peer must
            // not end another client's reclaim.)
            sh.grace.client_done(&client_name);
        }
        let info = Arc::new(SessionInfo::new(
            id,
            client_name,
            slots,
            self.t.peer(),
            server_nonce,
            bind_key,
        ));
        *info.owner.lock().unwrap() = Some(self.link.clone());
        if !auth_required {
            sh.sessions.insert(info.clone());
            self.admitted(sh);
        }
        self.session = Some(Session {
            id,
            info,
            cache: ReplyCache::new(slots, sh.cfg.reply_cache_slot_bytes),
            exec_digest: vec![0; slots as usize],
            answered_here: vec![false; slots as usize],
            msg_size_bytes_max,
            cred: None,
            client_id: client_id.to_vec(),
            slots: ServerSlots::new(slots),
            auth_required,
            authenticated: false,
            server_nonce,
            opens: HashMap::new(),
            proxied: HashMap::new(),
            next_open_id: 1,
            holds_state: false,
            reclaim,
        });
        let reply = Reply::SessionCreate {
            msg_size_bytes_max,
            slots,
            inline_threshold: sh
                .cfg
                .inline_threshold_for(self.t.is_shared_memory())
                .min(msg_size_bytes_max - INLINE_HEADROOM_BYTES),
            auth: if auth_required { AuthMethod::HmacSha256 } else { AuthMethod::None },
            server_nonce,
            direct_bytes_max: sh.cfg.direct_bytes_max,
            batch_max: sh.cfg.batch_max,
            host_id: sh.host_id,
            shm_path: sh.shm_path.as_bytes(),
            boot_verifier: sh.boot_verifier,
            grace_ms: sh.grace.ms_left(),
            session_token,
        };
        // Before authentication the connection keeps its handshake-sized buffers.
        let msg_size_bytes_max =
            if auth_required { super::super::HANDSHAKE_MSG_BYTES_MAX } else { msg_size_bytes_max };
        Ok(Attached { reply, session_id: id, msg_size_bytes_max })
    }

    /// May `client` have a session on this connection (SESSION_CREATE, SESSION_BIND)?
    /// Not if it is fenced, nor beyond its connections-per-client limit.
    fn admit_client(&self, sh: &Shared, client: &str) -> Result<(), Status> {
        if sh.sessions.is_fenced(client) {
            sh.stats.fenced_refusals.fetch_add(1, Relaxed);
            peer_warn!(sh, self.t.peer(), client, "session refused: client is fenced");
            return Err(Status::Fenced);
        }
        if sh.sessions.bound_count(client) >= sh.cfg.connections_per_client_max {
            peer_warn!(
                sh,
                self.t.peer(),
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
    pub(in crate::conn) fn session_bind(
        &mut self,
        sh: &Shared,
        h: &Header,
        client_nonce: &[u8; NONCE_LEN],
        proof: &[u8; NONCE_LEN],
        client_id: &[u8],
    ) -> Result<Attached<'static>, Status> {
        if self.session.is_some() {
            return Err(Status::Inval);
        }
        let client_name = String::from_utf8_lossy(client_id);
        self.admit_client(sh, &client_name)?;
        // Always a proof: keyed by the session token (and the shared secret, if any), so
        // a client that did not create the session cannot take it over.
        let verify = |nonce: &[u8; NONCE_LEN], key: &[u8; NONCE_LEN]| {
            auth::verify_bind(key, h.session_id, nonce, client_nonce, client_id, proof)
        };
        let next_nonce = random_bytes();
        let (mut s, info) = match sh.sessions.take(
            h.session_id,
            client_id,
            client_nonce,
            verify,
            next_nonce,
        ) {
            Take::Bound(s, info) => (s, info),
            Take::Busy => {
                // The old connection is being closed by its worker; the client retries.
                sh.wake_workers();
                sh.stats.binds_delayed.fetch_add(1, Relaxed);
                return Err(Status::Delay);
            }
            Take::AuthFailed => {
                sh.stats.auth_failures.fetch_add(1, Relaxed);
                peer_warn!(sh, self.t.peer(), session = h.session_id, client = %client_name, "bind refused: authentication failed");
                return Err(Status::AuthFailed);
            }
            Take::Unknown | Take::WrongClient => {
                sh.stats.binds_refused.fetch_add(1, Relaxed);
                debug!(session = h.session_id, client = %client_name, "bind refused: no such session for this client");
                return Err(Status::BadSession);
            }
        };
        let server_proof =
            auth::bind_server_proof(&info.bind_key, s.id, client_nonce, &next_nonce, &s.client_id);
        sh.stats.binds.fetch_add(1, Relaxed);
        *info.peer.lock().unwrap() = self.t.peer();
        info!(session = s.id, client = %s.info.client_id, peer = %self.t.peer(), "session bound to a new connection");
        let reply = Reply::SessionBind {
            slots: s.slots.granted(),
            target_highest: s.slots.target_highest(),
            next_nonce,
            server_proof,
        };
        let (session_id, msg_size_bytes_max) = (s.id, s.msg_size_bytes_max);
        // Replies sent on the old connection may be lost: a request resent here is a
        // retransmission (executed again or answered from the cache).
        s.answered_here.fill(false);
        *info.owner.lock().unwrap() = Some(self.link.clone());
        self.session = Some(*s);
        self.admitted(sh);
        Ok(Attached { reply, session_id, msg_size_bytes_max })
    }

    /// A trunking SESSION_BIND (`slot_id` = `BIND_TRUNK`): after the same proof as a
    /// bind, this connection joins the session where it is held — handed over (with its
    /// encoded reply, which the owning worker sends) to that worker, which adds it to the
    /// session's connections (`Conn::attach_trunk`). A parked session is bound as by an
    /// ordinary bind. Only TCP connections trunk: a shared-memory session is one ring
    /// pair.
    pub(in crate::conn) fn session_trunk(
        &mut self,
        sh: &Shared,
        out: &mut Vec<u8>,
        h: &Header,
        client_nonce: &[u8; NONCE_LEN],
        proof: &[u8; NONCE_LEN],
        client_id: &[u8],
    ) -> ConnFate {
        let refuse = |c: &mut Conn, out: &mut Vec<u8>, st: Status| {
            c.respond(sh, out, h, &Reply::Error(st), SlotUse::Untouched)
        };
        if self.session.is_some() {
            return refuse(self, out, Status::Inval);
        }
        if self.t.is_shared_memory() || self.peer_ip.is_none() {
            return refuse(self, out, Status::NotSupp);
        }
        let client_name = String::from_utf8_lossy(client_id);
        if sh.sessions.is_fenced(&client_name) {
            sh.stats.fenced_refusals.fetch_add(1, Relaxed);
            return refuse(self, out, Status::Fenced);
        }
        let verify = |nonce: &[u8; NONCE_LEN], key: &[u8; NONCE_LEN]| {
            auth::verify_bind(key, h.session_id, nonce, client_nonce, client_id, proof)
        };
        let next_nonce = random_bytes();
        let (info, owner, proved) = match sh.sessions.trunk(
            h.session_id,
            client_id,
            client_nonce,
            verify,
            next_nonce,
        ) {
            Trunk::Add(info, owner, proved) => (info, owner, proved),
            Trunk::Parked => {
                let r = self.session_bind(sh, h, client_nonce, proof, client_id);
                return self.respond_attached(sh, out, *h, r);
            }
            Trunk::AuthFailed => {
                sh.stats.auth_failures.fetch_add(1, Relaxed);
                peer_warn!(sh, self.t.peer(), session = h.session_id, client = %client_name, "trunking bind refused: authentication failed");
                return refuse(self, out, Status::AuthFailed);
            }
            Trunk::Unknown | Trunk::WrongClient => {
                sh.stats.binds_refused.fetch_add(1, Relaxed);
                return refuse(self, out, Status::BadSession);
            }
        };
        let server_proof =
            auth::bind_server_proof(&info.bind_key, info.id, client_nonce, &next_nonce, client_id);
        let reply = Reply::SessionBind {
            slots: info.slots_granted,
            target_highest: info.target_highest.load(Relaxed),
            next_nonce,
            server_proof,
        };
        let mut rh = *h;
        rh.session_id = info.id;
        self.encode(sh, out, &rh, &reply);
        // Proven: the connection is no longer an unauthenticated one.
        self.admitted(sh);
        debug!(session = info.id, peer = %self.t.peer(), "trunking bind: joining the session's worker");
        self.handover = Some(crate::Handover {
            session_id: info.id,
            t: None,
            peer_ip: self.peer_ip,
            reply: std::mem::take(out),
            owner,
            info,
            proved,
        });
        ConnFate::Close
    }

    pub(super) fn session_auth(
        &mut self,
        sh: &Shared,
        client_nonce: &[u8; NONCE_LEN],
        proof: &[u8; NONCE_LEN],
    ) -> Result<Reply<'static>, Status> {
        let peer = self.t.peer();
        let s = self.session_mut();
        if !s.auth_required || s.authenticated {
            return Err(Status::Inval);
        }
        let secret = sh.cfg.secret.as_deref().expect("auth_required implies a secret");
        if !auth::verify_client(secret, s.id, &s.server_nonce, client_nonce, &s.client_id, proof) {
            sh.stats.auth_failures.fetch_add(1, Relaxed);
            peer_warn!(sh, peer, session = s.id, client = %s.info.client_id, "authentication failed");
            return Err(Status::AuthFailed);
        }
        let server_proof =
            auth::server_proof(secret, s.id, &s.server_nonce, client_nonce, &s.client_id);
        // Proven: now the session counts, can be listed, fenced and re-bound, and the
        // connection gets the negotiated message size.
        count_session(sh)?;
        let s = self.session_mut();
        s.authenticated = true;
        if !s.reclaim {
            sh.grace.client_done(&s.info.client_id);
        }
        sh.sessions.insert(s.info.clone());
        let msg_size_bytes_max = s.msg_size_bytes_max as usize;
        self.t.set_msg_size_bytes_max(msg_size_bytes_max);
        self.admitted(sh);
        Ok(Reply::SessionAuth { server_proof })
    }

    pub(super) fn set_cred(
        &mut self,
        sh: &Shared,
        uid: u32,
        gid: u32,
        groups: &[u8],
    ) -> Result<Reply<'static>, Status> {
        if !sh.cfg.identity.accepts_set_cred() {
            return Err(Status::NotSupp);
        }
        let s = self.session_mut();
        s.cred = Some(cred::Cred { uid, gid, groups: cred::parse_groups(groups) });
        // At once: later elements of a chain run with it too.
        cred::apply(sh, s.cred.as_ref())?;
        Ok(Reply::Empty)
    }
}
