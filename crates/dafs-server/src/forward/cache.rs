//! The forwarding node's cache of remote data blocks (round-robin placement): a bounded
//! LRU of `BLOCK_BYTES` blocks of files whose home is another node.
//!
//! Consistency is close-to-open, as NFS gives: every open through this node revalidates
//! the file's blocks against the attributes the home answered the open with (file id,
//! size, mtime, ctime — the *validator*); any difference drops them. Writes through this
//! node drop the file's blocks at once. A file whose ctime is younger than
//! [`SETTLE_NS`] at open is not cached during that open: two changes within one tick
//! of the home's file-system clock could leave the validator equal, so only a file that
//! has not changed for longer than a tick is trusted (this assumes the nodes' clocks
//! agree within `SETTLE_NS` minus the tick; on one host they are the same clock).
//! A block fetched before an invalidation is never inserted after it (`generation`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Size of a cached block (and of the reads the cache sends to the home).
pub const BLOCK_BYTES: usize = 64 * 1024;
/// A file must not have changed for this long (by its ctime) to be cached at open.
pub const SETTLE_NS: i64 = 1_000_000_000;

/// A remote file: the home node (index in the forwarder's peer list) and its file id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub node: usize,
    pub fsid: u64,
    pub fileid: u64,
}

/// What the home answered about the file at open: any change of it drops the blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validator {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// A cached block's data and its last use (its key in `Inner::lru`).
type Entry = (Arc<[u8]>, u64);

#[derive(Default)]
struct Inner {
    blocks: HashMap<(FileKey, u64), Entry>,
    /// Least recently used first: tick -> block.
    lru: BTreeMap<u64, (FileKey, u64)>,
    /// Per cached file: its validator and its blocks (to drop them without a scan).
    files: HashMap<FileKey, (Validator, Vec<u64>)>,
    bytes: usize,
    tick: u64,
    /// Bumped by every invalidation: a fill that started before must not be inserted.
    generation: u64,
}

/// A bounded LRU of remote blocks (see the module documentation).
pub struct BlockCache {
    capacity_bytes: usize,
    inner: Mutex<Inner>,
}

impl BlockCache {
    /// A cache of at most `capacity_bytes` of block data (0: off).
    pub fn new(capacity_bytes: usize) -> Self {
        BlockCache { capacity_bytes, inner: Mutex::new(Inner::default()) }
    }

    pub fn enabled(&self) -> bool {
        self.capacity_bytes >= BLOCK_BYTES
    }

    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    pub fn cached_bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An open of `key` answered with `v` at `now_ns` (the forwarding node's clock):
    /// drop blocks cached under another validator. True if the file may be cached
    /// during this open (it has settled).
    pub fn revalidate(&self, key: FileKey, v: Validator, now_ns: i64) -> bool {
        let mut g = self.lock();
        let stale = g.files.get(&key).is_some_and(|(old, _)| *old != v);
        let settled = v.ctime_ns.saturating_add(SETTLE_NS) <= now_ns;
        if stale || !settled {
            g.drop_file(key);
        }
        self.enabled() && settled
    }

    /// Drop every block of `key` (a write through this node).
    pub fn invalidate(&self, key: FileKey) {
        self.lock().drop_file(key);
    }

    /// The generation to pass to [`insert`](Self::insert) for a fill starting now.
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Block `block` of `key`, if cached under the validator `v` of the caller's open
    /// (it becomes the most recently used).
    pub fn get(&self, key: FileKey, v: Validator, block: u64) -> Option<Arc<[u8]>> {
        let mut g = self.lock();
        if g.files.get(&key).is_none_or(|(cur, _)| *cur != v) {
            return None;
        }
        g.tick += 1;
        let tick = g.tick;
        let (data, old) = {
            let e = g.blocks.get_mut(&(key, block))?;
            let old = std::mem::replace(&mut e.1, tick);
            (e.0.clone(), old)
        };
        g.lru.remove(&old);
        g.lru.insert(tick, (key, block));
        Some(data)
    }

    /// Cache a block fetched under validator `v`, unless an invalidation happened since
    /// `generation` or the file is cached under another validator. Evicts the least
    /// recently used blocks to stay within the capacity.
    pub fn insert(&self, key: FileKey, v: Validator, block: u64, data: &[u8], generation: u64) {
        assert!(data.len() <= BLOCK_BYTES, "a block is at most BLOCK_BYTES");
        if !self.enabled() {
            return;
        }
        let mut g = self.lock();
        if g.generation != generation || g.files.get(&key).is_some_and(|(old, _)| *old != v) {
            return;
        }
        if g.blocks.contains_key(&(key, block)) {
            return;
        }
        while g.bytes + data.len() > self.capacity_bytes {
            let Some((_, (k, b))) = g.lru.pop_first() else { break };
            g.remove_block(k, b);
        }
        g.tick += 1;
        let tick = g.tick;
        g.blocks.insert((key, block), (Arc::from(data), tick));
        g.lru.insert(tick, (key, block));
        g.files.entry(key).or_insert_with(|| (v, Vec::new())).1.push(block);
        g.bytes += data.len();
        debug_assert!(g.bytes <= self.capacity_bytes);
    }
}

impl Inner {
    fn drop_file(&mut self, key: FileKey) {
        self.generation += 1;
        let Some((_, blocks)) = self.files.remove(&key) else { return };
        for b in blocks {
            if let Some((data, tick)) = self.blocks.remove(&(key, b)) {
                self.lru.remove(&tick);
                self.bytes -= data.len();
            }
        }
    }

