//! The state behind completion groups: each group's bounded completion queue, and the
//! bounded table of groups.
//!
//! A completion only ever exists for a request that was submitted, but once delivered it
//! no longer holds a slot: an application that submits and never reaps would grow a
//! queue without end. So a request reserves room in its group's queue for every
//! completion it may deliver when it is submitted (and is refused with
//! [`Error::CompletionQueueFull`] when there is none); delivering then never overflows
//! the queue and never drops a completion.

use std::collections::{HashMap, VecDeque};

use dafs_proto::limits::SLOTS_MAX;

use crate::counters::InFlightCount;
use crate::limits::{COMPLETIONS_QUEUED_MAX, COMPLETION_GROUPS_MAX};
use crate::{CgId, Completion, Error, Result};

/// The group the blocking calls use; never handed to the application.
pub(crate) const INTERNAL_CG: CgId = CgId(0);

/// One completion group: the completions delivered and not yet reaped, and the room
/// reserved for those its requests in flight may still deliver. `done.len() + owed`
/// never exceeds the capacity the requests were admitted with.
pub(crate) struct Cg {
    done: VecDeque<Completion>,
    /// Requests in flight on this group; each holds a slot.
    outstanding: InFlightCount,
    /// Completions those requests may still deliver (room reserved at submit).
    owed: InFlightCount,
}

impl Cg {
    fn new() -> Self {
        Cg {
            done: VecDeque::new(),
            outstanding: InFlightCount::new("requests in flight on a completion group", SLOTS_MAX),
            owed: InFlightCount::new(
                "completions owed to a completion group",
                COMPLETIONS_QUEUED_MAX as u32,
            ),
        }
    }

    /// Whether a request that may deliver `n` completions fits in a queue of `capacity`.
    pub(crate) fn has_room(&self, n: u32, capacity: usize) -> bool {
        self.done.len() + self.owed.get() as usize + n as usize <= capacity
    }

    /// A request that may deliver up to `n` completions is in flight (admitted against
    /// `capacity` just before: [`Cg::has_room`]).
    pub(crate) fn begin(&mut self, n: u32, capacity: usize) {
        assert!(self.has_room(n, capacity), "a request was admitted to a full completion queue");
        self.outstanding.incr();
        self.owed.add(n);
    }

    /// The request that reserved `n` completions was never sent: give the room back.
    pub(crate) fn unbegin(&mut self, n: u32) {
        self.outstanding.decr();
        self.owed.sub(n);
    }

    /// The request that reserved `n` completions finished with `completions` (at most
    /// `n`; the rest of its room is given back).
    pub(crate) fn finish(&mut self, n: u32, completions: impl IntoIterator<Item = Completion>) {
        self.outstanding.decr();
        self.owed.sub(n);
        let before = self.done.len();
        self.done.extend(completions);
        assert!(
            self.done.len() - before <= n as usize,
            "a request delivered more completions than it reserved room for"
        );
    }

    /// Requests in flight.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding.get() as usize
    }

    /// Completions delivered and not yet reaped.
    pub(crate) fn queued(&self) -> usize {
        self.done.len()
    }

    /// Reap up to `max` completions, oldest first.
    pub(crate) fn take(&mut self, max: usize) -> Vec<Completion> {
        let n = self.done.len().min(max);
        self.done.drain(..n).collect()
    }

    /// Nothing in flight and nothing unreaped.
    fn is_idle(&self) -> bool {
        let idle = self.outstanding.is_zero() && self.done.is_empty();
        assert!(!idle || self.owed.is_zero(), "an idle completion group owes nothing");
        idle
    }
}

/// The client's completion groups: the internal one and at most
/// [`COMPLETION_GROUPS_MAX`] created by the application.
pub(crate) struct CgTable {
    groups: HashMap<u32, Cg>,
    /// Where the search for the next free id starts.
    next: u32,
}

impl CgTable {
    pub(crate) fn new() -> Self {
        CgTable { groups: HashMap::from([(INTERNAL_CG.0, Cg::new())]), next: INTERNAL_CG.0 + 1 }
    }

