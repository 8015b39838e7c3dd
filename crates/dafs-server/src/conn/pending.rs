//! Requests waiting for data pulled from the client (a provider without synchronous
//! pulls: TCP): WRITE_DIRECTs and the write pieces of a BATCH_IO. Their slots stay busy
//! until the data has arrived and been written; then `on_pulled` answers them through
//! the same `respond` as every other request.

use dafs_transport::ServerConn as _;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use dafs_proto::{Header, Reply, Status};
use dafs_transport::TransportError;
use rustix::fs as rfs;
use tracing::debug;

use super::ops::{batch_reply, write_at};
use super::parallel::Plan;
use super::reply::SlotUse;
use super::{Conn, ConnFate, Scratch};
use crate::fsops::{st, FsResult};
use crate::Shared;

/// Where a pulled write goes: a file of this node, or a proxied open (its open id; the
/// file is at its home node, see `forward`).
pub(super) enum WriteTarget {
    File(Arc<OwnedFd>),
    Proxied(u64),
}

/// A WRITE_DIRECT waiting for its data to be pulled from the client.
pub(super) struct PendingWrite {
    pub(super) hdr: Header,
    pub(super) target: WriteTarget,
    pub(super) offset: u64,
    pub(super) stable: bool,
    pub(super) append: Option<Arc<Mutex<()>>>,
    /// (dev, ino) of the file: parallel requests overlapping the write finish first.
    pub(super) file: (u64, u64),
    /// Part of a BATCH_IO: (batch tag, I/O index) — the reply is the batch's.
    pub(super) batch: Option<(u64, usize)>,
}

/// A BATCH_IO whose writes are still being pulled (TCP): results so far.
pub(super) struct PendingBatch {
    pub(super) hdr: Header,
    pub(super) flags: u32,
    pub(super) results: Vec<(Status, u64)>,
    pub(super) pulls_left: usize,
}

impl Conn {
    pub(super) fn on_pulled(
        &mut self,
        sh: &Shared,
        sc: &mut Scratch,
        tag: u64,
        data: Result<Vec<u8>, TransportError>,
    ) -> ConnFate {
        let Some(p) = self.pending.remove(&tag) else {
            // The session that asked for it has ended (SESSION_DESTROY): drop the data.
            debug!("pull completion for a write whose session ended; dropped");
            if let Ok(buf) = data {
                self.t.recycle(buf);
            }
            return ConnFate::Keep;
        };
        let mut data = data;
        // A proxied write goes to its home node as it is (see `forward`).
        let local = matches!(p.target, WriteTarget::File(_));
        if local {
            if let Ok(buf) = data {
                let len = buf.len() as u64;
                data = match self.try_parallel_pulled(sh, &mut sc.out, &p, buf) {
                    Ok(()) => return ConnFate::Keep,
                    Err(buf) => Ok(buf),
                };
                // Written here: after the overlapping parallel writes of its session.
                let plan = match p.append {
                    Some(_) => Plan::Barrier,
                    None => {
                        let end = p.offset.saturating_add(len);
                        Plan::Data { file: p.file, start: p.offset, end, write: true }
                    }
                };
                self.order(sh, &mut sc.out, &plan);
            }
        }
        if let (Ok(_), WriteTarget::Proxied(open_id)) = (&data, &p.target) {
            // Sent on to the home by a forwarding job, which answers the request.
            let buf = data.expect("matched Ok");
            let r = self.forward_pulled_write(sh, &p.hdr, *open_id, p.offset, buf, p.stable);
            return match r {
                Ok(()) => ConnFate::Keep,
                Err(e) => {
                    let reply = Reply::Error(e);
                    self.respond(sh, &mut sc.out, &p.hdr, &reply, SlotUse::Complete)
                }
            };
        }
        let result: FsResult<(usize, u64)> = match (&data, &p.target) {
            (Err(_), _) => Err(Status::BadRegion),
            (Ok(_), WriteTarget::Proxied(_)) => unreachable!("forwarded above"),
            (Ok(buf), WriteTarget::File(fd)) => {
                write_at(fd.as_fd(), buf, p.offset, p.append.as_deref()).and_then(|(n, off)| {
                    if p.stable {
                        rfs::fdatasync(fd).map_err(st)?;
                    }
                    sh.stats.bytes_written.fetch_add(n as u64, Relaxed);
                    sh.stats.direct_bytes.fetch_add(n as u64, Relaxed);
                    Ok((n, off))
                })
            }
        };
        if let Ok(buf) = data {
            self.t.recycle(buf);
        }
        if let Some((btag, idx)) = p.batch {
            let Some(b) = self.batches.get_mut(&btag) else { return ConnFate::Keep };
            match result {
                Ok((n, _)) => b.results[idx].1 += n as u64,
                Err(e) => {
                    if b.results[idx].0 == Status::Ok {
                        b.results[idx].0 = e;
                    }
                }
            }
            // One completion per pull issued: one more would be a transport bug.
            assert!(b.pulls_left > 0, "pull completion for a batch with no pulls left");
            b.pulls_left -= 1;
            if b.pulls_left > 0 {
                return ConnFate::Keep;
            }
            let b = self.batches.remove(&btag).unwrap();
            let reply = batch_reply(b.flags, &b.results, &mut sc.bufs.held);
            return self.respond(sh, &mut sc.out, &b.hdr, &reply, SlotUse::Complete);
        }
        let reply = match result {
            Ok((n, off)) => Reply::Write { count: n as u32, stable: p.stable, offset: off },
            Err(e) => Reply::Error(e),
        };
        self.respond(sh, &mut sc.out, &p.hdr, &reply, SlotUse::Complete)
    }
}
