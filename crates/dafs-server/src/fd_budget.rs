//! The descriptor budget: how dafsd's descriptors (RLIMIT_NOFILE) are shared out, so
//! that no one use — cached handles, clients' open files, connections — can take the
//! descriptors the others (and accept, and the admin socket) need.
//!
//! At start dafsd raises its soft RLIMIT_NOFILE to the hard limit. Of that:
//! - a fixed reserve (`FDS_RESERVED_BASE` plus `FDS_RESERVED_PER_WORKER` per worker) for
//!   listeners, event loops, accept, the admin and metrics sockets, and the descriptors
//!   a request holds only while it runs (READDIR, re-opens);
//! - of the rest, a quarter for the descriptor cache (`handles_max`), half for files
//!   clients hold open (`open_files_total_max`), and a quarter left to connections;
//! - one session may hold at most a quarter of the open-file share
//!   (`open_files_max`, at most `OPEN_FILES_PER_SESSION_DEFAULT_MAX`).
//!
//! Explicit `handles_max` / `open_files_max` settings must fit their share.

use std::sync::Arc;

use tracing::{info, warn};

use crate::live::LiveCount;
use crate::{ServerConfig, StartError};

/// Descriptors kept for the server itself (stdio, listeners, acceptor loop, admin and
/// metrics sockets and their connections, the handle secret, logging).
pub const FDS_RESERVED_BASE: u64 = 32;
/// Per worker: its event loop and waker, and the descriptors requests on it hold while
/// they run (a READDIR's directory, an OPEN's second descriptor, a re-open).
pub const FDS_RESERVED_PER_WORKER: u64 = 8;
/// Default cap of one session's open files.
pub const OPEN_FILES_PER_SESSION_DEFAULT_MAX: usize = 4096;
/// Descriptors one connection may use (TCP: its socket; shared memory: socket, ring
/// memory and doorbells), to check `connections_max` against the connections' share.
pub const FDS_PER_CONNECTION: u64 = 4;
/// Smallest RLIMIT_NOFILE dafsd starts with.
pub const NOFILE_MIN: u64 = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdBudget {
    /// RLIMIT_NOFILE after raising the soft limit.
    pub nofile: u64,
    pub reserved_fds: u64,
    /// Descriptor cache entries (one `O_PATH` descriptor each).
    pub handles_max: usize,
    /// Files open by all clients together (OPEN state).
    pub open_files_total_max: usize,
    /// Files one session may hold open.
    pub open_files_per_session_max: usize,
    /// What is left for connections (informational: connections_max bounds them).
    pub connection_fds: u64,
}

/// Why a configured limit cannot be honoured.
#[derive(Debug, PartialEq, Eq)]
pub struct BudgetError {
    pub field: &'static str,
    pub value: u64,
    pub max: u64,
    pub nofile: u64,
}

/// Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now.
pub fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    if let Some(max) = lim.maximum {
        let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(max), maximum: Some(max) });
    }
    // None means unlimited, which Linux does not allow for NOFILE; treat as large.
    getrlimit(Resource::Nofile).current.unwrap_or(1 << 20)
}

/// The configured limits (None: derived).
#[derive(Debug, Clone, Copy, Default)]
pub struct Requested {
    pub handles_max: Option<usize>,
    pub open_files_total_max: Option<usize>,
    pub open_files_max: Option<usize>,
}

/// Share out `nofile` descriptors, honouring the configured limits that fit.
pub fn derive(nofile: u64, workers: usize, asked: Requested) -> Result<FdBudget, BudgetError> {
    let reserved_fds = FDS_RESERVED_BASE + FDS_RESERVED_PER_WORKER * workers as u64;
    if nofile < NOFILE_MIN.max(reserved_fds * 2) {
        let min = NOFILE_MIN.max(reserved_fds * 2);
        return Err(BudgetError { field: "RLIMIT_NOFILE", value: nofile, max: min, nofile });
    }
    let rest = nofile - reserved_fds;
    let handles_share = (rest / 4) as usize;
    let opens_share = (rest / 2) as usize;
    let fits = |field, v: Option<usize>, max: usize, default: usize| match v {
        Some(v) if v > max => Err(BudgetError { field, value: v as u64, max: max as u64, nofile }),
        Some(v) => Ok(v),
        None => Ok(default),
    };
    let handles_max = fits(
        "handles_max",
        asked.handles_max,
        handles_share,
        handles_share.max(crate::handles::HANDLES_MIN),
    )?;
    let open_files_total_max =
        fits("open_files_total_max", asked.open_files_total_max, opens_share, opens_share)?;
    let per_session_default =
        (open_files_total_max / 4).clamp(1, OPEN_FILES_PER_SESSION_DEFAULT_MAX);
    let open_files_per_session_max =
        fits("open_files_max", asked.open_files_max, open_files_total_max, per_session_default)?;
    Ok(FdBudget {
        nofile,
        reserved_fds,
        handles_max,
        open_files_total_max,
        open_files_per_session_max,
        connection_fds: rest - handles_share as u64 - opens_share as u64,
    })
}

