//! CHAIN: several requests run in order on one slot, a current file handle and open id
//! flowing from one element to the next.

use dafs_proto::types::{
    pack_messages, unpack_messages, CHAIN_LEN_MAX, CURRENT_FH, CURRENT_OPEN_ID,
};
use dafs_proto::{FileHandle, Header, Reply, Request, Status};
use dafs_transport::ServerConn as _;

use super::Outcome;
use crate::conn::reply::ReplyBufs;
use crate::conn::Conn;
use crate::Shared;

impl Conn {
    /// Execute a chain: elements run in order; a current file handle and open id flow
    /// from one to the next (CURRENT_FH / CURRENT_OPEN_ID); execution stops at the first
    /// element that fails, and the reply carries every executed element's reply.
    pub(super) fn chain<'a>(
        &mut self,
        sh: &'a Shared,
        bufs: &'a mut ReplyBufs,
        h: &Header,
        elements: &[u8],
    ) -> Result<Reply<'a>, Status> {
        let elems = unpack_messages(elements, CHAIN_LEN_MAX).map_err(|_| Status::BadXdr)?;
        let max = self.t.msg_size_bytes_max();
        let mut cur_fh: Option<FileHandle> = None;
        let mut cur_open: Option<u64> = None;
        // Every executed element's reply, encoded like any other and packed here.
        let mut replies = Vec::new();
        let mut encoded = Vec::new();
        let mut executed = 0u32;
        let mut failed = u32::MAX;
        // Element replies are packed into this one (see `Conn::in_chain`). The loop
        // only breaks, never returns, so the flag is always cleared below.
        self.in_chain = true;
        for (i, m) in elems.iter().enumerate() {
            executed += 1;
            let outcome = match dafs_proto::decode_request(m, max) {
                Err((sub_h, _)) => {
                    let sub_h = sub_h.unwrap_or(*h);
                    Err((sub_h, Status::BadXdr))
                }
                Ok((sub_h, req)) => match substitute(req, cur_fh, cur_open) {
                    Err(e) => Err((sub_h, e)),
                    Ok(req) if !chainable(&req) => Err((sub_h, Status::NotChainable)),
                    Ok(req) => match self.execute(sh, bufs, &sub_h, req) {
                        Ok(Outcome::Reply(r)) => Ok((sub_h, r)),
                        // A WRITE_DIRECT over TCP: its pull, if issued, completes with no
                        // pending write and is dropped.
                        Ok(Outcome::Pending(..)) | Ok(Outcome::Deferred) => {
                            Err((sub_h, Status::NotChainable))
                        }
                        Err(e) => Err((sub_h, e)),
                    },
                },
            };
            let (sub_h, reply) = match outcome {
                Ok(r) => r,
                Err((sub_h, status)) => {
                    self.encode(sh, &mut encoded, &sub_h, &crate::cluster::error_reply(sh, status));
                    pack_messages([encoded.as_slice()], &mut replies);
                    failed = i as u32;
                    break;
                }
            };
            self.encode(sh, &mut encoded, &sub_h, &reply);
            pack_messages([encoded.as_slice()], &mut replies);
            // Pick up the handle / open id this element produced.
            match reply {
                Reply::Handle { fh, .. } => cur_fh = Some(fh),
                Reply::Open { open_id, fh, .. } => {
                    cur_fh = Some(fh);
                    cur_open = Some(open_id);
                }
                _ => {}
            }
        }
        self.in_chain = false;
        bufs.held = replies;
        Ok(Reply::Chain { executed, failed, replies: &bufs.held })
    }
}

/// Ops that may appear in a chain: everything that completes synchronously and is not
/// itself a session or multi-op request.
fn chainable(r: &Request) -> bool {
    !matches!(
        r,
        Request::SessionCreate { .. }
            | Request::SessionAuth { .. }
            | Request::SessionBind { .. }
            | Request::SessionDestroy
            | Request::ReclaimComplete
            | Request::Chain { .. }
            | Request::BatchIo { .. }
            | Request::ClusterMap
            | Request::ClusterRename { .. }
            | Request::Reserved(_)
    )
}

