//! The server end of the libfabric provider: a listener (the side channel's TCP
//! socket; one fabric stack per accepted connection) and the connection.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{TcpListener as StdListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use dafs_transport::{
    PlacementDst, PutError, RemoteRegion, ServerConn, ServerEvent, ServerListener, TransportError,
};
use rustix::event::epoll;

use crate::boot::{self, HelloReader, RegAnnounce};
use crate::ffi::{Fabric, Posted};
use crate::link::{Link, LinkEvent, CTX_KIND, CTX_READ, CTX_WRITE};
use crate::{MSG_BYTES_MAX, REGIONS_MAX};

/// How long accept waits for room to write its hello (a few hundred bytes into a fresh
/// socket: immediate unless the peer is hostile, and then it is dropped).
const HELLO_WRITE_TIMEOUT: Duration = Duration::from_millis(100);
/// Staging buffers kept for reuse per connection (placements of up to the direct
/// maximum; larger ones are freed after use).
const STAGING_POOL_MAX: usize = 4;
const STAGING_KEEP_BYTES_MAX: usize = 8 << 20;

/// Accepts libfabric sessions on `ofi+NAME://HOST:PORT`.
pub struct OfiListener {
    sock: StdListener,
    prov: String,
    url_name: String,
    local: String,
}

impl OfiListener {
    /// Bind `ofi+NAME://HOST:PORT`. Fails at once (not at the first client) if the
    /// provider is not usable on this machine.
    pub fn bind(url: &str) -> std::io::Result<OfiListener> {
        let bad = || {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("bad libfabric listen URL {url:?} (want ofi+PROVIDER://HOST:PORT)"),
            )
        };
        let (prov, addr) = crate::parse_listen_url(url).ok_or_else(bad)?;
        let url_name = url
            .strip_prefix("ofi+")
            .and_then(|r| r.split_once("://"))
            .ok_or_else(bad)?
            .0
            .to_string();
        drop(Fabric::open(&prov).map_err(std::io::Error::other)?);
        let sock = StdListener::bind(&addr)?;
        sock.set_nonblocking(true)?;
        let local = sock.local_addr()?.to_string();
        Ok(OfiListener { sock, prov, url_name, local })
    }

    /// The URL clients reach this listener with, after port 0 was resolved.
    pub fn url(&self) -> String {
        format!("ofi+{}://{}", self.url_name, self.local)
    }

    /// The libfabric provider string, e.g. "tcp;ofi_rxm".
    pub fn provider(&self) -> &str {
        &self.prov
    }

    fn accept_one(&mut self, sock: TcpStream) -> Result<OfiServerConn, TransportError> {
        sock.set_nodelay(true)?;
        sock.set_nonblocking(true)?;
        dafs_transport::set_tcp_keepalive(sock.as_fd())?;
        let peer = format!("ofi:{}", sock.peer_addr()?);
        let mut link = Link::new(Fabric::open(&self.prov)?);
        link.post_receives()?;
        let hello = boot::ServerHello {
            prov: self.prov.clone(),
            msg_size_bytes_max: MSG_BYTES_MAX as u32,
            name: link.fab.name()?,
        };
        let mut sock = sock;
        boot::write_all(
            &mut sock,
            &boot::encode_server_hello(&hello),
            Instant::now() + HELLO_WRITE_TIMEOUT,
        )?;
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(std::io::Error::from)?;
        epoll::add(&ep, &sock, epoll::EventData::new_u64(0), epoll::EventFlags::IN)
            .map_err(std::io::Error::from)?;
        if let Some(fd) = link.fab.wait_fd() {
            // SAFETY: the wait fd lives as long as the fabric stack, which the
            // connection owns together with (and drops after) this epoll set.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            epoll::add(&ep, fd, epoll::EventData::new_u64(1), epoll::EventFlags::IN)
                .map_err(std::io::Error::from)?;
        }
        let doorbells = link.fab.wait_fd().is_none();
        let virt = link.fab.virt_addr();
        let saw = link.fab.sends_after_writes();
        Ok(OfiServerConn {
            epfd: ep,
            link,
            sock,
            peer,
            hello: Some(HelloReader::after_preamble()),
            regions: HashMap::new(),
            virt,
            doorbells,
            token_out: false,
            events: VecDeque::new(),
            link_events: VecDeque::new(),
            writes: HashMap::new(),
            reads: HashMap::new(),
            unposted: VecDeque::new(),
            pending_writes: BTreeSet::new(),
            saw,
            next_seq: 1,
            held: VecDeque::new(),
            held_bytes: 0,
            rma_bytes: 0,
            staging: Vec::new(),
        })
    }
}

