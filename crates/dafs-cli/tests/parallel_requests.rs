//! One session's independent data requests run in parallel on the server (the I/O pool,
//! `dafsd --io-threads`): overlapping writes still land in the order issued, a
//! retransmission of a request still executing is not executed again, and a CLOSE
//! waits for the reads issued before it.

#[macro_use]
mod common;
mod raw;

use std::io::Write;

use common::{pattern, Provider, TestServer};
use dafs_client::{Completion, IoBuf, OpenOptions};
use dafs_proto::types::open_flags;
use dafs_proto::{decode_reply, AuthMethod, Header, Opcode, Reply, Request};
use raw::{enc, free_addr, metric, msg_frame, Raw, MAX};

const BLOCK: usize = 64 * 1024;

fn ok(c: &Completion) -> usize {
    match &c.result {
        Ok(n) => *n,
        Err(e) => panic!("request {} failed: {e:?}", c.user_data),
    }
}

/// Many overlapping direct writes in flight at once from one session (each 64 KiB block
/// overlaps its neighbours by a quarter), then direct reads of the result in flight at
/// once: the file equals the writes applied in the order issued, and every read returns
/// those bytes. Non-overlapping requests ran in parallel (`requests_parallel`); the
/// overlapping ones waited (`parallel_barriers`).
fn overlapping_writes_land_in_issue_order(p: Provider) {
    let metrics = free_addr();
    let srv = TestServer::start(&["--io-threads", "2", "--metrics-listen", &metrics]);
    let mut c = srv.client_on(p);
    let n = (c.slots() as usize - 1).min(16);
    assert!(n >= 4, "the test needs several requests in flight ({n} slots)");
    let f = c.open("w", OpenOptions::read_write().create(true)).unwrap();
    let cg = c.create_cg().unwrap();
    let step = BLOCK * 3 / 4;
    let mut model = vec![0u8; step * (n - 1) + BLOCK];
    // Writes 0, 2, 4... first (disjoint: they may run in parallel), then 1, 3, 5...,
    // each overlapping two earlier ones, then block 0 again over its old self.
    let mut order: Vec<usize> = (0..n).step_by(2).chain((1..n).step_by(2)).collect();
    order.push(0);
    // Whether a write arrives while a neighbour still executes depends on timing: repeat
    // until one did (each round must land in order either way).
    for round in 0..20u8 {
        // Registered first, then submitted back to back: many arrive while others run.
        let mut writes = Vec::new();
        for (k, &i) in order.iter().enumerate() {
            let data = pattern(i as u64, BLOCK, round.wrapping_mul(31).wrapping_add(k as u8));
            model[i * step..i * step + BLOCK].copy_from_slice(&data);
            // Memory the server maps (over shared memory: a memfd), as the bench uses.
            let r = c.alloc_registered(BLOCK).unwrap();
            c.region_mut(r).unwrap().copy_from_slice(&data);
            writes.push((i, r));
        }
        for (k, &(i, r)) in writes.iter().enumerate() {
            let buf = IoBuf::Region { region: r, offset: 0, len: BLOCK };
            c.submit_write(&f, (i * step) as u64, buf, cg, k as u64).unwrap();
        }
        for d in c.wait_all(cg).unwrap() {
            assert_eq!(ok(&d), BLOCK, "write {}", d.user_data);
        }
        for (_, r) in writes {
            c.unregister(r).unwrap();
        }
        let on_disk = std::fs::read(srv.dir().join("w")).unwrap();
        assert!(on_disk == model, "round {round}: overlapping writes landed out of order");
        if p != Provider::Auto || metric(&metrics, "parallel_barriers") > 0 {
            break;
        }
    }

    let regions: Vec<_> = (0..n).map(|_| c.alloc_registered(BLOCK).unwrap()).collect();
    for (i, &r) in regions.iter().enumerate() {
        let buf = IoBuf::Region { region: r, offset: 0, len: BLOCK };
        c.submit_read(&f, (i * step) as u64, buf, cg, i as u64).unwrap();
    }
    for d in c.wait_all(cg).unwrap() {
        let i = d.user_data as usize;
        assert_eq!(ok(&d), BLOCK, "read {i}");
        let got = c.region_mut(regions[i]).unwrap();
        assert!(got[..] == model[i * step..i * step + BLOCK], "read {i} returned other bytes");
    }
    c.close(f).unwrap();
    if p == Provider::Auto {
        // Shared memory: direct transfers are leased to the pool, and the overlapping
        // writes among them waited for those before them.
        assert!(metric(&metrics, "requests_parallel") > 0, "nothing ran in parallel");
        assert!(metric(&metrics, "parallel_barriers") > 0, "overlapping writes must wait");
    }
}

for_each_provider!(overlapping_writes_land_in_issue_order);

