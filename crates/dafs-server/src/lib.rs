//! # dafs-server — the DAFS file server
//!
//! Architecture (see `docs/architecture.md`):
//! - one acceptor thread owns the listening socket and hands each new connection to
//!   a worker, round-robin;
//! - `workers` event-loop threads (mio/epoll), each owning its connections outright: a
//!   connection's session, slots and open files are touched by one thread only, so the
//!   request path takes only the server-wide tables' locks (file handles, byte-range
//!   locks, opens), each for one table update, and an APPEND open's append lock across
//!   its write;
//! - storage I/O with explicit offsets (pread/pwrite), every name resolved beneath
//!   the export with openat2(RESOLVE_BENEATH).
//!
//! - `copy_threads` copy engines help a worker place one large direct read
//!   (`copy_engines`);
//! - `io_threads` I/O threads run one session's independent reads and writes in
//!   parallel (`io_pool`, `conn::parallel`).
//!
//! The thread count is fixed at start (`workers` + `copy_threads` + `io_threads` + the acceptor + the
//! handle sweep, + the admin and metrics threads when enabled), whatever the clients do.

#[macro_use]
mod ratelog;
pub mod admin;
pub mod admission;
pub mod cluster;
pub mod config;
mod conn;
pub mod copy_engines;
pub mod cred;
pub mod dir_paths;
mod error;
pub mod fd_budget;
pub mod forward;
pub mod fsops;
pub mod grace;
pub mod handle_codec;
pub mod handles;
pub mod io_pool;
pub mod kernel_fh;
pub mod live;
pub mod locks;
pub mod memory;
mod nattr;
mod ofi_listen;
pub mod openstate;
pub mod sessions;
pub mod state_dir;
pub mod stats;
pub mod xrename;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dafs_transport::shm::ShmListener;
use dafs_transport::tcp::TcpListener;
use dafs_transport::{ServerConn, ServerListener};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use rustix::fs::{Mode, OFlags};
use tracing::{debug, error, info, warn};

pub use config::{Export, ServerConfig, TlsServerOptions};
use conn::{Conn, ConnFate, Scratch};
pub use error::{ConfigError, StartError};
use live::LiveCount;
pub use stats::StatsSnapshot;

/// State shared by all threads.
pub struct Shared {
    pub cfg: ServerConfig,
    /// `O_PATH` descriptors of the export roots, indexed like `cfg.exports`.
    pub roots: Vec<OwnedFd>,
    /// Random per start, sent in every SESSION_CREATE reply: clients tell a restarted
    /// server (state to reclaim) from an expired session.
    pub boot_verifier: u64,
    /// Random per start: keys the opaque lock owners LOCKT reports (never session ids).
    pub owner_key: [u8; 32],
    pub handles: handles::HandleTable,
    pub locks: locks::LockTable,
    pub open_table: openstate::OpenTable,
    /// The grace period after a restart, and the record of clients holding state.
    pub grace: grace::Grace,
    /// How the descriptors are shared out (from RLIMIT_NOFILE at start).
    pub fd_budget: fd_budget::FdBudget,
    /// Files clients hold open, all sessions together (bounded by the budget).
    pub open_files_live: Arc<LiveCount>,
    pub stats: Arc<stats::ServerStats>,
    /// Sessions holding state (bound to a connection or parked for their lease).
    pub sessions_live: LiveCount,
    /// Every session, bound or parked; fenced clients.
    pub(crate) sessions: sessions::SessionTable<conn::Session>,
    /// Connections open now (bounded by `connections_max`).
    pub connections_live: LiveCount,
    /// Connections per source address and not yet authenticated.
    pub admission: admission::Admission,
    /// Bytes all connections hold in queued output and pulls in flight.
    pub memory: memory::MemoryBudget,
    /// Per-peer rate of warnings (see `peer_warn!`).
    pub(crate) warn_limiter: ratelog::WarnLimiter,
    /// This host's identity, offered to clients for the same-host check.
    pub host_id: [u8; 16],
    /// Socket path of the shared-memory provider ("" if disabled).
    pub shm_path: String,
    /// Threads that help place large direct reads.
    pub copy: copy_engines::CopyEngines,
    /// Threads that run sessions' independent data requests in parallel.
    pub io: io_pool::IoPool,
    /// Cross-node renames (a cluster node with a state directory).
    pub xrename: Option<xrename::Mover>,
    shutdown: AtomicBool,
    /// Every worker's inbox and waker (set once the workers exist).
    links: std::sync::OnceLock<Vec<Arc<WorkerLink>>>,
}

