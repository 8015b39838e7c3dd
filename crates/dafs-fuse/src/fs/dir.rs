//! Directory listings: the kernel's offsets mapped to server READDIR cookies, and the
//! rest of a server page kept for the call that continues where the kernel's buffer
//! filled up.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use dafs_client::dafs_proto::{Attr, FileHandle};
use dafs_client::DirEntryAt;
use fuser::{FileType, ReplyDirectory};

use super::DafsFs;
use crate::convert::ftype;

/// Entries asked of the server per READDIR round trip (0 = the server's default).
const READDIR_PAGE_ENTRIES: u32 = 0;
/// Kernel offsets after the two entries made up here: an entry's offset is where the
/// listing continues after it, so "." ends at 1, ".." at 2, and the server's entries
/// follow.
pub(super) const OFFSET_AFTER_DOT: usize = 1;
pub(super) const OFFSET_AFTER_DOTDOT: usize = 2;

/// A directory the kernel opened, by the handle number it was given.
pub(super) struct OpenDir {
    /// `cookies[k]`: the server cookie that continues the listing after the entry the
    /// kernel knows at offset `k` (offsets 1 and 2 are "." and "..", continued by 0).
    cookies: Vec<u64>,
    /// Entries fetched but not yet given to the kernel: they follow offset `pending_off`.
    pub(super) pending: VecDeque<DirEntryAt>,
    pending_off: usize,
    /// The server said the page in `pending` ends the directory.
    pending_eof: bool,
    /// READDIRPLUS: what looking up the first `looked.len()` entries of `pending` gave
    /// (None: the lookup failed, the entry goes without attributes).
    pub(super) looked: VecDeque<Option<(FileHandle, Attr)>>,
}

impl OpenDir {
    pub(super) fn new() -> OpenDir {
        OpenDir {
            // The start, "." and "..": all continued by the server's first page.
            cookies: vec![0; OFFSET_AFTER_DOTDOT + 1],
            pending: VecDeque::new(),
            pending_off: 0,
            pending_eof: false,
            looked: VecDeque::new(),
        }
    }
}

impl DafsFs {
    pub(super) fn readdir_inner(
        &mut self,
        ino: u64,
        fh: u64,
        offset: i64,
        reply: &mut ReplyDirectory,
    ) -> Result<(), i32> {
        let mut off = usize::try_from(offset).map_err(|_| libc::EINVAL)?;
        let parent = self.node(ino)?.parent;
        if off == 0 {
            if reply.add(ino, OFFSET_AFTER_DOT as i64, FileType::Directory, ".") {
                return Ok(());
            }
            off = OFFSET_AFTER_DOT;
        }
        if off == OFFSET_AFTER_DOT {
            if reply.add(parent, OFFSET_AFTER_DOTDOT as i64, FileType::Directory, "..") {
                return Ok(());
            }
            off = OFFSET_AFTER_DOTDOT;
        }
        let mut d = self.dirs.remove(&fh).ok_or(libc::EBADF)?;
        // Plain READDIR takes entries from `pending` without looking them up.
        d.looked.clear();
        let r = self.fill_dir(ino, &mut d, off, &mut |_, d, next| {
            let Some(e) = d.pending.front() else { return false };
            // d_ino only (the kernel takes inode numbers from lookups): the server's
            // file id, which is the inode number lookups give in the usual case.
            reply.add(
                e.entry.fileid,
                next as i64,
                ftype(e.entry.ftype),
                OsStr::from_bytes(&e.entry.name),
            )
        });
        self.dirs.insert(fh, d);
        r
    }

    /// Entries after kernel offset `off`, until the kernel's buffer is full or the
    /// directory ends. A server page holds up to thousands of entries and the kernel
    /// takes about a hundred per call: the rest waits in `d.pending` for the call that
    /// continues exactly there. `add(fs, dir, entry, offset after it)` gives the kernel
    /// the first pending entry and says whether its buffer was full (the entry not taken).
    pub(super) fn fill_dir(
        &mut self,
        ino: u64,
        d: &mut OpenDir,
        mut off: usize,
        add: &mut dyn FnMut(&mut DafsFs, &mut OpenDir, usize) -> bool,
    ) -> Result<(), i32> {
        if d.pending_off != off {
            d.pending.clear();
            d.looked.clear();
        }
        loop {
            if d.pending.is_empty() {
                if d.pending_eof && d.pending_off == off {
                    return Ok(());
                }
                let cookie = *d.cookies.get(off).ok_or(libc::EINVAL)?;
                let (page, eof) =
                    self.with_fh(ino, |c, h| c.readdir_at(h, cookie, READDIR_PAGE_ENTRIES))?;
                d.pending = page.into();
                d.pending_eof = eof;
                d.pending_off = off;
                if d.pending.is_empty() {
                    return Ok(());
                }
            }
            while let Some(e) = d.pending.front() {
                let next = off + 1;
                if next < d.cookies.len() {
                    d.cookies[next] = e.cookie;
                } else {
                    d.cookies.push(e.cookie);
                }
                if add(self, d, next) {
                    return Ok(());
                }
                d.pending.pop_front();
                d.looked.pop_front();
                off = next;
                d.pending_off = off;
            }
        }
    }
}
