//! Session rules shared by both ends: the slot table and its sequence ids (the
//! NFSv4.1 SEQUENCE rules), and the client's credit accounting.
//!
//! A session grants `slots` request slots. Each request names a slot and that slot's
//! next sequence id. A slot holds at most one outstanding request, so the number of
//! slots *is* the client's credit: the server never queues more than `slots` requests
//! of one session, whatever the client does.

/// What the server does with an arriving request, per the slot table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotVerdict {
    /// `seq == last + 1` (wrapping, skipping 0): execute; the slot is now busy until
    /// [`ServerSlots::complete`].
    Execute,
    /// `seq == last`: a retransmission of the last request on that slot. Answer from the
    /// reply cache (or, without a cached reply, with `SEQ_MISORDERED`).
    Replay,
    /// Any other sequence id.
    Misordered,
    /// Slot id beyond the granted slots.
    BadSlot,
    /// The slot's previous request has not completed: the client exceeded its credits.
    Busy,
}

#[derive(Debug, Clone, Copy, Default)]
struct ServerSlot {
    last_seq: u32,
    busy: bool,
}

/// Server-side slot table of one session.
#[derive(Debug)]
pub struct ServerSlots {
    slots: Vec<ServerSlot>,
    /// Target highest slot id announced in every reply (server-directed flow control).
    target_highest: u32,
    busy_count: u32,
}

impl ServerSlots {
    pub fn new(granted: u32) -> Self {
        assert!((1..=crate::limits::SLOTS_MAX).contains(&granted));
        ServerSlots { slots: vec![ServerSlot::default(); granted as usize], target_highest: granted - 1, busy_count: 0 }
    }
    pub fn granted(&self) -> u32 { self.slots.len() as u32 }
    pub fn target_highest(&self) -> u32 { self.target_highest }
    pub fn busy_count(&self) -> u32 { self.busy_count }
    /// Ask the client to use fewer (or again more, up to the grant) slots.
    pub fn set_target_highest(&mut self, t: u32) {
        self.target_highest = t.min(self.granted() - 1);
    }

    pub fn begin(&mut self, slot_id: u32, seq: u32) -> SlotVerdict {
        let Some(slot) = self.slots.get_mut(slot_id as usize) else { return SlotVerdict::BadSlot };
        if slot.busy {
            return SlotVerdict::Busy;
        }
        // The next sequence id; like the client's, it skips 0 when it wraps.
        let next = match slot.last_seq.wrapping_add(1) {
            0 => 1,
            n => n,
        };
        if seq == next {
            slot.busy = true;
            slot.last_seq = seq;
            self.busy_count += 1;
            debug_assert!(self.busy_count <= self.granted());
            SlotVerdict::Execute
        } else if seq == slot.last_seq && seq != 0 {
            SlotVerdict::Replay
        } else {
            SlotVerdict::Misordered
        }
    }

    /// The request on `slot_id` has been answered.
    pub fn complete(&mut self, slot_id: u32) {
        let slot = &mut self.slots[slot_id as usize];
        assert!(slot.busy, "complete() on an idle slot");
        slot.busy = false;
        self.busy_count -= 1;
    }
}

/// Client-side credit accounting: which slots are free and the next sequence id of each.
#[derive(Debug)]
pub struct ClientSlots {
    next_seq: Vec<u32>,
    in_use: Vec<bool>,
    /// Free slot ids, lowest last so the lowest is reused first (keeps `highest` small).
    free: Vec<u32>,
    /// Highest slot id the server wants used (from the latest reply).
    target_highest: u32,
    in_use_count: u32,
}

impl ClientSlots {
    pub fn new(granted: u32) -> Self {
        assert!((1..=crate::limits::SLOTS_MAX).contains(&granted));
        ClientSlots {
            next_seq: vec![1; granted as usize],
            in_use: vec![false; granted as usize],
            free: (0..granted).rev().collect(),
            target_highest: granted - 1,
            in_use_count: 0,
        }
    }
    pub fn granted(&self) -> u32 { self.next_seq.len() as u32 }
    pub fn in_use(&self) -> u32 { self.in_use_count }
    /// Slots the client may still fill now.
    pub fn available(&self) -> u32 {
        self.free.iter().filter(|&&s| s <= self.target_highest).count() as u32
    }
    /// Highest slot id currently in use (sent in every request header).
    pub fn highest_in_use(&self) -> u32 {
        self.in_use.iter().rposition(|&b| b).unwrap_or(0) as u32
    }