impl Shared {
    /// Wake every worker (after revoking sessions, so the owners act at once rather
    /// than at their next timeout).
    pub fn wake_workers(&self) {
        if let Some(links) = self.links.get() {
            for l in links {
                let _ = l.waker.wake();
            }
        }
    }
}

/// (Debug names no field: it holds a lock and a waker only.)
pub(crate) struct WorkerLink {
    inbox: Mutex<Vec<Box<dyn ServerConn>>>,
    /// Connections whose trunking bind another worker verified, to join a session of
    /// this worker's (`Conn::attach_trunk`).
    trunks: Mutex<Vec<Handover>>,
    waker: Waker,
}

impl std::fmt::Debug for WorkerLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerLink")
    }
}

/// A connection on its way to the worker holding its session (trunking SESSION_BIND).
/// It keeps its admission (address share, `connections_live`) all the way.
pub(crate) struct Handover {
    pub(crate) session_id: u64,
    /// Filled by the worker that let go of it.
    pub(crate) t: Option<Box<dyn ServerConn>>,
    pub(crate) peer_ip: Option<std::net::IpAddr>,
    /// The encoded SESSION_BIND reply, sent by the new owner once it is attached.
    pub(crate) reply: Vec<u8>,
    pub(crate) owner: Arc<WorkerLink>,
    pub(crate) info: Arc<sessions::SessionInfo>,
    /// The nonce the bind proved over: rotated as the reply says when it joins.
    pub(crate) proved: sessions::TrunkProof,
}

/// A running server. Dropping it does not stop the server; call [`ServerHandle::shutdown`].
pub struct ServerHandle {
    shared: Arc<Shared>,
    local_addr: String,
    metrics_addr: Option<String>,
    /// `ofi+NAME://HOST:PORT` of each libfabric listener (ports resolved).
    ofi_urls: Vec<String>,
    links: Vec<Arc<WorkerLink>>,
    acceptor_waker: Arc<Waker>,
    threads: Vec<JoinHandle<()>>,
}

