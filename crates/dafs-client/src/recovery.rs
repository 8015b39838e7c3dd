//! Connection recovery: after a broken connection, reconnect, re-bind the session
//! (SESSION_BIND) and resend what was in flight; after a lost session, start a new one.

use std::time::{Duration, Instant};

use dafs_proto::{auth, Header, Opcode, Reply, Request, Status};
use dafs_transport::Wait;

use crate::error::unexpected_reply;
use crate::{Client, Error, ProtocolViolation, Result};

/// First pause between reconnect attempts; it doubles after each failed one, up to
/// [`RECONNECT_BACKOFF_MAX`]. Short, since a server that restarts its listener or a
/// path that flapped is back within milliseconds.
const RECONNECT_BACKOFF_START: Duration = Duration::from_millis(5);

/// Longest pause between reconnect attempts: a server coming back is noticed within
/// half a second without hammering it.
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_millis(500);

/// Refused connections (nobody listening) after which recovery gives up before its
/// timeout: the server process is gone, and a restarted one would not know the session.
/// More than one, so a listener being re-created is not mistaken for that.
const RECONNECT_REFUSED_MAX: u32 = 3;

impl Client {
    /// Start a new session with the same server and configuration after the old one is
    /// gone ([`Client::session_lost`]), keeping registered memory. Open files of the old
    /// session are invalid: re-open them with [`Client::reopen`]. Byte-range locks are
    /// gone too (the server released them with the session).
    ///
    /// Requests still in flight in the old session (the server died before answering
    /// them) complete first, with the error the old session's calls get: they can never
    /// be answered, and resending them into the new session could execute them twice.
    pub fn reestablish(&mut self) -> Result<()> {
        self.fail_all("a new session replaces this one");
        // Nothing of the old session is carried over (see `reclaim` for restarts).
        self.held.clear();
        self.drop_extra_channels();
        // The transport stays this client's whatever happens, so a failed attempt (e.g.
        // still fenced) can simply be repeated.
        self.t.reconnect(self.cfg.connect_timeout)?;
        let cfg = self.cfg.clone();
        let n = Self::negotiate(self.t.as_mut(), &cfg)?;
        if let Err(e) = self.start_session(&n) {
            self.dead = true;
            return Err(e);
        }
        self.stats.reconnects += 1;
        self.add_channels();
        Ok(())
    }

    /// The transport failed: recover the session on a new connection (if configured) or
    /// fail everything in flight.
    pub(crate) fn connection_broke(&mut self, e: dafs_transport::TransportError) -> Result<()> {
        if self.cfg.reconnect && !self.dead {
            if let Some(why) = self.overdue() {
                return Err(self.time_out(&format!("{e}; {why}")));
            }
            // The session moves to one new connection first; the others follow.
            self.drop_extra_channels();
            let mut r = self.recover(&e);
            if matches!(r, Err(Error::Status(Status::BadSession))) {
                // The server no longer knows the session: restarted? Reclaim what we held.
                r = self.reclaim_after_restart();
            }
            match r {
                Ok(()) => {
                    self.add_channels();
                    return Ok(());
                }
                Err(err) => {
                    tracing::debug!("session recovery failed: {err}");
                    let why = format!("{e}; recovery failed: {err}");
                    // The session's fate (BADSESSION, FENCED) or an authentication failure
                    // says more than the broken connection; otherwise report the break
                    // itself (its errno, e.g. ENOTCONN), not the last reconnect attempt's.
                    let ret = match err {
                        Error::Status(st) => {
                            self.dead_status = Some(st);
                            Error::Status(st)
                        }
                        Error::Auth(_) => err,
                        _ => Error::Transport(e),
                    };
                    self.fail_all(&why);
                    return Err(ret);
                }
            }
        }
        self.fail_all(&e.to_string());
        Err(Error::Transport(e))
    }

