//! The path-based calls of a cluster client: each on the node the map names for its
//! path (see the module documentation of `cluster`).
//!
//! A name is looked for on its manager first. If the manager does not have it and the
//! cluster has other nodes, they are asked too: a file stays on the node that created
//! it when a later map moves its name (no data moves on a membership change), and a
//! node holding such a file serves it (the server's check lets a held name through).
//! A miss therefore costs one round trip per node. Creating calls go to the manager;
//! if the manager lacks the parent directory (it joined after the directory was made,
//! or was down), the directory is made there first with the mode it has elsewhere.

use dafs_proto::types::{open_flags, FsStat};
use dafs_proto::{Attr, FileHandle, FileType, Status};

use super::{cluster_path, Cluster};
use crate::{Client, Error, File, OpenOptions, Result};

impl Cluster {
    /// Under round-robin placement, `op` on the next node in turn, which forwards it to
    /// the home (`None`: matched placement, or the landing node could not serve it —
    /// not found, not forwardable, down, or its share of forwarded requests in flight
    /// taken (`DELAY`) — and the caller goes the matched way).
    fn round_robin<T>(
        &mut self,
        op: &mut impl FnMut(&mut Client) -> Result<T>,
    ) -> Option<Result<(usize, T)>> {
        let slot = self.landing_slot()?;
        match self.on(slot, op) {
            Err(Error::Status(Status::NoEnt | Status::WrongNode | Status::Delay))
            | Err(Error::NodeUnavailable { .. }) => None,
            r => Some(r.map(|v| (slot, v))),
        }
    }

    /// `op` on the node holding the existing name `path`: its slot and the result.
    pub(super) fn existing<T>(
        &mut self,
        path: &str,
        mut op: impl FnMut(&mut Client) -> Result<T>,
    ) -> Result<(usize, T)> {
        self.existing_on(path, false, &mut op)
    }

    /// `op` first on the round-robin landing node if `rr` (and placement is
    /// round-robin), else — or if the landing node could not serve it — the matched
    /// way, `matched(self, path, op)`: the one landing prelude of every call that lands.
    fn landing_first<T, F: FnMut(&mut Client) -> Result<T>>(
        &mut self,
        path: &str,
        rr: bool,
        mut op: F,
        matched: fn(&mut Self, &str, &mut F) -> Result<(usize, T)>,
    ) -> Result<(usize, T)> {
        if rr {
            if let Some(r) = self.round_robin(&mut op) {
                return r;
            }
        }
        matched(self, path, &mut op)
    }

    /// [`existing`](Self::existing), first on the round-robin landing node if `rr`.
    fn existing_on<T>(
        &mut self,
        path: &str,
        rr: bool,
        op: impl FnMut(&mut Client) -> Result<T>,
    ) -> Result<(usize, T)> {
        self.landing_first(path, rr, op, Self::existing_matched)
    }