impl ServerHandle {
    /// The address the server listens on (useful with port 0).
    pub fn local_addr(&self) -> &str {
        &self.local_addr
    }
    /// The Prometheus endpoint's address, if enabled.
    pub fn metrics_addr(&self) -> Option<&str> {
        self.metrics_addr.as_deref()
    }
    /// The libfabric listeners' URLs (`ofi+NAME://HOST:PORT`, ports resolved).
    pub fn ofi_urls(&self) -> &[String] {
        &self.ofi_urls
    }
    /// The shared-memory provider's socket path, if enabled.
    pub fn shm_path(&self) -> Option<&str> {
        if self.shared.shm_path.is_empty() {
            None
        } else {
            Some(&self.shared.shm_path)
        }
    }
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.stats.snapshot()
    }
    pub fn sessions_live(&self) -> usize {
        self.shared.sessions_live.get()
    }
    /// Fence a client id (or a prefix ending in '*'): its sessions end, and it cannot
    /// create or bind sessions until unfenced. Returns the sessions affected.
    pub fn fence(&self, pattern: &str) -> usize {
        admin::fence(&self.shared, pattern)
    }
    pub fn unfence(&self, pattern: &str) -> bool {
        self.shared.sessions.unfence(pattern)
    }

    /// Stop accepting, close every connection, join all threads.
    pub fn shutdown(mut self) {
        self.shared.shutdown.store(true, Relaxed);
        let _ = self.acceptor_waker.wake();
        for l in &self.links {
            let _ = l.waker.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Block until the server stops (it stops only through `shutdown` from another handle
    /// or the process ending).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// The state shared by the server's threads (tables, counters, configuration).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

const WAKER: Token = Token(usize::MAX);
const LISTENER: Token = Token(0);
const SHM_LISTENER: Token = Token(1);

/// How often the acceptor looks for sessions whose lease has passed; also its poll
/// timeout, so it notices shutdown within this much even without a wake-up.
const LEASE_REAP_INTERVAL: Duration = Duration::from_millis(250);
/// Longest a worker sleeps in epoll without events: a backstop for noticing shutdown
/// and revocations should a wake-up be lost.
const WORKER_SLEEP_MAX: Duration = Duration::from_millis(500);
/// Readiness events taken per poll: the acceptor has two listeners and a waker; a
/// worker handles this many connections' events per pass, the rest on the next.
const ACCEPTOR_EVENTS_MAX: usize = 16;
const WORKER_EVENTS_MAX: usize = 256;

/// Start the server: bind, open the exports, spawn the acceptor and the workers.
pub fn start(cfg: ServerConfig) -> Result<ServerHandle, StartError> {
    cfg.validate()?;
    let mut roots = Vec::new();
    for e in &cfg.exports {
        let fd = rustix::fs::open(
            &e.path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| StartError::OpenExport { path: e.path.clone(), source: err.into() })?;
        roots.push(fd);
    }
    let budget = fd_budget::for_server(&cfg)?;
    let mut instance = [0u8; 8];
    getrandom::getrandom(&mut instance).map_err(StartError::Random)?;
    let mut owner_key = [0u8; 32];
    getrandom::getrandom(&mut owner_key).map_err(StartError::Random)?;
    let stats = Arc::new(stats::ServerStats::default());
    let grace = grace::Grace::start(cfg.state_dir.as_deref(), cfg.grace_secs).map_err(|e| {
        StartError::StateDir { path: cfg.state_dir.clone().unwrap_or_default(), source: e }
    })?;
    let handles = handles::HandleTable::for_server(
        &cfg,
        &roots,
        u64::from_le_bytes(instance),
        &budget,
        &stats,
    )?;
    let mut listener = TcpListener::bind(&cfg.listen)
        .map_err(|e| StartError::Listen { addr: cfg.listen.clone(), source: e })?;
    if let Some(t) = &cfg.tls {
        listener.set_tls(t.build().map_err(StartError::Tls)?);
    }
    let local_addr = listener.local_addr();
    let mut shm_listener = match &cfg.shm_socket {
        Some(p) => {
            let mut l = ShmListener::bind(p)
                .map_err(|e| StartError::Listen { addr: p.display().to_string(), source: e })?;
            l.allow_uids(&cfg.shm_allow_uids).map_err(|e| StartError::Listen {
                addr: p.display().to_string(),
                source: e.into(),
            })?;
            Some(l)
        }
        None => None,
    };
    let shm_path = cfg.shm_socket.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    let mut ofi_listeners = ofi_listen::bind_all(&cfg.ofi_listen)?;
    let ofi_urls: Vec<String> = ofi_listeners.iter().map(|l| l.url()).collect();
    let xrename = match (&cfg.cluster, &cfg.state_dir) {
        (Some(node), Some(dir)) => Some(
            xrename::Mover::new(
                dir,
                node.me().as_str(),
                forward::PeerSecurity::of_node(cfg.secret.as_deref(), cfg.tls.as_ref()),
                cfg.workers,
            )
            .map_err(|e| StartError::StateDir { path: dir.clone(), source: e })?,
        ),
        (Some(_), None) => {
            info!("no state_dir: file renames across cluster nodes answer EXDEV");
            None
        }
        _ => None,
    };
    let shared = Arc::new(Shared {
        handles,
        boot_verifier: u64::from_le_bytes(instance),
        owner_key,
        roots,
        locks: Default::default(),
        open_table: Default::default(),
        grace,
        fd_budget: budget,
        open_files_live: Arc::new(LiveCount::new("open files")),
        stats,
        sessions_live: LiveCount::new("live sessions"),
        sessions: Default::default(),
        connections_live: LiveCount::new("live connections"),
        admission: Default::default(),
        warn_limiter: ratelog::WarnLimiter::new(cfg.peer_warn_burst, cfg.peer_warn_per_min),
        memory: Default::default(),
        host_id: dafs_transport::shm::host_id(),
        shm_path,
        copy: copy_engines::CopyEngines::start(cfg.copy_threads)
            .map_err(StartError::io("cannot start a copy engine thread"))?,
        io: io_pool::IoPool::start(cfg.io_threads)
            .map_err(StartError::io("cannot start an I/O thread"))?,
        xrename,
        shutdown: AtomicBool::new(false),
        links: std::sync::OnceLock::new(),
        cfg,
    });

    let mut threads = Vec::new();
    let mut links = Vec::new();
    for i in 0..shared.cfg.workers {
        let poll = Poll::new().map_err(StartError::io("cannot create a worker's event loop"))?;
        let waker = Waker::new(poll.registry(), WAKER)
            .map_err(StartError::io("cannot create a worker's waker"))?;
        let link = Arc::new(WorkerLink {
            inbox: Mutex::new(Vec::new()),
            trunks: Mutex::new(Vec::new()),
            waker,
        });
        links.push(link.clone());
        let sh = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("dafsd-worker-{i}"))
                .spawn(move || worker_loop(sh, poll, link))
                .map_err(StartError::io("cannot start a worker thread"))?,
        );
    }

    let _ = shared.links.set(links.clone());
    let apoll = Poll::new().map_err(StartError::io("cannot create the acceptor's event loop"))?;
    apoll
        .registry()
        .register(listener.mio(), LISTENER, Interest::READABLE)
        .map_err(StartError::io("cannot watch the listening socket"))?;
    if let Some(l) = shm_listener.as_mut() {
        apoll
            .registry()
            .register(l.mio(), SHM_LISTENER, Interest::READABLE)
            .map_err(StartError::io("cannot watch the shared-memory socket"))?;
    }
    ofi_listen::watch(&ofi_listeners, apoll.registry())?;
    let acceptor_waker = Arc::new(
        Waker::new(apoll.registry(), WAKER)
            .map_err(StartError::io("cannot create the acceptor's waker"))?,
    );
    {
        let sh = shared.clone();
        let links = links.clone();
        threads.push(
            std::thread::Builder::new()
                .name("dafsd-accept".into())
                .spawn(move || {
                    accept_loop(sh, apoll, listener, shm_listener, &mut ofi_listeners, links)
                })
                .map_err(StartError::io("cannot start the acceptor thread"))?,
        );
    }
    if shared.xrename.is_some() {
        // Finishes or undoes cross-node renames a crash (here or on the target) left.
        let sh = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("dafsd-xrename".into())
                .spawn(move || xrename::recovery_loop(&sh))
                .map_err(StartError::io("cannot start the cross-node rename thread"))?,
        );
    }
    {
        // Closes cached descriptors of deleted files, so their space comes back.
        let sh = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("dafsd-handles".into())
                .spawn(move || handles::sweep_loop(&sh.handles, &sh.shutdown))
                .map_err(StartError::io("cannot start the handle sweep thread"))?,
        );
    }
    if let Some(path) = shared.cfg.admin_socket.clone() {
        let l = admin::bind_admin_socket(&path)
            .map_err(|e| StartError::AdminSocket { path: path.clone(), source: e })?;
        let sh = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("dafsd-admin".into())
                .spawn(move || admin::admin_loop(sh, l, path))
                .map_err(StartError::io("cannot start the admin thread"))?,
        );
    }
    let mut metrics_addr = None;
    if let Some(addr) = shared.cfg.metrics_listen.clone() {
        let l = std::net::TcpListener::bind(&addr)
            .map_err(|e| StartError::Metrics { addr: addr.clone(), source: e })?;
        let bound =
            l.local_addr().map_err(StartError::io("cannot read the metrics listener's address"))?;
        metrics_addr = Some(bound.to_string());
        let sh = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("dafsd-metrics".into())
                .spawn(move || admin::metrics_loop(sh, l))
                .map_err(StartError::io("cannot start the metrics thread"))?,
        );
    }
    info!(addr = %local_addr, tls = shared.cfg.tls.is_some(), shm = %shared.shm_path, exports = shared.cfg.exports.len(), workers = shared.cfg.workers, "dafsd listening");
    Ok(ServerHandle { shared, local_addr, metrics_addr, ofi_urls, links, acceptor_waker, threads })
}

