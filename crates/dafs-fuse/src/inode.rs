//! The inode table: which kernel inode number names which DAFS object (by its handle
//! and its (fsid, file id)), where the object was last seen, and how many kernel
//! lookups keep the entry alive.

use std::collections::HashMap;

use dafs_client::dafs_proto::{Attr, FileHandle};

/// The kernel's inode number of the export root.
pub(crate) const ROOT_INO: u64 = fuser::FUSE_ROOT_ID;
/// Inode numbers we make up when a server file id cannot be used as is (0, 1, or
/// already taken by an object of another file system inside the export) start here,
/// far above any file id a local file system hands out.
const SYNTHETIC_INO_BASE: u64 = 1 << 62;

/// One inode the kernel knows.
pub(crate) struct Node {
    pub(crate) fh: FileHandle,
    pub(crate) fsid: u64,
    pub(crate) fileid: u64,
    /// Outstanding kernel lookups (entry replies minus forgets). At least 1 while the
    /// node is in the table: the forget that takes it to 0 removes it.
    lookups: u64,
    /// Where it was last seen: to look it up again if the server forgets its handle.
    pub(crate) parent: u64,
    pub(crate) name: Vec<u8>,
    /// Last attributes seen: answers fstat of a file deleted while open (its handle
    /// is STALE on the server from then on).
    pub(crate) attr: Attr,
    /// Close-to-open: the server's (size, mtime, ctime) when the kernel last opened
    /// the file, i.e. the version its cached pages belong to. The next open keeps the
    /// pages only if the server still reports exactly this.
    pub(crate) pages_of: Option<(u64, i64, i64)>,
}

impl Node {
    /// One more kernel lookup of this node (an entry reply naming it).
    pub(crate) fn add_lookup(&mut self) {
        self.lookups += 1;
    }
}

/// Every inode the kernel knows, by inode number and by (fsid, file id).
pub(crate) struct InodeTable {
    nodes: HashMap<u64, Node>,
    /// (fsid, file id) → inode number: one inode per object, so hard links share it.
    /// Holds exactly the nodes of `nodes`.
    by_id: HashMap<(u64, u64), u64>,
    /// Where the search for a free synthetic inode number starts.
    next_synthetic: u64,
}

impl InodeTable {
    /// A table holding the export root (`fh`, `attr`) as [`ROOT_INO`].
    pub(crate) fn new(fh: FileHandle, attr: Attr) -> InodeTable {
        let mut t = InodeTable {
            nodes: HashMap::new(),
            by_id: HashMap::new(),
            next_synthetic: SYNTHETIC_INO_BASE,
        };
        t.nodes.insert(
            ROOT_INO,
            Node {
                fh,
                fsid: attr.fsid,
                fileid: attr.fileid,
                lookups: 1,
                parent: ROOT_INO,
                name: Vec::new(),
                attr,
                pages_of: None,
            },
        );
        t.by_id.insert((attr.fsid, attr.fileid), ROOT_INO);
        t
    }

