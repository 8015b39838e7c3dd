//! Open files: open flags to DAFS open options, writes (positional or atomic append)
//! and attribute changes through an open file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dafs_client::dafs_proto::{Attr, SetAttrs};
use dafs_client::{File, OpenOptions};

use super::cred::Cred;
use super::workers::Target;
use super::DafsFs;
use crate::convert::is_stale;

/// A file the kernel opened (or created), by the handle number it was given.
pub(super) struct OpenFile {
    /// Shared with the I/O workers' requests on it (see `workers::Target::file`).
    pub(super) file: Arc<File>,
    /// Opened with O_APPEND for writing: every write goes to the end of file.
    pub(super) append: bool,
    pub(super) ino: u64,
    /// The access mode it was opened with (for the I/O workers' opens).
    access: OpenOptions,
    /// Who opened it (None: the server takes no credentials).
    opener: Option<Cred>,
    /// The largest end of file written through it (by the workers too).
    pub(super) written_end: Arc<AtomicU64>,
    /// The I/O workers given requests on it, one bit each: they close their opens of
    /// it at release.
    pub(super) workers_used: u32,
}

impl OpenFile {
    /// `file`, opened with open(2) `flags` (as sent to the server) by `opener`.
    pub(super) fn new(file: File, flags: i32, ino: u64, opener: Option<Cred>) -> OpenFile {
        OpenFile {
            file: Arc::new(file),
            append: flags & libc::O_APPEND != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY,
            ino,
            access: DafsFs::open_opts(flags & libc::O_ACCMODE),
            opener,
            written_end: Arc::default(),
            workers_used: 0,
        }
    }

    /// What an I/O worker needs for a request on this open (kernel handle `fh`).
    pub(super) fn target(&self, fh: u64) -> Target {
        Target {
            fh,
            file: self.file.clone(),
            access: self.access,
            opener: self.opener.clone(),
            written_end: self.written_end.clone(),
        }
    }

    /// The largest end of file written through this open.
    pub(super) fn written_end(&self) -> u64 {
        self.written_end.load(Ordering::Relaxed)
    }
}

impl DafsFs {
    /// The DAFS open options for open(2) `flags`: truncate and append only with write
    /// access, as a local file system ignores them on a read-only open.
    pub(super) fn open_opts(flags: i32) -> OpenOptions {
        let base = match flags & libc::O_ACCMODE {
            libc::O_WRONLY => OpenOptions::write_only(),
            libc::O_RDWR => OpenOptions::read_write(),
            _ => OpenOptions::read(),
        };
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY;
        base.append(writes && flags & libc::O_APPEND != 0)
            .truncate(writes && flags & libc::O_TRUNC != 0)
    }

    /// Open `ino` for the kernel's open(2) `flags`. With a writeback cache the kernel
    /// also reads through a write-only open (to fill the rest of a partly written
    /// page), so such an open asks for read access too when the file allows it.
    /// Returns the file and the flags it was opened with.
    pub(super) fn open_for_kernel(&mut self, ino: u64, flags: i32) -> Result<(File, i32), i32> {
        if self.writeback && flags & libc::O_ACCMODE == libc::O_WRONLY {
            let rw = (flags & !libc::O_ACCMODE) | libc::O_RDWR;
            let opts = Self::open_opts(rw);
            match self.with_fh(ino, |c, h| c.open_handle(h, opts)) {
                Err(libc::EACCES) | Err(libc::EPERM) => {}
                r => return r.map(|f| (f, rw)),
            }
        }
        let opts = Self::open_opts(flags);
        self.with_fh(ino, |c, h| c.open_handle(h, opts)).map(|f| (f, flags))
    }

    pub(super) fn do_write(&mut self, fh: u64, offset: i64, data: &[u8]) -> Result<u32, i32> {
        let of = self.opens.get(&fh).ok_or(libc::EBADF)?;
        let ino = of.ino;
        let r = if of.append {
            // O_APPEND: the server places every piece at the end of file as of that
            // moment, across all clients (the kernel's offset is only its own idea of
            // the size). Pieces go one at a time so they land in order.
            let max = self.c().io_bytes_max().max(1);
            let mut res = Ok((0, 0));
            for piece in data.chunks(max) {
                let r = self.c().append(&of.file, piece);
                match r {
                    Ok(at) => res = Ok((at + piece.len() as u64, data.len())),
                    Err(e) => {
                        res = Err(e);
                        break;
                    }
                }
            }
            res
        } else {
            let off = u64::try_from(offset).map_err(|_| libc::EINVAL)?;
            self.c().pwrite(&of.file, data, off).map(|n| (off + n as u64, n))
        };
        match r {
            Ok((end, n)) => {
                // The last-known size stands in for a file deleted while open, whose
                // attributes the server can no longer give (see getattr).
                if let Some(node) = self.inodes.get_mut(ino) {
                    node.attr.size = node.attr.size.max(end);
                }
                Ok(n as u32)
            }
            Err(e) => Err(self.fail(&e)),
        }
    }

    pub(super) fn do_setattr(
        &mut self,
        ino: u64,
        fh: Option<u64>,
        set: SetAttrs,
    ) -> Result<Attr, i32> {
        // Through the open file when there is one: it still names the file after its
        // last name is removed (ftruncate of an unlinked temporary file).
        if let Some(of) = fh.and_then(|fh| self.opens.get(&fh)) {
            let h = of.file.fh;
            let r = self.c().setattr(h, set);
            match r {
                Ok(a) => return Ok(a),
                Err(e) if is_stale(&e) => {}
                Err(e) => return Err(self.fail(&e)),
            }
        }
        self.with_fh(ino, |c, h| c.setattr(h, set))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flag_mapping() {
        use dafs_client::dafs_proto::types::open_flags as f;
        // OpenOptions keeps its flags private; its Debug form shows them.
        let flags = |o: OpenOptions| format!("{o:?}");
        let want = |bits: u32| format!("OpenOptions {{ flags: {bits}, ");
        assert!(flags(DafsFs::open_opts(libc::O_RDONLY)).starts_with(&want(f::READ)));
        // Only write-capable opens truncate or append.
        assert!(flags(DafsFs::open_opts(libc::O_RDONLY | libc::O_TRUNC | libc::O_APPEND))
            .starts_with(&want(f::READ)));
        assert!(flags(DafsFs::open_opts(libc::O_WRONLY | libc::O_TRUNC))
            .starts_with(&want(f::WRITE | f::TRUNCATE)));
        assert!(flags(DafsFs::open_opts(libc::O_RDWR | libc::O_APPEND))
            .starts_with(&want(f::READ | f::WRITE | f::APPEND)));
    }
}