fn accept_loop(
    sh: Arc<Shared>,
    mut poll: Poll,
    mut listener: TcpListener,
    mut shm: Option<ShmListener>,
    ofi: &mut [dafs_ofi::OfiListener],
    links: Vec<Arc<WorkerLink>>,
) {
    let mut events = Events::with_capacity(ACCEPTOR_EVENTS_MAX);
    let mut next = 0usize;
    let mut last_reap = Instant::now();
    while !sh.shutdown.load(Relaxed) {
        if let Err(e) = poll.poll(&mut events, Some(LEASE_REAP_INTERVAL)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                error!("acceptor poll failed: {e}");
                return;
            }
        }
        // Leases: release the state of sessions whose client did not come back in time.
        if last_reap.elapsed() >= LEASE_REAP_INTERVAL {
            last_reap = Instant::now();
            for (s, _) in sh.sessions.expired(last_reap) {
                sh.stats.sessions_expired.fetch_add(1, Relaxed);
                conn::release_session(&sh, *s, "lease expired; session released");
            }
        }
        loop {
            let mut got: Vec<Box<dyn ServerConn>> = Vec::new();
            match listener.accept() {
                Ok(Some(c)) => {
                    // SAFETY: the descriptor belongs to `c`, alive for this call.
                    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(c.raw_fd()) };
                    if let Err(e) = dafs_transport::set_tcp_keepalive(fd) {
                        warn!("cannot enable TCP keepalive: {e}");
                    }
                    got.push(Box::new(c))
                }
                Ok(None) => {}
                Err(e) => warn!("accept failed: {e}"),
            }
            if let Some(l) = shm.as_mut() {
                match l.accept() {
                    Ok(Some(c)) => got.push(Box::new(c)),
                    Ok(None) => {}
                    Err(e) => warn!("shm accept failed: {e}"),
                }
                sh.stats.shm_uid_refusals.store(l.uid_refusals(), Relaxed);
            }
            ofi_listen::accept_all(ofi, &mut got);
            if got.is_empty() {
                break;
            }
            for c in got {
                sh.stats.connections_accepted.fetch_add(1, Relaxed);
                if !admit(&sh, &*c) {
                    continue;
                }
                let link = &links[next % links.len()];
                next += 1;
                link.inbox.lock().unwrap().push(c);
                let _ = link.waker.wake();
            }
        }
    }
}

