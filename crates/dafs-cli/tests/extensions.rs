//! The DAFS semantics beyond NFS, against a real dafsd: batch I/O, request chaining,
//! cache hints, byte-range locks, extended open modes and named attributes — over both
//! providers where the data path matters, with multi-client conflicts and bad input.

mod common;

use std::time::{Duration, Instant};

use common::{pattern, TestServer};
use dafs_client::dafs_proto::types::{cache_hint, nattr_flags, CHAIN_LEN_MAX};
use dafs_client::dafs_proto::{Request, Status};
use dafs_client::{
    BatchCompletion, BatchIoDesc, Chain, ChainReply, Client, Error, IoBuf, OpenOptions, Provider,
};

fn status(e: Error) -> Status {
    e.status().unwrap_or_else(|| panic!("expected a server status, got {e:?}"))
}

fn both(f: impl Fn(&TestServer, Provider)) {
    let srv = TestServer::start(&[]);
    f(&srv, Provider::Tcp);
    f(&srv, Provider::Auto);
}

// ------------------------------------------------------------------------ batch I/O

#[test]
fn batch_gather_scatter_reads_and_writes() {
    both(|srv, p| {
        let name = format!("batch-{p:?}");
        let content = pattern(0, 1 << 20, 3);
        std::fs::write(srv.dir().join(&name), &content).unwrap();
        let mut c = srv.client_on(p);
        let f = c.open(&name, OpenOptions::read_write()).unwrap();
        let r = c.alloc_registered(256 * 1024).unwrap();
        c.region_mut(r).unwrap().fill(0xAA);
        let cg = c.create_cg().unwrap();
        let ios = vec![
            // Gather: two file ranges into one buffer range.
            BatchIoDesc {
                write: false,
                file: vec![(0, 4096), (500_000, 60_000)],
                mem: vec![(r, 0, 64_096)],
                user_data: 10,
            },
            // Scatter: one file range into two buffer pieces.
            BatchIoDesc {
                write: false,
                file: vec![(100_000, 30_000)],
                mem: vec![(r, 100_000, 10_000), (r, 200_000, 20_000)],
                user_data: 11,
            },
            // A read that runs past the end of file is short, not an error.
            BatchIoDesc {
                write: false,
                file: vec![((1 << 20) - 100, 1000)],
                mem: vec![(r, 230_000, 1000)],
                user_data: 12,
            },
        ];
        c.submit_batch(&f, ios, cg, 0, BatchCompletion::PerIo).unwrap();
        let mut done = c.wait_all(cg).unwrap();
        done.sort_by_key(|d| d.user_data);
        let counts: Vec<usize> = done.iter().map(|d| *d.result.as_ref().unwrap()).collect();
        assert_eq!(counts, vec![64_096, 30_000, 100]);
        let m = c.region(r).unwrap().to_vec();
        assert_eq!(&m[..4096], &content[..4096]);
        assert_eq!(&m[4096..64_096], &content[500_000..560_000]);
        assert_eq!(&m[100_000..110_000], &content[100_000..110_000]);
        assert_eq!(&m[200_000..220_000], &content[110_000..130_000]);
        assert_eq!(&m[230_000..230_100], &content[(1 << 20) - 100..]);
        assert!(m[64_096..100_000].iter().all(|&b| b == 0xAA), "gaps untouched");
        assert!(m[110_000..200_000].iter().all(|&b| b == 0xAA));

        // Writes: scatter one buffer range to two file ranges, one completion per batch.
        let w = c.alloc_registered(8192).unwrap();
        c.region_mut(w).unwrap().copy_from_slice(&pattern(7, 8192, 9));
        let ios = vec![
            BatchIoDesc {
                write: true,
                file: vec![(10, 3000), (900_000, 5192)],
                mem: vec![(w, 0, 8192)],
                user_data: 1,
            },
            BatchIoDesc {
                write: true,
                file: vec![(2_000_000, 100)],
                mem: vec![(w, 0, 100)],
                user_data: 2,
            },
        ];
        c.submit_batch(&f, ios, cg, 77, BatchCompletion::PerBatch).unwrap();
        let done = c.wait_all(cg).unwrap();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].user_data, 77);
        assert_eq!(*done[0].result.as_ref().unwrap(), 8192 + 100);
        let disk = std::fs::read(srv.dir().join(&name)).unwrap();
        let src = pattern(7, 8192, 9);
        assert_eq!(&disk[10..3010], &src[..3000]);
        assert_eq!(&disk[900_000..905_192], &src[3000..]);
        assert_eq!(&disk[2_000_000..2_000_100], &src[..100]);
        assert_eq!(disk.len(), 2_000_100);
        c.close(f).unwrap();
    });
}