impl ServerListener for OfiListener {
    type Conn = OfiServerConn;
    fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
    fn accept(&mut self) -> Result<Option<OfiServerConn>, TransportError> {
        match self.sock.accept() {
            Ok((s, _)) => self.accept_one(s).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
    fn local_addr(&self) -> String {
        self.local.clone()
    }
}

/// A region the client announced.
#[derive(Debug, Clone, Copy)]
struct Region {
    key: u64,
    addr: u64,
    len: u64,
    remote_write: bool,
    remote_read: bool,
}

/// An RMA the provider could not take yet.
enum Rma {
    Write { seq: u64, buf: Vec<u8>, raddr: u64, key: u64 },
    Read { seq: u64, tag: u64, buf: Vec<u8>, raddr: u64, key: u64 },
}

/// Server end of one libfabric session.
pub struct OfiServerConn {
    /// Declared before `link`: the set refers to the fabric's wait fd.
    epfd: OwnedFd,
    link: Link,
    sock: TcpStream,
    peer: String,
    /// Waiting for the client's hello (its fabric address).
    hello: Option<HelloReader>,
    regions: HashMap<u64, Region>,
    virt: bool,
    doorbells: bool,
    /// A DOORBELL_ANSWER was rung and the client has not rung since.
    token_out: bool,
    events: VecDeque<ServerEvent>,
    link_events: VecDeque<LinkEvent>,
    /// Posted RMA writes / reads by sequence number, with their buffers.
    writes: HashMap<u64, Vec<u8>>,
    reads: HashMap<u64, (u64, Vec<u8>)>,
    unposted: VecDeque<Rma>,
    /// Writes a later message must wait for: those not yet complete, or, where the
    /// provider orders sends after writes (`saw`), those not yet posted.
    pending_writes: BTreeSet<u64>,
    /// The provider delivers a send only after the writes posted before it.
    saw: bool,
    next_seq: u64,
    /// Messages waiting for earlier writes: (message, first write sequence after it).
    held: VecDeque<(Vec<u8>, u64)>,
    held_bytes: usize,
    rma_bytes: usize,
    staging: Vec<Vec<u8>>,
}

impl OfiServerConn {
    /// Resolve `{handle, offset, len}` against the announced region, before any RMA:
    /// (remote address, key).
    fn resolve(
        &self,
        r: RemoteRegion,
        len: usize,
        write: bool,
    ) -> Result<(u64, u64), TransportError> {
        let reg = self.regions.get(&r.key).ok_or(TransportError::BadRegion)?;
        if !(if write { reg.remote_write } else { reg.remote_read }) {
            return Err(TransportError::BadRegion);
        }
        let end = r.offset.checked_add(len as u64).ok_or(TransportError::BadRegion)?;
        if end > reg.len {
            return Err(TransportError::BadRegion);
        }
        let base = if self.virt { reg.addr } else { 0 };
        Ok((base.checked_add(r.offset).ok_or(TransportError::BadRegion)?, reg.key))
    }

    fn on_control(&mut self, data: u64, buf: &[u8]) -> Result<(), TransportError> {
        match data {
            boot::CTRL_REG => {
                let a = RegAnnounce::decode(buf)?;
                if a.len == 0 || a.addr.checked_add(a.len).is_none() {
                    return Err(TransportError::Protocol("announced region is empty or wraps"));
                }
                if !self.regions.contains_key(&a.handle) && self.regions.len() >= REGIONS_MAX {
                    return Err(TransportError::Protocol("too many announced regions"));
                }
                let r = Region {
                    key: a.key,
                    addr: a.addr,
                    len: a.len,
                    remote_write: a.remote_write,
                    remote_read: a.remote_read,
                };
                self.regions.insert(a.handle, r);
            }
            boot::CTRL_DEREG => {
                let h = u64::from_le_bytes(
                    buf.try_into().map_err(|_| TransportError::Protocol("malformed withdrawal"))?,
                );
                self.regions.remove(&h);
            }
            _ => return Err(TransportError::Protocol("unknown control message")),
        }
        Ok(())
    }

    /// Progress the fabric and turn what finished into server events.
    fn progress(&mut self) -> Result<(), TransportError> {
        if let Some(h) = self.hello.as_mut() {
            let Some(body) = h.poll(&mut self.sock)? else {
                return Ok(());
            };
            let name = boot::decode_client_hello(&body)?;
            self.link.fab.set_peer(&name)?;
            self.hello = None;
        }
        let rung = boot::drain(&mut self.sock)?;
        if rung.any {
            tracing::trace!("ofi server: doorbell");
            // The client progressed since our last doorbell (it answers each
            // DOORBELL_ANSWER after its progress, and rings after posting).
            self.token_out = false;
        }
        let queued = self.link.sends_queued();
        self.link.progress(&mut self.link_events)?;
        // Sends the provider refused earlier went out: wake the client for them.
        let mut rang = self.link.sends_queued() < queued;
        while let Some(e) = self.link_events.pop_front() {
            match e {
                LinkEvent::Msg { buf, data: Some(d) } => {
                    let r = self.on_control(d, &buf);
                    self.link.recycle(buf);
                    r?;
                }
                LinkEvent::Msg { buf, data: None } => {
                    tracing::trace!(len = buf.len(), "ofi server: message");
                    self.events.push_back(ServerEvent::Message(buf))
                }
                LinkEvent::Rma { ctx, err } => {
                    let seq = ctx & !CTX_KIND;
                    tracing::trace!(
                        seq,
                        err,
                        write = ctx & CTX_KIND == CTX_WRITE,
                        "ofi server: RMA done"
                    );
                    if ctx & CTX_KIND == CTX_WRITE {
                        let buf = self
                            .writes
                            .remove(&seq)
                            .ok_or(TransportError::Protocol("unknown write completion"))?;
                        self.pending_writes.remove(&seq);
                        self.rma_bytes -= buf.len();
                        self.put_staging(buf);
                        if err != 0 {
                            // The client's provider refused the key or range: with the
                            // bounds checked here first, only a withdrawn key gets here.
                            return Err(TransportError::Protocol("client refused an RMA write"));
                        }
                    } else {
                        debug_assert_eq!(ctx & CTX_KIND, CTX_READ);
                        let (tag, buf) = self
                            .reads
                            .remove(&seq)
                            .ok_or(TransportError::Protocol("unknown read completion"))?;
                        self.rma_bytes -= buf.len();
                        let data = if err == 0 { Ok(buf) } else { Err(TransportError::BadRegion) };
                        self.events.push_back(ServerEvent::Pulled { tag, data });
                    }
                }
            }
        }
        rang |= self.post_rma()?;
        rang |= self.release_held()?;
        // Work may need the client's progress again (see DOORBELL_ANSWER): pass
        // it the token whenever it has handed it back.
        if rang || (self.doorbells && !self.token_out && self.needs_client()) {
            self.ring()?;
        }
        Ok(())
    }

    /// Wake a client without a completion wait fd; while work needs its progress (RMAs
    /// posted, sends refused), ask it to ring back once it has progressed. At most one such request is outstanding.
    fn ring(&mut self) -> Result<(), TransportError> {
        if self.doorbells {
            let bell = if self.needs_client() {
                self.token_out = true;
                boot::DOORBELL_ANSWER
            } else {
                boot::DOORBELL
            };
            tracing::trace!(bell, "ofi server: ring");
            boot::ring(&mut self.sock, bell)?;
        }
        Ok(())
    }

    /// Work that completes only through the client's progress: RMAs posted and not
    /// complete, RMAs and sends the provider refused until the client drains its
    /// queues, and messages held behind writes.
    fn needs_client(&self) -> bool {
        self.rma_in_flight() || self.link.sends_queued() > 0 || !self.held.is_empty()
    }

    /// Send held messages whose earlier writes have completed. True if any went out.
    fn release_held(&mut self) -> Result<bool, TransportError> {
        let mut sent = false;
        while let Some((_, barrier)) = self.held.front() {
            if self.pending_writes.range(..*barrier).next().is_some() || self.hello.is_some() {
                break;
            }
            let (m, _) = self.held.pop_front().unwrap();
            self.held_bytes -= m.len();
            self.link.send(&m, None)?;
            self.link.recycle(m);
            sent = true;
        }
        Ok(sent)
    }

    /// Post RMAs the provider refused earlier. True if any was posted.
    fn post_rma(&mut self) -> Result<bool, TransportError> {
        let mut posted = false;
        while let Some(op) = self.unposted.pop_front() {
            let r = match &op {
                // SAFETY: on success the buffer moves into `writes` / `reads`, untouched
                // (heap block not moved) until its completion or the endpoint's close.
                Rma::Write { seq, buf, raddr, key } => unsafe {
                    self.link.fab.write(buf, *raddr, *key, CTX_WRITE | seq)
                },
                Rma::Read { seq, buf, raddr, key, .. } => {
                    let p = buf.as_ptr() as *mut u8;
                    // SAFETY: as above; `buf` is exclusively ours (moved into `reads` next).
                    let s = unsafe { std::slice::from_raw_parts_mut(p, buf.len()) };
                    // SAFETY: as above.
                    unsafe { self.link.fab.read(s, *raddr, *key, CTX_READ | seq) }
                }
            }?;
            tracing::trace!(again = r == Posted::Again, "ofi server: post RMA");
            if r == Posted::Again {
                self.unposted.push_front(op);
                break;
            }
            posted = true;
            match op {
                Rma::Write { seq, buf, .. } => {
                    if self.saw {
                        // Posted: a later reply is delivered after it by the provider.
                        self.pending_writes.remove(&seq);
                    }
                    self.writes.insert(seq, buf);
                }
                Rma::Read { seq, tag, buf, .. } => {
                    self.reads.insert(seq, (tag, buf));
                }
            }
        }
        Ok(posted)
    }

    /// A staging buffer of `len` bytes, whatever they hold: the caller overwrites them
    /// (the fill, or the RMA read). Zeroing a whole placement first (1 MiB per 1 MiB
    /// read) cost as much as the transfer; only a buffer's growth is zeroed now, and
    /// the pooled buffer already long enough is preferred.
    fn take_staging(&mut self, len: usize) -> Vec<u8> {
        let at = self.staging.iter().position(|b| b.len() >= len);
        let mut b = match at {
            Some(i) => self.staging.swap_remove(i),
            None => self.staging.pop().unwrap_or_default(),
        };
        if b.len() >= len {
            b.truncate(len);
        } else {
            b.resize(len, 0);
        }
        b
    }

    fn put_staging(&mut self, b: Vec<u8>) {
        if self.staging.len() < STAGING_POOL_MAX && b.capacity() <= STAGING_KEEP_BYTES_MAX {
            self.staging.push(b);
        }
    }

    fn rma_in_flight(&self) -> bool {
        !self.writes.is_empty() || !self.reads.is_empty() || !self.unposted.is_empty()
    }
}

impl ServerConn for OfiServerConn {
    fn raw_fd(&self) -> RawFd {
        self.epfd.as_raw_fd()
    }
    fn peer(&self) -> String {
        self.peer.clone()
    }
    fn msg_size_bytes_max(&self) -> usize {
        self.link.msg_size_bytes_max
    }
    fn set_msg_size_bytes_max(&mut self, n: usize) {
        self.link.msg_size_bytes_max = n.min(MSG_BYTES_MAX);
    }

    fn poll_event(&mut self) -> Result<Option<ServerEvent>, TransportError> {
        if self.events.is_empty() {
            self.progress()?;
        }
        Ok(self.events.pop_front())
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if buf.capacity() > MSG_BYTES_MAX {
            self.put_staging(buf);
        } else {
            self.link.recycle(buf);
        }
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        if msg.len() > self.link.msg_size_bytes_max {
            return Err(TransportError::TooBig {
                len: msg.len(),
                max: self.link.msg_size_bytes_max,
            });
        }
        // Ordered after every placement queued before it: held until those complete.
        if self.held.is_empty() && self.pending_writes.is_empty() && self.hello.is_none() {
            self.link.send(msg, None)?;
            return self.ring();
        }
        self.held.push_back((msg.to_vec(), self.next_seq));
        self.held_bytes += msg.len();
        Ok(())
    }

    fn put(
        &mut self,
        region: RemoteRegion,
        len: usize,
        fill: &mut dyn FnMut(&mut PlacementDst<'_>) -> std::io::Result<usize>,
    ) -> Result<usize, PutError> {
        let (raddr, key) = self.resolve(region, len, true)?;
        let mut buf = self.take_staging(len);
        let n = match fill(&mut PlacementDst::from_slice(&mut buf)) {
            Ok(n) => n.min(len),
            Err(e) => {
                self.put_staging(buf);
                return Err(PutError::Fill(e));
            }
        };
        if n == 0 {
            self.put_staging(buf);
            return Ok(0);
        }
        buf.truncate(n);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending_writes.insert(seq);
        self.rma_bytes += n;
        self.unposted.push_back(Rma::Write { seq, buf, raddr, key });
        if self.post_rma()? {
            self.ring()?;
        }
        Ok(n)
    }

    fn pull(&mut self, region: RemoteRegion, len: usize, tag: u64) -> Result<(), TransportError> {
        let (raddr, key) = match self.resolve(region, len, false) {
            Ok(v) => v,
            Err(e) => {
                // Refused here, before any RMA: the request fails, the session lives.
                self.events.push_back(ServerEvent::Pulled { tag, data: Err(e) });
                return Ok(());
            }
        };
        if len == 0 {
            self.events.push_back(ServerEvent::Pulled { tag, data: Ok(Vec::new()) });
            return Ok(());
        }
        let buf = self.take_staging(len);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.rma_bytes += len;
        self.unposted.push_back(Rma::Read { seq, tag, buf, raddr, key });
        if self.post_rma()? {
            self.ring()?;
        }
        Ok(())
    }

    fn input_pending(&self) -> bool {
        // Without a wait fd nothing signals RMA completions: poll while any is due.
        !self.events.is_empty()
            || (self.doorbells
                && (self.rma_in_flight() || !self.held.is_empty() || self.link.sends_queued() > 0))
    }

    fn arm_sleep(&mut self) -> bool {
        if self.progress().is_err() {
            return false; // let the event loop find the error
        }
        if !self.events.is_empty() || self.link.sends_queued() > 0 {
            return false;
        }
        if self.doorbells {
            return !self.rma_in_flight() && self.held.is_empty();
        }
        self.link.fab.may_sleep()
    }

    fn flush(&mut self) -> Result<bool, TransportError> {
        self.progress()?;
        Ok(self.held.is_empty() && self.link.sends_queued() == 0 && self.unposted.is_empty())
    }

    fn backlog_bytes(&self) -> usize {
        self.held_bytes + self.rma_bytes
    }
}
