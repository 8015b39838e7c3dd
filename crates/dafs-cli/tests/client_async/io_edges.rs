//! EOF, the maximum I/O size, no hidden threads, many I/Os in flight, CLOSE after
//! submitted I/O, huge offsets, and the server dying with I/O in flight.

use super::*;

pub(crate) fn eof_semantics(p: Provider) {
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

pub(crate) fn max_io_size_is_enforced(p: Provider) {
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
pub(crate) fn no_hidden_threads(p: Provider) {
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

pub(crate) fn server_reads_and_writes_race_free_with_many_in_flight(p: Provider) {
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
pub(crate) fn close_after_submitted_io(p: Provider) {
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
pub(crate) fn huge_offsets(p: Provider) {
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
pub(crate) fn server_death_fails_in_flight_io(p: Provider) {
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