#[test]
fn batch_errors_only_and_bad_input() {
    both(|srv, p| {
        let name = format!("berr-{p:?}");
        std::fs::write(srv.dir().join(&name), vec![1u8; 100_000]).unwrap();
        let mut c = srv.client_on(p);
        let f = c.open(&name, OpenOptions::read()).unwrap();
        let r = c.alloc_registered(65536).unwrap();
        let cg = c.create_cg().unwrap();
        // Errors only: the write fails (read-only open), the reads succeed.
        let ios = vec![
            BatchIoDesc {
                write: false,
                file: vec![(0, 100)],
                mem: vec![(r, 0, 100)],
                user_data: 1,
            },
            BatchIoDesc { write: true, file: vec![(0, 100)], mem: vec![(r, 0, 100)], user_data: 2 },
            BatchIoDesc {
                write: false,
                file: vec![(100, 100)],
                mem: vec![(r, 100, 100)],
                user_data: 3,
            },
        ];
        c.submit_batch(&f, ios, cg, 99, BatchCompletion::ErrorsOnly).unwrap();
        let done = c.wait_all(cg).unwrap();
        assert_eq!(done.len(), 2, "one failed I/O, then the batch");
        assert_eq!(done[0].user_data, 2);
        assert_eq!(done[0].result.as_ref().unwrap_err().status(), Some(Status::OpenMode));
        assert_eq!(done[1].user_data, 99);
        assert!(done[1].result.is_err());
        // Too many I/Os.
        let many: Vec<BatchIoDesc> = (0..c.batch_max() + 1)
            .map(|i| BatchIoDesc {
                write: false,
                file: vec![(0, 1)],
                mem: vec![(r, 0, 1)],
                user_data: i as u64,
            })
            .collect();
        assert_eq!(
            status(c.submit_batch(&f, many, cg, 0, BatchCompletion::PerBatch).unwrap_err()),
            Status::TooMany
        );
        // Mismatched lengths and ranges outside the region are refused before sending.
        let bad = vec![BatchIoDesc {
            write: false,
            file: vec![(0, 10)],
            mem: vec![(r, 0, 11)],
            user_data: 0,
        }];
        assert!(matches!(
            c.submit_batch(&f, bad, cg, 0, BatchCompletion::PerBatch),
            Err(Error::InvalidArgument(_))
        ));
        let bad = vec![BatchIoDesc {
            write: false,
            file: vec![(0, 10)],
            mem: vec![(r, 65530, 10)],
            user_data: 0,
        }];
        assert!(matches!(
            c.submit_batch(&f, bad, cg, 0, BatchCompletion::PerBatch),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(c.outstanding(cg), 0);
        // The region is usable again (no pin leaked).
        assert!(c.region_mut(r).is_ok());
    });
}

// ------------------------------------------------------------------------ chaining

#[test]
fn chains_open_and_read_and_create_and_write() {
    both(|srv, p| {
        let mut c = srv.client_on(p);
        std::fs::create_dir_all(srv.dir().join("d")).unwrap();
        let content = pattern(0, 5000, 1);
        std::fs::write(srv.dir().join("d/in"), &content).unwrap();
        let before = c.stats().requests;
        let (f, data, eof) = c.open_and_read("d/in", 10_000).unwrap();
        assert_eq!(c.stats().requests, before + 1, "one round trip");
        assert_eq!(data, content);
        assert!(eof);
        // The file is open: a further read works.
        let mut b = [0u8; 10];
        c.pread(&f, &mut b, 100).unwrap();
        assert_eq!(&b, &content[100..110]);
        c.close(f).unwrap();

        let name = format!("d/out-{p:?}");
        let before = c.stats().requests;
        c.create_and_write(&name, b"chained write", 0o600).unwrap();
        assert_eq!(c.stats().requests, before + 1);
        assert_eq!(std::fs::read(srv.dir().join(&name)).unwrap(), b"chained write");
        // At the export root too (no LOOKUP element).
        c.create_and_write(&format!("top-{p:?}"), b"x", 0o644).unwrap();
        assert_eq!(std::fs::read(srv.dir().join(format!("top-{p:?}"))).unwrap(), b"x");
    });
}

#[test]
fn chain_stops_at_the_first_error_and_reports_it() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    std::fs::write(srv.dir().join("f"), b"abc").unwrap();
    let root = c.root_handle();
    let chain = Chain::new()
        .lookup(root, "f")
        .getattr(Chain::CURRENT)
        .lookup(root, "missing")
        .getattr(Chain::CURRENT);
    let out = c.run_chain(&chain).unwrap();
    assert_eq!(out.replies.len(), 2);
    assert!(matches!(out.replies[1], ChainReply::Attr(a) if a.size == 3));
    let (i, e) = out.failed.unwrap();
    assert_eq!(i, 2);
    assert_eq!(status(e), Status::NoEnt);
    // CURRENT before anything set it.
    let out = c.run_chain(&Chain::new().getattr(Chain::CURRENT)).unwrap();
    assert_eq!(status(out.failed.unwrap().1), Status::BadHandle);
    // Too long.
    let mut long = Chain::new();
    for _ in 0..=CHAIN_LEN_MAX {
        long = long.getattr(root);
    }
    assert_eq!(status(c.run_chain(&long).unwrap_err()), Status::TooMany);
    // Not chainable: a session op inside a chain.
    let out = c.run_chain(&Chain::new().getattr(root).push(&Request::SessionDestroy)).unwrap();
    assert_eq!(out.failed.map(|(i, e)| (i, status(e))), Some((1, Status::NotChainable)));
    // The session is intact.
    assert_eq!(c.stat("f").unwrap().size, 3);
}

// ------------------------------------------------------------------------ cache hints

#[test]
fn cache_hints_are_applied_and_checked() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    std::fs::write(srv.dir().join("h"), vec![0u8; 1 << 20]).unwrap();
    let f = c.open("h", OpenOptions::read()).unwrap();
    for hint in [
        cache_hint::NORMAL,
        cache_hint::SEQUENTIAL,
        cache_hint::RANDOM,
        cache_hint::WILL_NEED,
        cache_hint::DONT_NEED,
        cache_hint::NO_REUSE,
    ] {
        c.cache_hint(&f, 0, 0, hint).unwrap();
        c.cache_hint(&f, 4096, 65536, hint).unwrap();
    }
    let m = c
        .raw_call(&Request::CacheHint { open_id: 999, offset: 0, len: 0, hint: cache_hint::RANDOM })
        .unwrap();
    assert_eq!(
        dafs_client::dafs_proto::decode_reply(&m, 1 << 22).unwrap().0.status,
        Status::BadOpenId
    );
    let m = c
        .raw_call(&Request::CacheHint { open_id: f.open_id(), offset: 0, len: 0, hint: 77 })
        .unwrap();
    assert_eq!(
        dafs_client::dafs_proto::decode_reply(&m, 1 << 22).unwrap().0.status,
        Status::BadXdr
    );
}