/// May the new connection `c` stay? Closed at once (by dropping it) if not: a flood of
/// connections cannot exhaust descriptors or memory, nor one address take them all.
/// The client sees the connection close before any reply. (Unauthenticated connections
/// beyond their share are evicted by the workers' sweep, oldest first.)
fn admit(sh: &Shared, c: &dyn ServerConn) -> bool {
    let peer = c.peer();
    if !sh.connections_live.try_acquire(sh.cfg.connections_max) {
        sh.stats.limit_refusals.fetch_add(1, Relaxed);
        peer_warn!(
            sh,
            peer,
            limit = sh.cfg.connections_max,
            "connection refused: connections_max reached"
        );
        return false;
    }
    let per_addr_max = sh.cfg.connections_per_addr_max;
    if sh.admission.admit(admission::peer_ip(&peer), per_addr_max).is_ok() {
        return true;
    }
    sh.stats.per_addr_refusals.fetch_add(1, Relaxed);
    peer_warn!(
        sh,
        peer,
        limit = per_addr_max,
        "connection refused: connections_per_addr_max reached"
    );
    sh.connections_live.release();
    false
}

/// How often a worker looks for connections past their handshake deadline.
const HANDSHAKE_SWEEP_INTERVAL: Duration = Duration::from_millis(100);

