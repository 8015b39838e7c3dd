//! What the server guarantees one client against others and against bad handles and paths:
//! stale and forged handles, escapes from the export, server limits, evicted and recycled
//! handles, read-only exports, authentication, two clients sharing files, a clean stop.

#[macro_use]
mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::{pattern, raw_status, status, Provider, TestServer};
use dafs_client::dafs_proto::types::access_mask;
use dafs_client::dafs_proto::{self, FileHandle, FileType, Reply, Request, Status};
use dafs_client::{ClientConfig, Error, OpenOptions};

#[test]
fn stale_and_bad_handles() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::write(d.join("doomed"), b"x").unwrap();
    std::fs::create_dir(d.join("ddir")).unwrap();

    let (fh, _) = c.lookup("doomed").unwrap();
    assert!(c.getattr(fh).is_ok());
    std::fs::remove_file(d.join("doomed")).unwrap();
    assert_eq!(status(c.getattr(fh)), Status::Stale);
    assert_eq!(
        status(c.setattr(fh, dafs_proto::SetAttrs { mask: 1, mode: 0o600, ..Default::default() })),
        Status::Stale
    );

    let (dh, _) = c.lookup("ddir").unwrap();
    std::fs::remove_dir(d.join("ddir")).unwrap();
    assert_eq!(status(c.getattr(dh)), Status::Stale);
    assert_eq!(status(c.readdir_page(dh, 0, 10)), Status::Stale);
    assert_eq!(status(c.lookup_parent(dh)), Status::Stale);

    std::fs::write(d.join("doomed"), b"y").unwrap();
    // removing through the client also makes the handle stale
    let (fh3, _) = c.lookup("doomed").unwrap();
    c.remove("doomed").unwrap();
    assert_eq!(status(c.getattr(fh3)), Status::Stale);

    // invented handles
    assert_eq!(status(c.getattr(FileHandle([7; FileHandle::LEN]))), Status::BadHandle);
    assert_eq!(status(c.getattr(FileHandle([0; FileHandle::LEN]))), Status::BadHandle);
    assert_eq!(status(c.readdir_page(FileHandle([7; FileHandle::LEN]), 0, 10)), Status::BadHandle);
    // a corrupted real handle
    let mut bad = c.root_handle();
    bad.0[9] ^= 0x40;
    assert_eq!(status(c.getattr(bad)), Status::BadHandle);

    // handles from another server instance are stale, not someone else's file
    let other = TestServer::start(&[]);
    let mut c2 = other.client();
    std::fs::write(other.dir().join("z"), b"").unwrap();
    let (zfh, _) = c2.lookup("z").unwrap();
    assert_eq!(status(c.getattr(zfh)), Status::Stale);
    assert_eq!(status(c.getattr(c2.root_handle())), Status::Stale);
    c.null().unwrap();
}

