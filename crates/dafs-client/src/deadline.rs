//! Every request's overall deadline: a request may not wait, reconnect and be resent for
//! ever (a link that breaks during every attempt at a large transfer, a server that
//! hangs). Past `request_deadline`, or after `reconnects_per_request_max` resends, the
//! session is given up with ETIMEDOUT.

use std::time::{Duration, Instant};

use dafs_transport::Wait;

use crate::{Client, Error};

impl Client {
    /// Why some request in flight may not wait any longer, if one may not.
    pub(crate) fn overdue(&self) -> Option<String> {
        let now = Instant::now();
        self.inflight.iter().flatten().find_map(|s| {
            if now.duration_since(s.sent_at) >= self.cfg.request_deadline {
                Some(format!(
                    "a request is unanswered after {:?} (request_deadline)",
                    self.cfg.request_deadline
                ))
            } else if s.resends >= self.cfg.reconnects_per_request_max {
                Some(format!(
                    "a request was resent after {} reconnects (reconnects_per_request_max)",
                    s.resends
                ))
            } else {
                None
            }
        })
    }

    /// `wait`, shortened so it ends no later than the earliest deadline in flight.
    pub(crate) fn wait_within_deadline(&self, wait: Wait) -> Wait {
        let Some(first) = self.inflight.iter().flatten().map(|s| s.sent_at).min() else {
            return wait;
        };
        let left = (first + self.cfg.request_deadline).saturating_duration_since(Instant::now());
        match wait {
            Wait::NoWait => Wait::NoWait,
            Wait::Forever => Wait::Timeout(left.max(Duration::from_millis(1))),
            Wait::Timeout(t) => Wait::Timeout(t.min(left.max(Duration::from_millis(1)))),
        }
    }

    /// Give the session up: the requests in flight can neither complete nor be dropped
    /// from their slots (the server may still execute them), so every one fails with
    /// ETIMEDOUT, and so does every later call until `reestablish`.
    pub(crate) fn time_out(&mut self, why: &str) -> Error {
        tracing::warn!("giving the session up: {why}");
        self.stats.requests_timed_out += self.inflight.iter().flatten().count() as u64;
        self.timed_out = true;
        self.fail_all(why);
        Error::TimedOut
    }
}
