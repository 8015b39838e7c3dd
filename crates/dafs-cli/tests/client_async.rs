//! The asynchronous client API against a real `dafsd`: registered memory, submit paths
//! (inline/direct, region/Vec), completion groups, slot limits, EOF, and the promise
//! that the library starts no threads.

#[macro_use]
mod common;

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use common::{pattern, Provider, TestServer};
use dafs_client::dafs_proto::Status;
use dafs_client::limits::COMPLETION_GROUPS_MAX;
use dafs_client::{
    BatchCompletion, BatchIoDesc, CgId, Client, Completion, Error, IoBuf, OpenOptions,
};

/// Write `len` bytes of `pattern(0, len, seed)` to `name` in the export.
fn make_file(srv: &TestServer, name: &str, len: usize, seed: u8) -> Vec<u8> {
    let data = pattern(0, len, seed);
    std::fs::write(srv.dir().join(name), &data).unwrap();
    data
}

fn ok(c: &Completion) -> usize {
    match &c.result {
        Ok(n) => *n,
        Err(e) => panic!("completion {} failed: {e:?}", c.user_data),
    }
}

fn registered_memory(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    let data = make_file(&srv, "f", 4 * thr, 1);
    let f = c.open("f", OpenOptions::read()).unwrap();

    // allocated regions start zeroed and are writable by the application
    let r = c.alloc_registered(2 * thr).unwrap();
    assert!(c.region(r).unwrap().iter().all(|&b| b == 0));
    assert_eq!(c.region(r).unwrap().len(), 2 * thr);
    c.region_mut(r).unwrap()[..4].copy_from_slice(b"mine");
    assert_eq!(&c.region(r).unwrap()[..4], b"mine");

    // while a read naming the region is in flight, the application may not touch it
    let cg = c.create_cg().unwrap();
    let id =
        c.submit_read(&f, 0, IoBuf::Region { region: r, offset: 0, len: 2 * thr }, cg, 11).unwrap();
    assert!(matches!(c.region_mut(r), Err(Error::RegionBusy)));
    assert!(matches!(c.region(r), Err(Error::RegionBusy)));
    assert!(matches!(c.unregister(r), Err(Error::RegionBusy)));
    let done = c.wait_all(cg).unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].id, id);
    assert_eq!(ok(&done[0]), 2 * thr);
    assert_eq!(c.region(r).unwrap(), &data[..2 * thr]);
    c.region_mut(r).unwrap()[0] = 0; // usable again
    assert_eq!(c.unregister(r).unwrap(), None, "allocated regions have no Vec to return");
    assert!(matches!(c.region(r), Err(Error::InvalidArgument(_))));
    assert!(matches!(c.unregister(r), Err(Error::InvalidArgument(_))));

    // register(Vec) / unregister hands the same Vec back, with what was read into it
    let mut v = vec![0xEEu8; 3 * thr];
    v[..5].copy_from_slice(b"hello");
    let ptr = v.as_ptr();
    let rv = c.register(v).unwrap();
    assert_eq!(&c.region(rv).unwrap()[..5], b"hello");
    assert!(c.region(rv).unwrap()[5..].iter().all(|&b| b == 0xEE));
    let back = c.unregister(rv).unwrap().expect("the registered Vec");
    assert_eq!(back.as_ptr(), ptr, "the very same buffer");
    assert_eq!(back.len(), 3 * thr);
    assert_eq!(&back[..5], b"hello");

    let rv = c.register(back).unwrap();
    // read into the middle of it, above the threshold (direct placement)
    c.submit_read(&f, 7, IoBuf::Region { region: rv, offset: 100, len: thr + 1 }, cg, 1).unwrap();
    assert!(matches!(c.unregister(rv), Err(Error::RegionBusy)));
    assert!(matches!(c.region_mut(rv), Err(Error::RegionBusy)));
    let d = c.wait_one(cg, Some(Duration::from_secs(30))).unwrap().expect("a completion");
    assert_eq!(ok(&d), thr + 1);
    let back = c.unregister(rv).unwrap().unwrap();
    assert_eq!(&back[..5], b"hello");
    assert!(back[5..100].iter().all(|&b| b == 0xEE), "bytes before the target range untouched");
    assert_eq!(&back[100..100 + thr + 1], &data[7..7 + thr + 1]);
    assert!(back[101 + thr..].iter().all(|&b| b == 0xEE), "bytes after the target range untouched");

    // bad registrations and ranges
    assert!(matches!(c.register(Vec::new()), Err(Error::InvalidArgument(_))));
    let small = c.alloc_registered(100).unwrap();
    assert!(matches!(
        c.submit_read(&f, 0, IoBuf::Region { region: small, offset: 50, len: 51 }, cg, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        c.submit_read(&f, 0, IoBuf::Region { region: small, offset: usize::MAX, len: 2 }, cg, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        c.submit_write(&f, 0, IoBuf::Region { region: small, offset: 101, len: 0 }, cg, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(c.outstanding(cg), 0, "refused submits are not in flight");
    c.unregister(small).unwrap();
    assert!(matches!(
        c.submit_read(&f, 0, IoBuf::Region { region: small, offset: 0, len: 10 }, cg, 0),
        Err(Error::InvalidArgument(_))
    ));
    c.null().unwrap();
}

fn submit_paths_and_counters(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    assert!(thr > 0 && thr < c.io_bytes_max());
    let big = 3 * thr + 5;
    let data = make_file(&srv, "src", 4 * thr, 2);
    let src = c.open("src", OpenOptions::read()).unwrap();
    let dst = c.open("dst", OpenOptions::read_write().create(true)).unwrap();
    let cg = c.create_cg().unwrap();
    let region = c.alloc_registered(4 * thr).unwrap();

    // (read?, region?, len) -> which counters must move
    let s0 = c.stats();

    // 1. Region, below threshold, read: inline
    c.submit_read(&src, 10, IoBuf::Region { region, offset: 0, len: 100 }, cg, 1).unwrap();
    let d = c.wait_all(cg).unwrap();
    assert_eq!(ok(&d[0]), 100);
    assert!(d[0].buf.is_none());
    assert_eq!(&c.region(region).unwrap()[..100], &data[10..110]);
    let s1 = c.stats();
    assert_eq!(s1.inline_reads, s0.inline_reads + 1);
    assert_eq!(s1.direct_reads, s0.direct_reads);
    assert_eq!(s1.off_direct_path, s0.off_direct_path);
    assert_eq!(s1.inline_bytes, s0.inline_bytes + 100);

    // 2. Region, exactly the threshold: still inline
    c.submit_read(&src, 0, IoBuf::Region { region, offset: 0, len: thr }, cg, 2).unwrap();
    assert_eq!(ok(&c.wait_all(cg).unwrap()[0]), thr);
    let s2 = c.stats();
    assert_eq!((s2.inline_reads, s2.direct_reads), (s1.inline_reads + 1, s1.direct_reads));

    // 3. Region, above threshold: direct, and NOT off the direct path
    c.submit_read(&src, 1, IoBuf::Region { region, offset: 3, len: big }, cg, 3).unwrap();
    assert_eq!(ok(&c.wait_all(cg).unwrap()[0]), big);
    assert_eq!(&c.region(region).unwrap()[3..3 + big], &data[1..1 + big]);
    let s3 = c.stats();
    assert_eq!(s3.direct_reads, s2.direct_reads + 1);
    assert_eq!(s3.inline_reads, s2.inline_reads);
    assert_eq!(s3.off_direct_path, s2.off_direct_path, "a registered region is the direct path");
    assert_eq!(s3.direct_bytes, s2.direct_bytes + big as u64);
    if c.provider() == "tcp" {
        assert!(s3.transport.placed_bytes >= s2.transport.placed_bytes + big as u64);
    }

    // 4. Vec, below threshold: inline, buffer handed back with the data
    c.submit_read(&src, 5, IoBuf::Vec(vec![0; 200]), cg, 4).unwrap();
    let d = c.wait_all(cg).unwrap();
    assert_eq!(ok(&d[0]), 200);
    assert_eq!(d[0].buf.as_deref().unwrap(), &data[5..205]);
    let s4 = c.stats();
    assert_eq!(
        (s4.inline_reads, s4.direct_reads, s4.off_direct_path),
        (s3.inline_reads + 1, s3.direct_reads, s3.off_direct_path)
    );

    // 5. Vec, above threshold: direct, counted off the direct path
    c.submit_read(&src, 9, IoBuf::Vec(vec![0; big]), cg, 5).unwrap();
    let d = c.wait_all(cg).unwrap();
    assert_eq!(ok(&d[0]), big);
    assert_eq!(d[0].buf.as_deref().unwrap(), &data[9..9 + big]);
    let s5 = c.stats();
    assert_eq!(s5.direct_reads, s4.direct_reads + 1);
    assert_eq!(s5.inline_reads, s4.inline_reads);
    assert_eq!(s5.off_direct_path, s4.off_direct_path + 1);
    if c.provider() == "shm" {
        // memory the library did not allocate is reached by address on shm
        assert_eq!(s5.transport.vm_registrations, s4.transport.vm_registrations + 1);
        assert_eq!(
            s3.transport.vm_registrations, s0.transport.vm_registrations,
            "alloc_registered memory is shared, not reached by address"
        );
    }

    // writes: the same four combinations
    let wdata = pattern(0, 5 * thr, 3);
    c.region_mut(region).unwrap().copy_from_slice(&wdata[..4 * thr]);
    c.submit_write(&dst, 0, IoBuf::Region { region, offset: 0, len: 50 }, cg, 6).unwrap();
    assert_eq!(ok(&c.wait_all(cg).unwrap()[0]), 50);
    let s6 = c.stats();
    assert_eq!(
        (s6.inline_writes, s6.direct_writes, s6.off_direct_path),
        (s5.inline_writes + 1, s5.direct_writes, s5.off_direct_path)
    );

    c.submit_write(&dst, 50, IoBuf::Region { region, offset: 50, len: big }, cg, 7).unwrap();
    assert_eq!(ok(&c.wait_all(cg).unwrap()[0]), big);
    let s7 = c.stats();
    assert_eq!(
        (s7.inline_writes, s7.direct_writes, s7.off_direct_path),
        (s6.inline_writes, s6.direct_writes + 1, s6.off_direct_path)
    );
    if c.provider() == "tcp" {
        assert!(s7.transport.pulled_bytes >= s6.transport.pulled_bytes + big as u64);
    }

    let tail = 50 + big;
    c.submit_write(&dst, tail as u64, IoBuf::Vec(wdata[tail..tail + 30].to_vec()), cg, 8).unwrap();
    let d = c.wait_all(cg).unwrap();
    assert_eq!(ok(&d[0]), 30);
    assert_eq!(
        d[0].buf.as_deref().unwrap(),
        &wdata[tail..tail + 30],
        "write buffer handed back unchanged"
    );
    let s8 = c.stats();
    assert_eq!(
        (s8.inline_writes, s8.direct_writes, s8.off_direct_path),
        (s7.inline_writes + 1, s7.direct_writes, s7.off_direct_path)
    );

    let rest = 5 * thr - tail - 30;
    assert!(rest > thr);
    c.submit_write(&dst, (tail + 30) as u64, IoBuf::Vec(wdata[tail + 30..].to_vec()), cg, 9)
        .unwrap();
    let d = c.wait_all(cg).unwrap();
    assert_eq!(ok(&d[0]), rest);
    assert_eq!(d[0].buf.as_ref().unwrap().len(), rest);
    let s9 = c.stats();
    assert_eq!(
        (s9.inline_writes, s9.direct_writes, s9.off_direct_path),
        (s8.inline_writes, s8.direct_writes + 1, s8.off_direct_path + 1)
    );

    assert_eq!(std::fs::read(srv.dir().join("dst")).unwrap(), wdata);
    assert_eq!(s9.errors, 0);
    assert_eq!(s9.requests, s0.requests + 9);

    // an I/O error is a completion with an error, counted in stats().errors
    c.submit_write(&src, 0, IoBuf::Vec(vec![1; 10]), cg, 10).unwrap();
    c.submit_read(&dst, 0, IoBuf::Vec(vec![0; 10]), cg, 11).unwrap(); // dst is read-write: fine
    let mut d = c.wait_all(cg).unwrap();
    d.sort_by_key(|x| x.user_data);
    assert_eq!(d[0].result.as_ref().unwrap_err().status(), Some(Status::OpenMode));
    assert!(d[0].buf.is_some(), "the Vec comes back even on error");
    assert_eq!(ok(&d[1]), 10);
    assert_eq!(c.stats().errors, s9.errors + 1);
    assert_eq!(std::fs::read(srv.dir().join("src")).unwrap(), data);
}

fn completion_groups(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    let data = make_file(&srv, "f", 8 * thr, 4);
    let f = c.open("f", OpenOptions::read()).unwrap();
    let g1 = c.create_cg().unwrap();
    let g2 = c.create_cg().unwrap();
    assert_ne!(g1, g2);

    // nothing in flight: waits return at once, poll is empty
    let t = Instant::now();
    assert!(c.wait_one(g1, None).unwrap().is_none());
    assert!(c.wait_n(g1, 3, None).unwrap().is_empty());
    assert!(c.wait_all(g1).unwrap().is_empty());
    assert!(c.poll(g1, 10).unwrap().is_empty());
    assert!(t.elapsed() < Duration::from_secs(1));

    // interleave submissions to two groups; user data chosen to be distinctive
    let mut ids1 = BTreeSet::new();
    let mut ids2 = BTreeSet::new();
    for i in 0..6u64 {
        let len = if i % 2 == 0 { 100 } else { 2 * thr };
        ids1.insert((
            c.submit_read(&f, i * 10, IoBuf::Vec(vec![0; len]), g1, 1000 + i).unwrap().0,
            1000 + i,
        ));
        ids2.insert((
            c.submit_read(&f, i * 20, IoBuf::Vec(vec![0; len]), g2, u64::MAX - i).unwrap().0,
            u64::MAX - i,
        ));
    }
    assert_eq!(c.outstanding(g1), 6);
    assert_eq!(c.outstanding(g2), 6);

    // wait_n: exactly n of more
    let first = c.wait_n(g1, 2, Some(Duration::from_secs(30))).unwrap();
    assert_eq!(first.len(), 2);
    let one = c.wait_one(g1, Some(Duration::from_secs(30))).unwrap().expect("one more");
    let rest = c.wait_all(g1).unwrap();
    assert_eq!(rest.len(), 3);
    assert_eq!(c.outstanding(g1), 0);
    let got1: BTreeSet<_> = first
        .iter()
        .chain(std::iter::once(&one))
        .chain(rest.iter())
        .map(|x| (x.id.0, x.user_data))
        .collect();
    assert_eq!(got1, ids1, "group 1 got exactly its own completions, each once");
    for x in first.iter().chain(std::iter::once(&one)).chain(rest.iter()) {
        let i = x.user_data - 1000;
        let n = ok(x);
        assert_eq!(x.buf.as_deref().unwrap()[..n], data[(i * 10) as usize..(i * 10) as usize + n]);
    }
    // progress made for group 1 may have completed group 2's requests, but they stay in group 2
    assert!(c.poll(g1, 100).unwrap().is_empty());

    // poll group 2 one at a time (max = 1) until everything arrived
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got2 = BTreeSet::new();
    while got2.len() < 6 {
        assert!(Instant::now() < deadline, "poll never delivered everything");
        let p = c.poll(g2, 1).unwrap();
        assert!(p.len() <= 1);
        for x in p {
            let i = u64::MAX - x.user_data;
            let n = ok(&x);
            assert_eq!(
                x.buf.as_deref().unwrap()[..n],
                data[(i * 20) as usize..(i * 20) as usize + n]
            );
            assert!(got2.insert((x.id.0, x.user_data)));
        }
    }
    assert_eq!(got2, ids2);
    assert_eq!(c.outstanding(g2), 0);
    assert!(c.poll(g2, 10).unwrap().is_empty());

    // destroying groups
    c.submit_read(&f, 0, IoBuf::Vec(vec![0; 10]), g2, 1).unwrap();
    assert!(matches!(c.destroy_cg(g2), Err(Error::InvalidArgument(_))), "in flight");
    while c.outstanding(g2) > 0 {
        c.poll(g1, 1).unwrap(); // progress without reaping group 2
    }
    assert!(matches!(c.destroy_cg(g2), Err(Error::InvalidArgument(_))), "unreaped");
    assert_eq!(c.wait_all(g2).unwrap().len(), 1);
    c.destroy_cg(g2).unwrap();
    assert!(matches!(c.destroy_cg(g2), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        c.submit_read(&f, 0, IoBuf::Vec(vec![0; 10]), g2, 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(c.poll(g2, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(c.wait_all(g2), Err(Error::InvalidArgument(_))));
    assert!(matches!(c.wait_one(g2, None), Err(Error::InvalidArgument(_))));
    // blocking calls (internal group) work with user groups busy
    c.submit_read(&f, 0, IoBuf::Vec(vec![0; 10]), g1, 77).unwrap();
    let mut b = [0u8; 10];
    assert_eq!(c.pread(&f, &mut b, 0).unwrap(), 10);
    c.null().unwrap();
    let d = c.wait_all(g1).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].user_data, 77);
}

fn slots_are_credits_and_submit_never_blocks(p: Provider) {
    let srv = TestServer::start(&["--slots", "4"]);
    let mut c = srv.client_on(p);
    assert_eq!(c.slots(), 4, "server grants at most --slots");
    let max = c.io_bytes_max();
    // a sparse file: holes read as zeros, fast on the server, but each read still moves
    // io_bytes_max bytes over the connection, so replies take a while
    std::fs::File::create(srv.dir().join("big")).unwrap().set_len(16 * max as u64).unwrap();
    let f = c.open("big", OpenOptions::read()).unwrap();
    let cg = c.create_cg().unwrap();
    let regions: Vec<_> = (0..8).map(|_| c.alloc_registered(max).unwrap()).collect();

    let mut submitted = 0usize;
    let mut first_wb = None;
    for i in 0..64usize {
        let t = Instant::now();
        match c.submit_read(
            &f,
            (i % 16 * max) as u64,
            IoBuf::Region { region: regions[i % 8], offset: 0, len: max },
            cg,
            i as u64,
        ) {
            Ok(_) => submitted += 1,
            Err(Error::WouldBlock) => {
                assert!(
                    t.elapsed() < Duration::from_secs(2),
                    "WouldBlock must not wait for replies"
                );
                first_wb = Some(i);
                break;
            }
            Err(e) => panic!("submit {i}: {e:?}"),
        }
        assert!(c.outstanding(cg) <= c.slots() as usize, "more in flight than slots");
    }
    let wb =
        first_wb.expect("submitting far more than slots() without reaping must hit WouldBlock");
    assert!(
        submitted >= c.slots() as usize,
        "at least slots() submits succeed before WouldBlock ({submitted})"
    );
    assert!(c.outstanding(cg) <= 4);
    assert!(c.stats().slot_waits >= 1);
    // the blocking API still works while user I/O holds slots (it waits for a slot)
    c.null().unwrap();
    // reap one, then a submit succeeds again
    let done = c.wait_all(cg).unwrap();
    assert_eq!(done.len(), submitted);
    for d in &done {
        assert_eq!(ok(d), max);
    }
    c.submit_read(&f, 0, IoBuf::Region { region: regions[0], offset: 0, len: max }, cg, wb as u64)
        .unwrap();
    assert_eq!(ok(&c.wait_one(cg, None).unwrap().unwrap()), max);
    assert!(c.region(regions[0]).unwrap().iter().all(|&b| b == 0));

    // many more requests than slots through the blocking path are pipelined correctly
    let mut rng_data = pattern(0, 3 * max + 12345, 9);
    let w = c.open("w", OpenOptions::read_write().create(true)).unwrap();
    c.pwrite(&w, &rng_data, 0).unwrap();
    let mut back = vec![0u8; rng_data.len()];
    assert_eq!(c.pread(&w, &mut back, 0).unwrap(), back.len());
    assert!(back == rng_data);
    // inline-sized pipelining with Vec buffers beyond the slot count
    for (i, chunk) in rng_data.chunks_mut(1000).take(40).enumerate() {
        chunk.fill(i as u8);
    }
    let mut in_flight = 0;
    let mut reaped = 0;
    for (i, chunk) in rng_data.chunks(1000).take(40).enumerate() {
        loop {
            match c.submit_write(&w, (i * 1000) as u64, IoBuf::Vec(chunk.to_vec()), cg, i as u64) {
                Ok(_) => {
                    in_flight += 1;
                    break;
                }
                Err(Error::WouldBlock) => {
                    let d = c.wait_one(cg, None).unwrap().expect("something in flight");
                    assert_eq!(ok(&d), 1000);
                    in_flight -= 1;
                    reaped += 1;
                }
                Err(e) => panic!("{e:?}"),
            }
            assert!(c.outstanding(cg) <= 4);
        }
    }
    reaped += c.wait_all(cg).unwrap().len();
    assert_eq!(reaped, 40);
    let _ = in_flight;
    // failed requests give their slots back
    for i in 0..20u64 {
        let len = if i % 2 == 0 { 10 } else { max.min(1 << 20) };
        c.submit_write(&f, 0, IoBuf::Vec(vec![0; len]), cg, i).unwrap(); // f is read-only
        let d = c.wait_one(cg, None).unwrap().unwrap();
        assert_eq!(d.result.unwrap_err().status(), Some(Status::OpenMode));
    }
    for i in 0..4u64 {
        c.submit_read(&w, 0, IoBuf::Vec(vec![0; 10]), cg, i)
            .unwrap_or_else(|e| panic!("slot {i} leaked: {e:?}"));
    }
    assert_eq!(c.wait_all(cg).unwrap().len(), 4);
    assert!(std::fs::read(srv.dir().join("w")).unwrap() == rng_data);
}

fn eof_semantics(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    let size = 2 * thr + 1000;
    let data = make_file(&srv, "f", size, 5);
    let f = c.open("f", OpenOptions::read()).unwrap();
    let cg = c.create_cg().unwrap();
    let region = c.alloc_registered(4 * thr).unwrap();

    let cases: &[(u64, usize, usize, bool)] = &[
        // (offset, len, expected count, expected eof)
        (0, 500, 500, false),
        ((size - 200) as u64, 500, 200, true), // inline, short
        (size as u64, 100, 0, true),           // inline, at end
        (size as u64 + 5000, 100, 0, true),    // inline, past end
        ((size - 10) as u64, 2 * thr, 10, true), // direct, short
        (size as u64 + 1, 2 * thr, 0, true),   // direct, past end
        (0, 2 * thr, 2 * thr, false),          // direct, full
    ];
    for (k, &(off, len, want, eof)) in cases.iter().enumerate() {
        for use_region in [false, true] {
            let buf = if use_region {
                IoBuf::Region { region, offset: 0, len }
            } else {
                IoBuf::Vec(vec![0xCC; len])
            };
            c.submit_read(&f, off, buf, cg, k as u64).unwrap();
            let d = c.wait_one(cg, None).unwrap().unwrap();
            assert_eq!(d.user_data, k as u64);
            assert_eq!(ok(&d), want, "case {k} region={use_region}");
            assert_eq!(d.eof, eof, "case {k} region={use_region}");
            let got = if use_region {
                c.region(region).unwrap()[..want].to_vec()
            } else {
                d.buf.unwrap()[..want].to_vec()
            };
            let o = off.min(size as u64) as usize;
            assert_eq!(got, &data[o..o + want], "case {k}");
        }
    }
    // a read that ends exactly at end of file returns everything
    c.submit_read(&f, 0, IoBuf::Vec(vec![0; size]), cg, 99).unwrap();
    let d = c.wait_one(cg, None).unwrap().unwrap();
    assert_eq!(ok(&d), size);
    // blocking reads: short count, then 0
    let mut b = vec![0u8; 3 * thr];
    assert_eq!(c.pread(&f, &mut b, 0).unwrap(), size);
    assert_eq!(&b[..size], &data[..]);
    assert_eq!(c.pread(&f, &mut b, size as u64).unwrap(), 0);
    // zero-length I/O
    c.submit_read(&f, 0, IoBuf::Vec(Vec::new()), cg, 100).unwrap();
    let d = c.wait_one(cg, None).unwrap().unwrap();
    assert_eq!(ok(&d), 0);
}

fn max_io_size_is_enforced(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let max = c.io_bytes_max();
    assert!(max >= 1 << 20);
    let f = c.open("f", OpenOptions::read_write().create(true)).unwrap();
    let cg = c.create_cg().unwrap();
    let s0 = c.stats();
    assert!(matches!(
        c.submit_read(&f, 0, IoBuf::Vec(vec![0; max + 1]), cg, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        c.submit_write(&f, 0, IoBuf::Vec(vec![0; max + 1]), cg, 0),
        Err(Error::InvalidArgument(_))
    ));
    let r = c.alloc_registered(max + 1).unwrap();
    assert!(matches!(
        c.submit_read(&f, 0, IoBuf::Region { region: r, offset: 0, len: max + 1 }, cg, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        c.submit_write(&f, 0, IoBuf::Region { region: r, offset: 0, len: max + 1 }, cg, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(c.outstanding(cg), 0);
    assert_eq!(c.stats().requests, s0.requests, "nothing was sent");
    assert_eq!(std::fs::metadata(srv.dir().join("f")).unwrap().len(), 0);

    // exactly io_bytes_max works, both ways
    let data = pattern(0, max, 6);
    c.region_mut(r).unwrap()[..max].copy_from_slice(&data);
    c.submit_write(&f, 0, IoBuf::Region { region: r, offset: 0, len: max }, cg, 1).unwrap();
    assert_eq!(ok(&c.wait_one(cg, None).unwrap().unwrap()), max);
    c.region_mut(r).unwrap().fill(0);
    c.submit_read(&f, 0, IoBuf::Region { region: r, offset: 1, len: max }, cg, 2).unwrap();
    assert_eq!(ok(&c.wait_one(cg, None).unwrap().unwrap()), max);
    assert!(c.region(r).unwrap()[1..] == data[..]);
    assert!(std::fs::read(srv.dir().join("f")).unwrap() == data);
}

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// The library runs no threads of its own (on either provider). The libtest harness runs tests on threads
/// that come and go, so the measurement runs in a child test process with one test
/// thread, where nothing else starts or stops threads.
fn no_hidden_threads(p: Provider) {
    const PROBE: &str = "DAFS_TEST_THREAD_PROBE";
    let name = if p == Provider::Tcp { "tcp::no_hidden_threads" } else { "shm::no_hidden_threads" };
    if std::env::var_os(PROBE).is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--test-threads=1", "--nocapture"])
            .env(PROBE, "1")
            .output()
            .unwrap();
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "probe failed:\n{text}");
        assert!(text.contains("thread probe ok"), "the probe did not run:\n{text}");
        return;
    }
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("f"), pattern(0, 1 << 20, 7)).unwrap();
    let before = thread_count();
    let during;
    {
        let mut c: Client = srv.client_on(p);
        let thr = c.inline_threshold();
        let f = c.open("f", OpenOptions::read_write()).unwrap();
        let mut b = vec![0u8; 1 << 20];
        c.pread(&f, &mut b, 0).unwrap();
        c.pwrite(&f, &b[..100], 5).unwrap();
        c.pwrite(&f, &b, 0).unwrap();
        let cg = c.create_cg().unwrap();
        let r = c.alloc_registered(4 * thr).unwrap();
        c.submit_read(&f, 0, IoBuf::Region { region: r, offset: 0, len: 4 * thr }, cg, 1).unwrap();
        c.submit_read(&f, 0, IoBuf::Vec(vec![0; 10]), cg, 2).unwrap();
        c.submit_write(&f, 0, IoBuf::Vec(vec![0; 2 * thr]), cg, 3).unwrap();
        assert_eq!(c.wait_all(cg).unwrap().len(), 3);
        c.readdir("").unwrap();
        c.null().unwrap();
        during = thread_count();
        c.close(f).unwrap();
    }
    let after = thread_count();
    assert_eq!(before, during, "the client started threads");
    assert_eq!(before, after);
    println!("thread probe ok: {before} threads before, during and after");
}

fn server_reads_and_writes_race_free_with_many_in_flight(p: Provider) {
    // Many direct writes to different regions of one file in flight at once, then
    // many direct reads: each lands in its own region.
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    let n = 16usize;
    let len = 4 * thr + 3;
    let f = c.open("f", OpenOptions::read_write().create(true)).unwrap();
    let cg = c.create_cg().unwrap();
    let regions: Vec<_> = (0..n)
        .map(|i| {
            let r = c.register(pattern((i * len) as u64, len, 8)).unwrap();
            c.submit_write(
                &f,
                (i * len) as u64,
                IoBuf::Region { region: r, offset: 0, len },
                cg,
                i as u64,
            )
            .unwrap();
            r
        })
        .collect();
    for d in c.wait_all(cg).unwrap() {
        assert_eq!(ok(&d), len);
    }
    assert!(std::fs::read(srv.dir().join("f")).unwrap() == pattern(0, n * len, 8));
    for (i, r) in regions.iter().enumerate() {
        c.region_mut(*r).unwrap().fill(0);
        // read region i from the slice of file belonging to n-1-i
        c.submit_read(
            &f,
            ((n - 1 - i) * len) as u64,
            IoBuf::Region { region: *r, offset: 0, len },
            cg,
            i as u64,
        )
        .unwrap();
    }
    let done = c.wait_all(cg).unwrap();
    assert_eq!(done.len(), n);
    for (i, r) in regions.into_iter().enumerate() {
        let v = c.unregister(r).unwrap().unwrap();
        assert!(v == pattern(((n - 1 - i) * len) as u64, len, 8), "region {i}");
    }
}

/// CLOSE issued after I/O was submitted on the same open file: the I/O was first, so
/// it completes as if the close came after it.
fn close_after_submitted_io(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    let f = c.open("f", OpenOptions::read_write().create(true)).unwrap();
    let cg = c.create_cg().unwrap();
    let r = c.register(pattern(0, 4 * thr, 3)).unwrap();
    c.submit_write(&f, 0, IoBuf::Region { region: r, offset: 0, len: 4 * thr }, cg, 1).unwrap();
    c.submit_write(&f, (4 * thr) as u64, IoBuf::Vec(b"tail".to_vec()), cg, 2).unwrap();
    c.submit_read(&f, 0, IoBuf::Vec(vec![0; 10]), cg, 3).unwrap();
    c.close(f).unwrap();
    let mut done = c.wait_all(cg).unwrap();
    done.sort_by_key(|d| d.user_data);
    assert_eq!(done.len(), 3);
    for d in &done {
        assert!(
            d.result.is_ok(),
            "request {} submitted before CLOSE failed: {:?}",
            d.user_data,
            d.result
        );
    }
    let mut want = pattern(0, 4 * thr, 3);
    want.extend_from_slice(b"tail");
    assert!(std::fs::read(srv.dir().join("f")).unwrap() == want);
}

/// Offsets at the edge of what a file can hold.
fn huge_offsets(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    let f = c.open("f", OpenOptions::read_write().create(true)).unwrap();
    let fbig = |r: dafs_client::Result<usize>| r.unwrap_err().status();
    assert_eq!(fbig(c.pwrite(&f, b"x", i64::MAX as u64)), Some(Status::FBig));
    assert_eq!(fbig(c.pwrite(&f, b"x", u64::MAX)), Some(Status::FBig));
    assert_eq!(fbig(c.pwrite(&f, &vec![1; 2 * thr], i64::MAX as u64 - 10)), Some(Status::FBig));
    let cg = c.create_cg().unwrap();
    for (i, off) in [u64::MAX - 5, i64::MAX as u64 - 2, i64::MAX as u64 + 1].into_iter().enumerate()
    {
        c.submit_write(&f, off, IoBuf::Vec(vec![1; 10]), cg, i as u64).unwrap();
        c.submit_write(&f, off, IoBuf::Vec(vec![1; 2 * thr]), cg, 10 + i as u64).unwrap();
        c.submit_read(&f, off, IoBuf::Vec(vec![0; 10]), cg, 20 + i as u64).unwrap();
        c.submit_read(&f, off, IoBuf::Vec(vec![0; 2 * thr]), cg, 30 + i as u64).unwrap();
    }
    for d in c.wait_all(cg).unwrap() {
        match (d.user_data / 10, &d.result) {
            (0 | 1, Err(e)) => assert!(e.status().is_some(), "write {}: {e:?}", d.user_data),
            (2 | 3, Err(e)) => assert!(e.status().is_some(), "read {}: {e:?}", d.user_data),
            (2 | 3, Ok(0)) => {}
            (_, r) => panic!("request {} at a huge offset: {r:?}", d.user_data),
        }
    }
    assert_eq!(std::fs::metadata(srv.dir().join("f")).unwrap().len(), 0);
    // the session is fine afterwards
    c.pwrite(&f, b"ok", 0).unwrap();
    let mut b = [0u8; 2];
    assert_eq!(c.pread(&f, &mut b, 0).unwrap(), 2);
    // a read far beyond the end (but a valid offset) is simply empty
    assert_eq!(c.pread(&f, &mut b, 1 << 62).unwrap(), 0);
}

/// The server dies with requests in flight: every request completes (with an error),
/// nothing hangs, registered memory is released, later calls fail at once.
fn server_death_fails_in_flight_io(p: Provider) {
    let mut srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    std::fs::write(srv.dir().join("f"), pattern(0, 4 * thr, 1)).unwrap();
    let f = c.open("f", OpenOptions::read_write()).unwrap();
    let cg = c.create_cg().unwrap();
    let r = c.alloc_registered(2 * thr).unwrap();
    let v = c.register(vec![7u8; 2 * thr]).unwrap();
    let pid = srv.pid().unwrap() as libc::pid_t;
    // Stop the server so that nothing submitted now can be answered, then kill it.
    // SAFETY: signals to our own child process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(50));
    c.submit_read(&f, 0, IoBuf::Region { region: r, offset: 0, len: 2 * thr }, cg, 1).unwrap();
    c.submit_write(&f, 0, IoBuf::Region { region: v, offset: 0, len: 2 * thr }, cg, 2).unwrap();
    c.submit_read(&f, 0, IoBuf::Vec(vec![0; 100]), cg, 3).unwrap();
    // (an owned Vec above the threshold would need a registration round trip on shm,
    // which a stopped server cannot answer: keep this one inline)
    c.submit_write(&f, 0, IoBuf::Vec(vec![0; 100]), cg, 4).unwrap();
    assert_eq!(c.outstanding(cg), 4);
    // nothing can complete now: poll returns at once, timed waits time out
    let t = Instant::now();
    assert!(c.poll(cg, 10).unwrap().is_empty());
    assert!(t.elapsed() < Duration::from_millis(500), "poll blocked for {:?}", t.elapsed());
    let t = Instant::now();
    assert!(c.wait_one(cg, Some(Duration::from_millis(200))).unwrap().is_none());
    assert!(c.wait_n(cg, 2, Some(Duration::from_millis(100))).unwrap().is_empty());
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "timed waits took {waited:?}"
    );
    assert_eq!(c.outstanding(cg), 4);
    assert!(matches!(c.region_mut(r), Err(Error::RegionBusy)));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    srv.kill(); // reap
    let t = Instant::now();
    let mut done = Vec::new();
    while done.len() < 4 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "in-flight requests never completed after the server died"
        );
        match c.wait_n(cg, 4, Some(Duration::from_secs(5))) {
            Ok(v) => done.extend(v),
            Err(e) => assert!(matches!(e, Error::Transport(_) | Error::Disconnected), "{e:?}"),
        }
    }
    assert_eq!(c.outstanding(cg), 0);
    let mut uds: Vec<_> = done.iter().map(|d| d.user_data).collect();
    uds.sort();
    assert_eq!(uds, [1, 2, 3, 4]);
    for d in &done {
        assert!(matches!(d.result, Err(Error::Disconnected)), "{}: {:?}", d.user_data, d.result);
        if d.user_data >= 3 {
            assert!(d.buf.is_some(), "owned buffers come back even when the connection died");
        }
    }
    // regions are no longer busy; a registered Vec can still be taken back
    assert!(c.region(r).is_ok());
    assert!(c.region_mut(v).is_ok());
    let back = c.unregister(v);
    assert!(
        matches!(back, Ok(Some(ref b)) if b.len() == 2 * thr),
        "unregister after disconnect: {back:?}"
    );
    let _ = c.unregister(r);
    // later calls fail at once
    let t = Instant::now();
    assert!(matches!(c.null(), Err(Error::Disconnected)));
    assert!(matches!(c.stat("f"), Err(Error::Disconnected)));
    assert!(matches!(
        c.submit_read(&f, 0, IoBuf::Vec(vec![0; 10]), cg, 5),
        Err(Error::Disconnected)
    ));
    let mut b = [0u8; 10];
    assert!(c.pread(&f, &mut b, 0).is_err());
    assert!(c.poll(cg, 10).unwrap_or_default().is_empty());
    assert!(t.elapsed() < Duration::from_secs(2));
}

fn completion_groups_are_bounded(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    make_file(&srv, "f", 100, 9);
    let f = c.open("f", OpenOptions::read()).unwrap();
    let groups: Vec<CgId> = (0..COMPLETION_GROUPS_MAX).map(|_| c.create_cg().unwrap()).collect();
    assert_eq!(groups.iter().collect::<HashSet<_>>().len(), COMPLETION_GROUPS_MAX);
    // one beyond the limit is refused, clearly
    let err = c.create_cg().unwrap_err();
    assert!(matches!(err, Error::TooManyCompletionGroups), "{err:?}");
    assert_eq!(err.errno(), libc::EMFILE);
    // the groups there are still work, and so do the blocking calls (their own group
    // is not the application's to count)
    let last = groups[COMPLETION_GROUPS_MAX - 1];
    c.submit_read(&f, 0, IoBuf::Vec(vec![0; 10]), last, 5).unwrap();
    assert_eq!(ok(&c.wait_all(last).unwrap()[0]), 10);
    let mut b = [0u8; 10];
    assert_eq!(c.pread(&f, &mut b, 0).unwrap(), 10);
    // destroying one makes room for exactly one more
    c.destroy_cg(groups[0]).unwrap();
    let again = c.create_cg().unwrap();
    assert!(!groups[1..].contains(&again), "a new id, not one in use");
    assert!(matches!(c.create_cg(), Err(Error::TooManyCompletionGroups)));
}

fn completion_queue_is_bounded(p: Provider) {
    let srv = TestServer::start(&[]);
    // One slot: a group's queue holds what one request can deliver at most (a batch of
    // batch_max I/Os, one completion each, plus one for the batch).
    let mut c = srv
        .client_with(|cfg| {
            cfg.slots = 1;
            cfg.provider = p;
        })
        .unwrap();
    assert_eq!(c.slots(), 1);
    let cap = c.completions_queued_max();
    assert_eq!(cap, c.batch_max() as usize + 1);
    let data = make_file(&srv, "f", 100, 10);
    let f = c.open("f", OpenOptions::read()).unwrap();
    let cg = c.create_cg().unwrap();

    // Submit and never reap: completions are kept until the queue is full, then the
    // submit is refused (nothing is dropped).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut submitted = 0u64;
    let err = loop {
        assert!(Instant::now() < deadline, "the queue never filled");
        match c.submit_read(&f, 0, IoBuf::Vec(vec![0; 8]), cg, submitted) {
            Ok(_) => submitted += 1,
            Err(Error::WouldBlock) => assert!(c.poll(cg, 0).unwrap().is_empty()),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::CompletionQueueFull), "{err:?}");
    assert_eq!(err.errno(), libc::EAGAIN);
    assert_eq!(submitted as usize, cap);
    let done = c.wait_all(cg).unwrap();
    assert_eq!(done.len(), cap, "every completion kept");
    assert_eq!(done.iter().map(|d| d.user_data).collect::<BTreeSet<_>>().len(), cap);
    for d in &done {
        assert_eq!(d.buf.as_deref().unwrap()[..ok(d)], data[..8]);
    }

    // A batch reserves room for every completion it may deliver: with one place left,
    // a per-I/O batch of two is refused, a per-batch one fits.
    for i in 0..cap - 1 {
        c.submit_read(&f, 0, IoBuf::Vec(vec![0; 8]), cg, i as u64).unwrap();
        while c.outstanding(cg) > 0 {
            assert!(c.poll(cg, 0).unwrap().is_empty());
        }
    }
    let r = c.alloc_registered(16).unwrap();
    let ios = || {
        (0..2u64)
            .map(|i| BatchIoDesc {
                write: false,
                file: vec![(i * 8, 8)],
                mem: vec![(r, i as usize * 8, 8)],
                user_data: 100 + i,
            })
            .collect::<Vec<_>>()
    };
    assert!(matches!(
        c.submit_batch(&f, ios(), cg, 7, BatchCompletion::PerIo),
        Err(Error::CompletionQueueFull)
    ));
    assert!(matches!(
        c.submit_batch(&f, ios(), cg, 7, BatchCompletion::ErrorsOnly),
        Err(Error::CompletionQueueFull)
    ));
    c.submit_batch(&f, ios(), cg, 7, BatchCompletion::PerBatch).unwrap();
    let done = c.wait_all(cg).unwrap();
    assert_eq!(done.len(), cap);
    assert_eq!(done.last().map(|d| (d.user_data, ok(d))), Some((7, 16)));
    assert_eq!(c.region(r).unwrap(), &data[..16]);
    // reaped: room again
    c.submit_batch(&f, ios(), cg, 7, BatchCompletion::PerIo).unwrap();
    assert_eq!(c.wait_all(cg).unwrap().len(), 2);
}

for_each_provider!(
    registered_memory,
    submit_paths_and_counters,
    completion_groups,
    slots_are_credits_and_submit_never_blocks,
    eof_semantics,
    max_io_size_is_enforced,
    no_hidden_threads,
    server_reads_and_writes_race_free_with_many_in_flight,
    server_death_fails_in_flight_io,
    close_after_submitted_io,
    huge_offsets,
    completion_groups_are_bounded,
    completion_queue_is_bounded
);
