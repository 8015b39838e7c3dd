//! Counts of things in flight, as a small owned type that checks its own invariants.
//!
//! Every count of in-flight things in the client (region pins, requests per completion
//! group, completions owed to a group, quick requests for the spin policy) is sized for a
//! bound that follows from the protocol: a request in flight holds a slot, and a session
//! has at most `SLOTS_MAX` of them. Going below zero or past that bound is a bug in the
//! client's bookkeeping, never something the server or the application can cause: it
//! panics, naming the count, instead of wrapping (a wrapped count makes `wait_all` wait
//! forever, or lets the application touch memory the server is still writing).

/// A count of things in flight: never below zero, never above the bound it is sized for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InFlightCount {
    n: u32,
    max: u32,
    /// What is counted, for the panic message.
    what: &'static str,
}

impl InFlightCount {
    /// A zero count of `what`, which can never legitimately exceed `max`.
    pub(crate) const fn new(what: &'static str, max: u32) -> Self {
        InFlightCount { n: 0, max, what }
    }

    /// `k` more are in flight.
    #[track_caller]
    #[inline]
    pub(crate) fn add(&mut self, k: u32) {
        assert!(
            k <= self.max - self.n,
            "{}: {} + {k} exceeds the bound of {} (client bookkeeping bug)",
            self.what,
            self.n,
            self.max
        );
        self.n += k;
    }

    /// `k` fewer are in flight.
    #[track_caller]
    #[inline]
    pub(crate) fn sub(&mut self, k: u32) {
        assert!(
            k <= self.n,
            "{}: {} - {k} goes below zero (client bookkeeping bug)",
            self.what,
            self.n
        );
        self.n -= k;
    }

    #[track_caller]
    #[inline]
    pub(crate) fn incr(&mut self) {
        self.add(1)
    }

    #[track_caller]
    #[inline]
    pub(crate) fn decr(&mut self) {
        self.sub(1)
    }

    pub(crate) fn get(&self) -> u32 {
        self.n
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.n == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_within_bounds() {
        let mut c = InFlightCount::new("things", 3);
        c.incr();
        c.add(2);
        assert_eq!(c.get(), 3);
        c.sub(2);
        c.decr();
        assert!(c.is_zero());
    }

    #[test]
    #[should_panic(expected = "things: 0 - 1 goes below zero")]
    fn decrement_below_zero_panics() {
        let mut c = InFlightCount::new("things", 3);
        c.decr();
    }

    #[test]
    #[should_panic(expected = "things: 2 + 2 exceeds the bound of 3")]
    fn increment_past_the_bound_panics() {
        let mut c = InFlightCount::new("things", 3);
        c.add(2);
        c.add(2);
    }
}