#[test]
fn path_escapes_are_refused() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/ok"), b"ok").unwrap();
    std::os::unix::fs::symlink("/etc", d.join("abs")).unwrap();
    std::os::unix::fs::symlink("../../", d.join("up")).unwrap();
    std::os::unix::fs::symlink("../..", d.join("sub/up2")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", d.join("pw")).unwrap();
    // a secret next to the export, reachable only by escaping
    std::fs::write(d.parent().unwrap().join("outside"), b"secret").unwrap();
    std::os::unix::fs::symlink("../outside", d.join("sneaky")).unwrap();

    for p in [
        "../etc/passwd",
        "..",
        "../",
        "sub/../../etc/passwd",
        "abs/passwd",
        "abs",
        "up/etc/passwd",
        "up",
        "sub/up2",
        "pw",
        "sneaky",
        "/../outside",
    ] {
        let e = c.stat(p).unwrap_err();
        assert_eq!(e.status(), Some(Status::Escape), "stat({p:?}): {e:?}");
        let e = c.open(p, OpenOptions::read()).unwrap_err();
        assert_eq!(e.status(), Some(Status::Escape), "open({p:?}): {e:?}");
    }
    // creating through an escaping directory
    for p in ["abs/dafs-test-file", "../dafs-test-file", "up/dafs-test-file"] {
        let e = c.open(p, OpenOptions::read_write().create(true)).unwrap_err();
        assert_eq!(e.status(), Some(Status::Escape), "create({p:?}): {e:?}");
        let e = c.mkdir(p, 0o755).unwrap_err();
        assert_eq!(e.status(), Some(Status::Escape), "mkdir({p:?}): {e:?}");
    }
    // a final symlink pointing outside: creating "through" it must not create the target
    let target = d.parent().unwrap().join("created-through-link");
    std::os::unix::fs::symlink(&target, d.join("evil")).unwrap();
    std::os::unix::fs::symlink("../created-through-link-rel", d.join("evil-rel")).unwrap();
    for p in ["evil", "evil-rel"] {
        let e = c.open(p, OpenOptions::read_write().create(true)).unwrap_err();
        assert_eq!(e.status(), Some(Status::Escape), "create through {p}: {e:?}");
        let e = c.open(p, OpenOptions::read_write().create(true).truncate(true)).unwrap_err();
        assert_eq!(e.status(), Some(Status::Escape), "create+truncate through {p}: {e:?}");
        // exclusive create refuses the existing link name itself
        assert_eq!(status(c.open(p, OpenOptions::read_write().exclusive(true))), Status::Exist);
        let st = status(c.create_file(p, 0o644, false));
        assert!(
            matches!(st, Status::Loop | Status::Escape | Status::Exist),
            "create_file over link {p}: {st:?}"
        );
    }
    assert!(!target.exists());
    assert!(!d.parent().unwrap().join("created-through-link-rel").exists());
    // truncate / chmod / set_times through a link to the outside
    assert_eq!(status(c.truncate("sneaky", 0)), Status::Escape);
    assert_eq!(status(c.chmod("sneaky", 0o777)), Status::Escape);
    assert_eq!(status(c.set_times("sneaky", 0, 0)), Status::Escape);
    assert!(!std::path::Path::new("/etc/dafs-test-file").exists());
    assert!(!d.parent().unwrap().join("dafs-test-file").exists());
    // absolute paths sent raw (the library strips a leading '/')
    for path in [&b"/etc/passwd"[..], b"/", b"../x", b"sub/../../x"] {
        let m = c.raw_call(&Request::Lookup { dir: c.root_handle(), path, follow: true }).unwrap();
        let st = raw_status(&c, &m);
        assert!(
            matches!(st, Status::Escape | Status::NoEnt | Status::BadName | Status::BadXdr),
            "raw LOOKUP {:?}: {st:?}",
            String::from_utf8_lossy(path)
        );
    }
    assert_eq!(status(c.readdir("abs")), Status::Escape);
    assert_eq!(status(c.readdir("..")), Status::Escape);
    assert_eq!(status(c.remove("../outside")), Status::Escape);
    // LINK does not follow: it links the symlink itself, which still escapes when followed
    c.link("sneaky", "hl").unwrap();
    assert_eq!(c.lstat("hl").unwrap().ftype, FileType::Symlink);
    assert_eq!(status(c.stat("hl")), Status::Escape);
    assert_eq!(std::fs::read(d.parent().unwrap().join("outside")).unwrap(), b"secret");

    // links themselves are fine with lstat / readlink, and staying inside is fine
    assert_eq!(c.lstat("abs").unwrap().ftype, FileType::Symlink);
    assert_eq!(c.readlink("up").unwrap(), b"../../");
    assert_eq!(c.stat("sub/../sub/ok").unwrap().size, 2);
    c.null().unwrap();
}

