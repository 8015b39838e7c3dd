//! Server counters (lock-free; read by `dafs admin`-style tooling and tests).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct ServerStats {
    pub connections_accepted: AtomicU64,
    pub connections_closed: AtomicU64,
    pub sessions_created: AtomicU64,
    pub requests: AtomicU64,
    pub errors_replied: AtomicU64,
    pub malformed: AtomicU64,
    pub slot_refusals: AtomicU64,
    pub auth_failures: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub direct_bytes: AtomicU64,
    pub inline_bytes: AtomicU64,
    pub backpressure_pauses: AtomicU64,
}

/// A plain copy of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub connections_accepted: u64,
    pub connections_closed: u64,
    pub sessions_created: u64,
    pub requests: u64,
    pub errors_replied: u64,
    pub malformed: u64,
    pub slot_refusals: u64,
    pub auth_failures: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub direct_bytes: u64,
    pub inline_bytes: u64,
    pub backpressure_pauses: u64,
}

impl ServerStats {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            connections_accepted: self.connections_accepted.load(Relaxed),
            connections_closed: self.connections_closed.load(Relaxed),
            sessions_created: self.sessions_created.load(Relaxed),
            requests: self.requests.load(Relaxed),
            errors_replied: self.errors_replied.load(Relaxed),
            malformed: self.malformed.load(Relaxed),
            slot_refusals: self.slot_refusals.load(Relaxed),
            auth_failures: self.auth_failures.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            direct_bytes: self.direct_bytes.load(Relaxed),
            inline_bytes: self.inline_bytes.load(Relaxed),
            backpressure_pauses: self.backpressure_pauses.load(Relaxed),
        }
    }
}
