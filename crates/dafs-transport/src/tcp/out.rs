//! The output queue both ends of a TCP connection share: frame headers, owned buffers,
//! registered client memory (GET_RESP), and — on the server, without TLS — file ranges
//! sent from the page cache with `sendfile(2)` (READ_DIRECT placements: no copy through
//! user space on the server).
//!
//! A file range's length is fixed when it is queued (its PUT header is already ahead of
//! it in the queue). Should the file shrink before its bytes go out, `sendfile` reaches
//! end of file early: the rest of the range is sent as zeros, so the stream stays framed,
//! and the reply queued behind the placement (if the server attached a [`CountPatch`])
//! is corrected to the bytes that really came from the file, with its end-of-file flag
//! set. The reply's bytes are still queued at that point: they follow the range.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Arc;

use tracing::debug;

use super::{is_disconnect, POOL_MAX};
use crate::mem_ptr::MemPtr;
use crate::tls::classify;
use crate::{CountPatch, TransportError};

/// Most iovecs handed to one writev.
const IOV_MAX: usize = 32;
/// Zeros that pad a file range the file no longer covers, sent from here in pieces.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// One unit of queued output.
pub(super) enum Out {
    Header {
        bytes: [u8; crate::frame::FRAME_HEADER_LEN],
        pos: usize,
    },
    Owned {
        buf: Vec<u8>,
        len: usize,
        pos: usize,
    },
    /// Bytes inside a registered region (client GET_RESP). Valid while the request that
    /// caused the GET is in flight: the client library pins the region until then.
    Mem {
        mem: MemPtr,
        pos: usize,
    },
    /// `len` bytes of a file from `offset`, sent with `sendfile(2)`. `reply` says where
    /// the count and end-of-file flag sit in the next queued message (the reply to this
    /// placement), to correct them if the file comes up short.
    File {
        file: Arc<OwnedFd>,
        offset: u64,
        len: usize,
        pos: usize,
        reply: Option<CountPatch>,
    },
    /// Padding for a file range cut short by the file shrinking.
    Zeros {
        left: usize,
    },
}

impl Out {
    /// The next bytes to write, or None for a file range (sent with `sendfile`).
    fn slice(&self) -> Option<&[u8]> {
        Some(match self {
            Out::Header { bytes, pos } => &bytes[*pos..],
            Out::Owned { buf, len, pos } => &buf[*pos..*len],
            // SAFETY: see `Out::Mem`: the registration contract keeps the region valid,
            // and unwritten, while the request that caused the GET is in flight.
            Out::Mem { mem, pos } => unsafe { mem.skip(*pos).as_slice() },
            Out::Zeros { left } => &ZEROS[..(*left).min(ZEROS.len())],
            Out::File { .. } => return None,
        })
    }
    fn remaining_len(&self) -> usize {
        match self {
            Out::File { len, pos, .. } => len - pos,
            Out::Zeros { left } => *left,
            o => o.slice().map_or(0, <[u8]>::len),
        }
    }
    fn advance(&mut self, n: usize) {
        match self {
            Out::Header { pos, .. }
            | Out::Owned { pos, .. }
            | Out::Mem { pos, .. }
            | Out::File { pos, .. } => *pos += n,
            Out::Zeros { left } => *left -= n,
        }
    }
}

/// Writev (and sendfile) as much as the kernel takes.
#[derive(Default)]
pub(super) struct OutQueue {
    pub(super) q: VecDeque<Out>,
    /// Bytes queued, file ranges included.
    pub(super) bytes: usize,
}

impl OutQueue {
    pub(super) fn push(&mut self, o: Out) {
        let n = o.remaining_len();
        self.bytes += n;
        if n > 0 {
            self.q.push_back(o);
        }
    }

    /// Attach `patch` to the file range queued last, which the message queued next
    /// answers. False if the last item is not a file range (nothing to correct).
    pub(super) fn patch_last_file(&mut self, patch: CountPatch) -> bool {
        match self.q.back_mut() {
            Some(Out::File { reply, .. }) => {
                *reply = Some(patch);
                true
            }
            _ => false,
        }
    }

