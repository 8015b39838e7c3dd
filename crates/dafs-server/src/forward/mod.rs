//! Server-to-server forwarding (round-robin placement): a request for a name whose
//! home is another node is carried out there over DAFS itself, by a `dafs_client`
//! session from this node to the home, and answered here.
//!
//! Under `placement = "round-robin"` clients send their path-based requests to the
//! nodes in turn, not to the file's home (the node the placement hash names). A node
//! that is asked for a name it neither manages nor holds forwards instead of answering
//! `WRONG_NODE`: LOOKUP, OPEN by name, CREATE of a file, REMOVE, SYMLINK and MKNOD go to
//! the home by path; an open made there becomes a *proxied open* of the client's
//! session here (`ProxyFile`), and its reads, writes, COMMIT and CLOSE are forwarded on
//! the same session to the home (direct reads and writes onward where the payload is
//! larger than the inline threshold, as any client does). Reads go through the
//! [`BlockCache`]. Two-name requests (RENAME, LINK) are not forwarded: they answer
//! `WRONG_NODE` as under matched placement, and clients send them to the home.
//! GETATTR/SETATTR and byte-range locks naming a proxied open's handle (the home's)
//! are carried to the home too; locks on a session of their own per client session
//! and home ([`Forwarder::lock`]), so that the home tells the clients' locks apart and
//! releases them when the client's session ends here.
//!
//! Forwarded requests run on the forwarding threads ([`pool`]), never on a worker (see
//! `conn::forwarding`). Sessions to the homes use TLS when this node listens with TLS,
//! and the node's shared secret ([`PeerSecurity`]).
//!
//! The forwarding session speaks for this node, not for the client: a credential the
//! client set (SET_CRED) is not carried to the home. Handles in forwarded replies are
//! the home's: usable for attributes and locks of a proxied open, not otherwise in
//! handle-based requests to this node.

pub mod cache;
pub mod pool;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dafs_client::{Client, ClientConfig, Error, File, LockInfo, OpenOptions, TlsClientOptions};
use dafs_cluster::{Member, NodeId};
use dafs_proto::types::{open_flags, SetAttrs};
use dafs_proto::{Attr, FileHandle, FileType, Status};

pub use cache::{BlockCache, FileKey, Validator, BLOCK_BYTES};
use pool::ForwardPool;

/// Sessions kept open to one home node for names and proxied opens: forwarded
/// requests to one home run at most this many at a time.
pub const SESSIONS_PER_PEER_MAX: usize = 8;
/// Lock sessions (one per client session and home that locked through a proxied
/// open) a node keeps at most; beyond, LOCK answers `LIMIT`.
pub const LOCK_SESSIONS_MAX: usize = 1024;
/// Peers ever connected (node ids, kept for the node's life): members plus churn.
pub const PEERS_MAX: usize = 2 * dafs_cluster::placement::MEMBERS_MAX;
/// How long a forwarded request may take at the home before the client here is
/// answered with an error (a forwarding thread waits meanwhile, never a worker).
pub const FORWARD_DEADLINE: Duration = Duration::from_secs(5);
/// Client ids of forwarding sessions start with this: the home counts their requests
/// apart from its clients' (`peer_requests`).
pub const PEER_CLIENT_ID_PREFIX: &str = "dafs-forward:";

/// Whether a session's client id is a forwarding node's.
pub fn is_peer(client_id: &str) -> bool {
    client_id.starts_with(PEER_CLIENT_ID_PREFIX)
}

/// Default `block_cache_bytes`: an eighth of the memory budget, at most 256 MiB.
pub fn block_cache_bytes_default(memory_bytes_max: usize) -> usize {
    (memory_bytes_max / 8).min(256 << 20)
}

/// What a forwarding node counts (`dafs admin cluster`).
#[derive(Debug, Default)]
pub struct ForwardCounters {
    /// Name requests carried out at another node (remote accesses).
    pub forwarded: AtomicU64,
    /// Reads, writes, commits and closes of proxied opens sent to the home.
    pub forwarded_io: AtomicU64,
    /// Blocks answered from the block cache / fetched from the home.
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    /// Forwarded requests that failed to reach the home (not answers of the home).
    pub forward_failures: AtomicU64,
    /// Forwarded requests refused (`DELAY`): the node's or a connection's share of
    /// forwarded requests in flight was taken.
    pub forward_refusals: AtomicU64,
}

