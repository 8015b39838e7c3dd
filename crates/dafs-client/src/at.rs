//! Handle-relative namespace calls: every operation names its directory by handle and
//! its object by one path component, instead of by a path from the export root.
//!
//! A kernel file system (the FUSE mount in `dafs-fuse`) keeps inodes, not paths: a
//! directory may be renamed while the kernel still holds it, so resolving from the root
//! by a remembered path would reach the wrong object. These calls are the same protocol
//! requests the path-based calls send, just without the root-relative lookup in front.

use dafs_proto::types::DirEntries;
use dafs_proto::{rename_flags, Attr, FileHandle, FileType, Opcode, Reply, Request};

use crate::error::unexpected_reply;
use crate::file::MODE_BITS;
use crate::{Client, DirEntry, Error, File, OpenOptions, ProtocolViolation, Result};

/// One directory entry and the cookie that continues the listing after it.
#[derive(Debug, Clone)]
pub struct DirEntryAt {
    pub entry: DirEntry,
    pub cookie: u64,
}

impl Client {
    fn handle_reply(&mut self, req: &Request) -> Result<(FileHandle, Attr)> {
        let m = self.call(req)?;
        match self.decode(&m)?.1 {
            Reply::Handle { fh, attr } => Ok((fh, attr)),
            _ => Err(unexpected_reply(req.opcode())),
        }
    }

