//! Byte-range locks: shared and exclusive, 64-bit ranges, owned by sessions.
//!
//! Semantics (documented in docs/protocol.md): locks are advisory (I/O is not blocked);
//! a session's locks never conflict with each other — a new lock by the same session
//! replaces the overlapping parts of its existing locks (so a shared lock can be upgraded
//! in place and vice versa); an unlock may cover any range, splitting locks it partly
//! overlaps; all of a session's locks die with the session.

use std::collections::HashMap;
use std::sync::Mutex;

use dafs_proto::types::lock_type;

/// Inclusive-exclusive range `[start, end)`; `end == u64::MAX` reaches the end of the
/// 64-bit space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockEntry {
    pub owner: u64,
    pub start: u64,
    pub end: u64,
    pub ltype: u32,
}

/// `[offset, offset+len)`, or to the end of the 64-bit space for `len == 0`. None for an
/// overflowing or empty range.
pub fn range(offset: u64, len: u64) -> Option<(u64, u64)> {
    let end = if len == 0 { u64::MAX } else { offset.checked_add(len)? };
    if end <= offset {
        return None;
    }
    Some((offset, end))
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Most locks one file may carry (all sessions together).
pub const LOCKS_PER_FILE_MAX: usize = 4096;

#[derive(Default)]
pub struct LockTable {
    files: Mutex<HashMap<(u64, u64), Vec<LockEntry>>>,
}

pub enum LockResult {
    Granted,
    Conflict(LockEntry),
    Limit,
}

impl LockTable {
    /// A lock of another owner that conflicts with `(start, end, ltype)`, if any.
    fn conflict(list: &[LockEntry], owner: u64, r: (u64, u64), ltype: u32) -> Option<LockEntry> {
        list.iter()
            .find(|l| {
                l.owner != owner
                    && overlaps((l.start, l.end), r)
                    && (ltype == lock_type::EXCLUSIVE || l.ltype == lock_type::EXCLUSIVE)
            })
            .copied()
    }

    pub fn test(
        &self,
        file: (u64, u64),
        owner: u64,
        r: (u64, u64),
        ltype: u32,
    ) -> Option<LockEntry> {
        let g = self.files.lock().unwrap();
        g.get(&file).and_then(|l| Self::conflict(l, owner, r, ltype))
    }

    pub fn lock(&self, file: (u64, u64), owner: u64, r: (u64, u64), ltype: u32) -> LockResult {
        let mut g = self.files.lock().unwrap();
        let list = g.entry(file).or_default();
        if let Some(c) = Self::conflict(list, owner, r, ltype) {
            return LockResult::Conflict(c);
        }
        // Checked before anything changes: a refused lock leaves the owner's locks as
        // they were. (Replacing can split one lock into two, hence the +1.)
        if list.len() + 1 >= LOCKS_PER_FILE_MAX {
            return LockResult::Limit;
        }
        remove_range(list, owner, r);
        list.push(LockEntry { owner, start: r.0, end: r.1, ltype });
        LockResult::Granted
    }

    pub fn unlock(&self, file: (u64, u64), owner: u64, r: (u64, u64)) {
        let mut g = self.files.lock().unwrap();
        if let Some(list) = g.get_mut(&file) {
            remove_range(list, owner, r);
            if list.is_empty() {
                g.remove(&file);
            }
        }
    }

    /// Drop every lock `owner` holds (its session ended).
    pub fn release_owner(&self, owner: u64) -> usize {
        let mut g = self.files.lock().unwrap();
        let mut n = 0;
        g.retain(|_, list| {
            let before = list.len();
            list.retain(|l| l.owner != owner);
            n += before - list.len();
            !list.is_empty()
        });
        n
    }

    pub fn count(&self) -> usize {
        self.files.lock().unwrap().values().map(Vec::len).sum()
    }
}

/// Remove `owner`'s coverage of `r`, splitting locks that straddle its edges.
fn remove_range(list: &mut Vec<LockEntry>, owner: u64, r: (u64, u64)) {
    let mut out = Vec::with_capacity(list.len() + 1);
    for l in list.drain(..) {
        if l.owner != owner || !overlaps((l.start, l.end), r) {
            out.push(l);
            continue;
        }
        if l.start < r.0 {
            out.push(LockEntry { end: r.0, ..l });
        }
        if r.1 < l.end {
            out.push(LockEntry { start: r.1, ..l });
        }
    }
    *list = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    const F: (u64, u64) = (1, 2);
    const S: u32 = lock_type::SHARED;
    const X: u32 = lock_type::EXCLUSIVE;

    #[test]
    fn conflicts_and_sharing() {
        let t = LockTable::default();
        assert!(matches!(t.lock(F, 1, (0, 100), S), LockResult::Granted));
        assert!(matches!(t.lock(F, 2, (50, 150), S), LockResult::Granted), "shared locks coexist");
        assert!(matches!(t.lock(F, 3, (99, 100), X), LockResult::Conflict(_)));
        assert!(
            matches!(t.lock(F, 3, (150, 200), X), LockResult::Granted),
            "adjacent is not overlapping"
        );
        assert!(t.test(F, 3, (0, 10), S).is_none());
        assert_eq!(t.test(F, 1, (160, 170), S).unwrap().owner, 3);
    }

    #[test]
    fn same_owner_upgrades_and_unlock_splits() {
        let t = LockTable::default();
        assert!(matches!(t.lock(F, 1, (0, 100), S), LockResult::Granted));
        assert!(
            matches!(t.lock(F, 1, (40, 60), X), LockResult::Granted),
            "upgrade part of own lock"
        );
        assert_eq!(t.count(), 3, "split into [0,40) S, [60,100) S, [40,60) X");
        t.unlock(F, 1, (10, 50));
        assert!(matches!(t.lock(F, 2, (20, 30), X), LockResult::Granted), "unlocked hole is free");
        assert!(matches!(t.lock(F, 2, (55, 56), S), LockResult::Conflict(_)), "rest of X remains");
        assert!(matches!(t.lock(F, 2, (5, 6), X), LockResult::Conflict(_)), "[0,10) S remains");
        t.unlock(F, 1, (0, 0u64.wrapping_sub(1)));
        assert_eq!(t.release_owner(2), 1);
        assert_eq!(t.count(), 0);
    }

    #[test]
    fn full_64_bit_ranges() {
        let t = LockTable::default();
        let whole = range(0, 0).unwrap();
        assert_eq!(whole, (0, u64::MAX));
        assert!(matches!(t.lock(F, 1, range(u64::MAX - 10, 5).unwrap(), X), LockResult::Granted));
        assert!(matches!(t.lock(F, 2, whole, S), LockResult::Conflict(_)));
        assert!(range(u64::MAX, 5).is_none(), "overflowing range is invalid");
        assert!(range(u64::MAX, 0).is_none(), "empty range is invalid");
        assert_eq!(t.release_owner(1), 1);
        assert!(matches!(t.lock(F, 2, whole, S), LockResult::Granted));
    }
}
