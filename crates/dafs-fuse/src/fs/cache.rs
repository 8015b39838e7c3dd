//! What the kernel may cache of a file's data, decided at each open (see
//! [`CacheMode`]): close-to-open keeps the pages while the server's size, mtime and
//! ctime are those they were read under; strict caches nothing (direct I/O); appenders
//! always go direct (each write one atomic APPEND on the server).

use dafs_client::dafs_proto::Attr;
use fuser::consts::{FOPEN_DIRECT_IO, FOPEN_KEEP_CACHE};

use super::DafsFs;
use crate::options::CacheMode;

/// The version of a file's data as far as caching can tell: (size, mtime, ctime).
fn version(a: &Attr) -> (u64, i64, i64) {
    (a.size, a.mtime_ns, a.ctime_ns)
}

impl DafsFs {
    /// The FOPEN flags for an open of `ino` whose OPEN reply carried `attr`, and the
    /// bookkeeping for the next open. Called once per open or create.
    pub(super) fn open_cache_flags(&mut self, ino: u64, attr: &Attr, append: bool) -> u32 {
        // Direct I/O: the kernel hands each write(2) (up to `IO_BYTES_MAX`) to the mount
        // as one request, which becomes one atomic APPEND on the server. Through the page
        // cache the kernel splits a write at page boundaries, and two appends from two
        // mounts could interleave between the pieces.
        if append || self.cache == CacheMode::Strict {
            if let Some(n) = self.inodes.get_mut(ino) {
                // Direct I/O bypasses (and the open without KEEP_CACHE drops) the pages.
                n.pages_of = None;
            }
            return FOPEN_DIRECT_IO;
        }
        let now = version(attr);
        let Some(n) = self.inodes.get_mut(ino) else { return 0 };
        let keep = n.pages_of == Some(now);
        n.pages_of = Some(now);
        if keep {
            FOPEN_KEEP_CACHE
        } else {
            // Without KEEP_CACHE the kernel drops the file's pages at this open: they
            // may predate a change by another client.
            0
        }
    }
}
