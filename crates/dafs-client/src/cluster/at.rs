//! The handle-relative calls of a cluster client (see `handles`): a directory handle
//! stands for its path, so a name relative to it is routed as the full path is; a
//! file's handle goes straight to the node holding the file.

use dafs_proto::types::SetAttrs;
use dafs_proto::{Attr, FileHandle, FileType, Status};

use super::handles::{child_path, Entry};
use super::Cluster;
use crate::{Client, DirEntry, DirEntryAt, Error, File, OpenOptions, Result};

/// Split a cluster path into its parent's path and its last component.
fn split(path: &str) -> (&str, &str) {
    let i = path.rfind('/').expect("cluster paths are absolute");
    (if i == 0 { "/" } else { &path[..i] }, &path[i + 1..])
}

/// The node's handle of directory `dir` (a cluster path).
fn node_dir(c: &mut Client, dir: &str) -> Result<FileHandle> {
    if dir == "/" {
        Ok(c.root_handle())
    } else {
        Ok(c.lookup(dir)?.0)
    }
}

impl Cluster {
    pub(crate) fn root_handle(&self) -> FileHandle {
        self.handles.root()
    }

    fn entry(&mut self, fh: FileHandle) -> Result<Entry> {
        self.handles.get(fh)
    }

    /// The path of directory handle `dir` (NOTDIR for a file's handle).
    fn dir_path(&mut self, dir: FileHandle) -> Result<String> {
        match self.entry(dir)? {
            Entry { path, node: None } => Ok(path),
            _ => Err(Error::Status(Status::NotDir)),
        }
    }

    pub(crate) fn lookup_at(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        follow: bool,
    ) -> Result<(FileHandle, Attr)> {
        let path = child_path(&self.dir_path(dir)?, name)?;
        let (slot, (fh, attr)) =
            self.existing(
                &path,
                |c| {
                    if follow {
                        c.lookup(&path)
                    } else {
                        c.lookup_nofollow(&path)
                    }
                },
            )?;
        Ok((self.handle_for(&path, slot, fh, &attr), attr))
    }

    pub(crate) fn lookup_parent(&mut self, fh: FileHandle) -> Result<(FileHandle, Attr)> {
        let path = self.dir_path(fh)?;
        let parent = split(&path).0.to_string();
        let parent = if path == "/" { path } else { parent };
        let attr = self.stat(&parent, false)?;
        Ok((self.handle_for(&parent, 0, fh, &attr), attr))
    }

    pub(crate) fn getattr(&mut self, fh: FileHandle) -> Result<Attr> {
        match self.entry(fh)? {
            Entry { node: Some((slot, nfh)), .. } => self.with_node(slot, |c| c.getattr(nfh)),
            Entry { path, node: None } => self.stat(&path, false),
        }
    }

    pub(crate) fn setattr(&mut self, fh: FileHandle, set: SetAttrs) -> Result<Attr> {
        match self.entry(fh)? {
            Entry { node: Some((slot, nfh)), .. } => self.with_node(slot, |c| c.setattr(nfh, set)),
            // A directory's attributes are kept alike on every node.
            Entry { path, node: None } => self.on_every_node(&path, |c| {
                let h = node_dir(c, &path)?;
                c.setattr(h, set)
            }),
        }
    }

    pub(crate) fn create_at(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        ftype: FileType,
        mode: u32,
        exclusive: bool,
    ) -> Result<(FileHandle, Attr)> {
        let path = child_path(&self.dir_path(dir)?, name)?;
        if ftype == FileType::Directory {
            let attr = self.mkdir(&path, mode)?;
            return Ok((self.handle_for(&path, 0, FileHandle([0; FileHandle::LEN]), &attr), attr));
        }
        let (parent, leaf) = split(&path);
        let (slot, (fh, attr)) = self.creating(&path, |c| {
            let d = node_dir(c, parent)?;
            c.create_at(d, leaf.as_bytes(), ftype, mode, exclusive)
        })?;
        Ok((self.handle_for(&path, slot, fh, &attr), attr))
    }

    pub(crate) fn open_at(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        opts: OpenOptions,
    ) -> Result<File> {
        let path = child_path(&self.dir_path(dir)?, name)?;
        self.open(&path, opts)
    }

    pub(crate) fn open_handle(&mut self, fh: FileHandle, opts: OpenOptions) -> Result<File> {
        let path = self.entry(fh)?.path;
        let (slot, f) = match self.entry(fh)? {
            Entry { node: Some((slot, nfh)), .. } => {
                (slot, self.with_node(slot, |c| c.open_handle(nfh, opts))?)
            }
            Entry { node: None, .. } => self.existing(&path, |c| {
                let h = node_dir(c, &path)?;
                c.open_handle(h, opts)
            })?,
        };
        Ok(self.fronted(&path, slot, f))
    }

    pub(crate) fn remove_at(&mut self, dir: FileHandle, name: &[u8]) -> Result<()> {
        let path = child_path(&self.dir_path(dir)?, name)?;
        self.remove(&path)?;
        self.handles.forget(&path);
        Ok(())
    }