/// How this node's sessions to the other nodes authenticate (as its clients must).
#[derive(Debug, Clone, Default)]
pub struct PeerSecurity {
    /// The cluster's shared secret (every node has the same `--secret-file`).
    pub secret: Option<Vec<u8>>,
    /// TLS to the home, verifying its certificate as a client does.
    pub tls: Option<TlsClientOptions>,
}

impl PeerSecurity {
    /// For a node with shared secret `secret` listening with `tls`: the same secret,
    /// and TLS when the node listens with TLS — the other nodes do too. The home's
    /// certificate is verified as a client verifies it, by the host part of the
    /// member's address: against the CA of `client_ca_file` when the cluster uses
    /// mutual TLS (the CA that signs the nodes' certificates; the node then presents
    /// its own certificate, which must allow client authentication too), else the
    /// system's trust store (`SSL_CERT_FILE`).
    pub fn of_node(secret: Option<&[u8]>, tls: Option<&crate::TlsServerOptions>) -> Self {
        PeerSecurity {
            secret: secret.map(<[u8]>::to_vec),
            tls: tls.map(|t| {
                let mutual = t.client_ca_file.is_some();
                TlsClientOptions {
                    ca_file: t.client_ca_file.clone(),
                    server_name: None,
                    cert_file: mutual.then(|| t.cert_file.clone()),
                    key_file: mutual.then(|| t.key_file.clone()),
                }
            }),
        }
    }
}

type Session = Arc<Mutex<Option<Client>>>;

struct Peer {
    id: NodeId,
    addr: String,
    sessions: Vec<Session>,
    next: usize,
}

/// This node's sessions to the other nodes, its block cache and its counters.
pub struct Forwarder {
    peers: Mutex<Vec<Peer>>,
    sessions_per_peer: usize,
    client_cfg: ClientConfig,
    /// Lock sessions by (client session here, peer index).
    locks: Mutex<HashMap<(u64, usize), Session>>,
    pub cache: BlockCache,
    pub counters: ForwardCounters,
    /// The forwarding threads.
    pub pool: ForwardPool,
}

/// An open made at the home on behalf of a client of this node.
pub struct ProxyFile {
    session: Session,
    file: File,
    pub key: FileKey,
    validator: Validator,
    /// The file may be read through the cache during this open (see `cache`).
    cached: bool,
    pub read: bool,
    pub write: bool,
    append: bool,
}

impl ProxyFile {
    /// The file's handle at its home.
    pub fn fh(&self) -> FileHandle {
        self.file.fh
    }

    /// Its attributes at open.
    pub fn attr(&self) -> Attr {
        self.file.attr
    }
}

impl Forwarder {
    /// `me`: this node's id (in the client id of its forwarding sessions);
    /// `cache_bytes`: 0 = off; `threads`: forwarding threads
    /// (`pool::forward_threads_default`), which also bounds the sessions per peer.
    pub fn new(
        me: &NodeId,
        cache_bytes: usize,
        threads: usize,
        security: PeerSecurity,
    ) -> std::io::Result<Self> {
        let client_cfg = ClientConfig {
            client_id: format!("{PEER_CLIENT_ID_PREFIX}{me}:{}", std::process::id()),
            connect_timeout: Duration::from_secs(2),
            request_deadline: FORWARD_DEADLINE,
            secret: security.secret,
            tls: security.tls,
            provider: dafs_client::Provider::Tcp,
            ..ClientConfig::default()
        };
        let pool = ForwardPool::start(threads)?;
        Ok(Forwarder {
            peers: Mutex::new(Vec::new()),
            sessions_per_peer: pool.threads().clamp(1, SESSIONS_PER_PEER_MAX),
            client_cfg,
            locks: Mutex::new(HashMap::new()),
            cache: BlockCache::new(cache_bytes),
            counters: ForwardCounters::default(),
            pool,
        })
    }

