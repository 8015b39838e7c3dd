//! Virtual directories: the same directory on every node. mkdir makes it on each
//! (its manager first: that answer decides EEXIST), rmdir removes it from each after
//! checking that no node has an entry in it (ENOTEMPTY otherwise; the manager last),
//! readdir merges the nodes' listings and drops duplicates (the directories
//! themselves, which every node lists).

use std::collections::BTreeMap;

use dafs_cluster::ClusterPath;
use dafs_proto::{Attr, FileType, Status};

use super::{cluster_path, Cluster};
use crate::{Client, DirEntry, Error, Result};

impl Cluster {
    pub(crate) fn mkdir(&mut self, path: &str, mode: u32) -> Result<Attr> {
        let cp = cluster_path(path)?;
        let (manager, attr) = self.creating(path, |c| c.mkdir(path, mode))?;
        for slot in self.member_slot.clone() {
            if slot == manager {
                continue;
            }
            // The directory appears on a node that lacks it at its first create there
            // (see `repair_parent`): a node down now is not an error.
            match self.on(slot, |c| c.mkdir(path, mode)) {
                Ok(_) | Err(Error::Status(Status::Exist)) => {}
                Err(Error::Status(Status::NoEnt)) => {
                    self.repair_parent(&cp)?;
                    let _ = self.on(slot, |c| c.mkdir(path, mode));
                }
                Err(e @ Error::NodeUnavailable { .. }) => {
                    tracing::warn!("mkdir {path}: {e}; made when the node is next used")
                }
                Err(e) => return Err(e),
            }
        }
        Ok(attr)
    }

    pub(crate) fn rmdir(&mut self, path: &str) -> Result<()> {
        let cp = cluster_path(path)?;
        if cp.is_root() {
            return Err(Error::InvalidArgument("the root directory cannot be removed"));
        }
        let manager = self.manager_slot(&cp);
        let mut order: Vec<usize> =
            self.member_slot.iter().copied().filter(|&s| s != manager).collect();
        order.push(manager);
        let mut found = false;
        for &slot in &order {
            match self.on(slot, |c| c.readdir(path)) {
                Ok(entries) if entries.iter().any(|e| e.name != b"." && e.name != b"..") => {
                    return Err(Error::Status(Status::NotEmpty));
                }
                Ok(_) => found = true,
                Err(Error::Status(Status::NoEnt)) => {}
                Err(e) => return Err(e),
            }
        }
        if !found {
            return Err(Error::Status(Status::NoEnt));
        }
        for &slot in &order {
            match self.on(slot, |c| c.rmdir(path)) {
                Ok(()) | Err(Error::Status(Status::NoEnt)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The union of the nodes' listings of `path`, each name once, sorted by name.
    pub(crate) fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        let mut merged: BTreeMap<Vec<u8>, DirEntry> = BTreeMap::new();
        let mut found = false;
        let at_root = cluster_path(path)?.is_root();
        for slot in self.member_slot.clone() {
            match self.on(slot, |c| c.readdir(path)) {
                Ok(entries) => {
                    found = true;
                    for e in entries {
                        // Each node's staging directory of cross-node renames.
                        if at_root && e.name == dafs_cluster::XRENAME_STAGING_DIR.as_bytes() {
                            continue;
                        }
                        merged.entry(e.name.clone()).or_insert(e);
                    }
                }
                Err(Error::Status(Status::NoEnt)) => {}
                Err(e) => return Err(e),
            }
        }
        if !found {
            return Err(Error::Status(Status::NoEnt));
        }
        Ok(merged.into_values().collect())
    }

    /// `op` on every node (a directory's attributes); the manager's answer is returned.
    pub(super) fn on_every_node<T>(
        &mut self,
        path: &str,
        mut op: impl FnMut(&mut Client) -> Result<T>,
    ) -> Result<T> {
        let cp = cluster_path(path)?;
        let (_, first) = self.creating(path, &mut op)?;
        let manager = self.manager_slot(&cp);
        for slot in self.member_slot.clone() {
            if slot != manager {
                match self.on(slot, &mut op) {
                    Ok(_) | Err(Error::Status(Status::NoEnt)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(first)
    }

    /// Make the missing directories above `cp` on its manager, with the modes they have
    /// on the other nodes. False: some directory above `cp` exists on no node.
    pub(super) fn repair_parent(&mut self, cp: &ClusterPath) -> Result<bool> {
        let mut ancestors = Vec::new();
        let mut p = cp.parent();
        while let Some(a) = p.filter(|a| !a.is_root()) {
            p = a.parent();
            ancestors.push(a);
        }
        let target = self.manager_slot(cp);
        for dir in ancestors.into_iter().rev() {
            let d = dir.to_string();
            match self.on(target, |c| c.lstat(&d)) {
                Ok(a) if a.ftype == FileType::Directory => continue,
                Ok(_) => return Ok(false),
                Err(Error::Status(Status::NoEnt)) => {}
                Err(e) => return Err(e),
            }
            let mut mode = None;
            for slot in self.member_slot.clone() {
                if slot == target {
                    continue;
                }
                if let Ok(a) = self.on(slot, |c| c.lstat(&d)) {
                    if a.ftype == FileType::Directory {
                        mode = Some(a.mode);
                        break;
                    }
                }
            }
            let Some(mode) = mode else { return Ok(false) };
            match self.on(target, |c| c.mkdir(&d, mode)) {
                Ok(_) | Err(Error::Status(Status::Exist)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}
