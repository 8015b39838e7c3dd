//! # dafs-client — the DAFS user-level client library
//!
//! The client is a library, not a service: it starts **no threads** and runs no async
//! runtime. Requests are issued without blocking; completions advance whenever the
//! application calls into the library (`submit_*`, `poll`, `wait_*`, or any blocking
//! call, which is a thin wrapper over the asynchronous path).
//!
//! ```no_run
//! use dafs_client::{Client, ClientConfig, IoBuf, OpenOptions};
//! let mut c = Client::connect("127.0.0.1:7420", ClientConfig::default())?;
//! let f = c.open("data.bin", OpenOptions::read_write().create(true))?;
//! c.pwrite(&f, b"hello", 0)?;
//!
//! // Register memory once, reuse it: reads above the inline threshold are placed
//! // directly into it by the server.
//! let region = c.alloc_registered(1 << 20)?;
//! let cg = c.create_cg()?;
//! c.submit_read(&f, 0, IoBuf::Region { region, offset: 0, len: 1 << 20 }, cg, 7)?;
//! let done = c.wait_one(cg, None)?.expect("one completion");
//! assert_eq!(done.user_data, 7);
//! let n = done.result?;
//! assert_eq!(&c.region(region)?[..n], b"hello");
//! c.close(f)?;
//! # Ok::<(), dafs_client::Error>(())
//! ```
//!
//! ## DAFS semantics beyond NFS
//!
//! Batch I/O ([`Client::submit_batch`]), request chains ([`Chain`],
//! [`Client::open_and_read`], [`Client::create_and_write`]), cache hints
//! ([`Client::cache_hint`]), byte-range locks, extended open modes and named attributes:
//!
//! ```no_run
//! use dafs_client::{Client, ClientConfig, OpenOptions};
//! use dafs_client::dafs_proto::types::{cache_hint, nattr_flags};
//! use std::time::Duration;
//! let mut c = Client::connect("127.0.0.1:7420", ClientConfig::default())?;
//!
//! // Atomic append from many clients: the server picks (and returns) the offset.
//! let log = c.open("app.log", OpenOptions::write_only().create(true).append(true))?;
//! let at = c.append(&log, b"one record\n")?;
//!
//! // Byte-range locks (advisory, owned by this session): try, or wait bounded.
//! let db = c.open("table.db", OpenOptions::read_write().create(true))?;
//! c.lock(&db, 0, 4096, true)?;                       // exclusive, non-blocking
//! c.lock_wait(&db, 8192, 0, false, Duration::from_secs(1))?; // shared, to the end
//! c.unlock(&db, 0, 0)?;                              // everything this session holds
//!
//! // Create-unlinked: stage a file, then give it its name (or close to abort).
//! let tmp = c.open("result.dat", OpenOptions::read_write().unlinked(true))?;
//! c.pwrite(&tmp, b"complete contents", 0)?;
//! c.publish(&tmp)?;
//!
//! // Open key and share reservations (the Oracle Disk Manager identify pattern).
//! let owned = c.open("datafile", OpenOptions::read_write().create(true).key(b"instance-7").deny_write(true))?;
//!
//! // Hints and named attributes.
//! c.cache_hint(&db, 0, 0, cache_hint::RANDOM)?;
//! c.set_nattr("table.db", "schema-version", b"3", nattr_flags::CREATE)?;
//! assert_eq!(c.get_nattr("table.db", "schema-version")?, b"3");
//! # let _ = (at, owned);
//! # Ok::<(), dafs_client::Error>(())
//! ```

mod at;
mod batch;
mod blocking;
mod cg;
mod chain;
mod cluster;
mod completions;
mod config;
mod connect;
mod counters;
mod deadline;
mod error;
mod file;
mod held;
mod inflight;
mod io;
pub mod limits;
mod locks;
mod namespace;
mod nattr;
mod ofi;
mod open_modes;
mod progress;
mod reclaim;
mod recovery;
mod region;
mod session;
mod trunk;

use std::collections::HashMap;
use std::time::Duration;

use dafs_proto::session::ClientSlots;
use dafs_proto::{FileHandle, Status};
use dafs_transport::ClientTransport;

/// Memory the application did not register travels inline up to at least this many
/// bytes, whatever the negotiated threshold (`Client::inline_threshold_unregistered`): a
/// direct transfer of it registers it first (over shared memory a REG_VM round trip, and
/// the server copies through a staging buffer), which costs more than copying 16 KiB
/// through the messages. 16 KiB is the threshold every provider used while a single one
/// served both kinds of memory (docs/benchmarks.md, "Recommended inline threshold").
pub const UNREGISTERED_INLINE_BYTES: usize = 16 * 1024;
/// An inline write must fit in one message with its header: the server keeps its
/// threshold this far below the message size (`dafs_server::config::INLINE_HEADROOM_BYTES`),
/// and so does the unregistered bound.
pub(crate) const INLINE_HEADROOM_BYTES: usize = 4096;

