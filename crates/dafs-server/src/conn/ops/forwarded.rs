//! Requests carried out at another node (round-robin placement, see `crate::forward`):
//! names forwarded by path, and the requests on proxied opens (opens made at the home on
//! behalf of this session: I/O, COMMIT, CLOSE, and GETATTR/SETATTR/locks by the open's
//! handle). Each becomes a job on the forwarding threads (`conn::forwarding`) and is
//! answered when it is done; nothing here waits for the home.
//!
//! Not inside a CHAIN: a chain's elements run one after another on the worker, so an
//! element for a file homed elsewhere answers `WRONG_NODE` (names; the client sends
//! the chain to the home) or `NOT_CHAINABLE` (a proxied open).

use dafs_transport::ServerConn as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use dafs_proto::types::{lock_type, open_flags};
use dafs_proto::{FileHandle, FileType, Header, Reply, Request, Status, HEADER_LEN};
use dafs_transport::TransportError;
use tracing::debug;

use super::io::placement_status;
use super::{grace, Outcome};
use crate::cluster::Forward;
use crate::conn::forwarding::FwdOk;
use crate::conn::pending::{PendingWrite, WriteTarget};
use crate::conn::Conn;
use crate::forward::{LockOp, ProxyFile};
use crate::Shared;

/// Room a READ_INLINE reply needs besides its data (as for a local read).
const READ_INLINE_REPLY_FIXED_BYTES: usize = 64;

