//! What the client library does when the server fails underneath it (issue 17): requests
//! of a lost session complete with an error, requests have an overall deadline, and a
//! write that only partly reached the file is a short write.

#[macro_use]
mod common;

use std::time::{Duration, Instant};

use common::restart::RestartableServer;
use common::{pattern, Client, ClientConfig, Provider, TestServer};
use dafs_client::{Error, IoBuf, OpenOptions};
use dafs_transport::fault::{FaultControl, FaultPlan, FaultyTransport};
use dafs_transport::tcp::TcpClient;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// A TCP client whose transport injects faults by `plan` (none during session set-up),
/// on one connection: these tests count the reconnects of a connection that breaks
/// (a trunked session would carry on over its other connections instead).
fn faulty_client(
    srv: &TestServer,
    plan: FaultPlan,
    cfg: ClientConfig,
) -> (Client, Arc<FaultControl>) {
    let cfg = ClientConfig { connections: 1, ..cfg };
    let inner = TcpClient::connect(&srv.addr(), Duration::from_secs(5)).unwrap();
    let mut t = FaultyTransport::new(Box::new(inner), FaultPlan::default(), 7);
    let ctl = t.control();
    t.set_plan(plan);
    t.quiet_for(16);
    (Client::with_transport(Box::new(t), cfg).unwrap(), ctl)
}

/// The server hangs with a request in flight, then dies and comes back (a restart loses
/// every session). `reestablish` must not refuse for ever because of the request the old
/// session will never answer: it completes that request with an error (its completion
/// group hears of it) and starts the new session.
#[test]
fn reestablish_completes_the_requests_of_the_lost_session() {
    let mut srv = RestartableServer::start(&[]);
    std::fs::write(srv.dir().join("data"), pattern(0, 4096, 3)).unwrap();
    let cfg = ClientConfig { provider: Provider::Tcp, ..ClientConfig::default() };
    let mut c = Client::connect(&srv.addr(), cfg).unwrap();
    let f = c.open("data", OpenOptions::read()).unwrap();
    let cg = c.create_cg().unwrap();
    srv.signal(libc::SIGSTOP);
    c.submit_read(&f, 0, IoBuf::Vec(vec![0; 4096]), cg, 42).unwrap();
    assert!(c.wait_one(cg, Some(Duration::from_millis(200))).unwrap().is_none(), "hung");
    srv.restart();
    c.reestablish().expect("a new session despite the request of the lost one");
    let done = c.wait_one(cg, Some(Duration::from_secs(1))).unwrap().expect("completed");
    assert_eq!(done.user_data, 42);
    assert!(done.result.is_err(), "the lost request failed: {:?}", done.result);
    // The old open file belongs to the lost session; re-opened, it works.
    let mut buf = [0u8; 16];
    assert!(matches!(c.pread(&f, &mut buf, 0), Err(Error::StaleOpen)));
    let g = c.reopen(&f).unwrap();
    assert_eq!(c.pread(&g, &mut buf, 0).unwrap(), 16);
    assert_eq!(&buf[..], &pattern(0, 16, 3)[..]);
}

/// A blocking write whose request failed with the connection while it was being sent
/// (recovery impossible) reports the error; its chunk's completion must not stay behind
/// for the next blocking call, which would take it for its own chunk and return before
/// that completed (a write reported done that was not, its memory deregistered while the
/// server may still read it).
#[test]
fn a_failed_blocking_write_leaves_nothing_behind() {
    let srv = TestServer::start(&[]);
    let mut cfg = srv.config();
    cfg.reconnect_timeout = Duration::from_millis(200);
    let (mut c, ctl) = faulty_client(&srv, FaultPlan::default(), cfg);
    let big = c.inline_threshold() + 4096;
    let f = c.open("big", OpenOptions::read_write().create(true)).unwrap();
    ctl.block_reconnect.store(true, Relaxed);
    ctl.cut();
    assert!(c.pwrite(&f, &pattern(0, big, 1), 0).is_err(), "the connection is gone");
    ctl.block_reconnect.store(false, Relaxed);
    c.reestablish().unwrap();
    let f = c.reopen(&f).unwrap();
    for round in 0..3u8 {
        let data = pattern(0, big, round + 2);
        assert_eq!(c.pwrite(&f, &data, 0).unwrap(), big, "round {round}");
        let mut back = vec![0u8; big];
        assert_eq!(c.pread(&f, &mut back, 0).unwrap(), big);
        assert!(back == data, "round {round}: the write completed before it returned");
    }
}