/// Close this worker's unauthenticated connections that passed `handshake_timeout_ms`
/// (idle and trickling peers cannot hold a connection for long), then, while more than
/// `connections_unauth_max` connections of all workers are unauthenticated, the oldest
/// of its own: a new client always gets its turn to authenticate, and the rest of
/// `connections_max` stays for authenticated clients.
fn sweep_handshakes(sh: &Shared, poll: &Poll, conns: &mut [Option<Conn>], free: &mut Vec<usize>) {
    let limit = Duration::from_millis(sh.cfg.handshake_timeout_ms);
    let mut unauth: Vec<(Instant, usize)> = conns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.as_ref().filter(|c| !c.authenticated).map(|c| (c.accepted_at, i)))
        .collect();
    unauth.sort_unstable();
    let share = sh.cfg.connections_unauth_max();
    for (accepted_at, idx) in unauth {
        let peer = conns[idx].as_ref().map(|c| c.t.peer()).unwrap_or_default();
        if accepted_at.elapsed() > limit {
            sh.stats.handshake_timeouts.fetch_add(1, Relaxed);
            peer_warn!(
                sh,
                peer,
                timeout_ms = sh.cfg.handshake_timeout_ms,
                "closing connection: not authenticated in time"
            );
        } else if sh.admission.unauth.get() > share {
            sh.stats.unauth_evictions.fetch_add(1, Relaxed);
            peer_warn!(
                sh,
                peer,
                limit = share,
                "closing connection: connections_unauth_max reached, oldest unauthenticated first"
            );
        } else {
            continue;
        }
        close_conn(sh, poll, conns, free, idx);
    }
}

