//! TCP provider. Messages and placements are framed on one stream (see [`crate::frame`]).
//!
//! Direct placement without an intermediate copy on the client: a PUT's payload is
//! read from the socket straight into the registered region, and a GET is answered by
//! writing straight from the region. The stream orders a placement before the reply
//! that follows it, as RDMA orders a write before a later send.
//!
//! Optionally over TLS ([`crate::tls`]): the same frames on an encrypted stream.

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dafs_proto::limits;

use crate::frame::{FrameHeader, FrameKind, FRAME_HEADER_LEN, GET_RESP_OK, GET_RESP_REFUSED};
use crate::mem_ptr::MemPtr;
use crate::placement::PlacementDst;
use crate::registry::Registry;
use crate::tls::{classify, Io, TlsClientOptions, TlsLink};
use crate::wait::{sleep_on_fd, spin_budget_from_env};
use crate::{
    Access, ClientTransport, PutError, RemoteRegion, ServerConn, ServerEvent, ServerListener,
    TransportError, TransportStats, Wait,
};

/// Most regions one client may register at once.
pub const REGIONS_MAX: usize = 4096;
/// Buffers kept for reuse per connection (TigerBeetle style: no allocation in steady state).
const POOL_MAX: usize = 16;
/// A server-side message buffer starts at most this large and grows as bytes arrive,
/// so a peer that announces a large message and stalls pins only what it sent.
const RECV_CHUNK: usize = 64 * 1024;
/// Most iovecs handed to one writev.
const IOV_MAX: usize = 32;
/// A TLS record starts with its content type and the protocol's major version (3 since
/// SSL 3.0): what a TLS server sends a plaintext client is an alert or a handshake record.
const TLS_RECORD_ALERT: u8 = 0x15;
const TLS_RECORD_HANDSHAKE: u8 = 0x16;
const TLS_RECORD_VERSION_MAJOR: u8 = 3;

/// One unit of queued output.
enum Out {
    Header {
        bytes: [u8; FRAME_HEADER_LEN],
        pos: usize,
    },
    Owned {
        buf: Vec<u8>,
        len: usize,
        pos: usize,
    },
    /// Bytes inside a registered region (client GET_RESP). Valid while the request that
    /// caused the GET is in flight: the client library pins the region until then.
    Mem {
        mem: MemPtr,
        pos: usize,
    },
}

impl Out {
    fn remaining(&self) -> &[u8] {
        match self {
            Out::Header { bytes, pos } => &bytes[*pos..],
            Out::Owned { buf, len, pos } => &buf[*pos..*len],
            // SAFETY: see `Out::Mem`: the registration contract keeps the region valid,
            // and unwritten, while the request that caused the GET is in flight.
            Out::Mem { mem, pos } => unsafe { mem.skip(*pos).as_slice() },
        }
    }
    fn advance(&mut self, n: usize) {
        match self {
            Out::Header { pos, .. } | Out::Owned { pos, .. } | Out::Mem { pos, .. } => *pos += n,
        }
    }
}

/// Output queue shared by both ends: writev as much as the kernel takes.
#[derive(Default)]
struct OutQueue {
    q: VecDeque<Out>,
    bytes: usize,
}

impl OutQueue {
    fn push(&mut self, o: Out) {
        self.bytes += o.remaining().len();
        if !o.remaining().is_empty() {
            self.q.push_back(o);
        }
    }
    /// Returns Ok(true) when empty. Finished owned buffers go back to `pool`.
    fn flush<W: Write>(
        &mut self,
        w: &mut W,
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<bool, TransportError> {
        while !self.q.is_empty() {
            let n = {
                let iov: Vec<IoSlice> =
                    self.q.iter().take(IOV_MAX).map(|o| IoSlice::new(o.remaining())).collect();
                match w.write_vectored(&iov) {
                    Ok(0) => return Err(TransportError::Closed),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if is_disconnect(&e) => return Err(TransportError::Closed),
                    Err(e) => return Err(classify(e)),
                }
            };
            self.bytes -= n;
            let mut left = n;
            while left > 0 {
                let front = self.q.front_mut().expect("written bytes belong to queued items");
                let r = front.remaining().len();
                if left >= r {
                    left -= r;
                    if let Some(Out::Owned { buf, .. }) = self.q.pop_front() {
                        if pool.len() < POOL_MAX {
                            pool.push(buf);
                        }
                    }
                } else {
                    front.advance(left);
                    left = 0;
                }
            }
        }
        Ok(true)
    }
}

fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
    )
}

