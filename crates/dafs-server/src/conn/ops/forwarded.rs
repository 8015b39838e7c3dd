//! Requests carried out at another node (round-robin placement, see `crate::forward`):
//! names forwarded by path, and the I/O of proxied opens (opens made at the home on
//! behalf of this session), answered here like any other request.

use dafs_transport::ServerConn as _;
use std::sync::atomic::Ordering::Relaxed;

use dafs_proto::types::open_flags;
use dafs_proto::{FileType, Header, Reply, Request, Status, HEADER_LEN};
use dafs_transport::TransportError;
use tracing::debug;

use super::io::placement_status;
use super::{grace, Outcome};
use crate::cluster::Forward;
use crate::conn::pending::{PendingWrite, WriteTarget};
use crate::conn::reply::ReplyBufs;
use crate::conn::Conn;
use crate::forward::{Forwarder, ProxyFile};
use crate::Shared;

/// Room a READ_INLINE reply needs besides its data (as for a local read).
const READ_INLINE_REPLY_FIXED_BYTES: usize = 64;

fn forwarder(sh: &Shared) -> Result<&Forwarder, Status> {
    sh.cfg.cluster.as_ref().and_then(|n| n.forwarder.as_ref()).ok_or(Status::ServerFault)
}

impl Conn {
    /// Whether `req` is I/O on a proxied open of this session.
    pub(super) fn is_proxied(&self, req: &Request) -> bool {
        use Request as R;
        let id = match req {
            R::ReadInline { open_id, .. }
            | R::WriteInline { open_id, .. }
            | R::ReadDirect { open_id, .. }
            | R::WriteDirect { open_id, .. }
            | R::Commit { open_id, .. }
            | R::CacheHint { open_id, .. }
            | R::Close { open_id }
            | R::Publish { open_id }
            | R::BatchIo { open_id, .. } => *open_id,
            _ => return false,
        };
        self.session.as_ref().is_some_and(|s| s.proxied.contains_key(&id))
    }

    fn proxy(&self, open_id: u64, for_read: bool) -> Result<&ProxyFile, Status> {
        let p = self.session().proxied.get(&open_id).ok_or(Status::BadOpenId)?;
        if (for_read && !p.read) || (!for_read && !p.write) {
            return Err(Status::OpenMode);
        }
        Ok(p)
    }