    /// A session to `home` (the peer's next in turn) and the peer's index.
    fn session(&self, home: &Member) -> Result<(usize, Session), Status> {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let i = match peers.iter().position(|p| p.id == home.id) {
            Some(i) => i,
            None => {
                if peers.len() == PEERS_MAX {
                    return Err(Status::Limit);
                }
                peers.push(Peer {
                    id: home.id.clone(),
                    addr: home.addr.clone(),
                    sessions: (0..self.sessions_per_peer).map(|_| Session::default()).collect(),
                    next: 0,
                });
                peers.len() - 1
            }
        };
        let p = &mut peers[i];
        if p.addr != home.addr {
            // The node moved: sessions to the old address are of no use.
            p.addr = home.addr.clone();
            p.sessions = (0..self.sessions_per_peer).map(|_| Session::default()).collect();
        }
        p.next = (p.next + 1) % p.sessions.len();
        let s = p.sessions[p.next].clone();
        Ok((i, s))
    }

    fn addr_of(&self, node: usize) -> String {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())[node].addr.clone()
    }

    /// Run `op` on `session` (connecting it to the home at `addr` if need be). A
    /// failure to reach the home drops the session (the next request reconnects).
    fn on<T>(
        &self,
        session: &Session,
        addr: &str,
        op: impl FnOnce(&mut Client) -> dafs_client::Result<T>,
    ) -> Result<T, Status> {
        let mut g = session.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            let c = Client::connect(addr, self.client_cfg.clone()).map_err(|e| {
                self.counters.forward_failures.fetch_add(1, Relaxed);
                tracing::warn!("forwarding: cannot reach the home node {addr}: {e}");
                Status::Io
            })?;
            *g = Some(c);
        }
        match op(g.as_mut().expect("connected above")) {
            Ok(v) => Ok(v),
            Err(Error::Status(s)) => Err(s),
            Err(e) => {
                self.counters.forward_failures.fetch_add(1, Relaxed);
                tracing::warn!("forwarding to {addr}: {e}");
                if !matches!(e, Error::InvalidArgument(_)) {
                    *g = None;
                }
                Err(Status::Io)
            }
        }
    }

    fn name_op<T>(
        &self,
        home: &Member,
        op: impl FnOnce(&mut Client) -> dafs_client::Result<T>,
    ) -> Result<T, Status> {
        self.counters.forwarded.fetch_add(1, Relaxed);
        let (_, s) = self.session(home)?;
        self.on(&s, &home.addr, op)
    }

    /// LOOKUP at the home: its handle and the attributes.
    pub fn lookup(
        &self,
        home: &Member,
        path: &str,
        follow: bool,
    ) -> Result<(FileHandle, Attr), Status> {
        self.name_op(home, |c| if follow { c.lookup(path) } else { c.lookup_nofollow(path) })
    }

    pub fn create_file(
        &self,
        home: &Member,
        path: &str,
        mode: u32,
        exclusive: bool,
    ) -> Result<(FileHandle, Attr), Status> {
        self.name_op(home, |c| c.create_file(path, mode, exclusive))
    }

    pub fn remove(&self, home: &Member, path: &str) -> Result<(), Status> {
        self.name_op(home, |c| c.remove(path))
    }

    pub fn symlink(&self, home: &Member, target: &str, path: &str) -> Result<Attr, Status> {
        self.name_op(home, |c| c.symlink(target, path))
    }

    pub fn mknod(
        &self,
        home: &Member,
        path: &str,
        ft: FileType,
        mode: u32,
        rdev: u64,
    ) -> Result<Attr, Status> {
        self.name_op(home, |c| c.mknod(path, ft, mode, rdev))
    }

    /// OPEN at the home; the open is revalidated against the block cache.
    pub fn open(
        &self,
        home: &Member,
        path: &str,
        flags: u32,
        mode: u32,
        key: &[u8],
    ) -> Result<ProxyFile, Status> {
        self.counters.forwarded.fetch_add(1, Relaxed);
        let (node, session) = self.session(home)?;
        let opts = OpenOptions::from_wire(flags, mode, key);
        let file = self.on(&session, &home.addr, |c| c.open(path, opts))?;
        let a = file.attr;
        let key = FileKey { node, fsid: a.fsid, fileid: a.fileid };
        let validator = Validator { size: a.size, mtime_ns: a.mtime_ns, ctime_ns: a.ctime_ns };
        let write = flags & open_flags::WRITE != 0;
        if write {
            // An open for writing may truncate, and will write: nothing cached stands.
            self.cache.invalidate(key);
        }
        let cached = !write && self.cache.revalidate(key, validator, now_ns());
        Ok(ProxyFile {
            session,
            file,
            key,
            validator,
            cached,
            read: flags & open_flags::READ != 0,
            write,
            append: flags & open_flags::APPEND != 0,
        })
    }

    /// Read `len` bytes at `offset` of a proxied open into `out` (through the cache
    /// when the open may use it). Returns true at end of file.
    pub fn read(
        &self,
        p: &ProxyFile,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<bool, Status> {
        out.clear();
        let addr = self.addr_of(p.key.node);
        if !p.cached {
            self.counters.forwarded_io.fetch_add(1, Relaxed);
            out.resize(len, 0);
            let n = self.on(&p.session, &addr, |c| c.pread(&p.file, out, offset))?;
            out.truncate(n);
            return Ok(n < len);
        }
        let end = offset.checked_add(len as u64).ok_or(Status::FBig)?;
        let mut at = offset;
        let mut block = vec![0u8; BLOCK_BYTES];
        while at < end {
            let b = at / BLOCK_BYTES as u64;
            let start = b * BLOCK_BYTES as u64;
            let data: Arc<[u8]> = match self.cache.get(p.key, p.validator, b) {
                Some(d) => {
                    self.counters.cache_hits.fetch_add(1, Relaxed);
                    d
                }
                None => {
                    self.counters.cache_misses.fetch_add(1, Relaxed);
                    self.counters.forwarded_io.fetch_add(1, Relaxed);
                    let gen = self.cache.generation();
                    let n = self.on(&p.session, &addr, |c| c.pread(&p.file, &mut block, start))?;
                    self.cache.insert(p.key, p.validator, b, &block[..n], gen);
                    Arc::from(&block[..n])
                }
            };
            let from = (at - start) as usize;
            if from >= data.len() {
                return Ok(true); // end of file
            }
            let take = (data.len() - from).min((end - at) as usize);
            out.extend_from_slice(&data[from..from + take]);
            at += take as u64;
            if data.len() < BLOCK_BYTES && at < end {
                return Ok(true); // a short block is the last one
            }
        }
        Ok(false)
    }

    /// Write through a proxied open (an append-mode open appends): (bytes, offset).
    pub fn write(
        &self,
        p: &ProxyFile,
        offset: u64,
        data: &[u8],
        stable: bool,
    ) -> Result<(usize, u64), Status> {
        self.counters.forwarded_io.fetch_add(1, Relaxed);
        self.cache.invalidate(p.key);
        let addr = self.addr_of(p.key.node);
        let r = self.on(&p.session, &addr, |c| {
            let r = if p.append {
                c.append(&p.file, data).map(|off| (data.len(), off))
            } else {
                c.pwrite(&p.file, data, offset).map(|n| (n, offset))
            }?;
            if stable {
                c.fsync(&p.file)?;
            }
            Ok(r)
        });
        // Blocks fetched by a concurrent read while the write was under way go too.
        self.cache.invalidate(p.key);
        r
    }

    pub fn commit(&self, p: &ProxyFile) -> Result<(), Status> {
        self.counters.forwarded_io.fetch_add(1, Relaxed);
        let addr = self.addr_of(p.key.node);
        self.on(&p.session, &addr, |c| c.fsync(&p.file))
    }

    /// CLOSE at the home (also when the client's session ends with the open). The
    /// connection's strand runs it after the open's other requests, so no other holder
    /// of `p` is left.
    pub fn close(&self, p: Arc<ProxyFile>) -> Result<(), Status> {
        self.counters.forwarded_io.fetch_add(1, Relaxed);
        let addr = self.addr_of(p.key.node);
        // Its connection's strand runs the open's requests in order, so the close holds
        // the last reference, or one more job is still about to drop its own: wait for
        // that (bounded), never panic on a forwarding thread.
        let mut p = p;
        let deadline = std::time::Instant::now() + FORWARD_DEADLINE;
        let p = loop {
            match Arc::try_unwrap(p) {
                Ok(p) => break p,
                Err(again) if std::time::Instant::now() < deadline => {
                    p = again;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => {
                    tracing::warn!("a proxied open still in use at close; left to its session");
                    return Err(Status::ServerFault);
                }
            }
        };
        let ProxyFile { session, file, .. } = p;
        self.on(&session, &addr, |c| c.close(file))
    }

    /// GETATTR of a proxied open's file at its home.
    pub fn getattr(&self, p: &ProxyFile) -> Result<Attr, Status> {
        self.counters.forwarded_io.fetch_add(1, Relaxed);
        let addr = self.addr_of(p.key.node);
        self.on(&p.session, &addr, |c| c.getattr(p.file.fh))
    }

    /// SETATTR of a proxied open's file at its home (a size change drops its blocks).
    pub fn setattr(&self, p: &ProxyFile, set: SetAttrs) -> Result<Attr, Status> {
        self.counters.forwarded_io.fetch_add(1, Relaxed);
        self.cache.invalidate(p.key);
        let addr = self.addr_of(p.key.node);
        let r = self.on(&p.session, &addr, |c| c.setattr(p.file.fh, set));
        self.cache.invalidate(p.key);
        r
    }

    /// The lock session of client session `owner` to `p`'s home (made on first use).
    fn lock_session(&self, owner: u64, p: &ProxyFile) -> Result<Session, Status> {
        let mut m = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = m.get(&(owner, p.key.node)) {
            return Ok(s.clone());
        }
        if m.len() >= LOCK_SESSIONS_MAX {
            return Err(Status::Limit);
        }
        Ok(m.entry((owner, p.key.node)).or_default().clone())
    }

    /// LOCK (`test`: LOCKT) / UNLOCK on a proxied open's file at its home, owned there
    /// by a session of client session `owner`'s own. `Ok(Some(..))` for a conflicting
    /// lock found by a test.
    pub fn lock(
        &self,
        owner: u64,
        p: &ProxyFile,
        op: LockOp,
        offset: u64,
        len: u64,
    ) -> Result<Option<LockInfo>, Status> {
        self.counters.forwarded_io.fetch_add(1, Relaxed);
        let s = self.lock_session(owner, p)?;
        let addr = self.addr_of(p.key.node);
        let fh = p.file.fh;
        self.on(&s, &addr, |c| match op {
            LockOp::Lock { exclusive } => c.lock_handle(fh, offset, len, exclusive).map(|_| None),
            LockOp::Test { exclusive } => c.test_lock_handle(fh, offset, len, exclusive),
            LockOp::Unlock => c.unlock_handle(fh, offset, len).map(|_| None),
        })
    }

    /// Client session `owner` has ended: its lock sessions end, and with them its
    /// locks at the homes. Blocking (a round trip per home): run it on the forwarding
    /// threads.
    pub fn release_locks(&self, owner: u64) {
        let gone: Vec<Session> = {
            let mut m = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            let keys: Vec<_> = m.keys().filter(|k| k.0 == owner).copied().collect();
            keys.iter().filter_map(|k| m.remove(k)).collect()
        };
        for s in gone {
            // Dropping the client destroys its session at the home (SESSION_DESTROY).
            drop(s.lock().unwrap_or_else(|e| e.into_inner()).take());
        }
    }

    /// Whether client session `owner` has lock sessions (nothing to release if not).
    pub fn has_locks(&self, owner: u64) -> bool {
        self.locks.lock().unwrap_or_else(|e| e.into_inner()).keys().any(|k| k.0 == owner)
    }

    /// Lock sessions open now.
    pub fn lock_sessions(&self) -> usize {
        self.locks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// A byte-range lock request carried to a home.
#[derive(Debug, Clone, Copy)]
pub enum LockOp {
    Lock { exclusive: bool },
    Test { exclusive: bool },
    Unlock,
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64)
}