/// Read into `dst`; Ok(None) on WouldBlock, Err(Closed) on EOF.
fn read_some<R: Read>(r: &mut R, dst: &mut [u8]) -> Result<Option<usize>, TransportError> {
    loop {
        match r.read(dst) {
            Ok(0) if !dst.is_empty() => return Err(TransportError::Closed),
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_disconnect(&e) => return Err(TransportError::Closed),
            Err(e) => return Err(classify(e)),
        }
    }
}

/// Accumulates one 32-byte frame header from a non-blocking stream (both ends).
struct HeaderReader {
    buf: [u8; FRAME_HEADER_LEN],
    got: usize,
}

impl HeaderReader {
    fn new() -> Self {
        HeaderReader { buf: [0; FRAME_HEADER_LEN], got: 0 }
    }
    /// Ok(None) while the header is incomplete (the stream would block).
    fn poll<R: Read>(&mut self, r: &mut R) -> Result<Option<FrameHeader>, TransportError> {
        while self.got < FRAME_HEADER_LEN {
            let Some(n) = read_some(r, &mut self.buf[self.got..])? else { return Ok(None) };
            self.got += n;
        }
        self.got = 0;
        FrameHeader::decode(&self.buf).map(Some).map_err(TransportError::Protocol)
    }
}

fn take_buf(pool: &mut Vec<Vec<u8>>, len: usize) -> Vec<u8> {
    // Best fit: the smallest pooled buffer already long enough (nothing to zero), so a
    // small message never takes — and later re-zeroes — a large transfer buffer. Else
    // the longest one, grown (zeroing only the difference).
    let fit = pool
        .iter()
        .enumerate()
        .filter(|(_, b)| b.len() >= len)
        .min_by_key(|(_, b)| b.len())
        .map(|(i, _)| i);
    let pick = fit.or_else(|| pool.iter().enumerate().max_by_key(|(_, b)| b.len()).map(|(i, _)| i));
    let mut buf = match pick {
        Some(i) => pool.swap_remove(i),
        None => Vec::new(),
    };
    if buf.len() < len {
        buf.resize(len, 0);
    }
    buf
}

// ---------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------

enum ClientRecv {
    Header,
    Msg {
        buf: Vec<u8>,
        len: usize,
        got: usize,
    },
    /// A placement being received straight into registered memory.
    Put {
        dst: MemPtr,
        got: usize,
    },
}

/// Client endpoint of the TCP provider.
pub struct TcpClient {
    sock: TcpStream,
    /// TLS state when the connection is encrypted.
    tls: Option<Box<TlsLink>>,
    /// How to set TLS up again on reconnect (same configuration and server name).
    tls_params: Option<(Arc<rustls::ClientConfig>, rustls::pki_types::ServerName<'static>)>,
    msg_size_bytes_max: usize,
    registry: Registry,
    hdr: HeaderReader,
    recv_state: ClientRecv,
    out: OutQueue,
    pool: Vec<Vec<u8>>,
    spin: crate::wait::AdaptiveSpin,
    stats: TransportStats,
    peer: SocketAddr,
}

impl TcpClient {
    /// Connect to `addr` ("host:port").
    pub fn connect(addr: &str, timeout: Duration) -> Result<Self, TransportError> {
        Self::from_stream(Self::dial(addr, timeout)?)
    }

