//! What this client holds on the server that a restart would lose and the grace period
//! lets it reclaim (docs/protocol.md §9.5): its open files (how each was opened) and
//! its byte-range locks. Kept as the server keeps them: an entry per open, and per file
//! a set of disjoint locked ranges (a new lock replaces what it covers, an unlock cuts
//! ranges). Both are bounded by what the server granted this session (its
//! `open_files_max` and lock limits).

use std::collections::HashMap;

use dafs_proto::types::open_flags;
use dafs_proto::FileHandle;

/// How an open can be re-established: by handle, or (delete-on-close, which acts on
/// the name) by directory and name.
#[derive(Debug, Clone)]
pub(crate) struct OpenRecord {
    /// Its id: the same in every session it is reclaimed into (the reclaim asks it back).
    pub(crate) open_id: u64,
    /// The session its `File` was opened in (what the `File` carries).
    pub(crate) opened_in: u64,
    pub(crate) fh: FileHandle,
    /// Directory and name, for a delete-on-close open.
    pub(crate) by_name: Option<(FileHandle, Vec<u8>)>,
    /// The open flags, without the create ones (a reclaim creates nothing).
    pub(crate) flags: u32,
    pub(crate) key: Vec<u8>,
}

/// A locked range `[start, end)` of a file (`end == u64::MAX`: to the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockRecord {
    pub(crate) fh: FileHandle,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) ltype: u32,
}

impl LockRecord {
    /// (offset, len) as LOCK takes them (`len == 0`: to the end).
    pub(crate) fn offset_len(&self) -> (u64, u64) {
        let len = if self.end == u64::MAX { 0 } else { self.end - self.start };
        (self.start, len)
    }
}

/// `[offset, offset + len)` (`len == 0` or past the end: to the end).
pub(crate) fn range(offset: u64, len: u64) -> (u64, u64) {
    let end = if len == 0 { u64::MAX } else { offset.saturating_add(len) };
    (offset, end)
}

#[derive(Debug, Default)]
pub(crate) struct Held {
    /// By open id. An id whose reclaim failed may be given to a later open: the
    /// record's `opened_in` tells whose it is.
    pub(crate) opens: HashMap<u64, OpenRecord>,
    pub(crate) locks: Vec<LockRecord>,
}

impl Held {
    /// An open was granted. Create-unlinked files are not recorded: unpublished, they
    /// have no name and no lasting handle to reclaim them by; nor is a delete-on-close
    /// open without its name (the server refuses those; this never trusts it did).
    pub(crate) fn opened(&mut self, rec: OpenRecord) {
        let unnamed_delete = rec.flags & open_flags::DELETE_ON_CLOSE != 0 && rec.by_name.is_none();
        if rec.flags & open_flags::UNLINKED != 0 || unnamed_delete {
            return;
        }
        let flags = rec.flags
            & !(open_flags::CREATE
                | open_flags::EXCLUSIVE
                | open_flags::TRUNCATE
                | open_flags::RECLAIM);
        let key = rec.open_id;
        self.opens.insert(key, OpenRecord { flags, ..rec });
    }

    /// Is the open of the file opened in `session_id` as `open_id` held now?
    pub(crate) fn is_open(&self, session_id: u64, open_id: u64) -> bool {
        self.opens.get(&open_id).is_some_and(|r| r.opened_in == session_id)
    }

    pub(crate) fn closed(&mut self, open_id: u64) {
        self.opens.remove(&open_id);
    }

    /// A lock was granted: it replaces whatever this client held in its range.
    pub(crate) fn locked(&mut self, fh: FileHandle, offset: u64, len: u64, ltype: u32) {
        self.unlocked(fh, offset, len);
        let (start, end) = range(offset, len);
        self.locks.push(LockRecord { fh, start, end, ltype });
    }

    /// A range was unlocked: ranges it covers go, ranges it cuts are split.
    pub(crate) fn unlocked(&mut self, fh: FileHandle, offset: u64, len: u64) {
        let (start, end) = range(offset, len);
        let mut kept = Vec::with_capacity(self.locks.len() + 1);
        for l in self.locks.drain(..) {
            if l.fh != fh || l.end <= start || l.start >= end {
                kept.push(l);
                continue;
            }
            if l.start < start {
                kept.push(LockRecord { end: start, ..l });
            }
            if l.end > end {
                kept.push(LockRecord { start: end, ..l });
            }
        }
        self.locks = kept;
    }

    /// Everything is gone (a new session without reclaim).
    pub(crate) fn clear(&mut self) {
        self.opens.clear();
        self.locks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_are_kept_as_disjoint_ranges() {
        let a = FileHandle([1; FileHandle::LEN]);
        let b = FileHandle([2; FileHandle::LEN]);
        let mut h = Held::default();
        h.locked(a, 0, 100, 1);
        h.locked(b, 0, 0, 2);
        h.locked(a, 40, 20, 2); // replaces [40, 60) with another type
        h.unlocked(a, 90, 0); // cuts [60, 100) to [60, 90)
        let mut got: Vec<_> =
            h.locks.iter().filter(|l| l.fh == a).map(|l| (l.start, l.end, l.ltype)).collect();
        got.sort();
        assert_eq!(got, vec![(0, 40, 1), (40, 60, 2), (60, 90, 1)]);
        assert_eq!(h.locks.iter().find(|l| l.fh == b).unwrap().offset_len(), (0, 0));
        h.unlocked(b, 0, 0);
        assert!(h.locks.iter().all(|l| l.fh == a));
    }

    #[test]
    fn opens_keep_their_identity_and_drop_create_flags() {
        let fh = FileHandle([3; FileHandle::LEN]);
        let mut h = Held::default();
        let flags =
            open_flags::READ | open_flags::WRITE | open_flags::CREATE | open_flags::TRUNCATE;
        let rec = |open_id, opened_in, flags| OpenRecord {
            open_id,
            opened_in,
            fh,
            by_name: None,
            flags,
            key: vec![],
        };
        h.opened(rec(1, 7, flags));
        assert_eq!(h.opens[&1].flags, open_flags::READ | open_flags::WRITE);
        assert!(h.is_open(7, 1) && !h.is_open(8, 1));
        // Id 1 lost in a restart and given to a file opened in session 8: the file of
        // session 7 with that id is not this one.
        h.opened(rec(1, 8, flags));
        assert!(!h.is_open(7, 1) && h.is_open(8, 1));
        h.closed(1);
        assert!(h.opens.is_empty());
        let unlinked = open_flags::WRITE | open_flags::CREATE | open_flags::UNLINKED;
        h.opened(rec(2, 7, unlinked));
        assert!(h.opens.is_empty());
    }
}