    pub(crate) fn rmdir_at(&mut self, dir: FileHandle, name: &[u8]) -> Result<()> {
        let path = child_path(&self.dir_path(dir)?, name)?;
        self.rmdir(&path)?;
        self.handles.forget(&path);
        Ok(())
    }

    pub(crate) fn rename_at(
        &mut self,
        from_dir: FileHandle,
        from_name: &[u8],
        to_dir: FileHandle,
        to_name: &[u8],
        flags: u32,
    ) -> Result<()> {
        let from = child_path(&self.dir_path(from_dir)?, from_name)?;
        let to = child_path(&self.dir_path(to_dir)?, to_name)?;
        self.rename(&from, &to, flags)?;
        // The moved object may be on another node now (another handle), and the old
        // target is gone: both names are looked up afresh.
        self.handles.forget(&from);
        self.handles.forget(&to);
        Ok(())
    }

    pub(crate) fn link_at(&mut self, fh: FileHandle, dir: FileHandle, name: &[u8]) -> Result<Attr> {
        let existing = self.entry(fh)?.path;
        let path = child_path(&self.dir_path(dir)?, name)?;
        self.link(&existing, &path, false)
    }

    pub(crate) fn symlink_at(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        target: &[u8],
    ) -> Result<(FileHandle, Attr)> {
        let path = child_path(&self.dir_path(dir)?, name)?;
        let target = std::str::from_utf8(target)
            .map_err(|_| Error::InvalidArgument("symlink targets on a cluster URL are UTF-8"))?;
        self.symlink(target, &path)?;
        self.lookup_at(dir, name, false)
    }

    pub(crate) fn mknod_at(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        ftype: FileType,
        mode: u32,
        rdev: u64,
    ) -> Result<(FileHandle, Attr)> {
        let path = child_path(&self.dir_path(dir)?, name)?;
        self.mknod(&path, ftype, mode, rdev)?;
        self.lookup_at(dir, name, false)
    }

    pub(crate) fn readlink_handle(&mut self, fh: FileHandle) -> Result<Vec<u8>> {
        match self.entry(fh)? {
            Entry { node: Some((slot, nfh)), .. } => {
                self.with_node(slot, |c| c.readlink_handle(nfh))
            }
            Entry { node: None, .. } => Err(Error::Status(Status::Inval)),
        }
    }

    pub(crate) fn access_handle(&mut self, fh: FileHandle, mask: u32) -> Result<u32> {
        match self.entry(fh)? {
            Entry { node: Some((slot, nfh)), .. } => {
                self.with_node(slot, |c| c.access_handle(nfh, mask))
            }
            Entry { path, node: None } => self.access(&path, mask),
        }
    }

    /// A page of the merged listing of directory `dir`: the entries after the first
    /// `cookie`, each with the cookie that continues after it (its position). Every
    /// page lists the directory on every node again (no listing is kept between
    /// pages), so a listing of N entries in pages of P costs N/P merged listings.
    pub(crate) fn readdir_at(
        &mut self,
        dir: FileHandle,
        cookie: u64,
        max_entries: u32,
    ) -> Result<(Vec<DirEntryAt>, bool)> {
        let path = self.dir_path(dir)?;
        let all = self.readdir(&path)?;
        let start = (cookie as usize).min(all.len());
        let end = start.saturating_add(max_entries.max(1) as usize).min(all.len());
        let page = all[start..end]
            .iter()
            .enumerate()
            .map(|(i, e)| DirEntryAt { entry: e.clone(), cookie: (start + i + 1) as u64 })
            .collect();
        Ok((page, end == all.len()))
    }

    pub(crate) fn readdir_page(
        &mut self,
        dir: FileHandle,
        cookie: u64,
        max_entries: u32,
    ) -> Result<(Vec<DirEntry>, u64, bool)> {
        let (page, eof) = self.readdir_at(dir, cookie, max_entries)?;
        let next = page.last().map_or(cookie, |e| e.cookie);
        Ok((page.into_iter().map(|e| e.entry).collect(), next, eof))
    }

    /// `op` on the node holding `fh`'s object (a directory: its manager) by node handle.
    pub(crate) fn on_handle<T>(
        &mut self,
        fh: FileHandle,
        mut op: impl FnMut(&mut Client, FileHandle) -> Result<T>,
    ) -> Result<T> {
        match self.entry(fh)? {
            Entry { node: Some((slot, nfh)), .. } => self.with_node(slot, |c| op(c, nfh)),
            Entry { path, node: None } => self
                .existing(&path, |c| {
                    let h = node_dir(c, &path)?;
                    op(c, h)
                })
                .map(|r| r.1),
        }
    }

    pub(crate) fn refresh_root(&mut self) -> Result<(FileHandle, Attr)> {
        let attr = self.stat("/", false)?;
        Ok((self.handles.root(), attr))
    }
}