    /// Connect to `addr` ("host:port") and complete a TLS handshake within `timeout`
    /// (certificate, name and protocol errors are reported here, as [`TransportError::Tls`]).
    pub fn connect_tls(
        addr: &str,
        timeout: Duration,
        opts: &TlsClientOptions,
    ) -> Result<Self, TransportError> {
        let cfg = opts.build()?;
        let name = opts.server_name_for(addr)?;
        Self::connect_tls_with(addr, timeout, cfg, name)
    }

    /// [`TcpClient::connect_tls`] with a prepared rustls configuration.
    pub fn connect_tls_with(
        addr: &str,
        timeout: Duration,
        cfg: Arc<rustls::ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
    ) -> Result<Self, TransportError> {
        let deadline = Instant::now() + timeout;
        let mut c = Self::from_stream(Self::dial(addr, timeout)?)?;
        c.tls = Some(Box::new(TlsLink::client_handshake(
            c.sock.as_fd(),
            cfg.clone(),
            name.clone(),
            deadline,
        )?));
        c.tls_params = Some((cfg, name));
        Ok(c)
    }

    fn dial(addr: &str, timeout: Duration) -> Result<TcpStream, TransportError> {
        let mut last = None;
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last
            .map(TransportError::Io)
            .unwrap_or(TransportError::Protocol("address resolved to nothing")))
    }