/// A link that breaks during every attempt at a transfer: without an overall deadline
/// the client reconnects and resends the read for ever. With one, the read fails with
/// ETIMEDOUT within the deadline (plus a margin), the counter says why, and a new
/// session works once the link does.
#[test]
fn a_request_that_never_completes_times_out() {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("big"), pattern(0, 1 << 20, 5)).unwrap();
    let deadline = Duration::from_secs(2);
    let mut cfg = srv.config();
    cfg.request_deadline = deadline;
    cfg.reconnects_per_request_max = u32::MAX;
    let (mut c, ctl) = faulty_client(&srv, FaultPlan::default(), cfg);
    let f = c.open("big", OpenOptions::read()).unwrap();
    ctl.cut_after_placed_bytes.store(30_000, Relaxed);
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        let r = c.pread(&f, &mut buf, 0).map(|_| ());
        tx.send(r).unwrap();
        (c, f)
    });
    let r = rx.recv_timeout(deadline + Duration::from_secs(5));
    ctl.cut_after_placed_bytes.store(0, Relaxed);
    let r = r.unwrap_or_else(|_| panic!("still retrying after {:?}", t0.elapsed()));
    let e = r.expect_err("the read cannot complete");
    assert_eq!(e.errno(), libc::ETIMEDOUT, "{e}");
    assert!(t0.elapsed() >= deadline, "timed out early ({:?})", t0.elapsed());
    let (mut c, f) = reader.join().unwrap();
    assert!(ctl.counts().cuts > 3, "reconnected and resent meanwhile: {:?}", ctl.counts());
    assert!(c.stats().requests_timed_out >= 1);
    assert_eq!(c.null().unwrap_err().errno(), libc::ETIMEDOUT, "the session was given up");
    c.reestablish().unwrap();
    let g = c.reopen(&f).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    assert_eq!(c.pread(&g, &mut buf, 0).unwrap(), 1 << 20);
    assert!(buf == pattern(0, 1 << 20, 5));
}

/// The same link with the default deadline: the bound on reconnects per request ends it.
#[test]
fn a_request_resent_too_often_times_out() {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("big"), pattern(0, 1 << 20, 6)).unwrap();
    let mut cfg = srv.config();
    cfg.reconnects_per_request_max = 5;
    let (mut c, ctl) = faulty_client(&srv, FaultPlan::default(), cfg);
    let f = c.open("big", OpenOptions::read()).unwrap();
    ctl.cut_after_placed_bytes.store(30_000, Relaxed);
    let t0 = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let _reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        tx.send(c.pread(&f, &mut buf, 0).map(|_| ())).unwrap();
    });
    let r = rx.recv_timeout(Duration::from_secs(10));
    ctl.cut_after_placed_bytes.store(0, Relaxed);
    let r = r.unwrap_or_else(|_| panic!("still retrying after {:?}", t0.elapsed()));
    let e = r.expect_err("the read cannot complete");
    assert_eq!(e.errno(), libc::ETIMEDOUT, "{e}");
    let cuts = ctl.counts().cuts;
    assert!((5..=8).contains(&cuts), "about 5 reconnects, not {cuts}");
}

/// A 1 MiB tmpfs mounted on a fresh directory (root only), unmounted on drop.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount() -> SmallFs {
        let dir = tempfile::Builder::new().prefix("dafs-small-").tempdir().unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "mount -t tmpfs needs root (the test runs as root in CI)");
        SmallFs { dir }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A 2 MiB write into a file system with room for 1 MiB: the bytes that reached the file
/// are a short write (POSIX), not a plain ENOSPC that loses them; the next write gets
/// ENOSPC. Inline and direct writes, over TCP and shared memory.
fn a_partial_write_is_a_short_write(provider: Provider) {
    let fs = SmallFs::mount();
    let srv = TestServer::start_with_dir(fs.dir.path(), &[]);
    let mut c = srv.client_on(provider);
    let f = c.open("full", OpenOptions::read_write().create(true)).unwrap();
    let data = pattern(0, 2 << 20, 9);
    let n = c.pwrite(&f, &data, 0).expect("a short write, not an error");
    assert!((900 << 10..2 << 20).contains(&n), "wrote {n} of 2 MiB");
    let e = c.pwrite(&f, &data[n..], n as u64).expect_err("the file system is full");
    assert_eq!(e.errno(), libc::ENOSPC, "{e}");
    assert_eq!(std::fs::read(fs.dir.path().join("full")).unwrap(), &data[..n]);
    // Inline: free 3000 bytes at the end of the file, write 8000 there.
    c.truncate("full", n as u64 - 3000).unwrap();
    let m = c.pwrite(&f, &data[..8000], n as u64 - 3000).expect("a short inline write");
    assert!((1..8000).contains(&m), "wrote {m} of 8000");
}

for_each_provider!(a_partial_write_is_a_short_write);
