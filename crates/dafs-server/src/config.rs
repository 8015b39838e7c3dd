//! Server configuration. Every limit has a default here and is documented in
//! `docs/architecture.md#limits`.

use std::path::PathBuf;

use dafs_proto::limits;
pub use dafs_transport::tls::TlsServerOptions;

use crate::error::ConfigError;
use crate::handles::HANDLES_MIN;

#[derive(Debug, Clone)]
pub struct Export {
    /// Name clients pass to GET_ROOTHANDLE; the first export is also the default ("").
    pub name: String,
    pub path: PathBuf,
    pub read_only: bool,
    /// Client ids allowed to attach (GET_ROOTHANDLE); a trailing '*' matches a prefix.
    /// Empty: every client. With a shared secret configured, client ids are
    /// authenticated (the HMAC transcript covers them).
    pub clients: Vec<String>,
}

impl Export {
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>, read_only: bool) -> Self {
        Export { name: name.into(), path: path.into(), read_only, clients: vec![] }
    }
    /// May `client_id` attach to this export?
    pub fn admits(&self, client_id: &str) -> bool {
        self.clients.is_empty()
            || self.clients.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => client_id.starts_with(prefix),
                None => p == client_id,
            })
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub exports: Vec<Export>,
    /// This node's membership of a federated cluster (`dafsd --cluster`); None: a
    /// stand-alone server.
    pub cluster: Option<std::sync::Arc<crate::cluster::ClusterNode>>,
    /// TCP listen address, e.g. "127.0.0.1:7420" (port 0 picks a free one).
    pub listen: String,
    /// libfabric listeners, each `ofi+NAME://HOST:PORT` (`NAME`: `tcp` = `tcp;ofi_rxm`,
    /// `shm`, `verbs` = `verbs;ofi_rxm`, or a libfabric provider string).
    pub ofi_listen: Vec<String>,
    /// Event-loop worker threads (besides the acceptor, the handle sweep, and the admin
    /// and metrics threads when enabled).
    pub workers: usize,
    /// Shared secret: when set, every session must authenticate with HMAC-SHA256.
    pub secret: Option<Vec<u8>>,
    /// Most slots (outstanding requests) granted to one session.
    pub slots_max: u32,
    /// Largest message accepted or sent.
    pub msg_size_bytes_max: u32,
    /// Reads/writes up to this many bytes travel inline, larger ones direct: over the
    /// network providers (TCP, TLS). See `inline_threshold_shm` for shared memory and
    /// [`ServerConfig::set_inline_threshold`] for both.
    pub inline_threshold: u32,
    /// The inline threshold of shared-memory sessions: the inline/direct crossover there
    /// differs from the network's (no wire, one copy for direct placement).
    pub inline_threshold_shm: u32,
    /// Copy engines helping workers place large direct reads (see `copy_engines`); 0
    /// disables them. At most `copy_engines::COPY_THREADS_MAX`.
    pub copy_threads: usize,
    /// I/O threads running one session's independent READs and WRITEs in parallel (see
    /// `io_pool`, `conn::parallel`); 0 runs every request on its worker, one at a time
    /// per connection. At most `io_pool::IO_THREADS_MAX`.
    pub io_threads: usize,
    /// Largest single direct transfer.
    pub direct_bytes_max: u32,
    /// Most concurrently connected sessions.
    pub sessions_max: usize,
    /// Most open files per session; None: derived from RLIMIT_NOFILE (see `fd_budget`).
    pub open_files_max: Option<usize>,
    /// Entries of the descriptor cache behind file handles; None: derived from
    /// RLIMIT_NOFILE (see `fd_budget`).
    pub handles_max: Option<usize>,
    /// Files open in all sessions together; None: derived from RLIMIT_NOFILE.
    pub open_files_total_max: Option<usize>,
    /// Directory for state that outlives a restart (the handle secret, mode 0600). With
    /// it (and CAP_DAC_READ_SEARCH), file handles persist across restarts; without it,
    /// handles are valid for this boot only.
    pub state_dir: Option<PathBuf>,
    /// Never use kernel file handles: a handle is valid while its descriptor is cached,
    /// in this boot (STALE after eviction or a restart). For exports where an object
    /// moved out of the export directory must not stay reachable through an old handle.
    pub volatile_handles: bool,
    /// A connection whose queued output plus pulls in flight exceeds this stops being
    /// read until it drains: a client that never reads its replies cannot grow the
    /// server's memory without bound.
    pub backlog_bytes_max: usize,
    /// Spin this long (busy-polling) before sleeping in epoll when a worker is idle:
    /// waking a sleeping thread costs ~20 us on this class of machine, a spinning one
    /// answers in well under 1 us. Bounded, so an idle server sleeps.
    pub spin_us: u64,
    /// Most I/Os one BATCH_IO may carry (negotiated at session set-up).
    pub batch_max: u32,
    /// Unix socket of the shared-memory provider (same-host clients); None disables it.
    pub shm_socket: Option<PathBuf>,
    /// Uids whose processes may use the shared-memory provider besides dafsd's own uid
    /// and root (checked with SO_PEERCRED at accept; others are refused and use TCP).
    pub shm_allow_uids: Vec<u32>,
    /// How long a session outlives its connection (its state is kept for a SESSION_BIND
    /// from a reconnecting client); 0 releases sessions with their connection.
    pub lease_secs: u64,
    /// Seconds of the grace period after a restart in which clients that held state
    /// (opens, locks) reclaim it (needs `state_dir`; 0 disables). Default 90, as NFSv4.
    pub grace_secs: u64,
    /// Largest reply kept per slot in the reply cache (non-idempotent ops' replies are
    /// small; a larger one, e.g. a chain with reads, is not kept and its retransmission
    /// gets RETRY_UNCACHED_REP). A session's cache holds at most slots x this.
    pub reply_cache_slot_bytes: usize,
    /// Most sessions one client id may have bound to connections at once.
    pub connections_per_client_max: usize,
    /// Most connections open at once (with or without a session); more are closed at
    /// accept.
    pub connections_max: usize,
    /// Most connections whose session has not authenticated yet; the rest of
    /// `connections_max` is kept for authenticated clients. None: a quarter of
    /// `connections_max` (see [`ServerConfig::connections_unauth_max`]).
    pub connections_unauth_max: Option<usize>,
    /// Most connections from one source address (TCP).
    pub connections_per_addr_max: usize,
    /// A connection must authenticate within this many milliseconds of being accepted,
    /// or it is closed: idle and trickling peers cannot hold connections.
    pub handshake_timeout_ms: u64,
    /// Bytes all connections together may hold in queued output and pulls in flight
    /// (each also within `backlog_bytes_max`); beyond it, connections with output
    /// pending are not read until it drains.
    pub memory_bytes_max: usize,
    /// Warnings one peer address may cause in a burst; beyond it (and the rate) they are
    /// counted in `warnings_suppressed` instead of logged.
    pub peer_warn_burst: u32,
    /// Warnings per minute one peer address may cause after its burst.
    pub peer_warn_per_min: u32,
    /// Whose identity requests run with (see `cred.rs`).
    pub identity: crate::cred::Identity,
    /// Unix socket for `dafs admin` (owner-only permissions); None disables it.
    pub admin_socket: Option<PathBuf>,
    /// Address of the Prometheus text endpoint (`GET /metrics`); None disables it.
    pub metrics_listen: Option<String>,
    /// TLS on the TCP listener: when set, every TCP connection must complete a TLS
    /// handshake (plaintext clients are refused); with `client_ca_file`, clients must also
    /// present a certificate (mutual TLS). The shared-memory provider is unaffected.
    pub tls: Option<TlsServerOptions>,
}

