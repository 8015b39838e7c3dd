//! BATCH_IO: many direct I/Os on one open file in one request, each a list of file
//! segments and a list of memory segments walked side by side.

use dafs_transport::ServerConn as _;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering::Relaxed;

use dafs_proto::types::{batch_flags, BatchResult};
use dafs_proto::{Header, RemoteRegion, Reply, Status};
use tracing::debug;

use super::io::{placement_status, write_at};
use super::Outcome;
use crate::conn::pending::{PendingBatch, PendingWrite, WriteTarget};
use crate::conn::reply::ReplyBufs;
use crate::conn::Conn;
use crate::Shared;

impl Conn {
    /// Run a batch. Reads `put` each piece; writes pull it synchronously where the
    /// provider can (shared memory), else the pulls are issued and the batch waits for
    /// them (`Outcome::Deferred`; `on_pulled` answers it when the last piece is written).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn batch_io<'a>(
        &mut self,
        sh: &Shared,
        bufs: &'a mut ReplyBufs,
        h: &Header,
        open_id: u64,
        flags: u32,
        count: u32,
        ios: &[u8],
    ) -> Result<Outcome<'a>, Status> {
        if count > sh.cfg.batch_max {
            return Err(Status::TooMany);
        }
        let ios = dafs_proto::types::parse_batch(ios, count, sh.cfg.direct_bytes_max as u64)
            .map_err(|_| Status::BadXdr)?;
        let (fd, read_ok, write_ok, append, file) = {
            let of = self.session().opens.get(&open_id).ok_or(Status::BadOpenId)?;
            if !of.regular {
                return Err(Status::NxIo);
            }
            (of.fd.clone(), of.read, of.write, of.append.clone(), of.file)
        };
        let btag = self.take_tag();
        let mut results = vec![(Status::Ok, 0u64); ios.len()];
        let mut pulls: Vec<(u64, PendingWrite, RemoteRegion, usize)> = Vec::new();
        for (i, io) in ios.iter().enumerate() {
            if (io.write && !write_ok) || (!io.write && !read_ok) {
                results[i].0 = Status::OpenMode;
                continue;
            }
            // Walk the file segments and the memory segments side by side.
            let (mut fi, mut foff, mut mi, mut moff) = (0usize, 0u64, 0usize, 0u64);
            'io: while fi < io.file.len() && mi < io.mem.len() {
                let (fstart, flen) = io.file[fi];
                let (region, mlen) = io.mem[mi];
                let piece = (flen - foff).min(mlen - moff);
                if piece > 0 {
                    let at = fstart + foff;
                    let mr = RemoteRegion {
                        key: region.key,
                        offset: region.offset.checked_add(moff).ok_or(Status::BadRegion)?,
                    };
                    if io.write {
                        match self.t.pull_sync(mr, piece as usize, &mut |src| {
                            write_at(fd.as_fd(), src, at, append.as_deref())
                                .map(|(n, _)| n)
                                .map_err(|s| std::io::Error::from_raw_os_error(s.to_errno()))
                        }) {
                            Ok(Some(n)) => results[i].1 += n as u64,
                            Ok(None) => {
                                let tag = self.take_tag();
                                pulls.push((
                                    tag,
                                    PendingWrite {
                                        hdr: *h,
                                        target: WriteTarget::File(fd.clone()),
                                        offset: at,
                                        stable: false,
                                        append: append.clone(),
                                        file,
                                        batch: Some((btag, i)),
                                    },
                                    mr,
                                    piece as usize,
                                ));
                            }
                            Err(e) => {
                                results[i].0 = placement_status(e);
                                break 'io;
                            }
                        }
                    } else {
                        match self
                            .t
                            .put(mr, piece as usize, &mut |dst| dst.pread_from(fd.as_fd(), at))
                        {
                            Ok(n) => {
                                results[i].1 += n as u64;
                                if (n as u64) < piece {
                                    break 'io; // end of file
                                }
                            }
                            Err(e) => {
                                results[i].0 = placement_status(e);
                                break 'io;
                            }
                        }
                    }
                }
                foff += piece;
                moff += piece;
                if foff == flen {
                    fi += 1;
                    foff = 0;
                }
                if moff == mlen {
                    mi += 1;
                    moff = 0;
                }
            }
        }
        let bytes: u64 = results.iter().map(|r| r.1).sum();
        sh.stats.direct_bytes.fetch_add(bytes, Relaxed);
        if pulls.is_empty() {
            return Ok(Outcome::Reply(batch_reply(flags, &results, &mut bufs.held)));
        }
        // Writes over a provider without synchronous pulls (TCP): finish when every
        // piece has arrived.
        let n = pulls.len();
        for (tag, pw, mr, len) in pulls {
            if let Err(e) = self.t.pull(mr, len, tag) {
                debug!("batch pull failed: {e}");
                return Err(Status::TransferFailed);
            }
            self.pending.insert(tag, pw);
        }
        self.batches.insert(btag, PendingBatch { hdr: *h, flags, results, pulls_left: n });
        Ok(Outcome::Deferred)
    }
}

/// A batch's reply: the result of every I/O (only the failed ones with ERRORS_ONLY),
/// packed into `held`, which the reply borrows.
pub(in crate::conn) fn batch_reply<'a>(
    flags: u32,
    results: &[(Status, u64)],
    held: &'a mut Vec<u8>,
) -> Reply<'a> {
    held.clear();
    let mut n = 0;
    for (i, (status, count)) in results.iter().enumerate() {
        if flags & batch_flags::ERRORS_ONLY != 0 && *status == Status::Ok {
            continue;
        }
        BatchResult { index: i as u32, status: *status, count: *count }.pack(held);
        n += 1;
    }
    Reply::Batch { count: n, results: held }
}