// ------------------------------------------------------------------------ locks

#[test]
fn locks_conflict_between_clients_and_die_with_sessions() {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("l"), b"data").unwrap();
    let mut a = srv.client_tcp();
    let mut b = srv.client_on(Provider::Auto);
    let fa = a.open("l", OpenOptions::read_write()).unwrap();
    let fb = b.open("l", OpenOptions::read_write()).unwrap();
    a.lock(&fa, 0, 100, false).unwrap();
    b.lock(&fb, 50, 100, false).unwrap(); // shared + shared
    assert_eq!(status(b.lock(&fb, 90, 20, true).unwrap_err()), Status::Denied);
    b.lock(&fb, 100, 10, true).unwrap(); // adjacent, not overlapping
    let t = a.test_lock(&fa, 105, 1, false).unwrap().expect("conflict");
    assert!(t.exclusive);
    assert_eq!((t.offset, t.len), (100, 10));
    assert!(a.test_lock(&fa, 0, 10, true).unwrap().is_none(), "own locks never conflict");
    // Upgrade part of a's shared lock, then overlapping unlocks split it.
    b.unlock(&fb, 0, 0).unwrap();
    a.lock(&fa, 20, 10, true).unwrap();
    a.unlock(&fa, 0, 25).unwrap();
    a.unlock(&fa, 90, 5).unwrap();
    assert!(b.test_lock(&fb, 0, 20, true).unwrap().is_none(), "[0,25) was unlocked");
    assert!(b.test_lock(&fb, 25, 5, false).unwrap().is_some(), "[25,30) still exclusive");
    assert!(b.test_lock(&fb, 92, 1, true).unwrap().is_none(), "[90,95) unlocked");
    assert!(b.test_lock(&fb, 96, 1, true).unwrap().is_some(), "[95,100) still shared");
    // 64-bit ranges: to the end, and at the very top.
    a.lock(&fa, u64::MAX - 10, 0, true).unwrap();
    assert_eq!(status(b.lock(&fb, u64::MAX - 1, 1, false).unwrap_err()), Status::Denied);
    assert_eq!(
        status(b.lock(&fb, u64::MAX, 5, false).unwrap_err()),
        Status::Inval,
        "overflowing range"
    );
    // Blocking: b waits while a holds, gets it when a's session ends.
    let srv_addr = srv.addr();
    let waiter = std::thread::spawn(move || {
        let mut b2 = Client::connect(
            &srv_addr,
            dafs_client::ClientConfig { provider: Provider::Tcp, ..Default::default() },
        )
        .unwrap();
        let f = b2.open("l", OpenOptions::read_write()).unwrap();
        let t = Instant::now();
        b2.lock_wait(&f, 25, 1, true, Duration::from_secs(10)).unwrap();
        t.elapsed()
    });
    std::thread::sleep(Duration::from_millis(300));
    drop(a); // session ends: its locks die
    let waited = waiter.join().unwrap();
    assert!(waited >= Duration::from_millis(200), "waited {waited:?}");
    // A lock that never frees: timed out.
    b.lock(&fb, 1000, 10, true).unwrap();
    let mut c = srv.client();
    let fc = c.open("l", OpenOptions::read()).unwrap();
    assert!(matches!(
        c.lock_wait(&fc, 1000, 1, false, Duration::from_millis(100)),
        Err(Error::TimedOut)
    ));
    // Locks on a directory are refused.
    let (dh, _) = c.lookup("").unwrap();
    let m = c.raw_call(&Request::Lock { fh: dh, offset: 0, len: 1, ltype: 1, flags: 0 }).unwrap();
    assert_eq!(dafs_client::dafs_proto::decode_reply(&m, 1 << 22).unwrap().0.status, Status::IsDir);
}