/// Default inline/direct threshold of the network providers. See docs/benchmarks.md for
/// how it was chosen (the crossover `dafs bench` fits).
pub const INLINE_THRESHOLD_DEFAULT: u32 = 16 * 1024;
/// Default inline/direct threshold of shared-memory sessions: the crossover `dafs bench`
/// fits for registered memory over shared memory, which lies at or below 2 KiB in every
/// recorded run (direct placement copies once, inline three times: into the ring, out of
/// it, into the region). It governs registered memory only: clients keep unregistered
/// memory inline up to `dafs_client::UNREGISTERED_INLINE_BYTES` (16 KiB), since a direct
/// transfer of it costs a registration first (docs/benchmarks.md, "Shared memory
/// (session 7)").
pub const INLINE_THRESHOLD_SHM_DEFAULT: u32 = 2 * 1024;

/// `msg_size_bytes_max` must exceed `inline_threshold` by this much: an inline write of the
/// threshold must fit in one message with its header and the op's fixed part.
pub const INLINE_HEADROOM_BYTES: u64 = 4096;

/// Most worker threads. The thread count is fixed at start and never depends on the
/// clients; this bound catches a mistyped count before it starts that many event loops.
pub const WORKERS_MAX: usize = 64;

/// Smallest reply cache slot: every non-idempotent op's reply (the largest is OPEN's,
/// a handle and attributes) must fit, or its retransmission could not be answered.
pub const REPLY_CACHE_SLOT_BYTES_MIN: usize = 1024;