    /// Look up `name` (one component, or a relative path) in directory `dir`.
    pub fn lookup_at(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        follow: bool,
    ) -> Result<(FileHandle, Attr)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.lookup_at(dir, name, follow);
        }
        self.handle_reply(&Request::Lookup { dir, path: name, follow })
    }

    /// Create `name` in `dir` without opening it (regular file, directory, ...).
    pub fn create_at(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        ftype: FileType,
        mode: u32,
        exclusive: bool,
    ) -> Result<(FileHandle, Attr)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.create_at(dir, name, ftype, mode, exclusive);
        }
        self.handle_reply(&Request::Create { dir, ftype, mode: mode & MODE_BITS, exclusive, name })
    }

    /// Open the object `fh` names.
    pub fn open_handle(&mut self, fh: FileHandle, opts: OpenOptions) -> Result<File> {
        opts.check()?;
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.open_handle(fh, opts);
        }
        let m = self.call(&Request::Open {
            fh,
            flags: opts.flags,
            mode: opts.mode,
            name: b"",
            key: opts.key_bytes(),
        })?;
        match self.decode(&m)?.1 {
            Reply::Open { open_id, fh, attr } => {
                let f = self.opened_file(open_id, fh, attr, None);
                self.track_open(&f, None, &opts);
                Ok(f)
            }
            _ => Err(unexpected_reply(Opcode::Open)),
        }
    }

    /// Open (typically create) `name` in directory `dir`: one round trip, so create
    /// with `exclusive` is atomic on the server.
    pub fn open_at(&mut self, dir: FileHandle, name: &[u8], opts: OpenOptions) -> Result<File> {
        opts.check()?;
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.open_at(dir, name, opts);
        }
        let m = self.call(&Request::Open {
            fh: dir,
            flags: opts.flags,
            mode: opts.mode,
            name,
            key: opts.key_bytes(),
        })?;
        match self.decode(&m)?.1 {
            Reply::Open { open_id, fh, attr } => {
                let f = self.opened_file(open_id, fh, attr, None);
                self.track_open(&f, Some((dir, name)), &opts);
                Ok(f)
            }
            _ => Err(unexpected_reply(Opcode::Open)),
        }
    }

    pub fn remove_at(&mut self, dir: FileHandle, name: &[u8]) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.remove_at(dir, name);
        }
        let m = self.call(&Request::Remove { dir, name })?;
        self.decode(&m).map(|_| ())
    }

    pub fn rmdir_at(&mut self, dir: FileHandle, name: &[u8]) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.rmdir_at(dir, name);
        }
        let m = self.call(&Request::RmDir { dir, name })?;
        self.decode(&m).map(|_| ())
    }

    /// Rename, replacing an existing target as rename(2) does.
    pub fn rename_at(
        &mut self,
        from_dir: FileHandle,
        from_name: &[u8],
        to_dir: FileHandle,
        to_name: &[u8],
    ) -> Result<()> {
        self.rename_at_with_flags(from_dir, from_name, to_dir, to_name, 0)
    }

    /// Rename with `renameat2` flags (see [`Client::rename_with_flags`]).
    pub fn rename_at_with_flags(
        &mut self,
        from_dir: FileHandle,
        from_name: &[u8],
        to_dir: FileHandle,
        to_name: &[u8],
        flags: u32,
    ) -> Result<()> {
        check_rename_flags(flags)?;
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.rename_at(from_dir, from_name, to_dir, to_name, flags);
        }
        let m = self.call(&Request::Rename { from_dir, from_name, to_dir, to_name, flags })?;
        self.decode(&m).map(|_| ())
    }

    /// Hard link: `name` in `dir` becomes another name of `fh`.
    pub fn link_at(&mut self, fh: FileHandle, dir: FileHandle, name: &[u8]) -> Result<Attr> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.link_at(fh, dir, name);
        }
        let m = self.call(&Request::Link { fh, dir, name })?;
        match self.decode(&m)?.1 {
            Reply::Attr { attr } => Ok(attr),
            _ => Err(unexpected_reply(Opcode::Link)),
        }
    }

    pub fn symlink_at(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        target: &[u8],
    ) -> Result<(FileHandle, Attr)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.symlink_at(dir, name, target);
        }
        self.handle_reply(&Request::Symlink { dir, name, target })
    }

    /// Make a special file — a FIFO, socket, character or block device — named `name` in
    /// `dir` (`mode`'s permission bits; `rdev` the device number of a device, ignored
    /// for a FIFO or a socket, as `mknod(2)` ignores it). Other types: `InvalidArgument`.
    pub fn mknod_at(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        ftype: FileType,
        mode: u32,
        rdev: u64,
    ) -> Result<(FileHandle, Attr)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.mknod_at(dir, name, ftype, mode, rdev);
        }
        let rdev = match ftype {
            FileType::CharDevice | FileType::BlockDevice => rdev,
            FileType::Fifo | FileType::Socket => 0,
            _ => return Err(Error::InvalidArgument("mknod makes special files only")),
        };
        self.handle_reply(&Request::Mknod { dir, ftype, mode: mode & MODE_BITS, rdev, name })
    }

    pub fn readlink_handle(&mut self, fh: FileHandle) -> Result<Vec<u8>> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.readlink_handle(fh);
        }
        let m = self.call(&Request::ReadLink { fh })?;
        match self.decode(&m)?.1 {
            Reply::ReadLink { target } => Ok(target.to_vec()),
            _ => Err(unexpected_reply(Opcode::ReadLink)),
        }
    }

    /// Which of `mask` ([`dafs_proto::types::access_mask`]) the server grants on `fh`.
    pub fn access_handle(&mut self, fh: FileHandle, mask: u32) -> Result<u32> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.access_handle(fh, mask);
        }
        let m = self.call(&Request::Access { fh, mask })?;
        match self.decode(&m)?.1 {
            Reply::Access { granted } => Ok(granted),
            _ => Err(unexpected_reply(Opcode::Access)),
        }
    }

    /// One READDIR round trip, with the continuation cookie of every entry (so a caller
    /// that can take only part of the page resumes exactly after what it took).
    pub fn readdir_at(
        &mut self,
        dir: FileHandle,
        cookie: u64,
        max_entries: u32,
    ) -> Result<(Vec<DirEntryAt>, bool)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.readdir_at(dir, cookie, max_entries);
        }
        let m = self.call(&Request::ReadDir { dir, cookie, max_entries, max_bytes: 0 })?;
        match self.decode(&m)?.1 {
            Reply::ReadDir { eof, entries, .. } => {
                let mut out = Vec::new();
                for e in DirEntries::new(entries) {
                    let e = e?;
                    out.push(DirEntryAt {
                        entry: DirEntry { name: e.name.to_vec(), fileid: e.fileid, ftype: e.ftype },
                        cookie: e.cookie,
                    });
                }
                if !eof && out.is_empty() {
                    return Err(ProtocolViolation::ReaddirNoProgress.into());
                }
                Ok((out, eof))
            }
            _ => Err(unexpected_reply(Opcode::ReadDir)),
        }
    }

    pub fn get_nattr_handle(&mut self, fh: FileHandle, name: &str) -> Result<Vec<u8>> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.on_handle(fh, |n, h| n.get_nattr_handle(h, name));
        }
        let m = self.call(&Request::GetNamedAttr { fh, name: name.as_bytes() })?;
        match self.decode(&m)?.1 {
            Reply::NamedAttr { value } => Ok(value.to_vec()),
            _ => Err(unexpected_reply(Opcode::GetNamedAttr)),
        }
    }

    pub fn set_nattr_handle(
        &mut self,
        fh: FileHandle,
        name: &str,
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.on_handle(fh, |n, h| n.set_nattr_handle(h, name, value, flags));
        }
        let m = self.call(&Request::SetNamedAttr { fh, flags, name: name.as_bytes(), value })?;
        self.decode(&m).map(|_| ())
    }

    /// Names of `fh`'s named attributes (raw bytes, as the server sent them).
    pub fn list_nattr_handle(&mut self, fh: FileHandle) -> Result<Vec<Vec<u8>>> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.on_handle(fh, |n, h| n.list_nattr_handle(h));
        }
        let m = self.call(&Request::ListNamedAttr { fh })?;
        match self.decode(&m)?.1 {
            Reply::NamedAttrList { names } => {
                Ok(names.split(|&b| b == 0).filter(|n| !n.is_empty()).map(|n| n.to_vec()).collect())
            }
            _ => Err(unexpected_reply(Opcode::ListNamedAttr)),
        }
    }

    pub fn remove_nattr_handle(&mut self, fh: FileHandle, name: &str) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.on_handle(fh, |n, h| n.remove_nattr_handle(h, name));
        }
        let m = self.call(&Request::RemoveNamedAttr { fh, name: name.as_bytes() })?;
        self.decode(&m).map(|_| ())
    }

    /// Ask the server for the root handle of `export` again (the name given at connect,
    /// "" for the default) and use it from now on, also for path-based calls. For a
    /// long-lived client: the server's handle table is bounded and may recycle the root
    /// handle's slot like any other, after which it answers STALE.
    pub fn refresh_root(&mut self, export: &str) -> Result<(FileHandle, Attr)> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.refresh_root();
        }
        let (fh, attr) =
            self.handle_reply(&Request::GetRootHandle { export: export.as_bytes() })?;
        self.root = fh;
        Ok((fh, attr))
    }

    /// Whether the connection has failed (every later call fails at once). A cluster
    /// client is never dead as a whole: a node's failure fails that node's calls.
    pub fn is_dead(&self) -> bool {
        if self.cluster.is_some() {
            return false;
        }
        self.dead
    }
}

/// Flags RENAME accepts: 0, `NOREPLACE` or `EXCHANGE` (never both, no unknown bit). The
/// server's decoder refuses the rest as a malformed message; checking here gives the
/// caller EINVAL, as `renameat2` does, without a round trip.
pub(crate) fn check_rename_flags(flags: u32) -> Result<()> {
    if rename_flags::valid(flags) {
        Ok(())
    } else {
        Err(Error::InvalidArgument("rename flags: unknown bit, or NOREPLACE with EXCHANGE"))
    }
}