    /// A new, empty group.
    pub(crate) fn create(&mut self) -> Result<CgId> {
        // The internal group is not the application's to count.
        let created = self.groups.len() - 1;
        if created >= COMPLETION_GROUPS_MAX {
            return Err(Error::TooManyCompletionGroups);
        }
        // Never 0 (the blocking calls' own group) and never an id still in use, even
        // after 2^32 creations.
        let mut id = self.next;
        while id == INTERNAL_CG.0 || self.groups.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next = id.wrapping_add(1);
        self.groups.insert(id, Cg::new());
        Ok(CgId(id))
    }

    /// Destroy an empty group (no I/O in flight, nothing unreaped).
    pub(crate) fn destroy(&mut self, cg: CgId) -> Result<()> {
        match self.groups.get(&cg.0) {
            Some(g) if g.is_idle() && cg != INTERNAL_CG => {
                self.groups.remove(&cg.0);
                Ok(())
            }
            Some(_) => {
                Err(Error::InvalidArgument("completion group has requests in flight or unreaped"))
            }
            None => Err(Error::InvalidArgument("unknown completion group")),
        }
    }

    pub(crate) fn get(&self, cg: CgId) -> Option<&Cg> {
        self.groups.get(&cg.0)
    }

    pub(crate) fn get_mut(&mut self, cg: CgId) -> Option<&mut Cg> {
        self.groups.get_mut(&cg.0)
    }

    /// The group of a request in flight (it cannot be destroyed while it has one).
    pub(crate) fn of_request(&mut self, cg: CgId) -> &mut Cg {
        self.groups
            .get_mut(&cg.0)
            .expect("completion groups with I/O in flight are never destroyed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReqId;

    fn completion(user_data: u64) -> Completion {
        Completion { id: ReqId(user_data), user_data, result: Ok(0), eof: false, buf: None }
    }

    #[test]
    fn groups_are_bounded() {
        let mut t = CgTable::new();
        let ids: Vec<CgId> = (0..COMPLETION_GROUPS_MAX).map(|_| t.create().unwrap()).collect();
        assert!(ids.iter().all(|id| *id != INTERNAL_CG));
        assert!(matches!(t.create(), Err(Error::TooManyCompletionGroups)));
        t.destroy(ids[7]).unwrap();
        let again = t.create().unwrap();
        assert_ne!(again, INTERNAL_CG);
        assert!(matches!(t.create(), Err(Error::TooManyCompletionGroups)));
        assert!(t.destroy(INTERNAL_CG).is_err(), "the internal group stays");
    }

    #[test]
    fn ids_skip_the_internal_group_and_ids_in_use() {
        let mut t = CgTable::new();
        let a = t.create().unwrap();
        t.next = u32::MAX;
        let b = t.create().unwrap();
        assert_eq!(b, CgId(u32::MAX));
        let c = t.create().unwrap();
        assert_ne!(c, INTERNAL_CG, "0 is skipped on wrap-around");
        assert_ne!(c, a, "an id in use is skipped");
    }

    #[test]
    fn queue_room_is_reserved_at_submit() {
        let mut g = Cg::new();
        let cap = 4;
        g.begin(3, cap);
        assert!(g.has_room(1, cap));
        assert!(!g.has_room(2, cap), "room reserved for the first request is taken");
        g.begin(1, cap);
        // The first request delivers only one of its three: the rest is given back.
        g.finish(3, [completion(1)]);
        assert_eq!((g.queued(), g.outstanding()), (1, 1));
        assert!(g.has_room(2, cap) && !g.has_room(3, cap));
        g.finish(1, [completion(2)]);
        assert_eq!(g.take(8).iter().map(|c| c.user_data).collect::<Vec<_>>(), [1, 2]);
        assert!(g.is_idle());
        g.begin(2, cap);
        g.unbegin(2);
        assert!(g.is_idle());
    }

    #[test]
    #[should_panic(expected = "admitted to a full completion queue")]
    fn admitting_past_the_capacity_is_a_bug() {
        let mut g = Cg::new();
        g.begin(3, 4);
        g.begin(2, 4);
    }

    #[test]
    #[should_panic(expected = "more completions than it reserved")]
    fn delivering_more_than_reserved_is_a_bug() {
        let mut g = Cg::new();
        g.begin(1, 4);
        g.finish(1, [completion(1), completion(2)]);
    }
}
