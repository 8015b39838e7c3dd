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
    /// `seq == last`: a retransmission of the last request on that slot, which has
    /// completed. Answer from the reply cache ([`ReplyCache::replay`]).
    Replay,
    /// `seq == last` while that request is still executing (a duplicate that overtook
    /// its reply): drop it silently; the original's reply answers both.
    InProgress,
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
    /// `last_seq` before the request now executing: restored by [`ServerSlots::abort`].
    prev_seq: u32,
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
        ServerSlots {
            slots: vec![ServerSlot::default(); granted as usize],
            target_highest: granted - 1,
            busy_count: 0,
        }
    }
    pub fn granted(&self) -> u32 {
        self.slots.len() as u32
    }
    pub fn target_highest(&self) -> u32 {
        self.target_highest
    }
    pub fn busy_count(&self) -> u32 {
        self.busy_count
    }
    /// Ask the client to use fewer (or again more, up to the grant) slots.
    pub fn set_target_highest(&mut self, t: u32) {
        self.target_highest = t.min(self.granted() - 1);
    }

    pub fn begin(&mut self, slot_id: u32, seq: u32) -> SlotVerdict {
        let Some(slot) = self.slots.get_mut(slot_id as usize) else { return SlotVerdict::BadSlot };
        if slot.busy {
            return if seq == slot.last_seq { SlotVerdict::InProgress } else { SlotVerdict::Busy };
        }
        // The next sequence id; like the client's, it skips 0 when it wraps.
        let next = match slot.last_seq.wrapping_add(1) {
            0 => 1,
            n => n,
        };
        if seq == next {
            slot.busy = true;
            slot.prev_seq = slot.last_seq;
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

    /// The request on `slot_id` will never complete here (its connection broke before it
    /// executed, e.g. a WRITE_DIRECT whose data was never pulled): free the slot and
    /// forget its sequence id, so that the client's retransmission executes it.
    pub fn abort(&mut self, slot_id: u32) {
        let slot = &mut self.slots[slot_id as usize];
        assert!(slot.busy, "abort() on an idle slot");
        slot.busy = false;
        slot.last_seq = slot.prev_seq;
        self.busy_count -= 1;
    }

    /// Execute the slot's last request again (an idempotent op's retransmission, whose
    /// reply is not cached): the slot is busy until [`ServerSlots::complete`], with the
    /// same sequence id.
    pub fn begin_reexecute(&mut self, slot_id: u32) {
        let slot = &mut self.slots[slot_id as usize];
        assert!(!slot.busy, "re-execution on a busy slot");
        slot.busy = true;
        slot.prev_seq = slot.last_seq;
        self.busy_count += 1;
    }

    /// Slot ids with a request executing now.
    pub fn busy_slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().enumerate().filter(|(_, s)| s.busy).map(|(i, _)| i as u32)
    }
}

