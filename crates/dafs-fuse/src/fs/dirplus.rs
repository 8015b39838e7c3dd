//! READDIRPLUS: a directory page with each entry's attributes and handle, so that `ls
//! -l`, `find` and `du` need no LOOKUP per name. The names come from READDIR as for
//! plain listings (`dir`); their handles and attributes from LOOKUPs sent as request
//! chains, [`LOOKUPS_PER_CHAIN`] per round trip. Each entry given to the kernel counts
//! as one kernel lookup of its inode (the kernel forgets it like any other).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use dafs_client::dafs_proto::Request;
use dafs_client::{Chain, ChainReply};
use fuser::ReplyDirectoryPlus;

use super::dir::{OpenDir, OFFSET_AFTER_DOT, OFFSET_AFTER_DOTDOT};
use super::DafsFs;
use crate::convert::{file_attr, is_stale};

/// LOOKUPs per request chain: the protocol's longest chain.
pub(super) const LOOKUPS_PER_CHAIN: usize = dafs_client::dafs_proto::types::CHAIN_LEN_MAX;

impl DafsFs {
    pub(super) fn readdirplus_inner(
        &mut self,
        ino: u64,
        fh: u64,
        offset: i64,
        reply: &mut ReplyDirectoryPlus,
    ) -> Result<(), i32> {
        let mut off = usize::try_from(offset).map_err(|_| libc::EINVAL)?;
        let (parent, attr) = self.node(ino).map(|n| (n.parent, n.attr))?;
        // "." and "..": the kernel links neither (so counts no lookup for them); their
        // attributes are what we last knew.
        if off == 0 {
            if reply.add(ino, OFFSET_AFTER_DOT as i64, ".", &self.ttl, &file_attr(ino, &attr), 0) {
                return Ok(());
            }
            off = OFFSET_AFTER_DOT;
        }
        if off == OFFSET_AFTER_DOT {
            let pattr = self.node(parent).map(|n| n.attr).unwrap_or(attr);
            let a = file_attr(parent, &pattr);
            if reply.add(parent, OFFSET_AFTER_DOTDOT as i64, "..", &self.ttl, &a, 0) {
                return Ok(());
            }
            off = OFFSET_AFTER_DOTDOT;
        }
        let mut d = self.dirs.remove(&fh).ok_or(libc::EBADF)?;
        let mut given = 0usize;
        let r = self.fill_dir(ino, &mut d, off, &mut |fs, d, next| {
            if d.looked.is_empty() {
                fs.look_up_pending(ino, d);
            }
            let (Some(e), Some(found)) = (d.pending.front(), d.looked.front()) else {
                return false;
            };
            let name = OsStr::from_bytes(&e.entry.name);
            match *found {
                Some((h, a)) => {
                    let ino_e = fs.inodes.remember(ino, &e.entry.name, h, a);
                    let full =
                        reply.add(ino_e, next as i64, name, &fs.ttl, &file_attr(ino_e, &a), 0);
                    if full {
                        // Not given to the kernel: not a lookup it will forget.
                        fs.inodes.forget(ino_e, 1);
                    } else {
                        given += 1;
                    }
                    full
                }
                // No attributes (the lookup failed): the name alone, as READDIR gives
                // it, with inode number 0 so the kernel links nothing.
                None => {
                    let mut a = file_attr(0, &attr);
                    a.kind = crate::convert::ftype(e.entry.ftype);
                    a.size = 0;
                    reply.add(0, next as i64, name, &std::time::Duration::ZERO, &a, 0)
                }
            }
        });
        self.dirs.insert(fh, d);
        tracing::debug!(ino, offset, "readdirplus: {given} entries");
        r
    }

    /// Look up the next [`LOOKUPS_PER_CHAIN`] pending entries of directory `ino` in one
    /// round trip; an entry whose lookup fails (removed meanwhile) gets None. A STALE
    /// directory handle is looked up again once.
    fn look_up_pending(&mut self, ino: u64, d: &mut OpenDir) {
        let want = d.pending.len().min(LOOKUPS_PER_CHAIN);
        if self.c.cluster_epoch().is_some() {
            // On a cluster URL each name may live on another node: no one chain
            // reaches them all, so they are looked up one by one (each routed).
            let Ok(dir) = self.node(ino).map(|n| n.fh) else { return };
            while d.looked.len() < want {
                let name = &d.pending[d.looked.len()].entry.name;
                d.looked.push_back(self.c.lookup_at(dir, name, false).ok());
            }
            return;
        }
        let mut refreshed = false;
        while d.looked.len() < want {
            let Ok(dir) = self.node(ino).map(|n| n.fh) else { break };
            let mut chain = Chain::new();
            for e in d.pending.iter().skip(d.looked.len()).take(want - d.looked.len()) {
                chain = chain.push(&Request::Lookup { dir, path: &e.entry.name, follow: false });
            }
            let out = match self.c.run_chain(&chain) {
                Ok(o) => o,
                Err(e) => {
                    self.fail(&e);
                    break;
                }
            };
            for r in out.replies {
                d.looked.push_back(match r {
                    ChainReply::Handle { fh, attr } => Some((fh, attr)),
                    _ => None,
                });
            }
            match out.failed {
                // The directory's handle: look it up again once, then give up on
                // attributes for this page.
                Some((_, e)) if is_stale(&e) => {
                    if refreshed || self.refresh(ino, 0).is_err() {
                        break;
                    }
                    refreshed = true;
                }
                // Removed meanwhile (or not visible): the name alone.
                Some(_) => d.looked.push_back(None),
                None => {}
            }
        }
        // What could not be looked up at all goes without attributes.
        while d.looked.len() < want {
            d.looked.push_back(None);
        }
    }
}
