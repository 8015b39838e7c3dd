//! # dafs-transport — providers for DAFS
//!
//! Shaped like DAT / libfabric: an endpoint sends and receives bounded *messages*, and
//! the **server** moves bulk data by one-sided *placement* into or out of memory the
//! client has *registered* (a region gets a key; the server names `{key, offset, len}`).
//!
//! - Client side: [`ClientTransport`]. Registration, message send/receive, and — for
//!   providers without hardware placement, like TCP — servicing the server's placement
//!   frames whenever the application enters the library (no hidden threads).
//! - Server side: [`ServerListener`] and [`ServerConn`], non-blocking, driven by the
//!   server's event loop through [`ServerConn::raw_fd`] readiness.
//!
//! Providers: [`tcp`] (any two hosts; optionally over TLS, see [`tls`]). A same-host shared-memory provider and a libfabric
//! provider implement the same traits.

pub mod fault;
pub mod frame;
pub mod mem_ptr;
pub mod placement;
pub mod registry;
pub mod shm;
pub mod tcp;
pub mod tls;
pub mod wait;

use std::os::fd::RawFd;
use std::time::Duration;

pub use dafs_proto::RemoteRegion;
pub use mem_ptr::MemPtr;
pub use placement::{PlacementDst, PlacementLease, PlacementPart, PlacementSrc};

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("connection closed by peer")]
    Closed,
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("protocol violation by peer: {0}")]
    Protocol(&'static str),
    #[error("message of {len} bytes exceeds the limit of {max}")]
    TooBig { len: usize, max: usize },
    #[error("bad memory region (unknown key, out of bounds, or wrong access)")]
    BadRegion,
    #[error("registration limit reached")]
    RegistrationLimit,
    #[error("memory at this address cannot be registered with this provider")]
    NotRegistrable,
    /// TLS configuration, handshake or record-layer failure (bad certificate, wrong
    /// server name, peer not speaking TLS, ...). The text says which.
    #[error("{0}")]
    Tls(String),
}

impl TransportError {
    /// True when the connection is unusable after this error.
    pub fn is_fatal(&self) -> bool {
        !matches!(
            self,
            TransportError::BadRegion
                | TransportError::RegistrationLimit
                | TransportError::NotRegistrable
                | TransportError::TooBig { .. }
        )
    }
}

/// Idle time before the first TCP keepalive probe.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// Time between unanswered keepalive probes.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes after which the kernel declares the peer dead.
pub const KEEPALIVE_PROBES: u32 = 3;

/// Turn on TCP keepalive probes on a connected socket: a peer that vanished without
/// closing (host crash, network partition) is detected after about
/// `idle + probes x interval` (here 30 s + 3 x 10 s) even when nothing is being sent, so
/// a server parks (and eventually expires) the session of a client that is gone, and a
/// waiting client notices a server that is gone.
pub fn set_tcp_keepalive(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    use rustix::net::sockopt;
    sockopt::set_socket_keepalive(fd, true)?;
    sockopt::set_tcp_keepidle(fd, KEEPALIVE_IDLE)?;
    sockopt::set_tcp_keepintvl(fd, KEEPALIVE_INTERVAL)?;
    sockopt::set_tcp_keepcnt(fd, KEEPALIVE_PROBES)?;
    Ok(())
}

/// What a registered region allows the server to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The server may place data into the region (READ_DIRECT).
    pub remote_write: bool,
    /// The server may pull data out of the region (WRITE_DIRECT).
    pub remote_read: bool,
}

impl Access {
    pub const READ_WRITE: Access = Access { remote_write: true, remote_read: true };
}

/// How long a receive may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Make progress, never block.
    NoWait,
    /// Spin (bounded by the transport's spin budget), then sleep, up to this long.
    Timeout(Duration),
    Forever,
}

