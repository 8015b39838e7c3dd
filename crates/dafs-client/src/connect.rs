//! Connection setup: connect (TCP, TLS, shared memory, and the switch from TCP to shared
//! memory on the server's host), SESSION_CREATE negotiation, authentication, and the
//! session's end when the client is dropped.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use dafs_proto::session::ClientSlots;
use dafs_proto::{auth, limits, AuthMethod, FileHandle, Header, Opcode, Reply, Request, Status};
use dafs_transport::shm::ShmClient;
use dafs_transport::tcp::TcpClient;
use dafs_transport::{Access, ClientTransport, TransportStats, Wait};

use crate::completions::CgTable;
use crate::config::parse_url;
use crate::error::unexpected_reply;
use crate::inflight::small_inflight_count;
use crate::{Client, ClientConfig, ClientStats, Error, ProtocolViolation, Provider, Result};

/// What SESSION_CREATE negotiated.
pub(crate) struct Negotiated {
    session_id: u64,
    msg_size_bytes_max: u32,
    slots: u32,
    threshold: u32,
    auth: AuthMethod,
    server_nonce: [u8; 32],
    direct_bytes_max: u32,
    batch_max: u32,
    offer: ShmOffer,
    pub(crate) boot_verifier: u64,
    /// Milliseconds left of the server's grace period (0: reclaims would be refused).
    pub(crate) grace_ms: u32,
    session_token: [u8; 32],
}

/// Room a message needs beyond an inline payload of the threshold's size, for the header
/// and the fixed part of READ_INLINE/WRITE_INLINE: a server whose threshold leaves less
/// could not carry the inline transfers it promises.
const INLINE_HEADROOM_BYTES: usize = 1024;

impl Negotiated {
    /// Every value in the range the protocol and the client's request
    /// (`asked_msg_size`) allow.
    fn check(&self, asked_msg_size: u32) -> Result<(), ProtocolViolation> {
        let out_of_range = |limit, value: u32| {
            Err(ProtocolViolation::NegotiatedOutOfRange { limit, value: value.into() })
        };
        let msg_sizes = limits::MSG_SIZE_BYTES_MIN..=asked_msg_size.max(limits::MSG_SIZE_BYTES_MIN);
        if !msg_sizes.contains(&self.msg_size_bytes_max) {
            return out_of_range("message size", self.msg_size_bytes_max);
        }
        if !(1..=limits::SLOTS_MAX).contains(&self.slots) {
            return out_of_range("slot count", self.slots);
        }
        if self.threshold as usize + INLINE_HEADROOM_BYTES > self.msg_size_bytes_max as usize {
            return out_of_range("inline threshold", self.threshold);
        }
        if !(1..=limits::DIRECT_BYTES_MAX).contains(&self.direct_bytes_max) {
            return out_of_range("direct transfer maximum", self.direct_bytes_max);
        }
        Ok(())
    }
}

/// What a server's SESSION_CREATE reply offered for same-host connections.
#[derive(Debug, Default)]
struct ShmOffer {
    host_id: [u8; 16],
    shm_path: String,
}

