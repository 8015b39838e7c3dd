//! The ops: one handler per op or family of ops, each running its op against the file
//! system and *returning* its reply (or the status to refuse it with). Nothing here
//! sends or completes a slot: `Conn::respond` does, for every request alike.
//!
//! Families: `session` (SESSION_*, SET_CRED), `meta` (root handle, lookups, attributes,
//! access, symlink targets, file system statistics), `namespace` (create, remove,
//! rename, link, symlink, directory listing), `open` (OPEN, CLOSE, PUBLISH), `io` (inline
//! and direct reads and writes, COMMIT, cache hints), `lock` (byte-range locks),
//! `named_attr` (named attributes), `batch` (BATCH_IO), `chain` (CHAIN).

mod batch;
mod chain;
mod forwarded;
mod grace;
mod handle_check;
mod io;
mod lock;
mod meta;
mod named_attr;
mod namespace;
mod open;
mod session;

use dafs_proto::types::{lock_flags, open_flags};
use dafs_proto::{Header, Reply, Request, Status};
use dafs_transport::ServerConn as _;

use super::pending::PendingWrite;
use super::reply::ReplyBufs;
use super::Conn;
use crate::Shared;
pub(super) use batch::batch_reply;
pub(super) use io::{placement_status, write_at};

/// How an executed op ends.
pub(super) enum Outcome<'a> {
    /// Its reply, to be sent now; the slot completes with it.
    Reply(Reply<'a>),
    /// A pull is under way with this tag (WRITE_DIRECT over TCP): the reply goes out
    /// when the data has arrived and been written; the slot stays busy until then.
    Pending(u64, PendingWrite),
    /// The reply comes later (a batch whose pulls are under way, a forwarded request);
    /// the slot stays busy.
    Deferred,
}

