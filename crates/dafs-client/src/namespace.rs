//! Path-based namespace calls: lookup, stat, open and close, create, remove, rename,
//! links, attributes, directories (the handle-based twins are in `at`).

use dafs_proto::types::{open_flags, setattr_mask, DirEntries};
use dafs_proto::{
    limits, Attr, FileHandle, FileType, FsStat, Opcode, Reply, Request, SetAttrs, Status,
};

use crate::at::check_rename_flags;
use crate::error::unexpected_reply;
use crate::file::MODE_BITS;
use crate::{ChainReply, Client, Error, File, OpenOptions, ProtocolViolation, Result};

/// A directory entry with its name owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub fileid: u64,
    pub ftype: FileType,
}

impl DirEntry {
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// Normalise a path inside the export: strip leading '/', drop empty and "." parts.
pub(crate) fn clean_path(path: &str) -> Result<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    let s = parts.join("/");
    if s.len() > PATH_WALK_BYTES_MAX {
        return Err(Error::Status(Status::NameTooLong));
    }
    Ok(s)
}

/// Longest path the path-based calls accept. One LOOKUP carries at most
/// `limits::PATH_BYTES_MAX` bytes; a longer path is walked in pieces that end at a
/// component boundary. Longer than PATH_MAX on purpose: an adapter with a working
/// directory of its own (the preload library) puts it in front of a path of up to
/// PATH_MAX - 1 bytes the application gave, and that path must work as it would locally.
pub const PATH_WALK_BYTES_MAX: usize = 4 * limits::PATH_BYTES_MAX;

/// Split a cleaned path into pieces of at most `limits::PATH_BYTES_MAX` bytes, each
/// ending at a component boundary.
fn walk_pieces(p: &str) -> Result<Vec<&str>> {
    let mut pieces = Vec::new();
    let mut rest = p;
    while rest.len() > limits::PATH_BYTES_MAX {
        // The last '/' within the bound (ASCII, so a char boundary). None: one
        // component longer than the bound, far past NAME_BYTES_MAX.
        let cut = rest.as_bytes()[..=limits::PATH_BYTES_MAX]
            .iter()
            .rposition(|&b| b == b'/')
            .ok_or(Error::Status(Status::NameTooLong))?;
        pieces.push(&rest[..cut]);
        rest = &rest[cut + 1..];
    }
    pieces.push(rest);
    Ok(pieces)
}

pub(crate) fn split_parent(path: &str) -> Result<(String, String)> {
    let p = clean_path(path)?;
    let (parent, name) = match p.rfind('/') {
        Some(i) => (p[..i].to_string(), p[i + 1..].to_string()),
        None => (String::new(), p),
    };
    if name.is_empty() || name == ".." {
        return Err(Error::InvalidArgument("path names no entry"));
    }
    if name.len() > limits::NAME_BYTES_MAX {
        return Err(Error::Status(Status::NameTooLong));
    }
    Ok((parent, name))
}

/// An OPEN reply, owned (as a chain returns it).
fn owned_open(r: Reply<'_>) -> Result<ChainReply> {
    match r {
        Reply::Open { open_id, fh, attr } => Ok(ChainReply::Open { open_id, fh, attr }),
        _ => Err(unexpected_reply(Opcode::Open)),
    }
}

impl Client {
    pub(crate) fn lookup_path(&mut self, path: &str, follow: bool) -> Result<(FileHandle, Attr)> {
        match self.lookup_path_once(path, follow) {
            // The server's handle table recycled the export's root handle (it is a cache
            // of bounded size): fetch it again and retry once.
            Err(Error::Status(Status::Stale)) => {
                let export = self.cfg.export.clone();
                self.refresh_root(&export)?;
                self.lookup_path_once(path, follow)
            }
            r => r,
        }
    }

    fn lookup_path_once(&mut self, path: &str, follow: bool) -> Result<(FileHandle, Attr)> {
        let p = clean_path(path)?;
        if p.is_empty() {
            let m = self.call(&Request::GetAttr { fh: self.root })?;
            return match self.decode(&m)?.1 {
                Reply::Attr { attr } => Ok((self.root, attr)),
                _ => Err(unexpected_reply(Opcode::GetAttr)),
            };
        }
        let pieces = walk_pieces(&p)?;
        let mut dir = self.root;
        for (i, piece) in pieces.iter().enumerate() {
            // Directories on the way are followed through symlinks, as the kernel does.
            let last = i + 1 == pieces.len();
            let req = Request::Lookup { dir, path: piece.as_bytes(), follow: follow || !last };
            let m = self.call(&req)?;
            match self.decode(&m)?.1 {
                Reply::Handle { fh, attr } if last => return Ok((fh, attr)),
                Reply::Handle { fh, .. } => dir = fh,
                _ => return Err(unexpected_reply(Opcode::Lookup)),
            }
        }
        unreachable!("walk_pieces yields at least one piece")
    }