impl Client {
    /// Connect and establish a session. `target` is `host:port` (TCP; on the server's
    /// host the library switches to shared memory by itself unless
    /// `cfg.provider == Provider::Tcp`), `dafs+tls://host:port` (TCP over TLS, also
    /// selected by `cfg.tls`), `dafs+shm:///path/to/socket`, or `dafs+ofi://host:port`
    /// / `dafs+ofi+PROVIDER://host:port` (libfabric, also selected by
    /// [`Provider::Ofi`]).
    pub fn connect(target: &str, cfg: ClientConfig) -> Result<Client> {
        if let Some(c) = crate::cluster::connect(target, &cfg)? {
            return Ok(c);
        }
        if let Some(t) = crate::ofi::connect(target, &cfg)? {
            // Ask for no more than the provider's receive buffers hold.
            let max = u32::try_from(t.msg_size_bytes_max()).unwrap_or(u32::MAX);
            let cfg = ClientConfig { msg_size_bytes_max: cfg.msg_size_bytes_max.min(max), ..cfg };
            return Ok(Self::establish(t, &cfg)?.0);
        }
        if let Some(path) = target.strip_prefix("dafs+shm://") {
            let t = ShmClient::connect(std::path::Path::new(path), cfg.connect_timeout)?;
            return Ok(Self::establish(Box::new(t), &cfg)?.0);
        }
        let (target, tls) = match target.strip_prefix("dafs+tls://") {
            Some(hostport) => (hostport, Some(cfg.tls.clone().unwrap_or_default())),
            None => (target, cfg.tls.clone()),
        };
        let t = match &tls {
            Some(opts) => TcpClient::connect_tls(target, cfg.connect_timeout, opts)?,
            None => TcpClient::connect(target, cfg.connect_timeout)?,
        };
        let (mut c, offer) = Self::establish(Box::new(t), &cfg)?;
        if cfg.provider == Provider::Auto
            && !offer.shm_path.is_empty()
            && offer.host_id == dafs_transport::shm::host_id()
        {
            match ShmClient::connect(std::path::Path::new(&offer.shm_path), cfg.connect_timeout) {
                Ok(shm) => {
                    // The shared-memory session replaces the TCP one: end that first (and
                    // wait for it), so the server never counts both against this client's
                    // limits. Its connection stays open in case the switch fails.
                    c.call(&Request::SessionDestroy).and_then(|m| c.decode(&m).map(|_| ()))?;
                    c.dead = true;
                    let tcp = std::mem::replace(&mut c.t, Box::new(NoTransport));
                    match Self::establish(Box::new(shm), &cfg) {
                        Ok((shm_client, _)) => return Ok(shm_client),
                        Err(e) => {
                            tracing::debug!("shared-memory session failed, staying on tcp: {e}");
                            return Ok(Self::establish(tcp, &cfg)?.0);
                        }
                    }
                }
                Err(e) => tracing::debug!(
                    "shared-memory connect to {} failed, staying on tcp: {e}",
                    offer.shm_path
                ),
            }
        }
        c.add_channels();
        Ok(c)
    }

    /// Connect from a `dafs://host:port/...`, `dafs+tls://host:port/...` or
    /// `dafs+shm:///x.sock/...` URL (the path part is ignored here).
    pub fn connect_url(url: &str, cfg: ClientConfig) -> Result<Client> {
        let (url, connections) = crate::config::split_url_options(url)?;
        let cfg = ClientConfig { connections: connections.unwrap_or(cfg.connections), ..cfg };
        let (addr, _) = parse_url(url)?;
        Self::connect(&addr, cfg)
    }

    /// Establish a session over any provider.
    pub fn with_transport(t: Box<dyn ClientTransport>, cfg: ClientConfig) -> Result<Client> {
        let mut c = Self::establish(t, &cfg)?.0;
        c.add_channels();
        Ok(c)
    }

    /// Keepalive on TCP connections, so a vanished server is noticed by a waiting call.
    pub(crate) fn keepalive(t: &dyn ClientTransport) {
        if t.provider() == "tcp" {
            // SAFETY: the transport's descriptor, alive while `t` is borrowed.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(t.raw_fd()) };
            if let Err(e) = dafs_transport::set_tcp_keepalive(fd) {
                tracing::debug!("cannot enable TCP keepalive: {e}");
            }
        }
    }

    /// SESSION_CREATE on `t`: the negotiated values, checked to be in range.
    pub(crate) fn negotiate(t: &mut dyn ClientTransport, cfg: &ClientConfig) -> Result<Negotiated> {
        Self::negotiate_flags(t, cfg, 0)
    }

    /// SESSION_CREATE with `flags` (`session_flags::RECLAIM` after a server restart).
    pub(crate) fn negotiate_flags(
        t: &mut dyn ClientTransport,
        cfg: &ClientConfig,
        flags: u32,
    ) -> Result<Negotiated> {
        Self::keepalive(t);
        let want_auth =
            if cfg.secret.is_some() { AuthMethod::HmacSha256 } else { AuthMethod::None };
        let mut buf = Vec::new();
        let h = Header::request(Opcode::SessionCreate, 0, 0, 0, 0);
        let req = Request::SessionCreate {
            msg_size_bytes_max: cfg.msg_size_bytes_max,
            slots: cfg.slots.clamp(1, limits::SLOTS_MAX),
            auth: want_auth,
            flags,
            client_id: cfg.client_id.as_bytes(),
        };
        dafs_proto::encode_request(&h, &req, &mut buf, t.msg_size_bytes_max())?;
        t.send(&buf)?;
        let msg = t.recv(Wait::Timeout(cfg.connect_timeout))?.ok_or(Error::TimedOut)?;
        let (rh, reply) = dafs_proto::decode_reply(&msg, t.msg_size_bytes_max())?;
        let n = match reply {
            Reply::SessionCreate {
                msg_size_bytes_max,
                slots,
                inline_threshold,
                auth,
                server_nonce,
                direct_bytes_max,
                batch_max,
                host_id,
                shm_path,
                boot_verifier,
                grace_ms,
                session_token,
            } => Negotiated {
                session_id: rh.session_id,
                msg_size_bytes_max,
                slots,
                threshold: inline_threshold,
                auth,
                server_nonce,
                direct_bytes_max,
                batch_max,
                offer: ShmOffer {
                    host_id,
                    shm_path: String::from_utf8_lossy(shm_path).into_owned(),
                },
                boot_verifier,
                grace_ms,
                session_token,
            },
            Reply::Error(Status::AuthRequired) => {
                return Err(Error::Auth(
                    "the server requires a shared secret (use --secret-file)".into(),
                ))
            }
            Reply::Error(s) => return Err(Error::Status(s)),
            _ => return Err(unexpected_reply(Opcode::SessionCreate)),
        };
        n.check(cfg.msg_size_bytes_max)?;
        t.set_msg_size_bytes_max(n.msg_size_bytes_max as usize);
        Ok(n)
    }

