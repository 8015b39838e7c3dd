//! Fuzzing of the session layer: random sequences of valid and invalid slot / sequence
//! id pairs, retransmissions, different requests on a used sequence id, completions and
//! connection losses (aborts), applied to the server's slot table and reply cache and
//! checked against a plain model of the NFSv4.1 SEQUENCE rules.
//!
//! Properties: a (slot, sequence id) executes at most once unless its execution was
//! aborted before it ran; a retransmission of a completed non-idempotent request gets
//! exactly the reply it got the first time; a different request on a used sequence id is
//! always refused; the reply cache never holds more than slots x per-slot bound; the busy
//! count always equals the number of executing requests.

use std::collections::{HashMap, HashSet};

use dafs_proto::session::{Replay, ReplyCache, ServerSlots, SlotVerdict};
use proptest::prelude::*;

const SLOTS: u32 = 4;
const CACHE_SLOT_BYTES: usize = 64;

#[derive(Debug, Clone)]
enum Step {
    /// A request on `slot` with sequence id `last + delta` (delta may be anything),
    /// content `digest`, non-idempotent if `mutating`, reply of `reply_len` bytes.
    Send { slot: u32, delta: i64, digest: u8, mutating: bool, reply_len: usize },
    /// The oldest executing request completes.
    Complete,
    /// The connection breaks: every executing request that has not run yet is aborted.
    Abort,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..SLOTS + 1, -2i64..3, 0u8..3, any::<bool>(), 0usize..100).prop_map(|(slot, delta, digest, mutating, reply_len)| Step::Send { slot, delta, digest, mutating, reply_len }),
        4 => Just(Step::Complete),
        1 => Just(Step::Abort),
    ]
}

#[derive(Default, Clone)]
struct ModelSlot {
    last_seq: u32,
    /// (digest, mutating, reply) of the last completed request on the slot.
    done: Option<(u64, bool, Vec<u8>)>,
    /// (seq, digest, mutating, reply length, last_seq before it: None for a re-execution).
    busy: Option<(u32, u64, bool, usize, Option<u32>)>,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn slot_table_and_reply_cache_follow_the_model(steps in proptest::collection::vec(step(), 1..200)) {
        let mut slots = ServerSlots::new(SLOTS);
        let mut cache = ReplyCache::new(SLOTS, CACHE_SLOT_BYTES);
        let mut model: Vec<ModelSlot> = vec![ModelSlot::default(); SLOTS as usize];
        let mut executed: HashSet<(u32, u32)> = HashSet::new();
        let mut order: Vec<u32> = Vec::new(); // executing slots, oldest first
        let mut replies: HashMap<(u32, u32), Vec<u8>> = HashMap::new();

        for st in steps {
            match st {
                Step::Send { slot, delta, digest, mutating, reply_len } => {
                    let base = if slot < SLOTS { model[slot as usize].last_seq } else { 0 };
                    let seq = (base as i64 + delta).rem_euclid(1 << 32) as u32;
                    let digest = digest as u64;
                    let v = slots.begin(slot, seq);
                    if slot >= SLOTS {
                        prop_assert_eq!(v, SlotVerdict::BadSlot);
                        continue;
                    }
                    let m = &mut model[slot as usize];
                    let next = match m.last_seq.wrapping_add(1) { 0 => 1, n => n };
                    if let Some((bseq, ..)) = m.busy {
                        prop_assert_eq!(v, if seq == bseq { SlotVerdict::InProgress } else { SlotVerdict::Busy });
                        continue;
                    }
                    if seq == next {
                        prop_assert_eq!(v, SlotVerdict::Execute);
                        prop_assert!(executed.insert((slot, seq)), "({}, {}) executed twice", slot, seq);
                        m.busy = Some((seq, digest, mutating, reply_len, Some(m.last_seq)));
                        m.last_seq = seq;
                        order.push(slot);
                    } else if seq == m.last_seq && seq != 0 {
                        prop_assert_eq!(v, SlotVerdict::Replay);
                        let r = cache.replay(slot, digest);
                        match &m.done {
                            None => prop_assert_eq!(r, Replay::Uncached),
                            Some((d, _, _)) if *d != digest => prop_assert_eq!(r, Replay::FalseRetry),
                            Some((_, false, _)) => {
                                prop_assert_eq!(r, Replay::Reexecute);
                                // Executing it again is allowed for idempotent ops.
                                slots.begin_reexecute(slot);
                                m.busy = Some((seq, digest, false, reply_len, None));
                                order.push(slot);
                            }
                            Some((_, true, reply)) => {
                                if reply.len() > CACHE_SLOT_BYTES {
                                    prop_assert_eq!(r, Replay::Uncached);
                                } else {
                                    prop_assert_eq!(r, Replay::Cached(reply.as_slice()));
                                    prop_assert_eq!(&replies[&(slot, seq)], reply);
                                }
                            }
                        }
                    } else {
                        prop_assert_eq!(v, SlotVerdict::Misordered);
                    }
                }
                Step::Complete => {
                    if order.is_empty() { continue; }
                    let slot = order.remove(0);
                    let m = &mut model[slot as usize];
                    let (seq, digest, mutating, reply_len, _) = m.busy.take().unwrap();
                    let reply: Vec<u8> = (0..reply_len).map(|i| (i as u8) ^ (seq as u8) ^ (digest as u8)).collect();
                    cache.store(slot, digest, !mutating, &reply);
                    slots.complete(slot);
                    replies.insert((slot, seq), reply.clone());
                    m.done = Some((digest, mutating, reply));
                }
                Step::Abort => {
                    // Every executing request is taken to have not run (e.g. WRITE_DIRECTs
                    // whose data never arrived): their sequence ids may execute again.
                    for slot in order.drain(..) {
                        let m = &mut model[slot as usize];
                        let (seq, _, _, _, prev) = m.busy.take().unwrap();
                        slots.abort(slot);
                        // Roll back only a fresh execution (a re-execution keeps its id).
                        if let Some(prev) = prev {
                            executed.remove(&(slot, seq));
                            m.last_seq = prev;
                        }
                    }
                }
            }
            prop_assert_eq!(slots.busy_count() as usize, order.len());
            prop_assert!(cache.bytes_held() <= SLOTS as usize * CACHE_SLOT_BYTES);
        }
    }
}
