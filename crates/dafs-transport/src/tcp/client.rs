//! The client endpoint of the TCP provider.

use std::io::{self, IoSlice, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dafs_proto::limits;

use crate::frame::{FrameHeader, FrameKind, GET_RESP_OK, GET_RESP_REFUSED};
use crate::mem_ptr::MemPtr;
use crate::registry::Registry;
use crate::tls::{classify, Io, TlsClientOptions, TlsLink};
use crate::wait::{sleep_on_fd, spin_budget_from_env};
use crate::{Access, ClientTransport, TransportError, TransportStats, Wait};

use super::{
    is_disconnect, read_some, take_buf, HeaderReader, Out, OutQueue, POOL_MAX, REGIONS_MAX,
    TLS_RECORD_ALERT, TLS_RECORD_HANDSHAKE, TLS_RECORD_VERSION_MAJOR,
};

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
    /// Shared with the sibling connections of a trunked session ([`TcpClient::sibling`]):
    /// memory registered once may be named in a request sent on any of them, and the
    /// server places into (or pulls from) it over the connection that carried the request.
    registry: Arc<Mutex<Registry>>,
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
            registry: Arc::new(Mutex::new(Registry::new(REGIONS_MAX))),
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

    /// The registrations. A poisoned lock is taken over: every registry operation leaves
    /// the table consistent before it can panic.
    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One more connection to the same peer (TLS again if this one is), sharing this
    /// one's registrations: the extra connections of a trunked session.
    pub fn sibling(&self, timeout: Duration) -> Result<Self, TransportError> {
        let mut c = match &self.tls_params {
            Some((cfg, name)) => {
                Self::connect_tls_with(&self.peer.to_string(), timeout, cfg.clone(), name.clone())?
            }
            None => Self::from_stream(TcpStream::connect_timeout(&self.peer, timeout)?)?,
        };
        c.registry = Arc::clone(&self.registry);
        c.msg_size_bytes_max = self.msg_size_bytes_max;
        Ok(c)
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
                let resolved = self.registry().resolve(fh.key, fh.offset, len, true);
                match resolved {
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
                let resolved = self.registry().resolve(fh.key, fh.offset, len, false);
                match resolved {
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
        self.registry().insert(ptr, len, access, false)
    }

    fn deregister(&mut self, key: u64) -> Result<(), TransportError> {
        self.registry().remove(key).map(|_| ())
    }

    fn alloc_registered(&mut self, len: usize) -> Result<(u64, *mut u8), TransportError> {
        self.registry().alloc_owned(len, Access::READ_WRITE)
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
    fn wants_write(&self) -> bool {
        !self.out.q.is_empty() || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }
    fn sibling(&self, timeout: Duration) -> Result<Box<dyn ClientTransport>, TransportError> {
        Ok(Box::new(TcpClient::sibling(self, timeout)?))
    }
}
