//! Same-host shared-memory provider: true direct placement.
//!
//! - Connection set-up over a unix stream socket (`dafs+shm:///path/to/socket`); the
//!   client creates a sealed memfd holding two message rings (client-to-server and
//!   server-to-client) and passes it with SCM_RIGHTS.
//! - Registered memory the client allocates with `alloc_registered` is a sealed memfd
//!   passed to the server, which maps it: READ_DIRECT is one copy in total (the server
//!   preads straight into the client's buffer), WRITE_DIRECT pwrites straight from it.
//!   Memory the application allocated itself is registered by address and reached with
//!   process_vm_readv/writev (counted in `TransportStats::vm_registrations`).
//! - Waiting: a bounded spin on the ring, then sleep in poll(2) on the socket after
//!   setting a "sleeping" flag in the ring header; the producer writes a doorbell
//!   record to the socket only when that flag is set (no syscall while both spin).
//! - The socket also carries death: a closed socket is a dead peer, at once.
//!
//! Control records on the socket are 32 bytes: `kind u32, aux u32, a u64, b u64, c u64`.

pub mod mem;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use dafs_proto::limits;

use crate::mem_ptr::MemPtr;
use crate::placement::{PlacementDst, PlacementSrc};
use crate::wait::{sleep_on_fd, spin_budget_from_env};
use crate::{
    Access, ClientTransport, PutError, RemoteRegion, ServerConn, ServerEvent, ServerListener,
    TransportError, TransportStats, Wait,
};
use mem::{Mapping, Pop, Ring};

/// Bytes per ring direction. Holds many maximum-size messages; a full ring only
/// delays the producer, never loses a message.
pub const RING_CAP: usize = 16 * 1024 * 1024;
/// Most regions one client may register with one server connection.
pub const REGIONS_MAX: usize = 4096;
/// Message buffers kept for reuse per endpoint (no allocation in steady state).
const POOL_MAX: usize = 16;
/// How long a client waits for the server to acknowledge a registration or
/// deregistration (a live server answers at once; this only bounds a stuck one).
const REGISTER_ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes of one control record.
const REC: usize = 32;
const K_DOORBELL: u32 = 1;
const K_HELLO: u32 = 2;
const K_HELLO_ACK: u32 = 3;
const K_REG_FD: u32 = 4;
const K_REG_VM: u32 = 5;
const K_DEREG: u32 = 6;
const K_REG_ACK: u32 = 7;

/// HELLO_ACK `a`: the server took the rings / refused the ring geometry.
const HELLO_OK: u64 = 0;
const HELLO_REFUSED: u64 = 1;
/// REG_ACK `b`: registered (or deregistered) / refused / the server's region limit.
const REG_OK: u64 = 0;
const REG_REFUSED: u64 = 1;
const REG_LIMIT: u64 = 2;

/// Access bits of a registration record's `aux`.
const ACCESS_REMOTE_WRITE: u32 = 1;
const ACCESS_REMOTE_READ: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ctl {
    kind: u32,
    aux: u32,
    a: u64,
    b: u64,
    c: u64,
}

impl Ctl {
    fn new(kind: u32, aux: u32, a: u64, b: u64, c: u64) -> Self {
        Ctl { kind, aux, a, b, c }
    }
    fn encode(&self) -> [u8; REC] {
        let mut r = [0u8; REC];
        r[0..4].copy_from_slice(&self.kind.to_le_bytes());
        r[4..8].copy_from_slice(&self.aux.to_le_bytes());
        r[8..16].copy_from_slice(&self.a.to_le_bytes());
        r[16..24].copy_from_slice(&self.b.to_le_bytes());
        r[24..32].copy_from_slice(&self.c.to_le_bytes());
        r
    }
    fn decode(r: &[u8; REC]) -> Self {
        let u64_at = |o: usize| u64::from_le_bytes(r[o..o + 8].try_into().unwrap());
        Ctl {
            kind: u32::from_le_bytes(r[0..4].try_into().unwrap()),
            aux: u32::from_le_bytes(r[4..8].try_into().unwrap()),
            a: u64_at(8),
            b: u64_at(16),
            c: u64_at(24),
        }
    }
}