/// Counters every provider keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportStats {
    pub msgs_sent: u64,
    pub msgs_received: u64,
    /// Bytes the server placed into client memory.
    pub placed_bytes: u64,
    /// Bytes the server pulled out of client memory.
    pub pulled_bytes: u64,
    /// Placement frames refused because they named memory not registered for it.
    pub placements_refused: u64,
    /// Waits that ended while spinning (no sleep needed).
    pub waits_spun: u64,
    /// Waits that had to sleep in the kernel.
    pub waits_slept: u64,
    /// Registrations of application memory the provider cannot share directly (shm:
    /// reached through the client's /proc/self/mem, one extra copy on the server side).
    pub vm_registrations: u64,
}

/// Client end of a connection. `Send`: a client may move between threads (one at a
/// time), e.g. behind a mutex in a language binding.
pub trait ClientTransport: Send {
    /// Largest message this endpoint sends or accepts.
    fn msg_size_bytes_max(&self) -> usize;
    /// Lower (never raise above the provider maximum) the message size after negotiation.
    fn set_msg_size_bytes_max(&mut self, n: usize);
    /// Send one message. Never blocks; bytes the kernel does not take now are queued
    /// (bounded by the session's slots) and flushed on later calls.
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError>;
    /// Make progress (flush sends, service placements) and return the next complete
    /// message, waiting as `wait` says.
    fn recv(&mut self, wait: Wait) -> Result<Option<Vec<u8>>, TransportError>;
    /// Give a received message buffer back for reuse.
    fn recycle(&mut self, buf: Vec<u8>);
    /// Spin budget of the next waits (the client lowers it to zero while only large
    /// transfers are in flight: they take far longer than any useful spin).
    fn set_spin(&mut self, spin: std::time::Duration);
    /// The spin budget configured at connect time (`DAFS_SPIN_US`).
    fn default_spin(&self) -> std::time::Duration {
        wait::spin_budget_from_env()
    }
    /// Register memory the server may place into / pull from.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid and must not be freed until [`Self::deregister`];
    /// while an I/O that names it is in flight the application must not access it.
    unsafe fn register(
        &mut self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<u64, TransportError>;
    fn deregister(&mut self, key: u64) -> Result<(), TransportError>;
    /// Allocate memory the provider can place into most cheaply, already registered.
    /// The memory lives until `deregister(key)` and is zero-filled.
    fn alloc_registered(&mut self, len: usize) -> Result<(u64, *mut u8), TransportError>;
    /// Re-establish the connection to the same peer after it broke (session recovery),
    /// keeping every registration under the same key, so retransmitted requests name
    /// the same memory. Whatever was queued for the old connection is dropped.
    fn reconnect(&mut self, _timeout: std::time::Duration) -> Result<(), TransportError> {
        Err(TransportError::Protocol("this provider cannot reconnect"))
    }
    /// Break the connection now, in both directions, as a network failure would (fault
    /// injection and tests).
    fn cut(&mut self) {}
    /// Provider name, e.g. "tcp".
    fn provider(&self) -> &'static str;
    fn stats(&self) -> TransportStats;
    /// Readiness fd for applications that integrate the library into their own poll loop.
    fn raw_fd(&self) -> RawFd;
    /// The socket whose `shutdown(2)` breaks the connection, so another thread can cut
    /// it (`fault::FaultControl::cut`). The readiness fd by default; a provider whose
    /// readiness fd is not its connection (libfabric's completion wait fd) names the
    /// socket that is.
    fn cut_fd(&self) -> RawFd {
        self.raw_fd()
    }
    /// True while output is queued that the kernel has not taken yet: a caller that
    /// sleeps on [`Self::raw_fd`] itself (one thread waiting on several connections)
    /// must wait for writability too, or a request never leaves and its reply never
    /// comes. Providers that never queue output answer false.
    fn wants_write(&self) -> bool {
        false
    }
    /// Another connection to the same peer sharing this one's registrations (session
    /// trunking: one session over several connections). Providers that cannot say so.
    fn sibling(&self, _timeout: Duration) -> Result<Box<dyn ClientTransport>, TransportError> {
        Err(TransportError::Protocol("this provider cannot open more connections"))
    }
}

/// A server-side event.
#[derive(Debug)]
pub enum ServerEvent {
    /// A complete request message.
    Message(Vec<u8>),
    /// A pull started by [`ServerConn::pull`] finished: the client's bytes, or the
    /// client refused (bad region).
    Pulled { tag: u64, data: Result<Vec<u8>, TransportError> },
}

/// Result of filling a placement.
#[derive(Debug, thiserror::Error)]
pub enum PutError {
    /// The fill callback failed (e.g. the file read failed): nothing was placed.
    #[error("fill failed: {0}")]
    Fill(std::io::Error),
    #[error(transparent)]
    Transport(#[from] TransportError),
}

/// Where a READ_DIRECT reply keeps its count and end-of-file flag (little-endian u32s,
/// byte offsets into the encoded message). A provider that sends a placement's file bytes
/// only after the reply is queued ([`ServerConn::put_file`]) corrects them with this if
/// the file turns out shorter by then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountPatch {
    pub count_at: usize,
    pub eof_at: usize,
}

/// Server end of one client connection. Non-blocking throughout.
pub trait ServerConn: Send {
    fn raw_fd(&self) -> RawFd;
    fn peer(&self) -> String;
    fn msg_size_bytes_max(&self) -> usize;
    fn set_msg_size_bytes_max(&mut self, n: usize);
    /// Read what the socket has and return the next event, if complete.
    fn poll_event(&mut self) -> Result<Option<ServerEvent>, TransportError>;
    /// Give a message / pull buffer back for reuse.
    fn recycle(&mut self, buf: Vec<u8>);
    /// Queue one message (ordered after every placement queued before it).
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError>;
    /// Place up to `len` bytes into the client's region. `fill` writes the data into the
    /// `len`-byte destination it is given (for shared memory: the client's memory itself,
    /// which is why it is a [`PlacementDst`] and not a `&mut [u8]`) and returns how many
    /// bytes it produced; that many are placed. Returns the count placed.
    fn put(
        &mut self,
        region: RemoteRegion,
        len: usize,
        fill: &mut dyn FnMut(&mut PlacementDst<'_>) -> std::io::Result<usize>,
    ) -> Result<usize, PutError>;
    /// Whether [`Self::put_file`] would send a `len`-byte range from the page cache (and
    /// so needs its reply queued with [`Self::send_file_reply`]). When it would not, the
    /// server fills the placement itself, which lets it spread large copies over its
    /// copy engines. Default: no.
    fn sends_files(&self, _len: usize) -> bool {
        false
    }
    /// Place up to `len` bytes of the regular file `file` from `offset` into the client's
    /// region, as [`Self::put`] with a `pread` fill does (which is the default). A
    /// provider may instead queue the file range itself and send it from the page cache
    /// later (TCP: `sendfile`), holding `file` until then. Returns the count placed: the
    /// bytes the file holds there now. The reply to this placement must then be queued
    /// with [`Self::send_file_reply`], which corrects it should the file shrink before
    /// its bytes go out (the stream then carries zeros for the missing bytes).
    fn put_file(
        &mut self,
        region: RemoteRegion,
        len: usize,
        file: &std::sync::Arc<std::os::fd::OwnedFd>,
        offset: u64,
    ) -> Result<usize, PutError> {
        use std::os::fd::AsFd;
        self.put(region, len, &mut |dst| dst.pread_from(file.as_fd(), offset))
    }
    /// Queue the reply to the placement [`Self::put_file`] queued just before, `patch`
    /// saying where its count and end-of-file flag are. Default: [`Self::send`] (the
    /// count was final when `put_file` returned).
    fn send_file_reply(&mut self, msg: &[u8], _patch: CountPatch) -> Result<(), TransportError> {
        self.send(msg)
    }
    /// Start pulling `len` bytes from the client's region; completion arrives as
    /// [`ServerEvent::Pulled`] with this `tag`.
    fn pull(&mut self, region: RemoteRegion, len: usize, tag: u64) -> Result<(), TransportError>;
    /// Pull synchronously when the provider can reach client memory directly: `consume`
    /// gets the client's bytes in place (shared memory: no copy) as a [`PlacementSrc`],
    /// not a `&[u8]`, since the client may write them meanwhile. `Ok(None)` means the
    /// provider cannot; use [`ServerConn::pull`].
    fn pull_sync(
        &mut self,
        _region: RemoteRegion,
        _len: usize,
        _consume: &mut dyn FnMut(PlacementSrc<'_>) -> std::io::Result<usize>,
    ) -> Result<Option<usize>, PutError> {
        Ok(None)
    }
    /// The client's memory of `region` (`len` bytes) as a lease another thread may fill
    /// (`write`: a placement, READ_DIRECT) or drain (a pull, WRITE_DIRECT) with no further
    /// call into the provider, so a server can run independent transfers of one
    /// connection in parallel. `Ok(None)` when the provider needs its own thread for the
    /// transfer (TCP streams, shared memory reached through /proc/PID/mem): use
    /// [`Self::put`] / [`Self::pull_sync`] / [`Self::pull`]. Default: `Ok(None)`.
    fn lease(
        &mut self,
        _region: RemoteRegion,
        _len: usize,
        _write: bool,
    ) -> Result<Option<PlacementLease>, TransportError> {
        Ok(None)
    }
    /// True for a same-host shared-memory connection: the server exports the
    /// shared-memory inline threshold to its sessions (`inline_threshold_shm`) instead of
    /// the network one, since the inline/direct crossover differs by provider.
    fn is_shared_memory(&self) -> bool {
        false
    }
    /// True if input is waiting that the readiness fd does not signal (shared-memory
    /// rings); the server's spin loop polls this.
    fn input_pending(&self) -> bool {
        false
    }
    /// True if more input is waiting than the event just read (a hint, not a promise):
    /// the server runs a request in parallel only when another one may follow. Default:
    /// [`Self::input_pending`].
    fn more_input(&self) -> bool {
        self.input_pending()
    }
    /// Whether the event loop must call [`input_pending`](Self::input_pending) and
    /// [`arm_sleep`](Self::arm_sleep) on every iteration, because input can wait
    /// without the descriptor becoming readable (a ring, plaintext TLS holds, RMA
    /// completions). False: the poller's readiness says all, and a loop holding many
    /// such connections spends nothing on those without events. Default: true.
    fn polled(&self) -> bool {
        true
    }
    /// The event loop is about to sleep on the fd: ask the peer for a doorbell. Returns
    /// false if input arrived meanwhile (then do not sleep).
    fn arm_sleep(&mut self) -> bool {
        true
    }
    /// The event loop woke up.
    fn disarm_sleep(&mut self) {}
    /// Write queued bytes. Returns true when nothing remains queued.
    fn flush(&mut self) -> Result<bool, TransportError>;
    /// Bytes queued but not yet written plus bytes of pulls in flight: the server stops
    /// reading new requests from a connection above its high-water mark.
    fn backlog_bytes(&self) -> usize;
}

/// Accepting side.
pub trait ServerListener: Send {
    type Conn: ServerConn;
    fn raw_fd(&self) -> RawFd;
    /// Accept one pending connection, if any (non-blocking).
    fn accept(&mut self) -> Result<Option<Self::Conn>, TransportError>;
    fn local_addr(&self) -> String;
}

#[cfg(test)]
mod keepalive_tests {
    use std::os::fd::AsFd;

    #[test]
    fn keepalive_is_on_with_the_documented_timers() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        super::set_tcp_keepalive(s.as_fd()).unwrap();
        use rustix::net::sockopt;
        assert!(sockopt::get_socket_keepalive(&s).unwrap());
        assert_eq!(sockopt::get_tcp_keepidle(&s).unwrap().as_secs(), 30);
        assert_eq!(sockopt::get_tcp_keepintvl(&s).unwrap().as_secs(), 10);
        assert_eq!(sockopt::get_tcp_keepcnt(&s).unwrap(), 3);
    }
}