    pub(crate) fn get(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    pub(crate) fn get_mut(&mut self, ino: u64) -> Option<&mut Node> {
        self.nodes.get_mut(&ino)
    }

    /// The inode number for the object (fsid, fileid): the server's file id itself, so
    /// `stat` shows the same numbers as on the server and hard links share one, unless
    /// that number is reserved or taken.
    fn ino_for(&mut self, a: &Attr) -> u64 {
        if let Some(&ino) = self.by_id.get(&(a.fsid, a.fileid)) {
            return ino;
        }
        let want = a.fileid;
        if want > ROOT_INO && want < SYNTHETIC_INO_BASE && !self.nodes.contains_key(&want) {
            return want;
        }
        while self.nodes.contains_key(&self.next_synthetic) {
            self.next_synthetic += 1;
        }
        self.next_synthetic
    }

    /// Record a kernel lookup of `name` in `parent` resolving to (fh, attr); returns the
    /// inode number to answer with.
    pub(crate) fn remember(&mut self, parent: u64, name: &[u8], fh: FileHandle, attr: Attr) -> u64 {
        let ino = self.ino_for(&attr);
        match self.nodes.get_mut(&ino) {
            Some(n) => {
                // ino_for returns a number in use only for the same object.
                assert!(
                    n.fsid == attr.fsid && n.fileid == attr.fileid,
                    "inode {ino} is ({}, {}), not ({}, {})",
                    n.fsid,
                    n.fileid,
                    attr.fsid,
                    attr.fileid
                );
                n.fh = fh;
                n.lookups += 1;
                n.parent = parent;
                n.name = name.to_vec();
                n.attr = attr;
            }
            None => {
                self.nodes.insert(
                    ino,
                    Node {
                        fh,
                        fsid: attr.fsid,
                        fileid: attr.fileid,
                        lookups: 1,
                        parent,
                        name: name.to_vec(),
                        attr,
                        pages_of: None,
                    },
                );
                let before = self.by_id.insert((attr.fsid, attr.fileid), ino);
                assert!(before.is_none(), "object ({}, {}) had two inodes", attr.fsid, attr.fileid);
            }
        }
        ino
    }

    /// The kernel dropped `nlookup` of its lookups of `ino`: the node goes with the last.
    pub(crate) fn forget(&mut self, ino: u64, nlookup: u64) {
        // The root lives as long as the mount (the kernel holds it without a lookup).
        if ino == ROOT_INO {
            return;
        }
        let gone = match self.nodes.get_mut(&ino) {
            Some(n) => {
                assert!(n.lookups > 0, "inode {ino} left in the table with no lookups");
                // Deliberately not asserted: nlookup <= n.lookups. The count is the
                // kernel's, not ours. Every entry reply is counted here before it is
                // sent and the kernel counts only those it takes (it drops a reply to an
                // interrupted request, or one whose attributes it finds invalid, without
                // a forget), so ours can only be the larger; a larger nlookup would be
                // a kernel that disagrees, and the mount must not die of that: the node
                // simply goes, as it always has.
                n.lookups = n.lookups.saturating_sub(nlookup);
                n.lookups == 0
            }
            // Not asserted either, for the same reason: a forget for an inode we never
            // gave (or already dropped) is the kernel's word against ours; nothing to do.
            None => false,
        };
        if gone {
            if let Some(n) = self.nodes.remove(&ino) {
                let indexed = self.by_id.remove(&(n.fsid, n.fileid));
                assert_eq!(indexed, Some(ino), "inode index out of step with the table");
            }
        }
    }

    /// `from` in `parent` was renamed to `to` in `newparent`: keep the moved inode's name
    /// current (for looking it up again later).
    pub(crate) fn renamed(&mut self, parent: u64, from: &[u8], newparent: u64, to: &[u8]) {
        if let Some(n) = self.nodes.values_mut().find(|n| n.parent == parent && n.name == from) {
            n.parent = newparent;
            n.name = to.to_vec();
        }
    }

    /// `a` in `parent` and `b` in `newparent` swapped names (RENAME_EXCHANGE): each known
    /// inode of the two now carries the other's name.
    pub(crate) fn exchanged(&mut self, parent: u64, a: &[u8], newparent: u64, b: &[u8]) {
        let find = |nodes: &HashMap<u64, Node>, p: u64, name: &[u8]| {
            nodes.iter().find(|(_, n)| n.parent == p && n.name == name).map(|(ino, _)| *ino)
        };
        let (ia, ib) = (find(&self.nodes, parent, a), find(&self.nodes, newparent, b));
        for (ino, (p, name)) in [(ia, (newparent, b)), (ib, (parent, a))] {
            if let Some(n) = ino.and_then(|i| self.nodes.get_mut(&i)) {
                n.parent = p;
                n.name = name.to_vec();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr_in(fsid: u64, fileid: u64) -> Attr {
        Attr {
            ftype: dafs_client::dafs_proto::FileType::Regular,
            mode: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size: 0,
            used: 0,
            fileid,
            fsid,
            rdev: 0,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        }
    }

    fn attr(fileid: u64) -> Attr {
        attr_in(7, fileid)
    }

    fn fh(n: u8) -> FileHandle {
        FileHandle([n; FileHandle::LEN])
    }

    #[test]
    fn lookups_keep_a_node_until_the_last_forget() {
        let mut t = InodeTable::new(fh(1), attr(2));
        let ino = t.remember(ROOT_INO, b"a", fh(2), attr(100));
        assert_eq!(ino, 100);
        assert_eq!(t.remember(ROOT_INO, b"hardlink", fh(3), attr(100)), ino);
        t.forget(ino, 1);
        assert!(t.get(ino).is_some());
        t.forget(ino, 1);
        assert!(t.get(ino).is_none());
        // A new lookup after the last forget starts over.
        assert_eq!(t.remember(ROOT_INO, b"a", fh(2), attr(100)), ino);
        assert!(t.get(ino).is_some());
        // The kernel forgetting more than it looked up drops the node (tolerated).
        t.forget(ino, 5);
        assert!(t.get(ino).is_none());
        t.forget(ino, 1);
        t.forget(ROOT_INO, 9);
        assert!(t.get(ROOT_INO).is_some());
    }

    #[test]
    fn reserved_and_taken_numbers_get_synthetic_inodes() {
        let mut t = InodeTable::new(fh(1), attr(2));
        assert_eq!(t.remember(ROOT_INO, b"zero", fh(2), attr(0)), SYNTHETIC_INO_BASE);
        assert_eq!(t.remember(ROOT_INO, b"one", fh(3), attr(1)), SYNTHETIC_INO_BASE + 1);
        // Same file id in another file system inside the export.
        assert_eq!(t.remember(ROOT_INO, b"other", fh(4), attr_in(8, 0)), SYNTHETIC_INO_BASE + 2);
        t.renamed(ROOT_INO, b"one", ROOT_INO, b"uno");
        assert_eq!(t.get(SYNTHETIC_INO_BASE + 1).unwrap().name, b"uno");
    }

    #[test]
    fn exchanged_names_swap_between_the_two_inodes() {
        let mut t = InodeTable::new(fh(1), attr(2));
        let dir = t.remember(ROOT_INO, b"d", fh(2), attr(10));
        let f = t.remember(ROOT_INO, b"f", fh(3), attr(11));
        let g = t.remember(dir, b"g", fh(4), attr(12));
        t.exchanged(ROOT_INO, b"f", dir, b"g");
        let (nf, ng) = (t.get(f).unwrap(), t.get(g).unwrap());
        assert_eq!((nf.parent, nf.name.as_slice()), (dir, &b"g"[..]));
        assert_eq!((ng.parent, ng.name.as_slice()), (ROOT_INO, &b"f"[..]));
        // Only one side known to the kernel: it still takes the other name.
        t.exchanged(dir, b"g", ROOT_INO, b"unknown");
        let nf = t.get(f).unwrap();
        assert_eq!((nf.parent, nf.name.as_slice()), (ROOT_INO, &b"unknown"[..]));
    }
}
