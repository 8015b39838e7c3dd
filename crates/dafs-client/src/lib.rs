//! # dafs-client — the DAFS user-level client library
//!
//! The client is a library, not a service: it starts **no threads** and runs no async
//! runtime. Requests are issued without blocking; completions advance whenever the
//! application calls into the library (`submit_*`, `poll`, `wait_*`, or any blocking
//! call, which is a thin wrapper over the asynchronous path).
//!
//! ```no_run
//! use dafs_client::{Client, ClientConfig, IoBuf, OpenOptions};
//! let mut c = Client::connect("127.0.0.1:7420", ClientConfig::default())?;
//! let f = c.open("data.bin", OpenOptions::read_write().create(true))?;
//! c.pwrite(&f, b"hello", 0)?;
//!
//! // Register memory once, reuse it: reads above the inline threshold are placed
//! // directly into it by the server.
//! let region = c.alloc_registered(1 << 20)?;
//! let cg = c.create_cg();
//! c.submit_read(&f, 0, IoBuf::Region { region, offset: 0, len: 1 << 20 }, cg, 7)?;
//! let done = c.wait_one(cg, None)?.expect("one completion");
//! assert_eq!(done.user_data, 7);
//! let n = done.result?;
//! assert_eq!(&c.region(region)?[..n], b"hello");
//! c.close(f)?;
//! # Ok::<(), dafs_client::Error>(())
//! ```
//!
//! ## DAFS semantics beyond NFS
//!
//! Batch I/O ([`Client::submit_batch`]), request chains ([`Chain`],
//! [`Client::open_and_read`], [`Client::create_and_write`]), cache hints
//! ([`Client::cache_hint`]), byte-range locks, extended open modes and named attributes:
//!
//! ```no_run
//! use dafs_client::{Client, ClientConfig, OpenOptions};
//! use dafs_client::dafs_proto::types::{cache_hint, nattr_flags};
//! use std::time::Duration;
//! let mut c = Client::connect("127.0.0.1:7420", ClientConfig::default())?;
//!
//! // Atomic append from many clients: the server picks (and returns) the offset.
//! let log = c.open("app.log", OpenOptions::write_only().create(true).append(true))?;
//! let at = c.append(&log, b"one record\n")?;
//!
//! // Byte-range locks (advisory, owned by this session): try, or wait bounded.
//! let db = c.open("table.db", OpenOptions::read_write().create(true))?;
//! c.lock(&db, 0, 4096, true)?;                       // exclusive, non-blocking
//! c.lock_wait(&db, 8192, 0, false, Duration::from_secs(1))?; // shared, to the end
//! c.unlock(&db, 0, 0)?;                              // everything this session holds
//!
//! // Create-unlinked: stage a file, then give it its name (or close to abort).
//! let tmp = c.open("result.dat", OpenOptions::read_write().unlinked(true))?;
//! c.pwrite(&tmp, b"complete contents", 0)?;
//! c.publish(&tmp)?;
//!
//! // Open key and share reservations (the Oracle Disk Manager identify pattern).
//! let owned = c.open("datafile", OpenOptions::read_write().create(true).key(b"instance-7").deny_write(true))?;
//!
//! // Hints and named attributes.
//! c.cache_hint(&db, 0, 0, cache_hint::RANDOM)?;
//! c.set_nattr("table.db", "schema-version", b"3", nattr_flags::CREATE)?;
//! assert_eq!(c.get_nattr("table.db", "schema-version")?, b"3");
//! # let _ = (at, owned);
//! # Ok::<(), dafs_client::Error>(())
//! ```

mod at;
mod error;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use dafs_proto::session::ClientSlots;
use dafs_proto::types::{open_flags, setattr_mask, DirEntries, OPEN_KEY_MAX};
use dafs_proto::{
    auth, limits, Attr, AuthMethod, FileHandle, FileType, FsStat, Header, Opcode, RemoteRegion,
    Reply, Request, SetAttrs, Status,
};
use dafs_transport::shm::ShmClient;
use dafs_transport::tcp::TcpClient;
use dafs_transport::{Access, ClientTransport, TransportStats, Wait};

pub use at::DirEntryAt;
pub use dafs_proto;
pub use dafs_transport::tls::TlsClientOptions;
pub use error::{Error, Result};

/// How to connect.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Identity presented to the server (default: `hostname:pid`).
    pub client_id: String,
    /// Shared secret for HMAC authentication; when set, the client refuses servers that
    /// cannot prove they hold it.
    pub secret: Option<Vec<u8>>,
    /// Slots (outstanding requests) to ask for; the server may grant fewer.
    pub slots: u32,
    /// Maximum message size to ask for; the server may lower it.
    pub max_msg_size: u32,
    /// Export name ("" = the server's default export).
    pub export: String,
    pub connect_timeout: Duration,
    /// Which provider to use for `host:port` targets (see [`Provider`]).
    pub provider: Provider,
    /// When the connection breaks, reconnect by itself, re-bind the session and resend
    /// what was in flight (exactly-once through the server's reply cache). Off: the
    /// first transport error fails every request and the client.
    pub reconnect: bool,
    /// How long to keep trying to reconnect before giving up (should stay below the
    /// server's lease, 90 s by default).
    pub reconnect_timeout: Duration,
    /// TLS for TCP connections. `Some`: every TCP connection is TLS, or the connect
    /// fails (a `dafs+tls://` target selects TLS too, with default options if `None`).
    /// With [`Provider::Auto`] a same-host client may still switch to shared memory
    /// after the TLS session (the offer arrived over the verified TLS channel; shared
    /// memory never leaves the host). [`Provider::Tcp`] stays on TLS.
    pub tls: Option<TlsClientOptions>,
}

/// Provider choice for TCP targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Use shared memory when the server offers it and runs on this host, else TCP.
    Auto,
    /// Always TCP.
    Tcp,
}

impl Default for ClientConfig {
    fn default() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        ClientConfig {
            client_id: format!("{}:{}", host.trim(), std::process::id()),
            secret: None,
            slots: 32,
            max_msg_size: limits::MSG_SIZE_DEFAULT,
            export: String::new(),
            connect_timeout: Duration::from_secs(5),
            provider: Provider::Auto,
            reconnect: true,
            reconnect_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}

/// What SESSION_CREATE negotiated.
struct Negotiated {
    session_id: u64,
    max_msg: u32,
    slots: u32,
    threshold: u32,
    auth: AuthMethod,
    server_nonce: [u8; 32],
    direct_max: u32,
    batch_max: u32,
    offer: ShmOffer,
}

/// What a server's SESSION_CREATE reply offered for same-host connections.
#[derive(Debug, Default)]
struct ShmOffer {
    host_id: [u8; 16],
    shm_path: String,
}

/// A registered memory region, owned by the client; access it with
/// [`Client::region`] / [`Client::region_mut`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegionId(pub u64);

/// A completion group: requests name one at submit; completions are reaped from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CgId(pub u32);

/// Identifies one submitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReqId(pub u64);

/// Memory for an asynchronous I/O.
#[derive(Debug)]
pub enum IoBuf {
    /// A range of a registered region: direct placement when above the threshold.
    Region { region: RegionId, offset: usize, len: usize },
    /// Memory owned by the request and handed back in the [`Completion`]. For reads,
    /// the Vec's length is the number of bytes to read. Above the threshold it is
    /// registered for the duration of the request (counted in [`ClientStats::off_direct_path`]).
    Vec(Vec<u8>),
}

/// A finished request.
#[derive(Debug)]
pub struct Completion {
    pub id: ReqId,
    pub user_data: u64,
    /// Bytes transferred.
    pub result: Result<usize>,
    /// For reads: the read reached end of file.
    pub eof: bool,
    /// The request's `IoBuf::Vec`, handed back.
    pub buf: Option<Vec<u8>>,
}

/// Counters a user can read to see which path their I/O took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub requests: u64,
    pub inline_reads: u64,
    pub inline_writes: u64,
    pub direct_reads: u64,
    pub direct_writes: u64,
    pub inline_bytes: u64,
    pub direct_bytes: u64,
    /// I/Os above the inline threshold whose memory was not pre-registered: the library
    /// registered it just for that request (or bounced it). Pre-register to avoid this.
    pub off_direct_path: u64,
    /// Times a submit found every slot busy.
    pub slot_waits: u64,
    pub errors: u64,
    /// Times the connection broke and the session was re-bound to a new one.
    pub reconnects: u64,
    /// Requests sent again after a reconnect.
    pub retransmits: u64,
    /// Replies that matched no request in flight (answers to duplicates), dropped.
    pub stale_replies: u64,
    pub transport: TransportStats,
}

/// An open file.
#[derive(Debug)]
pub struct File {
    open_id: u64,
    pub fh: FileHandle,
    /// Attributes at open time.
    pub attr: Attr,
    /// Position for [`Client::read`] / [`Client::write`].
    pub pos: u64,
    /// Path and options it was opened with, for [`Client::reopen`] after a session loss.
    origin: Option<(String, OpenOptions)>,
}

impl File {
    pub fn open_id(&self) -> u64 {
        self.open_id
    }
}

/// OPEN options, like `std::fs::OpenOptions`.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    flags: u32,
    mode: u32,
    key: [u8; OPEN_KEY_MAX],
    key_len: u8,
}

impl OpenOptions {
    const fn with(flags: u32) -> Self {
        OpenOptions { flags, mode: 0o644, key: [0; OPEN_KEY_MAX], key_len: 0 }
    }
    pub fn read() -> Self {
        Self::with(open_flags::READ)
    }
    pub fn write_only() -> Self {
        Self::with(open_flags::WRITE)
    }
    pub fn read_write() -> Self {
        Self::with(open_flags::READ | open_flags::WRITE)
    }
    /// Every write appends atomically: the server picks the offset (see [`Client::append`]).
    pub fn append(mut self, on: bool) -> Self {
        self.set(open_flags::APPEND, on);
        self
    }
    /// Create-unlinked: the file gets its name only at [`Client::publish`]; closing
    /// without publishing (or the session ending) discards it. Implies create + write.
    pub fn unlinked(mut self, on: bool) -> Self {
        self.set(open_flags::UNLINKED, on);
        if on {
            self.flags |= open_flags::CREATE | open_flags::WRITE
        }
        self
    }
    /// Remove the file's name when the last open of it (by any client) closes.
    pub fn delete_on_close(mut self, on: bool) -> Self {
        self.set(open_flags::DELETE_ON_CLOSE, on);
        self
    }
    /// While this open lasts, no other open may read the file.
    pub fn deny_read(mut self, on: bool) -> Self {
        self.set(open_flags::DENY_READ, on);
        self
    }
    /// While this open lasts, no other open may write the file.
    pub fn deny_write(mut self, on: bool) -> Self {
        self.set(open_flags::DENY_WRITE, on);
        self
    }
    /// Open key (at most 64 bytes): the first opener of a file sets it, every later
    /// opener must present the same key (`BadKey` otherwise) while any open lasts.
    /// A key longer than 64 bytes makes the open fail with `InvalidArgument`.
    pub fn key(mut self, key: &[u8]) -> Self {
        if key.len() > OPEN_KEY_MAX {
            self.key_len = u8::MAX; // refused at open()
            return self;
        }
        self.key[..key.len()].copy_from_slice(key);
        self.key_len = key.len() as u8;
        self
    }
    fn check(&self) -> Result<()> {
        if self.key_len as usize > OPEN_KEY_MAX {
            return Err(Error::InvalidArgument("open key longer than 64 bytes"));
        }
        Ok(())
    }
    fn key_bytes(&self) -> &[u8] {
        &self.key[..(self.key_len as usize).min(OPEN_KEY_MAX)]
    }
    pub fn create(mut self, on: bool) -> Self {
        self.set(open_flags::CREATE, on);
        self
    }
    /// Create, failing with `EXIST` if the file exists (implies `create`).
    pub fn exclusive(mut self, on: bool) -> Self {
        if on {
            self.flags |= open_flags::CREATE | open_flags::EXCLUSIVE
        } else {
            self.flags &= !open_flags::EXCLUSIVE
        }
        self
    }
    pub fn truncate(mut self, on: bool) -> Self {
        self.set(open_flags::TRUNCATE, on);
        self
    }
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode & 0o7777;
        self
    }
    fn set(&mut self, bit: u32, on: bool) {
        if on {
            self.flags |= bit
        } else {
            self.flags &= !bit
        }
    }
}

