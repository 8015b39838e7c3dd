//! State reclaim after a server restart (docs/protocol.md §9.5): a real dafsd with a
//! state directory, killed with SIGKILL and started again on the same port, export and
//! state directory, runs a grace period in which the client library re-opens its files
//! (with their share reservations) and re-takes its locks by itself: `File`s opened
//! before the restart keep working. Without a state directory nothing is reclaimed and
//! old files fail with ESTALE, as before.
//!
//! Needs root (persistent handles need CAP_DAC_READ_SEARCH), as the tests run here.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::restart::RestartableServer;
use common::{Client, ClientConfig, Provider};
use dafs_client::{Error, OpenOptions};
use dafs_proto::Status;

/// Short, so a test that waited out the whole grace period would still finish, yet
/// long enough to tell an early end (every client reclaimed) from the full period.
const GRACE_SECS: &str = "5";

struct Restartable {
    srv: RestartableServer,
    _state: tempfile::TempDir,
}

/// A restartable dafsd; with `state`, a state directory and a grace period.
fn server(state: bool) -> Restartable {
    let dir = tempfile::Builder::new().prefix("dafs-state-").tempdir().unwrap();
    let state_dir = dir.path().join("state");
    let s = state_dir.to_str().unwrap();
    let args: Vec<&str> =
        if state { vec!["--state-dir", s, "--grace-secs", GRACE_SECS] } else { vec![] };
    Restartable { srv: RestartableServer::start(&args), _state: dir }
}

/// A TCP client with its own client id (the server records and matches clients by id).
fn client(addr: &str, id: &str) -> Client {
    let cfg =
        ClientConfig { client_id: id.into(), provider: Provider::Tcp, ..ClientConfig::default() };
    Client::connect(addr, cfg).expect("connect")
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
    std::thread::sleep(Duration::from_millis(500));
    owner.pwrite(&f, b"mine", 0).unwrap(); // notices the restart: reclaims
    let (waited, retries, write_refused, read) = waiter.join().unwrap();
    assert!(retries >= 1, "the open was answered GRACE at least once");
    assert!(waited >= Duration::from_millis(400), "it waited for the reclaim: {waited:?}");
    assert!(waited < Duration::from_secs(4), "the grace period ended early: {waited:?}");
    // It waited for the reclaimed reservation, which refuses it now; reading is fine.
    assert!(matches!(write_refused, Err(Error::Status(Status::ShareDenied))), "{write_refused:?}");
    read.unwrap();
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