    /// The matched way to an existing name: its manager, then the other nodes.
    fn existing_matched<T>(
        &mut self,
        path: &str,
        op: &mut impl FnMut(&mut Client) -> Result<T>,
    ) -> Result<(usize, T)> {
        let mut op = op;
        let cp = cluster_path(path)?;
        match self.routed(&cp, &mut op) {
            Err(Error::Status(Status::NoEnt)) if self.member_slot.len() > 1 => {
                let manager = self.manager_slot(&cp);
                for slot in self.member_slot.clone() {
                    if slot == manager {
                        continue;
                    }
                    match self.on(slot, &mut op) {
                        Ok(v) => return Ok((slot, v)),
                        // Not there, or the node is down: its names fail on their own.
                        Err(Error::Status(Status::NoEnt | Status::WrongNode))
                        | Err(Error::NodeUnavailable { .. }) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(Error::Status(Status::NoEnt))
            }
            r => r.map(|v| (self.manager_slot(&cp), v)),
        }
    }

    /// `op` on the manager of the new name `path` (making its parent directory there
    /// if only other nodes have it): its slot and the result.
    pub(super) fn creating<T>(
        &mut self,
        path: &str,
        op: impl FnMut(&mut Client) -> Result<T>,
    ) -> Result<(usize, T)> {
        self.creating_on(path, false, op)
    }

    /// [`creating`](Self::creating), first on the round-robin landing node if `rr`.
    fn creating_on<T>(
        &mut self,
        path: &str,
        rr: bool,
        op: impl FnMut(&mut Client) -> Result<T>,
    ) -> Result<(usize, T)> {
        self.landing_first(path, rr, op, Self::creating_matched)
    }

    /// The matched way to a new name: its manager (making the parent there if need be).
    fn creating_matched<T>(
        &mut self,
        path: &str,
        op: &mut impl FnMut(&mut Client) -> Result<T>,
    ) -> Result<(usize, T)> {
        let mut op = op;
        let cp = cluster_path(path)?;
        let r = match self.routed(&cp, &mut op) {
            Err(Error::Status(Status::NoEnt)) if self.repair_parent(&cp)? => {
                self.routed(&cp, &mut op)
            }
            r => r,
        };
        r.map(|v| (self.manager_slot(&cp), v))
    }

    /// Lookups, opens and removes land round-robin under round-robin placement (the
    /// landing node forwards them); the other calls go to the home as under matched.
    pub(crate) fn lookup(&mut self, path: &str, follow: bool) -> Result<(FileHandle, Attr)> {
        if follow {
            self.existing_on(path, true, |c| c.lookup(path)).map(|r| r.1)
        } else {
            self.existing_on(path, true, |c| c.lookup_nofollow(path)).map(|r| r.1)
        }
    }

    pub(crate) fn stat(&mut self, path: &str, follow: bool) -> Result<Attr> {
        self.lookup(path, follow).map(|(_, a)| a)
    }

    pub(crate) fn open(&mut self, path: &str, opts: OpenOptions) -> Result<File> {
        // By name: a landing node that does not hold the file forwards the open.
        let open = |c: &mut Client| c.open_on_server(path, opts, true);
        let (slot, f) = if opts.flags & open_flags::CREATE != 0 {
            self.creating_on(path, true, open)?
        } else {
            self.existing_on(path, true, open)?
        };
        Ok(self.fronted(path, slot, f))
    }

    pub(crate) fn open_and_read(
        &mut self,
        path: &str,
        len: usize,
    ) -> Result<(File, Vec<u8>, bool)> {
        if self.landing_slot_peek() {
            // The chain opens the looked-up handle, which a forwarding node cannot
            // serve: open by name, then read.
            let mut f = self.open(path, OpenOptions::read())?;
            let n = len.min(
                self.slots[f.node]
                    .client
                    .as_ref()
                    .map_or(len, |c| c.inline_threshold_unregistered()),
            );
            let mut data = vec![0u8; n];
            let got = self.with_file(&f, |c| c.pread(&f, &mut data, 0))?;
            data.truncate(got);
            f.pos = got as u64;
            return Ok((f, data, got < n));
        }
        let (slot, (f, data, eof)) = self.existing(path, |c| c.open_and_read(path, len))?;
        Ok((self.fronted(path, slot, f), data, eof))
    }

    pub(crate) fn create_and_write(&mut self, path: &str, data: &[u8], mode: u32) -> Result<()> {
        // A chain goes to the home: a landing node does not forward chains (their
        // elements run one after another on its worker, which must not wait on a home).
        self.creating(path, |c| c.create_and_write(path, data, mode)).map(|r| r.1)
    }

    pub(crate) fn create_file(
        &mut self,
        path: &str,
        mode: u32,
        exclusive: bool,
    ) -> Result<(FileHandle, Attr)> {
        self.creating(path, |c| c.create_file(path, mode, exclusive)).map(|r| r.1)
    }

    pub(crate) fn remove(&mut self, path: &str) -> Result<()> {
        self.existing_on(path, true, |c| c.remove(path)).map(|r| r.1)
    }

    /// Rename. Within one node, that node's rename(2). A regular file whose new name
    /// the map places on another node moves there: the node holding it does the
    /// two-phase move (CLUSTER_RENAME; see architecture.md, *Cross-node rename*).
    /// Directories (they exist on every node), other file types and renames with
    /// flags across nodes answer EXDEV: the caller copies and removes, as `mv` does
    /// across file systems.
    pub(crate) fn rename(&mut self, from: &str, to: &str, flags: u32) -> Result<()> {
        let (slot, attr) = self.existing(from, |c| c.lstat(from))?;
        if attr.ftype == FileType::Directory {
            return Err(Error::Status(Status::XDev));
        }
        let to_cp = cluster_path(to)?;
        if self.manager_slot(&to_cp) == slot {
            return self.on(slot, |c| c.rename_with_flags(from, to, flags));
        }
        if flags != 0 || attr.ftype != FileType::Regular {
            return Err(Error::Status(Status::XDev));
        }
        let to_rel = to_cp.to_string();
        let to_rel = to_rel.trim_start_matches('/').to_string();
        let mut repaired = false;
        loop {
            match self.on(slot, |c| c.cluster_rename(from, &to_rel)) {
                // The target lacks the new name's directory (it joined later, or was
                // down at the mkdir): make it there as on the other nodes, once.
                Err(Error::Status(Status::NoEnt)) if !repaired && self.repair_parent(&to_cp)? => {
                    repaired = true;
                }
                // A node with a newer map (the new name is elsewhere, or the holder's
                // own): rename again under the newer map.
                Err(Error::Status(Status::WrongNode)) if self.refresh(slot)? => {
                    return self.rename(from, to, flags);
                }
                r => return r,
            }
        }
    }

    /// Hard links stay on one node: EXDEV if the map places the new name elsewhere.
    pub(crate) fn link(&mut self, existing: &str, new_path: &str, follow: bool) -> Result<Attr> {
        let (slot, _) = self.existing(existing, |c| c.lstat(existing))?;
        if self.manager_slot(&cluster_path(new_path)?) != slot {
            return Err(Error::Status(Status::XDev));
        }
        self.on(slot, |c| {
            if follow {
                c.link_follow(existing, new_path)
            } else {
                c.link(existing, new_path)
            }
        })
    }

    pub(crate) fn symlink(&mut self, target: &str, link_path: &str) -> Result<Attr> {
        self.creating(link_path, |c| c.symlink(target, link_path)).map(|r| r.1)
    }

    pub(crate) fn mknod(&mut self, path: &str, ft: FileType, mode: u32, rdev: u64) -> Result<Attr> {
        self.creating(path, |c| c.mknod(path, ft, mode, rdev)).map(|r| r.1)
    }

    pub(crate) fn readlink(&mut self, path: &str) -> Result<Vec<u8>> {
        self.existing(path, |c| c.readlink(path)).map(|r| r.1)
    }

    pub(crate) fn truncate(&mut self, path: &str, size: u64) -> Result<Attr> {
        self.existing(path, |c| c.truncate(path, size)).map(|r| r.1)
    }

    pub(crate) fn chmod(&mut self, path: &str, mode: u32) -> Result<Attr> {
        // A directory's mode is kept alike on every node.
        if self.stat(path, true)?.ftype == FileType::Directory {
            return self.on_every_node(path, |c| c.chmod(path, mode));
        }
        self.existing(path, |c| c.chmod(path, mode)).map(|r| r.1)
    }

    pub(crate) fn set_times(&mut self, path: &str, atime_ns: i64, mtime_ns: i64) -> Result<Attr> {
        self.existing(path, |c| c.set_times(path, atime_ns, mtime_ns)).map(|r| r.1)
    }

    pub(crate) fn access(&mut self, path: &str, mask: u32) -> Result<u32> {
        self.existing(path, |c| c.access(path, mask)).map(|r| r.1)
    }

    pub(crate) fn get_nattr(&mut self, path: &str, name: &str) -> Result<Vec<u8>> {
        self.existing(path, |c| c.get_nattr(path, name)).map(|r| r.1)
    }

    pub(crate) fn set_nattr(&mut self, path: &str, n: &str, v: &[u8], flags: u32) -> Result<()> {
        self.existing(path, |c| c.set_nattr(path, n, v, flags)).map(|r| r.1)
    }

    pub(crate) fn list_nattr(&mut self, path: &str) -> Result<Vec<String>> {
        self.existing(path, |c| c.list_nattr(path)).map(|r| r.1)
    }

    pub(crate) fn remove_nattr(&mut self, path: &str, name: &str) -> Result<()> {
        self.existing(path, |c| c.remove_nattr(path, name)).map(|r| r.1)
    }

    /// The cluster's space: the nodes' sums (every node must answer).
    pub(crate) fn statfs(&mut self) -> Result<FsStat> {
        let mut total: Option<FsStat> = None;
        for slot in self.member_slot.clone() {
            let s = self.on(slot, |c| c.statfs())?;
            total = Some(match total {
                None => s,
                Some(t) => FsStat {
                    total_bytes: t.total_bytes.saturating_add(s.total_bytes),
                    free_bytes: t.free_bytes.saturating_add(s.free_bytes),
                    avail_bytes: t.avail_bytes.saturating_add(s.avail_bytes),
                    total_files: t.total_files.saturating_add(s.total_files),
                    free_files: t.free_files.saturating_add(s.free_files),
                    block_size: t.block_size,
                    name_max: t.name_max.min(s.name_max),
                },
            });
        }
        Ok(total.expect("a map has at least one member"))
    }

    /// `op` on the node `f` was opened on.
    pub(crate) fn with_file<T>(
        &mut self,
        f: &File,
        op: impl FnOnce(&mut Client) -> Result<T>,
    ) -> Result<T> {
        self.with_node(f.node, op)
    }

    /// `op` on node `slot` (the node of an open file).
    pub(crate) fn with_node<T>(
        &mut self,
        slot: usize,
        op: impl FnOnce(&mut Client) -> Result<T>,
    ) -> Result<T> {
        if slot >= self.slots.len() {
            return Err(Error::InvalidArgument("file was not opened by this cluster client"));
        }
        self.on(slot, op)
    }

    pub(crate) fn reopen(&mut self, f: &File) -> Result<File> {
        let mut nf = self.with_file(f, |c| c.reopen(f))?;
        nf.node = f.node;
        if f.node_fh.is_some() {
            // The same front handle, naming the node's handle of the new open.
            nf.node_fh = Some(nf.fh);
            nf.fh = f.fh;
        }
        Ok(nf)
    }
}