/// A directory entry with its name owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub fileid: u64,
    pub ftype: FileType,
}

impl DirEntry {
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// How a batch reports completion (see [`Client::submit_batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchCompletion {
    /// One completion per I/O, each with that I/O's `user_data`.
    PerIo,
    /// One completion for the whole batch (bytes in total, or the first error).
    PerBatch,
    /// The server reports only failed I/Os: one completion per failed I/O, then one for
    /// the batch.
    ErrorsOnly,
}

/// One I/O of a batch: file segments and memory segments (in registered regions),
/// independently scattered; their total lengths must match.
#[derive(Debug, Clone)]
pub struct BatchIoDesc {
    pub write: bool,
    /// `(file offset, length)` segments.
    pub file: Vec<(u64, u64)>,
    /// `(region, offset in region, length)` segments.
    pub mem: Vec<(RegionId, usize, usize)>,
    pub user_data: u64,
}

/// A lock held by another session (from [`Client::test_lock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockInfo {
    pub exclusive: bool,
    /// The owning session's id.
    pub owner: u64,
    pub offset: u64,
    /// 0 means "to the end of the 64-bit range".
    pub len: u64,
}

/// The reply of one chain element, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainReply {
    Empty,
    Handle { fh: FileHandle, attr: Attr },
    Attr(Attr),
    Open { open_id: u64, fh: FileHandle, attr: Attr },
    Data { data: Vec<u8>, eof: bool },
    Written { count: u32, offset: u64 },
    Other,
}

/// The outcome of [`Client::run_chain`].
#[derive(Debug)]
pub struct ChainOutcome {
    /// Replies of the elements that succeeded, in order.
    pub replies: Vec<ChainReply>,
    /// The element that failed (its index) and why; later elements did not run.
    pub failed: Option<(usize, Error)>,
}

/// Builds a chain of requests executed by the server in one round trip. A current file
/// handle and open id flow from element to element: use [`Chain::CURRENT`] and
/// [`Chain::CURRENT_OPEN`] to refer to them.
///
/// ```no_run
/// # use dafs_client::*;
/// # let mut c = Client::connect("127.0.0.1:7420", ClientConfig::default())?;
/// let root = c.root_handle();
/// let chain = Chain::new()
///     .lookup(root, "dir/file.txt")
///     .open(Chain::CURRENT, OpenOptions::read())
///     .read_inline(Chain::CURRENT_OPEN, 0, 4096)
///     .close(Chain::CURRENT_OPEN);
/// let out = c.run_chain(&chain)?;
/// assert!(out.failed.is_none());
/// # Ok::<(), dafs_client::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Chain {
    elems: Vec<Vec<u8>>,
    /// An element could not be encoded (too large): the chain is refused when run.
    invalid: bool,
}

impl Chain {
    pub const CURRENT: FileHandle = dafs_proto::types::CURRENT_FH;
    pub const CURRENT_OPEN: u64 = dafs_proto::types::CURRENT_OPEN_ID;
    pub fn new() -> Self {
        Chain::default()
    }
    pub fn len(&self) -> usize {
        self.elems.len()
    }
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }
    /// Append any request (the general builder).
    pub fn push(mut self, req: &Request) -> Self {
        let mut b = Vec::new();
        let h = Header::request(req.opcode(), 0, 0, 0, 0);
        // Element size errors surface when the chain is run.
        if dafs_proto::encode_request(&h, req, &mut b, limits::MSG_SIZE_MAX as usize).is_err() {
            self.invalid = true;
        }
        self.elems.push(b);
        self
    }
    pub fn lookup(self, dir: FileHandle, path: &str) -> Self {
        let p = clean_path(path).unwrap_or_default();
        self.push(&Request::Lookup { dir, path: p.as_bytes(), follow: true })
    }
    /// Open the handle itself.
    pub fn open(self, fh: FileHandle, opts: OpenOptions) -> Self {
        self.push(&Request::Open {
            fh,
            flags: opts.flags,
            mode: opts.mode,
            name: b"",
            key: opts.key_bytes(),
        })
    }
    /// Open (or create) `name` in directory `dir`.
    pub fn open_in(self, dir: FileHandle, name: &str, opts: OpenOptions) -> Self {
        self.push(&Request::Open {
            fh: dir,
            flags: opts.flags,
            mode: opts.mode,
            name: name.as_bytes(),
            key: opts.key_bytes(),
        })
    }
    pub fn read_inline(self, open_id: u64, offset: u64, len: u32) -> Self {
        self.push(&Request::ReadInline { open_id, offset, len })
    }
    pub fn write_inline(self, open_id: u64, offset: u64, data: &[u8]) -> Self {
        self.push(&Request::WriteInline { open_id, offset, stable: false, data })
    }
    pub fn getattr(self, fh: FileHandle) -> Self {
        self.push(&Request::GetAttr { fh })
    }
    pub fn commit(self, open_id: u64) -> Self {
        self.push(&Request::Commit { open_id, offset: 0, len: 0 })
    }
    pub fn close(self, open_id: u64) -> Self {
        self.push(&Request::Close { open_id })
    }
}

struct RegionInfo {
    key: u64,
    ptr: *mut u8,
    len: usize,
    /// The Vec handed to `register`, returned by `unregister`.
    vec: Option<Vec<u8>>,
    /// I/Os in flight that name this region: while > 0 the application may not touch it.
    busy: u32,
}

enum Target {
    Region { id: RegionId, offset: usize },
    Vec { buf: Vec<u8>, temp_key: Option<u64> },
}

struct IoState {
    id: ReqId,
    cg: CgId,
    user_data: u64,
    read: bool,
    direct: bool,
    len: usize,
    target: Target,
}

enum Inflight {
    Sync { req: u64 },
    Io(IoState),
    Batch(BatchState),
}

struct BatchState {
    id: ReqId,
    cg: CgId,
    user_data: u64,
    mode: BatchCompletion,
    /// Per I/O: its user data and the regions it pinned.
    ios: Vec<(u64, Vec<RegionId>)>,
}

struct Slot {
    seq: u32,
    what: Inflight,
}

#[derive(Default)]
struct Cg {
    done: VecDeque<Completion>,
    outstanding: usize,
}

/// A connected client with one session.
pub struct Client {
    t: Box<dyn ClientTransport>,
    session_id: u64,
    slots: ClientSlots,
    inflight: Vec<Option<Slot>>,
    max_msg: usize,
    inline_threshold: usize,
    direct_max: usize,
    batch_max: u32,
    root: FileHandle,
    regions: HashMap<u64, RegionInfo>,
    cgs: HashMap<u32, Cg>,
    next_cg: u32,
    next_req: u64,
    /// Completed synchronous reply: (request number, message).
    sync_done: Option<(u64, Vec<u8>)>,
    /// Internal completion group used by the blocking wrappers.
    internal_cg: CgId,
    /// Per slot: the encoded request in flight on it, kept for retransmission after a
    /// reconnect (the buffer is reused; it grows to the largest request sent there).
    reqbufs: Vec<Vec<u8>>,
    stats: ClientStats,
    dead: bool,
    /// Why the client is dead: the session itself is gone (lease expired, fenced,
    /// server restarted) — [`Client::reestablish`] starts a new one.
    dead_status: Option<Status>,
    cfg: ClientConfig,
    /// The nonce the next SESSION_BIND proves over (from SESSION_CREATE, then each bind).
    bind_nonce: [u8; 32],
    /// Requests in flight that complete quickly (metadata, inline, small direct): only
    /// for those is spinning before sleeping worth its CPU.
    small_inflight: u32,
    /// The transport's configured spin budget.
    base_spin: Duration,
    spin_now: Duration,
}

/// Transfers at least this large take far longer than the spin budget: while only such
/// requests are in flight, the client sleeps at once instead of spinning.
const LARGE_IO: usize = 64 * 1024;

fn is_small(what: &Inflight) -> bool {
    match what {
        Inflight::Sync { .. } => true,
        Inflight::Io(io) => io.len < LARGE_IO,
        Inflight::Batch(_) => false,
    }
}

/// Normalise a path inside the export: strip leading '/', drop empty and "." parts.
fn clean_path(path: &str) -> Result<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    let s = parts.join("/");
    if s.len() > limits::PATH_LEN_MAX {
        return Err(Error::Status(Status::NameTooLong));
    }
    Ok(s)
}

fn split_parent(path: &str) -> Result<(String, String)> {
    let p = clean_path(path)?;
    let (parent, name) = match p.rfind('/') {
        Some(i) => (p[..i].to_string(), p[i + 1..].to_string()),
        None => (String::new(), p),
    };
    if name.is_empty() || name == ".." {
        return Err(Error::InvalidArgument("path names no entry"));
    }
    if name.len() > limits::NAME_LEN_MAX {
        return Err(Error::Status(Status::NameTooLong));
    }
    Ok((parent, name))
}

impl Client {
    /// Connect and establish a session. `target` is `host:port` (TCP; on the server's
    /// host the library switches to shared memory by itself unless
    /// `cfg.provider == Provider::Tcp`), `dafs+tls://host:port` (TCP over TLS, also
    /// selected by `cfg.tls`), or `dafs+shm:///path/to/socket`.
    pub fn connect(target: &str, cfg: ClientConfig) -> Result<Client> {
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
        Ok(c)
    }

    /// Connect from a `dafs://host:port/...`, `dafs+tls://host:port/...` or
    /// `dafs+shm:///x.sock/...` URL (the path part is ignored here).
    pub fn connect_url(url: &str, cfg: ClientConfig) -> Result<Client> {
        let (addr, _) = parse_url(url)?;
        Self::connect(&addr, cfg)
    }

    /// Establish a session over any provider.
    pub fn with_transport(t: Box<dyn ClientTransport>, cfg: ClientConfig) -> Result<Client> {
        Ok(Self::establish(t, &cfg)?.0)
    }

    /// Keepalive on TCP connections, so a vanished server is noticed by a waiting call.
    fn keepalive(t: &dyn ClientTransport) {
        if t.provider() == "tcp" {
            // SAFETY: the transport's descriptor, alive while `t` is borrowed.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(t.raw_fd()) };
            if let Err(e) = dafs_transport::set_tcp_keepalive(fd) {
                tracing::debug!("cannot enable TCP keepalive: {e}");
            }
        }
    }