/// A raw TCP session with `slots` slots and 256 KiB messages, and an open of `name`.
fn raw_session(addr: &str, slots: u32, name: &[u8]) -> (Raw, u64) {
    let mut r = Raw::connect(addr);
    let req = Request::SessionCreate {
        msg_size_bytes_max: 256 * 1024,
        slots,
        auth: AuthMethod::None,
        flags: 0,
        client_id: b"parallel-test",
    };
    let m = r.roundtrip(&enc(&Header::request(Opcode::SessionCreate, 0, 0, 0, 0), &req));
    let (h, reply) = decode_reply(&m, MAX).unwrap();
    let Reply::SessionCreate { slots: got, .. } = reply else { panic!("{reply:?}") };
    assert_eq!(got, slots);
    r.sid = h.session_id;
    r.seq = vec![1; slots as usize];
    let root = r.root();
    let open = r.open(root, name, open_flags::READ | open_flags::WRITE | open_flags::CREATE);
    (r, open)
}

/// A WRITE_INLINE of 64 KiB (handed to the I/O pool) and its retransmission, sent
/// together: the copy arrives while the original still executes. It must not execute
/// again — the server drops it (its original's reply answers it) or, if the original
/// finished first, answers it from the reply cache. Each round writes exactly once.
#[test]
fn retransmit_while_in_flight_executes_once() {
    let metrics = free_addr();
    let srv = TestServer::start(&["--io-threads", "1", "--metrics-listen", &metrics]);
    let (mut r, open_id) = raw_session(&srv.addr(), 4, b"f");
    let rounds = 20u64;
    let written_before = metric(&metrics, "bytes_written");
    for round in 0..rounds {
        let data = pattern(round, BLOCK, round as u8);
        let req = Request::WriteInline { open_id, offset: 0, stable: false, data: &data };
        let m = r.next(1, &req);
        let mut both = msg_frame(&m);
        both.extend_from_slice(&msg_frame(&m));
        r.s.write_all(&both).unwrap();
        // A probe on another slot: every answer to the write and its copy comes before
        // the probe's.
        let probe = r.next(0, &Request::Null);
        r.send_msg(&probe);
        let mut write_replies = 0;
        loop {
            let m = r.reply();
            let (h, reply) = decode_reply(&m, MAX).unwrap();
            if h.slot_id == 0 {
                assert_eq!(reply, Reply::Empty);
                break;
            }
            assert_eq!(h.slot_id, 1);
            assert_eq!(reply, Reply::Write { count: BLOCK as u32, stable: false, offset: 0 });
            write_replies += 1;
        }
        // The probe is not a data request: it waits for the write (and so follows its
        // reply); the copy adds a second reply only if it came after the write finished.
        assert!((1..=2).contains(&write_replies), "round {round}: {write_replies} replies");
        assert_eq!(std::fs::read(srv.dir().join("f")).unwrap(), data, "round {round}");
    }
    let written = metric(&metrics, "bytes_written") - written_before;
    assert_eq!(written, rounds * BLOCK as u64, "a retransmitted write executed twice");
    let dropped = metric(&metrics, "duplicates_dropped");
    let replayed = metric(&metrics, "replays");
    assert_eq!(dropped + replayed, rounds, "every copy dropped or answered from the cache");
    assert!(metric(&metrics, "requests_parallel") > 0, "the writes ran in the pool");
}

/// Reads handed to the I/O pool, then a CLOSE of their file sent right behind them: the
/// CLOSE waits for the reads, so every read returns the file's bytes and the CLOSE's
/// reply comes last.
#[test]
fn close_waits_for_reads_in_flight() {
    let metrics = free_addr();
    let srv = TestServer::start(&["--io-threads", "1", "--metrics-listen", &metrics]);
    let reads = 6usize;
    let data = pattern(0, reads * BLOCK, 9);
    std::fs::write(srv.dir().join("r"), &data).unwrap();
    let (mut r, open_id) = raw_session(&srv.addr(), reads as u32 + 2, b"r");
    for round in 0..10 {
        let mut burst = Vec::new();
        for i in 0..reads {
            let req =
                Request::ReadInline { open_id, offset: (i * BLOCK) as u64, len: BLOCK as u32 };
            burst.extend_from_slice(&msg_frame(&r.next(i as u32 + 1, &req)));
        }
        // The last round closes the file behind its reads; the others probe with NULL.
        let last = round == 9;
        let tail = if last { Request::Close { open_id } } else { Request::Null };
        burst.extend_from_slice(&msg_frame(&r.next(reads as u32 + 1, &tail)));
        r.s.write_all(&burst).unwrap();
        let mut seen = vec![false; reads];
        for k in 0..=reads {
            let m = r.reply();
            let (h, reply) = decode_reply(&m, MAX).unwrap();
            let slot = h.slot_id as usize;
            if slot == reads + 1 {
                if last {
                    assert_eq!(k, reads, "CLOSE answered before the reads issued ahead of it");
                    assert_eq!(reply, Reply::Empty, "CLOSE");
                }
                continue;
            }
            let i = slot - 1;
            let Reply::ReadInline { data: got, eof } = reply else { panic!("read {i}: {reply:?}") };
            assert!(!eof || i == reads - 1);
            assert!(got == &data[i * BLOCK..(i + 1) * BLOCK], "read {i} returned other bytes");
            seen[i] = true;
        }
        assert!(seen.iter().all(|&s| s), "round {round}: a read went unanswered");
    }
    assert!(metric(&metrics, "requests_parallel") > 0, "the reads ran in the pool");
}