    /// True when the connection is encrypted.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub fn from_stream(sock: TcpStream) -> Result<Self, TransportError> {
        sock.set_nodelay(true)?;
        sock.set_nonblocking(true)?;
        let peer = sock.peer_addr()?;
        Ok(TcpClient {
            sock,
            tls: None,
            tls_params: None,
            msg_size_bytes_max: limits::MSG_SIZE_BYTES_MAX as usize,
            registry: Registry::new(REGIONS_MAX),
            hdr: HeaderReader::new(),
            recv_state: ClientRecv::Header,
            out: OutQueue::default(),
            pool: Vec::new(),
            spin: crate::wait::AdaptiveSpin::new(spin_budget_from_env()),
            stats: TransportStats::default(),
            peer,
        })
    }

    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// A new socket to the same peer; registrations (client-side here) stay as they are.
    fn reconnect_to_peer(&mut self, timeout: Duration) -> Result<(), TransportError> {
        let deadline = Instant::now() + timeout;
        let sock = TcpStream::connect_timeout(&self.peer, timeout)?;
        sock.set_nodelay(true)?;
        sock.set_nonblocking(true)?;
        // A TLS connection comes back as TLS, with the same configuration and name.
        self.tls = match &self.tls_params {
            Some((cfg, name)) => Some(Box::new(TlsLink::client_handshake(
                sock.as_fd(),
                cfg.clone(),
                name.clone(),
                deadline,
            )?)),
            None => None,
        };
        self.sock = sock;
        // A placement or message half-received on the old connection is abandoned; the
        // request it belonged to is retransmitted by the session layer.
        self.hdr = HeaderReader::new();
        self.recv_state = ClientRecv::Header;
        self.out = OutQueue::default();
        Ok(())
    }

    /// Read and act on whatever has arrived; return a complete message if there is one.
    fn progress(&mut self) -> Result<Option<Vec<u8>>, TransportError> {
        self.progress_inner().map_err(|e| self.explain_plaintext_refusal(e))
    }

    /// A plaintext client talking to a TLS server receives a TLS alert record (or a
    /// handshake record) instead of a frame header: say so rather than "closed".
    fn explain_plaintext_refusal(&self, e: TransportError) -> TransportError {
        let looks_tls = self.hdr.buf[1] == TLS_RECORD_VERSION_MAJOR
            && matches!(self.hdr.buf[0], TLS_RECORD_ALERT | TLS_RECORD_HANDSHAKE);
        if self.tls.is_none()
            && self.stats.msgs_received == 0
            && looks_tls
            && matches!(e, TransportError::Closed | TransportError::Protocol(_))
        {
            return TransportError::Tls("the server answered with TLS: it requires TLS (use a dafs+tls:// URL / TLS options)".into());
        }
        e
    }

    fn progress_inner(&mut self) -> Result<Option<Vec<u8>>, TransportError> {
        loop {
            match &mut self.recv_state {
                ClientRecv::Header => {
                    let Some(fh) = self.hdr.poll(&mut Io::new(&self.sock, &mut self.tls))? else {
                        return Ok(None);
                    };
                    self.on_frame_header(fh)?;
                }
                ClientRecv::Msg { buf, len, got } => {
                    let Some(n) =
                        read_some(&mut Io::new(&self.sock, &mut self.tls), &mut buf[*got..*len])?
                    else {
                        return Ok(None);
                    };
                    *got += n;
                    if *got == *len {
                        let ClientRecv::Msg { mut buf, len, .. } =
                            std::mem::replace(&mut self.recv_state, ClientRecv::Header)
                        else {
                            unreachable!()
                        };
                        buf.truncate(len);
                        self.stats.msgs_received += 1;
                        return Ok(Some(buf));
                    }
                }
                ClientRecv::Put { dst, got } => {
                    // SAFETY: `dst` was resolved against the registry for remote write; the
                    // registration contract keeps it valid and untouched by the application
                    // while the request naming it is in flight, and the slice ends before
                    // the next loop iteration.
                    let rest = unsafe { dst.skip(*got).as_mut_slice() };
                    let Some(n) = read_some(&mut Io::new(&self.sock, &mut self.tls), rest)? else {
                        return Ok(None);
                    };
                    *got += n;
                    if *got == dst.len() {
                        self.stats.placed_bytes += dst.len() as u64;
                        self.recv_state = ClientRecv::Header;
                    }
                }
            }
        }
    }

    fn on_frame_header(&mut self, fh: FrameHeader) -> Result<(), TransportError> {
        let len = fh.len as usize;
        match fh.kind {
            FrameKind::Msg => {
                if len > self.msg_size_bytes_max {
                    return Err(TransportError::TooBig { len, max: self.msg_size_bytes_max });
                }
                let buf = take_buf(&mut self.pool, len);
                self.recv_state = if len == 0 {
                    ClientRecv::Header
                } else {
                    ClientRecv::Msg { buf, len, got: 0 }
                };
                if len == 0 {
                    return Err(TransportError::Protocol("empty message"));
                }
            }
            FrameKind::Put => {
                if len > limits::DIRECT_BYTES_MAX as usize {
                    return Err(TransportError::Protocol(
                        "placement larger than the direct maximum",
                    ));
                }
                match self.registry.resolve(fh.key, fh.offset, len, true) {
                    Ok(dst) => {
                        if len > 0 {
                            self.recv_state = ClientRecv::Put { dst, got: 0 };
                        }
                    }
                    Err(_) => {
                        // The server named memory we did not register for it. Never write
                        // it anywhere: the connection is no longer trustworthy.
                        self.stats.placements_refused += 1;
                        return Err(TransportError::Protocol(
                            "server placed into unregistered memory",
                        ));
                    }
                }
            }
            FrameKind::Get => {
                if len > limits::DIRECT_BYTES_MAX as usize {
                    return Err(TransportError::Protocol("pull larger than the direct maximum"));
                }
                match self.registry.resolve(fh.key, fh.offset, len, false) {
                    Ok(mem) => {
                        let h = FrameHeader {
                            kind: FrameKind::GetResp,
                            len: fh.len,
                            key: GET_RESP_OK,
                            offset: 0,
                            tag: fh.tag,
                        };
                        self.out.push(Out::Header { bytes: h.encode(), pos: 0 });
                        self.out.push(Out::Mem { mem, pos: 0 });
                        self.stats.pulled_bytes += len as u64;
                    }
                    Err(_) => {
                        self.stats.placements_refused += 1;
                        let h = FrameHeader {
                            kind: FrameKind::GetResp,
                            len: 0,
                            key: GET_RESP_REFUSED,
                            offset: 0,
                            tag: fh.tag,
                        };
                        self.out.push(Out::Header { bytes: h.encode(), pos: 0 });
                    }
                }
                self.out.flush(&mut Io::new(&self.sock, &mut self.tls), &mut self.pool)?;
            }
            FrameKind::GetResp => {
                return Err(TransportError::Protocol("GET_RESP sent to a client"))
            }
        }
        Ok(())
    }
}

