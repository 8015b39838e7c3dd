//! Failed requests: the errno the kernel gets, and a new session when the server has
//! lost ours (it restarted).

use std::time::{Duration, Instant};

use dafs_client::Error;

use super::DafsFs;
use crate::convert::errno;

/// Least time between two attempts at a new session: a dead server makes every kernel
/// request fail, and each would otherwise try to connect again.
const SESSION_RETRY_INTERVAL: Duration = Duration::from_secs(1);

impl DafsFs {
    /// The errno for a failed DAFS call; first, when the connection is dead, try a new
    /// session (and say once that the server is gone).
    pub(super) fn fail(&mut self, e: &Error) -> i32 {
        if self.c().is_dead() {
            self.try_new_session();
        }
        if self.c().is_dead() && !self.reported_dead {
            self.reported_dead = true;
            tracing::error!("connection to the server lost ({e}): operations fail until the server is back (a new session is tried at most once a second)");
        }
        errno(e)
    }

    /// The client library recovers broken connections by itself (the session re-bound
    /// within its lease) and, after a restart of a server with a grace period, reclaims
    /// the open files and locks (they keep working). What reaches here is a session the
    /// server no longer has and could not give back (no state directory, grace over, the
    /// lease ran out) or a server that is gone: start a new session if the server
    /// answers. Nodes keep working (their handles are looked up again by name when the
    /// server says STALE); files opened before fail with EBADF.
    fn try_new_session(&mut self) {
        let now = Instant::now();
        if self.last_recovery.is_some_and(|t| now.duration_since(t) < SESSION_RETRY_INTERVAL) {
            return;
        }
        self.last_recovery = Some(now);
        let r = self.c().reestablish();
        match r {
            Ok(()) => {
                self.reported_dead = false;
                tracing::warn!("the server lost this mount's session (restarted?): a new session is up; files opened before fail with EBADF");
            }
            Err(e) => tracing::debug!("new session not possible yet: {e}"),
        }
    }
}