    /// Remove one block evicted from the LRU (its `lru` entry is already gone).
    fn remove_block(&mut self, key: FileKey, block: u64) {
        if let Some((data, _)) = self.blocks.remove(&(key, block)) {
            self.bytes -= data.len();
        }
        if let Some((_, list)) = self.files.get_mut(&key) {
            list.retain(|&b| b != block);
            if list.is_empty() {
                self.files.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: FileKey = FileKey { node: 1, fsid: 2, fileid: 3 };
    const V: Validator = Validator { size: 10, mtime_ns: 5, ctime_ns: 5 };
    const LATER: i64 = 5 + SETTLE_NS;

    #[test]
    fn evicts_the_least_recently_used_block_at_capacity() {
        let c = BlockCache::new(2 * BLOCK_BYTES);
        let block = vec![7u8; BLOCK_BYTES];
        assert!(c.revalidate(K, V, LATER));
        for b in 0..2 {
            c.insert(K, V, b, &block, c.generation());
        }
        assert!(c.get(K, V, 0).is_some()); // 1 is now the least recently used
        c.insert(K, V, 2, &block, c.generation());
        assert_eq!(c.cached_bytes(), 2 * BLOCK_BYTES);
        assert!(c.get(K, V, 1).is_none());
        assert!(c.get(K, V, 0).is_some() && c.get(K, V, 2).is_some());
    }

    #[test]
    fn a_changed_validator_or_a_write_drops_the_files_blocks() {
        let c = BlockCache::new(4 * BLOCK_BYTES);
        assert!(c.revalidate(K, V, LATER));
        c.insert(K, V, 0, b"old", c.generation());
        assert!(c.revalidate(K, V, LATER + 1));
        assert_eq!(&*c.get(K, V, 0).unwrap(), b"old");
        let v2 = Validator { mtime_ns: 6, ..V };
        assert!(c.revalidate(K, v2, LATER + 1));
        assert!(c.get(K, v2, 0).is_none());
        // An open still under the old validator cannot put its blocks back for others.
        c.insert(K, V, 0, b"old", c.generation());
        assert!(c.get(K, v2, 0).is_none());
        c.invalidate(K);
        c.insert(K, v2, 0, b"new", c.generation());
        assert_eq!(&*c.get(K, v2, 0).unwrap(), b"new");
        c.invalidate(K);
        assert!(c.get(K, v2, 0).is_none());
        assert_eq!(c.cached_bytes(), 0);
    }

    #[test]
    fn a_fill_racing_an_invalidation_is_not_kept() {
        let c = BlockCache::new(4 * BLOCK_BYTES);
        assert!(c.revalidate(K, V, LATER));
        let gen = c.generation();
        c.invalidate(K); // a write through this node while the block was on its way
        c.insert(K, V, 0, b"stale", gen);
        assert!(c.get(K, V, 0).is_none());
    }

    #[test]
    fn a_file_changed_within_the_settle_time_is_not_cached() {
        let c = BlockCache::new(4 * BLOCK_BYTES);
        assert!(!c.revalidate(K, V, LATER - 1));
        assert!(!BlockCache::new(0).revalidate(K, V, LATER));
    }
}
