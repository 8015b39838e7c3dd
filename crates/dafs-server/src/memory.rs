//! The global memory budget (`memory_bytes_max`): bytes every connection together holds
//! in queued output and pulls in flight (each connection's `backlog_bytes`). Each
//! connection is also bounded by `backlog_bytes_max`, but many connections that never
//! read their replies could each reach that; past the global budget, a connection with
//! output pending is not read until it drains (and SESSION_CREATE answers LIMIT), so
//! the sum stays near the budget: over it by at most one reply per connection.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct MemoryBudget {
    used: AtomicUsize,
}

impl MemoryBudget {
    /// A connection that had `*counted` bytes counted now holds `now`: update the total.
    pub fn update(&self, counted: &mut usize, now: usize) {
        if now > *counted {
            self.used.fetch_add(now - *counted, Relaxed);
        } else if now < *counted {
            let r = self.used.fetch_update(Relaxed, Relaxed, |u| u.checked_sub(*counted - now));
            assert!(r.is_ok(), "memory budget: more released than counted");
        }
        *counted = now;
    }

    /// Bytes held now by all connections.
    pub fn used(&self) -> usize {
        self.used.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_each_connections_share() {
        let b = MemoryBudget::default();
        let (mut x, mut y) = (0, 0);
        b.update(&mut x, 100);
        b.update(&mut y, 50);
        assert_eq!(b.used(), 150);
        b.update(&mut x, 30);
        assert_eq!((b.used(), x), (80, 30));
        b.update(&mut x, 0);
        b.update(&mut y, 0);
        assert_eq!(b.used(), 0);
    }
}
