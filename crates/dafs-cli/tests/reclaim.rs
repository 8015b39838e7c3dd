//! State reclaim after a server restart (docs/protocol.md §9.5): a real dafsd with a
//! state directory, killed with SIGKILL and started again on the same port, export and
//! state directory, runs a grace period in which the client library re-opens its files
//! (with their share reservations) and re-takes its locks by itself: `File`s opened
//! before the restart keep working. Without a state directory nothing is reclaimed and
//! old files fail with ESTALE, as before.
//!
//! Needs root (persistent handles need CAP_DAC_READ_SEARCH), as the tests run here.

mod common;
mod raw;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::restart::RestartableServer;
use common::{Client, ClientConfig, Provider};
use dafs_client::{Error, OpenOptions};
use dafs_proto::types::{lock_flags, lock_type, open_flags, session_flags};
use dafs_proto::{decode_reply, AuthMethod, FileHandle, Header, Opcode, Reply, Request, Status};
use raw::{enc, Raw, MAX};

/// Short, so a test that waited out the whole grace period would still finish, yet
/// long enough to tell an early end (every client reclaimed) from the full period.
const GRACE_SECS: &str = "5";

struct Restartable {
    srv: RestartableServer,
    state: tempfile::TempDir,
}

impl Restartable {
    fn admin_socket(&self) -> PathBuf {
        self.state.path().join("admin.sock")
    }

    /// `dafs admin --json stats`.
    fn stats(&self) -> serde_json::Value {
        let out = std::process::Command::new(common::dafs_bin())
            .args(["admin", "--json", "--socket"])
            .arg(self.admin_socket())
            .arg("stats")
            .output()
            .expect("run dafs admin");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("stats are JSON")
    }
}

/// A restartable dafsd (with an admin socket); with `state`, a state directory and a
/// grace period.
fn server(state: bool) -> Restartable {
    let dir = tempfile::Builder::new().prefix("dafs-state-").tempdir().unwrap();
    let state_dir = dir.path().join("state");
    let admin = dir.path().join("admin.sock");
    let mut args = vec!["--admin-socket", admin.to_str().unwrap()];
    if state {
        args.extend(["--state-dir", state_dir.to_str().unwrap(), "--grace-secs", GRACE_SECS]);
    }
    Restartable { srv: RestartableServer::start(&args), state: dir }
}

/// A TCP client with its own client id (the server records and matches clients by id).
fn client(addr: &str, id: &str) -> Client {
    client_on(addr, id, Provider::Tcp)
}

fn client_on(addr: &str, id: &str, provider: Provider) -> Client {
    let cfg = ClientConfig { client_id: id.into(), provider, ..ClientConfig::default() };
    Client::connect(addr, cfg).expect("connect")
}

/// The same over shared memory: the new rings after the restart carry the reclaim.
#[test]
fn an_open_file_survives_a_restart_over_shared_memory() {
    let mut r = server(true);
    let mut c = client_on(&r.srv.addr(), "owner", Provider::Auto);
    assert_eq!(c.provider(), "shm");
    let f = c.open("data", OpenOptions::read_write().create(true)).unwrap();
    let big = common::pattern(0, 300 << 10, 3); // above the inline threshold: direct
    c.pwrite(&f, &big, 0).unwrap();
    r.srv.restart();
    c.pwrite(&f, &big, big.len() as u64).unwrap();
    c.fsync(&f).unwrap();
    let got = std::fs::read(export_file(&r, "data")).unwrap();
    assert_eq!((&got[..big.len()], &got[big.len()..]), (&big[..], &big[..]));
    assert_eq!(c.stats().opens_reclaimed, 1);
}

fn export_file(r: &Restartable, name: &str) -> PathBuf {
    r.srv.dir().join(name)
}

