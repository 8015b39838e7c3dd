//! The server side of the TCP provider: the listener and its connections.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use dafs_proto::limits;

use crate::frame::{FrameHeader, FrameKind, GET_RESP_OK};
use crate::placement::PlacementDst;
use crate::tls::{classify, Io, TlsLink};
use crate::{
    CountPatch, PutError, RemoteRegion, ServerConn, ServerEvent, ServerListener, TransportError,
};

use super::{
    is_disconnect, read_some, take_buf, HeaderReader, Out, OutQueue, POOL_MAX, RECV_CHUNK,
};

/// READ_DIRECT placements at least this large go out with `sendfile` (no copy through
/// user space); smaller ones are read into a pooled buffer, which then leaves in the same
/// writev as its frame header and reply — two system calls (fstat, sendfile) and a
/// separate send would cost more than copying a few pages.
pub const SENDFILE_BYTES_MIN: usize = 16 * 1024;

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
    fn more_input(&self) -> bool {
        // Bytes in the socket's receive queue: the next request (or pulled data). With
        // TLS, records the library already took are not seen: a hint only.
        rustix::io::ioctl_fionread(&self.sock).is_ok_and(|n| n > 0)
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

    fn sends_files(&self, len: usize) -> bool {
        // TLS must encrypt the bytes in user space anyway: the copy stays.
        self.tls.is_none() && len >= SENDFILE_BYTES_MIN
    }

    fn put_file(
        &mut self,
        region: RemoteRegion,
        len: usize,
        file: &Arc<OwnedFd>,
        offset: u64,
    ) -> Result<usize, PutError> {
        if !self.sends_files(len) {
            return self.put(region, len, &mut |dst| dst.pread_from(file.as_fd(), offset));
        }
        if len > limits::DIRECT_BYTES_MAX as usize {
            return Err(
                TransportError::TooBig { len, max: limits::DIRECT_BYTES_MAX as usize }.into()
            );
        }
        // The count is what the file holds now; the header carrying it goes first.
        let size = rustix::fs::fstat(file).map_err(|e| PutError::Fill(e.into()))?.st_size;
        let n = u64::try_from(size).unwrap_or(0).saturating_sub(offset).min(len as u64) as usize;
        let h = FrameHeader {
            kind: FrameKind::Put,
            len: n as u32,
            key: region.key,
            offset: region.offset,
            tag: 0,
        };
        self.out.push(Out::Header { bytes: h.encode(), pos: 0 });
        self.out.push(Out::File { file: file.clone(), offset, len: n, pos: 0, reply: None });
        Ok(n)
    }

    fn send_file_reply(&mut self, msg: &[u8], patch: CountPatch) -> Result<(), TransportError> {
        self.out.patch_last_file(patch);
        self.send(msg)
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
        let sock = self.tls.is_none().then(|| self.sock.as_fd());
        let done =
            self.out.flush_files(&mut Io::new(&self.sock, &mut self.tls), sock, &mut self.pool)?;
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

    fn polled(&self) -> bool {
        self.tls.is_some() // plain TCP: input shows as readiness of the socket
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