#[test]
fn a_dropped_clients_locks_are_free_when_drop_returns() {
    // Like close(2): once the holder has disconnected, another session takes the lock at
    // once (no retry). The server used to answer SESSION_DESTROY before releasing, and
    // the client did not wait for the answer, so this raced (C test locks_two_sessions).
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("dl"), b"data").unwrap();
    let mut b = srv.client_tcp();
    let fb = b.open("dl", OpenOptions::read_write()).unwrap();
    for i in 0..100 {
        let p = if i % 2 == 0 { Provider::Tcp } else { Provider::Auto };
        let mut a = srv.client_on(p);
        let fa = a.open("dl", OpenOptions::read_write()).unwrap();
        a.lock(&fa, 0, 10, true).unwrap();
        assert_eq!(status(b.lock(&fb, 0, 1, true).unwrap_err()), Status::Denied);
        drop(a);
        b.lock(&fb, 0, 10, true).unwrap_or_else(|e| panic!("round {i} over {p:?}: {e}"));
        b.unlock(&fb, 0, 0).unwrap();
    }
}

// ------------------------------------------------------------------------ open modes

#[test]
fn atomic_append_across_clients() {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("log"), b"").unwrap();
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let addr = srv.addr();
            let provider = if t % 2 == 0 { Provider::Tcp } else { Provider::Auto };
            std::thread::spawn(move || {
                let mut c = Client::connect(
                    &addr,
                    dafs_client::ClientConfig { provider, ..Default::default() },
                )
                .unwrap();
                let f = c.open("log", OpenOptions::write_only().append(true)).unwrap();
                let mut offs = Vec::new();
                for i in 0..50u32 {
                    // Records of different sizes, some above the inline threshold.
                    let len = if i % 10 == 0 { 40_000 } else { 100 + i as usize };
                    let rec = vec![b'a' + t; len];
                    offs.push((c.append(&f, &rec).unwrap(), len));
                }
                offs
            })
        })
        .collect();
    let mut all: Vec<(u64, usize, u8)> = Vec::new();
    for (t, h) in threads.into_iter().enumerate() {
        all.extend(h.join().unwrap().into_iter().map(|(o, l)| (o, l, b'a' + t as u8)));
    }
    all.sort();
    let disk = std::fs::read(srv.dir().join("log")).unwrap();
    let mut expect = 0u64;
    for (off, len, byte) in &all {
        assert_eq!(*off, expect, "records are contiguous and never overlap");
        assert!(
            disk[*off as usize..*off as usize + len].iter().all(|b| b == byte),
            "record intact"
        );
        expect += *len as u64;
    }
    assert_eq!(disk.len() as u64, expect);
}

