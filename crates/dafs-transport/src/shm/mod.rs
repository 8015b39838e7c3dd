//! Same-host shared-memory provider: true direct placement.
//!
//! - Connection set-up over a unix stream socket (`dafs+shm:///path/to/socket`); the
//!   client creates a sealed memfd holding two message rings (client-to-server and
//!   server-to-client) and passes it with SCM_RIGHTS.
//! - Registered memory the client allocates with `alloc_registered` is a sealed memfd
//!   passed to the server, which maps it: READ_DIRECT is one copy in total (the server
//!   preads straight into the client's buffer), WRITE_DIRECT pwrites straight from it.
//!   Memory the application allocated itself is registered by address and reached
//!   through the descriptor of the client's `/proc/self/mem` passed with HELLO, never by
//!   pid (`peer_mem`; counted in `TransportStats::vm_registrations`).
//! - Waiting: a bounded spin on the ring, then sleep in poll(2) on the socket after
//!   setting a "sleeping" flag in the ring header; the producer writes a doorbell
//!   record to the socket only when that flag is set (no syscall while both spin).
//! - The socket also carries death: a closed socket is a dead peer, at once.
//!
//! Control records on the socket are 32 bytes: `kind u32, aux u32, a u64, b u64, c u64`.

mod client;
pub mod mem;
mod peer_mem;
mod server;
mod socket_path;

pub use client::ShmClient;
pub use server::{ShmListener, ShmServerConn};
pub use socket_path::{
    check_socket_dir, clear_stale_socket, default_socket_path, private_runtime_dir,
    runtime_dir_candidates,
};

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::{Access, TransportError};

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

/// HELLO_ACK `a`: the server took the rings / refused the ring geometry / refused the
/// memory file (it is not the connecting process's `/proc/PID/mem`).
const HELLO_OK: u64 = 0;
const HELLO_REFUSED: u64 = 1;
const HELLO_MEM_REFUSED: u64 = 2;
/// HELLO_ACK `a` sent at accept, before any HELLO: the client's uid may not use the
/// provider (`--shm-allow-uid`); the connection is closed.
const HELLO_UID_REFUSED: u64 = 3;
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
    ///
    /// Descriptors arrive with the first byte of the record that carries them, so any
    /// still held when a new record starts belong to an earlier one that took none (or
    /// fewer): they are closed here, so a peer cannot make us hold descriptors without
    /// bound by attaching them to doorbells.
    fn next(&mut self, sock: &UnixStream) -> Result<Option<Ctl>, TransportError> {
        if self.got == 0 {
            self.fds.clear();
        }
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
    send_ctl_fds(sock, c, &fds)
}

fn send_ctl_fds(
    sock: &UnixStream,
    c: Ctl,
    fds: &[std::os::fd::BorrowedFd],
) -> Result<(), TransportError> {
    mem::send_with_fds(sock.as_fd(), &c.encode(), fds).map_err(|e| match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => TransportError::Closed,
        _ => TransportError::Io(e),
    })
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