    /// Returns Ok(true) when empty. Finished owned buffers go back to `pool`. Queues
    /// without file ranges only (the client's, and TLS connections').
    pub(super) fn flush<W: Write>(
        &mut self,
        w: &mut W,
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<bool, TransportError> {
        self.flush_files(w, None, pool)
    }

    /// As [`Self::flush`]; file ranges are sent with `sendfile` to `sock`, the plaintext
    /// socket `w` writes to.
    pub(super) fn flush_files<W: Write>(
        &mut self,
        w: &mut W,
        sock: Option<BorrowedFd<'_>>,
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<bool, TransportError> {
        while let Some(front) = self.q.front_mut() {
            if let Out::File { .. } = front {
                let sock = sock.expect("file ranges are queued only on plaintext sockets");
                if !self.send_file(sock)? {
                    return Ok(false);
                }
                continue;
            }
            let n = {
                // Up to the next file range, and no further than padding that takes
                // more than one piece of `ZEROS` (what follows it must wait).
                let mut iov: Vec<IoSlice> = Vec::with_capacity(IOV_MAX);
                for o in self.q.iter().take(IOV_MAX) {
                    let Some(s) = o.slice() else { break };
                    iov.push(IoSlice::new(s));
                    if s.len() < o.remaining_len() {
                        break;
                    }
                }
                match w.write_vectored(&iov) {
                    Ok(0) => return Err(TransportError::Closed),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if is_disconnect(&e) => return Err(TransportError::Closed),
                    Err(e) => return Err(classify(e)),
                }
            };
            self.bytes -= n;
            let mut left = n;
            while left > 0 {
                let front = self.q.front_mut().expect("written bytes belong to queued items");
                let r = front.remaining_len().min(front.slice().map_or(0, <[u8]>::len));
                if left >= r {
                    left -= r;
                    front.advance(r);
                    if front.remaining_len() == 0 {
                        if let Some(Out::Owned { buf, .. }) = self.q.pop_front() {
                            if pool.len() < POOL_MAX {
                                pool.push(buf);
                            }
                        }
                    }
                } else {
                    front.advance(left);
                    left = 0;
                }
            }
        }
        Ok(true)
    }

    /// Send the front file range with `sendfile`, resuming at its file offset. Ok(false)
    /// when the socket would block.
    fn send_file(&mut self, sock: BorrowedFd<'_>) -> Result<bool, TransportError> {
        let Some(Out::File { file, offset, len, pos, reply }) = self.q.front_mut() else {
            unreachable!("called with a file range in front");
        };
        while *pos < *len {
            let mut at = *offset + *pos as u64;
            match rustix::fs::sendfile(sock, &**file, Some(&mut at), *len - *pos) {
                Ok(0) => {
                    // End of file before the range's end: the file shrank after the
                    // placement was queued.
                    let (real, left, patch) = (*pos, *len - *pos, reply.take());
                    debug!(real, padded = left, "file shrank under a queued placement; padding");
                    self.q[0] = Out::Zeros { left };
                    if let Some(p) = patch {
                        self.correct_reply(p, real);
                    }
                    return Ok(true);
                }
                Ok(n) => {
                    debug_assert_eq!(at, *offset + (*pos + n) as u64);
                    *pos += n;
                    self.bytes -= n;
                }
                Err(e) if e == rustix::io::Errno::AGAIN => return Ok(false),
                Err(e) if e == rustix::io::Errno::INTR => continue,
                Err(e) => {
                    let e = io::Error::from(e);
                    return Err(if is_disconnect(&e) { TransportError::Closed } else { e.into() });
                }
            }
        }
        self.q.pop_front();
        Ok(true)
    }

    /// The file range just cut short carried `real` bytes of the file: correct the reply
    /// queued behind it (the first owned message after the front, not yet written).
    fn correct_reply(&mut self, p: CountPatch, real: usize) {
        let reply = self.q.iter_mut().skip(1).find_map(|o| match o {
            Out::Owned { buf, len, pos } => Some((buf, *len, *pos)),
            _ => None,
        });
        let Some((buf, len, pos)) = reply else { return };
        assert!(pos == 0, "a reply behind an unsent placement is unsent");
        assert!(p.count_at + 4 <= len && p.eof_at + 4 <= len, "patch inside the reply");
        let real = u32::try_from(real).expect("placements are below 4 GiB");
        buf[p.count_at..p.count_at + 4].copy_from_slice(&real.to_le_bytes());
        buf[p.eof_at..p.eof_at + 4].copy_from_slice(&1u32.to_le_bytes());
    }
}
