//! Server configuration. Every limit has a default here and is documented in
//! `docs/architecture.md#limits`.

use std::path::PathBuf;

use dafs_proto::limits;
pub use dafs_transport::tls::TlsServerOptions;

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
    /// TCP listen address, e.g. "127.0.0.1:7420" (port 0 picks a free one).
    pub listen: String,
    /// Event-loop worker threads (the server runs `workers + 1` threads in total).
    pub workers: usize,
    /// Shared secret: when set, every session must authenticate with HMAC-SHA256.
    pub secret: Option<Vec<u8>>,
    /// Most slots (outstanding requests) granted to one session.
    pub slots_max: u32,
    /// Largest message accepted or sent.
    pub msg_size_max: u32,
    /// Reads/writes up to this many bytes travel inline; larger ones direct.
    pub inline_threshold: u32,
    /// Largest single direct transfer.
    pub direct_max: u32,
    /// Most concurrently connected sessions.
    pub sessions_max: usize,
    /// Most open files per session.
    pub open_files_max: usize,
    /// Size of the file handle table.
    pub handles_max: usize,
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
    /// How long a session outlives its connection (its state is kept for a SESSION_BIND
    /// from a reconnecting client); 0 releases sessions with their connection.
    pub lease_secs: u64,
    /// Largest reply kept per slot in the reply cache (non-idempotent ops' replies are
    /// small; a larger one, e.g. a chain with reads, is not kept and its retransmission
    /// gets RETRY_UNCACHED_REP). A session's cache holds at most slots x this.
    pub reply_cache_slot_bytes: usize,
    /// Most sessions one client id may have bound to connections at once.
    pub connections_per_client_max: usize,
    /// Most connections open at once (with or without a session); more are closed at
    /// accept.
    pub connections_max: usize,
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

/// Default inline/direct threshold. See docs/benchmarks.md for how it was chosen.
pub const INLINE_THRESHOLD_DEFAULT: u32 = 16 * 1024;

impl ServerConfig {
    pub fn new(export_path: impl Into<PathBuf>) -> Self {
        ServerConfig {
            exports: vec![Export::new("export", export_path, false)],
            listen: "127.0.0.1:7420".into(),
            workers: 2,
            secret: None,
            slots_max: 64,
            msg_size_max: limits::MSG_SIZE_DEFAULT,
            inline_threshold: INLINE_THRESHOLD_DEFAULT,
            direct_max: 8 * 1024 * 1024,
            sessions_max: 256,
            open_files_max: 4096,
            handles_max: 65536,
            backlog_bytes_max: 32 * 1024 * 1024,
            spin_us: 50,
            batch_max: 64,
            shm_socket: None,
            lease_secs: 90,
            reply_cache_slot_bytes: 4096,
            connections_per_client_max: 16,
            connections_max: 1024,
            identity: crate::cred::Identity::Server,
            admin_socket: None,
            metrics_listen: None,
            tls: None,
        }
    }

    /// Check the configuration; the message says what to fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.exports.is_empty() {
            return Err("at least one export is required".into());
        }
        for e in &self.exports {
            if !e.path.is_dir() {
                return Err(format!(
                    "export {:?}: {} is not a directory",
                    e.name,
                    e.path.display()
                ));
            }
        }
        if !(1..=limits::SLOTS_MAX).contains(&self.slots_max) {
            return Err(format!("slots_max must be 1..={}", limits::SLOTS_MAX));
        }
        if !(limits::MSG_SIZE_MIN..=limits::MSG_SIZE_MAX).contains(&self.msg_size_max) {
            return Err(format!(
                "msg_size_max must be {}..={}",
                limits::MSG_SIZE_MIN,
                limits::MSG_SIZE_MAX
            ));
        }
        if self.inline_threshold as u64 + 4096 > self.msg_size_max as u64 {
            return Err("inline_threshold must leave room for headers within msg_size_max".into());
        }
        if self.direct_max == 0 || self.direct_max > limits::DIRECT_LEN_MAX {
            return Err(format!("direct_max must be 1..={}", limits::DIRECT_LEN_MAX));
        }
        if self.workers == 0 || self.workers > 64 {
            return Err("workers must be 1..=64".into());
        }
        if self.batch_max == 0 || self.batch_max > dafs_proto::types::BATCH_MAX {
            return Err(format!("batch_max must be 1..={}", dafs_proto::types::BATCH_MAX));
        }
        if self.handles_max < 16 {
            return Err("handles_max must be at least 16".into());
        }
        if self.reply_cache_slot_bytes < 1024
            || self.reply_cache_slot_bytes > self.msg_size_max as usize
        {
            return Err("reply_cache_slot_bytes must be 1024..=msg_size_max (non-idempotent replies must fit)".into());
        }
        if self.connections_per_client_max == 0 || self.connections_max == 0 {
            return Err("connections_per_client_max and connections_max must be at least 1".into());
        }
        if self.lease_secs > 24 * 3600 {
            return Err("lease_secs must be at most 86400".into());
        }
        if self.identity != crate::cred::Identity::Server && !rustix::process::geteuid().is_root() {
            return Err("identity \"asserted\" or \"squash\" needs dafsd to run as root (it switches file-system ids per request)".into());
        }
        if self.backlog_bytes_max < self.direct_max as usize {
            return Err("backlog_bytes_max must be at least direct_max".into());
        }
        if self.tls.as_ref().is_some_and(|t| t.client_ca_file.is_some())
            && self.shm_socket.is_some()
        {
            // Same-host clients would reach the server over shared memory without a
            // client certificate.
            return Err("TLS client certificates (client_ca_file) cannot be combined with the shared-memory provider: disable shm".into());
        }
        Ok(())
    }
}
