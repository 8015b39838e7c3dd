//! The side channel: a TCP connection per session that carries the fabric addresses
//! (hellos), then only doorbells, and whose end is how either side learns the other is
//! gone (fabric providers with manual progress report a dead peer late or never).
//!
//! The client speaks first: [`CLIENT_PREAMBLE`], 32 bytes, as soon as it is connected.
//! A dafs TCP or TLS listener (or most other services) refuses it at once (its first
//! 4 bytes are no frame kind, no TLS record), so a client pointed at the wrong port
//! gets a clear error instead of waiting out its connect timeout for a hello that
//! never comes; the libfabric listener refuses a peer that does not start with it.
//!
//! Hello records: `len u32 LE, bytes`; a server hello is `MAGIC, provider name (u16
//! len + bytes), message size max u32, fabric address (u16 len + bytes)`; a client hello
//! is `MAGIC, fabric address (u16 len + bytes)`. Afterwards each byte on the socket is a
//! doorbell ("I posted work for you; progress"), needed by providers without a wait fd.
//!
//! Region announcements travel in the fabric's ordered message stream instead (remote
//! CQ data [`CTRL_REG`] / [`CTRL_DEREG`]), so the server learns of a region before any
//! request naming it, without a round trip.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use dafs_transport::TransportError;

pub const MAGIC: &[u8; 8] = b"DAFSOFI1";
/// What a client writes first (see the module docs); 32 bytes, the size of a dafs TCP
/// frame header, so a dafs TCP listener reads all of it and refuses its frame kind.
pub const CLIENT_PREAMBLE: &[u8; 32] = b"DAFSOFI1 libfabric client hello\n";
/// Longest fabric address accepted (libfabric's own are at most a few dozen bytes).
pub const NAME_BYTES_MAX: usize = 256;
/// Longest hello record.
pub const HELLO_BYTES_MAX: usize = 1024;
/// Remote CQ data of a region announcement: `handle u64, key u64, addr u64, len u64,
/// access u8` (bit 0 remote write, bit 1 remote read).
pub const CTRL_REG: u64 = 1;
/// Remote CQ data of a withdrawal: `handle u64`.
pub const CTRL_DEREG: u64 = 2;
pub const REG_BYTES: usize = 33;
pub const DEREG_BYTES: usize = 8;
pub const DOORBELL: u8 = 0xdb;
/// A doorbell that also asks for one back once the receiver has progressed: the server
/// rings it while its RMAs are in flight. A manual-progress provider may need the
/// target's progress several times per RMA (`shm` moves a large one in segments
/// through bounce buffers, each emptied by the client's progress and refilled by the
/// server's), so the two sides pass this token back and forth until the RMAs complete;
/// one doorbell would leave the rest waiting for the client's next call.
pub const DOORBELL_ANSWER: u8 = 0xdc;

pub struct ServerHello {
    pub prov: String,
    pub msg_size_bytes_max: u32,
    pub name: Vec<u8>,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u16).to_le_bytes());
    out.extend_from_slice(b);
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], TransportError> {
    if b.len() < n {
        return Err(TransportError::Protocol("short ofi hello"));
    }
    let (h, t) = b.split_at(n);
    *b = t;
    Ok(h)
}

fn take_bytes<'a>(b: &mut &'a [u8]) -> Result<&'a [u8], TransportError> {
    let n = u16::from_le_bytes(take(b, 2)?.try_into().unwrap()) as usize;
    take(b, n)
}

fn framed(body: Vec<u8>) -> Vec<u8> {
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

pub fn encode_server_hello(h: &ServerHello) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    put_bytes(&mut b, h.prov.as_bytes());
    b.extend_from_slice(&h.msg_size_bytes_max.to_le_bytes());
    put_bytes(&mut b, &h.name);
    framed(b)
}

pub fn decode_server_hello(mut b: &[u8]) -> Result<ServerHello, TransportError> {
    if take(&mut b, 8)? != MAGIC {
        return Err(TransportError::Protocol("not a dafs libfabric listener"));
    }
    let prov = String::from_utf8(take_bytes(&mut b)?.to_vec())
        .map_err(|_| TransportError::Protocol("bad provider name in hello"))?;
    let msg_size_bytes_max = u32::from_le_bytes(take(&mut b, 4)?.try_into().unwrap());
    let name = take_bytes(&mut b)?.to_vec();
    Ok(ServerHello { prov, msg_size_bytes_max, name })
}