    /// Reconnect, re-bind the session (SESSION_BIND, authenticated like the session) and
    /// resend every request in flight with its original slot and sequence id: the
    /// server executes those it never executed and answers the others from its reply
    /// cache, so each takes effect exactly once.
    fn recover(&mut self, cause: &dafs_transport::TransportError) -> Result<()> {
        tracing::info!(
            session = format_args!("{:016x}", self.session_id),
            "connection lost ({cause}); reconnecting"
        );
        let deadline = Instant::now() + self.cfg.reconnect_timeout;
        let mut backoff = RECONNECT_BACKOFF_START;
        let mut last_err;
        let mut refused = 0;
        loop {
            match self.try_bind() {
                Ok(()) => break,
                // Nobody listens: the server process is gone. A restarted server would
                // not know the session anyway, so do not wait out the whole timeout.
                Err(Error::Transport(dafs_transport::TransportError::Io(e)))
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ECONNREFUSED) | Some(libc::ENOENT)
                    ) && {
                        refused += 1;
                        refused >= RECONNECT_REFUSED_MAX
                    } =>
                {
                    return Err(Error::Transport(dafs_transport::TransportError::Io(e)));
                }
                // The session is gone (lease expired, server restarted) or refused:
                // retrying cannot help.
                Err(Error::Status(st)) if st != Status::Delay => return Err(Error::Status(st)),
                Err(e @ Error::Auth(_)) => return Err(e),
                Err(e) => last_err = e,
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(last_err);
            }
            std::thread::sleep(backoff.min(deadline - now));
            backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
        }
        self.stats.reconnects += 1;
        // Resend in slot order (any order is correct: slots are independent).
        for slot in 0..self.inflight.len() {
            if let Some(s) = &mut self.inflight[slot] {
                s.resends += 1;
                self.stats.retransmits += 1;
                let buf = std::mem::take(&mut self.reqbufs[slot]);
                s.chan = 0;
                let r = self.t.send(&buf);
                self.reqbufs[slot] = buf;
                if let Err(e) = r {
                    // Broke again at once: the caller's next progress recovers again.
                    tracing::debug!("resend failed: {e}");
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// One attempt: new connection, SESSION_BIND, wait for its answer.
    fn try_bind(&mut self) -> Result<()> {
        self.t.reconnect(self.cfg.connect_timeout)?;
        Self::keepalive(self.t.as_ref());
        let mut t = std::mem::replace(&mut self.t, Box::new(crate::connect::NoTransport));
        let r = self.bind_on(t.as_mut(), false);
        self.t = t;
        r
    }

    /// SESSION_BIND on `t` (a connection without a session): `trunk` adds it to the
    /// session's connections, otherwise the session moves to it.
    pub(crate) fn bind_on(
        &mut self,
        t: &mut dyn dafs_transport::ClientTransport,
        trunk: bool,
    ) -> Result<()> {
        // Always proven, with or without a shared secret: the key holds the session token
        // only this client received, so no other client can take the session over.
        let mut client_nonce = [0u8; 32];
        getrandom::getrandom(&mut client_nonce).map_err(|e| Error::Auth(e.to_string()))?;
        let proof = auth::bind_proof(
            &self.bind_key,
            self.session_id,
            &self.bind_nonce,
            &client_nonce,
            self.cfg.client_id.as_bytes(),
        );
        let mark = if trunk { dafs_proto::limits::BIND_TRUNK } else { 0 };
        let h = Header::request(Opcode::SessionBind, self.session_id, mark, 0, 0);
        let mut buf = Vec::new();
        dafs_proto::encode_request(
            &h,
            &Request::SessionBind { client_nonce, proof, client_id: self.cfg.client_id.as_bytes() },
            &mut buf,
            self.msg_size_bytes_max,
        )?;
        t.send(&buf)?;
        let msg = t.recv(Wait::Timeout(self.cfg.connect_timeout))?.ok_or(Error::TimedOut)?;
        let (rh, reply) = dafs_proto::decode_reply(&msg, self.msg_size_bytes_max)?;
        if rh.opcode != Opcode::SessionBind {
            return Err(unexpected_reply(Opcode::SessionBind));
        }
        if rh.session_id != self.session_id {
            return Err(ProtocolViolation::Misaddressed {
                session_id: rh.session_id,
                slot_id: rh.slot_id,
            }
            .into());
        }
        match reply {
            Reply::SessionBind { slots, target_highest, next_nonce, server_proof } => {
                if slots != self.slots.granted() {
                    return Err(ProtocolViolation::BindSlotsChanged {
                        granted: self.slots.granted(),
                        bound: slots,
                    }
                    .into());
                }
                let expect = auth::bind_server_proof(
                    &self.bind_key,
                    self.session_id,
                    &client_nonce,
                    &next_nonce,
                    self.cfg.client_id.as_bytes(),
                );
                if expect != server_proof {
                    return Err(Error::Auth(
                        "the server could not prove it knows this session's bind key".into(),
                    ));
                }
                self.bind_nonce = next_nonce;
                self.slots.set_target(target_highest);
                Ok(())
            }
            Reply::Error(st) => Err(Error::Status(st)),
            _ => Err(unexpected_reply(Opcode::SessionBind)),
        }
    }
}