/// Replace CURRENT_FH / CURRENT_OPEN_ID with the chain's current values.
fn substitute(r: Request, fh: Option<FileHandle>, open: Option<u64>) -> Result<Request, Status> {
    let f = |x: FileHandle| -> Result<FileHandle, Status> {
        if x == CURRENT_FH {
            fh.ok_or(Status::BadHandle)
        } else {
            Ok(x)
        }
    };
    let o = |x: u64| -> Result<u64, Status> {
        if x == CURRENT_OPEN_ID {
            open.ok_or(Status::BadOpenId)
        } else {
            Ok(x)
        }
    };
    use Request as R;
    Ok(match r {
        R::Lookup { dir, path, follow } => R::Lookup { dir: f(dir)?, path, follow },
        R::LookupParent { fh } => R::LookupParent { fh: f(fh)? },
        R::GetAttr { fh } => R::GetAttr { fh: f(fh)? },
        R::SetAttr { fh, set } => R::SetAttr { fh: f(fh)?, set },
        R::Access { fh, mask } => R::Access { fh: f(fh)?, mask },
        R::Create { dir, ftype, mode, exclusive, name } => {
            R::Create { dir: f(dir)?, ftype, mode, exclusive, name }
        }
        R::Open { fh, flags, mode, name, key } => R::Open { fh: f(fh)?, flags, mode, name, key },
        R::Close { open_id } => R::Close { open_id: o(open_id)? },
        R::ReadInline { open_id, offset, len } => {
            R::ReadInline { open_id: o(open_id)?, offset, len }
        }
        R::WriteInline { open_id, offset, stable, data } => {
            R::WriteInline { open_id: o(open_id)?, offset, stable, data }
        }
        R::ReadDirect { open_id, offset, len, region } => {
            R::ReadDirect { open_id: o(open_id)?, offset, len, region }
        }
        R::WriteDirect { open_id, offset, len, stable, region } => {
            R::WriteDirect { open_id: o(open_id)?, offset, len, stable, region }
        }
        R::ReadDir { dir, cookie, max_entries, max_bytes } => {
            R::ReadDir { dir: f(dir)?, cookie, max_entries, max_bytes }
        }
        R::Remove { dir, name } => R::Remove { dir: f(dir)?, name },
        R::RmDir { dir, name } => R::RmDir { dir: f(dir)?, name },
        R::Rename { from_dir, from_name, to_dir, to_name, flags } => {
            R::Rename { from_dir: f(from_dir)?, from_name, to_dir: f(to_dir)?, to_name, flags }
        }
        R::Link { fh, dir, name } => R::Link { fh: f(fh)?, dir: f(dir)?, name },
        R::Symlink { dir, name, target } => R::Symlink { dir: f(dir)?, name, target },
        R::ReadLink { fh } => R::ReadLink { fh: f(fh)? },
        R::Commit { open_id, offset, len } => R::Commit { open_id: o(open_id)?, offset, len },
        R::FsStat { fh } => R::FsStat { fh: f(fh)? },
        R::CacheHint { open_id, offset, len, hint } => {
            R::CacheHint { open_id: o(open_id)?, offset, len, hint }
        }
        R::Lock { fh, offset, len, ltype, flags } => {
            R::Lock { fh: f(fh)?, offset, len, ltype, flags }
        }
        R::LockTest { fh, offset, len, ltype } => R::LockTest { fh: f(fh)?, offset, len, ltype },
        R::Unlock { fh, offset, len } => R::Unlock { fh: f(fh)?, offset, len },
        R::GetNamedAttr { fh, name } => R::GetNamedAttr { fh: f(fh)?, name },
        R::SetNamedAttr { fh, flags, name, value } => {
            R::SetNamedAttr { fh: f(fh)?, flags, name, value }
        }
        R::ListNamedAttr { fh } => R::ListNamedAttr { fh: f(fh)? },
        R::RemoveNamedAttr { fh, name } => R::RemoveNamedAttr { fh: f(fh)?, name },
        R::Publish { open_id } => R::Publish { open_id: o(open_id)? },
        R::Mknod { dir, ftype, mode, rdev, name } => {
            R::Mknod { dir: f(dir)?, ftype, mode, rdev, name }
        }
        other => other,
    })
}