    fn establish(
        mut t: Box<dyn ClientTransport>,
        cfg: &ClientConfig,
    ) -> Result<(Client, ShmOffer)> {
        let n = Self::negotiate(t.as_mut(), cfg)?;
        let base_spin = t.default_spin();
        let mut c = Client {
            t,
            session_id: 0,
            slots: ClientSlots::new(1),
            inflight: Vec::new(),
            msg_size_bytes_max: 0,
            inline_threshold: 0,
            direct_bytes_max: 0,
            batch_max: 0,
            root: FileHandle([0; FileHandle::LEN]),
            regions: HashMap::new(),
            cgs: CgTable::new(),
            next_req: 1,
            sync_done: None,
            reqbufs: Vec::new(),
            stats: ClientStats::default(),
            dead: false,
            dead_status: None,
            timed_out: false,
            cfg: cfg.clone(),
            bind_nonce: [0; 32],
            bind_key: [0; 32],
            boot_verifier: 0,
            small_inflight: small_inflight_count(0),
            io_bytes_inflight: 0,
            base_spin,
            spin_now: base_spin,
            held: Default::default(),
            sync_failed: None,
            reclaiming: false,
            cluster: None,
            extra: Vec::new(),
            next_send: 0,
            next_recv: 0,
            chan_hint: None,
        };
        c.start_session(&n)?;
        Ok((c, n.offer))
    }

    /// Take on the session `n` describes: fresh slots, then authenticate (if the server
    /// requires it) and fetch the export's root handle.
    pub(crate) fn start_session(&mut self, n: &Negotiated) -> Result<()> {
        self.session_id = n.session_id;
        self.slots = ClientSlots::new(n.slots);
        self.inflight = (0..n.slots).map(|_| None).collect();
        self.reqbufs = (0..n.slots).map(|_| Vec::new()).collect();
        self.msg_size_bytes_max = n.msg_size_bytes_max as usize;
        self.inline_threshold = n.threshold as usize;
        self.direct_bytes_max = n.direct_bytes_max as usize;
        self.batch_max = n.batch_max;
        self.bind_nonce = n.server_nonce;
        self.bind_key = auth::bind_key(self.cfg.secret.as_deref(), &n.session_token);
        self.boot_verifier = n.boot_verifier;
        self.dead = false;
        self.dead_status = None;
        self.timed_out = false;
        // Nothing is in flight (a new client, or `reestablish` checked): the count starts
        // over, sized for this session's slots.
        assert!(self.small_inflight.is_zero(), "no request is in flight");
        self.small_inflight = small_inflight_count(n.slots);
        self.sync_done = None;
        let cfg = &self.cfg;
        match (&cfg.secret, n.auth) {
            (Some(secret), AuthMethod::HmacSha256) => {
                let secret = secret.clone();
                let client_id = cfg.client_id.clone();
                let mut client_nonce = [0u8; 32];
                getrandom::getrandom(&mut client_nonce).map_err(|e| Error::Auth(e.to_string()))?;
                let proof = auth::client_proof(
                    &secret,
                    self.session_id,
                    &n.server_nonce,
                    &client_nonce,
                    client_id.as_bytes(),
                );
                let m = self.call(&Request::SessionAuth { client_nonce, proof })?;
                let (_, r) = self.decode(&m)?;
                let Reply::SessionAuth { server_proof } = r else {
                    return Err(unexpected_reply(Opcode::SessionAuth));
                };
                if !auth::verify_server(
                    &secret,
                    self.session_id,
                    &n.server_nonce,
                    &client_nonce,
                    client_id.as_bytes(),
                    &server_proof,
                ) {
                    return Err(Error::Auth(
                        "the server could not prove it holds the shared secret".into(),
                    ));
                }
            }
            (Some(_), AuthMethod::None) => {
                return Err(Error::Auth(
                    "a secret is configured but the server does not authenticate".into(),
                ))
            }
            (None, AuthMethod::HmacSha256) => {
                return Err(Error::Auth("the server requires a shared secret".into()))
            }
            (None, AuthMethod::None) => {}
        }
        let export = self.cfg.export.clone();
        let m = self.call(&Request::GetRootHandle { export: export.as_bytes() })?;
        match self.decode(&m)?.1 {
            Reply::Handle { fh, .. } => self.root = fh,
            _ => return Err(unexpected_reply(Opcode::GetRootHandle)),
        }
        Ok(())
    }
}

