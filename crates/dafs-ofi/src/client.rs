//! The client endpoint of the libfabric provider.

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::{Duration, Instant};

use dafs_transport::registry::Registry;
use dafs_transport::wait::{spin_budget_from_env, AdaptiveSpin, WaitSteps};
use dafs_transport::{Access, ClientTransport, TransportError, TransportStats, Wait};
use rustix::event::{poll, PollFd, PollFlags};

use crate::boot::{self, HelloReader, RegAnnounce};
use crate::ffi::{Fabric, Mr};
use crate::link::{Link, LinkEvent};
use crate::{short_name, MSG_BYTES_MAX, REGIONS_MAX};

/// Client endpoint of the libfabric provider.
pub struct OfiClient {
    /// Declared before `link`: registrations close before the domain holding them.
    mrs: HashMap<u64, Mr>,
    link: Link,
    sock: TcpStream,
    peer: SocketAddr,
    registry: Registry,
    ready: VecDeque<Vec<u8>>,
    events: VecDeque<LinkEvent>,
    spin: AdaptiveSpin,
    stats: TransportStats,
    /// No completion wait fd: the server rings doorbells on the side channel, and so
    /// do we after posting a message.
    doorbells: bool,
    name: &'static str,
}

impl OfiClient {
    /// Connect to the listener at `addr` ("host:port"); with `want_prov`, refuse a
    /// listener offering another libfabric provider.
    pub fn connect(
        addr: &str,
        want_prov: Option<&str>,
        timeout: Duration,
    ) -> Result<Self, TransportError> {
        let deadline = Instant::now() + timeout;
        let (mut sock, peer) = dial(addr, timeout)?;
        let hello = greet(&mut sock, addr, timeout, deadline)?;
        if let Some(w) = want_prov {
            if w != hello.prov {
                return Err(TransportError::Io(std::io::Error::other(format!(
                    "the server's libfabric listener offers {:?}, not {w:?}",
                    hello.prov
                ))));
            }
        }
        let fab = Fabric::open(&hello.prov)?;
        let doorbells = fab.wait_fd().is_none();
        let mut c = OfiClient {
            mrs: HashMap::new(),
            link: Link::new(fab),
            sock,
            peer,
            registry: Registry::new(REGIONS_MAX),
            ready: VecDeque::new(),
            events: VecDeque::new(),
            spin: AdaptiveSpin::new(spin_budget_from_env()),
            stats: TransportStats::default(),
            doorbells,
            name: short_name(&hello.prov),
        };
        c.link.msg_size_bytes_max = (hello.msg_size_bytes_max as usize).min(MSG_BYTES_MAX);
        c.handshake(&hello.name, deadline)?;
        Ok(c)
    }

    /// Post receives, learn the server's address, tell it ours.
    fn handshake(&mut self, server_name: &[u8], deadline: Instant) -> Result<(), TransportError> {
        self.link.post_receives()?;
        self.link.fab.set_peer(server_name)?;
        let name = self.link.fab.name()?;
        boot::write_all(&mut self.sock, &boot::encode_client_hello(&name), deadline)
    }

    /// The libfabric provider in use, e.g. "tcp;ofi_rxm".
    pub fn fabric_provider(&self) -> &str {
        self.link.fab.prov()
    }

    fn announce(&mut self, handle: u64) -> Result<(), TransportError> {
        let r = self.registry.get(handle).ok_or(TransportError::BadRegion)?;
        let key = self.mrs[&handle].key;
        let a = RegAnnounce {
            handle,
            key,
            addr: r.mem.addr() as u64,
            len: r.mem.len() as u64,
            remote_write: r.access.remote_write,
            remote_read: r.access.remote_read,
        };
        self.link.send(&a.encode(), Some(boot::CTRL_REG))?;
        self.ring()
    }

    fn ring(&mut self) -> Result<(), TransportError> {
        if self.doorbells {
            tracing::trace!(queued = self.link.sends_queued(), "ofi client: ring");
            boot::ring(&mut self.sock, boot::DOORBELL)?;
        }
        Ok(())
    }