impl Conn {
    /// Whether `req` is a request on a proxied open of this session: by open id, or by
    /// the open's handle (the home's) for attributes and locks.
    pub(super) fn is_proxied(&self, req: &Request) -> bool {
        use Request as R;
        let Some(s) = self.session.as_ref().filter(|s| !s.proxied.is_empty()) else {
            return false;
        };
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
            R::GetAttr { fh }
            | R::SetAttr { fh, .. }
            | R::Lock { fh, .. }
            | R::LockTest { fh, .. }
            | R::Unlock { fh, .. } => return self.proxy_by_fh(fh).is_some(),
            _ => return false,
        };
        s.proxied.contains_key(&id)
    }

    fn proxy(&self, open_id: u64, for_read: bool) -> Result<Arc<ProxyFile>, Status> {
        let p = self.session().proxied.get(&open_id).ok_or(Status::BadOpenId)?;
        if (for_read && !p.read) || (!for_read && !p.write) {
            return Err(Status::OpenMode);
        }
        Ok(Arc::clone(p))
    }

    /// A proxied open of this session whose file has handle `fh` at its home.
    fn proxy_by_fh(&self, fh: &FileHandle) -> Option<Arc<ProxyFile>> {
        let s = self.session.as_ref()?;
        s.proxied.values().find(|p| p.fh() == *fh).cloned()
    }

    /// A name request forwarded to its home (`check_request` said where).
    pub(super) fn forward(
        &mut self,
        sh: &Shared,
        h: &Header,
        req: Request,
        fw: Forward,
    ) -> Result<Outcome<'static>, Status> {
        if self.in_chain {
            return Err(Status::WrongNode);
        }
        // Paths travel as text in the client library; a name that is not UTF-8 cannot
        // be forwarded (it can be reached at its home directly).
        let path = std::str::from_utf8(fw.path.as_bytes()).map_err(|_| Status::BadName)?;
        let (path, home) = (path.to_string(), fw.home);
        use Request as R;
        match req {
            R::Lookup { follow, .. } => self.submit_forward(sh, h, move |f| {
                let (fh, attr) = f.lookup(&home, &path, follow)?;
                Ok(FwdOk::Reply(Reply::Handle { fh, attr }))
            })?,
            R::Create { ftype: FileType::Regular, mode, exclusive, .. } => {
                self.submit_forward(sh, h, move |f| {
                    let (fh, attr) = f.create_file(&home, &path, mode, exclusive)?;
                    Ok(FwdOk::Reply(Reply::Handle { fh, attr }))
                })?
            }
            R::Remove { .. } => {
                grace::refuse_in_grace(sh)?;
                self.submit_forward(sh, h, move |f| {
                    f.remove(&home, &path)?;
                    Ok(FwdOk::Reply(Reply::Empty))
                })?
            }
            R::Open { flags, mode, key, .. } => {
                // A proxied open is not recorded for reclaim, nor can it be published:
                // those need the file on this node.
                if flags & (open_flags::RECLAIM | open_flags::UNLINKED) != 0 {
                    return Err(Status::NotSupp);
                }
                let s = self.session();
                // Opens still on their way count: each may become a proxied open.
                let opens = s.opens.len() + s.proxied.len() + self.forwards_inflight();
                if opens >= sh.fd_budget.open_files_per_session_max {
                    return Err(Status::Limit);
                }
                let (session, key) = (s.id, key.to_vec());
                self.submit_forward(sh, h, move |f| {
                    let proxy = f.open(&home, &path, flags, mode, &key)?;
                    Ok(FwdOk::Open { session, proxy: Box::new(proxy) })
                })?
            }
            // Symlinks, device nodes and files of other types are made at the home.
            _ => return Err(Status::WrongNode),
        }
        Ok(Outcome::Deferred)
    }

    /// A request on a proxied open (`is_proxied` said so).
    pub(super) fn proxied_io(
        &mut self,
        sh: &Shared,
        h: &Header,
        req: Request,
    ) -> Result<Outcome<'static>, Status> {
        if self.in_chain {
            return Err(Status::NotChainable);
        }
        use Request as R;
        match req {
            R::ReadInline { open_id, offset, len } => {
                let max = self.t.msg_size_bytes_max() - HEADER_LEN - READ_INLINE_REPLY_FIXED_BYTES;
                if len as usize > max {
                    return Err(Status::MsgTooBig);
                }
                let p = self.proxy(open_id, true)?;
                self.submit_forward(sh, h, move |f| {
                    let mut data = Vec::new();
                    let eof = f.read(&p, offset, len as usize, &mut data)?;
                    Ok(FwdOk::Read { data, eof, region: None })
                })?;
            }
            R::WriteInline { open_id, offset, stable, data } => {
                let p = self.proxy(open_id, false)?;
                self.submit_proxied_write(sh, h, p, offset, data.to_vec(), stable)?;
            }
            R::ReadDirect { open_id, offset, len, region } => {
                if len > sh.cfg.direct_bytes_max {
                    return Err(Status::Inval);
                }
                let p = self.proxy(open_id, true)?;
                self.submit_forward(sh, h, move |f| {
                    let mut data = Vec::new();
                    let eof = f.read(&p, offset, len as usize, &mut data)?;
                    Ok(FwdOk::Read { data, eof, region: Some(region) })
                })?;
            }
            R::WriteDirect { open_id, offset, len, stable, region } => {
                if len > sh.cfg.direct_bytes_max {
                    return Err(Status::Inval);
                }
                let p = self.proxy(open_id, false)?;
                return self.proxied_write_direct(sh, h, p, open_id, offset, len, stable, region);
            }
            R::Commit { open_id, .. } => {
                let p = self.session().proxied.get(&open_id).ok_or(Status::BadOpenId)?.clone();
                self.submit_forward(sh, h, move |f| {
                    f.commit(&p)?;
                    Ok(FwdOk::Reply(Reply::Empty))
                })?;
            }
            // Hints concern the home's page cache: not worth a round trip.
            R::CacheHint { .. } => return Ok(Outcome::Reply(Reply::Empty)),
            R::Close { open_id } => {
                // Gone from the session now (later requests get BAD_OPENID, as after a
                // local CLOSE); closed at the home after the open's earlier requests.
                // The session's reference goes first: the close must hold the last one.
                let p = self.session_mut().proxied.remove(&open_id).ok_or(Status::BadOpenId)?;
                let back = Arc::clone(&p);
                let r = self.submit_forward(sh, h, move |f| {
                    f.close(p)?;
                    Ok(FwdOk::Reply(Reply::Empty))
                });
                match r {
                    // Refused (DELAY): the open stays, for the client's retry.
                    Err(e) => {
                        self.session_mut().proxied.insert(open_id, back);
                        return Err(e);
                    }
                    Ok(()) => drop(back),
                }
            }
            R::GetAttr { fh } => {
                let p = self.proxy_by_fh(&fh).ok_or(Status::Stale)?;
                self.submit_forward(sh, h, move |f| {
                    Ok(FwdOk::Reply(Reply::Attr { attr: f.getattr(&p)? }))
                })?;
            }
            R::SetAttr { fh, set } => {
                let p = self.proxy_by_fh(&fh).ok_or(Status::Stale)?;
                self.submit_forward(sh, h, move |f| {
                    Ok(FwdOk::Reply(Reply::Attr { attr: f.setattr(&p, set)? }))
                })?;
            }
            R::Lock { fh, offset, len, ltype, flags } => {
                if flags != 0 {
                    // Reclaim after a restart concerns locks of this node's files.
                    return Err(Status::NotSupp);
                }
                let op = LockOp::Lock { exclusive: exclusive(ltype)? };
                self.submit_lock(sh, h, &fh, op, offset, len)?;
            }
            R::LockTest { fh, offset, len, ltype } => {
                let op = LockOp::Test { exclusive: exclusive(ltype)? };
                self.submit_lock(sh, h, &fh, op, offset, len)?;
            }
            R::Unlock { fh, offset, len } => {
                self.submit_lock(sh, h, &fh, LockOp::Unlock, offset, len)?;
            }
            _ => return Err(Status::NotSupp), // PUBLISH, BATCH_IO
        }
        Ok(Outcome::Deferred)
    }

    fn submit_lock(
        &mut self,
        sh: &Shared,
        h: &Header,
        fh: &FileHandle,
        op: LockOp,
        offset: u64,
        len: u64,
    ) -> Result<(), Status> {
        let p = self.proxy_by_fh(fh).ok_or(Status::Stale)?;
        let owner = self.session().id;
        self.submit_forward(sh, h, move |f| {
            let found = f.lock(owner, &p, op, offset, len)?;
            Ok(FwdOk::Reply(match (op, found) {
                (LockOp::Test { .. }, Some(l)) => Reply::LockTest {
                    conflict: true,
                    ltype: if l.exclusive { lock_type::EXCLUSIVE } else { lock_type::SHARED },
                    owner: l.owner,
                    offset: l.offset,
                    len: l.len,
                },
                (LockOp::Test { .. }, None) => {
                    Reply::LockTest { conflict: false, ltype: 0, owner: 0, offset: 0, len: 0 }
                }
                _ => Reply::Empty,
            }))
        })
    }

    /// Send `data` on to the home through proxied open `p` (a job); answers `h`.
    pub(in crate::conn) fn submit_proxied_write(
        &mut self,
        sh: &Shared,
        h: &Header,
        p: Arc<ProxyFile>,
        offset: u64,
        data: Vec<u8>,
        stable: bool,
    ) -> Result<(), Status> {
        let stats = sh.stats.clone();
        self.submit_forward(sh, h, move |f| {
            let (n, off) = f.write(&p, offset, &data, stable)?;
            stats.bytes_written.fetch_add(n as u64, Relaxed);
            Ok(FwdOk::Reply(Reply::Write { count: n as u32, stable, offset: off }))
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn proxied_write_direct(
        &mut self,
        sh: &Shared,
        h: &Header,
        p: Arc<ProxyFile>,
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
                self.submit_proxied_write(sh, h, p, offset, data, stable)?;
                return Ok(Outcome::Deferred);
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

    /// Pulled bytes of a proxied WRITE_DIRECT: sent on to the home (a job). The open
    /// may have been closed meanwhile: `BAD_OPENID`.
    pub(in crate::conn) fn forward_pulled_write(
        &mut self,
        sh: &Shared,
        h: &Header,
        open_id: u64,
        offset: u64,
        data: Vec<u8>,
        stable: bool,
    ) -> Result<(), Status> {
        let p = self.proxy(open_id, false)?;
        self.submit_proxied_write(sh, h, p, offset, data, stable)
    }
}

fn exclusive(ltype: u32) -> Result<bool, Status> {
    match ltype {
        lock_type::EXCLUSIVE => Ok(true),
        lock_type::SHARED => Ok(false),
        _ => Err(Status::Inval),
    }
}