fn worker_loop(sh: Arc<Shared>, mut poll: Poll, link: Arc<WorkerLink>) {
    cred::worker_umask_zero();
    let mut events = Events::with_capacity(WORKER_EVENTS_MAX);
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    // The connections each iteration looks at besides those with events, so that its
    // work grows with the connections that are ready, not with all: those whose input
    // can wait unseen by epoll (`ServerConn::polled`) and those with requests handed
    // to the I/O pool or forwarded. Entries of closed connections are dropped lazily.
    let mut polled: Vec<usize> = Vec::new();
    let mut inflight: Vec<usize> = Vec::new();
    let mut sc = Scratch::default();
    // Adaptive: spinning pays only while requests follow each other within the budget.
    let mut spin = dafs_transport::wait::AdaptiveSpin::new(Duration::from_micros(sh.cfg.spin_us));
    let mut last_activity = Instant::now();
    let mut revoke_seen = sh.sessions.revoke_epoch.load(Relaxed);
    let mut last_sweep = Instant::now();
    loop {
        // Bounded spin, then sleep: while spinning, poll epoll without blocking and look
        // at shared-memory rings directly; before sleeping, ask every ring-based peer for
        // a doorbell (and do not sleep if input arrived meanwhile).
        let spinning = !spin.budget().is_zero() && last_activity.elapsed() < spin.budget();
        if spinning {
            dafs_transport::wait::spin_pause();
        }
        // Unauthenticated connections (of any worker) are swept on time (deadline,
        // eviction).
        let sleep_max =
            if sh.admission.unauth.get() > 0 { HANDSHAKE_SWEEP_INTERVAL } else { WORKER_SLEEP_MAX };
        let mut timeout = if spinning { Some(Duration::ZERO) } else { Some(sleep_max) };
        let mut armed = false;
        if timeout != Some(Duration::ZERO) {
            armed = true;
            polled.retain(|&i| conns[i].as_ref().is_some_and(|c| c.t.polled()));
            for &i in &polled {
                if !conns[i].as_mut().expect("retained").t.arm_sleep() {
                    timeout = Some(Duration::ZERO);
                }
            }
        }
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                error!("worker poll failed: {e}");
                return;
            }
        }
        if armed {
            for &i in &polled {
                if let Some(c) = conns[i].as_mut() {
                    c.t.disarm_sleep();
                }
            }
        }
        if !events.is_empty() {
            spin.record(last_activity.elapsed());
            last_activity = Instant::now();
        }
        // Ring input is not signalled through epoll while the peer sees us awake.
        for &idx in &polled {
            let pending = conns[idx].as_ref().is_some_and(|c| !c.lingering && c.t.input_pending());
            if pending {
                spin.record(last_activity.elapsed());
                last_activity = Instant::now();
                let fate = conns[idx].as_mut().unwrap().drive(&sh, &mut sc);
                note_inflight(&conns, &mut inflight, idx);
                if fate == ConnFate::Close {
                    close_conn(&sh, &poll, &mut conns, &mut free, idx);
                    note_inflight(&conns, &mut inflight, idx);
                }
            }
        }
        if sh.shutdown.load(Relaxed) {
            for c in conns.iter_mut().flatten() {
                c.close(&sh);
            }
            return;
        }
        if last_sweep.elapsed() >= HANDSHAKE_SWEEP_INTERVAL {
            last_sweep = Instant::now();
            sweep_handshakes(&sh, &poll, &mut conns, &mut free);
        }
        // Another thread revoked sessions (a bind from a new connection, fencing): close
        // the connections that hold them (their sessions are parked or released).
        let epoch = sh.sessions.revoke_epoch.load(Relaxed);
        if epoch != revoke_seen {
            revoke_seen = epoch;
            for idx in 0..conns.len() {
                if conns[idx].as_ref().is_some_and(|c| c.revoked()) {
                    close_conn(&sh, &poll, &mut conns, &mut free, idx);
                }
            }
        }
        for ev in events.iter() {
            if ev.token() == WAKER {
                let trunks: Vec<_> = std::mem::take(&mut *link.trunks.lock().unwrap());
                for h in trunks {
                    attach_trunk(&sh, &poll, &mut conns, &mut free, &mut sc, h);
                }
                let new: Vec<_> = std::mem::take(&mut *link.inbox.lock().unwrap());
                for t in new {
                    let idx = free.pop().unwrap_or_else(|| {
                        conns.push(None);
                        conns.len() - 1
                    });
                    let fd = t.raw_fd();
                    if let Err(e) = poll.registry().register(
                        &mut SourceFd(&fd),
                        Token(idx),
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        warn!("cannot watch new connection: {e}");
                        free.push(idx);
                        sh.admission.closed(crate::admission::peer_ip(&t.peer()), false);
                        sh.connections_live.release();
                        continue;
                    }
                    let mut c = Conn::new(t, Arc::clone(&link));
                    if c.t.polled() && !polled.contains(&idx) {
                        polled.push(idx);
                    }
                    // Data may already be waiting (edge-triggered: drain now).
                    let fate = c.drive(&sh, &mut sc);
                    conns[idx] = Some(c);
                    note_inflight(&conns, &mut inflight, idx);
                    if fate == ConnFate::Close {
                        close_conn(&sh, &poll, &mut conns, &mut free, idx);
                        note_inflight(&conns, &mut inflight, idx);
                    }
                }
                continue;
            }
            let idx = ev.token().0;
            let Some(c) = conns.get_mut(idx).and_then(|c| c.as_mut()) else { continue };
            let mut fate = ConnFate::Keep;
            if ev.is_writable() {
                fate = c.flush(&sh);
            }
            if fate == ConnFate::Keep && (ev.is_readable() || c.read_paused || ev.is_read_closed())
            {
                fate = c.drive(&sh, &mut sc);
            }
            if fate == ConnFate::Keep && (ev.is_error()) {
                fate = ConnFate::Close;
            }
            note_inflight(&conns, &mut inflight, idx);
            if fate == ConnFate::Close {
                close_conn(&sh, &poll, &mut conns, &mut free, idx);
                note_inflight(&conns, &mut inflight, idx);
            }
        }
        // Parallel requests handed over just now or before: answer the finished ones,
        // and lend a hand with the queued jobs the idle pool threads will not take,
        // answering after each so that its client can send the next request meanwhile.
        loop {
            inflight.retain(|&i| conns[i].as_ref().is_some_and(|c| c.has_inflight()));
            if inflight.is_empty() {
                break;
            }
            for &idx in &inflight {
                let Some(c) = conns[idx].as_mut().filter(|c| c.has_inflight()) else { continue };
                let fate = c.answer_finished(&sh, &mut sc);
                // A lingering connection closes once its last forwarded reply is in.
                if fate == ConnFate::Close || (c.lingering && !c.has_inflight()) {
                    close_conn(&sh, &poll, &mut conns, &mut free, idx);
                }
            }
            if !sh.io.run_excess() {
                break;
            }
        }
    }
}