/// Digest of a request, to tell a retransmission from a different request that reuses
/// the slot and sequence id (a client bug). Like the Linux NFS server's duplicate request
/// cache, it covers the opcode, the lengths and the first [`DIGEST_SPAN`] bytes of the
/// body (the fixed part and the start of the heap): cheap on the data path, and enough
/// to tell different requests apart in practice. `msg` is the whole request message.
pub fn request_digest(msg: &[u8]) -> u64 {
    use crate::header::{offset, HEADER_LEN};
    // Word-at-a-time multiply-rotate mixing (FxHash-like): ~40 multiplies for a full
    // span, so the data path does not notice it. Not a cryptographic hash: it tells a
    // client's mistakes apart, it does not defend against forgery (the session's
    // authentication does that).
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h: u64 = 0;
    let mut mix = |w: u64| h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    let body: &[u8] = if msg.len() < HEADER_LEN {
        msg
    } else {
        let at = |o: usize| u64::from_le_bytes(msg[o..o + 8].try_into().unwrap());
        mix(u16::from_le_bytes([msg[offset::OPCODE], msg[offset::OPCODE + 1]]) as u64);
        // FIXED_LEN and HEAP_LEN are adjacent u32s: both lengths in one word.
        mix(at(offset::FIXED_LEN));
        &msg[HEADER_LEN..]
    };
    let span = &body[..body.len().min(DIGEST_SPAN)];
    let mut words = span.chunks_exact(8);
    for w in &mut words {
        mix(u64::from_le_bytes(w.try_into().unwrap()));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    mix(u64::from_le_bytes(tail) ^ ((rest.len() as u64) << 56));
    h
}

// `request_digest` reads both lengths as one word.
const _: () = assert!(crate::header::offset::HEAP_LEN == crate::header::offset::FIXED_LEN + 4);

/// Body bytes covered by [`request_digest`].
pub const DIGEST_SPAN: usize = 256;

/// What the reply cache says about a retransmission.
#[derive(Debug, PartialEq, Eq)]
pub enum Replay<'a> {
    /// Send these bytes again (the reply exactly as first sent).
    Cached(&'a [u8]),
    /// An idempotent op: execute it again.
    Reexecute,
    /// It executed, but its reply was larger than the cache holds: answer
    /// `RETRY_UNCACHED_REP`.
    Uncached,
    /// Same slot and sequence id, different request: answer `SEQ_FALSE_RETRY`.
    FalseRetry,
}

#[derive(Debug, Clone, Default)]
enum CacheEntry {
    /// Nothing executed on this slot yet (or the entry was dropped).
    #[default]
    Empty,
    Reexecute,
    Uncached,
    Bytes,
}

#[derive(Debug, Clone, Default)]
struct CacheSlot {
    digest: u64,
    entry: CacheEntry,
    bytes: Vec<u8>,
}

/// The per-session reply cache (exactly-once semantics): per slot, the digest of the
/// last executed request and, for non-idempotent ops, its reply. Bounded by
/// `slots x slot_bytes_max`: a reply larger than that is not kept (see
/// [`Replay::Uncached`]); buffers are kept and reused, never grown past the bound.
#[derive(Debug)]
pub struct ReplyCache {
    slots: Vec<CacheSlot>,
    slot_bytes_max: usize,
    bytes_held: usize,
}

impl ReplyCache {
    pub fn new(slots: u32, slot_bytes_max: usize) -> Self {
        ReplyCache {
            slots: vec![CacheSlot::default(); slots as usize],
            slot_bytes_max,
            bytes_held: 0,
        }
    }

    /// Bytes of cached replies held now (always <= slots x slot_bytes_max).
    pub fn bytes_held(&self) -> usize {
        self.bytes_held
    }
    pub fn slot_bytes_max(&self) -> usize {
        self.slot_bytes_max
    }

    /// The request with `digest` executed on `slot`; its reply was `reply` (the whole
    /// message as sent). Keeps a copy if the op is not idempotent and the reply fits.
    pub fn store(&mut self, slot: u32, digest: u64, idempotent: bool, reply: &[u8]) {
        let s = &mut self.slots[slot as usize];
        self.bytes_held -= s.bytes.len();
        s.digest = digest;
        s.bytes.clear();
        if idempotent {
            s.entry = CacheEntry::Reexecute;
        } else if reply.len() > self.slot_bytes_max {
            s.entry = CacheEntry::Uncached;
        } else {
            s.bytes.extend_from_slice(reply);
            s.entry = CacheEntry::Bytes;
        }
        self.bytes_held += s.bytes.len();
        debug_assert!(self.bytes_held <= self.slots.len() * self.slot_bytes_max);
    }

    /// Answer a retransmission (the slot table said [`SlotVerdict::Replay`]).
    pub fn replay(&self, slot: u32, digest: u64) -> Replay<'_> {
        let s = &self.slots[slot as usize];
        match s.entry {
            // Nothing recorded: a sequence id the session never executed here (e.g. the
            // cache was created after it, on a session restored without one).
            CacheEntry::Empty => Replay::Uncached,
            _ if s.digest != digest => Replay::FalseRetry,
            CacheEntry::Reexecute => Replay::Reexecute,
            CacheEntry::Uncached => Replay::Uncached,
            CacheEntry::Bytes => Replay::Cached(&s.bytes),
        }
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
    pub fn granted(&self) -> u32 {
        self.next_seq.len() as u32
    }
    pub fn in_use(&self) -> u32 {
        self.in_use_count
    }
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

    /// Follow a new target highest slot (from a SESSION_BIND reply).
    pub fn set_target(&mut self, target_highest: u32) {
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
    fn duplicate_of_an_executing_request_is_dropped_and_abort_allows_reexecution() {
        let mut s = ServerSlots::new(1);
        assert_eq!(s.begin(0, 1), SlotVerdict::Execute);
        assert_eq!(s.begin(0, 1), SlotVerdict::InProgress, "duplicate while executing");
        assert_eq!(s.begin(0, 2), SlotVerdict::Busy, "a new request beyond the credit");
        s.abort(0);
        assert_eq!(s.busy_count(), 0);
        assert_eq!(s.begin(0, 1), SlotVerdict::Execute, "after abort the retransmission executes");
        s.complete(0);
        assert_eq!(s.begin(0, 1), SlotVerdict::Replay);
        s.begin_reexecute(0);
        assert_eq!(s.busy_slots().collect::<Vec<_>>(), vec![0]);
        s.complete(0);
        assert_eq!(s.begin(0, 2), SlotVerdict::Execute);
    }

    #[test]
    fn reply_cache_rules() {
        let mut c = ReplyCache::new(2, 64);
        assert_eq!(c.replay(0, 1), Replay::Uncached, "nothing recorded");
        c.store(0, 11, false, b"reply-bytes");
        assert_eq!(c.replay(0, 11), Replay::Cached(b"reply-bytes"));
        assert_eq!(c.replay(0, 12), Replay::FalseRetry);
        assert_eq!(c.bytes_held(), 11);
        c.store(0, 13, true, &[0; 1000]);
        assert_eq!(c.replay(0, 13), Replay::Reexecute);
        assert_eq!(c.bytes_held(), 0, "idempotent replies are not kept");
        c.store(1, 14, false, &[0; 65]);
        assert_eq!(c.replay(1, 14), Replay::Uncached, "larger than the per-slot bound");
        assert_eq!(c.replay(1, 15), Replay::FalseRetry);
        c.store(1, 16, false, &[1; 64]);
        assert_eq!(c.bytes_held(), 64);
    }

    #[test]
    fn digest_tells_requests_apart_but_ignores_slot_fields() {
        use crate::{encode_request, Header, Opcode, Request};
        let enc = |slot: u32, seq: u32, hi: u32, data: &[u8]| {
            let mut b = Vec::new();
            let req = Request::WriteInline { open_id: 1, offset: 0, stable: false, data };
            encode_request(
                &Header::request(Opcode::WriteInline, 9, slot, seq, hi),
                &req,
                &mut b,
                1 << 20,
            )
            .unwrap();
            b
        };
        assert_eq!(
            request_digest(&enc(0, 1, 0, b"abc")),
            request_digest(&enc(0, 1, 5, b"abc")),
            "highest slot may differ on retransmission"
        );
        assert_ne!(request_digest(&enc(0, 1, 0, b"abc")), request_digest(&enc(0, 1, 0, b"abd")));
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