impl Drop for TcpClient {
    fn drop(&mut self) {
        if let Some(t) = self.tls.as_deref_mut() {
            t.close(self.sock.as_fd());
        }
    }
}

impl crate::wait::WaitSteps for TcpClient {
    fn poll_once(&mut self) -> Result<Option<Vec<u8>>, TransportError> {
        self.out.flush(&mut Io::new(&self.sock, &mut self.tls), &mut self.pool)?;
        if let Some(t) = self.tls.as_deref_mut() {
            t.push(self.sock.as_fd()).map_err(|e| {
                if is_disconnect(&e) {
                    TransportError::Closed
                } else {
                    classify(e)
                }
            })?;
        }
        self.progress()
    }
    fn sleep(&mut self, deadline: Option<Instant>) -> Result<(), TransportError> {
        // Also for POLLOUT while output is queued: the kernel taking it is progress.
        let tls_out = self.tls.as_ref().is_some_and(|t| t.wants_write());
        Ok(sleep_on_fd(self.sock.as_fd(), !self.out.q.is_empty() || tls_out, deadline)?)
    }
    fn spin_and_stats(&mut self) -> (&mut crate::wait::AdaptiveSpin, &mut TransportStats) {
        (&mut self.spin, &mut self.stats)
    }
}

impl ClientTransport for TcpClient {
    fn msg_size_bytes_max(&self) -> usize {
        self.msg_size_bytes_max
    }
    fn set_msg_size_bytes_max(&mut self, n: usize) {
        self.msg_size_bytes_max = n.min(limits::MSG_SIZE_BYTES_MAX as usize);
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        if msg.len() > self.msg_size_bytes_max {
            return Err(TransportError::TooBig { len: msg.len(), max: self.msg_size_bytes_max });
        }
        let h = FrameHeader::msg(msg.len()).encode();
        self.stats.msgs_sent += 1;
        if self.out.q.is_empty() {
            // Fast path: hand both pieces to the kernel without copying.
            let total = h.len() + msg.len();
            let mut written = 0;
            while written < total {
                let mut io = Io::new(&self.sock, &mut self.tls);
                let r = if written < h.len() {
                    io.write_vectored(&[IoSlice::new(&h[written..]), IoSlice::new(msg)])
                } else {
                    io.write(&msg[written - h.len()..])
                };
                match r {
                    Ok(0) => return Err(TransportError::Closed),
                    Ok(n) => written += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if is_disconnect(&e) => return Err(TransportError::Closed),
                    Err(e) => return Err(classify(e)),
                }
            }
            if written < h.len() {
                self.out.push(Out::Header { bytes: h, pos: written });
                written = h.len();
            }
            let rest = &msg[written - h.len()..];
            if !rest.is_empty() {
                let mut buf = take_buf(&mut self.pool, rest.len());
                buf[..rest.len()].copy_from_slice(rest);
                self.out.push(Out::Owned { buf, len: rest.len(), pos: 0 });
            }
            return Ok(());
        }
        let mut buf = take_buf(&mut self.pool, msg.len());
        buf[..msg.len()].copy_from_slice(msg);
        self.out.push(Out::Header { bytes: h, pos: 0 });
        self.out.push(Out::Owned { buf, len: msg.len(), pos: 0 });
        self.out.flush(&mut Io::new(&self.sock, &mut self.tls), &mut self.pool)?;
        Ok(())
    }