/// A handle to a symlink (LOOKUP without follow) whose target is outside the export:
/// nothing done through the handle may reach the target.
#[test]
fn symlink_handles_do_not_reach_targets() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    let outside = srv.base_dir().join("outside-file");
    std::fs::write(&outside, b"precious").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::metadata(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, d.join("out")).unwrap();
    let outside_dir = srv.base_dir().join("outside-dir");
    std::fs::create_dir(&outside_dir).unwrap();
    std::os::unix::fs::symlink(&outside_dir, d.join("outdir")).unwrap();

    let lookup_nofollow = |c: &mut dafs_client::Client, name: &[u8]| -> FileHandle {
        let m = c
            .raw_call(&Request::Lookup { dir: c.root_handle(), path: name, follow: false })
            .unwrap();
        match dafs_proto::decode_reply(&m, c.msg_size_bytes_max()).unwrap().1 {
            Reply::Handle { fh, attr } => {
                assert_eq!(attr.ftype, FileType::Symlink);
                fh
            }
            r => panic!("lookup: {r:?}"),
        }
    };
    let fh = lookup_nofollow(&mut c, b"out");
    assert_eq!(
        c.getattr(fh).unwrap().ftype,
        FileType::Symlink,
        "GETATTR describes the link itself"
    );

    use dafs_client::dafs_proto::types::{open_flags, setattr_mask as m};
    for set in [
        dafs_proto::SetAttrs { mask: m::SIZE, size: 0, ..Default::default() },
        dafs_proto::SetAttrs { mask: m::MODE, mode: 0o777, ..Default::default() },
        dafs_proto::SetAttrs {
            mask: m::ATIME | m::MTIME,
            atime_ns: 0,
            mtime_ns: 0,
            ..Default::default()
        },
    ] {
        let _ = c.setattr(fh, set); // may fail or act on the link, never on the target
    }
    for flags in [
        open_flags::READ,
        open_flags::WRITE,
        open_flags::READ | open_flags::WRITE | open_flags::TRUNCATE,
    ] {
        let m = c.raw_call(&Request::Open { fh, flags, mode: 0, name: b"", key: b"" }).unwrap();
        assert_ne!(raw_status(&c, &m), Status::Ok, "OPEN of a symlink handle (flags {flags})");
    }
    let after = std::fs::metadata(&outside).unwrap();
    assert_eq!(std::fs::read(&outside).unwrap(), b"precious");
    assert_eq!(after.mode() & 0o7777, 0o600);
    assert_eq!((after.mtime(), after.mtime_nsec()), (before.mtime(), before.mtime_nsec()));

    // a directory symlink's handle cannot be used as a directory
    let dh = lookup_nofollow(&mut c, b"outdir");
    assert!(c.readdir_page(dh, 0, 10).is_err());
    let m = c.raw_call(&Request::Lookup { dir: dh, path: b"x", follow: false }).unwrap();
    assert_ne!(raw_status(&c, &m), Status::Ok);
    assert!(c.create_file("outdir/new", 0o644, false).is_err());
    let m = c
        .raw_call(&Request::Create {
            dir: dh,
            ftype: FileType::Regular,
            mode: 0o644,
            exclusive: true,
            name: b"new",
        })
        .unwrap();
    assert_ne!(raw_status(&c, &m), Status::Ok);
    let m = c
        .raw_call(&Request::Open {
            fh: dh,
            flags: open_flags::WRITE | open_flags::CREATE,
            mode: 0o644,
            name: b"new2",
            key: b"",
        })
        .unwrap();
    assert_ne!(raw_status(&c, &m), Status::Ok);
    let m = c.raw_call(&Request::Symlink { dir: dh, name: b"sl", target: b"x" }).unwrap();
    assert_ne!(raw_status(&c, &m), Status::Ok);
    let m = c
        .raw_call(&Request::Create {
            dir: dh,
            ftype: FileType::Directory,
            mode: 0o755,
            exclusive: true,
            name: b"nd",
        })
        .unwrap();
    assert_ne!(raw_status(&c, &m), Status::Ok);
    assert_eq!(std::fs::read_dir(&outside_dir).unwrap().count(), 0, "nothing was created outside");
    c.null().unwrap();
}

