//! Completion groups, slots as credits (submit never blocks), and the bounds on
//! completion groups and completion queues.

use super::*;

pub(crate) fn completion_groups(p: Provider) {
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

pub(crate) fn slots_are_credits_and_submit_never_blocks(p: Provider) {
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

pub(crate) fn completion_groups_are_bounded(p: Provider) {
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

pub(crate) fn completion_queue_is_bounded(p: Provider) {
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