    /// A name request forwarded to its home (`check_request` said where).
    pub(super) fn forward(
        &mut self,
        sh: &Shared,
        req: Request,
        fw: Forward,
    ) -> Result<Reply<'static>, Status> {
        let f = forwarder(sh)?;
        // Paths travel as text in the client library; a name that is not UTF-8 cannot
        // be forwarded (it can be reached at its home directly).
        let path = std::str::from_utf8(fw.path.as_bytes()).map_err(|_| Status::BadName)?;
        use Request as R;
        Ok(match req {
            R::Lookup { follow, .. } => {
                let (fh, attr) = f.lookup(&fw.home, path, follow)?;
                Reply::Handle { fh, attr }
            }
            R::Create { ftype: FileType::Regular, mode, exclusive, .. } => {
                let (fh, attr) = f.create_file(&fw.home, path, mode, exclusive)?;
                Reply::Handle { fh, attr }
            }
            R::Remove { .. } => {
                grace::refuse_in_grace(sh)?;
                f.remove(&fw.home, path)?;
                Reply::Empty
            }
            R::Open { flags, mode, key, .. } => {
                // A proxied open is not recorded for reclaim, nor can it be published:
                // those need the file on this node.
                if flags & (open_flags::RECLAIM | open_flags::UNLINKED) != 0 {
                    return Err(Status::NotSupp);
                }
                let s = self.session();
                if s.opens.len() + s.proxied.len() >= sh.fd_budget.open_files_per_session_max {
                    sh.stats.limit_refusals.fetch_add(1, Relaxed);
                    return Err(Status::Limit);
                }
                let p = f.open(&fw.home, path, flags, mode, key)?;
                let (fh, attr) = (p.fh(), p.attr());
                let s = self.session_mut();
                let open_id = s.next_open_id;
                s.next_open_id += 1;
                s.proxied.insert(open_id, p);
                Reply::Open { open_id, fh, attr }
            }
            // Symlinks, device nodes and files of other types are made at the home.
            _ => return Err(Status::WrongNode),
        })
    }

    /// I/O on a proxied open (`is_proxied` said so).
    pub(super) fn proxied_io<'a>(
        &mut self,
        sh: &Shared,
        bufs: &'a mut ReplyBufs,
        h: &Header,
        req: Request,
    ) -> Result<Outcome<'a>, Status> {
        let f = forwarder(sh)?;
        use Request as R;
        let reply = match req {
            R::ReadInline { open_id, offset, len } => {
                let max = self.t.msg_size_bytes_max() - HEADER_LEN - READ_INLINE_REPLY_FIXED_BYTES;
                if len as usize > max {
                    return Err(Status::MsgTooBig);
                }
                let eof =
                    f.read(self.proxy(open_id, true)?, offset, len as usize, &mut bufs.data)?;
                sh.stats.bytes_read.fetch_add(bufs.data.len() as u64, Relaxed);
                Reply::ReadInline { eof, data: &bufs.data }
            }
            R::WriteInline { open_id, offset, stable, data } => {
                let (n, off) = f.write(self.proxy(open_id, false)?, offset, data, stable)?;
                sh.stats.bytes_written.fetch_add(n as u64, Relaxed);
                Reply::Write { count: n as u32, stable, offset: off }
            }
            R::ReadDirect { open_id, offset, len, region } => {
                if len > sh.cfg.direct_bytes_max {
                    return Err(Status::Inval);
                }
                let mut buf = std::mem::take(&mut bufs.data);
                let r = f.read(self.proxy(open_id, true)?, offset, len as usize, &mut buf);
                let placed = r.and_then(|_| {
                    self.t
                        .put(region, buf.len(), &mut |dst| Ok(dst.copy_from(&buf)))
                        .map_err(placement_status)
                });
                bufs.data = buf;
                let n = placed?;
                sh.stats.bytes_read.fetch_add(n as u64, Relaxed);
                Reply::ReadDirect { count: n as u32, eof: n < len as usize }
            }
            R::WriteDirect { open_id, offset, len, stable, region } => {
                if len > sh.cfg.direct_bytes_max {
                    return Err(Status::Inval);
                }
                self.proxy(open_id, false)?;
                return self.proxied_write_direct(sh, h, open_id, offset, len, stable, region);
            }
            R::Commit { open_id, .. } => {
                f.commit(self.session().proxied.get(&open_id).ok_or(Status::BadOpenId)?)?;
                Reply::Empty
            }
            // Hints concern the home's page cache: not worth a round trip.
            R::CacheHint { .. } => Reply::Empty,
            R::Close { open_id } => {
                let p = self.session_mut().proxied.remove(&open_id).ok_or(Status::BadOpenId)?;
                f.close(p)?;
                Reply::Empty
            }
            _ => return Err(Status::NotSupp), // PUBLISH, BATCH_IO
        };
        Ok(Outcome::Reply(reply))
    }

    #[allow(clippy::too_many_arguments)]
    fn proxied_write_direct(
        &mut self,
        sh: &Shared,
        h: &Header,
        open_id: u64,
        offset: u64,
        len: u32,
        stable: bool,
        region: dafs_proto::RemoteRegion,
    ) -> Result<Outcome<'static>, Status> {
        if len == 0 {
            return Ok(Outcome::Reply(Reply::Write { count: 0, stable, offset }));
        }
        // Shared memory: the bytes are reachable now; copied out, then sent on.
        let mut data = Vec::new();
        let r = self.t.pull_sync(region, len as usize, &mut |src| {
            src.append_to(&mut data);
            Ok(src.len())
        });
        match r {
            Ok(Some(_)) => {
                let (n, off) = self.proxied_write(sh, open_id, offset, &data, stable)?;
                return Ok(Outcome::Reply(Reply::Write { count: n as u32, stable, offset: off }));
            }
            Ok(None) => {}
            Err(e) => return Err(placement_status(e)),
        }
        let tag = self.take_tag();
        match self.t.pull(region, len as usize, tag) {
            Ok(()) => Ok(Outcome::Pending(
                tag,
                PendingWrite {
                    hdr: *h,
                    target: WriteTarget::Proxied(open_id),
                    offset,
                    stable,
                    append: None,
                    // Not a file of this node: never ordered against its parallel
                    // requests (a proxied write is written at its home).
                    file: (u64::MAX, open_id),
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

    /// Write pulled bytes through a proxied open: (bytes, offset written at).
    pub(in crate::conn) fn proxied_write(
        &self,
        sh: &Shared,
        open_id: u64,
        offset: u64,
        data: &[u8],
        stable: bool,
    ) -> Result<(usize, u64), Status> {
        let f = forwarder(sh)?;
        let r = f.write(self.proxy(open_id, false)?, offset, data, stable)?;
        sh.stats.bytes_written.fetch_add(r.0 as u64, Relaxed);
        Ok(r)
    }
}
