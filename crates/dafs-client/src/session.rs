//! What the session negotiated and how it stands: limits, counters, credentials, and a
//! few diagnostics.

use dafs_proto::{limits, FileHandle, Request, Status};
use dafs_transport::TransportStats;

use crate::{Client, Error, Result};

/// Counters a user can read to see which path their I/O took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub requests: u64,
    pub inline_reads: u64,
    pub inline_writes: u64,
    pub direct_reads: u64,
    pub direct_writes: u64,
    pub inline_bytes: u64,
    pub direct_bytes: u64,
    /// I/Os above the inline threshold whose memory was not pre-registered: the library
    /// registered it just for that request (or bounced it). Pre-register to avoid this.
    pub off_direct_path: u64,
    /// Times a submit found every slot busy.
    pub slot_waits: u64,
    pub errors: u64,
    /// Times the connection broke and the session was re-bound to a new one.
    pub reconnects: u64,
    /// Requests sent again after a reconnect.
    pub retransmits: u64,
    /// Connections of a trunked session that broke while others carried on (their
    /// requests were resent on the others; see `ClientConfig::connections`).
    pub connections_lost: u64,
    /// Replies that matched no request in flight (answers to duplicates), dropped.
    pub stale_replies: u64,
    /// Requests failed with ETIMEDOUT because one ran past `request_deadline` or
    /// `reconnects_per_request_max` (the session was given up with them).
    pub requests_timed_out: u64,
    /// Opens re-established after a server restart (OPEN + RECLAIM in its grace period).
    pub opens_reclaimed: u64,
    /// Locks re-taken after a server restart (LOCK + RECLAIM).
    pub locks_reclaimed: u64,
    /// Opens and locks the server refused to give back after a restart (their files
    /// fail with ESTALE).
    pub reclaims_refused: u64,
    /// Requests answered GRACE (the server's grace period after a restart) and sent
    /// again after a pause.
    pub grace_retries: u64,
    pub transport: TransportStats,
}

impl ClientStats {
    /// Add `o`'s counters to these (a cluster client reports the sum of its node
    /// sessions').
    pub(crate) fn accumulate(&mut self, o: &ClientStats) {
        macro_rules! add {
            ($s:expr, $o:expr; $($f:ident),*) => { $( $s.$f += $o.$f; )* };
        }
        add!(self, o; requests, inline_reads, inline_writes, direct_reads, direct_writes,
            inline_bytes, direct_bytes, off_direct_path, slot_waits, errors, reconnects,
            retransmits, stale_replies, requests_timed_out, opens_reclaimed, locks_reclaimed,
            reclaims_refused, grace_retries);
        let (t, u) = (&mut self.transport, &o.transport);
        add!(t, u; msgs_sent, msgs_received, placed_bytes, pulled_bytes, placements_refused,
            waits_spun, waits_slept, vm_registrations);
    }
}

impl Client {
    // ------------------------------------------------------------------ negotiated values

