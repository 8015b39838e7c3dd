//! Why the server would not start: a configuration to fix ([`ConfigError`]), or a
//! resource it could not get ([`StartError`]). The messages are what `dafsd` prints.

use std::path::PathBuf;

use dafs_transport::TransportError;

/// A configuration [`crate::ServerConfig::validate`] refuses: the message names the
/// setting and what it must be.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("at least one export is required")]
    NoExports,
    #[error("export {name:?}: {} is not a directory", path.display())]
    ExportNotDirectory { name: String, path: PathBuf },
    /// A setting outside its bounds (both inclusive).
    #[error("{field} must be {min}..={max}")]
    OutOfRange { field: &'static str, min: u64, max: u64 },
    #[error("{field} must be at least {min}")]
    BelowMin { field: &'static str, min: u64 },
    #[error("{field} must be at most {max}")]
    AboveMax { field: &'static str, max: u64 },
    /// `inline_threshold` plus this much room for headers exceeds `msg_size_bytes_max`.
    #[error("inline_threshold must leave room for headers within msg_size_bytes_max")]
    InlineThresholdTooLarge { headroom_bytes: u64 },
    #[error(
        "reply_cache_slot_bytes must be {min}..=msg_size_bytes_max (non-idempotent replies must fit)"
    )]
    ReplyCacheSlotBytes { min: u64 },
    #[error("backlog_bytes_max must be at least direct_bytes_max")]
    BacklogBelowDirectMax,
    #[error("identity \"asserted\" or \"squash\" needs dafsd to run as root (it switches file-system ids per request)")]
    IdentityNeedsRoot,
    /// Same-host clients would reach the server over shared memory without a client
    /// certificate.
    #[error("TLS client certificates (client_ca_file) cannot be combined with the shared-memory provider: disable shm")]
    ClientCertsWithShm,
}

/// Why [`crate::start`] failed: the configuration, or what it was doing when a system
/// resource was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot open export {}: {source}", path.display())]
    OpenExport { path: PathBuf, source: std::io::Error },
    #[error("cannot read the OS random source: {0}")]
    Random(getrandom::Error),
    /// The TCP listener or the shared-memory provider's socket.
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: String, source: TransportError },
    #[error("TLS: {0}")]
    Tls(TransportError),
    #[error("cannot listen on admin socket {}: {source}", path.display())]
    AdminSocket { path: PathBuf, source: std::io::Error },
    #[error("cannot listen on metrics address {addr}: {source}")]
    Metrics { addr: String, source: std::io::Error },
    /// A descriptor limit that does not fit RLIMIT_NOFILE (see `fd_budget`).
    #[error("{field} {value} does not fit the descriptor budget: at most {max} with RLIMIT_NOFILE {nofile} (raise the hard limit, e.g. LimitNOFILE=, or lower {field})")]
    FdBudget { field: &'static str, value: u64, max: u64, nofile: u64 },
    #[error("RLIMIT_NOFILE is {nofile}; dafsd needs at least {min} descriptors")]
    NofileTooLow { nofile: u64, min: u64 },
    #[error("state directory {}: {source}", path.display())]
    StateDir { path: PathBuf, source: std::io::Error },
    /// Event loops, wakers, threads: `what` says which.
    #[error("{what}: {source}")]
    Io { what: &'static str, source: std::io::Error },
}

impl StartError {
    /// An `Io` error while doing `what`, for `map_err`.
    pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> StartError {
        move |source| StartError::Io { what, source }
    }
}