    /// Register what the registry holds under `handle` with the fabric and announce it.
    fn fabric_register(&mut self, handle: u64) -> Result<(), TransportError> {
        let r = self.registry.get(handle).ok_or(TransportError::BadRegion)?;
        // SAFETY: the registry entry's memory stays valid until `deregister(handle)`,
        // which drops this registration first (the ClientTransport::register contract).
        let mr = unsafe {
            self.link.fab.register(
                r.mem.as_ptr(),
                r.mem.len(),
                r.access.remote_write,
                r.access.remote_read,
                handle,
            )
        };
        let mr = match mr {
            Ok(m) => m,
            Err(e) => {
                let _ = self.registry.remove(handle);
                tracing::debug!("fi_mr_reg failed: {e}");
                return Err(TransportError::NotRegistrable);
            }
        };
        self.mrs.insert(handle, mr);
        self.announce(handle)
    }
}

/// Speak first (the preamble), then read the server's hello. Whatever else the peer
/// does (closes, answers something else, stays silent) means `addr` is no dafs
/// libfabric listener, most likely the wrong port: say so rather than report a bare
/// "connection closed" or time-out.
fn greet(
    sock: &mut TcpStream,
    addr: &str,
    timeout: Duration,
    deadline: Instant,
) -> Result<boot::ServerHello, TransportError> {
    let not_listener = |what: String| {
        TransportError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{addr} is not a dafs libfabric listener ({what}); is it the right port? \
                 dafsd's libfabric listeners are its `--listen ofi+PROVIDER://HOST:PORT` \
                 addresses"
            ),
        ))
    };
    let hello = boot::write_all(sock, boot::CLIENT_PREAMBLE, deadline)
        .and_then(|_| HelloReader::default().wait(sock, deadline))
        .and_then(|b| boot::decode_server_hello(&b));
    hello.map_err(|e| match e {
        TransportError::Closed => not_listener("it closed the connection without a hello".into()),
        TransportError::Io(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            not_listener(format!("no hello within {timeout:?}"))
        }
        TransportError::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ) =>
        {
            not_listener(format!("it reset the connection: {e}"))
        }
        TransportError::Protocol(p) => not_listener(format!("it answered something else: {p}")),
        e => e,
    })
}

fn dial(addr: &str, timeout: Duration) -> Result<(TcpStream, SocketAddr), TransportError> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_nonblocking(true)?;
                dafs_transport::set_tcp_keepalive(s.as_fd())?;
                return Ok((s, a));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last
        .map(|e| {
            TransportError::Io(std::io::Error::new(
                e.kind(),
                format!("cannot reach the dafs libfabric listener at {addr}: {e}"),
            ))
        })
        .unwrap_or(TransportError::Protocol("address resolved to nothing")))
}

impl WaitSteps for OfiClient {
    fn poll_once(&mut self) -> Result<Option<Vec<u8>>, TransportError> {
        let rung = boot::drain(&mut self.sock)?;
        let queued = self.link.sends_queued();
        self.link.progress(&mut self.events)?;
        // Ring when the server's work may need our progress again (DOORBELL_ANSWER),
        // and when messages the provider refused earlier went out now (`shm` refuses
        // the first sends to a peer until the server's progress has mapped us): without
        // it the server sleeps on until its worker's time-out (0.1-0.5 s per message).
        if rung.answer || self.link.sends_queued() < queued {
            self.ring()?;
        }
        while let Some(e) = self.events.pop_front() {
            match e {
                LinkEvent::Msg { buf, data: None } => {
                    tracing::trace!(len = buf.len(), "ofi client: message");
                    self.stats.msgs_received += 1;
                    self.ready.push_back(buf);
                }
                LinkEvent::Msg { data: Some(_), .. } => {
                    return Err(TransportError::Protocol("control message sent to a client"))
                }
                LinkEvent::Rma { .. } => {
                    return Err(TransportError::Protocol("RMA completion on a client"))
                }
            }
        }
        Ok(self.ready.pop_front())
    }

    fn prepare_sleep(&mut self) -> bool {
        self.ready.is_empty() && self.link.fab.may_sleep()
    }