pub fn encode_client_hello(name: &[u8]) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    put_bytes(&mut b, name);
    framed(b)
}

pub fn decode_client_hello(mut b: &[u8]) -> Result<Vec<u8>, TransportError> {
    if take(&mut b, 8)? != MAGIC {
        return Err(TransportError::Protocol("not a dafs libfabric client"));
    }
    Ok(take_bytes(&mut b)?.to_vec())
}

/// Accumulates one length-prefixed hello from a non-blocking socket.
#[derive(Default)]
pub struct HelloReader {
    buf: Vec<u8>,
    /// Bytes of [`CLIENT_PREAMBLE`] still to check (the server's reader).
    preamble_left: usize,
}

impl HelloReader {
    /// The server's reader: [`CLIENT_PREAMBLE`], then the client's hello.
    pub fn after_preamble() -> Self {
        HelloReader { buf: Vec::new(), preamble_left: CLIENT_PREAMBLE.len() }
    }

    /// Read and check the preamble; true once all of it has arrived.
    fn poll_preamble(&mut self, sock: &mut TcpStream) -> Result<bool, TransportError> {
        while self.preamble_left > 0 {
            let at = CLIENT_PREAMBLE.len() - self.preamble_left;
            let mut chunk = [0u8; 32];
            match sock.read(&mut chunk[..self.preamble_left]) {
                Ok(0) => return Err(TransportError::Closed),
                Ok(n) => {
                    if chunk[..n] != CLIENT_PREAMBLE[at..at + n] {
                        return Err(TransportError::Protocol("not a dafs libfabric client"));
                    }
                    self.preamble_left -= n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }

    /// The hello's body once complete; `None` while more bytes are needed.
    pub fn poll(&mut self, sock: &mut TcpStream) -> Result<Option<Vec<u8>>, TransportError> {
        if !self.poll_preamble(sock)? {
            return Ok(None);
        }
        loop {
            let need = if self.buf.len() < 4 {
                4
            } else {
                let n = u32::from_le_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if n > HELLO_BYTES_MAX {
                    return Err(TransportError::Protocol("ofi hello too long"));
                }
                4 + n
            };
            if self.buf.len() == need && need > 4 {
                return Ok(Some(self.buf.split_off(4)));
            }
            let mut chunk = [0u8; 256];
            let want = (need - self.buf.len()).min(chunk.len());
            match sock.read(&mut chunk[..want]) {
                Ok(0) => return Err(TransportError::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Block (polling the socket) until the hello is complete or `deadline` passes.
    pub fn wait(
        &mut self,
        sock: &mut TcpStream,
        deadline: Instant,
    ) -> Result<Vec<u8>, TransportError> {
        use std::os::fd::AsFd;
        loop {
            if let Some(b) = self.poll(sock)? {
                return Ok(b);
            }
            if Instant::now() >= deadline {
                return Err(TransportError::Io(io::ErrorKind::TimedOut.into()));
            }
            dafs_transport::wait::sleep_on_fd(sock.as_fd(), false, Some(deadline))?;
        }
    }
}

/// Write a whole (small) record to a non-blocking socket, waiting for room until
/// `deadline`.
pub fn write_all(
    sock: &mut TcpStream,
    mut b: &[u8],
    deadline: Instant,
) -> Result<(), TransportError> {
    use std::os::fd::AsFd;
    while !b.is_empty() {
        match sock.write(b) {
            Ok(0) => return Err(TransportError::Closed),
            Ok(n) => b = &b[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(TransportError::Io(io::ErrorKind::TimedOut.into()));
                }
                dafs_transport::wait::sleep_on_fd(sock.as_fd(), true, Some(deadline))?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Ring the peer's doorbell (`DOORBELL` or `DOORBELL_ANSWER`). A full socket buffer
/// already holds unread doorbells, so a byte that does not fit is not needed.
pub fn ring(sock: &mut TcpStream, bell: u8) -> Result<(), TransportError> {
    debug_assert!(bell == DOORBELL || bell == DOORBELL_ANSWER);
    match sock.write(&[bell]) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
        Err(e) if is_disconnect(&e) => Err(TransportError::Closed),
        Err(e) => Err(e.into()),
    }
}

fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
    )
}

/// What [`drain`] found on the side channel.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Rung {
    /// Any doorbell.
    pub any: bool,
    /// A `DOORBELL_ANSWER`: ring back after progressing.
    pub answer: bool,
}

/// Read every doorbell waiting on the socket. `Err(Closed)` once the peer is gone;
/// anything but a doorbell after the hello is a protocol violation.
pub fn drain(sock: &mut TcpStream) -> Result<Rung, TransportError> {
    let mut buf = [0u8; 64];
    let mut rung = Rung::default();
    loop {
        match sock.read(&mut buf) {
            Ok(0) => return Err(TransportError::Closed),
            Ok(n) => {
                for &b in &buf[..n] {
                    match b {
                        DOORBELL => {}
                        DOORBELL_ANSWER => rung.answer = true,
                        _ => {
                            return Err(TransportError::Protocol(
                                "unexpected bytes on the ofi side channel",
                            ))
                        }
                    }
                }
                rung.any = true;
                if n < buf.len() {
                    return Ok(rung);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(rung),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_disconnect(&e) => return Err(TransportError::Closed),
            Err(e) => return Err(e.into()),
        }
    }
}

/// A region announcement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegAnnounce {
    pub handle: u64,
    pub key: u64,
    pub addr: u64,
    pub len: u64,
    pub remote_write: bool,
    pub remote_read: bool,
}

impl RegAnnounce {
    pub fn encode(&self) -> [u8; REG_BYTES] {
        let mut b = [0u8; REG_BYTES];
        b[0..8].copy_from_slice(&self.handle.to_le_bytes());
        b[8..16].copy_from_slice(&self.key.to_le_bytes());
        b[16..24].copy_from_slice(&self.addr.to_le_bytes());
        b[24..32].copy_from_slice(&self.len.to_le_bytes());
        b[32] = self.remote_write as u8 | (self.remote_read as u8) << 1;
        b
    }
    pub fn decode(b: &[u8]) -> Result<Self, TransportError> {
        if b.len() != REG_BYTES || b[32] & !3 != 0 {
            return Err(TransportError::Protocol("malformed region announcement"));
        }
        let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Ok(RegAnnounce {
            handle: u(0),
            key: u(8),
            addr: u(16),
            len: u(24),
            remote_write: b[32] & 1 != 0,
            remote_read: b[32] & 2 != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hellos_round_trip_and_refuse_garbage() {
        let h = ServerHello { prov: "shm".into(), msg_size_bytes_max: 65536, name: vec![1, 2, 3] };
        let e = encode_server_hello(&h);
        let d = decode_server_hello(&e[4..]).unwrap();
        assert_eq!((d.prov.as_str(), d.msg_size_bytes_max, d.name), ("shm", 65536, vec![1, 2, 3]));
        assert!(decode_server_hello(&e[4..e.len() - 1]).is_err(), "truncated");
        assert!(decode_server_hello(b"HTTP/1.1 200 OK").is_err());
        let c = encode_client_hello(&[9; 16]);
        assert_eq!(decode_client_hello(&c[4..]).unwrap(), vec![9; 16]);
        assert!(decode_client_hello(&c[4..10]).is_err());
    }

    #[test]
    fn announcements_round_trip_and_refuse_unknown_bits() {
        let r = RegAnnounce {
            handle: 7,
            key: 99,
            addr: 0x7fff_0000,
            len: 4096,
            remote_write: true,
            remote_read: false,
        };
        assert_eq!(RegAnnounce::decode(&r.encode()).unwrap(), r);
        let mut b = r.encode();
        b[32] = 4;
        assert!(RegAnnounce::decode(&b).is_err());
        assert!(RegAnnounce::decode(&b[..20]).is_err());
    }
}
