//! Calls by handle on a cluster URL: a front-side handle table.
//!
//! A directory is virtual (the same directory on every node, each with its own
//! handle), and a child's node is named by the hash of its *full path*, so a handle
//! the front client gives out must know its path: `lookup_at(dir, name)` routes
//! `dir`'s path + `/name` like any path call. The table maps a front handle to its
//! path and, for a non-directory, to the node that holds it and that node's handle
//! (getattr, setattr, open, readlink go straight there).
//!
//! Front handles are `MAGIC | table nonce | index | generation`: another client's
//! handle, or bytes that are not a front handle, answer `BADHANDLE`; an entry since
//! evicted or replaced answers `STALE` — as a single server answers for handles it
//! forgot, and a caller (the FUSE mount) looks the name up again. The table is
//! bounded in entries and path bytes; when full, entries are evicted in clock order
//! (the root never). One entry per path: looking a name up again reuses it.

use std::collections::HashMap;

use dafs_proto::{Attr, FileHandle, FileType, Status};

use super::{cluster_path, Cluster};
use crate::{Error, File, Result};

/// Most entries of a front handle table. A kernel mount keeps a handle per inode it
/// caches; past this the oldest-used are evicted (answering STALE, looked up again).
pub const CLUSTER_HANDLES_MAX: usize = 16 * 1024;
/// Most path bytes the table holds (paths are up to PATH_MAX each: the entry count
/// alone would allow 64 MiB).
pub const CLUSTER_HANDLE_PATH_BYTES_MAX: usize = 8 << 20;

const MAGIC: &[u8; 8] = b"dafs-cl\x01";

/// What a front handle names.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    /// The cluster path ("/" for the root).
    pub(super) path: String,
    /// A non-directory: the node (slot) holding it and that node's handle. None: a
    /// (virtual) directory.
    pub(super) node: Option<(usize, FileHandle)>,
}

struct Cell {
    gen: u64,
    entry: Option<Entry>,
    /// Used since the clock hand last passed.
    referenced: bool,
}

pub(super) struct HandleTable {
    nonce: u64,
    cells: Vec<Cell>,
    by_path: HashMap<String, u32>,
    free: Vec<u32>,
    path_bytes: usize,
    hand: usize,
}

impl HandleTable {
    /// A table holding the root ("/", index 0).
    pub(super) fn new(nonce: u64) -> HandleTable {
        let mut t = HandleTable {
            nonce,
            cells: Vec::new(),
            by_path: HashMap::new(),
            free: Vec::new(),
            path_bytes: 0,
            hand: 1,
        };
        t.insert(Entry { path: "/".into(), node: None });
        t
    }

    pub(super) fn root(&self) -> FileHandle {
        self.encode(0)
    }

    fn encode(&self, i: u32) -> FileHandle {
        let mut b = [0u8; FileHandle::LEN];
        b[..8].copy_from_slice(MAGIC);
        b[8..16].copy_from_slice(&self.nonce.to_le_bytes());
        b[16..20].copy_from_slice(&i.to_le_bytes());
        b[20..28].copy_from_slice(&self.cells[i as usize].gen.to_le_bytes());
        FileHandle(b)
    }

    /// The entry `fh` names: BADHANDLE if it is not one of this table's handles,
    /// STALE if its entry is gone.
    pub(super) fn get(&mut self, fh: FileHandle) -> Result<Entry> {
        let b = &fh.0;
        if &b[..8] != MAGIC
            || b[8..16] != self.nonce.to_le_bytes()
            || b[28..].iter().any(|&x| x != 0)
        {
            return Err(Error::Status(Status::BadHandle));
        }
        let i = u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")) as usize;
        let gen = u64::from_le_bytes(b[20..28].try_into().expect("8 bytes"));
        let cell = self.cells.get_mut(i).ok_or(Error::Status(Status::BadHandle))?;
        match &cell.entry {
            Some(e) if cell.gen == gen => {
                cell.referenced = true;
                Ok(e.clone())
            }
            _ if gen <= cell.gen => Err(Error::Status(Status::Stale)),
            _ => Err(Error::Status(Status::BadHandle)),
        }
    }

    /// The handle of `e` (its path's entry, replaced if it named another object).
    pub(super) fn insert(&mut self, e: Entry) -> FileHandle {
        if let Some(&i) = self.by_path.get(&e.path) {
            let cell = &mut self.cells[i as usize];
            let old = cell.entry.as_ref().expect("indexed entries are live");
            let same = old.node.map(|n| n.1) == e.node.map(|n| n.1);
            if same || i == 0 {
                cell.referenced = true;
                return self.encode(i);
            }
            // Another object under the path now: the old handle goes STALE.
            self.remove(i);
        }
        while self.by_path.len() >= CLUSTER_HANDLES_MAX
            || self.path_bytes + e.path.len() > CLUSTER_HANDLE_PATH_BYTES_MAX
        {
            self.evict_one();
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.cells.push(Cell { gen: 0, entry: None, referenced: false });
                (self.cells.len() - 1) as u32
            }
        };
        self.path_bytes += e.path.len();
        self.by_path.insert(e.path.clone(), i);
        let cell = &mut self.cells[i as usize];
        cell.gen += 1;
        cell.entry = Some(e);
        // Marked at its first use, not now: a burst of new entries (a listing looked
        // up once) is evicted before entries in use.
        cell.referenced = false;
        self.encode(i)
    }

    fn remove(&mut self, i: u32) {
        assert_ne!(i, 0, "the root stays");
        let e = self.cells[i as usize].entry.take().expect("removing a live entry");
        self.path_bytes -= e.path.len();
        self.by_path.remove(&e.path);
        self.free.push(i);
    }

    /// Forget the entry of `path` (removed, or renamed away): its handle goes STALE.
    pub(super) fn forget(&mut self, path: &str) {
        if let Some(&i) = self.by_path.get(path) {
            if i != 0 {
                self.remove(i);
            }
        }
    }

    /// Clock: pass over referenced entries (clearing the mark), evict the first not.
    fn evict_one(&mut self) {
        assert!(self.by_path.len() > 1, "a table this full holds more than the root");
        loop {
            if self.hand >= self.cells.len() {
                self.hand = 1;
            }
            let i = self.hand;
            self.hand += 1;
            let cell = &mut self.cells[i];
            if cell.entry.is_none() {
                continue;
            }
            if std::mem::take(&mut cell.referenced) {
                continue;
            }
            self.remove(i as u32);
            return;
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_path.len()
    }
}

