//! The client endpoint of the shared-memory provider.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use dafs_proto::limits;

use super::mem::{self, Mapping, Pop, Ring};
use super::peer_mem::PeerMem;
use super::*;
use crate::mem_ptr::MemPtr;
use crate::wait::{sleep_on_fd, spin_budget_from_env};
use crate::{ClientTransport, TransportStats, Wait};

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
        // Our address space, for the application memory we register by address: the
        // server reaches it only through this descriptor, never by pid (see peer_mem).
        let mem_fd = PeerMem::open_own()?;
        let hello = Ctl::new(K_HELLO, 0, RING_CAP as u64, area_len as u64, 0);
        if let Err(e) = send_ctl_fds(&sock, hello, &[area_fd.as_fd(), mem_fd.as_fd()]) {
            // A server that refuses us at accept has said why and closed already.
            return Err(match CtlReader::new().next(&sock) {
                Ok(Some(ack)) if ack.kind == K_HELLO_ACK => hello_refused(ack.a),
                _ => e,
            });
        }
        drop(mem_fd);
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
            return Err(hello_refused(ack.a));
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

/// The error for a HELLO_ACK that refused the connection.
fn hello_refused(code: u64) -> TransportError {
    TransportError::Protocol(match code {
        HELLO_MEM_REFUSED => {
            "server refused this process's /proc/self/mem (client and server must see the same \
             /proc)"
        }
        HELLO_UID_REFUSED => "the server does not let this uid use shared memory (--shm-allow-uid)",
        _ => "server refused the shared-memory connection",
    })
}
