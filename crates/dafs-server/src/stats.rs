//! Server counters (lock-free), read by `dafs admin stats`, the Prometheus endpoint and
//! tests. One list, so a counter added here appears everywhere with its help text.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! counters {
    ($($(#[doc = $doc:literal])+ $name:ident,)+) => {
        #[derive(Debug, Default)]
        pub struct ServerStats {
            $($(#[doc = $doc])+ pub $name: AtomicU64,)+
        }

        /// A plain copy of the counters.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct StatsSnapshot {
            $($(#[doc = $doc])+ pub $name: u64,)+
        }

        impl ServerStats {
            pub fn snapshot(&self) -> StatsSnapshot {
                StatsSnapshot { $($name: self.$name.load(Relaxed),)+ }
            }
        }

        impl StatsSnapshot {
            /// (name, help, value) of every counter, in declaration order.
            pub fn fields(&self) -> Vec<(&'static str, &'static str, u64)> {
                vec![$((stringify!($name), concat!($($doc),+), self.$name),)+]
            }
        }
    };
}

counters! {
    /// Connections accepted (TCP and shared memory).
    connections_accepted,
    /// Connections closed.
    connections_closed,
    /// Sessions created.
    sessions_created,
    /// Requests received.
    requests,
    /// Replies with a non-OK status.
    errors_replied,
    /// Malformed messages.
    malformed,
    /// Requests refused by the slot rules (misordered, bad slot, slot busy).
    slot_refusals,
    /// Failed authentications.
    auth_failures,
    /// Bytes read from files.
    bytes_read,
    /// Bytes written to files.
    bytes_written,
    /// Bytes moved by direct placement.
    direct_bytes,
    /// Bytes carried inline in messages.
    inline_bytes,
    /// Times a connection stopped being read because its output backlog was full.
    backpressure_pauses,
    /// Retransmissions answered from the reply cache.
    replays,
    /// Retransmissions of idempotent ops, executed again.
    replays_reexecuted,
    /// Retransmissions whose reply was too large to cache (RETRY_UNCACHED_REP).
    replays_uncached,
    /// Requests reusing a slot and sequence id with different content (SEQ_FALSE_RETRY).
    false_retries,
    /// Duplicates of a request still executing, dropped.
    duplicates_dropped,
    /// Data requests handed to the I/O pool, to run in parallel with others of their
    /// session.
    requests_parallel,
    /// Requests that waited for their session's parallel requests to finish first
    /// (ordering: a conflicting range, or an op that is not plain data I/O).
    parallel_barriers,
    /// Sessions re-bound to a new connection (client reconnects).
    binds,
    /// Binds answered DELAY while the old connection was being revoked.
    binds_delayed,
    /// Binds refused (unknown or expired session, wrong client).
    binds_refused,
    /// Connections added to a session by a trunking SESSION_BIND.
    trunk_binds,
    /// Trunked connections that joined no session (it was parked or moved meanwhile,
    /// or had `SESSION_CONNECTIONS_MAX` already) and were closed.
    trunk_refusals,
    /// Trunked connections dropped while the session went on over the others (broken,
    /// or given up by the client: it retransmitted their requests elsewhere).
    trunk_connections_lost,
    /// Sessions released because their lease expired.
    sessions_expired,
    /// Sessions or binds refused because the client is fenced.
    fenced_refusals,
    /// Requests or connections refused by a configured limit.
    limit_refusals,
    /// Requests refused by access control (export client rules).
    access_refusals,
    /// Parked sessions released early to make room at `sessions_max`.
    sessions_reclaimed,
    /// Connections closed because they had not authenticated within `handshake_timeout_ms`.
    handshake_timeouts,
    /// Unauthenticated connections closed (oldest first) because more than
    /// `connections_unauth_max` were open (the rest of `connections_max` is kept for
    /// authenticated clients).
    unauth_evictions,
    /// Connections closed at accept: `connections_per_addr_max` reached for that address.
    per_addr_refusals,
    /// Warnings not logged because their peer exceeded its log rate.
    warnings_suppressed,
    /// Times a connection stopped being read because all connections' buffered output
    /// exceeded `memory_bytes_max`.
    memory_pauses,
    /// Handles refused as forged or corrupted, or re-pointed at another export (BADHANDLE).
    handle_refusals,
    /// Cached descriptors closed to keep within handles_max or under EMFILE/ENFILE.
    descriptors_evicted,
    /// Cached descriptors of deleted files closed (so their space comes back).
    descriptors_unlinked,
    /// Persistent handles re-opened from their kernel handle (after eviction or restart).
    handles_reopened,
    /// Opens re-established by OPEN + RECLAIM in a grace period.
    opens_reclaimed,
    /// Locks re-taken by LOCK + RECLAIM in a grace period.
    locks_reclaimed,
    /// Reclaims refused: NO_GRACE (outside grace, or a client that held no state) or
    /// RECLAIM_BAD (conflicts with state reclaimed already).
    reclaims_refused,
    /// Requests answered GRACE (non-reclaim OPEN, LOCK, REMOVE, RENAME in a grace period).
    grace_refusals,
    /// Shared-memory connections refused at accept: uid not allowed (`--shm-allow-uid`).
    shm_uid_refusals,
}