/// How long dropping a client waits for I/O still in flight: long enough for any one
/// transfer (at most `DIRECT_BYTES_MAX`) to finish, short enough that a dead server does
/// not hang the application's exit.
const DROP_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long dropping a client waits for the answer to SESSION_DESTROY: a round trip on a
/// live server; a dead or hung one must not hold up the application's exit for long.
const DROP_DESTROY_TIMEOUT: Duration = Duration::from_secs(2);

impl Drop for Client {
    fn drop(&mut self) {
        // Never reconnect from a destructor: a dead server must not hold it up.
        self.cfg.reconnect = false;
        // I/O still in flight may name application memory (registered with
        // register_raw, or reached by address on shared memory): wait for it, bounded,
        // so the server never writes there after the client is gone.
        let deadline = Instant::now() + DROP_DRAIN_TIMEOUT;
        while !self.dead && self.inflight.iter().any(Option::is_some) {
            let now = Instant::now();
            if now >= deadline || self.progress(Wait::Timeout(deadline - now)).is_err() {
                break;
            }
        }
        // Then tell the server the session is over (it also ends with the connection).
        if !self.dead {
            if let Some((slot, seq)) = self.slots.acquire() {
                let h = Header::request(Opcode::SessionDestroy, self.session_id, slot, seq, slot);
                let mut buf = std::mem::take(&mut self.reqbufs[slot as usize]);
                buf.clear();
                if dafs_proto::encode_request(
                    &h,
                    &Request::SessionDestroy,
                    &mut buf,
                    self.msg_size_bytes_max,
                )
                .is_ok()
                    && self.t.send(&buf).is_ok()
                {
                    // Wait for the answer (bounded): the server ends the session before
                    // it answers, so once the client is gone its locks and opens are
                    // released for other sessions, as close(2) releases a process's.
                    // Nothing else is in flight (drained above): the next message is it.
                    let _ = self.t.recv(Wait::Timeout(DROP_DESTROY_TIMEOUT));
                }
            }
        }
    }
}

/// Placeholder transport of a client whose transport moved to a new session.
pub(crate) struct NoTransport;

impl ClientTransport for NoTransport {
    fn msg_size_bytes_max(&self) -> usize {
        limits::MSG_SIZE_BYTES_MIN as usize
    }
    fn set_msg_size_bytes_max(&mut self, _n: usize) {}
    fn send(&mut self, _msg: &[u8]) -> std::result::Result<(), dafs_transport::TransportError> {
        Err(dafs_transport::TransportError::Closed)
    }
    fn recv(
        &mut self,
        _wait: Wait,
    ) -> std::result::Result<Option<Vec<u8>>, dafs_transport::TransportError> {
        Err(dafs_transport::TransportError::Closed)
    }
    fn recycle(&mut self, _buf: Vec<u8>) {}
    fn set_spin(&mut self, _spin: Duration) {}
    unsafe fn register(
        &mut self,
        _ptr: *mut u8,
        _len: usize,
        _access: Access,
    ) -> std::result::Result<u64, dafs_transport::TransportError> {
        Err(dafs_transport::TransportError::Closed)
    }
    fn deregister(&mut self, _key: u64) -> std::result::Result<(), dafs_transport::TransportError> {
        Err(dafs_transport::TransportError::Closed)
    }
    fn alloc_registered(
        &mut self,
        _len: usize,
    ) -> std::result::Result<(u64, *mut u8), dafs_transport::TransportError> {
        Err(dafs_transport::TransportError::Closed)
    }
    fn provider(&self) -> &'static str {
        "none"
    }
    fn stats(&self) -> TransportStats {
        TransportStats::default()
    }
    fn raw_fd(&self) -> std::os::fd::RawFd {
        -1
    }
}