#[test]
fn opens_reservations_and_locks_survive_a_restart() {
    let mut r = server(true);
    let addr = r.srv.addr();
    let mut owner = client(&addr, "owner");
    let f = owner.open("data", OpenOptions::read_write().create(true).deny_write(true)).unwrap();
    owner.pwrite(&f, b"before", 0).unwrap();
    owner.lock(&f, 0, 100, true).unwrap();

    r.srv.restart(); // SIGKILL, then the same port, export and state directory

    // The old `File` keeps working: the library reclaims its open and lock by itself.
    owner.pwrite(&f, b"+after", 6).unwrap();
    owner.fsync(&f).unwrap();
    assert_eq!(std::fs::read(export_file(&r, "data")).unwrap(), b"before+after");
    let st = owner.stats();
    assert_eq!((st.opens_reclaimed, st.locks_reclaimed, st.reclaims_refused), (1, 1, 0));
    assert!(st.retransmits >= 1, "the write in flight was resent into the new session");

    // The deny-write reservation and the lock were reclaimed with it.
    let mut other = client(&addr, "other");
    match other.open("data", OpenOptions::write_only()) {
        Err(Error::Status(Status::ShareDenied)) => {}
        r => panic!("another client's write open must be refused: {r:?}"),
    }
    let g = other.open("data", OpenOptions::read()).unwrap();
    match other.lock(&g, 50, 10, true) {
        Err(Error::Status(Status::Denied)) => {}
        r => panic!("another client's lock must conflict: {r:?}"),
    }
    // The owner still holds its open and lock as its own: it reads, unlocks, closes.
    let mut buf = [0u8; 12];
    assert_eq!(owner.pread(&f, &mut buf, 0).unwrap(), 12);
    owner.unlock(&f, 0, 0).unwrap();
    other.lock(&g, 50, 10, true).unwrap();
    owner.close(f).unwrap();
    other.open("data", OpenOptions::write_only()).unwrap();

    // A second restart reclaims again (the reclaimed state was recorded again).
    let h = owner.open("second", OpenOptions::read_write().create(true)).unwrap();
    drop(other);
    r.srv.restart();
    owner.pwrite(&h, b"x", 0).unwrap();
    assert_eq!(std::fs::read(export_file(&r, "second")).unwrap(), b"x");
}

#[test]
fn other_clients_wait_for_the_grace_period_which_ends_when_all_reclaimed() {
    let mut r = server(true);
    let addr = r.srv.addr();
    let mut owner = client(&addr, "owner");
    let f = owner.open("held", OpenOptions::read_write().create(true).deny_write(true)).unwrap();
    r.srv.restart();

    // Another client's OPEN during the grace period is answered GRACE: the library
    // waits and retries, and gets the file once the owner has reclaimed.
    let waiter = std::thread::spawn(move || {
        let mut other = client(&addr, "other");
        let t = Instant::now();
        let write_refused = other.open("held", OpenOptions::write_only()).map(|_| ());
        let read = other.open("held", OpenOptions::read()).map(|_| ());
        (t.elapsed(), other.stats().grace_retries, write_refused, read)
    });
    // Reclaim only once the other client's open has been answered GRACE.
    let t = Instant::now();
    while r.stats()["counters"]["grace_refusals"].as_u64().unwrap() == 0 {
        assert!(t.elapsed() < Duration::from_secs(4), "the other client's open got no GRACE");
        std::thread::sleep(Duration::from_millis(20));
    }
    owner.pwrite(&f, b"mine", 0).unwrap(); // notices the restart: reclaims
    let (waited, retries, write_refused, read) = waiter.join().unwrap();
    assert!(retries >= 1, "the open was answered GRACE and sent again");
    assert!(waited < Duration::from_secs(4), "the grace period ended early: {waited:?}");
    // It waited for the reclaimed reservation, which refuses it now; reading is fine.
    assert!(matches!(write_refused, Err(Error::Status(Status::ShareDenied))), "{write_refused:?}");
    read.unwrap();
}

/// An append in flight when the server died may have executed: it is not resent (it
/// would append twice) but fails with ENOTCONN; the reclaimed file keeps working.
#[test]
fn an_append_in_flight_across_a_restart_fails_and_is_not_repeated() {
    let mut r = server(true);
    let mut c = client(&r.srv.addr(), "owner");
    let log = c.open("log", OpenOptions::write_only().create(true).append(true)).unwrap();
    c.append(&log, b"one ").unwrap();
    r.srv.restart();
    let e = c.append(&log, b"lost ").unwrap_err();
    assert!(matches!(e, Error::Disconnected), "{e:?}");
    assert_eq!(e.errno(), libc::ENOTCONN);
    c.append(&log, b"two").unwrap();
    assert_eq!(std::fs::read(export_file(&r, "log")).unwrap(), b"one two");
    assert_eq!(c.stats().opens_reclaimed, 1);
}

#[test]
fn without_a_state_dir_old_files_fail_with_estale() {
    let mut r = server(false);
    let addr = r.srv.addr();
    let mut c = client(&addr, "owner");
    let f = c.open("data", OpenOptions::read_write().create(true)).unwrap();
    c.lock(&f, 0, 1, true).unwrap();
    r.srv.restart();
    let e = c.pwrite(&f, b"x", 0).unwrap_err();
    assert!(matches!(e, Error::Status(Status::BadSession)), "{e:?}");
    assert_eq!(c.session_lost(), Some(Status::BadSession));
    c.reestablish().unwrap();
    let e = c.pwrite(&f, b"x", 0).unwrap_err();
    assert!(matches!(e, Error::StaleOpen), "{e:?}");
    assert_eq!(e.errno(), libc::ESTALE);
    assert_eq!(c.stats().opens_reclaimed, 0);
    // The new session works.
    let g = c.reopen(&f).unwrap();
    c.pwrite(&g, b"y", 0).unwrap();
}