    /// Take a free slot within the server's target: `(slot_id, sequence_id)`.
    pub fn acquire(&mut self) -> Option<(u32, u32)> {
        let idx = self.free.iter().rposition(|&s| s <= self.target_highest)?;
        let slot = self.free.swap_remove(idx);
        // keep `free` sorted descending so the lowest id is popped first
        self.free.sort_unstable_by(|a, b| b.cmp(a));
        self.in_use[slot as usize] = true;
        self.in_use_count += 1;
        Some((slot, self.next_seq[slot as usize]))
    }

    /// The reply for `slot_id` arrived: the sequence id advances and the slot is free.
    /// `target_highest` is the server's latest target from the reply header.
    pub fn release(&mut self, slot_id: u32, target_highest: u32) {
        let i = slot_id as usize;
        assert!(self.in_use[i], "release() of a slot not in use");
        self.in_use[i] = false;
        self.in_use_count -= 1;
        self.next_seq[i] = self.next_seq[i].wrapping_add(1);
        if self.next_seq[i] == 0 {
            self.next_seq[i] = 1; // 0 is never a valid sequence id
        }
        self.free.push(slot_id);
        self.free.sort_unstable_by(|a, b| b.cmp(a));
        self.target_highest = target_highest.min(self.granted() - 1);
    }

    /// Give a slot back without advancing its sequence id: the request was never sent.
    pub fn abandon(&mut self, slot_id: u32) {
        let i = slot_id as usize;
        assert!(self.in_use[i]);
        self.in_use[i] = false;
        self.in_use_count -= 1;
        self.free.push(slot_id);
        self.free.sort_unstable_by(|a, b| b.cmp(a));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_sequence_rules() {
        let mut s = ServerSlots::new(2);
        assert_eq!(s.begin(2, 1), SlotVerdict::BadSlot);
        assert_eq!(s.begin(0, 0), SlotVerdict::Misordered, "seq 0 is never valid");
        assert_eq!(s.begin(0, 2), SlotVerdict::Misordered);
        assert_eq!(s.begin(0, 1), SlotVerdict::Execute);
        assert_eq!(s.begin(0, 2), SlotVerdict::Busy);
        s.complete(0);
        assert_eq!(s.begin(0, 1), SlotVerdict::Replay);
        assert_eq!(s.begin(0, 3), SlotVerdict::Misordered);
        assert_eq!(s.begin(0, 2), SlotVerdict::Execute);
        assert_eq!(s.busy_count(), 1);
    }

    #[test]
    fn client_never_exceeds_credits_and_follows_target() {
        let mut c = ClientSlots::new(4);
        let mut held = vec![];
        while let Some(s) = c.acquire() {
            held.push(s);
        }
        assert_eq!(held.len(), 4);
        assert_eq!(c.available(), 0);
        assert_eq!(c.highest_in_use(), 3);
        // server shrinks to slots 0..=1
        for (slot, _) in held.drain(..) {
            c.release(slot, 1);
        }
        let a = c.acquire().unwrap();
        let b = c.acquire().unwrap();
        assert!(c.acquire().is_none(), "target highest 1 allows two slots");
        assert_eq!((a.0, b.0), (0, 1));
        assert_eq!(a.1, 2, "sequence advanced after the first use");
    }

    #[test]
    fn sequence_id_wraps_to_one_on_both_sides() {
        // Regression: the server expected 0 after u32::MAX (plain wrapping_add) while the
        // client skips 0 and sends 1, so the slot was dead after 2^32 - 1 requests, and
        // sequence id 0 was accepted there although it is never valid.
        let mut c = ClientSlots::new(1);
        let mut s = ServerSlots::new(1);
        c.next_seq[0] = u32::MAX - 1;
        s.slots[0].last_seq = u32::MAX - 2;
        let mut seen = vec![];
        for _ in 0..4 {
            let (slot, seq) = c.acquire().unwrap();
            assert_eq!(s.begin(slot, seq), SlotVerdict::Execute, "seq {seq}");
            s.complete(slot);
            c.release(slot, s.target_highest());
            seen.push(seq);
        }
        assert_eq!(seen, [u32::MAX - 1, u32::MAX, 1, 2]);
        s.slots[0].last_seq = u32::MAX;
        assert_eq!(s.begin(0, 0), SlotVerdict::Misordered, "0 is never valid, even after u32::MAX");
        assert_eq!(s.begin(0, u32::MAX), SlotVerdict::Replay);
        assert_eq!(s.begin(0, 1), SlotVerdict::Execute);
    }

    #[test]
    fn client_and_server_agree_over_many_requests() {
        let mut c = ClientSlots::new(3);
        let mut s = ServerSlots::new(3);
        for i in 0..1000u32 {
            let (slot, seq) = c.acquire().unwrap();
            assert_eq!(s.begin(slot, seq), SlotVerdict::Execute, "at {i}");
            s.complete(slot);
            c.release(slot, s.target_highest());
        }
    }
}