    fn sleep(&mut self, deadline: Option<Instant>) -> Result<(), TransportError> {
        let timeout_ms: i32 = match deadline {
            None => -1,
            Some(d) => {
                let now = Instant::now();
                if d <= now {
                    return Ok(());
                }
                (d - now).as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
            }
        };
        let want_out = self.link.sends_queued() > 0;
        // While sends wait for the provider, wake again soon to retry them.
        let timeout_ms = if want_out { timeout_ms.clamp(0, 1) } else { timeout_ms };
        let mut fds = vec![PollFd::new(&self.sock, PollFlags::IN)];
        // SAFETY: the wait fd belongs to the fabric stack, alive for this call.
        let cq_fd =
            self.link.fab.wait_fd().map(|fd| unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) });
        if let Some(fd) = &cq_fd {
            fds.push(PollFd::from_borrowed_fd(*fd, PollFlags::IN));
        }
        match poll(&mut fds, timeout_ms) {
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(std::io::Error::from(e).into()),
        }
    }

    fn spin_and_stats(&mut self) -> (&mut AdaptiveSpin, &mut TransportStats) {
        (&mut self.spin, &mut self.stats)
    }
}

impl ClientTransport for OfiClient {
    fn msg_size_bytes_max(&self) -> usize {
        self.link.msg_size_bytes_max
    }
    fn set_msg_size_bytes_max(&mut self, n: usize) {
        self.link.msg_size_bytes_max = n.min(MSG_BYTES_MAX);
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        self.link.send(msg, None)?;
        self.stats.msgs_sent += 1;
        self.ring()
    }

    fn recv(&mut self, wait: Wait) -> Result<Option<Vec<u8>>, TransportError> {
        dafs_transport::wait::wait_for_message(self, wait)
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        self.link.recycle(buf);
    }

    fn set_spin(&mut self, spin: Duration) {
        self.spin.set_max(spin);
    }

    unsafe fn register(
        &mut self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<u64, TransportError> {
        let handle = self.registry.insert(ptr, len, access, false)?;
        self.fabric_register(handle)?;
        Ok(handle)
    }

    fn deregister(&mut self, key: u64) -> Result<(), TransportError> {
        // Withdraw first (ordered before any later request), then revoke the key at the
        // provider, then free owned memory: no window where a key names freed memory.
        self.registry.get(key).ok_or(TransportError::BadRegion)?;
        let sent =
            self.link.send(&key.to_le_bytes(), Some(boot::CTRL_DEREG)).and_then(|_| self.ring());
        drop(self.mrs.remove(&key));
        self.registry.remove(key)?;
        sent
    }

    fn alloc_registered(&mut self, len: usize) -> Result<(u64, *mut u8), TransportError> {
        let (handle, ptr) = self.registry.alloc_owned(len, Access::READ_WRITE)?;
        self.fabric_register(handle)?;
        Ok((handle, ptr))
    }

    fn reconnect(&mut self, timeout: Duration) -> Result<(), TransportError> {
        let deadline = Instant::now() + timeout;
        let sock = TcpStream::connect_timeout(&self.peer, timeout)?;
        sock.set_nodelay(true)?;
        sock.set_nonblocking(true)?;
        dafs_transport::set_tcp_keepalive(sock.as_fd())?;
        self.sock = sock;
        let hello = greet(&mut self.sock, &self.peer.to_string(), timeout, deadline)?;
        if hello.prov != self.link.fab.prov() {
            return Err(TransportError::Protocol("the server's libfabric provider changed"));
        }
        // Whatever was in flight on the old endpoint is abandoned; the session layer
        // retransmits its requests.
        self.link.reopen()?;
        self.ready.clear();
        self.events.clear();
        self.handshake(&hello.name, deadline)?;
        // Same keys as before: the server's new connection learns every live region.
        let mut handles: Vec<u64> = self.mrs.keys().copied().collect();
        handles.sort_unstable();
        for h in handles {
            self.announce(h)?;
        }
        Ok(())
    }

    fn cut(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }

    fn provider(&self) -> &'static str {
        self.name
    }
    fn stats(&self) -> TransportStats {
        self.stats
    }
    fn raw_fd(&self) -> RawFd {
        self.link.fab.wait_fd().unwrap_or(self.sock.as_raw_fd())
    }
    fn cut_fd(&self) -> RawFd {
        // The side channel: its end is how both sides learn the session's connection
        // is gone (the wait fd is no socket).
        self.sock.as_raw_fd()
    }
}
