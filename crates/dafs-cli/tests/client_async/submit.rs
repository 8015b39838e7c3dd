//! Registered memory and the submit paths (inline/direct, region/Vec) with their counters.

use super::*;

pub(crate) fn registered_memory(p: Provider) {
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

pub(crate) fn submit_paths_and_counters(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    assert!(thr > 0 && thr < c.io_bytes_max());
    let big = 3 * thr + 5;
    // Memory the application did not register stays inline up to this (>= thr).
    let unreg = c.inline_threshold_unregistered();
    assert!(unreg >= thr && unreg < c.io_bytes_max());
    let data = make_file(&srv, "src", 4 * unreg.max(big), 2);
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

    // 4b. Vec above the threshold but within the unregistered one (shm: 2 KiB vs
    // 16 KiB): inline, no registration round trip for memory the library never saw.
    if unreg > thr {
        let n = thr + 1;
        c.submit_read(&src, 3, IoBuf::Vec(vec![0; n]), cg, 4).unwrap();
        let d = c.wait_all(cg).unwrap();
        assert_eq!(d[0].buf.as_deref().unwrap(), &data[3..3 + n]);
        let s = c.stats();
        assert_eq!(
            (s.inline_reads, s.direct_reads, s.off_direct_path),
            (s4.inline_reads + 1, s4.direct_reads, s4.off_direct_path)
        );
    }
    let s4 = c.stats();

    // 5. Vec, above the unregistered threshold: direct, counted off the direct path
    let big_vec = unreg + 5;
    assert!(9 + big_vec <= data.len());
    c.submit_read(&src, 9, IoBuf::Vec(vec![0; big_vec]), cg, 5).unwrap();
    let d = c.wait_all(cg).unwrap();
    assert_eq!(ok(&d[0]), big_vec);
    assert_eq!(d[0].buf.as_deref().unwrap(), &data[9..9 + big_vec]);
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
    // The last write (a Vec) must exceed the unregistered threshold.
    let wdata = pattern(0, 50 + big + 30 + unreg + 7, 3);
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

    let rest = wdata.len() - tail - 30;
    assert!(rest > unreg);
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
    assert_eq!(s9.requests, s0.requests + 9 + u64::from(unreg > thr));

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