/// A raw session of `client_id`, created with `flags`; the reply's `grace_ms`.
fn raw_session(addr: &str, client_id: &str, flags: u32) -> (Raw, u32) {
    let mut r = Raw::connect(addr);
    r.client_id = client_id.as_bytes().to_vec();
    let req = Request::SessionCreate {
        msg_size_bytes_max: 65536,
        slots: 2,
        auth: AuthMethod::None,
        flags,
        client_id: client_id.as_bytes(),
    };
    let m = r.roundtrip(&enc(&Header::request(Opcode::SessionCreate, 0, 0, 0, 0), &req));
    let (h, reply) = decode_reply(&m, MAX).unwrap();
    let Reply::SessionCreate { slots, grace_ms, .. } = reply else { panic!("{reply:?}") };
    r.sid = h.session_id;
    r.seq = vec![1; slots as usize];
    (r, grace_ms)
}

fn st(r: &mut Raw, req: &Request) -> Status {
    decode_reply(&r.call(0, req), MAX).unwrap().1.status()
}

fn open_req<'a>(root: FileHandle, name: &'a [u8], flags: u32, mode: u32) -> Request<'a> {
    Request::Open { fh: root, flags, mode, name, key: b"" }
}

fn lock_req(fh: FileHandle, offset: u64, len: u64, flags: u32) -> Request<'static> {
    Request::Lock { fh, offset, len, ltype: lock_type::EXCLUSIVE, flags }
}

/// The server's rules, over the raw protocol: who may reclaim, when, what conflicts,
/// what waits, and the early end of the grace period.
#[test]
fn the_server_admits_reclaims_only_from_recorded_clients_in_grace() {
    let mut r = server(true);
    let addr = r.srv.addr();
    let rw = open_flags::READ | open_flags::WRITE;
    let (mut a, grace) = raw_session(&addr, "a", 0);
    assert_eq!(grace, 0, "no grace period: nothing was recorded");
    let root = a.root();
    let x = a.open(root, b"x", rw | open_flags::CREATE | open_flags::DENY_WRITE);
    let (mut b, _) = raw_session(&addr, "b", 0);
    b.open(root, b"y", rw | open_flags::CREATE);
    let fh_x = match decode_reply(
        &a.call(0, &Request::Lookup { dir: root, path: b"x", follow: true }),
        MAX,
    )
    .unwrap()
    .1
    {
        Reply::Handle { fh, .. } => fh,
        other => panic!("{other:?}"),
    };
    assert_eq!(st(&mut a, &lock_req(fh_x, 0, 10, 0)), Status::Ok);
    drop((a, b));
    r.srv.restart();

    let left = r.stats()["grace_ms_left"].as_u64().unwrap();
    assert!(left > 0 && left <= 5000, "admin stats grace_ms_left {left}");
    let (mut a, grace) = raw_session(&addr, "a", session_flags::RECLAIM);
    assert!(grace > 0 && grace <= 5000, "grace_ms {grace}");
    let reclaim_x = rw | open_flags::DENY_WRITE | open_flags::RECLAIM;
    let m = a.call(0, &open_req(root, b"x", reclaim_x, x as u32));
    match decode_reply(&m, MAX).unwrap().1 {
        Reply::Open { open_id, .. } => assert_eq!(open_id, x, "the open id asked back"),
        other => panic!("reclaim: {other:?}"),
    }
    assert_eq!(st(&mut a, &open_req(root, b"x", reclaim_x, x as u32)), Status::ReclaimBad);
    assert_eq!(st(&mut a, &lock_req(fh_x, 0, 10, lock_flags::RECLAIM)), Status::Ok);

    // A client that held nothing: its reclaims are refused, its other requests wait.
    let (mut c, _) = raw_session(&addr, "c", 0);
    let read = open_flags::READ;
    assert_eq!(st(&mut c, &open_req(root, b"x", read | open_flags::RECLAIM, 0)), Status::NoGrace);
    assert_eq!(st(&mut c, &open_req(root, b"x", read, 0)), Status::Grace);
    assert_eq!(st(&mut c, &lock_req(fh_x, 20, 1, 0)), Status::Grace);
    assert_eq!(st(&mut c, &Request::Remove { dir: root, name: b"y" }), Status::Grace);

    // Another recorded client's reclaims that conflict with what `a` reclaimed.
    let (mut b, _) = raw_session(&addr, "b", session_flags::RECLAIM);
    let write_x = open_flags::WRITE | open_flags::RECLAIM;
    assert_eq!(st(&mut b, &open_req(root, b"x", write_x, 0)), Status::ReclaimBad);
    assert_eq!(st(&mut b, &lock_req(fh_x, 5, 1, lock_flags::RECLAIM)), Status::ReclaimBad);

    // The grace period lasts until every recorded client is done.
    assert_eq!(st(&mut a, &Request::ReclaimComplete), Status::Ok);
    assert_eq!(st(&mut c, &open_req(root, b"x", read, 0)), Status::Grace);
    assert_eq!(st(&mut b, &Request::ReclaimComplete), Status::Ok);
    assert_eq!(st(&mut c, &open_req(root, b"x", read, 0)), Status::Ok);
    assert_eq!(st(&mut c, &open_req(root, b"x", open_flags::WRITE, 0)), Status::ShareDenied);
    assert_eq!(st(&mut c, &lock_req(fh_x, 5, 1, 0)), Status::Denied);
    assert_eq!(st(&mut a, &lock_req(fh_x, 30, 1, lock_flags::RECLAIM)), Status::NoGrace);
    let v = r.stats();
    let n = |k: &str| v["counters"][k].as_u64().unwrap();
    assert_eq!(v["grace_ms_left"], 0);
    assert_eq!((n("opens_reclaimed"), n("locks_reclaimed")), (1, 1));
    // NO_GRACE x2, RECLAIM_BAD x3.
    assert_eq!(n("reclaims_refused"), 5);
    // OPEN, LOCK, REMOVE, then OPEN again while `b` had not completed.
    assert_eq!(n("grace_refusals"), 4);
}