/// `dir`'s path joined with one component `name` (no `/`, not `.` or `..`).
pub(super) fn child_path(dir: &str, name: &[u8]) -> Result<String> {
    let name = std::str::from_utf8(name)
        .map_err(|_| Error::InvalidArgument("names on a cluster URL are UTF-8"))?;
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(Error::InvalidArgument("a handle-relative name is one path component"));
    }
    let p = if dir == "/" { format!("/{name}") } else { format!("{dir}/{name}") };
    Ok(cluster_path(&p)?.to_string())
}

impl Cluster {
    /// File `f`, which node `slot` opened under `path`, as the front client gives it
    /// out: on its node, with the front handle (the node's kept for the node's calls).
    pub(super) fn fronted(&mut self, path: &str, slot: usize, mut f: File) -> File {
        f.node = slot;
        let node_fh = *f.node_fh.get_or_insert(f.fh);
        if let Ok(p) = cluster_path(path) {
            f.fh = self.handle_for(&p.to_string(), slot, node_fh, &f.attr);
        }
        f
    }

    /// The front handle of `path`, which node `slot` answered with `(fh, attr)`.
    pub(super) fn handle_for(
        &mut self,
        path: &str,
        slot: usize,
        fh: FileHandle,
        attr: &Attr,
    ) -> FileHandle {
        let node = (attr.ftype != FileType::Directory).then_some((slot, fh));
        self.handles.insert(Entry { path: path.to_string(), node })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, b: u8) -> Entry {
        Entry { path: path.into(), node: Some((0, FileHandle([b; FileHandle::LEN]))) }
    }

    #[test]
    fn handles_name_their_entry_and_refuse_forgeries() {
        let mut t = HandleTable::new(7);
        let root = t.root();
        assert_eq!(t.get(root).unwrap().path, "/");
        let a = t.insert(file("/a", 1));
        assert_eq!(t.insert(file("/a", 1)), a, "one entry per path");
        assert_eq!(t.get(a).unwrap().path, "/a");
        // Another client's handle, or not a front handle at all: BADHANDLE.
        let other = HandleTable::new(8).root();
        assert!(matches!(t.get(other), Err(Error::Status(Status::BadHandle))));
        assert!(matches!(t.get(FileHandle([0; 40])), Err(Error::Status(Status::BadHandle))));
        let mut forged = a;
        forged.0[16] = 200;
        assert!(matches!(t.get(forged), Err(Error::Status(Status::BadHandle))));
        // Replaced by another object, or forgotten: STALE.
        let a2 = t.insert(file("/a", 2));
        assert_ne!(a2, a);
        assert!(matches!(t.get(a), Err(Error::Status(Status::Stale))));
        t.forget("/a");
        assert!(matches!(t.get(a2), Err(Error::Status(Status::Stale))));
        t.forget("/");
        assert!(t.get(root).is_ok(), "the root stays");
    }

    #[test]
    fn the_table_is_bounded_and_evicts_the_unreferenced() {
        let mut t = HandleTable::new(1);
        let keep = t.insert(file("/keep", 1));
        let mut first = None;
        for i in 0..CLUSTER_HANDLES_MAX + 10 {
            let h = t.insert(file(&format!("/f{i}"), 3));
            first.get_or_insert(h);
            // `keep` is used all along: the clock passes it over.
            t.get(keep).unwrap();
            assert!(t.len() <= CLUSTER_HANDLES_MAX);
        }
        assert!(t.get(keep).is_ok());
        assert!(matches!(t.get(first.unwrap()), Err(Error::Status(Status::Stale))));
        assert!(t.get(t.root()).is_ok());
        // Path bytes bound too.
        let long = "x".repeat(4000);
        for i in 0..(CLUSTER_HANDLE_PATH_BYTES_MAX / 4000 + 10) {
            t.insert(file(&format!("/{long}{i}"), 4));
            assert!(t.path_bytes <= CLUSTER_HANDLE_PATH_BYTES_MAX);
        }
    }

    #[test]
    fn child_paths_are_one_component() {
        assert_eq!(child_path("/", b"a").unwrap(), "/a");
        assert_eq!(child_path("/d", b"a").unwrap(), "/d/a");
        for bad in [&b""[..], b".", b"..", b"a/b"] {
            assert!(child_path("/d", bad).is_err());
        }
    }
}
