//! New objects (files, directories, symbolic links): the owner and permission bits a
//! local file system would give them.

use dafs_client::dafs_proto::types::setattr_mask;
use dafs_client::dafs_proto::{Attr, FileHandle, SetAttrs};
use fuser::Request;

use super::DafsFs;
use crate::convert::{MODE_RWX_BITS, MODE_SPECIAL_BITS};

impl DafsFs {
    /// The server creates objects with its own ids and under its own umask; give a new
    /// object the owner and permission bits the caller asked for, as a local file
    /// system would. Failures are ignored: a server not running as root cannot change
    /// owners, and the object exists either way.
    pub(super) fn fix_new(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        fh: FileHandle,
        mut attr: Attr,
        perm: Option<u32>,
    ) -> Attr {
        // In a set-group-ID directory the new object takes the directory's group (and a
        // new directory keeps the bit): the server's file system has done that already.
        let setgid_parent =
            self.inodes.get(parent).is_some_and(|n| n.attr.mode & libc::S_ISGID != 0);
        let mut set = SetAttrs::default();
        if attr.uid != req.uid() {
            set.mask |= setattr_mask::UID;
            set.uid = req.uid();
        }
        if attr.gid != req.gid() && !setgid_parent {
            set.mask |= setattr_mask::GID;
            set.gid = req.gid();
        }
        if let Some(p) = perm {
            // Only the rwx bits can differ (the server's umask); set-id and sticky bits
            // are what the server's file system decided.
            if attr.mode & MODE_RWX_BITS != p & MODE_RWX_BITS {
                set.mask |= setattr_mask::MODE;
                set.mode = (attr.mode & MODE_SPECIAL_BITS) | (p & MODE_RWX_BITS);
            }
        }
        if set.mask != 0 {
            let r = self.c().setattr(fh, set);
            match r {
                Ok(a) => attr = a,
                Err(e) => tracing::debug!("setting owner/mode of a new object: {e}"),
            }
        }
        attr
    }
}
