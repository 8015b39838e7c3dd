//! An inode's working handle: the one the table holds, or, when the server answers
//! STALE (its handle table recycles the least recently used slots), one looked up again
//! by the inode's last known name (recursively up to the root) and retried once.

use dafs_client::dafs_proto::{FileHandle, Status};
use dafs_client::{Client, Error};

use super::DafsFs;
use crate::convert::is_stale;
use crate::inode::ROOT_INO;

/// Most parent directories a STALE handle is looked up again through: deeper than any
/// real tree, and a bound on the recursion should the recorded parents ever form a
/// cycle (they are only as current as the last lookup or rename the kernel sent).
const REFRESH_DEPTH_MAX: u32 = 64;

impl DafsFs {
    /// Look `ino` up again by its last known name after the server answered STALE for
    /// its handle (the server's handle table recycles the least recently used slots).
    pub(super) fn refresh(&mut self, ino: u64, depth: u32) -> Result<FileHandle, i32> {
        if depth > REFRESH_DEPTH_MAX {
            return Err(libc::ESTALE);
        }
        if ino == ROOT_INO {
            // The root has no name to look up: ask for the export's root handle again.
            let (fsid, fileid) = self.node(ino).map(|n| (n.fsid, n.fileid))?;
            let r = self.c().refresh_root(&self.export);
            return match r {
                Ok((fh, attr)) if attr.fsid == fsid && attr.fileid == fileid => {
                    tracing::debug!("server root handle was STALE; fetched it again");
                    if let Some(n) = self.inodes.get_mut(ino) {
                        n.fh = fh;
                        n.attr = attr;
                    }
                    Ok(fh)
                }
                Ok(_) => Err(libc::ESTALE),
                Err(e) => Err(self.fail(&e)),
            };
        }
        let (parent, name, fsid, fileid) = {
            let n = self.node(ino)?;
            (n.parent, n.name.clone(), n.fsid, n.fileid)
        };
        let pfh = self.node(parent)?.fh;
        let r = self.c().lookup_at(pfh, &name, false);
        let found = match r {
            Err(e) if is_stale(&e) => {
                let pfh = self.refresh(parent, depth + 1)?;
                self.c().lookup_at(pfh, &name, false)
            }
            r => r,
        };
        match found {
            Ok((fh, attr)) if attr.fsid == fsid && attr.fileid == fileid => {
                tracing::debug!(ino, "server handle was STALE; looked up again by name");
                if let Some(n) = self.inodes.get_mut(ino) {
                    n.fh = fh;
                    n.attr = attr;
                }
                Ok(fh)
            }
            // The name now names another object, or nothing: the object we knew is gone.
            Ok(_) => Err(libc::ESTALE),
            Err(e) if e.status() == Some(Status::NoEnt) => Err(libc::ESTALE),
            Err(e) => Err(self.fail(&e)),
        }
    }

    /// Run `f` on `ino`'s handle; on STALE, look the inode up again once and retry.
    pub(super) fn with_fh<T>(
        &mut self,
        ino: u64,
        mut f: impl FnMut(&mut Client, FileHandle) -> Result<T, Error>,
    ) -> Result<T, i32> {
        let fh = self.node(ino)?.fh;
        // Each result is taken before the next use of the session: `fail` and
        // `refresh` lock it again.
        let r = f(&mut self.c(), fh);
        match r {
            Ok(v) => Ok(v),
            Err(e) if is_stale(&e) => {
                let fh = self.refresh(ino, 0)?;
                let r = f(&mut self.c(), fh);
                r.map_err(|e| self.fail(&e))
            }
            Err(e) => Err(self.fail(&e)),
        }
    }

    pub(super) fn dir_fh(&mut self, ino: u64) -> Result<FileHandle, i32> {
        Ok(self.node(ino)?.fh)
    }

    /// Run a call on directory `parent`'s handle (retrying once after STALE).
    pub(super) fn in_dir<T>(
        &mut self,
        parent: u64,
        f: impl FnMut(&mut Client, FileHandle) -> Result<T, Error>,
    ) -> Result<T, i32> {
        self.with_fh(parent, f)
    }
}