/// --max-open-files, --max-sessions, and a tiny handle table (config file).
#[test]
fn server_limits() {
    let srv = TestServer::start(&["--max-open-files", "3", "--max-sessions", "2"]);
    // Provider::Tcp: the same-host switch holds a second session while it sets up.
    let mut c = srv.client_tcp();
    for i in 0..5 {
        std::fs::write(srv.dir().join(format!("f{i}")), b"x").unwrap();
    }
    let mut open: Vec<_> =
        (0..3).map(|i| c.open(&format!("f{i}"), OpenOptions::read()).unwrap()).collect();
    assert_eq!(status(c.open("f3", OpenOptions::read())), Status::Limit);
    assert_eq!(status(c.open("new", OpenOptions::read_write().create(true))), Status::Limit);
    c.close(open.pop().unwrap()).unwrap();
    let f = c.open("f3", OpenOptions::read()).unwrap();
    assert_eq!(status(c.open("f4", OpenOptions::read())), Status::Limit);
    // the limit is per session
    let mut c2 = srv.client_tcp();
    let g: Vec<_> =
        (0..3).map(|i| c2.open(&format!("f{i}"), OpenOptions::read()).unwrap()).collect();
    // and sessions are limited
    let e = srv.client_with(|cfg| cfg.provider = Provider::Tcp).err().expect("third session");
    assert_eq!(e.status(), Some(Status::Limit), "{e:?}");
    drop(g);
    drop(c2);
    // the slot frees once the server sees the session end
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut c3 = loop {
        match srv.client_with(|cfg| cfg.provider = Provider::Tcp) {
            Ok(c3) => break c3,
            Err(e) => {
                assert_eq!(e.status(), Some(Status::Limit), "{e:?}");
                assert!(std::time::Instant::now() < deadline, "session slot never freed");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    };
    c3.null().unwrap();
    c.close(f).unwrap();
    // an Auto client still connects at the session limit (staying on TCP if it must)
    drop(c3);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match srv.client_with(|cfg| cfg.provider = Provider::Auto) {
            Ok(mut a) => {
                a.null().unwrap();
                break;
            }
            Err(e) => {
                assert_eq!(e.status(), Some(Status::Limit), "{e:?}");
                assert!(std::time::Instant::now() < deadline, "session slot never freed");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

#[test]
fn evicted_handles_are_stale_never_another_file() {
    let cfgdir = tempfile::tempdir().unwrap();
    let cfg = cfgdir.path().join("dafsd.toml");
    // Volatile handles: the eviction (STALE) path, not re-opening by kernel handle.
    std::fs::write(&cfg, "handles_max = 16\nvolatile_handles = true\n").unwrap();
    let srv = TestServer::start(&["--config", cfg.to_str().unwrap()]);
    let mut c = srv.client();
    let n = 60;
    for i in 0..n {
        std::fs::write(srv.dir().join(format!("f{i}")), format!("{i}")).unwrap();
    }
    let kept = c.open("f0", OpenOptions::read()).unwrap();
    let handles: Vec<_> = (0..n).map(|i| c.lookup(&format!("f{i}")).unwrap()).collect();
    let mut stale = 0;
    for (i, (fh, attr)) in handles.iter().enumerate() {
        match c.getattr(*fh) {
            Ok(a) => assert_eq!(a.fileid, attr.fileid, "handle of f{i} now names another object"),
            Err(e) => {
                assert_eq!(e.status(), Some(Status::Stale), "f{i}: {e:?}");
                stale += 1;
            }
        }
    }
    assert!(stale >= n - 16, "a 16-entry table cannot keep {n} handles ({stale} stale)");
    // the path still works (a fresh lookup), and so does an open file whose handle went
    for i in 0..n {
        assert_eq!(c.stat(&format!("f{i}")).unwrap().size, format!("{i}").len() as u64);
    }
    let mut b = [0u8; 1];
    assert_eq!(c.pread(&kept, &mut b, 0).unwrap(), 1);
    assert_eq!(&b, b"0");
    c.close(kept).unwrap();
    // the root handle stays usable (recently used)
    c.null().unwrap();
    assert!(c.readdir("").unwrap().len() >= n);
}

#[test]
fn read_only_export() {
    let ro_dir = tempfile::tempdir().unwrap();
    std::fs::write(ro_dir.path().join("f"), b"read me").unwrap();
    std::fs::create_dir(ro_dir.path().join("d")).unwrap();
    let spec = format!("ro={}:ro", ro_dir.path().display());
    let srv = TestServer::start(&["--export", &spec]);
    let mut c = srv.client_with(|cfg| cfg.export = "ro".into()).unwrap();
    assert_eq!(c.stat("").unwrap().fileid, std::fs::metadata(ro_dir.path()).unwrap().ino());

    // reads work
    let f = c.open("f", OpenOptions::read()).unwrap();
    let mut b = [0u8; 7];
    assert_eq!(c.pread(&f, &mut b, 0).unwrap(), 7);
    assert_eq!(&b, b"read me");
    c.close(f).unwrap();
    assert_eq!(c.readdir("").unwrap().len(), 2);
    assert_eq!(c.access("f", access_mask::READ | access_mask::WRITE).unwrap(), access_mask::READ);

    // every write is RoFs
    assert_eq!(status(c.open("f", OpenOptions::read_write())), Status::RoFs);
    assert_eq!(status(c.open("f", OpenOptions::write_only())), Status::RoFs);
    assert_eq!(status(c.open("new", OpenOptions::read_write().create(true))), Status::RoFs);
    assert_eq!(status(c.create("new")), Status::RoFs);
    assert_eq!(status(c.create_file("new", 0o644, false)), Status::RoFs);
    assert_eq!(status(c.mkdir("nd", 0o755)), Status::RoFs);
    assert_eq!(status(c.rmdir("d")), Status::RoFs);
    assert_eq!(status(c.remove("f")), Status::RoFs);
    assert_eq!(status(c.rename("f", "g")), Status::RoFs);
    assert_eq!(status(c.link("f", "g")), Status::RoFs);
    assert_eq!(status(c.symlink("f", "g")), Status::RoFs);
    assert_eq!(status(c.chmod("f", 0o777)), Status::RoFs);
    assert_eq!(status(c.truncate("f", 0)), Status::RoFs);
    assert_eq!(status(c.set_times("f", 0, 0)), Status::RoFs);
    assert_eq!(std::fs::read(ro_dir.path().join("f")).unwrap(), b"read me");
    let mut names: Vec<_> =
        std::fs::read_dir(ro_dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["d", "f"]);
    assert_ne!(std::fs::metadata(ro_dir.path().join("f")).unwrap().mode() & 0o777, 0o777);

    // the default export is still writable, for another client
    let mut w = srv.client();
    w.create("w").unwrap();
    assert!(srv.dir().join("w").is_file());
    // an unknown export name is refused at connect
    let e = srv.client_with(|cfg| cfg.export = "nope".into()).err().expect("unknown export");
    assert_eq!(e.status(), Some(Status::NoEnt), "{e:?}");
    // the default export by its name
    let mut n = srv.client_with(|cfg| cfg.export = "export".into()).unwrap();
    assert!(n.stat("w").is_ok());
}

fn authentication(p: Provider) {
    let srv = TestServer::start_with_secret(b"correct horse battery staple", &[]);
    // the provider's address (the libfabric listener's for `Provider::Ofi`), and for
    // shared memory also its socket directly
    let mut targets = vec![srv.addr_for(p)];
    if p == Provider::Auto {
        targets.push(format!("dafs+shm://{}", srv.shm_socket().unwrap().display()));
    }
    for t in &targets {
        // no secret
        let cfg = ClientConfig { provider: p, ..ClientConfig::default() };
        let e =
            dafs_client::Client::connect(t, cfg.clone()).err().expect("must fail without a secret");
        assert!(matches!(e, Error::Auth(_)), "{t}: {e:?}");
        // wrong secret
        let e = dafs_client::Client::connect(
            t,
            ClientConfig { secret: Some(b"wrong horse battery staple".to_vec()), ..cfg.clone() },
        )
        .err()
        .expect("wrong secret must fail");
        assert!(
            matches!(e, Error::Auth(_)) || e.status() == Some(Status::AuthFailed),
            "{t}: {e:?}"
        );
        // right secret
        let mut ok = dafs_client::Client::connect(
            t,
            ClientConfig { secret: Some(b"correct horse battery staple".to_vec()), ..cfg },
        )
        .unwrap();
        ok.null().unwrap();
    }
    // right secret
    let mut c = srv.client_on(p);
    std::fs::write(srv.dir().join("f"), b"authed").unwrap();
    let f = c.open("f", OpenOptions::read()).unwrap();
    let mut b = [0u8; 6];
    c.pread(&f, &mut b, 0).unwrap();
    assert_eq!(&b, b"authed");
    c.close(f).unwrap();
    // failures did not disturb the server or the good session
    let mut c2 = srv.client_on(p);
    c2.null().unwrap();
    c.null().unwrap();

    // a client with a secret refuses a server that does not authenticate
    let open = TestServer::start(&[]);
    let e = open
        .client_with(|c| c.secret = Some(b"correct horse battery staple".to_vec()))
        .err()
        .expect("must refuse");
    assert!(matches!(e, Error::Auth(_)), "{e:?}");
}

fn two_clients_share_files(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut a = srv.client_on(p);
    let mut b = srv.client_on(p);
    assert_ne!(a.session_id(), b.session_id());

    // one creates, the other sees it
    let f = a.open("shared", OpenOptions::read_write().create(true)).unwrap();
    let st = b.stat("shared").unwrap();
    assert_eq!(st.fileid, f.attr.fileid);
    assert!(b.readdir("").unwrap().iter().any(|e| e.name == b"shared"));
    a.mkdir("made-by-a", 0o755).unwrap();
    b.create("made-by-a/by-b").unwrap();
    assert!(a.stat("made-by-a/by-b").is_ok());
    a.close(f).unwrap();

    // both write disjoint ranges concurrently, each with its own client (clients are
    // not Send: each thread connects its own), in inline and direct sizes; then each
    // reads the other's half back
    const HALF: u64 = 3 << 20;
    // a barrier that cannot hang the test if the other thread panicked
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..2u8)
        .map(|k| {
            let (addr, cfg, written) = (srv.addr(), srv.config(), written.clone());
            std::thread::spawn(move || {
                let mut c = dafs_client::Client::connect(&addr, cfg).unwrap();
                let f = c.open("shared", OpenOptions::read_write()).unwrap();
                let base = k as u64 * HALF;
                let mut off = 0u64;
                let mut sizes = [1000usize, 64 << 10, 5000, 1 << 20, 17].iter().cycle();
                while off < HALF {
                    let n = (*sizes.next().unwrap() as u64).min(HALF - off) as usize;
                    assert_eq!(c.pwrite(&f, &pattern(base + off, n, 0x5A), base + off).unwrap(), n);
                    off += n as u64;
                }
                c.fsync(&f).unwrap();
                written.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                while written.load(std::sync::atomic::Ordering::SeqCst) < 2 {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the other writer never finished"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                let other = (1 - k as u64) * HALF;
                let mut buf = vec![0u8; HALF as usize];
                assert_eq!(c.pread(&f, &mut buf, other).unwrap(), HALF as usize);
                assert!(
                    buf == pattern(other, HALF as usize, 0x5A),
                    "client {k} read wrong data from the other's half"
                );
                let mut small = vec![0u8; 333];
                assert_eq!(c.pread(&f, &mut small, other + 4444).unwrap(), 333);
                assert_eq!(small, pattern(other + 4444, 333, 0x5A));
                c.close(f).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let disk = std::fs::read(srv.dir().join("shared")).unwrap();
    assert_eq!(disk.len() as u64, 2 * HALF);
    assert!(
        disk == pattern(0, 2 * HALF as usize, 0x5A),
        "file content differs from what the two clients wrote"
    );

    // removal by one is seen by the other (including through its handle)
    let (fh, _) = b.lookup("shared").unwrap();
    a.remove("shared").unwrap();
    assert_eq!(status(b.stat("shared")), Status::NoEnt);
    assert_eq!(status(b.getattr(fh)), Status::Stale);
}

for_each_provider!(authentication, two_clients_share_files);

#[test]
fn server_stops_cleanly_with_clients_connected() {
    let mut srv = TestServer::start(&[]);
    let mut a = srv.client_tcp();
    let mut b = srv.client_shm();
    let f = a.open("f", OpenOptions::read_write().create(true)).unwrap();
    a.pwrite(&f, b"x", 0).unwrap();
    b.stat("f").unwrap();
    let sock = srv.shm_socket().unwrap().to_path_buf();
    assert!(sock.exists());
    let t = std::time::Instant::now();
    let st = srv.kill().expect("exit status");
    assert!(st.success(), "dafsd exit on SIGTERM: {st:?}\n{}", srv.stderr_log());
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "shutdown took {:?}", t.elapsed());
    assert!(!sock.exists(), "the shared-memory socket is removed on shutdown");
    // both clients notice
    assert!(a.null().is_err());
    assert!(b.null().is_err());
}

/// A handle to a deleted file must stay STALE even when a new file reuses its inode
/// number (the handle table is keyed by device and inode).
#[test]
fn handle_of_deleted_file_never_names_a_file_that_reuses_its_inode() {
    use std::os::unix::fs::MetadataExt;
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let mut reused = 0;
    for i in 0..200 {
        let a = srv.dir().join(format!("a{i}"));
        std::fs::write(&a, b"old").unwrap();
        let (fh, attr) = c.lookup(&format!("a{i}")).unwrap();
        // Through dafs: the server drops its descriptor, so the inode number is free.
        // (While the server holds it, the kernel cannot reuse the number at all.)
        c.remove(&format!("a{i}")).unwrap();
        assert!(!a.exists());
        let b = srv.dir().join(format!("b{i}"));
        std::fs::write(&b, b"new").unwrap();
        if std::fs::metadata(&b).unwrap().ino() == attr.fileid {
            reused += 1;
            let err = c.getattr(fh).unwrap_err();
            assert_eq!(
                err.status(),
                Some(dafs_client::dafs_proto::Status::Stale),
                "old handle must not name the new file"
            );
            let (fh_b, _) = c.lookup(&format!("b{i}")).unwrap();
            assert_ne!(fh_b, fh, "the new file gets a new handle");
            assert_eq!(c.getattr(fh_b).unwrap().size, 3);
        }
        std::fs::remove_file(&b).unwrap();
    }
    // On ext4 and tmpfs a freed inode number is reused at once; make sure the case ran.
    assert!(reused > 0, "the file system never reused an inode number: the case was not exercised");
}

#[test]
fn a_recycled_root_handle_is_fetched_again() {
    let cfgdir = tempfile::tempdir().unwrap();
    let cfg = cfgdir.path().join("dafsd.toml");
    // Volatile handles: the eviction (STALE) path, not re-opening by kernel handle.
    std::fs::write(&cfg, "handles_max = 16\nvolatile_handles = true\n").unwrap();
    let srv = TestServer::start(&["--config", cfg.to_str().unwrap()]);
    std::fs::create_dir(srv.dir().join("d")).unwrap();
    for i in 0..60 {
        std::fs::write(srv.dir().join("d").join(format!("f{i}")), b"x").unwrap();
    }
    std::fs::write(srv.dir().join("top"), b"top").unwrap();
    let mut c = srv.client();
    let (d, _) = c.lookup("d").unwrap();
    // Many handles issued without touching the root: the 16-entry table recycles it.
    for i in 0..60 {
        let _ = c.lookup_at(d, format!("f{i}").as_bytes(), true);
    }
    assert_eq!(
        c.getattr(c.root_handle()).unwrap_err().status(),
        Some(Status::Stale),
        "the root was recycled"
    );
    // Path-based calls recover by fetching the root again.
    assert_eq!(c.stat("top").unwrap().size, 3);
    c.getattr(c.root_handle()).unwrap();
}

/// A libfabric client pointed at dafsd's TCP port (not its libfabric listener) fails at
/// once with an error that says so, instead of waiting out its connect timeout.
#[test]
fn ofi_client_at_the_tcp_port_is_told_so_at_once() {
    let srv = TestServer::start(&[]);
    let mut cfg = srv.config();
    cfg.connect_timeout = std::time::Duration::from_secs(20);
    cfg.reconnect = false;
    let t0 = std::time::Instant::now();
    let r = dafs_client::Client::connect(&format!("dafs+ofi+tcp://{}", srv.addr()), cfg);
    let e = r.err().expect("connected to the TCP port with the libfabric provider");
    assert!(e.to_string().contains("not a dafs libfabric listener"), "{e}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(5), "took {:?}", t0.elapsed());
}