#[test]
fn create_unlinked_commit_and_abort() {
    both(|srv, p| {
        let mut c = srv.client_on(p);
        let name = format!("tmp-{p:?}");
        let f = c.open(&name, OpenOptions::read_write().unlinked(true)).unwrap();
        c.pwrite(&f, b"staged", 0).unwrap();
        assert!(!srv.dir().join(&name).exists(), "invisible before publish");
        let attr = c.publish(&f).unwrap();
        assert_eq!(attr.size, 6);
        assert_eq!(std::fs::read(srv.dir().join(&name)).unwrap(), b"staged");
        c.close(f).unwrap();
        // Abort: close without publishing.
        let aborted = format!("abort-{p:?}");
        let f = c.open(&aborted, OpenOptions::read_write().unlinked(true)).unwrap();
        c.pwrite(&f, b"nope", 0).unwrap();
        c.close(f).unwrap();
        assert!(!srv.dir().join(&aborted).exists());
        // Session ends before publishing: nothing appears.
        let gone = format!("gone-{p:?}");
        {
            let mut c2 = srv.client_on(p);
            let f = c2.open(&gone, OpenOptions::read_write().unlinked(true)).unwrap();
            c2.pwrite(&f, b"x", 0).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        assert!(!srv.dir().join(&gone).exists());
        // Publishing over an existing name fails; publishing twice fails.
        let f = c.open(&name, OpenOptions::read_write().unlinked(true)).unwrap();
        assert_eq!(status(c.publish(&f).unwrap_err()), Status::Exist);
        c.close(f).unwrap();
        let plain = c.open(&name, OpenOptions::read()).unwrap();
        assert_eq!(
            status(c.publish(&plain).unwrap_err()),
            Status::Inval,
            "not a create-unlinked open"
        );
        c.close(plain).unwrap();
        assert_eq!(std::fs::read(srv.dir().join(&name)).unwrap(), b"staged");
    });
}

#[test]
fn delete_on_last_close_across_clients() {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("doc"), b"temp").unwrap();
    let mut a = srv.client_tcp();
    let mut b = srv.client_on(Provider::Auto);
    let fa = a.open("doc", OpenOptions::read().delete_on_close(true)).unwrap();
    let fb = b.open("doc", OpenOptions::read()).unwrap();
    a.close(fa).unwrap();
    assert!(srv.dir().join("doc").exists(), "b still has it open");
    let mut buf = [0u8; 4];
    assert_eq!(b.pread(&fb, &mut buf, 0).unwrap(), 4);
    b.close(fb).unwrap();
    assert!(!srv.dir().join("doc").exists(), "removed at the last close");
    // Also when the last opener's session simply ends.
    std::fs::write(srv.dir().join("doc2"), b"temp").unwrap();
    {
        let mut c = srv.client();
        let _f = c.open("doc2", OpenOptions::read().delete_on_close(true)).unwrap();
    }
    let t = Instant::now();
    while srv.dir().join("doc2").exists() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!srv.dir().join("doc2").exists());
    // A name replaced meanwhile is not deleted (it is another file now).
    std::fs::write(srv.dir().join("doc3"), b"old").unwrap();
    let f = a.open("doc3", OpenOptions::read().delete_on_close(true)).unwrap();
    std::fs::remove_file(srv.dir().join("doc3")).unwrap();
    std::fs::write(srv.dir().join("doc3"), b"new").unwrap();
    a.close(f).unwrap();
    assert_eq!(std::fs::read(srv.dir().join("doc3")).unwrap(), b"new");
}