    /// SESSION_CREATE on `t`: the negotiated values, checked to be in range.
    fn negotiate(t: &mut dyn ClientTransport, cfg: &ClientConfig) -> Result<Negotiated> {
        Self::keepalive(t);
        let want_auth =
            if cfg.secret.is_some() { AuthMethod::HmacSha256 } else { AuthMethod::None };
        let mut buf = Vec::new();
        let h = Header::request(Opcode::SessionCreate, 0, 0, 0, 0);
        let req = Request::SessionCreate {
            max_msg_size: cfg.max_msg_size,
            slots: cfg.slots.clamp(1, limits::SLOTS_MAX),
            auth: want_auth,
            client_id: cfg.client_id.as_bytes(),
        };
        dafs_proto::encode_request(&h, &req, &mut buf, t.max_msg_size())
            .map_err(|e| Error::Protocol(e.to_string()))?;
        t.send(&buf)?;
        let msg = t.recv(Wait::Timeout(cfg.connect_timeout))?.ok_or(Error::TimedOut)?;
        let (rh, reply) = dafs_proto::decode_reply(&msg, t.max_msg_size())
            .map_err(|e| Error::Protocol(e.to_string()))?;
        let n = match reply {
            Reply::SessionCreate {
                max_msg_size,
                slots,
                inline_threshold,
                auth,
                server_nonce,
                direct_max,
                batch_max,
                host_id,
                shm_path,
            } => Negotiated {
                session_id: rh.session_id,
                max_msg: max_msg_size,
                slots,
                threshold: inline_threshold,
                auth,
                server_nonce,
                direct_max,
                batch_max,
                offer: ShmOffer {
                    host_id,
                    shm_path: String::from_utf8_lossy(shm_path).into_owned(),
                },
            },
            Reply::Error(Status::AuthRequired) => {
                return Err(Error::Auth(
                    "the server requires a shared secret (use --secret-file)".into(),
                ))
            }
            Reply::Error(s) => return Err(Error::Status(s)),
            _ => return Err(Error::Protocol("unexpected reply to SESSION_CREATE".into())),
        };
        if !(limits::MSG_SIZE_MIN..=cfg.max_msg_size.max(limits::MSG_SIZE_MIN)).contains(&n.max_msg)
            || n.slots == 0
            || n.slots > limits::SLOTS_MAX
        {
            return Err(Error::Protocol("server negotiated out-of-range limits".into()));
        }
        if n.threshold as usize + 1024 > n.max_msg as usize
            || n.direct_max == 0
            || n.direct_max > limits::DIRECT_LEN_MAX
        {
            return Err(Error::Protocol("server negotiated an out-of-range threshold".into()));
        }
        t.set_max_msg_size(n.max_msg as usize);
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
            max_msg: 0,
            inline_threshold: 0,
            direct_max: 0,
            batch_max: 0,
            root: FileHandle([0; 32]),
            regions: HashMap::new(),
            cgs: HashMap::new(),
            next_cg: 1,
            next_req: 1,
            sync_done: None,
            internal_cg: CgId(0),
            reqbufs: Vec::new(),
            stats: ClientStats::default(),
            dead: false,
            dead_status: None,
            cfg: cfg.clone(),
            bind_nonce: [0; 32],
            small_inflight: 0,
            base_spin,
            spin_now: base_spin,
        };
        c.cgs.insert(0, Cg::default());
        c.start_session(&n)?;
        Ok((c, n.offer))
    }

    /// Take on the session `n` describes: fresh slots, then authenticate (if the server
    /// requires it) and fetch the export's root handle.
    fn start_session(&mut self, n: &Negotiated) -> Result<()> {
        self.session_id = n.session_id;
        self.slots = ClientSlots::new(n.slots);
        self.inflight = (0..n.slots).map(|_| None).collect();
        self.reqbufs = (0..n.slots).map(|_| Vec::new()).collect();
        self.max_msg = n.max_msg as usize;
        self.inline_threshold = n.threshold as usize;
        self.direct_max = n.direct_max as usize;
        self.batch_max = n.batch_max;
        self.bind_nonce = n.server_nonce;
        self.dead = false;
        self.dead_status = None;
        self.small_inflight = 0;
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
                    return Err(Error::Protocol("bad SESSION_AUTH reply".into()));
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
            _ => return Err(Error::Protocol("bad GET_ROOTHANDLE reply".into())),
        }
        Ok(())
    }

    // ------------------------------------------------------------------ negotiated values

    /// Reads and writes up to this many bytes travel inline in messages; larger ones are
    /// placed directly by the server.
    pub fn inline_threshold(&self) -> usize {
        self.inline_threshold
    }
    /// Largest single asynchronous I/O (blocking calls split larger ones).
    pub fn max_io_size(&self) -> usize {
        self.direct_max
    }
    /// Most I/Os one batch may carry (negotiated).
    pub fn batch_max(&self) -> u32 {
        self.batch_max
    }
    /// Slots granted by the server (the most requests in flight at once).
    pub fn slots(&self) -> u32 {
        self.slots.granted()
    }
    pub fn max_msg_size(&self) -> usize {
        self.max_msg
    }
    pub fn session_id(&self) -> u64 {
        self.session_id
    }
    pub fn provider(&self) -> &'static str {
        self.t.provider()
    }
    pub fn root_handle(&self) -> FileHandle {
        self.root
    }
    pub fn stats(&self) -> ClientStats {
        let mut s = self.stats;
        s.transport = self.t.stats();
        s
    }

    /// Why the client stopped working, if it did: `Some(BadSession)` when the server no
    /// longer knows the session (its lease expired, the server restarted, or an
    /// administrator ended it), `Some(Fenced)` when this client is fenced.
    pub fn session_lost(&self) -> Option<Status> {
        if self.dead {
            self.dead_status
        } else {
            None
        }
    }

    /// Start a new session with the same server and configuration after the old one is
    /// gone ([`Client::session_lost`]), keeping registered memory. Open files of the old
    /// session are invalid: re-open them with [`Client::reopen`]. Byte-range locks are
    /// gone too (the server released them with the session).
    pub fn reestablish(&mut self) -> Result<()> {
        if self.inflight.iter().any(Option::is_some) {
            return Err(Error::InvalidArgument("requests still in flight"));
        }
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
        Ok(())
    }

    /// The credential (uid, gid, supplementary groups) this session's following requests
    /// run with, on a server whose `identity` is `asserted` (NOTSUPP otherwise).
    pub fn set_cred(&mut self, uid: u32, gid: u32, groups: &[u32]) -> Result<()> {
        if groups.len() > limits::CRED_GROUPS_MAX {
            return Err(Error::InvalidArgument("more than 16 supplementary groups"));
        }
        let packed: Vec<u8> = groups.iter().flat_map(|g| g.to_le_bytes()).collect();
        let m = self.call(&Request::SetCred { uid, gid, groups: &packed })?;
        self.decode(&m).map(|_| ())
    }

    /// Open the file `f` names again, by the path and options it was opened with (after
    /// [`Client::reestablish`]); the position carries over. Creation and truncation are
    /// not repeated.
    pub fn reopen(&mut self, f: &File) -> Result<File> {
        let (path, opts) =
            f.origin.clone().ok_or(Error::InvalidArgument("file was not opened by path"))?;
        let mut opts = opts;
        opts.flags &= !(open_flags::CREATE
            | open_flags::EXCLUSIVE
            | open_flags::TRUNCATE
            | open_flags::UNLINKED);
        let mut nf = self.open(&path, opts)?;
        nf.pos = f.pos;
        Ok(nf)
    }

    // ------------------------------------------------------------------ progress engine

    fn fail_all(&mut self, why: &str) {
        if self.dead {
            return;
        }
        tracing::debug!("client disconnected: {why}");
        self.dead = true;
        self.small_inflight = 0;
        for i in 0..self.inflight.len() {
            if let Some(slot) = self.inflight[i].take() {
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
    }

    /// Receive and route one reply. Returns false if nothing arrived within `wait`.
    fn progress(&mut self, wait: Wait) -> Result<bool> {
        if self.dead {
            return Err(self.dead_error());
        }
        let spin = if self.small_inflight > 0 { self.base_spin } else { Duration::ZERO };
        if spin != self.spin_now {
            self.t.set_spin(spin);
            self.spin_now = spin;
        }
        let msg = match self.t.recv(wait) {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(false),
            Err(e) if e.is_fatal() => {
                // Recovered: requests were resent; their replies come on later calls.
                self.connection_broke(e)?;
                return Ok(true);
            }
            Err(e) => {
                self.fail_all(&e.to_string());
                return Err(Error::Transport(e));
            }
        };
        let r = self.route(&msg);
        self.t.recycle(msg);
        if let Err(e) = &r {
            self.fail_all(&e.to_string());
        }
        r.map(|_| true)
    }

    fn route(&mut self, msg: &[u8]) -> Result<()> {
        let (h, reply) = dafs_proto::decode_reply(msg, self.max_msg)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        let i = h.slot_id as usize;
        if h.session_id != self.session_id || i >= self.inflight.len() {
            return Err(Error::Protocol(
                "reply for another session or beyond the granted slots".into(),
            ));
        }
        let matches = self.inflight[i].as_ref().is_some_and(|slot| slot.seq == h.sequence_id);
        if !matches {
            // An answer to a duplicate of a request already answered (a retransmission
            // that crossed the original reply): nothing waits for it. Dropping it is
            // safe; it never touches application memory.
            self.stats.stale_replies += 1;
            return Ok(());
        }
        let slot = self.inflight[i].take().expect("checked above");
        if is_small(&slot.what) {
            self.small_inflight -= 1;
        }
        self.slots.release(h.slot_id, h.highest_slot);
        match slot.what {
            Inflight::Sync { req } => {
                self.sync_done = Some((req, msg.to_vec()));
            }
            Inflight::Batch(b) => {
                let results = match reply {
                    Reply::Batch { results, .. } => {
                        let r = dafs_proto::types::BatchResult::parse_all(results)
                            .map_err(|e| Error::Protocol(e.to_string()))?;
                        if r.iter().any(|x| x.index as usize >= b.ios.len()) {
                            return Err(Error::Protocol(
                                "batch result for an I/O that was not sent".into(),
                            ));
                        }
                        Ok(r)
                    }
                    Reply::Error(s) => Err(s),
                    _ => return Err(Error::Protocol("reply does not fit the batch".into())),
                };
                self.finish_batch(b, Some(results));
            }
            Inflight::Io(mut io) => {
                let (res, eof) = match reply {
                    Reply::Error(s) => (Err(Error::Status(s)), false),
                    Reply::ReadInline { eof, data } if io.read && !io.direct => {
                        if data.len() > io.len {
                            return Err(Error::Protocol(
                                "inline read returned more than asked".into(),
                            ));
                        }
                        let n = data.len();
                        self.copy_into_target(&mut io, data);
                        self.stats.inline_bytes += n as u64;
                        (Ok(n), eof)
                    }
                    Reply::ReadDirect { count, eof } if io.read && io.direct => {
                        if count as usize > io.len {
                            return Err(Error::Protocol(
                                "direct read count exceeds the request".into(),
                            ));
                        }
                        self.stats.direct_bytes += count as u64;
                        (Ok(count as usize), eof)
                    }
                    Reply::Write { count, .. } if !io.read => {
                        if count as usize > io.len {
                            return Err(Error::Protocol("write count exceeds the request".into()));
                        }
                        if io.direct {
                            self.stats.direct_bytes += count as u64
                        } else {
                            self.stats.inline_bytes += count as u64
                        }
                        (Ok(count as usize), false)
                    }
                    _ => return Err(Error::Protocol("reply does not fit the I/O".into())),
                };
                self.finish_io(io, res, eof);
            }
        }
        Ok(())
    }

    /// Copy inline read data into the request's memory (`data.len() <= io.len`, checked
    /// by the caller; the range was checked against the region at submit).
    fn copy_into_target(&mut self, io: &mut IoState, data: &[u8]) {
        debug_assert!(data.len() <= io.len);
        match &mut io.target {
            Target::Region { id, offset } => {
                let r = self.regions.get(&id.0).expect("a busy region stays registered");
                assert!(*offset + data.len() <= r.len);
                // SAFETY: in bounds (asserted), and the region is pinned (busy) so the
                // application holds no reference to it.
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), r.ptr.add(*offset), data.len())
                };
            }
            Target::Vec { buf, .. } => buf[..data.len()].copy_from_slice(data),
        }
    }

    fn finish_io(&mut self, io: IoState, res: Result<usize>, eof: bool) {
        if res.is_err() {
            self.stats.errors += 1;
        }
        let mut out_buf = None;
        match io.target {
            Target::Region { id, .. } => {
                if let Some(r) = self.regions.get_mut(&id.0) {
                    r.busy -= 1;
                }
            }
            Target::Vec { buf, temp_key } => {
                if let Some(k) = temp_key {
                    let _ = self.t.deregister(k);
                }
                out_buf = Some(buf);
            }
        }
        let cg = self
            .cgs
            .get_mut(&io.cg.0)
            .expect("completion groups with I/O in flight are never destroyed");
        cg.outstanding -= 1;
        cg.done.push_back(Completion {
            id: io.id,
            user_data: io.user_data,
            result: res,
            eof,
            buf: out_buf,
        });
    }

    /// Turn a batch reply (None: the connection died) into completions.
    fn finish_batch(
        &mut self,
        b: BatchState,
        results: Option<Result<Vec<dafs_proto::types::BatchResult>, Status>>,
    ) {
        for (_, regions) in &b.ios {
            for r in regions {
                if let Some(reg) = self.regions.get_mut(&r.0) {
                    reg.busy -= 1;
                }
            }
        }
        let n = b.ios.len();
        // Per-I/O outcome: (result, reported by the server).
        let mut per: Vec<Result<usize>> = (0..n).map(|_| Ok(0)).collect();
        let whole: Result<usize> = match results {
            None => {
                per.iter_mut().for_each(|p| *p = Err(Error::Disconnected));
                Err(Error::Disconnected)
            }
            Some(Err(s)) => {
                per.iter_mut().for_each(|p| *p = Err(Error::Status(s)));
                Err(Error::Status(s))
            }
            Some(Ok(rs)) => {
                let mut total = 0usize;
                let mut first_err = None;
                for r in rs {
                    if r.status == Status::Ok {
                        per[r.index as usize] = Ok(r.count as usize);
                        total += r.count as usize;
                    } else {
                        per[r.index as usize] = Err(Error::Status(r.status));
                        first_err.get_or_insert(r.status);
                    }
                }
                match first_err {
                    Some(s) => Err(Error::Status(s)),
                    None => Ok(total),
                }
            }
        };
        if whole.is_err() {
            self.stats.errors += 1;
        }
        let cg = self
            .cgs
            .get_mut(&b.cg.0)
            .expect("completion groups with I/O in flight are never destroyed");
        cg.outstanding -= 1;
        match b.mode {
            BatchCompletion::PerIo => {
                for ((ud, _), res) in b.ios.iter().zip(per) {
                    cg.done.push_back(Completion {
                        id: b.id,
                        user_data: *ud,
                        result: res,
                        eof: false,
                        buf: None,
                    });
                }
            }
            BatchCompletion::PerBatch => cg.done.push_back(Completion {
                id: b.id,
                user_data: b.user_data,
                result: whole,
                eof: false,
                buf: None,
            }),
            BatchCompletion::ErrorsOnly => {
                for ((ud, _), res) in b.ios.iter().zip(per) {
                    if res.is_err() {
                        cg.done.push_back(Completion {
                            id: b.id,
                            user_data: *ud,
                            result: res,
                            eof: false,
                            buf: None,
                        });
                    }
                }
                cg.done.push_back(Completion {
                    id: b.id,
                    user_data: b.user_data,
                    result: whole,
                    eof: false,
                    buf: None,
                });
            }
        }
    }

    /// The error every call returns once the client is dead.
    fn dead_error(&self) -> Error {
        match self.dead_status {
            Some(st) => Error::Status(st),
            None => Error::Disconnected,
        }
    }

    /// Get a slot, making progress (never sleeping longer than needed) if `block`.
    fn acquire_slot(&mut self, block: bool) -> Result<(u32, u32)> {
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

    fn send_on_slot(&mut self, slot: u32, seq: u32, req: &Request, what: Inflight) -> Result<()> {
        let h =
            Header::request(req.opcode(), self.session_id, slot, seq, self.slots.highest_in_use());
        let mut buf = std::mem::take(&mut self.reqbufs[slot as usize]);
        buf.clear();
        let enc = dafs_proto::encode_request(&h, req, &mut buf, self.max_msg);
        self.reqbufs[slot as usize] = buf;
        if let Err(e) = enc {
            self.slots.abandon(slot);
            return Err(Error::Protocol(e.to_string()));
        }
        self.send_slot_buf(slot, seq, what)
    }

    /// Send the request encoded in `reqbufs[slot]` and record it in flight. A broken
    /// connection here is recovered like one noticed while receiving: the request is in
    /// flight and is resent after the session is re-bound.
    fn send_slot_buf(&mut self, slot: u32, seq: u32, what: Inflight) -> Result<()> {
        let sent = self.t.send(&self.reqbufs[slot as usize]);
        self.stats.requests += 1;
        if is_small(&what) {
            self.small_inflight += 1;
        }
        self.inflight[slot as usize] = Some(Slot { seq, what });
        if let Err(e) = sent {
            if !e.is_fatal() {
                // Refused before anything was sent (e.g. too big): nothing in flight.
                let slot_state = self.inflight[slot as usize].take().unwrap();
                if is_small(&slot_state.what) {
                    self.small_inflight -= 1;
                }
                self.slots.abandon(slot);
                self.inflight_undo(slot_state.what);
                return Err(Error::Transport(e));
            }
            self.connection_broke(e)?;
        }
        Ok(())
    }

    /// Undo the bookkeeping of a request that was never sent (its memory is released
    /// without a completion: the submit call itself fails).
    fn inflight_undo(&mut self, what: Inflight) {
        if let Inflight::Io(io) = what {
            match io.target {
                Target::Region { id, .. } => {
                    if let Some(r) = self.regions.get_mut(&id.0) {
                        r.busy -= 1;
                    }
                }
                Target::Vec { temp_key: Some(k), .. } => {
                    let _ = self.t.deregister(k);
                }
                Target::Vec { .. } => {}
            }
        }
    }

    /// The transport failed: recover the session on a new connection (if configured) or
    /// fail everything in flight.
    fn connection_broke(&mut self, e: dafs_transport::TransportError) -> Result<()> {
        if self.cfg.reconnect && !self.dead {
            match self.recover(&e) {
                Ok(()) => return Ok(()),
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
        let mut backoff = Duration::from_millis(5);
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
                        refused >= 3
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
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
        self.stats.reconnects += 1;
        // Resend in slot order (any order is correct: slots are independent).
        for slot in 0..self.inflight.len() {
            if self.inflight[slot].is_some() {
                self.stats.retransmits += 1;
                let buf = std::mem::take(&mut self.reqbufs[slot]);
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
        let mut client_nonce = [0u8; 32];
        let mut proof = [0u8; 32];
        if let Some(secret) = &self.cfg.secret {
            getrandom::getrandom(&mut client_nonce).map_err(|e| Error::Auth(e.to_string()))?;
            proof = auth::bind_proof(
                secret,
                self.session_id,
                &self.bind_nonce,
                &client_nonce,
                self.cfg.client_id.as_bytes(),
            );
        }
        let h = Header::request(Opcode::SessionBind, self.session_id, 0, 0, 0);
        let mut buf = Vec::new();
        dafs_proto::encode_request(
            &h,
            &Request::SessionBind { client_nonce, proof, client_id: self.cfg.client_id.as_bytes() },
            &mut buf,
            self.max_msg,
        )
        .map_err(|e| Error::Protocol(e.to_string()))?;
        self.t.send(&buf)?;
        let msg = self.t.recv(Wait::Timeout(self.cfg.connect_timeout))?.ok_or(Error::TimedOut)?;
        let (rh, reply) = dafs_proto::decode_reply(&msg, self.max_msg)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        if rh.opcode != Opcode::SessionBind || rh.session_id != self.session_id {
            return Err(Error::Protocol("unexpected reply to SESSION_BIND".into()));
        }
        match reply {
            Reply::SessionBind { slots, target_highest, next_nonce, server_proof } => {
                if slots != self.slots.granted() {
                    return Err(Error::Protocol("bound session has a different slot count".into()));
                }
                if let Some(secret) = &self.cfg.secret {
                    let expect = auth::bind_server_proof(
                        secret,
                        self.session_id,
                        &client_nonce,
                        &next_nonce,
                        self.cfg.client_id.as_bytes(),
                    );
                    if expect != server_proof {
                        return Err(Error::Auth(
                            "the server could not prove it holds the shared secret".into(),
                        ));
                    }
                }
                self.bind_nonce = next_nonce;
                self.slots.set_target(target_highest);
                Ok(())
            }
            Reply::Error(st) => Err(Error::Status(st)),
            _ => Err(Error::Protocol("bad SESSION_BIND reply".into())),
        }
    }

    /// Synchronous request: send, then make progress until its reply arrives.
    fn call(&mut self, req: &Request) -> Result<Vec<u8>> {
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
            self.progress(Wait::Forever)?;
        }
    }

    fn decode<'a>(&self, m: &'a [u8]) -> Result<(Header, Reply<'a>)> {
        let (h, r) = dafs_proto::decode_reply(m, self.max_msg)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        if let Reply::Error(s) = r {
            return Err(Error::Status(s));
        }
        Ok((h, r))
    }

    // ------------------------------------------------------------------ completion groups

    /// Create a completion group.
    pub fn create_cg(&mut self) -> CgId {
        // Never 0 (the blocking calls' own group) and never an id still in use, even
        // after 2^32 creations.
        let mut id = self.next_cg;
        while id == self.internal_cg.0 || self.cgs.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next_cg = id.wrapping_add(1);
        self.cgs.insert(id, Cg::default());
        CgId(id)
    }

    /// Destroy an empty completion group (no I/O in flight, nothing unreaped).
    pub fn destroy_cg(&mut self, cg: CgId) -> Result<()> {
        match self.cgs.get(&cg.0) {
            Some(g) if g.outstanding == 0 && g.done.is_empty() && cg != self.internal_cg => {
                self.cgs.remove(&cg.0);
                Ok(())
            }
            Some(_) => {
                Err(Error::InvalidArgument("completion group has requests in flight or unreaped"))
            }
            None => Err(Error::InvalidArgument("unknown completion group")),
        }
    }

    /// Requests of `cg` still in flight.
    pub fn outstanding(&self, cg: CgId) -> usize {
        self.cgs.get(&cg.0).map(|g| g.outstanding).unwrap_or(0)
    }

    /// Make progress without blocking and return up to `max` completions of `cg`.
    pub fn poll(&mut self, cg: CgId, max: usize) -> Result<Vec<Completion>> {
        self.check_cg(cg)?;
        while !self.dead && self.progress(Wait::NoWait)? {}
        let g = self.cgs.get_mut(&cg.0).unwrap();
        let n = g.done.len().min(max);
        Ok(g.done.drain(..n).collect())
    }

    /// Wait for one completion of `cg` (None: timed out, or nothing in flight).
    pub fn wait_one(&mut self, cg: CgId, timeout: Option<Duration>) -> Result<Option<Completion>> {
        Ok(self.wait_n(cg, 1, timeout)?.pop())
    }

    /// Wait until `n` completions of `cg` are available (or everything in flight has
    /// completed, or the timeout passes), and return them.
    pub fn wait_n(
        &mut self,
        cg: CgId,
        n: usize,
        timeout: Option<Duration>,
    ) -> Result<Vec<Completion>> {
        self.check_cg(cg)?;
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let g = &self.cgs[&cg.0];
            if g.done.len() >= n || g.outstanding == 0 || self.dead {
                break;
            }
            let wait = match deadline {
                None => Wait::Forever,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        // Out of time, but still look at what has arrived (a zero timeout
                        // means "poll").
                        while !self.dead && self.progress(Wait::NoWait)? {}
                        break;
                    }
                    Wait::Timeout(d - now)
                }
            };
            self.progress(wait)?;
        }
        let g = self.cgs.get_mut(&cg.0).unwrap();
        let k = g.done.len().min(n);
        Ok(g.done.drain(..k).collect())
    }

    /// Wait for everything in flight on `cg` and return all its completions.
    pub fn wait_all(&mut self, cg: CgId) -> Result<Vec<Completion>> {
        self.check_cg(cg)?;
        while self.cgs[&cg.0].outstanding > 0 && !self.dead {
            self.progress(Wait::Forever)?;
        }
        Ok(self.cgs.get_mut(&cg.0).unwrap().done.drain(..).collect())
    }

    /// Completion groups the application may submit to (not the internal one).
    fn check_user_cg(&self, cg: CgId) -> Result<()> {
        if cg == self.internal_cg {
            return Err(Error::InvalidArgument("completion group 0 is internal to the library"));
        }
        self.check_cg(cg)
    }

    fn check_cg(&self, cg: CgId) -> Result<()> {
        if self.cgs.contains_key(&cg.0) {
            Ok(())
        } else {
            Err(Error::InvalidArgument("unknown completion group"))
        }
    }

    // ------------------------------------------------------------------ memory registration

    /// Allocate `len` bytes of zeroed memory registered for direct placement.
    pub fn alloc_registered(&mut self, len: usize) -> Result<RegionId> {
        let (key, ptr) = self.t.alloc_registered(len)?;
        self.regions.insert(key, RegionInfo { key, ptr, len, vec: None, busy: 0 });
        Ok(RegionId(key))
    }

    /// Register with the transport; if the connection turns out to be broken, recover the
    /// session (when configured) and register on the new connection.
    ///
    /// # Safety
    /// As [`ClientTransport::register`].
    unsafe fn register_recovering(
        &mut self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<u64> {
        // SAFETY: the caller's contract.
        match unsafe { self.t.register(ptr, len, access) } {
            Ok(k) => Ok(k),
            Err(e) if e.is_fatal() && self.cfg.reconnect && !self.dead => {
                self.connection_broke(e)?;
                // SAFETY: the caller's contract.
                Ok(unsafe { self.t.register(ptr, len, access) }?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Register a buffer the application owns; it is handed back by [`Client::unregister`].
    pub fn register(&mut self, mut vec: Vec<u8>) -> Result<RegionId> {
        if vec.is_empty() {
            return Err(Error::InvalidArgument("empty buffer"));
        }
        let (ptr, len) = (vec.as_mut_ptr(), vec.len());
        // SAFETY: the Vec is moved into the region table and not touched (nor its heap
        // buffer moved or freed) until it is unregistered.
        let key = unsafe { self.register_recovering(ptr, len, Access::READ_WRITE)? };
        self.regions.insert(key, RegionInfo { key, ptr, len, vec: Some(vec), busy: 0 });
        Ok(RegionId(key))
    }

    /// Register memory the library does not own (C and Python bindings).
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid until [`Client::unregister`], and must not be
    /// accessed by the application while I/O naming it is in flight.
    pub unsafe fn register_raw(&mut self, ptr: *mut u8, len: usize) -> Result<RegionId> {
        if ptr.is_null() || len == 0 {
            return Err(Error::InvalidArgument("null or empty region"));
        }
        let key = self.register_recovering(ptr, len, Access::READ_WRITE)?;
        self.regions.insert(key, RegionInfo { key, ptr, len, vec: None, busy: 0 });
        Ok(RegionId(key))
    }

    /// Unregister a region with no I/O in flight. Returns the Vec given to `register`.
    pub fn unregister(&mut self, id: RegionId) -> Result<Option<Vec<u8>>> {
        match self.regions.get(&id.0) {
            None => return Err(Error::InvalidArgument("unknown region")),
            Some(r) if r.busy > 0 => return Err(Error::RegionBusy),
            _ => {}
        }
        let key = self.regions[&id.0].key;
        match self.t.deregister(key) {
            Ok(()) => {}
            // The connection is gone, and with it the server's access to the memory: it is
            // the application's again (its Vec must not be lost with the connection).
            // With reconnection on, the next call re-binds the session.
            Err(e) if self.dead || e.is_fatal() => {
                if !self.cfg.reconnect {
                    self.fail_all(&e.to_string())
                }
            }
            // Still registered: keep it in the table so the caller can retry.
            Err(e) => return Err(e.into()),
        }
        Ok(self.regions.remove(&id.0).unwrap().vec)
    }

    /// The region's bytes (refused while I/O naming it is in flight).
    pub fn region(&self, id: RegionId) -> Result<&[u8]> {
        let r = self.regions.get(&id.0).ok_or(Error::InvalidArgument("unknown region"))?;
        if r.busy > 0 {
            return Err(Error::RegionBusy);
        }
        // SAFETY: registered memory of r.len bytes, valid until unregistered, and no
        // placement targets it now (busy == 0); &self prevents progress meanwhile.
        Ok(unsafe { std::slice::from_raw_parts(r.ptr, r.len) })
    }

    pub fn region_mut(&mut self, id: RegionId) -> Result<&mut [u8]> {
        let r = self.regions.get(&id.0).ok_or(Error::InvalidArgument("unknown region"))?;
        if r.busy > 0 {
            return Err(Error::RegionBusy);
        }
        // SAFETY: as in `region`, and &mut self makes the borrow exclusive.
        Ok(unsafe { std::slice::from_raw_parts_mut(r.ptr, r.len) })
    }

    // ------------------------------------------------------------------ asynchronous I/O

    /// Submit a read of `buf`'s length at `offset`. Completes on `cg`.
    pub fn submit_read(
        &mut self,
        f: &File,
        offset: u64,
        buf: IoBuf,
        cg: CgId,
        user_data: u64,
    ) -> Result<ReqId> {
        self.check_user_cg(cg)?;
        self.submit(f.open_id, offset, buf, cg, user_data, true, false)
    }

    /// Submit a write of `buf` at `offset`. `stable`: durable before the reply.
    pub fn submit_write(
        &mut self,
        f: &File,
        offset: u64,
        buf: IoBuf,
        cg: CgId,
        user_data: u64,
    ) -> Result<ReqId> {
        self.check_user_cg(cg)?;
        self.submit(f.open_id, offset, buf, cg, user_data, false, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn submit(
        &mut self,
        open_id: u64,
        offset: u64,
        buf: IoBuf,
        cg: CgId,
        user_data: u64,
        read: bool,
        block: bool,
    ) -> Result<ReqId> {
        self.check_cg(cg)?;
        let len = match &buf {
            IoBuf::Region { region, offset: off, len } => {
                let r =
                    self.regions.get(&region.0).ok_or(Error::InvalidArgument("unknown region"))?;
                if off.checked_add(*len).is_none_or(|end| end > r.len) {
                    return Err(Error::InvalidArgument("range outside the region"));
                }
                *len
            }
            IoBuf::Vec(v) => v.len(),
        };
        if len > self.direct_max {
            return Err(Error::InvalidArgument("I/O larger than max_io_size()"));
        }
        let direct = len > self.inline_threshold;
        let (slot, seq) = self.acquire_slot(block)?;
        let id = ReqId(self.next_req);
        self.next_req += 1;
        // Resolve the memory and build the request.
        let (target, region) = match buf {
            IoBuf::Region { region, offset: roff, .. } => {
                let r = self.regions.get_mut(&region.0).unwrap();
                r.busy += 1;
                (
                    Target::Region { id: region, offset: roff },
                    RemoteRegion { key: r.key, offset: roff as u64 },
                )
            }
            IoBuf::Vec(mut v) => {
                let mut temp_key = None;
                if direct {
                    self.stats.off_direct_path += 1;
                    // SAFETY: the Vec is owned by the in-flight request until completion,
                    // which deregisters before handing it back.
                    let r = unsafe {
                        self.register_recovering(v.as_mut_ptr(), v.len(), Access::READ_WRITE)
                    };
                    match r {
                        Ok(k) => temp_key = Some(k),
                        Err(e) => {
                            self.slots.abandon(slot);
                            return Err(e);
                        }
                    }
                }
                let key = temp_key.unwrap_or(0);
                (Target::Vec { buf: v, temp_key }, RemoteRegion { key, offset: 0 })
            }
        };
        let io = IoState { id, cg, user_data, read, direct, len, target };
        let stable = false;
        let res = if read {
            if direct {
                self.stats.direct_reads += 1;
                self.send_on_slot(
                    slot,
                    seq,
                    &Request::ReadDirect { open_id, offset, len: len as u32, region },
                    Inflight::Io(io),
                )
            } else {
                self.stats.inline_reads += 1;
                self.send_on_slot(
                    slot,
                    seq,
                    &Request::ReadInline { open_id, offset, len: len as u32 },
                    Inflight::Io(io),
                )
            }
        } else if direct {
            self.stats.direct_writes += 1;
            self.send_on_slot(
                slot,
                seq,
                &Request::WriteDirect { open_id, offset, len: len as u32, stable, region },
                Inflight::Io(io),
            )
        } else {
            self.stats.inline_writes += 1;
            // The inline payload is copied into the message from the caller's memory.
            let data: &[u8] = match &io.target {
                Target::Region { id, offset } => {
                    let r = &self.regions[&id.0];
                    // SAFETY: range checked against the region above.
                    unsafe { std::slice::from_raw_parts(r.ptr.add(*offset), len) }
                }
                Target::Vec { buf, .. } => buf,
            };
            let h = Header::request(
                Opcode::WriteInline,
                self.session_id,
                slot,
                seq,
                self.slots.highest_in_use(),
            );
            let mut buf = std::mem::take(&mut self.reqbufs[slot as usize]);
            buf.clear();
            let enc = dafs_proto::encode_request(
                &h,
                &Request::WriteInline { open_id, offset, stable, data },
                &mut buf,
                self.max_msg,
            );
            self.reqbufs[slot as usize] = buf;
            match enc {
                Err(e) => {
                    self.slots.abandon(slot);
                    self.inflight_undo(Inflight::Io(io));
                    Err(Error::Protocol(e.to_string()))
                }
                Ok(_) => self.send_slot_buf(slot, seq, Inflight::Io(io)),
            }
        };
        match res {
            Ok(()) => {
                self.cgs.get_mut(&cg.0).unwrap().outstanding += 1;
                Ok(id)
            }
            Err(e) => Err(e),
        }
    }

    // ------------------------------------------------------------------ blocking data path

    /// Read into `buf` at `offset`; returns bytes read (short only at end of file).
    pub fn pread(&mut self, f: &File, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.blocking_io(f.open_id, buf.as_mut_ptr(), buf.len(), offset, true)
    }

    /// Write all of `buf` at `offset`.
    pub fn pwrite(&mut self, f: &File, buf: &[u8], offset: u64) -> Result<usize> {
        self.blocking_io(f.open_id, buf.as_ptr() as *mut u8, buf.len(), offset, false)
    }

    /// Read at the file position and advance it.
    pub fn read(&mut self, f: &mut File, buf: &mut [u8]) -> Result<usize> {
        let n = self.blocking_io(f.open_id, buf.as_mut_ptr(), buf.len(), f.pos, true)?;
        f.pos += n as u64;
        Ok(n)
    }

    /// Write at the file position and advance it.
    pub fn write(&mut self, f: &mut File, buf: &[u8]) -> Result<usize> {
        let n = self.blocking_io(f.open_id, buf.as_ptr() as *mut u8, buf.len(), f.pos, false)?;
        f.pos += n as u64;
        Ok(n)
    }

    /// The blocking path: chunks of at most `max_io_size()` (or the inline threshold),
    /// pipelined over the free slots, on the internal completion group.
    fn blocking_io(
        &mut self,
        open_id: u64,
        ptr: *mut u8,
        len: usize,
        offset: u64,
        read: bool,
    ) -> Result<usize> {
        if len == 0 {
            return Ok(0);
        }
        offset
            .checked_add(len as u64)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or(Error::Status(Status::FBig))?;
        if len <= self.inline_threshold {
            return self.blocking_inline(open_id, ptr, len, offset, read);
        }
        let direct = true;
        let chunk = if direct { self.direct_max } else { self.inline_threshold.max(1) };
        // Register the caller's memory for the duration of this call: sound because the
        // call holds the borrow and does not return before every chunk has completed.
        let (region, temp) = if direct {
            self.stats.off_direct_path += 1;
            // SAFETY: see above; the memory outlives the registration (deregistered below).
            let key = unsafe { self.register_recovering(ptr, len, Access::READ_WRITE)? };
            self.regions.insert(key, RegionInfo { key, ptr, len, vec: None, busy: 0 });
            (Some(RegionId(key)), true)
        } else {
            (None, false)
        };
        let cg = self.internal_cg;
        let nchunks = len.div_ceil(chunk);
        let mut counts = vec![usize::MAX; nchunks];
        let mut eofs = vec![false; nchunks];
        let mut first_err: Option<Error> = None;
        let mut next = 0;
        let mut done = 0;
        while done < nchunks {
            while next < nchunks && first_err.is_none() && self.slots.available() > 0 {
                let off = next * chunk;
                let n = chunk.min(len - off);
                let buf = match region {
                    Some(r) => IoBuf::Region { region: r, offset: off, len: n },
                    None => {
                        let mut v = vec![0u8; n];
                        if !read {
                            // SAFETY: off + n <= len, within the caller's buffer.
                            v.copy_from_slice(unsafe {
                                std::slice::from_raw_parts(ptr.add(off), n)
                            });
                        }
                        IoBuf::Vec(v)
                    }
                };
                match self.submit(open_id, offset + off as u64, buf, cg, next as u64, read, true) {
                    Ok(_) => next += 1,
                    Err(e) => {
                        first_err = Some(e);
                    }
                }
            }
            if next == done && first_err.is_some() {
                break;
            }
            for c in self.wait_n(cg, 1, None)? {
                let i = c.user_data as usize;
                done += 1;
                match c.result {
                    Ok(n) => {
                        counts[i] = n;
                        eofs[i] = c.eof;
                        if let (Some(v), true) = (c.buf, read) {
                            // SAFETY: chunk i covers [i*chunk, i*chunk + v.len()) of the caller's buffer.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    v.as_ptr(),
                                    ptr.add(i * chunk),
                                    n.min(v.len()),
                                )
                            };
                        }
                    }
                    Err(e) => {
                        if first_err.is_none() {
                            first_err = Some(e);
                        }
                    }
                }
            }
            if self.dead {
                break;
            }
        }
        if temp {
            let r = self.regions.remove(&region.unwrap().0).unwrap();
            debug_assert_eq!(r.busy, 0);
            let _ = self.t.deregister(r.key);
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        // Bytes transferred: contiguous from the start up to the first short chunk.
        let mut total = 0;
        for (i, &count) in counts.iter().enumerate() {
            let want = chunk.min(len - i * chunk);
            total += count;
            if count < want {
                if !read {
                    return Err(Error::Protocol("short write".into()));
                }
                break;
            }
        }
        Ok(total)
    }

    /// One inline round trip straight to and from the caller's buffer: no staging
    /// buffers, no completion-group bookkeeping (the small-I/O latency path).
    fn blocking_inline(
        &mut self,
        open_id: u64,
        ptr: *mut u8,
        len: usize,
        offset: u64,
        read: bool,
    ) -> Result<usize> {
        if read {
            self.stats.inline_reads += 1;
            let m = self.call(&Request::ReadInline { open_id, offset, len: len as u32 })?;
            match self.decode(&m)?.1 {
                Reply::ReadInline { data, .. } if data.len() <= len => {
                    // SAFETY: the caller's buffer has `len` bytes; data.len() <= len.
                    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
                    self.stats.inline_bytes += data.len() as u64;
                    Ok(data.len())
                }
                _ => Err(Error::Protocol("bad READ_INLINE reply".into())),
            }
        } else {
            self.stats.inline_writes += 1;
            // SAFETY: the caller's buffer has `len` readable bytes for this call.
            let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
            let m = self.call(&Request::WriteInline { open_id, offset, stable: false, data })?;
            match self.decode(&m)?.1 {
                Reply::Write { count, .. } if count as usize == len => {
                    self.stats.inline_bytes += len as u64;
                    Ok(len)
                }
                Reply::Write { .. } => Err(Error::Protocol("short write".into())),
                _ => Err(Error::Protocol("bad WRITE_INLINE reply".into())),
            }
        }
    }

    // ------------------------------------------------------------------ namespace

    fn lookup_path(&mut self, path: &str, follow: bool) -> Result<(FileHandle, Attr)> {
        match self.lookup_path_once(path, follow) {
            // The server's handle table recycled the export's root handle (it is a cache
            // of bounded size): fetch it again and retry once.
            Err(Error::Status(Status::Stale)) => {
                let export = self.cfg.export.clone();
                self.refresh_root(&export)?;
                self.lookup_path_once(path, follow)
            }
            r => r,
        }
    }

    fn lookup_path_once(&mut self, path: &str, follow: bool) -> Result<(FileHandle, Attr)> {
        let p = clean_path(path)?;
        if p.is_empty() {
            let m = self.call(&Request::GetAttr { fh: self.root })?;
            return match self.decode(&m)?.1 {
                Reply::Attr { attr } => Ok((self.root, attr)),
                _ => Err(Error::Protocol("bad GETATTR reply".into())),
            };
        }
        let m = self.call(&Request::Lookup { dir: self.root, path: p.as_bytes(), follow })?;
        match self.decode(&m)?.1 {
            Reply::Handle { fh, attr } => Ok((fh, attr)),
            _ => Err(Error::Protocol("bad LOOKUP reply".into())),
        }
    }

    fn dir_of(&mut self, parent: &str) -> Result<FileHandle> {
        if parent.is_empty() {
            Ok(self.root)
        } else {
            Ok(self.lookup_path(parent, true)?.0)
        }
    }

    /// Look up a path (following symlinks) and return its handle and attributes.
    pub fn lookup(&mut self, path: &str) -> Result<(FileHandle, Attr)> {
        self.lookup_path(path, true)
    }

    /// Attributes of a path, following a final symlink.
    pub fn stat(&mut self, path: &str) -> Result<Attr> {
        Ok(self.lookup_path(path, true)?.1)
    }

    /// Attributes of a path, not following a final symlink.
    pub fn lstat(&mut self, path: &str) -> Result<Attr> {
        Ok(self.lookup_path(path, false)?.1)
    }

    /// Fresh attributes of an open file (or any handle).
    pub fn getattr(&mut self, fh: FileHandle) -> Result<Attr> {
        let m = self.call(&Request::GetAttr { fh })?;
        match self.decode(&m)?.1 {
            Reply::Attr { attr } => Ok(attr),
            _ => Err(Error::Protocol("bad GETATTR reply".into())),
        }
    }

    pub fn fstat(&mut self, f: &File) -> Result<Attr> {
        self.getattr(f.fh)
    }

    /// Parent of a directory handle.
    pub fn lookup_parent(&mut self, fh: FileHandle) -> Result<(FileHandle, Attr)> {
        let m = self.call(&Request::LookupParent { fh })?;
        match self.decode(&m)?.1 {
            Reply::Handle { fh, attr } => Ok((fh, attr)),
            _ => Err(Error::Protocol("bad LOOKUPP reply".into())),
        }
    }

    /// Open a file.
    pub fn open(&mut self, path: &str, opts: OpenOptions) -> Result<File> {
        opts.check()?;
        // Opens that create, or that act on the name later (delete-on-close), name the
        // file in its directory; others open the looked-up handle.
        let m = if opts.flags & (open_flags::CREATE | open_flags::DELETE_ON_CLOSE) != 0 {
            let (parent, name) = split_parent(path)?;
            let dir = self.dir_of(&parent)?;
            self.call(&Request::Open {
                fh: dir,
                flags: opts.flags,
                mode: opts.mode,
                name: name.as_bytes(),
                key: opts.key_bytes(),
            })?
        } else {
            let (fh, _) = self.lookup_path(path, true)?;
            self.call(&Request::Open {
                fh,
                flags: opts.flags,
                mode: opts.mode,
                name: b"",
                key: opts.key_bytes(),
            })?
        };
        match self.decode(&m)?.1 {
            Reply::Open { open_id, fh, attr } => {
                Ok(File { open_id, fh, attr, pos: 0, origin: Some((path.to_string(), opts)) })
            }
            _ => Err(Error::Protocol("bad OPEN reply".into())),
        }
    }

    /// Create (or truncate) a file for writing, like `std::fs::File::create`.
    pub fn create(&mut self, path: &str) -> Result<File> {
        self.open(path, OpenOptions::read_write().create(true).truncate(true))
    }

    pub fn close(&mut self, f: File) -> Result<()> {
        let m = self.call(&Request::Close { open_id: f.open_id })?;
        self.decode(&m).map(|_| ())
    }

    /// Make the file's data durable (COMMIT).
    pub fn fsync(&mut self, f: &File) -> Result<()> {
        let m = self.call(&Request::Commit { open_id: f.open_id, offset: 0, len: 0 })?;
        self.decode(&m).map(|_| ())
    }

    pub fn mkdir(&mut self, path: &str, mode: u32) -> Result<Attr> {
        let (parent, name) = split_parent(path)?;
        let dir = self.dir_of(&parent)?;
        let m = self.call(&Request::Create {
            dir,
            ftype: FileType::Directory,
            mode: mode & 0o7777,
            exclusive: true,
            name: name.as_bytes(),
        })?;
        match self.decode(&m)?.1 {
            Reply::Handle { attr, .. } => Ok(attr),
            _ => Err(Error::Protocol("bad CREATE reply".into())),
        }
    }

    /// Create a regular file without opening it.
    pub fn create_file(
        &mut self,
        path: &str,
        mode: u32,
        exclusive: bool,
    ) -> Result<(FileHandle, Attr)> {
        let (parent, name) = split_parent(path)?;
        let dir = self.dir_of(&parent)?;
        let m = self.call(&Request::Create {
            dir,
            ftype: FileType::Regular,
            mode: mode & 0o7777,
            exclusive,
            name: name.as_bytes(),
        })?;
        match self.decode(&m)?.1 {
            Reply::Handle { fh, attr } => Ok((fh, attr)),
            _ => Err(Error::Protocol("bad CREATE reply".into())),
        }
    }

    /// Remove a file (not a directory).
    pub fn remove(&mut self, path: &str) -> Result<()> {
        let (parent, name) = split_parent(path)?;
        let dir = self.dir_of(&parent)?;
        let m = self.call(&Request::Remove { dir, name: name.as_bytes() })?;
        self.decode(&m).map(|_| ())
    }

    pub fn rmdir(&mut self, path: &str) -> Result<()> {
        let (parent, name) = split_parent(path)?;
        let dir = self.dir_of(&parent)?;
        let m = self.call(&Request::RmDir { dir, name: name.as_bytes() })?;
        self.decode(&m).map(|_| ())
    }

    pub fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        let (fp, fname) = split_parent(from)?;
        let (tp, tname) = split_parent(to)?;
        let from_dir = self.dir_of(&fp)?;
        let to_dir = self.dir_of(&tp)?;
        let m = self.call(&Request::Rename {
            from_dir,
            from_name: fname.as_bytes(),
            to_dir,
            to_name: tname.as_bytes(),
        })?;
        self.decode(&m).map(|_| ())
    }

    /// Hard link: `new_path` names the same file as `existing`.
    pub fn link(&mut self, existing: &str, new_path: &str) -> Result<Attr> {
        let (fh, _) = self.lookup_path(existing, false)?;
        let (p, name) = split_parent(new_path)?;
        let dir = self.dir_of(&p)?;
        let m = self.call(&Request::Link { fh, dir, name: name.as_bytes() })?;
        match self.decode(&m)?.1 {
            Reply::Attr { attr } => Ok(attr),
            _ => Err(Error::Protocol("bad LINK reply".into())),
        }
    }

    pub fn symlink(&mut self, target: &str, link_path: &str) -> Result<Attr> {
        let (p, name) = split_parent(link_path)?;
        let dir = self.dir_of(&p)?;
        let m =
            self.call(&Request::Symlink { dir, name: name.as_bytes(), target: target.as_bytes() })?;
        match self.decode(&m)?.1 {
            Reply::Handle { attr, .. } => Ok(attr),
            _ => Err(Error::Protocol("bad SYMLINK reply".into())),
        }
    }

    pub fn readlink(&mut self, path: &str) -> Result<Vec<u8>> {
        let (fh, _) = self.lookup_path(path, false)?;
        self.readlink_handle(fh)
    }

    /// Change attributes (see [`dafs_proto::types::setattr_mask`]).
    pub fn setattr(&mut self, fh: FileHandle, set: SetAttrs) -> Result<Attr> {
        let m = self.call(&Request::SetAttr { fh, set })?;
        match self.decode(&m)?.1 {
            Reply::Attr { attr } => Ok(attr),
            _ => Err(Error::Protocol("bad SETATTR reply".into())),
        }
    }

    pub fn truncate(&mut self, path: &str, size: u64) -> Result<Attr> {
        let (fh, _) = self.lookup_path(path, true)?;
        self.setattr(fh, SetAttrs { mask: setattr_mask::SIZE, size, ..Default::default() })
    }

    pub fn chmod(&mut self, path: &str, mode: u32) -> Result<Attr> {
        let (fh, _) = self.lookup_path(path, true)?;
        self.setattr(
            fh,
            SetAttrs { mask: setattr_mask::MODE, mode: mode & 0o7777, ..Default::default() },
        )
    }

    /// Set access and modification times (nanoseconds since the epoch).
    pub fn set_times(&mut self, path: &str, atime_ns: i64, mtime_ns: i64) -> Result<Attr> {
        let (fh, _) = self.lookup_path(path, true)?;
        self.setattr(
            fh,
            SetAttrs {
                mask: setattr_mask::ATIME | setattr_mask::MTIME,
                atime_ns,
                mtime_ns,
                ..Default::default()
            },
        )
    }

    /// Which of `mask` ([`dafs_proto::types::access_mask`]) the server grants.
    pub fn access(&mut self, path: &str, mask: u32) -> Result<u32> {
        let (fh, _) = self.lookup_path(path, true)?;
        self.access_handle(fh, mask)
    }

    pub fn statfs(&mut self) -> Result<FsStat> {
        let m = self.call(&Request::FsStat { fh: self.root })?;
        match self.decode(&m)?.1 {
            Reply::FsStat(s) => Ok(s),
            _ => Err(Error::Protocol("bad FSSTAT reply".into())),
        }
    }

    /// One READDIR round trip: entries after `cookie`, the cookie to continue from, eof.
    pub fn readdir_page(
        &mut self,
        dir: FileHandle,
        cookie: u64,
        max_entries: u32,
    ) -> Result<(Vec<DirEntry>, u64, bool)> {
        let m = self.call(&Request::ReadDir { dir, cookie, max_entries, max_bytes: 0 })?;
        match self.decode(&m)?.1 {
            Reply::ReadDir { eof, entries, .. } => {
                let mut out = Vec::new();
                let mut next = cookie;
                for e in DirEntries::new(entries) {
                    let e = e.map_err(|e| Error::Protocol(e.to_string()))?;
                    next = e.cookie;
                    out.push(DirEntry { name: e.name.to_vec(), fileid: e.fileid, ftype: e.ftype });
                }
                if !eof && out.is_empty() {
                    return Err(Error::Protocol("READDIR made no progress".into()));
                }
                Ok((out, next, eof))
            }
            _ => Err(Error::Protocol("bad READDIR reply".into())),
        }
    }

    /// All entries of a directory (any size: continues with cookies).
    pub fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        let (dir, attr) = self.lookup_path(path, true)?;
        if !attr.is_dir() {
            return Err(Error::Status(Status::NotDir));
        }
        let mut all = Vec::new();
        let mut cookie = 0;
        loop {
            let (mut page, next, eof) = self.readdir_page(dir, cookie, 0)?;
            all.append(&mut page);
            if eof {
                return Ok(all);
            }
            cookie = next;
        }
    }

    // ------------------------------------------------------------------ DAFS extensions

    /// Submit a batch of I/Os on one open file in one request (at most
    /// [`Client::batch_max`] I/Os; each I/O's file and memory segments are scattered
    /// independently). Completions arrive on `cg` as `mode` says.
    ///
    /// ```no_run
    /// # use dafs_client::*;
    /// # let mut c = Client::connect("127.0.0.1:7420", ClientConfig::default())?;
    /// # let f = c.open("f", OpenOptions::read())?;
    /// let r = c.alloc_registered(1 << 20)?;
    /// let cg = c.create_cg();
    /// // Two I/Os: a gather of two file ranges into one buffer, and a scatter of one
    /// // file range into two buffer pieces.
    /// let ios = vec![
    ///     BatchIoDesc { write: false, file: vec![(0, 4096), (1 << 20, 4096)], mem: vec![(r, 0, 8192)], user_data: 1 },
    ///     BatchIoDesc { write: false, file: vec![(8192, 8192)], mem: vec![(r, 65536, 4096), (r, 131072, 4096)], user_data: 2 },
    /// ];
    /// c.submit_batch(&f, ios, cg, 0, BatchCompletion::PerIo)?;
    /// for done in c.wait_all(cg)? { println!("{}: {:?}", done.user_data, done.result); }
    /// # Ok::<(), dafs_client::Error>(())
    /// ```
    pub fn submit_batch(
        &mut self,
        f: &File,
        ios: Vec<BatchIoDesc>,
        cg: CgId,
        user_data: u64,
        mode: BatchCompletion,
    ) -> Result<ReqId> {
        self.check_user_cg(cg)?;
        if ios.is_empty() {
            return Err(Error::InvalidArgument("empty batch"));
        }
        if ios.len() > self.batch_max as usize {
            return Err(Error::Status(Status::TooMany));
        }
        let mut packed = Vec::new();
        let mut pins: Vec<(u64, Vec<RegionId>)> = Vec::with_capacity(ios.len());
        for io in &ios {
            let mut mem = Vec::with_capacity(io.mem.len());
            for &(rid, off, len) in &io.mem {
                let r = self.regions.get(&rid.0).ok_or(Error::InvalidArgument("unknown region"))?;
                if off.checked_add(len).is_none_or(|e| e > r.len) {
                    return Err(Error::InvalidArgument("range outside the region"));
                }
                mem.push((RemoteRegion { key: r.key, offset: off as u64 }, len as u64));
            }
            let desc = dafs_proto::types::BatchIo { write: io.write, file: io.file.clone(), mem };
            if desc.total() != io.mem.iter().map(|m| m.2 as u64).sum::<u64>()
                || desc.file.is_empty()
                || desc.mem.is_empty()
            {
                return Err(Error::InvalidArgument(
                    "file and memory segments of an I/O must be non-empty with equal totals",
                ));
            }
            if desc.total() > self.direct_max as u64 {
                return Err(Error::InvalidArgument("batched I/O larger than max_io_size()"));
            }
            desc.pack(&mut packed);
            pins.push((io.user_data, io.mem.iter().map(|m| m.0).collect()));
        }
        let flags = if mode == BatchCompletion::ErrorsOnly {
            dafs_proto::types::batch_flags::ERRORS_ONLY
        } else {
            0
        };
        let (slot, seq) = self.acquire_slot(false)?;
        let id = ReqId(self.next_req);
        self.next_req += 1;
        for (_, regions) in &pins {
            for r in regions {
                self.regions.get_mut(&r.0).unwrap().busy += 1;
            }
        }
        let st = BatchState { id, cg, user_data, mode, ios: pins };
        let req = Request::BatchIo {
            open_id: f.open_id,
            flags,
            count: st.ios.len() as u32,
            ios: &packed,
        };
        if let Err(e) = self.send_on_slot(slot, seq, &req, Inflight::Batch(st)) {
            // Not sent: unpin (send_on_slot gave the slot back).
            for io in &ios {
                for m in &io.mem {
                    if let Some(r) = self.regions.get_mut(&m.0 .0) {
                        r.busy -= 1;
                    }
                }
            }
            return Err(e);
        }
        self.cgs.get_mut(&cg.0).unwrap().outstanding += 1;
        Ok(id)
    }

    /// Run a chain in one round trip.
    pub fn run_chain(&mut self, chain: &Chain) -> Result<ChainOutcome> {
        if chain.is_empty() {
            return Err(Error::InvalidArgument("empty chain"));
        }
        if chain.invalid {
            return Err(Error::InvalidArgument("a chain element does not fit in a message"));
        }
        if chain.len() > dafs_proto::types::CHAIN_LEN_MAX {
            return Err(Error::Status(Status::TooMany));
        }
        let mut packed = Vec::new();
        dafs_proto::types::pack_messages(chain.elems.iter().map(|e| e.as_slice()), &mut packed);
        let m = self.call(&Request::Chain { count: chain.len() as u32, elements: &packed })?;
        let (_, r) = self.decode(&m)?;
        let Reply::Chain { failed, replies, .. } = r else {
            return Err(Error::Protocol("bad CHAIN reply".into()));
        };
        let msgs = dafs_proto::types::unpack_messages(replies, dafs_proto::types::CHAIN_LEN_MAX)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        let mut out = ChainOutcome { replies: Vec::new(), failed: None };
        for (i, msg) in msgs.iter().enumerate() {
            let (_, r) = dafs_proto::decode_reply(msg, self.max_msg)
                .map_err(|e| Error::Protocol(e.to_string()))?;
            let owned = match r {
                Reply::Error(s) => {
                    if failed as usize != i {
                        return Err(Error::Protocol("chain error reply at the wrong index".into()));
                    }
                    out.failed = Some((i, Error::Status(s)));
                    break;
                }
                Reply::Empty => ChainReply::Empty,
                Reply::Handle { fh, attr } => ChainReply::Handle { fh, attr },
                Reply::Attr { attr } => ChainReply::Attr(attr),
                Reply::Open { open_id, fh, attr } => ChainReply::Open { open_id, fh, attr },
                Reply::ReadInline { eof, data } => ChainReply::Data { data: data.to_vec(), eof },
                Reply::Write { count, offset, .. } => ChainReply::Written { count, offset },
                _ => ChainReply::Other,
            };
            out.replies.push(owned);
        }
        Ok(out)
    }

    /// LOOKUP + OPEN + READ (+ nothing else) in one round trip: the open file and up
    /// to `min(len, inline_threshold())` bytes from its start.
    pub fn open_and_read(&mut self, path: &str, len: usize) -> Result<(File, Vec<u8>, bool)> {
        let n = len.min(self.inline_threshold) as u32;
        let chain = Chain::new()
            .lookup(self.root, path)
            .open(Chain::CURRENT, OpenOptions::read())
            .read_inline(Chain::CURRENT_OPEN, 0, n);
        let out = self.run_chain(&chain)?;
        if let Some((_, e)) = out.failed {
            // An OPEN that succeeded before a failed READ is closed by the server when the
            // session ends; close it now so it does not linger.
            if let Some(ChainReply::Open { open_id, .. }) = out.replies.get(1) {
                let _ = self.call(&Request::Close { open_id: *open_id });
            }
            return Err(e);
        }
        match (&out.replies[1], &out.replies[2]) {
            (ChainReply::Open { open_id, fh, attr }, ChainReply::Data { data, eof }) => Ok((
                File {
                    open_id: *open_id,
                    fh: *fh,
                    attr: *attr,
                    pos: data.len() as u64,
                    origin: Some((path.to_string(), OpenOptions::read())),
                },
                data.clone(),
                *eof,
            )),
            _ => Err(Error::Protocol("unexpected chain replies".into())),
        }
    }

    /// Create (or truncate) `path`, write `data` (at most the inline threshold), make it
    /// durable and close it — one round trip (LOOKUP parent + OPEN + WRITE + COMMIT + CLOSE).
    pub fn create_and_write(&mut self, path: &str, data: &[u8], mode: u32) -> Result<()> {
        if data.len() > self.inline_threshold {
            return Err(Error::InvalidArgument(
                "data larger than inline_threshold(): use open + pwrite",
            ));
        }
        let (parent, name) = split_parent(path)?;
        let opts = OpenOptions::read_write().create(true).truncate(true).mode(mode);
        let mut chain = Chain::new();
        let dir = if parent.is_empty() {
            self.root
        } else {
            chain = chain.lookup(self.root, &parent);
            Chain::CURRENT
        };
        let chain = chain
            .open_in(dir, &name, opts)
            .write_inline(Chain::CURRENT_OPEN, 0, data)
            .commit(Chain::CURRENT_OPEN)
            .close(Chain::CURRENT_OPEN);
        let out = self.run_chain(&chain)?;
        if let Some((i, e)) = out.failed {
            let first_open = out.replies.iter().find_map(|r| {
                if let ChainReply::Open { open_id, .. } = r {
                    Some(*open_id)
                } else {
                    None
                }
            });
            if let Some(open_id) = first_open {
                if i + 1 < chain.len() {
                    let _ = self.call(&Request::Close { open_id });
                }
            }
            return Err(e);
        }
        Ok(())
    }

    /// Advise the server about the access pattern of a file range
    /// ([`dafs_proto::types::cache_hint`]; `len == 0`: to the end of the file).
    pub fn cache_hint(&mut self, f: &File, offset: u64, len: u64, hint: u32) -> Result<()> {
        let m = self.call(&Request::CacheHint { open_id: f.open_id, offset, len, hint })?;
        self.decode(&m).map(|_| ())
    }

    /// Take a byte-range lock without waiting: `Err(Status(Denied))` on conflict.
    /// `len == 0` locks to the end of the 64-bit range. Locks are advisory and belong to
    /// this session: they are released by [`Client::unlock`] or when the session ends.
    pub fn lock(&mut self, f: &File, offset: u64, len: u64, exclusive: bool) -> Result<()> {
        let ltype = if exclusive {
            dafs_proto::types::lock_type::EXCLUSIVE
        } else {
            dafs_proto::types::lock_type::SHARED
        };
        let m = self.call(&Request::Lock { fh: f.fh, offset, len, ltype })?;
        self.decode(&m).map(|_| ())
    }

    /// Take a lock, waiting up to `timeout` by bounded polling: retries with exponential
    /// backoff from 100 µs to 10 ms while the range is held by another session.
    pub fn lock_wait(
        &mut self,
        f: &File,
        offset: u64,
        len: u64,
        exclusive: bool,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut backoff = Duration::from_micros(100);
        loop {
            match self.lock(f, offset, len, exclusive) {
                Err(Error::Status(Status::Denied)) if Instant::now() < deadline => {
                    std::thread::sleep(
                        backoff.min(deadline.saturating_duration_since(Instant::now())),
                    );
                    backoff = (backoff * 2).min(Duration::from_millis(10));
                }
                Err(Error::Status(Status::Denied)) => return Err(Error::TimedOut),
                r => return r,
            }
        }
    }

    /// A lock of another session that would conflict, if any.
    pub fn test_lock(
        &mut self,
        f: &File,
        offset: u64,
        len: u64,
        exclusive: bool,
    ) -> Result<Option<LockInfo>> {
        let ltype = if exclusive {
            dafs_proto::types::lock_type::EXCLUSIVE
        } else {
            dafs_proto::types::lock_type::SHARED
        };
        let m = self.call(&Request::LockTest { fh: f.fh, offset, len, ltype })?;
        match self.decode(&m)?.1 {
            Reply::LockTest { conflict: false, .. } => Ok(None),
            Reply::LockTest { ltype, owner, offset, len, .. } => Ok(Some(LockInfo {
                exclusive: ltype == dafs_proto::types::lock_type::EXCLUSIVE,
                owner,
                offset,
                len,
            })),
            _ => Err(Error::Protocol("bad LOCKT reply".into())),
        }
    }

    /// Release this session's locks over a range (may split locks it partly covers).
    pub fn unlock(&mut self, f: &File, offset: u64, len: u64) -> Result<()> {
        let m = self.call(&Request::Unlock { fh: f.fh, offset, len })?;
        self.decode(&m).map(|_| ())
    }

    /// Append `data` atomically to a file opened with [`OpenOptions::append`]: the
    /// server writes it at the end of file as of that moment (across all clients) and
    /// returns the offset it chose.
    pub fn append(&mut self, f: &File, data: &[u8]) -> Result<u64> {
        if data.len() <= self.inline_threshold {
            let m = self.call(&Request::WriteInline {
                open_id: f.open_id,
                offset: 0,
                stable: false,
                data,
            })?;
            return match self.decode(&m)?.1 {
                Reply::Write { count, offset, .. } if count as usize == data.len() => Ok(offset),
                _ => Err(Error::Protocol("bad append reply".into())),
            };
        }
        if data.len() > self.direct_max {
            return Err(Error::InvalidArgument(
                "append larger than max_io_size() would not be atomic",
            ));
        }
        self.stats.off_direct_path += 1;
        // SAFETY: registered only for this synchronous call, which holds the borrow.
        let key = unsafe {
            self.register_recovering(
                data.as_ptr() as *mut u8,
                data.len(),
                dafs_transport::Access { remote_write: false, remote_read: true },
            )?
        };
        let r = self.call(&Request::WriteDirect {
            open_id: f.open_id,
            offset: 0,
            len: data.len() as u32,
            stable: false,
            region: RemoteRegion { key, offset: 0 },
        });
        let _ = self.t.deregister(key);
        let m = r?;
        match self.decode(&m)?.1 {
            Reply::Write { count, offset, .. } if count as usize == data.len() => Ok(offset),
            _ => Err(Error::Protocol("bad append reply".into())),
        }
    }

    /// Give a create-unlinked file ([`OpenOptions::unlinked`]) its name: the commit of
    /// the create/commit/abort pattern. (Abort: close it without publishing.)
    pub fn publish(&mut self, f: &File) -> Result<Attr> {
        let m = self.call(&Request::Publish { open_id: f.open_id })?;
        match self.decode(&m)?.1 {
            Reply::Handle { attr, .. } => Ok(attr),
            _ => Err(Error::Protocol("bad PUBLISH reply".into())),
        }
    }

    /// A named attribute's value (`NoAttr` status if absent).
    pub fn get_nattr(&mut self, path: &str, name: &str) -> Result<Vec<u8>> {
        let (fh, _) = self.lookup_path(path, true)?;
        let m = self.call(&Request::GetNamedAttr { fh, name: name.as_bytes() })?;
        match self.decode(&m)?.1 {
            Reply::NamedAttr { value } => Ok(value.to_vec()),
            _ => Err(Error::Protocol("bad GET_NATTR reply".into())),
        }
    }

    /// Set a named attribute (`flags`: [`dafs_proto::types::nattr_flags`]).
    pub fn set_nattr(&mut self, path: &str, name: &str, value: &[u8], flags: u32) -> Result<()> {
        let (fh, _) = self.lookup_path(path, true)?;
        let m = self.call(&Request::SetNamedAttr { fh, flags, name: name.as_bytes(), value })?;
        self.decode(&m).map(|_| ())
    }

    pub fn list_nattr(&mut self, path: &str) -> Result<Vec<String>> {
        let (fh, _) = self.lookup_path(path, true)?;
        let m = self.call(&Request::ListNamedAttr { fh })?;
        match self.decode(&m)?.1 {
            Reply::NamedAttrList { names } => Ok(names
                .split(|&b| b == 0)
                .filter(|n| !n.is_empty())
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .collect()),
            _ => Err(Error::Protocol("bad LIST_NATTR reply".into())),
        }
    }

    pub fn remove_nattr(&mut self, path: &str, name: &str) -> Result<()> {
        let (fh, _) = self.lookup_path(path, true)?;
        let m = self.call(&Request::RemoveNamedAttr { fh, name: name.as_bytes() })?;
        self.decode(&m).map(|_| ())
    }

    /// NULL round trip (latency probe).
    pub fn null(&mut self) -> Result<()> {
        let m = self.call(&Request::Null)?;
        self.decode(&m).map(|_| ())
    }

    /// Send a raw, pre-encoded request on a free slot and wait for its reply (testing
    /// and diagnostics: lets a caller exercise the server's handling of odd requests).
    pub fn raw_call(&mut self, req: &Request) -> Result<Vec<u8>> {
        self.call(req)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // Never reconnect from a destructor: a dead server must not hold it up.
        self.cfg.reconnect = false;
        // I/O still in flight may name application memory (registered with
        // register_raw, or reached by address on shared memory): wait for it, bounded,
        // so the server never writes there after the client is gone.
        let deadline = Instant::now() + Duration::from_secs(10);
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
                if dafs_proto::encode_request(&h, &Request::SessionDestroy, &mut buf, self.max_msg)
                    .is_ok()
                {
                    let _ = self.t.send(&buf);
                }
            }
        }
    }
}

// SAFETY: a Client may move to another thread (one thread at a time: it is not Sync).
// What makes the compiler unsure are the raw pointers to registered memory in the region
// table and in in-flight I/O state: they name process-wide memory (the transport's own
// allocations, or application memory under the registration contract), not anything
// tied to a thread. The transport is `Send` by its trait bound; nothing here uses
// thread-locals, `Rc` or thread-affine OS resources.
unsafe impl Send for Client {}

/// Placeholder transport of a client whose transport moved to a new session.
struct NoTransport;

impl ClientTransport for NoTransport {
    fn max_msg_size(&self) -> usize {
        limits::MSG_SIZE_MIN as usize
    }
    fn set_max_msg_size(&mut self, _n: usize) {}
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

/// Split a URL into (connect target, path inside the export):
/// `dafs://host:port/path` -> ("host:port", "/path");
/// `dafs+tls://host:port/path` -> ("dafs+tls://host:port", "/path");
/// `dafs+shm:///run/dafsd.sock/path` -> ("dafs+shm:///run/dafsd.sock", "/path"): the
/// socket path ends at the first component ending in `.sock`.
pub fn parse_url(url: &str) -> Result<(String, String)> {
    if let Some(rest) = url.strip_prefix("dafs+shm://") {
        if !rest.starts_with('/') {
            return Err(Error::InvalidArgument("dafs+shm:// URLs name an absolute socket path"));
        }
        let mut end = None;
        let mut pos = 0;
        for comp in rest.split('/') {
            pos += comp.len() + 1;
            if comp.ends_with(".sock") {
                end = Some(pos - 1);
                break;
            }
        }
        let end =
            end.ok_or(Error::InvalidArgument("dafs+shm:// URL: no path component ends in .sock"))?;
        let path = &rest[end..];
        return Ok((
            format!("dafs+shm://{}", &rest[..end]),
            if path.is_empty() { "/".into() } else { path.into() },
        ));
    }
    let (scheme, rest) = match url.strip_prefix("dafs+tls://") {
        Some(r) => ("dafs+tls://", r),
        None => (
            "",
            url.strip_prefix("dafs://").ok_or(Error::InvalidArgument(
                "URL must start with dafs://, dafs+tls:// or dafs+shm://",
            ))?,
        ),
    };
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if hostport.is_empty() {
        return Err(Error::InvalidArgument("URL has no host"));
    }
    let hostport = if hostport.contains(':') && !hostport.ends_with(']') {
        hostport.to_string()
    } else {
        format!("{hostport}:7420")
    };
    Ok((format!("{scheme}{hostport}"), path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("dafs://127.0.0.1:9/a/b").unwrap(),
            ("127.0.0.1:9".into(), "/a/b".into())
        );
        assert_eq!(parse_url("dafs://localhost").unwrap(), ("localhost:7420".into(), "/".into()));
        assert!(parse_url("http://x").is_err());
        assert!(parse_url("dafs:///x").is_err());
        assert_eq!(
            parse_url("dafs+shm:///tmp/d.sock/a/b").unwrap(),
            ("dafs+shm:///tmp/d.sock".into(), "/a/b".into())
        );
        assert_eq!(
            parse_url("dafs+shm:///tmp/d.sock").unwrap(),
            ("dafs+shm:///tmp/d.sock".into(), "/".into())
        );
        assert!(parse_url("dafs+shm:///tmp/nosock/a").is_err());
        assert_eq!(parse_url("dafs+tls://h:9/a").unwrap(), ("dafs+tls://h:9".into(), "/a".into()));
        assert_eq!(parse_url("dafs+tls://h").unwrap(), ("dafs+tls://h:7420".into(), "/".into()));
        assert!(parse_url("dafs+tls:///a").is_err());
    }

    #[test]
    fn paths() {
        assert_eq!(clean_path("//a/./b//c/").unwrap(), "a/b/c");
        assert_eq!(split_parent("/a/b").unwrap(), ("a".into(), "b".into()));
        assert_eq!(split_parent("x").unwrap(), ("".into(), "x".into()));
        assert!(split_parent("/").is_err());
        assert!(split_parent("a/..").is_err());
    }
}
