//! Data I/O on open files: inline reads and writes (data in the message), direct reads
//! and writes (data placed into or pulled from the client's registered memory), COMMIT
//! and cache hints. Storage I/O uses explicit offsets (`pread`/`pwrite`), never a
//! shared file position.

use dafs_transport::ServerConn as _;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

use dafs_proto::types::cache_hint;
use dafs_proto::{Header, RemoteRegion, Reply, Status, HEADER_LEN};
use dafs_transport::{PutError, TransportError};
use rustix::fs as rfs;
use tracing::debug;

use super::Outcome;
use crate::conn::pending::{PendingWrite, WriteTarget};
use crate::conn::Conn;
use crate::fsops::{self, st};
use crate::Shared;

/// Room a READ_INLINE reply needs besides its data: the eof flag and its pad (8 bytes)
/// and the data's heap reference (8) — 16 bytes, with a margin.
const READ_INLINE_REPLY_FIXED_BYTES: usize = 64;

impl Conn {
    /// READ_INLINE: the data goes into `data`, which the reply borrows.
    pub(super) fn read_inline<'a>(
        &self,
        sh: &Shared,
        data: &'a mut Vec<u8>,
        open_id: u64,
        offset: u64,
        len: u32,
    ) -> Result<Reply<'a>, Status> {
        let max = self.t.msg_size_bytes_max() - HEADER_LEN - READ_INLINE_REPLY_FIXED_BYTES;
        if len as usize > max {
            return Err(Status::MsgTooBig);
        }
        let of = self.session().open_file(open_id, true)?;
        data.resize(len as usize, 0);
        let n = fsops::pread_full(of.fd.as_fd(), &mut data[..len as usize], offset)
            .map_err(fsops::io_st)?;
        sh.stats.bytes_read.fetch_add(n as u64, Relaxed);
        sh.stats.inline_bytes.fetch_add(n as u64, Relaxed);
        Ok(Reply::ReadInline { eof: n < len as usize, data: &data[..n] })
    }

    pub(super) fn write_inline(
        &self,
        sh: &Shared,
        open_id: u64,
        offset: u64,
        stable: bool,
        data: &[u8],
    ) -> Result<Reply<'static>, Status> {
        let of = self.session().open_file(open_id, false)?;
        check_range(offset, data.len() as u64)?;
        let (n, off) = write_at(of.fd.as_fd(), data, offset, of.append.as_deref())?;
        if stable {
            rfs::fdatasync(&of.fd).map_err(st)?;
        }
        sh.stats.bytes_written.fetch_add(n as u64, Relaxed);
        sh.stats.inline_bytes.fetch_add(n as u64, Relaxed);
        Ok(Reply::Write { count: n as u32, stable, offset: off })
    }

    /// READ_DIRECT: place the file's bytes into the client's region (`put_file`: from
    /// the page cache where the provider can); the reply is queued behind the placement.
    pub(super) fn read_direct(
        &mut self,
        sh: &Shared,
        open_id: u64,
        offset: u64,
        len: u32,
        region: RemoteRegion,
    ) -> Result<Reply<'static>, Status> {
        if len > sh.cfg.direct_bytes_max {
            return Err(Status::Inval);
        }
        let s = self.session.as_ref().expect("dispatch checked the session");
        let of = s.open_file(open_id, true)?;
        let n = if !self.in_chain && self.t.sends_files(len as usize) {
            // The provider sends the range from the page cache after the reply is
            // queued; `respond` then queues the reply with `send_file_reply`.
            let n = self.t.put_file(region, len as usize, &of.fd, offset);
            self.file_reply = n.is_ok();
            n
        } else {
            // Copied by this worker, with the copy engines' help when large and alone:
            // with jobs of this session in the I/O pool the cores are busy already, and
            // splitting would only add a third copier to them.
            let fd = of.fd.as_fd();
            let alone = self.inflight.is_empty();
            self.t.put(region, len as usize, &mut |dst| {
                if alone {
                    sh.copy.pread(dst, fd, offset)
                } else {
                    dst.pread_from(fd, offset)
                }
            })
        }
        .map_err(placement_status)?;
        sh.stats.bytes_read.fetch_add(n as u64, Relaxed);
        sh.stats.direct_bytes.fetch_add(n as u64, Relaxed);
        Ok(Reply::ReadDirect { count: n as u32, eof: n < len as usize })
    }

    /// WRITE_DIRECT: written at once from the client's pages where the provider reaches
    /// them (shared memory); otherwise a pull is issued and the write waits for its data
    /// (`Outcome::Pending`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_direct(
        &mut self,
        sh: &Shared,
        h: &Header,
        open_id: u64,
        offset: u64,
        len: u32,
        stable: bool,
        region: RemoteRegion,
    ) -> Result<Outcome<'static>, Status> {
        if len > sh.cfg.direct_bytes_max {
            return Err(Status::Inval);
        }
        let s = self.session.as_ref().expect("dispatch checked the session");
        let of = s.open_file(open_id, false)?;
        check_range(offset, len as u64)?;
        if len == 0 {
            return Ok(Outcome::Reply(Reply::Write { count: 0, stable, offset }));
        }
        // Providers that reach client memory directly (shared memory) let us
        // pwrite straight from it: one copy in total.
        let (fd, append) = (of.fd.as_fd(), of.append.clone());
        let mut at = offset;
        let r = self.t.pull_sync(region, len as usize, &mut |src| {
            let (n, off) = write_at(fd, src, offset, append.as_deref())
                .map_err(|s| std::io::Error::from_raw_os_error(s.to_errno()))?;
            at = off;
            Ok(n)
        });
        match r {
            Ok(Some(n)) => {
                if stable {
                    rfs::fdatasync(fd).map_err(st)?;
                }
                sh.stats.bytes_written.fetch_add(n as u64, Relaxed);
                sh.stats.direct_bytes.fetch_add(n as u64, Relaxed);
                return Ok(Outcome::Reply(Reply::Write { count: n as u32, stable, offset: at }));
            }
            Ok(None) => {}
            Err(e) => return Err(placement_status(e)),
        }
        let (fd, append, file) = (of.fd.clone(), of.append.clone(), of.file);
        let tag = self.take_tag();
        match self.t.pull(region, len as usize, tag) {
            Ok(()) => Ok(Outcome::Pending(
                tag,
                PendingWrite {
                    hdr: *h,
                    target: WriteTarget::File(fd),
                    offset,
                    stable,
                    append,
                    file,
                    batch: None,
                },
            )),
            Err(TransportError::BadRegion) => Err(Status::BadRegion),
            Err(e) => {
                debug!("pull failed: {e}");
                Err(Status::TransferFailed)
            }
        }
    }

    pub(super) fn commit(&self, open_id: u64) -> Result<Reply<'static>, Status> {
        let of = self.session().opens.get(&open_id).ok_or(Status::BadOpenId)?;
        rfs::fsync(&of.fd).map_err(st)?;
        Ok(Reply::Empty)
    }

    pub(super) fn cache_hint(
        &self,
        open_id: u64,
        offset: u64,
        len: u64,
        hint: u32,
    ) -> Result<Reply<'static>, Status> {
        let of = self.session().opens.get(&open_id).ok_or(Status::BadOpenId)?;
        let advice = match hint {
            cache_hint::SEQUENTIAL => rfs::Advice::Sequential,
            cache_hint::RANDOM => rfs::Advice::Random,
            cache_hint::WILL_NEED => rfs::Advice::WillNeed,
            cache_hint::DONT_NEED => rfs::Advice::DontNeed,
            cache_hint::NO_REUSE => rfs::Advice::NoReuse,
            _ => rfs::Advice::Normal,
        };
        rfs::fadvise(&of.fd, offset, len, advice).map_err(st)?;
        Ok(Reply::Empty)
    }
}

