//! Every handle a request carries must be one this server issued (its MAC checks) and
//! belong to an export this session may use — checked here for every op, the elements
//! of a chain included, not only when the export's root handle is handed out: a handle
//! given to (or replayed from) another client opens no door its own client rules close.

use std::sync::atomic::Ordering::Relaxed;

use dafs_proto::{FileHandle, Request, Status};
use tracing::warn;

use crate::Shared;

/// BADHANDLE for a handle this server did not issue; ACCESS for a genuine handle of an
/// export whose client rules do not admit `client_id`.
pub(super) fn check_handles(sh: &Shared, client_id: &str, req: &Request) -> Result<(), Status> {
    for fh in handles_of(req).into_iter().flatten() {
        let export = sh.handles.export_of(fh)?;
        let e = &sh.cfg.exports[export as usize];
        if !e.admits(client_id) {
            sh.stats.handle_refusals.fetch_add(1, Relaxed);
            sh.stats.access_refusals.fetch_add(1, Relaxed);
            warn!(client = %client_id, export = %e.name, op = ?req.opcode(), "handle refused: the export's client rules do not admit this client");
            return Err(Status::Access);
        }
    }
    Ok(())
}

/// The handles a request names (at most two).
fn handles_of<'r>(req: &'r Request) -> [Option<&'r FileHandle>; 2] {
    use Request as R;
    match req {
        R::Rename { from_dir, to_dir, .. } => [Some(from_dir), Some(to_dir)],
        R::Link { fh, dir, .. } => [Some(fh), Some(dir)],
        R::Lookup { dir: fh, .. }
        | R::Create { dir: fh, .. }
        | R::ReadDir { dir: fh, .. }
        | R::Remove { dir: fh, .. }
        | R::ClusterRename { from_dir: fh, .. }
        | R::RmDir { dir: fh, .. }
        | R::Symlink { dir: fh, .. }
        | R::Mknod { dir: fh, .. }
        | R::LookupParent { fh }
        | R::GetAttr { fh }
        | R::SetAttr { fh, .. }
        | R::Access { fh, .. }
        | R::Open { fh, .. }
        | R::ReadLink { fh }
        | R::FsStat { fh }
        | R::Lock { fh, .. }
        | R::LockTest { fh, .. }
        | R::Unlock { fh, .. }
        | R::GetNamedAttr { fh, .. }
        | R::SetNamedAttr { fh, .. }
        | R::ListNamedAttr { fh }
        | R::RemoveNamedAttr { fh, .. } => [Some(fh), None],
        // No handle: session ops, ops on open ids, batches (open ids), chains (each
        // element is checked when it executes).
        R::Null
        | R::SessionCreate { .. }
        | R::SessionAuth { .. }
        | R::SessionDestroy
        | R::SessionBind { .. }
        | R::SetCred { .. }
        | R::ReclaimComplete
        | R::GetRootHandle { .. }
        | R::Close { .. }
        | R::Publish { .. }
        | R::ReadInline { .. }
        | R::WriteInline { .. }
        | R::ReadDirect { .. }
        | R::WriteDirect { .. }
        | R::Commit { .. }
        | R::CacheHint { .. }
        | R::BatchIo { .. }
        | R::Chain { .. }
        | R::ClusterMap
        | R::Reserved(_) => [None, None],
    }
}