    fn recv(&mut self, wait: Wait) -> Result<Option<Vec<u8>>, TransportError> {
        crate::wait::wait_for_message(self, wait)
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            self.pool.push(buf);
        }
    }

    fn set_spin(&mut self, spin: Duration) {
        self.spin.set_max(spin);
    }

    fn reconnect(&mut self, timeout: Duration) -> Result<(), TransportError> {
        self.reconnect_to_peer(timeout)
    }

    fn cut(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }

    unsafe fn register(
        &mut self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<u64, TransportError> {
        self.registry.insert(ptr, len, access, false)
    }

    fn deregister(&mut self, key: u64) -> Result<(), TransportError> {
        self.registry.remove(key).map(|_| ())
    }

    fn alloc_registered(&mut self, len: usize) -> Result<(u64, *mut u8), TransportError> {
        self.registry.alloc_owned(len, Access::READ_WRITE)
    }

    fn provider(&self) -> &'static str {
        if self.tls.is_some() {
            "tcp+tls"
        } else {
            "tcp"
        }
    }
    fn stats(&self) -> TransportStats {
        self.stats
    }
    fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

// ---------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------

pub struct TcpListener {
    inner: mio::net::TcpListener,
    /// When set, every accepted connection speaks TLS (plaintext peers fail the handshake).
    tls: Option<Arc<rustls::ServerConfig>>,
}

impl TcpListener {
    pub fn bind(addr: &str) -> Result<Self, TransportError> {
        let a: SocketAddr = addr
            .to_socket_addrs()?
            .next()
            .ok_or(TransportError::Protocol("listen address resolved to nothing"))?;
        Ok(TcpListener { inner: mio::net::TcpListener::bind(a)?, tls: None })
    }
    /// Require TLS on every connection accepted from now on.
    pub fn set_tls(&mut self, cfg: Arc<rustls::ServerConfig>) {
        self.tls = Some(cfg);
    }
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
    pub fn mio(&mut self) -> &mut mio::net::TcpListener {
        &mut self.inner
    }
}

