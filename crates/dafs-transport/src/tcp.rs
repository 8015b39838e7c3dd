//! TCP provider. Messages and placements are framed on one stream (see [`crate::frame`]).
//!
//! Direct placement without an intermediate copy on the client: a PUT's payload is
//! read from the socket straight into the registered region, and a GET is answered by
//! writing straight from the region. The stream orders a placement before the reply
//! that follows it, as RDMA orders a write before a later send.
//!
//! Optionally over TLS ([`crate::tls`]): the same frames on an encrypted stream.

mod client;
mod out;
mod server;

pub use client::TcpClient;
use out::{Out, OutQueue};
pub use server::{TcpListener, TcpServerConn, SENDFILE_BYTES_MIN};

use std::io::{self, Read};

use crate::frame::{FrameHeader, FRAME_HEADER_LEN};
use crate::tls::classify;
use crate::TransportError;

/// Most regions one client may register at once.
pub const REGIONS_MAX: usize = 4096;
/// Buffers kept for reuse per connection (TigerBeetle style: no allocation in steady state).
const POOL_MAX: usize = 16;
/// A server-side message buffer starts at most this large and grows as bytes arrive,
/// so a peer that announces a large message and stalls pins only what it sent.
const RECV_CHUNK: usize = 64 * 1024;
/// A TLS record starts with its content type and the protocol's major version (3 since
/// SSL 3.0): what a TLS server sends a plaintext client is an alert or a handshake record.
const TLS_RECORD_ALERT: u8 = 0x15;
const TLS_RECORD_HANDSHAKE: u8 = 0x16;
const TLS_RECORD_VERSION_MAJOR: u8 = 3;

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
