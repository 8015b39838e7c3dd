//! The server side of the shared-memory provider: the listening socket and one
//! connection per client process.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;

use dafs_proto::limits;

use super::mem::{self, Mapping, Pop, Ring};
use super::peer_mem::PeerMem;
use super::socket_path;
use super::*;
use crate::placement::{PlacementDst, PlacementLease, PlacementSrc};
use crate::{PutError, RemoteRegion, ServerConn, ServerEvent, ServerListener};

pub struct ShmListener {
    inner: mio::net::UnixListener,
    path: std::path::PathBuf,
    /// Uids whose processes may use the provider (SO_PEERCRED at accept): dafsd's own
    /// and root always, plus `allow_uids`. Sorted.
    uids_allowed: Vec<u32>,
    /// Connections closed at accept because their uid is not allowed.
    uid_refusals: u64,
}

impl ShmListener {
    /// Listen on `path`. Refused if other users could replace the socket there (see
    /// `socket_path::check_socket_dir`); a stale socket of our own uid that nobody
    /// answers on is replaced; a symlink, a file or another user's socket is an error
    /// and left alone.
    pub fn bind(path: &Path) -> Result<Self, TransportError> {
        socket_path::check_socket_dir(path)?;
        socket_path::clear_stale_socket(path)?;
        let inner = mio::net::UnixListener::bind(path)?;
        let mut l = ShmListener {
            inner,
            path: path.to_path_buf(),
            uids_allowed: Vec::new(),
            uid_refusals: 0,
        };
        l.allow_uids(&[rustix::process::geteuid().as_raw(), 0])?;
        Ok(l)
    }