/// The status for a failed placement or pull: the file's error, a region the client
/// did not register for it, or a transport failure (nothing was written to the file).
pub(in crate::conn) fn placement_status(e: PutError) -> Status {
    match e {
        PutError::Fill(e) => fsops::io_st(e),
        PutError::Transport(TransportError::BadRegion) => Status::BadRegion,
        PutError::Transport(e) => {
            debug!("direct transfer failed: {e}");
            Status::TransferFailed
        }
    }
}

/// pwrite, or — for an append-mode open — an atomic append: under the file's append
/// lock, at the end of file. Returns (bytes, offset written at).
pub(in crate::conn) fn write_at<'a>(
    fd: BorrowedFd,
    data: impl Into<dafs_transport::PlacementSrc<'a>>,
    offset: u64,
    append: Option<&Mutex<()>>,
) -> Result<(usize, u64), Status> {
    // A source, not a `&[u8]`: with shared memory the bytes are the client's, which it
    // may write meanwhile; `pwrite_to` lets the kernel copy them without a reference.
    let data = data.into();
    match append {
        None => Ok((data.pwrite_to(fd, offset).map_err(fsops::io_st)?, offset)),
        Some(lock) => {
            let _g = lock.lock().unwrap_or_else(|e| e.into_inner());
            let end = fsops::fstat(fd)?.st_size as u64;
            check_range(end, data.len() as u64)?;
            Ok((data.pwrite_to(fd, end).map_err(fsops::io_st)?, end))
        }
    }
}

fn check_range(offset: u64, len: u64) -> Result<(), Status> {
    // Files are limited to i64::MAX bytes; refuse ranges beyond, instead of letting the
    // kernel answer with something less clear.
    match offset.checked_add(len) {
        Some(end) if end <= i64::MAX as u64 => Ok(()),
        _ => Err(Status::FBig),
    }
}