    fn dir_of(&mut self, parent: &str) -> Result<FileHandle> {
        if parent.is_empty() {
            Ok(self.root)
        } else {
            Ok(self.lookup_path(parent, true)?.0)
        }
    }

    /// Look up a path (following symlinks) and return its handle and attributes.
    pub fn lookup(&mut self, path: &str) -> Result<(FileHandle, Attr)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.lookup(path, true);
        }
        self.lookup_path(path, true)
    }

    /// Look up a path without following a final symlink: the link's own handle.
    pub fn lookup_nofollow(&mut self, path: &str) -> Result<(FileHandle, Attr)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.lookup(path, false);
        }
        self.lookup_path(path, false)
    }

    /// Attributes of a path, following a final symlink.
    pub fn stat(&mut self, path: &str) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.stat(path, true);
        }
        Ok(self.lookup_path(path, true)?.1)
    }

    /// Attributes of a path, not following a final symlink.
    pub fn lstat(&mut self, path: &str) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.stat(path, false);
        }
        Ok(self.lookup_path(path, false)?.1)
    }

    /// Fresh attributes of an open file (or any handle).
    pub fn getattr(&mut self, fh: FileHandle) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.getattr(fh);
        }
        let m = self.call(&Request::GetAttr { fh })?;
        match self.decode(&m)?.1 {
            Reply::Attr { attr } => Ok(attr),
            _ => Err(unexpected_reply(Opcode::GetAttr)),
        }
    }

    pub fn fstat(&mut self, f: &File) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.fstat(f));
        }
        self.getattr(f.wire_fh())
    }

    /// Parent of a directory handle.
    pub fn lookup_parent(&mut self, fh: FileHandle) -> Result<(FileHandle, Attr)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.lookup_parent(fh);
        }
        let m = self.call(&Request::LookupParent { fh })?;
        match self.decode(&m)?.1 {
            Reply::Handle { fh, attr } => Ok((fh, attr)),
            _ => Err(unexpected_reply(Opcode::LookupParent)),
        }
    }

    /// Open a file.
    pub fn open(&mut self, path: &str, opts: OpenOptions) -> Result<File> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.open(path, opts);
        }
        self.open_on_server(path, opts, false)
    }

    /// Open a file by naming it in its directory (OPEN by name), never by a looked-up
    /// handle: on a node of a cluster under round-robin placement, a file whose home is
    /// another node is then opened there through this node (forwarded), as a cluster
    /// client's opens are. Otherwise like [`open`](Self::open).
    pub fn open_by_name(&mut self, path: &str, opts: OpenOptions) -> Result<File> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.open(path, opts);
        }
        self.open_on_server(path, opts, true)
    }

    /// Open a file on this (one) server; `by_name`: always name the file in its
    /// directory (OPEN by name), as a cluster client under round-robin placement does
    /// so that a node that does not hold the file can forward the open by its path.
    pub(crate) fn open_on_server(
        &mut self,
        path: &str,
        opts: OpenOptions,
        by_name: bool,
    ) -> Result<File> {
        opts.check()?;
        // Opens that create, or that act on the name later (delete-on-close), name the
        // file in its directory; others open the looked-up handle. Either way the LOOKUP
        // and the OPEN travel as one chain (one round trip) when the path fits one LOOKUP.
        let by_name_flags = open_flags::CREATE | open_flags::DELETE_ON_CLOSE;
        // A round-robin landing node forwards the OPEN but not a chain (its elements run
        // on the node's worker, which must not wait on the home): no chain then.
        let landing = by_name;
        let (reply, by_name) = if by_name || opts.flags & by_name_flags != 0 {
            let (parent, name) = split_parent(path)?;
            let open_in = |dir| Request::Open {
                fh: dir,
                flags: opts.flags,
                mode: opts.mode,
                name: name.as_bytes(),
                key: opts.key_bytes(),
            };
            let chained = if parent.is_empty() || landing {
                None
            } else {
                self.lookup_then(&parent, &open_in(crate::Chain::CURRENT))?
            };
            match chained {
                Some((dir, r)) => (r, Some((dir, name))),
                None => {
                    let dir = self.dir_of(&parent)?;
                    let m = self.call(&open_in(dir))?;
                    (owned_open(self.decode(&m)?.1)?, Some((dir, name)))
                }
            }
        } else {
            let open_fh = |fh| Request::Open {
                fh,
                flags: opts.flags,
                mode: opts.mode,
                name: b"",
                key: opts.key_bytes(),
            };
            match self.lookup_then(path, &open_fh(crate::Chain::CURRENT))? {
                Some((_, r)) => (r, None),
                None => {
                    let (fh, _) = self.lookup_path(path, true)?;
                    let m = self.call(&open_fh(fh))?;
                    (owned_open(self.decode(&m)?.1)?, None)
                }
            }
        };
        let f = match reply {
            ChainReply::Open { open_id, fh, attr } => {
                self.opened_file(open_id, fh, attr, Some((path.to_string(), opts)))
            }
            _ => return Err(unexpected_reply(Opcode::Open)),
        };
        self.track_open(&f, by_name.as_ref().map(|(d, n)| (*d, n.as_bytes())), &opts);
        Ok(f)
    }

    /// Create (or truncate) a file for writing, like `std::fs::File::create`.
    pub fn create(&mut self, path: &str) -> Result<File> {
        self.open(path, OpenOptions::read_write().create(true).truncate(true))
    }

    /// Close `f`. A file of a lost session has nothing left to close (the server released
    /// it with the session): that succeeds at once.
    pub fn close(&mut self, f: File) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_node(f.node, |n| n.close(f));
        }
        let Ok(open_id) = self.open_id_of(&f) else { return Ok(()) };
        let m = self.call(&Request::Close { open_id });
        // Closed, or no longer known to the server: nothing to reclaim either way.
        self.held.closed(open_id);
        self.decode(&m?).map(|_| ())
    }

    /// Make the file's data durable (COMMIT).
    pub fn fsync(&mut self, f: &File) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.fsync(f));
        }
        let m = self.call(&Request::Commit { open_id: self.open_id_of(f)?, offset: 0, len: 0 })?;
        self.decode(&m).map(|_| ())
    }

    pub fn mkdir(&mut self, path: &str, mode: u32) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.mkdir(path, mode);
        }
        let (parent, name) = split_parent(path)?;
        let dir = self.dir_of(&parent)?;
        let m = self.call(&Request::Create {
            dir,
            ftype: FileType::Directory,
            mode: mode & MODE_BITS,
            exclusive: true,
            name: name.as_bytes(),
        })?;
        match self.decode(&m)?.1 {
            Reply::Handle { attr, .. } => Ok(attr),
            _ => Err(unexpected_reply(Opcode::Create)),
        }
    }

    /// Create a regular file without opening it.
    pub fn create_file(
        &mut self,
        path: &str,
        mode: u32,
        exclusive: bool,
    ) -> Result<(FileHandle, Attr)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.create_file(path, mode, exclusive);
        }
        let (parent, name) = split_parent(path)?;
        let dir = self.dir_of(&parent)?;
        let m = self.call(&Request::Create {
            dir,
            ftype: FileType::Regular,
            mode: mode & MODE_BITS,
            exclusive,
            name: name.as_bytes(),
        })?;
        match self.decode(&m)?.1 {
            Reply::Handle { fh, attr } => Ok((fh, attr)),
            _ => Err(unexpected_reply(Opcode::Create)),
        }
    }

    /// Remove a file (not a directory).
    pub fn remove(&mut self, path: &str) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.remove(path);
        }
        let (parent, name) = split_parent(path)?;
        if !parent.is_empty() {
            // LOOKUP of the directory and REMOVE in one round trip.
            let req = Request::Remove { dir: crate::Chain::CURRENT, name: name.as_bytes() };
            if self.lookup_then(&parent, &req)?.is_some() {
                return Ok(());
            }
        }
        let dir = self.dir_of(&parent)?;
        let m = self.call(&Request::Remove { dir, name: name.as_bytes() })?;
        self.decode(&m).map(|_| ())
    }

    pub fn rmdir(&mut self, path: &str) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.rmdir(path);
        }
        let (parent, name) = split_parent(path)?;
        let dir = self.dir_of(&parent)?;
        let m = self.call(&Request::RmDir { dir, name: name.as_bytes() })?;
        self.decode(&m).map(|_| ())
    }

    /// Rename, replacing an existing target as rename(2) does.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        self.rename_with_flags(from, to, 0)
    }

    /// Rename as Linux `renameat2` does: `flags` is 0 or one of
    /// [`dafs_proto::rename_flags`] (`NOREPLACE`: fail with EEXIST if `to` exists;
    /// `EXCHANGE`: swap the two names, both must exist). Anything else is
    /// [`Error::InvalidArgument`], refused before it is sent.
    pub fn rename_with_flags(&mut self, from: &str, to: &str, flags: u32) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.rename(from, to, flags);
        }
        check_rename_flags(flags)?;
        let (fp, fname) = split_parent(from)?;
        let (tp, tname) = split_parent(to)?;
        let from_dir = self.dir_of(&fp)?;
        let to_dir = self.dir_of(&tp)?;
        self.rename_at_with_flags(from_dir, fname.as_bytes(), to_dir, tname.as_bytes(), flags)
    }

    /// CLUSTER_RENAME of the file `from` on this (cluster) node to `to_rel`, a path
    /// beneath the export root that another node manages.
    pub(crate) fn cluster_rename(&mut self, from: &str, to_rel: &str) -> Result<()> {
        let (fp, fname) = split_parent(from)?;
        let from_dir = self.dir_of(&fp)?;
        let req = Request::ClusterRename {
            from_dir,
            from_name: fname.as_bytes(),
            to_path: to_rel.as_bytes(),
        };
        let m = self.call(&req)?;
        self.decode(&m).map(|_| ())
    }

    /// Hard link: `new_path` names the same file as `existing` (a symlink itself, as
    /// link(2) does).
    pub fn link(&mut self, existing: &str, new_path: &str) -> Result<Attr> {
        self.link_with(existing, new_path, false)
    }

    /// Hard link to what `existing` names with symlinks followed
    /// (`linkat(AT_SYMLINK_FOLLOW)`).
    pub fn link_follow(&mut self, existing: &str, new_path: &str) -> Result<Attr> {
        self.link_with(existing, new_path, true)
    }

    fn link_with(&mut self, existing: &str, new_path: &str, follow: bool) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.link(existing, new_path, follow);
        }
        let (fh, _) = self.lookup_path(existing, follow)?;
        let (p, name) = split_parent(new_path)?;
        let dir = self.dir_of(&p)?;
        let m = self.call(&Request::Link { fh, dir, name: name.as_bytes() })?;
        match self.decode(&m)?.1 {
            Reply::Attr { attr } => Ok(attr),
            _ => Err(unexpected_reply(Opcode::Link)),
        }
    }

    pub fn symlink(&mut self, target: &str, link_path: &str) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.symlink(target, link_path);
        }
        let (p, name) = split_parent(link_path)?;
        let dir = self.dir_of(&p)?;
        let m =
            self.call(&Request::Symlink { dir, name: name.as_bytes(), target: target.as_bytes() })?;
        match self.decode(&m)?.1 {
            Reply::Handle { attr, .. } => Ok(attr),
            _ => Err(unexpected_reply(Opcode::Symlink)),
        }
    }

    /// Make a special file at `path` (see [`Client::mknod_at`]).
    pub fn mknod(&mut self, path: &str, ftype: FileType, mode: u32, rdev: u64) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.mknod(path, ftype, mode, rdev);
        }
        let (p, name) = split_parent(path)?;
        let dir = self.dir_of(&p)?;
        self.mknod_at(dir, name.as_bytes(), ftype, mode, rdev).map(|(_, attr)| attr)
    }

    pub fn readlink(&mut self, path: &str) -> Result<Vec<u8>> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.readlink(path);
        }
        let (fh, _) = self.lookup_path(path, false)?;
        self.readlink_handle(fh)
    }

    /// Change attributes (see [`dafs_proto::types::setattr_mask`]).
    pub fn setattr(&mut self, fh: FileHandle, set: SetAttrs) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.setattr(fh, set);
        }
        let m = self.call(&Request::SetAttr { fh, set })?;
        match self.decode(&m)?.1 {
            Reply::Attr { attr } => Ok(attr),
            _ => Err(unexpected_reply(Opcode::SetAttr)),
        }
    }

    pub fn truncate(&mut self, path: &str, size: u64) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.truncate(path, size);
        }
        let (fh, _) = self.lookup_path(path, true)?;
        self.setattr(fh, SetAttrs { mask: setattr_mask::SIZE, size, ..Default::default() })
    }

    /// Set the size of an open file (also after a rename; `Stale` once it has no name left).
    pub fn ftruncate(&mut self, f: &File, size: u64) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.ftruncate(f, size));
        }
        let fh = f.wire_fh();
        self.setattr(fh, SetAttrs { mask: setattr_mask::SIZE, size, ..Default::default() })
    }

    pub fn chmod(&mut self, path: &str, mode: u32) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.chmod(path, mode);
        }
        let (fh, _) = self.lookup_path(path, true)?;
        self.setattr(
            fh,
            SetAttrs { mask: setattr_mask::MODE, mode: mode & MODE_BITS, ..Default::default() },
        )
    }

    /// Set access and modification times (nanoseconds since the epoch).
    pub fn set_times(&mut self, path: &str, atime_ns: i64, mtime_ns: i64) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.set_times(path, atime_ns, mtime_ns);
        }
        let (fh, _) = self.lookup_path(path, true)?;
        self.setattr(
            fh,
            SetAttrs {
                mask: setattr_mask::ATIME | setattr_mask::MTIME,
                atime_ns,
                mtime_ns,
                ..Default::default()
            },
        )
    }

    /// Which of `mask` ([`dafs_proto::types::access_mask`]) the server grants.
    pub fn access(&mut self, path: &str, mask: u32) -> Result<u32> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.access(path, mask);
        }
        let (fh, _) = self.lookup_path(path, true)?;
        self.access_handle(fh, mask)
    }

    pub fn statfs(&mut self) -> Result<FsStat> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.statfs();
        }
        let m = self.call(&Request::FsStat { fh: self.root })?;
        match self.decode(&m)?.1 {
            Reply::FsStat(s) => Ok(s),
            _ => Err(unexpected_reply(Opcode::FsStat)),
        }
    }

    /// One READDIR round trip: entries after `cookie`, the cookie to continue from, eof.
    pub fn readdir_page(
        &mut self,
        dir: FileHandle,
        cookie: u64,
        max_entries: u32,
    ) -> Result<(Vec<DirEntry>, u64, bool)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.readdir_page(dir, cookie, max_entries);
        }
        let m = self.call(&Request::ReadDir { dir, cookie, max_entries, max_bytes: 0 })?;
        match self.decode(&m)?.1 {
            Reply::ReadDir { eof, entries, .. } => {
                let mut out = Vec::new();
                let mut next = cookie;
                for e in DirEntries::new(entries) {
                    let e = e?;
                    next = e.cookie;
                    out.push(DirEntry { name: e.name.to_vec(), fileid: e.fileid, ftype: e.ftype });
                }
                if !eof && out.is_empty() {
                    return Err(ProtocolViolation::ReaddirNoProgress.into());
                }
                Ok((out, next, eof))
            }
            _ => Err(unexpected_reply(Opcode::ReadDir)),
        }
    }

    /// All entries of a directory (any size: continues with cookies).
    pub fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.readdir(path);
        }
        let (dir, attr) = self.lookup_path(path, true)?;
        if !attr.is_dir() {
            return Err(Error::Status(Status::NotDir));
        }
        let mut all = Vec::new();
        let mut cookie = 0;
        loop {
            let (mut page, next, eof) = self.readdir_page(dir, cookie, 0)?;
            all.append(&mut page);
            if eof {
                return Ok(all);
            }
            cookie = next;
        }
    }

    /// Open the file `f` names again, by the path and options it was opened with (after
    /// [`Client::reestablish`]); the position carries over. Creation and truncation are
    /// not repeated.
    pub fn reopen(&mut self, f: &File) -> Result<File> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.reopen(f);
        }
        let (path, opts) =
            f.origin.clone().ok_or(Error::InvalidArgument("file was not opened by path"))?;
        let mut opts = opts;
        opts.flags &= !(open_flags::CREATE
            | open_flags::EXCLUSIVE
            | open_flags::TRUNCATE
            | open_flags::UNLINKED);
        let mut nf = self.open(&path, opts)?;
        nf.pos = f.pos;
        Ok(nf)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_paths_walk_in_pieces_at_component_boundaries() {
        use super::walk_pieces;
        let comp = "c".repeat(200);
        let long = vec![comp.as_str(); 30].join("/"); // 6,029 bytes
        let pieces = walk_pieces(&long).unwrap();
        assert_eq!(pieces.len(), 2);
        assert!(pieces.iter().all(|p| p.len() <= dafs_proto::limits::PATH_BYTES_MAX));
        assert_eq!(pieces.join("/"), long);
        assert!(pieces.iter().all(|p| !p.starts_with('/') && !p.ends_with('/')));
        assert_eq!(walk_pieces("a/b").unwrap(), vec!["a/b"]);
        let one = "x".repeat(dafs_proto::limits::PATH_BYTES_MAX + 1);
        assert!(walk_pieces(&one).is_err());
    }
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(clean_path("//a/./b//c/").unwrap(), "a/b/c");
        assert_eq!(split_parent("/a/b").unwrap(), ("a".into(), "b".into()));
        assert_eq!(split_parent("x").unwrap(), ("".into(), "x".into()));
        assert!(split_parent("/").is_err());
        assert!(split_parent("a/..").is_err());
    }
}