pub use at::DirEntryAt;
pub use batch::{BatchCompletion, BatchIoDesc};
pub use cg::{CgId, Completion};
pub use chain::{Chain, ChainOutcome, ChainReply};
pub use cluster::{
    ClusterNodeInfo, CLUSTER_HANDLES_MAX, CLUSTER_HANDLE_PATH_BYTES_MAX, CLUSTER_REGIONS_MAX,
    WRONG_NODE_RETRY_TIME_MAX,
};
pub use config::{
    parse_url, ClientConfig, Provider, CONNECTIONS_DEFAULT, CONNECTIONS_ENV, REQUEST_DEADLINE_ENV,
};
pub use dafs_proto;
pub use dafs_transport::tls::TlsClientOptions;
pub use error::{Error, ProtocolViolation, Result};
pub use file::{File, OpenOptions};
pub use io::{IoBuf, ReqId};
pub use locks::LockInfo;
pub use namespace::{DirEntry, PATH_WALK_BYTES_MAX};
pub use region::RegionId;
pub use session::ClientStats;

use completions::CgTable;
use counters::InFlightCount;
use inflight::Slot;
use region::RegionInfo;

/// A connected client with one session.
pub struct Client {
    t: Box<dyn ClientTransport>,
    session_id: u64,
    slots: ClientSlots,
    inflight: Vec<Option<Slot>>,
    msg_size_bytes_max: usize,
    inline_threshold: usize,
    direct_bytes_max: usize,
    batch_max: u32,
    root: FileHandle,
    regions: HashMap<u64, RegionInfo>,
    cgs: CgTable,
    next_req: u64,
    /// Completed synchronous reply: (request number, message).
    sync_done: Option<(u64, Vec<u8>)>,
    /// Per slot: the encoded request in flight on it, kept for retransmission after a
    /// reconnect (the buffer is reused; it grows to the largest request sent there).
    reqbufs: Vec<Vec<u8>>,
    stats: ClientStats,
    dead: bool,
    /// Why the client is dead: the session itself is gone (lease expired, fenced,
    /// server restarted) — [`Client::reestablish`] starts a new one.
    dead_status: Option<Status>,
    /// The client gave its session up because a request ran past its deadline (or its
    /// reconnects): calls fail with `TimedOut` until `reestablish`.
    timed_out: bool,
    cfg: ClientConfig,
    /// The nonce the next SESSION_BIND proves over (from SESSION_CREATE, then each bind).
    bind_nonce: [u8; 32],
    /// The key of this session's SESSION_BIND proofs (`auth::bind_key` of the shared
    /// secret and the session token the server gave this client only).
    bind_key: [u8; 32],
    /// The server instance this session belongs to (from SESSION_CREATE): a different
    /// value on a new session means the server restarted.
    boot_verifier: u64,
    /// Requests in flight that complete quickly (metadata, inline, small direct): only
    /// for those is spinning before sleeping worth its CPU.
    small_inflight: InFlightCount,
    /// Data bytes of the requests in flight: while the server has this much to move
    /// (`inflight::BUSY_IO_BYTES`) the client does not spin.
    io_bytes_inflight: u64,
    /// The transport's configured spin budget.
    base_spin: Duration,
    spin_now: Duration,
    /// Opens and locks this client holds, to reclaim after a server restart.
    held: held::Held,
    /// A synchronous request that completed with an error of the client's own making
    /// (in flight across a restart and not safe to resend): (request number, error).
    sync_failed: Option<(u64, Error)>,
    /// A reclaim is under way: a second restart meanwhile is not reclaimed from again.
    reclaiming: bool,
    /// Set on the front client of a cluster URL: its calls are routed to the nodes'
    /// sessions (see `cluster`); its own session is closed.
    cluster: Option<Box<cluster::Cluster>>,
    /// The session's other connections (trunking, see `trunk`): channel k is `extra[k-1]`,
    /// channel 0 is `t`. All share `t`'s registrations.
    extra: Vec<Box<dyn ClientTransport>>,
    /// Round-robin positions for spreading requests, and for reading channels fairly.
    next_send: usize,
    next_recv: usize,
    /// The channel the next READ/WRITE must go on (`channel_for_io`), taken by
    /// `pick_channel`.
    chan_hint: Option<usize>,
}

// A Client may move to another thread (one thread at a time: it is not Sync). The raw
// memory it names is held as `dafs_transport::MemPtr`, whose one SAFETY argument covers
// it; this assertion keeps it that way.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Client>();
};