/// List connection `idx` among those with requests in flight if it has any now.
fn note_inflight(conns: &[Option<Conn>], inflight: &mut Vec<usize>, idx: usize) {
    if conns[idx].as_ref().is_some_and(|c| c.has_inflight()) && !inflight.contains(&idx) {
        inflight.push(idx);
    }
}

fn close_conn(
    sh: &Shared,
    poll: &Poll,
    conns: &mut [Option<Conn>],
    free: &mut Vec<usize>,
    idx: usize,
) {
    let Some(c) = conns[idx].as_mut() else { return };
    if !c.lingering {
        for fd in c.t.fds() {
            let _ = poll.registry().deregister(&mut SourceFd(&fd));
        }
    }
    // Forwarded requests in flight: their replies must reach the reply cache before
    // the session is parked, and the worker must not wait for them (see
    // `conn::forwarding`). The connection stays, reading nothing, until they are in.
    if c.linger() {
        return;
    }
    if let Some(mut c) = conns[idx].take() {
        free.push(idx);
        if let Some(mut h) = c.handover.take() {
            // A verified trunking bind: the connection moves to its session's worker,
            // admitted and counted as it is (the session's connections are all limited
            // together there).
            debug_assert!(c.t.len() == 1, "a connection without a session has no trunk");
            h.t = Some(c.into_transport());
            let owner = h.owner.clone();
            owner.trunks.lock().unwrap().push(h);
            let _ = owner.waker.wake();
            return;
        }
        c.close(sh);
        // Every connection of the session held its share of the limits.
        for ip in c.t.peer_ips() {
            sh.admission.closed(ip, c.authenticated);
            sh.stats.connections_closed.fetch_add(1, Relaxed);
            sh.connections_live.release();
        }
    }
}

/// A connection handed over by a trunking bind: join it to the session's connection on
/// this worker, watched under that connection's token; if the session is gone from here
/// (parked, moved, full), close it — the client sees the close and carries on with the
/// connections it has.
fn attach_trunk(
    sh: &Shared,
    poll: &Poll,
    conns: &mut [Option<Conn>],
    free: &mut Vec<usize>,
    sc: &mut Scratch,
    mut h: Handover,
) {
    let fd = h.t.as_ref().expect("handed over with its connection").raw_fd();
    let found =
        conns.iter().position(|c| c.as_ref().is_some_and(|c| c.session_id() == Some(h.session_id)));
    if let Some(idx) = found {
        let registered = poll
            .registry()
            .register(&mut SourceFd(&fd), Token(idx), Interest::READABLE | Interest::WRITABLE)
            .is_ok();
        let c = conns[idx].as_mut().expect("found above");
        if registered && c.attach_trunk(sh, &mut h).is_some() {
            sh.stats.trunk_binds.fetch_add(1, Relaxed);
            // Data may already be waiting (edge-triggered: drain now).
            if c.drive(sh, sc) == ConnFate::Close {
                close_conn(sh, poll, conns, free, idx);
            }
            return;
        }
        if registered {
            let _ = poll.registry().deregister(&mut SourceFd(&fd));
        }
    }
    sh.stats.trunk_refusals.fetch_add(1, Relaxed);
    debug!(session = h.session_id, "trunked connection joins no session here; closed");
    drop(h.t.take());
    sh.admission.closed(h.peer_ip, true);
    sh.stats.connections_closed.fetch_add(1, Relaxed);
    sh.connections_live.release();
}
