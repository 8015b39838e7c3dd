//! The kernel's requests: the `fuser::Filesystem` implementation, one method per FUSE
//! operation, in families: lookup and attributes, namespace, file I/O, directories,
//! file system statistics, extended attributes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use dafs_client::dafs_proto::types::{nattr_flags, setattr_mask};
use dafs_client::dafs_proto::{FileType as DType, SetAttrs};
use fuser::{
    consts as caps, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow,
};

use std::sync::Arc;

use super::dir::OpenDir;
use super::file::OpenFile;
use super::workers::{Job, OFFLOAD_BYTES_MIN};
use super::xattr::{nattr_name, USER_PREFIX, XATTR_VALUE_BYTES_MAX};
use super::{DafsFs, IO_BYTES_MAX};
use crate::convert::{file_attr, is_stale, time_ns, MODE_PERM_BITS};
use crate::options::CacheMode;

/// Smallest block size reported by statfs: a server reporting 0 (or less than a
/// sector) would leave block counts meaningless (or divide by zero).
const STATFS_BLOCK_BYTES_MIN: u32 = 512;

impl Filesystem for DafsFs {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        if let Err(nearest) = config.set_max_write(IO_BYTES_MAX) {
            let _ = config.set_max_write(nearest);
        }
        let _ = config.set_max_readahead(IO_BYTES_MAX);
        // Timestamps are nanoseconds end to end.
        let _ = config.set_time_granularity(Duration::from_nanos(1));
        // Listings with attributes (the kernel picks READDIRPLUS when lookups follow a
        // listing, as for `ls -l` and `find`), and cached pages dropped as soon as
        // attributes show a change of size or mtime.
        let wanted = caps::FUSE_DO_READDIRPLUS | caps::FUSE_READDIRPLUS_AUTO;
        let wanted = if self.cache == CacheMode::Strict {
            wanted
        } else {
            wanted | caps::FUSE_AUTO_INVAL_DATA
        };
        if let Err(missing) = config.add_capabilities(wanted) {
            tracing::debug!("kernel lacks FUSE capabilities {missing:#x}");
            let _ = config.add_capabilities(wanted & !missing);
        }
        if self.writeback && config.add_capabilities(caps::FUSE_WRITEBACK_CACHE).is_err() {
            tracing::warn!("the kernel does not offer a writeback cache: writes go through");
            self.writeback = false;
        }
        Ok(())
    }

    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        self.act_as(req);
        let n = name.as_bytes();
        match self.in_dir(parent, |c, d| c.lookup_at(d, n, false)) {
            Ok((fh, attr)) => self.entry(parent, n, fh, attr, reply),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        self.inodes.forget(ino, nlookup);
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, fh: Option<u64>, reply: ReplyAttr) {
        if let Some(of) = fh.and_then(|fh| self.opens.get(&fh)) {
            let h = of.file.fh;
            let r = self.c().getattr(h);
            match r {
                Ok(a) => {
                    if let Some(n) = self.inodes.get_mut(ino) {
                        n.attr = a;
                    }
                    return reply.attr(&self.ttl, &file_attr(ino, &a));
                }
                // Recycled by the server, or deleted: the inode's own handle (looked up
                // again by name if need be) tells which, below.
                Err(e) if is_stale(&e) => {}
                Err(e) => {
                    let e = self.fail(&e);
                    return reply.error(e);
                }
            }
        }
        match self.with_fh(ino, |c, h| c.getattr(h)) {
            Ok(a) => {
                if let Some(n) = self.inodes.get_mut(ino) {
                    n.attr = a;
                }
                reply.attr(&self.ttl, &file_attr(ino, &a))
            }
            // A file deleted while still open (fstat(2) need not say which open it
            // comes from): what we last knew, with no links.
            Err(libc::ESTALE) if self.opens.values().any(|o| o.ino == ino) => {
                // I/O workers' writes are counted in the opens, not in the inode.
                let written =
                    self.opens.values().filter(|o| o.ino == ino).map(OpenFile::written_end).max();
                match self.inodes.get(ino) {
                    Some(n) => {
                        let mut a = n.attr;
                        a.nlink = 0;
                        a.size = a.size.max(written.unwrap_or(0));
                        reply.attr(&Duration::ZERO, &file_attr(ino, &a))
                    }
                    None => reply.error(libc::ESTALE),
                }
            }
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        self.act_as(req);
        let mut set = SetAttrs::default();
        if let Some(m) = mode {
            set.mask |= setattr_mask::MODE;
            set.mode = m & MODE_PERM_BITS;
        }
        if let Some(u) = uid {
            set.mask |= setattr_mask::UID;
            set.uid = u;
        }
        if let Some(g) = gid {
            set.mask |= setattr_mask::GID;
            set.gid = g;
        }
        if let Some(s) = size {
            set.mask |= setattr_mask::SIZE;
            set.size = s;
        }
        match atime {
            Some(TimeOrNow::Now) => set.mask |= setattr_mask::ATIME_NOW,
            Some(TimeOrNow::SpecificTime(t)) => match time_ns(t) {
                Ok(ns) => {
                    set.mask |= setattr_mask::ATIME;
                    set.atime_ns = ns;
                }
                Err(e) => return reply.error(e),
            },
            None => {}
        }
        match mtime {
            Some(TimeOrNow::Now) => set.mask |= setattr_mask::MTIME_NOW,
            Some(TimeOrNow::SpecificTime(t)) => match time_ns(t) {
                Ok(ns) => {
                    set.mask |= setattr_mask::MTIME;
                    set.mtime_ns = ns;
                }
                Err(e) => return reply.error(e),
            },
            None => {}
        }
        let killed_privs = self.only_kills_privs(req, ino, mode);
        if killed_privs {
            set.mask &= !setattr_mask::MODE;
        }
        let r = if set.mask == 0 {
            // Only ctime (or flags) asked for: nothing DAFS can set; answer the attributes.
            self.with_fh(ino, |c, h| c.getattr(h))
        } else {
            self.do_setattr(ino, fh, set)
        };
        match r {
            Ok(mut a) => {
                if killed_privs {
                    // What the write or truncate that follows leaves (see only_kills_privs).
                    a.mode &= !(libc::S_ISUID | libc::S_ISGID);
                }
                if let Some(n) = self.inodes.get_mut(ino) {
                    n.attr = a;
                }
                reply.attr(&self.ttl, &file_attr(ino, &a))
            }
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&mut self, req: &Request<'_>, ino: u64, reply: ReplyData) {
        self.act_as(req);
        match self.with_fh(ino, |c, h| c.readlink_handle(h)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.act_as(req);
        let n = name.as_bytes();
        let perm = mode & !umask & MODE_PERM_BITS;
        let special = match mode & libc::S_IFMT {
            0 | libc::S_IFREG => None,
            libc::S_IFIFO => Some(DType::Fifo),
            libc::S_IFSOCK => Some(DType::Socket),
            libc::S_IFCHR => Some(DType::CharDevice),
            libc::S_IFBLK => Some(DType::BlockDevice),
            _ => return reply.error(libc::EINVAL),
        };
        let made = match special {
            None => self.in_dir(parent, |c, d| c.create_at(d, n, DType::Regular, perm, true)),
            Some(t) => {
                // The kernel's 32-bit device encoding (12-bit major, 20-bit minor) has
                // the same bits as the low half of glibc's `dev_t`, which DAFS carries.
                let dev = u64::from(rdev);
                self.in_dir(parent, |c, d| c.mknod_at(d, n, t, perm, dev))
            }
        };
        match made {
            Ok((fh, attr)) => {
                let attr = self.fix_new(req, parent, fh, attr, Some(perm));
                self.entry(parent, n, fh, attr, reply)
            }
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.act_as(req);
        let n = name.as_bytes();
        let perm = mode & !umask & MODE_PERM_BITS;
        match self.in_dir(parent, |c, d| c.create_at(d, n, DType::Directory, perm, true)) {
            Ok((fh, attr)) => {
                let attr = self.fix_new(req, parent, fh, attr, Some(perm));
                self.entry(parent, n, fh, attr, reply)
            }
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.act_as(req);
        let n = name.as_bytes();
        match self.in_dir(parent, |c, d| c.remove_at(d, n)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        self.act_as(req);
        let n = name.as_bytes();
        match self.in_dir(parent, |c, d| c.rmdir_at(d, n)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.act_as(req);
        let n = link_name.as_bytes();
        let t = target.as_os_str().as_bytes();
        match self.in_dir(parent, |c, d| c.symlink_at(d, n, t)) {
            Ok((fh, attr)) => {
                let attr = self.fix_new(req, parent, fh, attr, None);
                self.entry(parent, n, fh, attr, reply)
            }
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        self.act_as(req);
        // The kernel's RENAME_NOREPLACE / RENAME_EXCHANGE are the protocol's flags; the
        // server does the checks and the rename in one renameat2, atomically. Flags DAFS
        // does not define (RENAME_WHITEOUT) are EINVAL from the client library.
        let (from, to) = (name.as_bytes(), newname.as_bytes());
        let to_dir = match self.dir_fh(newparent) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let rename = |c: &mut dafs_client::Client, d, to_dir| {
            c.rename_at_with_flags(d, from, to_dir, to, flags)
        };
        let r = self.in_dir(parent, |c, d| rename(c, d, to_dir));
        let r = match r {
            // The target directory's handle may be the stale one.
            Err(libc::ESTALE) => match self.refresh(newparent, 0) {
                Ok(to_dir) => self.in_dir(parent, |c, d| rename(c, d, to_dir)),
                Err(e) => Err(e),
            },
            r => r,
        };
        match r {
            // Keep the moved inodes' names current (for looking them up again later).
            Ok(()) if flags & libc::RENAME_EXCHANGE != 0 => {
                self.inodes.exchanged(parent, from, newparent, to);
                reply.ok()
            }
            Ok(()) => {
                self.inodes.renamed(parent, from, newparent, to);
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.act_as(req);
        let n = newname.as_bytes();
        let dir = match self.dir_fh(newparent) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        match self.with_fh(ino, |c, h| c.link_at(h, dir, n)) {
            Ok(attr) => match self.inodes.get_mut(ino) {
                // Same object, one more kernel lookup; its existing name stays the one
                // used to look it up again.
                Some(node) => {
                    node.add_lookup();
                    node.attr = attr;
                    reply.entry(&self.ttl, &file_attr(ino, &attr), 0)
                }
                None => reply.error(libc::ESTALE),
            },
            Err(e) => reply.error(e),
        }
    }

    fn open(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.act_as(req);
        match self.open_for_kernel(ino, flags) {
            Ok((file, flags)) => {
                let fh = self.new_fh();
                // Close-to-open: OPEN's reply carries the server's attributes now. If the
                // file changed elsewhere since the kernel cached them (within the
                // attribute TTL), the kernel's size would cut reads short: drop them.
                let changed = self.inodes.get_mut(ino).is_some_and(|n| {
                    let changed = n.attr.size != file.attr.size
                        || n.attr.mtime_ns != file.attr.mtime_ns
                        || n.attr.ctime_ns != file.attr.ctime_ns;
                    n.attr = file.attr;
                    changed
                });
                if changed {
                    self.invalidate_attrs(ino);
                }
                let append = is_append(flags);
                let cache_flags = self.open_cache_flags(ino, &file.attr, append);
                let opener = self.stated_cred();
                self.opens.insert(fh, OpenFile::new(file, flags, ino, opener));
                reply.opened(fh, cache_flags)
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyData,
    ) {
        let Some(of) = self.opens.get(&fh) else { return reply.error(libc::EBADF) };
        let Ok(off) = u64::try_from(offset) else { return reply.error(libc::EINVAL) };
        tracing::trace!(fh, offset, len = size, "read");
        let len = size as usize;
        let reply = if len >= OFFLOAD_BYTES_MIN && self.io.has_workers() {
            match self.io.submit(Box::new(Job::Read { t: of.target(fh), off, len, reply })) {
                Ok(w) => return self.used_worker(fh, w),
                Err(job) => match *job {
                    Job::Read { reply, .. } => reply,
                    _ => unreachable!("a job is handed back as it was"),
                },
            }
        } else {
            reply
        };
        let mut buf = vec![0u8; len];
        let r = self.c().pread(&of.file, &mut buf, off);
        match r {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => {
                let e = self.fail(&e);
                reply.error(e)
            }
        }
    }

    fn write(
        &mut self,
        req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _wflags: u32,
        _flags: i32,
        _lock: Option<u64>,
        reply: ReplyWrite,
    ) {
        self.act_as(req);
        tracing::trace!(fh, offset, len = data.len(), "write");
        let reply = match self.opens.get(&fh) {
            Some(of) if !of.append && data.len() >= OFFLOAD_BYTES_MIN && self.io.has_workers() => {
                let Ok(off) = u64::try_from(offset) else { return reply.error(libc::EINVAL) };
                let t = of.target(fh);
                let cred = self.stated_cred();
                let job = Job::Write { t, off, data: data.to_vec(), cred, reply };
                match self.io.submit(Box::new(job)) {
                    Ok(w) => return self.used_worker(fh, w),
                    Err(job) => match *job {
                        Job::Write { reply, .. } => reply,
                        _ => unreachable!("a job is handed back as it was"),
                    },
                }
            }
            _ => reply,
        };
        match self.do_write(fh, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _lock_owner: u64,
        reply: ReplyEmpty,
    ) {
        // Writes are write-through (each reached the server before write(2) returned),
        // so close has nothing to send; only report a connection that died meanwhile.
        if !self.opens.contains_key(&fh) {
            return reply.error(libc::EBADF);
        }
        if self.c().is_dead() {
            return reply.error(libc::EIO);
        }
        reply.ok()
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let Some(of) = self.opens.remove(&fh) else { return reply.error(libc::EBADF) };
        self.io.released(fh, of.workers_used);
        // The kernel releases a file only after every request on it was answered, and
        // a worker lets go of the file before it answers.
        let file = match Arc::try_unwrap(of.file) {
            Ok(f) => f,
            Err(_) => {
                tracing::error!("open {fh} released while an I/O worker still holds it: left open until the session ends");
                return reply.ok();
            }
        };
        let r = self.c().close(file);
        match r {
            Ok(()) => reply.ok(),
            Err(e) => {
                let e = self.fail(&e);
                reply.error(e)
            }
        }
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let Some(of) = self.opens.get(&fh) else { return reply.error(libc::EBADF) };
        let r = self.c().fsync(&of.file);
        match r {
            Ok(()) => reply.ok(),
            Err(e) => {
                let e = self.fail(&e);
                reply.error(e)
            }
        }
    }

    fn opendir(&mut self, req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        self.act_as(req);
        match self.with_fh(ino, |c, h| c.getattr(h)) {
            Ok(a) if a.ftype != DType::Directory => reply.error(libc::ENOTDIR),
            Ok(_) => {
                let fh = self.new_fh();
                self.dirs.insert(fh, OpenDir::new());
                reply.opened(fh, 0)
            }
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        match self.readdir_inner(ino, fh, offset, &mut reply) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdirplus(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        mut reply: ReplyDirectoryPlus,
    ) {
        match self.readdirplus_inner(ino, fh, offset, &mut reply) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        reply: ReplyEmpty,
    ) {
        self.dirs.remove(&fh);
        reply.ok()
    }

    fn fsyncdir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Namespace operations are synchronous on the server (each returned after the
        // server's file system call did); nothing is buffered here.
        reply.ok()
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let r = self.c().statfs();
        match r {
            Ok(s) => {
                let bs = u64::from(s.block_size.max(STATFS_BLOCK_BYTES_MIN));
                reply.statfs(
                    s.total_bytes / bs,
                    s.free_bytes / bs,
                    s.avail_bytes / bs,
                    s.total_files,
                    s.free_files,
                    bs as u32,
                    s.name_max,
                    bs as u32,
                )
            }
            Err(e) => {
                let e = self.fail(&e);
                reply.error(e)
            }
        }
    }

    fn setxattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        self.act_as(req);
        let Some(n) = nattr_name(name) else { return reply.error(libc::ENOTSUP) };
        if value.len() > XATTR_VALUE_BYTES_MAX {
            return reply.error(libc::E2BIG);
        }
        let mut f = 0;
        if flags & libc::XATTR_CREATE != 0 {
            f |= nattr_flags::CREATE;
        }
        if flags & libc::XATTR_REPLACE != 0 {
            f |= nattr_flags::REPLACE;
        }
        match self.with_fh(ino, |c, h| c.set_nattr_handle(h, n, value, f)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        self.act_as(req);
        let Some(n) = nattr_name(name) else {
            // security.capability is asked for on every write; "none" keeps writes working.
            return reply.error(if name.as_bytes().starts_with(USER_PREFIX) {
                libc::ENODATA
            } else {
                libc::ENOTSUP
            });
        };
        match self.with_fh(ino, |c, h| c.get_nattr_handle(h, n)) {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(libc::ERANGE),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&mut self, req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        self.act_as(req);
        match self.with_fh(ino, |c, h| c.list_nattr_handle(h)) {
            Ok(names) => {
                let mut out = Vec::new();
                for n in names {
                    out.extend_from_slice(USER_PREFIX);
                    out.extend_from_slice(&n);
                    out.push(0);
                }
                if size == 0 {
                    reply.size(out.len() as u32)
                } else if out.len() > size as usize {
                    reply.error(libc::ERANGE)
                } else {
                    reply.data(&out)
                }
            }
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&mut self, req: &Request<'_>, ino: u64, name: &OsStr, reply: ReplyEmpty) {
        self.act_as(req);
        let Some(n) = nattr_name(name) else {
            return reply.error(if name.as_bytes().starts_with(USER_PREFIX) {
                libc::ENODATA
            } else {
                libc::ENOTSUP
            });
        };
        match self.with_fh(ino, |c, h| c.remove_nattr_handle(h, n)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn access(&mut self, req: &Request<'_>, ino: u64, _mask: i32, reply: ReplyEmpty) {
        self.act_as(req);
        // With default_permissions the kernel checks mode bits itself and does not ask;
        // should it ask, the object's existence is what we can vouch for.
        match self.with_fh(ino, |c, h| c.getattr(h)) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.act_as(req);
        let n = name.as_bytes();
        let perm = mode & !umask & MODE_PERM_BITS;
        // With a writeback cache the kernel may read through a write-only open (see
        // open_for_kernel); whoever creates a file may open it for reading too.
        let flags = if self.writeback && flags & libc::O_ACCMODE == libc::O_WRONLY {
            (flags & !libc::O_ACCMODE) | libc::O_RDWR
        } else {
            flags
        };
        let opts =
            Self::open_opts(flags).create(true).exclusive(flags & libc::O_EXCL != 0).mode(perm);
        // A create may be O_RDONLY (open(O_CREAT|O_RDONLY)); DAFS OPEN with CREATE
        // needs nothing more than READ, so the access mode stays as asked.
        match self.in_dir(parent, |c, d| c.open_at(d, n, opts)) {
            Ok(file) => {
                let attr = self.fix_new(req, parent, file.fh, file.attr, Some(perm));
                let ino = self.inodes.remember(parent, n, file.fh, attr);
                let fh = self.new_fh();
                let append = is_append(flags);
                let cache_flags = self.open_cache_flags(ino, &attr, append);
                let opener = self.stated_cred();
                self.opens.insert(fh, OpenFile::new(file, flags, ino, opener));
                reply.created(&self.ttl, &file_attr(ino, &attr), 0, fh, cache_flags)
            }
            Err(e) => reply.error(e),
        }
    }
}

impl DafsFs {
    /// Is this mode change the kernel's "kill set-ID bits" before a write or truncate by
    /// someone other than the owner, on a server that runs requests as the caller? The
    /// caller may not chmod the file (EPERM), but need not: the server's kernel clears
    /// the bits itself when that caller's write or truncate runs there.
    /// Worker `bit` was given a request on open `fh`.
    fn used_worker(&mut self, fh: u64, bit: u32) {
        if let Some(of) = self.opens.get_mut(&fh) {
            of.workers_used |= bit;
        }
    }

    fn only_kills_privs(&self, req: &Request<'_>, ino: u64, mode: Option<u32>) -> bool {
        let (Some(m), Some(n)) = (mode, self.inodes.get(ino)) else { return false };
        let set_id = libc::S_ISUID | libc::S_ISGID;
        let old = n.attr.mode & MODE_PERM_BITS;
        let new = m & MODE_PERM_BITS;
        req.uid() != n.attr.uid
            && new != old
            && new == old & !set_id
            && self.server_acts_as_caller()
    }
}

/// An open whose writes append (O_APPEND and not read-only).
fn is_append(flags: i32) -> bool {
    flags & libc::O_APPEND != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY
}