#[test]
fn open_with_key_and_share_reservations() {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("db"), b"payload").unwrap();
    let mut a = srv.client_tcp();
    let mut b = srv.client_on(Provider::Auto);
    let fa = a.open("db", OpenOptions::read_write().key(b"odm-identity-1")).unwrap();
    assert_eq!(status(b.open("db", OpenOptions::read()).unwrap_err()), Status::BadKey, "no key");
    assert_eq!(
        status(b.open("db", OpenOptions::read().key(b"wrong")).unwrap_err()),
        Status::BadKey
    );
    let fb = b.open("db", OpenOptions::read().key(b"odm-identity-1")).unwrap();
    a.close(fa).unwrap();
    b.close(fb).unwrap();
    // All closed: the key is gone, a new first opener sets a new one.
    let f = b.open("db", OpenOptions::read().key(b"k2")).unwrap();
    assert_eq!(
        status(a.open("db", OpenOptions::read().key(b"odm-identity-1")).unwrap_err()),
        Status::BadKey
    );
    b.close(f).unwrap();

    // Share reservations.
    let w = a.open("db", OpenOptions::read_write().deny_write(true)).unwrap();
    assert_eq!(status(b.open("db", OpenOptions::write_only()).unwrap_err()), Status::ShareDenied);
    // A refused open has no effect: truncation is applied only once admitted.
    assert_eq!(
        status(b.open("db", OpenOptions::write_only().truncate(true)).unwrap_err()),
        Status::ShareDenied
    );
    assert_eq!(std::fs::read(srv.dir().join("db")).unwrap(), b"payload");
    // Keys longer than 64 bytes are refused by the client.
    assert!(matches!(
        b.open("db", OpenOptions::read().key(&[1u8; 65])),
        Err(Error::InvalidArgument(_))
    ));
    let r = b.open("db", OpenOptions::read()).unwrap();
    assert_eq!(
        status(b.open("db", OpenOptions::read().deny_read(true)).unwrap_err()),
        Status::ShareDenied,
        "a reads already"
    );
    b.close(r).unwrap();
    a.close(w).unwrap();
    let dr = a.open("db", OpenOptions::read().deny_read(true)).unwrap();
    assert_eq!(status(b.open("db", OpenOptions::read()).unwrap_err()), Status::ShareDenied);
    drop(a); // reservation dies with the session
    let _ = dr;
    std::thread::sleep(Duration::from_millis(100));
    b.open("db", OpenOptions::read()).unwrap();
}

// ------------------------------------------------------------------------ named attributes

#[test]
fn named_attributes() {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("n"), b"x").unwrap();
    let mut c = srv.client();
    match c.set_nattr("n", "color", b"blue", 0) {
        Err(e) if e.status() == Some(Status::NotSupp) => {
            eprintln!("exported file system has no user xattrs: NOTSUPP is the documented answer");
            return;
        }
        r => r.unwrap(),
    }
    assert_eq!(c.get_nattr("n", "color").unwrap(), b"blue");
    c.set_nattr("n", "size", &[7u8; 1000], nattr_flags::CREATE).unwrap();
    let mut names = c.list_nattr("n").unwrap();
    names.sort();
    assert_eq!(names, vec!["color".to_string(), "size".to_string()]);
    assert_eq!(
        status(c.set_nattr("n", "color", b"red", nattr_flags::CREATE).unwrap_err()),
        Status::Exist
    );
    assert_eq!(
        status(c.set_nattr("n", "nope", b"red", nattr_flags::REPLACE).unwrap_err()),
        Status::NoAttr
    );
    c.set_nattr("n", "color", b"red", nattr_flags::REPLACE).unwrap();
    assert_eq!(c.get_nattr("n", "color").unwrap(), b"red");
    c.remove_nattr("n", "color").unwrap();
    assert_eq!(status(c.get_nattr("n", "color").unwrap_err()), Status::NoAttr);
    assert_eq!(status(c.remove_nattr("n", "color").unwrap_err()), Status::NoAttr);
    // Visible as user.* xattrs on the server's file.
    let out = std::process::Command::new("getfattr")
        .args(["-n", "user.size", "--only-values"])
        .arg(srv.dir().join("n"))
        .output();
    if let Ok(o) = out {
        if o.status.success() {
            assert_eq!(o.stdout.len(), 1000);
        }
    }
    // Bad names are malformed requests.
    assert_eq!(status(c.get_nattr("n", "").unwrap_err()), Status::BadXdr);
    assert_eq!(status(c.get_nattr("n", "a b").unwrap_err()), Status::BadXdr);
}

#[test]
fn async_io_still_reports_write_offsets() {
    // WRITE replies now carry the offset written at: plain opens echo the request's.
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let f = c.open("o", OpenOptions::read_write().create(true)).unwrap();
    let cg = c.create_cg().unwrap();
    c.submit_write(&f, 12345, IoBuf::Vec(vec![1; 10]), cg, 0).unwrap();
    assert_eq!(c.wait_one(cg, None).unwrap().unwrap().result.unwrap(), 10);
    assert_eq!(std::fs::metadata(srv.dir().join("o")).unwrap().len(), 12355);
}