/// Raise RLIMIT_NOFILE and share the descriptors out for `cfg` (logged at start).
pub fn for_server(cfg: &ServerConfig) -> Result<FdBudget, StartError> {
    let nofile = raise_nofile();
    let asked = Requested {
        handles_max: cfg.handles_max,
        open_files_total_max: cfg.open_files_total_max,
        open_files_max: cfg.open_files_max,
    };
    let b = derive(nofile, cfg.workers, asked).map_err(|e| match e.field {
        "RLIMIT_NOFILE" => StartError::NofileTooLow { nofile, min: e.max },
        field => StartError::FdBudget { field, value: e.value, max: e.max, nofile },
    })?;
    info!(
        nofile,
        reserved = b.reserved_fds,
        handles_max = b.handles_max,
        open_files_total_max = b.open_files_total_max,
        open_files_per_session_max = b.open_files_per_session_max,
        connection_fds = b.connection_fds,
        "descriptor budget"
    );
    if (cfg.connections_max as u64).saturating_mul(FDS_PER_CONNECTION) > b.connection_fds {
        warn!(
            connections_max = cfg.connections_max,
            connection_fds = b.connection_fds,
            "connections_max exceeds the descriptors left for connections; raise RLIMIT_NOFILE"
        );
    }
    Ok(b)
}

/// One file held open by a client, counted against `open_files_total_max` until dropped.
#[derive(Debug)]
pub struct OpenFileClaim(Arc<LiveCount>);

impl OpenFileClaim {
    /// A claim if fewer than `max` are held.
    pub fn try_new(live: &Arc<LiveCount>, max: usize) -> Option<OpenFileClaim> {
        live.try_acquire(max).then(|| OpenFileClaim(live.clone()))
    }
}

impl Drop for OpenFileClaim {
    fn drop(&mut self) {
        self.0.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_the_limit() {
        let b = derive(256, 2, Requested::default()).unwrap();
        assert_eq!(b.reserved_fds, 48);
        assert_eq!((b.handles_max, b.open_files_total_max), (52, 104));
        assert_eq!(b.open_files_per_session_max, 26);
        assert_eq!(b.connection_fds, 52);
        let big = derive(1 << 20, 4, Requested::default()).unwrap();
        assert_eq!(big.open_files_per_session_max, OPEN_FILES_PER_SESSION_DEFAULT_MAX);
        assert!(big.handles_max > 200_000);
    }

    #[test]
    fn settings_beyond_the_budget_are_refused() {
        let ask =
            |h, t, o| Requested { handles_max: h, open_files_total_max: t, open_files_max: o };
        let e = derive(256, 2, ask(Some(65536), None, None)).unwrap_err();
        assert_eq!((e.field, e.max), ("handles_max", 52));
        let b = derive(256, 2, ask(Some(16), None, Some(8))).unwrap();
        assert_eq!((b.handles_max, b.open_files_per_session_max), (16, 8));
        let b = derive(256, 2, ask(None, Some(40), None)).unwrap();
        assert_eq!((b.open_files_total_max, b.open_files_per_session_max), (40, 10));
        let e = derive(256, 2, ask(None, Some(40), Some(41))).unwrap_err();
        assert_eq!((e.field, e.max), ("open_files_max", 40));
        assert_eq!(derive(64, 2, Requested::default()).unwrap_err().field, "RLIMIT_NOFILE");
    }

    #[test]
    fn claims_are_bounded_and_returned_on_drop() {
        let live = Arc::new(LiveCount::new("open files"));
        let a = OpenFileClaim::try_new(&live, 2).unwrap();
        let _b = OpenFileClaim::try_new(&live, 2).unwrap();
        assert!(OpenFileClaim::try_new(&live, 2).is_none());
        drop(a);
        assert!(OpenFileClaim::try_new(&live, 2).is_some());
    }
}