/// With a shared secret, a peer that claims a recorded client's id but never proves it
/// cannot end that client's grace period (by saying it has nothing to reclaim).
#[test]
fn an_unauthenticated_peer_cannot_end_another_clients_grace_period() {
    let dir = tempfile::Builder::new().prefix("dafs-state-").tempdir().unwrap();
    let secret: &[u8] = b"reclaim-test-secret-0123456789abcdef";
    let secret_file = dir.path().join("secret");
    std::fs::write(&secret_file, secret).unwrap();
    let state_dir = dir.path().join("state");
    let mut srv = RestartableServer::start(&[
        "--state-dir",
        state_dir.to_str().unwrap(),
        "--grace-secs",
        GRACE_SECS,
        "--secret-file",
        secret_file.to_str().unwrap(),
    ]);
    let addr = srv.addr();
    let connect = |id: &str, deadline: Duration| {
        let cfg = ClientConfig {
            client_id: id.into(),
            provider: Provider::Tcp,
            secret: Some(secret.to_vec()),
            request_deadline: deadline,
            ..ClientConfig::default()
        };
        Client::connect(&addr, cfg).expect("connect")
    };
    let mut owner = connect("owner", Duration::from_secs(30));
    let f = owner.open("held", OpenOptions::read_write().create(true).deny_write(true)).unwrap();
    srv.restart();

    // SESSION_CREATE as "owner" without RECLAIM, never authenticated.
    let (_impostor, _) = raw_session_auth(&addr, "owner", AuthMethod::HmacSha256);
    let mut other = connect("other", Duration::from_millis(300));
    match other.open("held", OpenOptions::read()) {
        Err(Error::Status(Status::Grace)) => {}
        r => panic!("the grace period must still run: {r:?}"),
    }
    owner.pwrite(&f, b"x", 0).unwrap(); // reclaims, ends the grace period
    match other.open("held", OpenOptions::write_only()) {
        Err(Error::Status(Status::ShareDenied)) => {}
        r => panic!("the owner's reservation was reclaimed: {r:?}"),
    }
}

/// A raw SESSION_CREATE of `client_id` offering `auth`, without RECLAIM.
fn raw_session_auth(addr: &str, client_id: &str, auth: AuthMethod) -> (Raw, Status) {
    let mut r = Raw::connect(addr);
    r.client_id = client_id.as_bytes().to_vec();
    let st = match r.create(auth) {
        Ok(()) => Status::Ok,
        Err(s) => s,
    };
    assert_eq!(st, Status::Ok, "SESSION_CREATE");
    (r, st)
}