    /// Let processes of these uids use the provider too (`--shm-allow-uid`). The socket
    /// is 0600 while only dafsd's uid (and root) may use it, 0666 once other uids may:
    /// admission is the uid check at accept, and reach is the directory's mode (the
    /// default directory is 0700, so allowed users need an explicit `--shm-socket` in a
    /// directory they can enter).
    pub fn allow_uids(&mut self, uids: &[u32]) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        self.uids_allowed.extend_from_slice(uids);
        self.uids_allowed.sort_unstable();
        self.uids_allowed.dedup();
        let me = rustix::process::geteuid().as_raw();
        let others = self.uids_allowed.iter().any(|&u| u != me && u != 0);
        let mode = if others { 0o666 } else { 0o600 };
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(mode))
    }

    /// Connections refused so far because their uid is not allowed.
    pub fn uid_refusals(&self) -> u64 {
        self.uid_refusals
    }

    /// Refuse a connection of a uid that is not allowed: tell the client why (it then
    /// stays on TCP) and close. Returns false if refused.
    fn admit(&mut self, sock: &UnixStream, pid: i32, uid: u32) -> bool {
        if self.uids_allowed.binary_search(&uid).is_ok() {
            return true;
        }
        self.uid_refusals += 1;
        tracing::warn!(pid, uid, "shm connection refused: uid not allowed (--shm-allow-uid)");
        let _ = send_ctl(sock, Ctl::new(K_HELLO_ACK, 0, HELLO_UID_REFUSED, 0, 0), None);
        false
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
    /// The next connection of an allowed uid; refused ones are closed on the way (the
    /// loop goes on, so a refused connection never hides one queued behind it from an
    /// edge-triggered poller).
    fn accept(&mut self) -> Result<Option<ShmServerConn>, TransportError> {
        loop {
            match self.inner.accept() {
                Ok((s, _)) => {
                    let fd: OwnedFd = s.into();
                    let std_sock = UnixStream::from(fd);
                    std_sock.set_nonblocking(true)?;
                    let (pid, uid) = mem::peer_cred(std_sock.as_fd())?;
                    if self.admit(&std_sock, pid, uid) {
                        return Ok(Some(ShmServerConn::new(std_sock, pid)));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }
    fn local_addr(&self) -> String {
        format!("dafs+shm://{}", self.path.display())
    }
}

enum ServerRegion {
    /// A mapping of the client's sealed memfd (whole pages) and the registered length:
    /// placements are bounded by `len`, not by the page-rounded mapping.
    /// Shared (`Arc`) so that a [`PlacementLease`] handed to another thread keeps it
    /// mapped even if the client deregisters the region meanwhile.
    Mapped(Arc<Mapping>, usize),
    /// Application memory of the client, reached through `ShmServerConn::peer_mem`.
    Vm { addr: u64, len: usize },
}

struct Rings {
    c2s: Ring,
    s2c: Ring,
    _area: Mapping,
}

pub struct ShmServerConn {
    sock: UnixStream,
    /// The peer's pid at connect (SO_PEERCRED): only to name the peer in logs and to
    /// check the memory file passed with HELLO; memory is never reached by pid.
    pid: i32,
    rings: Option<Rings>,
    /// The client's address space, bound at HELLO (see `peer_mem`).
    peer_mem: Option<PeerMem>,
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
            peer_mem: None,
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
                let peer_mem = self
                    .ctl
                    .take_fd()
                    .ok_or("HELLO without the client's memory file")
                    .and_then(|fd| PeerMem::from_peer(fd, self.pid));
                let peer_mem = match peer_mem {
                    Ok(m) => m,
                    Err(why) => {
                        let hello_ack = Ctl::new(K_HELLO_ACK, 0, HELLO_MEM_REFUSED, 0, 0);
                        let _ = send_ctl(&self.sock, hello_ack, None);
                        return Err(TransportError::Protocol(why));
                    }
                };
                let area = Mapping::map(fd.as_fd(), c.b as usize)?;
                let max = limits::MSG_SIZE_BYTES_MAX as usize;
                // SAFETY: `area` is ring_area_len(cap) bytes, sealed against shrinking, and
                // is kept in the same struct as the rings.
                let (c2s, s2c) =
                    unsafe { (Ring::new(&area, 0, cap, max), Ring::new(&area, 1, cap, max)) };
                self.rings = Some(Rings { c2s, s2c, _area: area });
                self.peer_mem = Some(peer_mem);
                send_ctl(&self.sock, Ctl::new(K_HELLO_ACK, 0, HELLO_OK, 0, 0), None)
            }
            K_REG_FD | K_REG_VM => {
                let key = c.a;
                let access = access_from(c.aux);
                let status = if self.regions.len() >= REGIONS_MAX {
                    REG_LIMIT
                } else if self.regions.contains_key(&key) || key == 0 {
                    REG_REFUSED
                } else if c.kind == K_REG_FD {
                    let len = c.b as usize;
                    match self.ctl.take_fd().filter(|_| len > 0) {
                        None => REG_REFUSED,
                        Some(fd) => {
                            match mem::round_up_page(len).ok_or("bad length").and_then(|maplen| {
                                mem::check_sealed(fd.as_fd(), maplen).map(|_| maplen)
                            }) {
                                Err(_) => REG_REFUSED,
                                Ok(maplen) => match Mapping::map(fd.as_fd(), maplen) {
                                    Ok(m) => {
                                        self.regions.insert(
                                            key,
                                            (ServerRegion::Mapped(Arc::new(m), len), access),
                                        );
                                        REG_OK
                                    }
                                    Err(_) => REG_REFUSED,
                                },
                            }
                        }
                    }
                } else {
                    let (addr, len) = (c.b, c.c as usize);
                    if len == 0 || addr.checked_add(len as u64).is_none() || self.peer_mem.is_none()
                    {
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
        // Straight into the ring when nothing is queued before it (the common case: one
        // copy fewer on every reply); only a message that must wait is copied into a
        // pooled buffer.
        let rings = self.rings.as_ref().ok_or(TransportError::Protocol("message before HELLO"))?;
        if self.overflow.is_empty() && rings.s2c.push(msg).map_err(TransportError::Protocol)? {
            if rings.s2c.needs_wakeup() {
                send_ctl(&self.sock, Ctl::new(K_DOORBELL, 0, 0, 0, 0), None)?;
            }
            return Ok(());
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
                let peer = self.peer_mem.as_ref().ok_or(TransportError::BadRegion)?;
                let mut staging = take_staging(&mut self.staging, len);
                let mut dst = PlacementDst::from_slice(&mut staging[..len]);
                let res = fill(&mut dst).map_err(PutError::Fill).and_then(|n| {
                    let n = n.min(len);
                    peer.write(&staging[..n], addr).map(|_| n).map_err(PutError::Transport)
                });
                self.staging = staging;
                res
            }
        }
    }

    fn lease(
        &mut self,
        region: RemoteRegion,
        len: usize,
        write: bool,
    ) -> Result<Option<PlacementLease>, TransportError> {
        match self.resolve(region, len, write)? {
            ServerRegion::Mapped(m, _) => {
                let mem = m.range(region.offset, len).ok_or(TransportError::BadRegion)?;
                // SAFETY: `mem` lies inside the mapping `m` (checked by resolve and range),
                // which the lease keeps alive (and so mapped) by its own reference; the
                // client's memfd is sealed against shrinking, so the pages cannot vanish.
                Ok(Some(unsafe { PlacementLease::shared(mem, m.clone()) }))
            }
            // Reached through /proc/PID/mem with this connection's staging buffer.
            ServerRegion::Vm { .. } => Ok(None),
        }
    }

    fn pull_sync(
        &mut self,
        region: RemoteRegion,
        len: usize,
        consume: &mut dyn FnMut(PlacementSrc<'_>) -> io::Result<usize>,
    ) -> Result<Option<usize>, PutError> {
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
                let peer = self.peer_mem.as_ref().ok_or(TransportError::BadRegion)?;
                let mut staging = take_staging(&mut self.staging, len);
                let res = match peer.read(&mut staging[..len], addr) {
                    Ok(()) => consume(PlacementSrc::from_slice(&staging[..len]))
                        .map(Some)
                        .map_err(PutError::Fill),
                    Err(e) => Err(PutError::Transport(e)),
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

    fn is_shared_memory(&self) -> bool {
        true
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

/// The connection's staging buffer for application memory (reached through the peer's
/// memory file, not mapped), at least `len` bytes; the caller puts it back after use.
fn take_staging(staging: &mut Vec<u8>, len: usize) -> Vec<u8> {
    let mut buf = std::mem::take(staging);
    if buf.len() < len {
        buf.resize(len, 0);
    }
    buf
}

#[cfg(test)]
mod tests;