impl Conn {
    /// Run one op (after `dispatch`'s checks, or as an element of a chain) and return
    /// how it ends. Replies borrow their data from `bufs` (or from `sh`).
    pub(super) fn execute<'a>(
        &mut self,
        sh: &'a Shared,
        bufs: &'a mut ReplyBufs,
        h: &Header,
        req: Request,
    ) -> Result<Outcome<'a>, Status> {
        use Request as R;
        // Dispatch admits requests without a session only for SESSION_CREATE/BIND, which
        // carry no handle; an empty id is admitted by unrestricted exports only.
        let client_id = self.session.as_ref().map_or("", |s| s.info.client_id.as_str());
        let from_peer = crate::forward::is_peer(client_id);
        // Before the handle check: a proxied open's handle is its home's, not ours.
        if self.is_proxied(&req) {
            crate::cluster::count_request(sh, from_peer, true);
            return self.proxied_io(sh, h, req);
        }
        handle_check::check_handles(sh, client_id, &req)?;
        let route = crate::cluster::check_request(sh, &req);
        crate::cluster::count_request(sh, from_peer, matches!(route, Ok(Some(_))));
        if let Some(fw) = route? {
            return self.forward(sh, h, req, fw);
        }
        let reply = match req {
            R::Null => Reply::Empty,
            R::SessionCreate { .. } | R::SessionBind { .. } => {
                unreachable!("handled in dispatch")
            }
            R::SetCred { uid, gid, groups } => self.set_cred(sh, uid, gid, groups)?,
            R::SessionAuth { client_nonce, proof } => {
                self.session_auth(sh, &client_nonce, &proof)?
            }
            R::SessionDestroy => Reply::Empty,

            R::GetRootHandle { export } => {
                meta::get_root_handle(sh, &self.session().info.client_id, export)?
            }
            R::Lookup { dir, path, follow } => meta::lookup(sh, &dir, path, follow)?,
            R::LookupParent { fh } => meta::lookup_parent(sh, &fh)?,
            R::GetAttr { fh } => meta::get_attr(sh, &fh)?,
            R::SetAttr { fh, set } => meta::set_attr(sh, &fh, &set)?,
            R::Access { fh, mask } => meta::access(sh, &fh, mask)?,
            R::ReadLink { fh } => meta::read_link(sh, &fh, &mut bufs.held)?,
            R::FsStat { fh } => meta::fs_stat(sh, &fh)?,

            R::Create { dir, ftype, mode, exclusive, name } => {
                namespace::create(sh, &dir, ftype, mode, exclusive, name)?
            }
            R::Remove { dir, name } => {
                grace::refuse_in_grace(sh)?;
                namespace::remove(sh, &dir, name, false)?
            }
            R::RmDir { dir, name } => namespace::remove(sh, &dir, name, true)?,
            R::Rename { from_dir, from_name, to_dir, to_name, flags } => {
                grace::refuse_in_grace(sh)?;
                namespace::rename(sh, &from_dir, from_name, &to_dir, to_name, flags)?
            }
            R::ClusterRename { from_dir, from_name, to_path } => {
                grace::refuse_in_grace(sh)?;
                crate::xrename::cluster_rename(sh, &from_dir, from_name, to_path)?
            }
            R::Link { fh, dir, name } => namespace::link(sh, &fh, &dir, name)?,
            R::Symlink { dir, name, target } => namespace::symlink(sh, &dir, name, target)?,
            R::Mknod { dir, ftype, mode, rdev, name } => {
                namespace::mknod(sh, &dir, ftype, mode, rdev, name)?
            }
            R::ReadDir { dir, cookie, max_entries, max_bytes } => {
                let msg_size = self.t.msg_size_bytes_max();
                let entries = &mut bufs.entries;
                namespace::read_dir(sh, entries, msg_size, &dir, cookie, max_entries, max_bytes)?
            }

            R::Open { fh, flags, mode, name, key } => {
                let reclaim = flags & open_flags::RECLAIM != 0;
                self.open_in_grace(sh, reclaim, fh, flags, mode, name, key)?
            }
            R::Close { open_id } => self.close_open(sh, open_id)?,
            R::Publish { open_id } => self.publish(sh, open_id)?,

            R::ReadInline { open_id, offset, len } => {
                self.read_inline(sh, &mut bufs.data, open_id, offset, len)?
            }
            R::WriteInline { open_id, offset, stable, data } => {
                self.write_inline(sh, open_id, offset, stable, data)?
            }
            R::ReadDirect { open_id, offset, len, region } => {
                self.read_direct(sh, open_id, offset, len, region)?
            }
            R::WriteDirect { open_id, offset, len, stable, region } => {
                return self.write_direct(sh, h, open_id, offset, len, stable, region);
            }
            R::Commit { open_id, .. } => self.commit(open_id)?,
            R::CacheHint { open_id, offset, len, hint } => {
                self.cache_hint(open_id, offset, len, hint)?
            }

            R::Lock { fh, offset, len, ltype, flags } => {
                let reclaim = flags & lock_flags::RECLAIM != 0;
                self.lock_in_grace(sh, reclaim, &fh, offset, len, ltype)?
            }
            R::LockTest { fh, offset, len, ltype } => {
                lock::test(sh, self.session().id, &fh, offset, len, ltype)?
            }
            R::Unlock { fh, offset, len } => lock::unlock(sh, self.session().id, &fh, offset, len)?,

            R::GetNamedAttr { fh, name } => named_attr::get(sh, &fh, name, &mut bufs.held)?,
            R::SetNamedAttr { fh, flags, name, value } => {
                named_attr::set(sh, &fh, flags, name, value)?
            }
            R::ListNamedAttr { fh } => named_attr::list(sh, &fh, &mut bufs.held)?,
            R::RemoveNamedAttr { fh, name } => named_attr::remove(sh, &fh, name)?,

            R::BatchIo { open_id, flags, count, ios } => {
                return self.batch_io(sh, bufs, h, open_id, flags, count, ios);
            }
            R::Chain { elements, .. } => self.chain(sh, bufs, h, elements)?,
            R::ReclaimComplete => self.reclaim_complete(sh),
            R::ClusterMap => crate::cluster::map_reply(sh, &mut bufs.held)?,
            R::Reserved(_) => return Err(Status::NotSupp),
        };
        Ok(Outcome::Reply(reply))
    }
}

/// Writes to a read-only export answer `ROFS`.
fn check_writable(sh: &Shared, export: u32) -> Result<(), Status> {
    if sh.cfg.exports[export as usize].read_only {
        Err(Status::RoFs)
    } else {
        Ok(())
    }
}