fn access_bits(a: Access) -> u32 {
    let bit = |on: bool, b: u32| if on { b } else { 0 };
    bit(a.remote_write, ACCESS_REMOTE_WRITE) | bit(a.remote_read, ACCESS_REMOTE_READ)
}
fn access_from(b: u32) -> Access {
    Access { remote_write: b & ACCESS_REMOTE_WRITE != 0, remote_read: b & ACCESS_REMOTE_READ != 0 }
}

/// Reads 32-byte records (and any descriptors) from a non-blocking unix socket.
struct CtlReader {
    buf: [u8; REC],
    got: usize,
    fds: Vec<OwnedFd>,
}

impl CtlReader {
    fn new() -> Self {
        CtlReader { buf: [0; REC], got: 0, fds: Vec::new() }
    }
    /// Next complete record, Ok(None) if none is complete yet, Err(Closed) at EOF.
    fn next(&mut self, sock: &UnixStream) -> Result<Option<Ctl>, TransportError> {
        loop {
            match mem::recv_with_fds(sock.as_fd(), &mut self.buf[self.got..], &mut self.fds) {
                Ok(0) => return Err(TransportError::Closed),
                Ok(n) => {
                    self.got += n;
                    if self.got == REC {
                        self.got = 0;
                        return Ok(Some(Ctl::decode(&self.buf)));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                    ) =>
                {
                    return Err(TransportError::Closed)
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    fn take_fd(&mut self) -> Option<OwnedFd> {
        if self.fds.is_empty() {
            None
        } else {
            Some(self.fds.remove(0))
        }
    }
}

fn send_ctl(
    sock: &UnixStream,
    c: Ctl,
    fd: Option<std::os::fd::BorrowedFd>,
) -> Result<(), TransportError> {
    let fds: Vec<_> = fd.into_iter().collect();
    mem::send_with_fds(sock.as_fd(), &c.encode(), &fds).map_err(|e| match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => TransportError::Closed,
        _ => TransportError::Io(e),
    })
}

// ---------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------

enum ClientRegion {
    /// A sealed memfd we allocated and mapped; the server maps it too.
    Memfd { _map: Mapping, fd: OwnedFd, len: usize },
    /// Application memory, reached by the server with process_vm_*.
    Vm { mem: MemPtr, access: Access },
}

/// Client endpoint of the shared-memory provider.
pub struct ShmClient {
    /// The server's socket, for reconnecting.
    path: std::path::PathBuf,
    sock: UnixStream,
    // Field order matters: rings point into `area` and must drop first.
    c2s: Ring,
    s2c: Ring,
    _area: Mapping,
    _area_fd: OwnedFd,
    ctl: CtlReader,
    msg_size_bytes_max: usize,
    regions: HashMap<u64, ClientRegion>,
    next_key: u64,
    overflow: VecDeque<Vec<u8>>,
    pool: Vec<Vec<u8>>,
    spin: crate::wait::AdaptiveSpin,
    stats: TransportStats,
}

impl ShmClient {
    /// Connect to the server's unix socket and set up the rings.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Self, TransportError> {
        let sock = UnixStream::connect(path)?;
        sock.set_nonblocking(true)?;
        let area_len = mem::ring_area_len(RING_CAP);
        let area_fd = mem::sealed_memfd("dafs-rings", area_len)?;
        let area = Mapping::map(area_fd.as_fd(), area_len)?;
        let max = limits::MSG_SIZE_BYTES_MAX as usize;
        // SAFETY: `area` has ring_area_len(RING_CAP) bytes and is stored beside the rings.
        let (c2s, s2c) =
            unsafe { (Ring::new(&area, 0, RING_CAP, max), Ring::new(&area, 1, RING_CAP, max)) };
        send_ctl(
            &sock,
            Ctl::new(K_HELLO, 0, RING_CAP as u64, area_len as u64, 0),
            Some(area_fd.as_fd()),
        )?;
        let mut me = ShmClient {
            path: path.to_path_buf(),
            sock,
            c2s,
            s2c,
            _area: area,
            _area_fd: area_fd,
            ctl: CtlReader::new(),
            msg_size_bytes_max: max,
            regions: HashMap::new(),
            next_key: 1,
            overflow: VecDeque::new(),
            pool: Vec::new(),
            spin: crate::wait::AdaptiveSpin::new(spin_budget_from_env()),
            stats: TransportStats::default(),
        };
        let ack = me.wait_ctl(K_HELLO_ACK, Instant::now() + timeout)?;
        if ack.a != HELLO_OK {
            return Err(TransportError::Protocol("server refused the shared-memory connection"));
        }
        Ok(me)
    }

    /// Wait (bounded) for a control record of `kind`, skipping doorbells.
    fn wait_ctl(&mut self, kind: u32, deadline: Instant) -> Result<Ctl, TransportError> {
        loop {
            while let Some(c) = self.ctl.next(&self.sock)? {
                if c.kind == kind {
                    return Ok(c);
                }
                if c.kind != K_DOORBELL {
                    return Err(TransportError::Protocol("unexpected control record from server"));
                }
            }
            if Instant::now() >= deadline {
                return Err(TransportError::Io(io::Error::from(io::ErrorKind::TimedOut)));
            }
            sleep_on_fd(self.sock.as_fd(), false, Some(deadline))?;
        }
    }

    fn register_ack(&mut self, key: u64) -> Result<(), TransportError> {
        let ack = self.wait_ctl(K_REG_ACK, Instant::now() + REGISTER_ACK_TIMEOUT)?;
        if ack.a != key {
            return Err(TransportError::Protocol("registration ack for another key"));
        }
        match ack.b {
            REG_OK => Ok(()),
            REG_LIMIT => Err(TransportError::RegistrationLimit),
            _ => Err(TransportError::NotRegistrable),
        }
    }

    fn flush_overflow(&mut self) -> Result<(), TransportError> {
        while let Some(m) = self.overflow.front() {
            if !self.c2s.push(m).map_err(TransportError::Protocol)? {
                return Ok(());
            }
            let m = self.overflow.pop_front().unwrap();
            self.recycle(m);
            self.ring_doorbell()?;
        }
        Ok(())
    }

    fn ring_doorbell(&mut self) -> Result<(), TransportError> {
        if self.c2s.needs_wakeup() {
            send_ctl(&self.sock, Ctl::new(K_DOORBELL, 0, 0, 0, 0), None)?;
        }
        Ok(())
    }

    fn try_pop(&mut self) -> Result<Option<Vec<u8>>, TransportError> {
        let mut buf = self.pool.pop().unwrap_or_default();
        match self.s2c.pop_into(&mut buf).map_err(TransportError::Protocol)? {
            Pop::Message => {
                self.stats.msgs_received += 1;
                if buf.len() > self.msg_size_bytes_max {
                    return Err(TransportError::TooBig {
                        len: buf.len(),
                        max: self.msg_size_bytes_max,
                    });
                }
                Ok(Some(buf))
            }
            Pop::Empty => {
                self.pool.push(buf);
                Ok(None)
            }
        }
    }
}

impl crate::wait::WaitSteps for ShmClient {
    fn poll_once(&mut self) -> Result<Option<Vec<u8>>, TransportError> {
        self.flush_overflow()?;
        self.try_pop()
    }
    /// A dead server must be noticed even while spinning: the socket carries only
    /// doorbells and EOF here.
    fn spin_check(&mut self) -> Result<(), TransportError> {
        while self.ctl.next(&self.sock)?.is_some() {}
        Ok(())
    }
    fn prepare_sleep(&mut self) -> bool {
        self.s2c.arm_sleep()
    }
    fn sleep(&mut self, deadline: Option<Instant>) -> Result<(), TransportError> {
        let r = sleep_on_fd(self.sock.as_fd(), false, deadline);
        self.s2c.disarm_sleep();
        r?;
        while let Some(c) = self.ctl.next(&self.sock)? {
            if c.kind != K_DOORBELL {
                return Err(TransportError::Protocol("unexpected control record from server"));
            }
        }
        Ok(())
    }
    fn spin_and_stats(&mut self) -> (&mut crate::wait::AdaptiveSpin, &mut TransportStats) {
        (&mut self.spin, &mut self.stats)
    }
}

impl ClientTransport for ShmClient {
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
        self.stats.msgs_sent += 1;
        if self.overflow.is_empty() && self.c2s.push(msg).map_err(TransportError::Protocol)? {
            return self.ring_doorbell();
        }
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(msg);
        self.overflow.push_back(b);
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

    unsafe fn register(
        &mut self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<u64, TransportError> {
        let mem = MemPtr::new(ptr, len).filter(|m| !m.is_empty());
        let mem = mem.ok_or(TransportError::BadRegion)?;
        if self.regions.len() >= REGIONS_MAX {
            return Err(TransportError::RegistrationLimit);
        }
        let key = self.next_key;
        self.next_key += 1;
        send_ctl(
            &self.sock,
            Ctl::new(K_REG_VM, access_bits(access), key, mem.addr() as u64, len as u64),
            None,
        )?;
        self.register_ack(key)?;
        self.regions.insert(key, ClientRegion::Vm { mem, access });
        self.stats.vm_registrations += 1;
        Ok(key)
    }

    fn deregister(&mut self, key: u64) -> Result<(), TransportError> {
        if !self.regions.contains_key(&key) {
            return Err(TransportError::BadRegion);
        }
        // Wait until the server has dropped its mapping before we unmap or free. If the
        // connection is broken, the server dropped every mapping of it already: forget
        // the region here too (it must not be registered again on reconnect).
        let r = send_ctl(&self.sock, Ctl::new(K_DEREG, 0, key, 0, 0), None)
            .and_then(|_| self.register_ack(key));
        if r.as_ref().is_err_and(|e| e.is_fatal()) || r.is_ok() {
            self.regions.remove(&key);
        }
        r
    }

    fn alloc_registered(&mut self, len: usize) -> Result<(u64, *mut u8), TransportError> {
        if len == 0 {
            return Err(TransportError::BadRegion);
        }
        if self.regions.len() >= REGIONS_MAX {
            return Err(TransportError::RegistrationLimit);
        }
        let maplen = mem::round_up_page(len).ok_or(TransportError::BadRegion)?;
        let fd = mem::sealed_memfd("dafs-region", maplen)?;
        let map = Mapping::map(fd.as_fd(), maplen)?;
        let key = self.next_key;
        self.next_key += 1;
        send_ctl(
            &self.sock,
            Ctl::new(K_REG_FD, access_bits(Access::READ_WRITE), key, len as u64, 0),
            Some(fd.as_fd()),
        )?;
        self.register_ack(key)?;
        let ptr = map.ptr();
        self.regions.insert(key, ClientRegion::Memfd { _map: map, fd, len });
        Ok((key, ptr))
    }

    /// New socket and rings to the same server; every region is registered again under
    /// its key (memfd regions by passing the same memfd, so the memory is shared again,
    /// not copied).
    fn reconnect(&mut self, timeout: Duration) -> Result<(), TransportError> {
        let fresh = ShmClient::connect(&self.path, timeout)?;
        let ShmClient { sock, c2s, s2c, _area, _area_fd, ctl, .. } = fresh;
        // Rings first: they point into the old area, which must outlive them.
        self.c2s = c2s;
        self.s2c = s2c;
        self._area = _area;
        self._area_fd = _area_fd;
        self.sock = sock;
        self.ctl = ctl;
        self.overflow.clear();
        let mut keys: Vec<u64> = self.regions.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let ctl = match &self.regions[&key] {
                ClientRegion::Memfd { fd, len, .. } => {
                    send_ctl(
                        &self.sock,
                        Ctl::new(K_REG_FD, access_bits(Access::READ_WRITE), key, *len as u64, 0),
                        Some(fd.as_fd()),
                    )?;
                    self.register_ack(key)?;
                    continue;
                }
                ClientRegion::Vm { mem, access } => Ctl::new(
                    K_REG_VM,
                    access_bits(*access),
                    key,
                    mem.addr() as u64,
                    mem.len() as u64,
                ),
            };
            send_ctl(&self.sock, ctl, None)?;
            self.register_ack(key)?;
        }
        Ok(())
    }

    fn cut(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }

    fn provider(&self) -> &'static str {
        "shm"
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

pub struct ShmListener {
    inner: mio::net::UnixListener,
    path: std::path::PathBuf,
}

impl ShmListener {
    /// Listen on `path` (a stale socket file left by an earlier server is replaced).
    pub fn bind(path: &Path) -> Result<Self, TransportError> {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if meta.file_type().is_socket() {
                // Only replace it if nobody answers there.
                if UnixStream::connect(path).is_ok() {
                    return Err(TransportError::Io(io::Error::from(io::ErrorKind::AddrInUse)));
                }
                let _ = std::fs::remove_file(path);
            }
        }
        let inner = mio::net::UnixListener::bind(path)?;
        Ok(ShmListener { inner, path: path.to_path_buf() })
    }
    pub fn mio(&mut self) -> &mut mio::net::UnixListener {
        &mut self.inner
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ShmListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl ServerListener for ShmListener {
    type Conn = ShmServerConn;
    fn raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
    fn accept(&mut self) -> Result<Option<ShmServerConn>, TransportError> {
        match self.inner.accept() {
            Ok((s, _)) => {
                let fd: OwnedFd = s.into();
                let std_sock = UnixStream::from(fd);
                std_sock.set_nonblocking(true)?;
                let cred = rustix::net::sockopt::get_socket_peercred(&std_sock)
                    .map_err(io::Error::from)?;
                Ok(Some(ShmServerConn::new(std_sock, cred.pid.as_raw_nonzero().get())))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
    fn local_addr(&self) -> String {
        format!("dafs+shm://{}", self.path.display())
    }
}

enum ServerRegion {
    /// A mapping of the client's sealed memfd (whole pages) and the registered length:
    /// placements are bounded by `len`, not by the page-rounded mapping.
    Mapped(Mapping, usize),
    Vm {
        addr: u64,
        len: usize,
    },
}

struct Rings {
    c2s: Ring,
    s2c: Ring,
    _area: Mapping,
}

pub struct ShmServerConn {
    sock: UnixStream,
    pid: i32,
    rings: Option<Rings>,
    ctl: CtlReader,
    msg_size_bytes_max: usize,
    regions: HashMap<u64, (ServerRegion, Access)>,
    overflow: VecDeque<Vec<u8>>,
    overflow_bytes: usize,
    events: VecDeque<ServerEvent>,
    pool: Vec<Vec<u8>>,
    staging: Vec<u8>,
}

impl ShmServerConn {
    fn new(sock: UnixStream, pid: i32) -> Self {
        ShmServerConn {
            sock,
            pid,
            rings: None,
            ctl: CtlReader::new(),
            msg_size_bytes_max: limits::MSG_SIZE_BYTES_MAX as usize,
            regions: HashMap::new(),
            overflow: VecDeque::new(),
            overflow_bytes: 0,
            events: VecDeque::new(),
            pool: Vec::new(),
            staging: Vec::new(),
        }
    }

    fn on_ctl(&mut self, c: Ctl) -> Result<(), TransportError> {
        match c.kind {
            K_DOORBELL => Ok(()),
            K_HELLO => {
                if self.rings.is_some() {
                    return Err(TransportError::Protocol("second HELLO"));
                }
                let fd = self
                    .ctl
                    .take_fd()
                    .ok_or(TransportError::Protocol("HELLO without a ring memfd"))?;
                let cap = c.a as usize;
                if cap != RING_CAP || c.b as usize != mem::ring_area_len(cap) {
                    let hello_ack = Ctl::new(K_HELLO_ACK, 0, HELLO_REFUSED, 0, 0);
                    let _ = send_ctl(&self.sock, hello_ack, None);
                    return Err(TransportError::Protocol("unsupported ring geometry"));
                }
                mem::check_sealed(fd.as_fd(), c.b as usize).map_err(TransportError::Protocol)?;
                let area = Mapping::map(fd.as_fd(), c.b as usize)?;
                let max = limits::MSG_SIZE_BYTES_MAX as usize;
                // SAFETY: `area` is ring_area_len(cap) bytes, sealed against shrinking, and
                // is kept in the same struct as the rings.
                let (c2s, s2c) =
                    unsafe { (Ring::new(&area, 0, cap, max), Ring::new(&area, 1, cap, max)) };
                self.rings = Some(Rings { c2s, s2c, _area: area });
                send_ctl(&self.sock, Ctl::new(K_HELLO_ACK, 0, HELLO_OK, 0, 0), None)
            }
            K_REG_FD | K_REG_VM => {
                let key = c.a;
                let access = access_from(c.aux);
                let status =
                    if self.regions.len() >= REGIONS_MAX {
                        REG_LIMIT
                    } else if self.regions.contains_key(&key) || key == 0 {
                        REG_REFUSED
                    } else if c.kind == K_REG_FD {
                        let len = c.b as usize;
                        match self.ctl.take_fd().filter(|_| len > 0) {
                            None => REG_REFUSED,
                            Some(fd) => match mem::round_up_page(len).ok_or("bad length").and_then(
                                |maplen| mem::check_sealed(fd.as_fd(), maplen).map(|_| maplen),
                            ) {
                                Err(_) => REG_REFUSED,
                                Ok(maplen) => match Mapping::map(fd.as_fd(), maplen) {
                                    Ok(m) => {
                                        self.regions
                                            .insert(key, (ServerRegion::Mapped(m, len), access));
                                        REG_OK
                                    }
                                    Err(_) => REG_REFUSED,
                                },
                            },
                        }
                    } else {
                        let (addr, len) = (c.b, c.c as usize);
                        if len == 0 || addr.checked_add(len as u64).is_none() {
                            REG_REFUSED
                        } else {
                            self.regions.insert(key, (ServerRegion::Vm { addr, len }, access));
                            REG_OK
                        }
                    };
                send_ctl(&self.sock, Ctl::new(K_REG_ACK, 0, key, status, 0), None)
            }
            K_DEREG => {
                let status = if self.regions.remove(&c.a).is_some() { REG_OK } else { REG_REFUSED };
                send_ctl(&self.sock, Ctl::new(K_REG_ACK, 0, c.a, status, 0), None)
            }
            _ => Err(TransportError::Protocol("unknown control record")),
        }
    }

    fn resolve(
        &self,
        region: RemoteRegion,
        len: usize,
        write: bool,
    ) -> Result<&ServerRegion, TransportError> {
        let (r, access) = self.regions.get(&region.key).ok_or(TransportError::BadRegion)?;
        if (write && !access.remote_write) || (!write && !access.remote_read) {
            return Err(TransportError::BadRegion);
        }
        let end = region.offset.checked_add(len as u64).ok_or(TransportError::BadRegion)?;
        let size = match r {
            ServerRegion::Mapped(m, len) => {
                debug_assert!(*len <= m.len());
                *len as u64
            }
            ServerRegion::Vm { len, .. } => *len as u64,
        };
        if end > size {
            return Err(TransportError::BadRegion);
        }
        Ok(r)
    }

    fn push_reply(&mut self, msg: Vec<u8>) -> Result<(), TransportError> {
        let rings = self.rings.as_ref().ok_or(TransportError::Protocol("message before HELLO"))?;
        if self.overflow.is_empty() && rings.s2c.push(&msg).map_err(TransportError::Protocol)? {
            if rings.s2c.needs_wakeup() {
                send_ctl(&self.sock, Ctl::new(K_DOORBELL, 0, 0, 0, 0), None)?;
            }
            self.pool.push(msg);
        } else {
            self.overflow_bytes += msg.len();
            self.overflow.push_back(msg);
        }
        Ok(())
    }

    /// True if a message is waiting in the request ring (cheap: two loads).
    pub fn input_pending(&self) -> bool {
        self.rings.as_ref().is_some_and(|r| !r.c2s.is_empty())
    }
}

impl ServerConn for ShmServerConn {
    fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
    fn peer(&self) -> String {
        format!("shm:pid{}", self.pid)
    }
    fn msg_size_bytes_max(&self) -> usize {
        self.msg_size_bytes_max
    }
    fn set_msg_size_bytes_max(&mut self, n: usize) {
        self.msg_size_bytes_max = n.min(limits::MSG_SIZE_BYTES_MAX as usize);
    }

    fn poll_event(&mut self) -> Result<Option<ServerEvent>, TransportError> {
        if let Some(e) = self.events.pop_front() {
            return Ok(Some(e));
        }
        if let Some(r) = &self.rings {
            let mut buf = self.pool.pop().unwrap_or_default();
            match r.c2s.pop_into(&mut buf).map_err(TransportError::Protocol)? {
                Pop::Message => {
                    if buf.len() > self.msg_size_bytes_max {
                        return Err(TransportError::TooBig {
                            len: buf.len(),
                            max: self.msg_size_bytes_max,
                        });
                    }
                    return Ok(Some(ServerEvent::Message(buf)));
                }
                Pop::Empty => self.pool.push(buf),
            }
        }
        // Control records: handshake, registrations, doorbells, EOF.
        while let Some(c) = self.ctl.next(&self.sock)? {
            self.on_ctl(c)?;
        }
        // A message may have arrived while we read the socket.
        if let Some(r) = &self.rings {
            let mut buf = self.pool.pop().unwrap_or_default();
            if r.c2s.pop_into(&mut buf).map_err(TransportError::Protocol)? == Pop::Message {
                return Ok(Some(ServerEvent::Message(buf)));
            }
            self.pool.push(buf);
        }
        Ok(None)
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            self.pool.push(buf);
        }
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        if msg.len() > self.msg_size_bytes_max {
            return Err(TransportError::TooBig { len: msg.len(), max: self.msg_size_bytes_max });
        }
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(msg);
        self.push_reply(b)
    }

    fn put(
        &mut self,
        region: RemoteRegion,
        len: usize,
        fill: &mut dyn FnMut(&mut PlacementDst<'_>) -> io::Result<usize>,
    ) -> Result<usize, PutError> {
        let pid = self.pid;
        match self.resolve(region, len, true)? {
            ServerRegion::Mapped(m, _) => {
                let mem = m.range(region.offset, len).ok_or(TransportError::BadRegion)?;
                // SAFETY: `mem` lies inside the mapping (checked by resolve and range), which
                // stays mapped while `m` is borrowed here, i.e. for the whole call (the
                // client's memfd is sealed against shrinking, so the pages cannot vanish).
                // No reference to it is ever made: the client may write it concurrently,
                // which can only change the bytes it receives.
                let mut dst = unsafe { PlacementDst::shared(mem) };
                let n = fill(&mut dst).map_err(PutError::Fill)?;
                Ok(n.min(len))
            }
            ServerRegion::Vm { addr, .. } => {
                let addr = addr + region.offset;
                let mut staging = std::mem::take(&mut self.staging);
                if staging.len() < len {
                    staging.resize(len, 0);
                }
                let mut dst = PlacementDst::from_slice(&mut staging[..len]);
                let res = fill(&mut dst).map_err(PutError::Fill).and_then(|n| {
                    let n = n.min(len);
                    match mem::vm_write(pid, &staging[..n], addr) {
                        Ok(w) if w == n => Ok(n),
                        _ => Err(PutError::Transport(TransportError::BadRegion)),
                    }
                });
                self.staging = staging;
                res
            }
        }
    }

    fn pull_sync(
        &mut self,
        region: RemoteRegion,
        len: usize,
        consume: &mut dyn FnMut(PlacementSrc<'_>) -> io::Result<usize>,
    ) -> Result<Option<usize>, PutError> {
        let pid = self.pid;
        match self.resolve(region, len, false)? {
            ServerRegion::Mapped(m, _) => {
                let mem = m.range(region.offset, len).ok_or(TransportError::BadRegion)?;
                // SAFETY: as in `put`: inside a mapping that outlives the call, and never
                // referenced, so the client writing it meanwhile only changes the bytes
                // `consume` takes.
                let src = unsafe { PlacementSrc::shared(mem) };
                Ok(Some(consume(src).map_err(PutError::Fill)?))
            }
            ServerRegion::Vm { addr, .. } => {
                let addr = addr + region.offset;
                let mut staging = std::mem::take(&mut self.staging);
                if staging.len() < len {
                    staging.resize(len, 0);
                }
                let res = match mem::vm_read(pid, &mut staging[..len], addr) {
                    Ok(r) if r == len => consume(PlacementSrc::from_slice(&staging[..len]))
                        .map(Some)
                        .map_err(PutError::Fill),
                    _ => Err(PutError::Transport(TransportError::BadRegion)),
                };
                self.staging = staging;
                res
            }
        }
    }

    fn pull(&mut self, region: RemoteRegion, len: usize, tag: u64) -> Result<(), TransportError> {
        let mut buf = Vec::new();
        let r = self.pull_sync(region, len, &mut |src| {
            src.append_to(&mut buf);
            Ok(src.len())
        });
        let data = match r {
            Ok(_) => Ok(buf),
            Err(PutError::Transport(e)) => Err(e),
            Err(PutError::Fill(e)) => Err(TransportError::Io(e)),
        };
        self.events.push_back(ServerEvent::Pulled { tag, data });
        Ok(())
    }

    fn flush(&mut self) -> Result<bool, TransportError> {
        let Some(rings) = &self.rings else { return Ok(true) };
        let mut pushed = false;
        while let Some(m) = self.overflow.front() {
            if !rings.s2c.push(m).map_err(TransportError::Protocol)? {
                break;
            }
            pushed = true;
            let m = self.overflow.pop_front().unwrap();
            self.overflow_bytes -= m.len();
            if self.pool.len() < POOL_MAX {
                self.pool.push(m);
            }
        }
        if pushed && rings.s2c.needs_wakeup() {
            send_ctl(&self.sock, Ctl::new(K_DOORBELL, 0, 0, 0, 0), None)?;
        }
        Ok(self.overflow.is_empty())
    }

    fn backlog_bytes(&self) -> usize {
        self.overflow_bytes
    }

    fn input_pending(&self) -> bool {
        ShmServerConn::input_pending(self)
    }

    fn arm_sleep(&mut self) -> bool {
        match &self.rings {
            Some(r) => r.c2s.arm_sleep(),
            None => true,
        }
    }

    fn disarm_sleep(&mut self) {
        if let Some(r) = &self.rings {
            r.c2s.disarm_sleep();
        }
    }
}

/// This host's identity for the same-host check: the Linux boot id (16 bytes). Two
/// processes with equal ids run on the same kernel, so a unix socket path one of them
/// names can be reached by the other (unless namespaces hide it; then connecting fails
/// and the client keeps its TCP session).
pub fn host_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let hex: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
        for (i, pair) in hex.chunks(2).take(16).enumerate() {
            let v = std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .unwrap_or(0);
            id[i] = v;
        }
    }
    id
}