/// Longest lease (one day): state kept for a client that may never return is held
/// against the session limit meanwhile.
pub const LEASE_SECS_MAX: u64 = 24 * 3600;

/// Default `grace_secs`: NFSv4's, long enough for every client to notice a restart.
pub const GRACE_SECS_DEFAULT: u64 = 90;
/// Longest grace period (one hour): opens and locks wait for it.
pub const GRACE_SECS_MAX: u64 = 3600;

/// Default `handshake_timeout_ms`: ample for a client across a WAN (three round trips).
pub const HANDSHAKE_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Longest `handshake_timeout_ms` (one minute).
pub const HANDSHAKE_TIMEOUT_MS_MAX: u64 = 60_000;
/// Smallest `memory_bytes_max`: a few connections' worth of direct transfers.
pub const MEMORY_BYTES_MIN: usize = 16 * 1024 * 1024;
/// `memory_bytes_max` when the machine's memory cannot be read.
const MEMORY_BYTES_FALLBACK: usize = 1024 * 1024 * 1024;

/// Default `memory_bytes_max`: a quarter of the machine's memory (`MemTotal` of
/// /proc/meminfo), leaving the rest to the page cache and other processes.
pub fn memory_bytes_max_default() -> usize {
    let total_kb = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
        line.split_whitespace().nth(1)?.parse::<usize>().ok()
    });
    match total_kb {
        Some(kb) => (kb.saturating_mul(1024) / 4).max(MEMORY_BYTES_MIN),
        None => MEMORY_BYTES_FALLBACK,
    }
}

impl ServerConfig {
    pub fn new(export_path: impl Into<PathBuf>) -> Self {
        ServerConfig {
            exports: vec![Export::new("export", export_path, false)],
            cluster: None,
            listen: "127.0.0.1:7420".into(),
            ofi_listen: Vec::new(),
            workers: 2,
            secret: None,
            slots_max: 64,
            msg_size_bytes_max: limits::MSG_SIZE_BYTES_DEFAULT,
            inline_threshold: INLINE_THRESHOLD_DEFAULT,
            inline_threshold_shm: INLINE_THRESHOLD_SHM_DEFAULT,
            copy_threads: crate::copy_engines::copy_threads_default(),
            io_threads: crate::io_pool::io_threads_default(),
            direct_bytes_max: 8 * 1024 * 1024,
            sessions_max: 256,
            open_files_max: None,
            handles_max: None,
            open_files_total_max: None,
            state_dir: None,
            volatile_handles: false,
            backlog_bytes_max: 32 * 1024 * 1024,
            spin_us: 50,
            batch_max: 64,
            shm_socket: None,
            shm_allow_uids: Vec::new(),
            lease_secs: 90,
            grace_secs: GRACE_SECS_DEFAULT,
            reply_cache_slot_bytes: 4096,
            connections_per_client_max: 16,
            connections_max: 1024,
            connections_unauth_max: None,
            connections_per_addr_max: 256,
            handshake_timeout_ms: HANDSHAKE_TIMEOUT_MS_DEFAULT,
            memory_bytes_max: memory_bytes_max_default(),
            peer_warn_burst: 20,
            peer_warn_per_min: 60,
            identity: crate::cred::Identity::Server,
            admin_socket: None,
            metrics_listen: None,
            tls: None,
        }
    }