impl ServerListener for TcpListener {
    type Conn = TcpServerConn;
    fn raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
    fn accept(&mut self) -> Result<Option<TcpServerConn>, TransportError> {
        match self.inner.accept() {
            Ok((s, peer)) => {
                s.set_nodelay(true)?;
                let mut c = TcpServerConn::new(s, peer.to_string());
                if let Some(cfg) = &self.tls {
                    c.tls = Some(Box::new(TlsLink::server(cfg.clone())?));
                }
                Ok(Some(c))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
    fn local_addr(&self) -> String {
        self.inner.local_addr().map(|a| a.to_string()).unwrap_or_default()
    }
}

enum ServerRecv {
    Header,
    Msg { buf: Vec<u8>, len: usize, got: usize },
    Pull { tag: u64, buf: Vec<u8>, len: usize, got: usize },
}

pub struct TcpServerConn {
    sock: mio::net::TcpStream,
    tls: Option<Box<TlsLink>>,
    peer: String,
    msg_size_bytes_max: usize,
    hdr: HeaderReader,
    recv_state: ServerRecv,
    out: OutQueue,
    pool: Vec<Vec<u8>>,
    /// Pulls in flight: tag -> requested length.
    pulls: HashMap<u64, usize>,
    pull_bytes: usize,
}

impl TcpServerConn {
    fn new(sock: mio::net::TcpStream, peer: String) -> Self {
        TcpServerConn {
            sock,
            tls: None,
            peer,
            msg_size_bytes_max: limits::MSG_SIZE_BYTES_MAX as usize,
            hdr: HeaderReader::new(),
            recv_state: ServerRecv::Header,
            out: OutQueue::default(),
            pool: Vec::new(),
            pulls: HashMap::new(),
            pull_bytes: 0,
        }
    }
    pub fn mio(&mut self) -> &mut mio::net::TcpStream {
        &mut self.sock
    }

    /// Queue `buf[..n]`. The backlog limit counts queued bytes, so a buffer much larger
    /// than what it carries (a short fill of a large placement, or a large pooled buffer
    /// reused for a small reply) is not queued itself: its bytes go into an exact-size
    /// buffer and the large one back to the pool. Otherwise a peer that never reads
    /// could pin far more memory than the backlog limit (8 MiB per tiny READ_DIRECT).
    fn queue_owned(&mut self, buf: Vec<u8>, n: usize) {
        if n < buf.capacity() / 2 {
            let exact = buf[..n].to_vec();
            self.recycle(buf);
            self.out.push(Out::Owned { buf: exact, len: n, pos: 0 });
        } else {
            self.out.push(Out::Owned { buf, len: n, pos: 0 });
        }
    }
}

impl ServerConn for TcpServerConn {
    fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
    fn peer(&self) -> String {
        self.peer.clone()
    }
    fn msg_size_bytes_max(&self) -> usize {
        self.msg_size_bytes_max
    }
    fn set_msg_size_bytes_max(&mut self, n: usize) {
        self.msg_size_bytes_max = n.min(limits::MSG_SIZE_BYTES_MAX as usize);
    }

    fn poll_event(&mut self) -> Result<Option<ServerEvent>, TransportError> {
        loop {
            match &mut self.recv_state {
                ServerRecv::Header => {
                    let Some(fh) = self.hdr.poll(&mut Io::new(&self.sock, &mut self.tls))? else {
                        return Ok(None);
                    };
                    let len = fh.len as usize;
                    match fh.kind {
                        FrameKind::Msg => {
                            if len > self.msg_size_bytes_max {
                                return Err(TransportError::TooBig {
                                    len,
                                    max: self.msg_size_bytes_max,
                                });
                            }
                            if len == 0 {
                                return Err(TransportError::Protocol("empty message"));
                            }
                            let buf = take_buf(&mut self.pool, len.min(RECV_CHUNK));
                            self.recv_state = ServerRecv::Msg { buf, len, got: 0 };
                        }
                        FrameKind::GetResp => {
                            let Some(want) = self.pulls.remove(&fh.tag) else {
                                return Err(TransportError::Protocol(
                                    "GET_RESP for no pull in flight",
                                ));
                            };
                            self.pull_bytes -= want;
                            if fh.key != GET_RESP_OK {
                                if len != 0 {
                                    return Err(TransportError::Protocol(
                                        "refused GET_RESP with payload",
                                    ));
                                }
                                return Ok(Some(ServerEvent::Pulled {
                                    tag: fh.tag,
                                    data: Err(TransportError::BadRegion),
                                }));
                            }
                            if len != want {
                                return Err(TransportError::Protocol(
                                    "GET_RESP length differs from the pull",
                                ));
                            }
                            let mut buf = take_buf(&mut self.pool, len);
                            if len == 0 {
                                buf.truncate(0);
                                return Ok(Some(ServerEvent::Pulled {
                                    tag: fh.tag,
                                    data: Ok(buf),
                                }));
                            }
                            self.recv_state = ServerRecv::Pull { tag: fh.tag, buf, len, got: 0 };
                        }
                        FrameKind::Put | FrameKind::Get => {
                            return Err(TransportError::Protocol("client sent a placement frame"))
                        }
                    }
                }
                ServerRecv::Msg { buf, len, got } => {
                    if *got == buf.len() {
                        buf.resize((*len).min(got.saturating_mul(2).max(RECV_CHUNK)), 0);
                    }
                    let end = (*len).min(buf.len());
                    let Some(n) =
                        read_some(&mut Io::new(&self.sock, &mut self.tls), &mut buf[*got..end])?
                    else {
                        return Ok(None);
                    };
                    *got += n;
                    if *got == *len {
                        let ServerRecv::Msg { mut buf, len, .. } =
                            std::mem::replace(&mut self.recv_state, ServerRecv::Header)
                        else {
                            unreachable!()
                        };
                        buf.truncate(len);
                        return Ok(Some(ServerEvent::Message(buf)));
                    }
                }
                ServerRecv::Pull { buf, len, got, .. } => {
                    let Some(n) =
                        read_some(&mut Io::new(&self.sock, &mut self.tls), &mut buf[*got..*len])?
                    else {
                        return Ok(None);
                    };
                    *got += n;
                    if *got == *len {
                        let ServerRecv::Pull { tag, mut buf, len, .. } =
                            std::mem::replace(&mut self.recv_state, ServerRecv::Header)
                        else {
                            unreachable!()
                        };
                        buf.truncate(len);
                        return Ok(Some(ServerEvent::Pulled { tag, data: Ok(buf) }));
                    }
                }
            }
        }
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        // Kept at its current length: restoring the capacity would zero-fill it on every
        // request (take_buf picks by length, best fit).
        if self.pool.len() < POOL_MAX {
            self.pool.push(buf);
        }
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        if msg.len() > self.msg_size_bytes_max {
            return Err(TransportError::TooBig { len: msg.len(), max: self.msg_size_bytes_max });
        }
        let mut buf = take_buf(&mut self.pool, msg.len());
        buf[..msg.len()].copy_from_slice(msg);
        self.out.push(Out::Header { bytes: FrameHeader::msg(msg.len()).encode(), pos: 0 });
        self.queue_owned(buf, msg.len());
        Ok(())
    }

    fn put(
        &mut self,
        region: RemoteRegion,
        len: usize,
        fill: &mut dyn FnMut(&mut PlacementDst<'_>) -> io::Result<usize>,
    ) -> Result<usize, PutError> {
        if len > limits::DIRECT_BYTES_MAX as usize {
            return Err(
                TransportError::TooBig { len, max: limits::DIRECT_BYTES_MAX as usize }.into()
            );
        }
        let mut buf = take_buf(&mut self.pool, len);
        let n = match fill(&mut PlacementDst::from_slice(&mut buf[..len])) {
            Ok(n) => n.min(len),
            Err(e) => {
                self.recycle(buf);
                return Err(PutError::Fill(e));
            }
        };
        let h = FrameHeader {
            kind: FrameKind::Put,
            len: n as u32,
            key: region.key,
            offset: region.offset,
            tag: 0,
        };
        self.out.push(Out::Header { bytes: h.encode(), pos: 0 });
        self.queue_owned(buf, n);
        Ok(n)
    }

    fn pull(&mut self, region: RemoteRegion, len: usize, tag: u64) -> Result<(), TransportError> {
        if len > limits::DIRECT_BYTES_MAX as usize {
            return Err(TransportError::TooBig { len, max: limits::DIRECT_BYTES_MAX as usize });
        }
        if self.pulls.contains_key(&tag) {
            return Err(TransportError::Protocol("pull tag already in flight"));
        }
        let h = FrameHeader {
            kind: FrameKind::Get,
            len: len as u32,
            key: region.key,
            offset: region.offset,
            tag,
        };
        self.out.push(Out::Header { bytes: h.encode(), pos: 0 });
        self.pulls.insert(tag, len);
        self.pull_bytes += len;
        Ok(())
    }

    fn flush(&mut self) -> Result<bool, TransportError> {
        let done = self.out.flush(&mut Io::new(&self.sock, &mut self.tls), &mut self.pool)?;
        match self.tls.as_deref_mut() {
            // Ciphertext rustls still holds counts as queued output.
            Some(t) => Ok(t.push(self.sock.as_fd()).map_err(|e| {
                if is_disconnect(&e) {
                    TransportError::Closed
                } else {
                    classify(e)
                }
            })? && done),
            None => Ok(done),
        }
    }

    fn backlog_bytes(&self) -> usize {
        let tls = if self.tls.as_ref().is_some_and(|t| t.wants_write()) {
            crate::tls::TLS_BUFFER_LIMIT
        } else {
            0
        };
        self.out.bytes + self.pull_bytes + tls
    }

    /// Decrypted input rustls holds is invisible to the readiness fd. `poll_event` drains
    /// it before reporting "nothing more" (see [`crate::tls`]), so it can only be left
    /// while the server has paused reading for backpressure; it is reported only with no
    /// output backlog, so a paused connection is resumed by socket events, never by a spin.
    fn input_pending(&self) -> bool {
        self.out.bytes + self.pull_bytes == 0
            && self.tls.as_ref().is_some_and(|t| t.has_buffered_input())
    }
}
