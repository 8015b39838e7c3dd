//! Counts of things alive now (sessions holding state, open connections): one more
//! when one begins, one less when it ends. Ending more than began means an end was
//! counted twice or a beginning never was — a bug to catch where it happens, not a
//! count to wrap around (which would disable the limit the count enforces).

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

#[derive(Debug)]
pub struct LiveCount {
    n: AtomicUsize,
    /// What is counted, for the assertion's message.
    what: &'static str,
}

impl LiveCount {
    pub const fn new(what: &'static str) -> Self {
        LiveCount { n: AtomicUsize::new(0), what }
    }

    /// The count now (other threads may change it at once: a snapshot).
    pub fn get(&self) -> usize {
        self.n.load(Relaxed)
    }

    /// One more begins if fewer than `max` are alive; false (and no change) otherwise.
    pub fn try_acquire(&self, max: usize) -> bool {
        self.n.fetch_update(Relaxed, Relaxed, |n| (n < max).then_some(n + 1)).is_ok()
    }

    /// One ended. Panics if none was alive.
    pub fn release(&self) {
        let r = self.n.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        assert!(r.is_ok(), "{} released more often than acquired", self.what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_up_to_max_and_release() {
        let c = LiveCount::new("things");
        assert!(c.try_acquire(2) && c.try_acquire(2));
        assert!(!c.try_acquire(2), "at the limit");
        assert_eq!(c.get(), 2);
        c.release();
        assert!(c.try_acquire(2));
        c.release();
        c.release();
        assert_eq!(c.get(), 0);
    }

    #[test]
    #[should_panic(expected = "things released more often than acquired")]
    fn release_below_zero_is_a_bug() {
        LiveCount::new("things").release();
    }
}