    /// Connections that may be open without an authenticated session: as configured, or
    /// a quarter of `connections_max` (at least 1) — a handshake takes a few round trips,
    /// so this many cover a burst of connecting clients, and three quarters stay for
    /// clients that proved who they are.
    pub fn connections_unauth_max(&self) -> usize {
        self.connections_unauth_max.unwrap_or((self.connections_max / 4).max(1))
    }

    /// One inline threshold for every provider.
    pub fn set_inline_threshold(&mut self, bytes: u32) {
        self.inline_threshold = bytes;
        self.inline_threshold_shm = bytes;
    }

    /// The inline threshold exported to a session on a shared-memory connection
    /// (`shm`) or a network one.
    pub fn inline_threshold_for(&self, shm: bool) -> u32 {
        if shm {
            self.inline_threshold_shm
        } else {
            self.inline_threshold
        }
    }

    /// Check the configuration; the error says what to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.exports.is_empty() {
            return Err(ConfigError::NoExports);
        }
        for e in &self.exports {
            if !e.path.is_dir() {
                return Err(ConfigError::ExportNotDirectory {
                    name: e.name.clone(),
                    path: e.path.clone(),
                });
            }
        }
        let in_range = |field, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(ConfigError::OutOfRange { field, min, max })
            }
        };
        in_range("slots_max", self.slots_max.into(), 1, limits::SLOTS_MAX.into())?;
        in_range(
            "msg_size_bytes_max",
            self.msg_size_bytes_max.into(),
            limits::MSG_SIZE_BYTES_MIN.into(),
            limits::MSG_SIZE_BYTES_MAX.into(),
        )?;
        let inline_max = self.inline_threshold.max(self.inline_threshold_shm);
        if inline_max as u64 + INLINE_HEADROOM_BYTES > self.msg_size_bytes_max as u64 {
            return Err(ConfigError::InlineThresholdTooLarge {
                headroom_bytes: INLINE_HEADROOM_BYTES,
            });
        }
        in_range(
            "direct_bytes_max",
            self.direct_bytes_max.into(),
            1,
            limits::DIRECT_BYTES_MAX.into(),
        )?;
        in_range("workers", self.workers as u64, 1, WORKERS_MAX as u64)?;
        in_range(
            "copy_threads",
            self.copy_threads as u64,
            0,
            crate::copy_engines::COPY_THREADS_MAX as u64,
        )?;
        in_range("io_threads", self.io_threads as u64, 0, crate::io_pool::IO_THREADS_MAX as u64)?;
        in_range("batch_max", self.batch_max.into(), 1, dafs_proto::types::BATCH_MAX.into())?;
        if self.exports.len() > crate::handle_codec::EXPORTS_MAX {
            return Err(ConfigError::AboveMax {
                field: "exports",
                max: crate::handle_codec::EXPORTS_MAX as u64,
            });
        }
        if self.handles_max.is_some_and(|n| n < HANDLES_MIN) {
            return Err(ConfigError::BelowMin { field: "handles_max", min: HANDLES_MIN as u64 });
        }
        if self.reply_cache_slot_bytes < REPLY_CACHE_SLOT_BYTES_MIN
            || self.reply_cache_slot_bytes > self.msg_size_bytes_max as usize
        {
            return Err(ConfigError::ReplyCacheSlotBytes {
                min: REPLY_CACHE_SLOT_BYTES_MIN as u64,
            });
        }
        if self.connections_per_client_max == 0 {
            return Err(ConfigError::BelowMin { field: "connections_per_client_max", min: 1 });
        }
        if self.connections_max == 0 {
            return Err(ConfigError::BelowMin { field: "connections_max", min: 1 });
        }
        if let Some(n) = self.connections_unauth_max {
            in_range("connections_unauth_max", n as u64, 1, self.connections_max as u64)?;
        }
        if self.connections_per_addr_max == 0 {
            return Err(ConfigError::BelowMin { field: "connections_per_addr_max", min: 1 });
        }
        in_range("handshake_timeout_ms", self.handshake_timeout_ms, 1, HANDSHAKE_TIMEOUT_MS_MAX)?;
        if self.peer_warn_burst == 0 {
            return Err(ConfigError::BelowMin { field: "peer_warn_burst", min: 1 });
        }
        if self.memory_bytes_max < MEMORY_BYTES_MIN {
            return Err(ConfigError::BelowMin {
                field: "memory_bytes_max",
                min: MEMORY_BYTES_MIN as u64,
            });
        }
        if self.lease_secs > LEASE_SECS_MAX {
            return Err(ConfigError::AboveMax { field: "lease_secs", max: LEASE_SECS_MAX });
        }
        if self.grace_secs > GRACE_SECS_MAX {
            return Err(ConfigError::AboveMax { field: "grace_secs", max: GRACE_SECS_MAX });
        }
        if self.identity != crate::cred::Identity::Server && !rustix::process::geteuid().is_root() {
            return Err(ConfigError::IdentityNeedsRoot);
        }
        if self.backlog_bytes_max < self.direct_bytes_max as usize {
            return Err(ConfigError::BacklogBelowDirectMax);
        }
        if self.tls.as_ref().is_some_and(|t| t.client_ca_file.is_some())
            && self.shm_socket.is_some()
        {
            // Same-host clients would reach the server over shared memory without a
            // client certificate.
            return Err(ConfigError::ClientCertsWithShm);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(f: impl FnOnce(&mut ServerConfig)) -> String {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = ServerConfig::new(dir.path());
        f(&mut cfg);
        cfg.validate().expect_err("refused").to_string()
    }

    #[test]
    fn errors_name_the_setting_and_its_bounds() {
        assert!(ServerConfig::new(tempfile::tempdir().unwrap().path()).validate().is_ok());
        assert_eq!(refused(|c| c.exports.clear()), "at least one export is required");
        assert_eq!(refused(|c| c.workers = 0), "workers must be 1..=64");
        assert_eq!(
            refused(|c| c.slots_max = 0),
            format!("slots_max must be 1..={}", limits::SLOTS_MAX)
        );
        assert_eq!(
            refused(|c| c.msg_size_bytes_max = 1),
            format!(
                "msg_size_bytes_max must be {}..={}",
                limits::MSG_SIZE_BYTES_MIN,
                limits::MSG_SIZE_BYTES_MAX
            )
        );
        assert_eq!(refused(|c| c.handles_max = Some(15)), "handles_max must be at least 16");
        assert_eq!(refused(|c| c.lease_secs = 86401), "lease_secs must be at most 86400");
        assert_eq!(refused(|c| c.connections_max = 0), "connections_max must be at least 1");
        assert_eq!(
            refused(|c| c.connections_per_addr_max = 0),
            "connections_per_addr_max must be at least 1"
        );
        assert_eq!(
            refused(|c| c.connections_unauth_max = Some(2000)),
            "connections_unauth_max must be 1..=1024"
        );
        assert_eq!(
            refused(|c| c.handshake_timeout_ms = 0),
            "handshake_timeout_ms must be 1..=60000"
        );
        assert_eq!(
            refused(|c| c.memory_bytes_max = 1),
            "memory_bytes_max must be at least 16777216"
        );
        assert_eq!(
            refused(|c| c.reply_cache_slot_bytes = 10),
            "reply_cache_slot_bytes must be 1024..=msg_size_bytes_max (non-idempotent replies must fit)"
        );
        assert_eq!(
            refused(|c| c.inline_threshold = c.msg_size_bytes_max),
            "inline_threshold must leave room for headers within msg_size_bytes_max"
        );
        assert_eq!(
            refused(|c| c.inline_threshold_shm = c.msg_size_bytes_max),
            "inline_threshold must leave room for headers within msg_size_bytes_max"
        );
        assert_eq!(refused(|c| c.copy_threads = 17), "copy_threads must be 0..=16");
        assert_eq!(refused(|c| c.io_threads = 17), "io_threads must be 0..=16");
        let e = refused(|c| c.exports[0].path = "/nonexistent/dir".into());
        assert_eq!(e, "export \"export\": /nonexistent/dir is not a directory");
    }
}