    /// Reads and writes up to this many bytes travel inline in messages; larger ones are
    /// placed directly by the server.
    ///
    /// The server chooses it per provider from the measured inline/direct crossover for
    /// *registered* memory (the regions of [`alloc_registered`](Self::alloc_registered) and
    /// [`register`](Self::register)). Memory the application did not register uses
    /// [`inline_threshold_unregistered`](Self::inline_threshold_unregistered) instead.
    pub fn inline_threshold(&self) -> usize {
        self.inline_threshold
    }
    /// Reads and writes of memory the application did not register (blocking calls,
    /// `IoBuf::Vec`, chained reads and writes) travel inline up to this many bytes: the
    /// negotiated [`inline_threshold`](Self::inline_threshold), but at least
    /// [`UNREGISTERED_INLINE_BYTES`](crate::UNREGISTERED_INLINE_BYTES) (within the message
    /// size), because a direct transfer of such memory first registers it for the call.
    pub fn inline_threshold_unregistered(&self) -> usize {
        let room = self.msg_size_bytes_max.saturating_sub(crate::INLINE_HEADROOM_BYTES);
        self.inline_threshold.max(crate::UNREGISTERED_INLINE_BYTES.min(room))
    }
    /// Largest single asynchronous I/O (blocking calls split larger ones).
    pub fn io_bytes_max(&self) -> usize {
        self.direct_bytes_max
    }
    /// Most I/Os one batch may carry (negotiated).
    pub fn batch_max(&self) -> u32 {
        self.batch_max
    }
    /// The most completions one completion group holds, delivered and owed: enough for
    /// every slot to carry a batch of [`Client::batch_max`] I/Os, so an application that
    /// reaps what it receives is never refused. A submit that could exceed it fails with
    /// [`Error::CompletionQueueFull`] (see [`crate::limits::COMPLETIONS_QUEUED_MAX`]).
    pub fn completions_queued_max(&self) -> usize {
        self.slots.granted() as usize * (self.batch_max as usize + 1)
    }
    /// Slots granted by the server (the most requests in flight at once).
    pub fn slots(&self) -> u32 {
        self.slots.granted()
    }
    pub fn msg_size_bytes_max(&self) -> usize {
        self.msg_size_bytes_max
    }
    /// The connection's readiness fd, and whether output is queued on it (a cluster
    /// client sleeping on several nodes' connections at once polls these).
    pub(crate) fn readiness(&self) -> (std::os::fd::RawFd, bool) {
        (self.t.raw_fd(), self.t.wants_write())
    }

    pub fn session_id(&self) -> u64 {
        self.session_id
    }
    pub fn provider(&self) -> &'static str {
        self.t.provider()
    }
    pub fn root_handle(&self) -> FileHandle {
        if let Some(c) = self.cluster.as_deref() {
            return c.root_handle();
        }
        self.root
    }
    pub fn stats(&self) -> ClientStats {
        if let Some(c) = self.cluster.as_deref() {
            return c.stats();
        }
        let mut s = self.stats;
        s.transport = self.t.stats();
        for t in &self.extra {
            let x = t.stats();
            let y = &mut s.transport;
            y.msgs_sent += x.msgs_sent;
            y.msgs_received += x.msgs_received;
            y.placed_bytes += x.placed_bytes;
            y.pulled_bytes += x.pulled_bytes;
            y.placements_refused += x.placements_refused;
            y.waits_spun += x.waits_spun;
            y.waits_slept += x.waits_slept;
            y.vm_registrations += x.vm_registrations;
        }
        s
    }

    /// Why the client stopped working, if it did: `Some(BadSession)` when the server no
    /// longer knows the session (its lease expired, the server restarted, or an
    /// administrator ended it), `Some(Fenced)` when this client is fenced.
    pub fn session_lost(&self) -> Option<Status> {
        if self.dead {
            self.dead_status
        } else {
            None
        }
    }

    /// The credential (uid, gid, supplementary groups) this session's following requests
    /// run with, on a server whose `identity` is `asserted` (NOTSUPP otherwise).
    pub fn set_cred(&mut self, uid: u32, gid: u32, groups: &[u32]) -> Result<()> {
        if groups.len() > limits::CRED_GROUPS_MAX {
            return Err(Error::InvalidArgument("more than 16 supplementary groups"));
        }
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.set_cred(uid, gid, groups);
        }
        let packed: Vec<u8> = groups.iter().flat_map(|g| g.to_le_bytes()).collect();
        let m = self.call(&Request::SetCred { uid, gid, groups: &packed })?;
        self.decode(&m).map(|_| ())
    }

    /// NULL round trip (latency probe).
    pub fn null(&mut self) -> Result<()> {
        let m = self.call(&Request::Null)?;
        self.decode(&m).map(|_| ())
    }

    /// Send a raw, pre-encoded request on a free slot and wait for its reply (testing
    /// and diagnostics: lets a caller exercise the server's handling of odd requests).
    pub fn raw_call(&mut self, req: &Request) -> Result<Vec<u8>> {
        self.call(req)
    }
}
