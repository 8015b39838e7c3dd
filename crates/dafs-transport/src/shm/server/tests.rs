//! Process binding of direct placement into application memory: the server must reach
//! the memory of the process that registered it and of no other, even once that
//! process is gone and its pid names someone else.
//!
//! The peers are real processes: this test binary re-executed to run
//! [`helper_process`] in the role named by `HELPER_ROLE_ENV`.

use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;
use crate::{Access, ClientTransport, PutError, RemoteRegion, ServerConn, TransportError};

/// `client:SOCKET` (connect, register the page as application memory) or `victim`.
const HELPER_ROLE_ENV: &str = "DAFS_SHM_TEST_HELPER_ROLE";
/// A file the helper creates once its page is set up (and, as client, registered).
const HELPER_READY_ENV: &str = "DAFS_SHM_TEST_HELPER_READY";
/// Both helpers map their page here, so an access that reaches the wrong process
/// lands on the victim's bytes instead of faulting.
const FIXED_ADDR: usize = 0x6d00_0000_0000;
const PAGE_LEN: usize = 4096;
const CLIENT_BYTE: u8 = 0xC1;
const VICTIM_BYTE: u8 = 0x5A;

/// Map one private anonymous page at `FIXED_ADDR`, filled with `byte`.
fn map_fixed_page(byte: u8) -> *mut u8 {
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping (it fails instead);
    // the page is ours until the process exits.
    let p = unsafe {
        libc::mmap(
            FIXED_ADDR as *mut libc::c_void,
            PAGE_LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    assert_eq!(p as usize, FIXED_ADDR, "cannot map the helper page at its fixed address");
    // SAFETY: the page was just mapped read-write, PAGE_LEN bytes.
    unsafe { std::ptr::write_bytes(p as *mut u8, byte, PAGE_LEN) };
    p as *mut u8
}

#[test]
#[ignore = "helper process of the process-binding tests (runs only when they spawn it)"]
fn helper_process() {
    let Ok(role) = std::env::var(HELPER_ROLE_ENV) else { return };
    let ready = std::env::var(HELPER_READY_ENV).expect("ready file");
    let _client = match role.strip_prefix("client:") {
        Some(sock) => {
            let page = map_fixed_page(CLIENT_BYTE);
            let mut c = ShmClient::connect(Path::new(sock), Duration::from_secs(10)).unwrap();
            // SAFETY: the page stays mapped until the process is killed.
            unsafe { c.register(page, PAGE_LEN, Access::READ_WRITE) }.unwrap();
            Some(c)
        }
        None => {
            map_fixed_page(VICTIM_BYTE);
            None
        }
    };
    std::fs::write(ready, b"").unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A helper process, killed and reaped on drop.
struct Helper {
    child: Child,
    ready: PathBuf,
}

impl Helper {
    fn spawn(role: &str, dir: &Path) -> Helper {
        let ready = dir.join(format!("ready-{}", role.len()));
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "shm::server::tests::helper_process", "--ignored"])
            .args(["--test-threads=1", "--quiet"])
            .env(HELPER_ROLE_ENV, role)
            .env(HELPER_READY_ENV, &ready)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Helper { child, ready }
    }
    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    fn is_ready(&self) -> bool {
        self.ready.exists()
    }
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.kill();
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Accept the client helper's connection and serve it until its registration is in.
fn accept_registered(l: &mut ShmListener, client: &Helper) -> (ShmServerConn, u64) {
    let mut conn = None;
    wait_until("the client's connection", || {
        conn = l.accept().unwrap();
        conn.is_some()
    });
    let mut conn = conn.unwrap();
    wait_until("the client's registration", || {
        conn.poll_event().unwrap();
        client.is_ready()
    });
    let key = *conn.regions.keys().next().expect("one region");
    (conn, key)
}

fn victim_bytes(victim: &Helper) -> Vec<u8> {
    let mem = std::fs::File::open(format!("/proc/{}/mem", victim.pid())).unwrap();
    let mut b = vec![0u8; PAGE_LEN];
    mem.read_exact_at(&mut b, FIXED_ADDR as u64).unwrap();
    b
}

/// The client registers application memory and dies; its pid then names another live
/// process (simulated: the connection's recorded pid is pointed at a victim process
/// whose page sits at the same address). Placements must fail with a clear error and
/// the victim's memory must be untouched.
#[test]
fn placement_never_reaches_another_process_after_the_peer_died() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let mut l = ShmListener::bind(&sock).unwrap();
    let mut client = Helper::spawn(&format!("client:{}", sock.display()), dir.path());
    let (mut conn, key) = accept_registered(&mut l, &client);
    let region = RemoteRegion { key, offset: 0 };
    // While the client lives, its memory is reachable.
    let mut got = Vec::new();
    let r = conn.pull_sync(region, 16, &mut |src| {
        src.append_to(&mut got);
        Ok(src.len())
    });
    assert_eq!(r.unwrap(), Some(16));
    assert_eq!(got, vec![CLIENT_BYTE; 16]);

    let victim = Helper::spawn("victim", dir.path());
    wait_until("the victim", || victim.is_ready());
    client.kill();
    // The pid the server recorded now names the victim.
    conn.pid = victim.pid();

    let put = conn.put(region, 16, &mut |dst| {
        dst.copy_from(&[0xEE; 16]);
        Ok(16)
    });
    assert!(
        matches!(put, Err(PutError::Transport(TransportError::Closed))),
        "placement into a dead peer: {put:?}"
    );
    let pull = conn.pull_sync(region, 16, &mut |src| Ok(src.len()));
    assert!(
        matches!(pull, Err(PutError::Transport(TransportError::Closed))),
        "pull from a dead peer: {pull:?}"
    );
    assert_eq!(victim_bytes(&victim), vec![VICTIM_BYTE; PAGE_LEN], "victim untouched");
}

/// A HELLO whose memory file is not the connecting process's own `/proc/PID/mem` (a
/// memfd, or another process's memory file) is refused: the connection never gets a
/// way to reach memory.
#[test]
fn hello_with_a_foreign_memory_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let mut l = ShmListener::bind(&sock).unwrap();
    let victim = Helper::spawn("victim", dir.path());
    wait_until("the victim", || victim.is_ready());
    let other_mem: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{}/mem", victim.pid()))
        .unwrap()
        .into();
    let not_proc = mem::sealed_memfd("not-proc", 4096).unwrap();
    for fake in [other_mem, not_proc] {
        let c = UnixStream::connect(&sock).unwrap();
        let area_len = mem::ring_area_len(RING_CAP);
        let area = mem::sealed_memfd("rings", area_len).unwrap();
        let hello = Ctl::new(K_HELLO, 0, RING_CAP as u64, area_len as u64, 0);
        send_ctl_fds(&c, hello, &[area.as_fd(), fake.as_fd()]).unwrap();
        let mut conn = None;
        wait_until("the connection", || {
            conn = l.accept().unwrap();
            conn.is_some()
        });
        let mut conn = conn.unwrap();
        let mut r = Ok(None);
        wait_until("the HELLO", || {
            r = conn.poll_event();
            r.is_err()
        });
        assert!(matches!(r, Err(TransportError::Protocol(_))), "{:?}", r.err());
        assert!(conn.peer_mem.is_none());
        let mut ack = [0u8; REC];
        (&c).read_exact(&mut ack).unwrap();
        let ack = Ctl::decode(&ack);
        assert_eq!((ack.kind, ack.a), (K_HELLO_ACK, HELLO_MEM_REFUSED));
    }
}

/// Descriptors a peer attaches to records that take none (here: doorbells) are closed,
/// not collected: a client cannot make the server hold descriptors without bound.
#[test]
fn descriptors_attached_to_other_records_are_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let mut l = ShmListener::bind(&sock).unwrap();
    let c = UnixStream::connect(&sock).unwrap();
    let area_len = mem::ring_area_len(RING_CAP);
    let area = mem::sealed_memfd("rings", area_len).unwrap();
    let own_mem = PeerMem::open_own().unwrap();
    let hello = Ctl::new(K_HELLO, 0, RING_CAP as u64, area_len as u64, 0);
    send_ctl_fds(&c, hello, &[area.as_fd(), own_mem.as_fd()]).unwrap();
    let mut conn = None;
    wait_until("the connection", || {
        conn = l.accept().unwrap();
        conn.is_some()
    });
    let mut conn = conn.unwrap();
    wait_until("the HELLO", || {
        conn.poll_event().unwrap();
        conn.peer_mem.is_some()
    });
    let mut hello_ack = [0u8; REC];
    (&c).read_exact(&mut hello_ack).unwrap();
    assert_eq!(Ctl::decode(&hello_ack).a, HELLO_OK);
    const SENT: usize = 300;
    // From another thread: the socket buffer fills before the server reads.
    let sender = std::thread::spawn(move || {
        let extra = mem::sealed_memfd("extra", 4096).unwrap();
        for _ in 0..SENT {
            send_ctl(&c, Ctl::new(K_DOORBELL, 0, 0, 0, 0), Some(extra.as_fd())).unwrap();
        }
        c
    });
    let mut most = 0;
    while !sender.is_finished() {
        conn.poll_event().unwrap();
        most = most.max(conn.ctl.fds.len());
    }
    let c = sender.join().unwrap();
    // A DEREG of an unknown key is answered after every doorbell before it was read.
    send_ctl(&c, Ctl::new(K_DEREG, 0, 999, 0, 0), None).unwrap();
    let mut ack = [0u8; REC];
    c.set_nonblocking(true).unwrap();
    let mut got = 0;
    wait_until("all records read", || {
        conn.poll_event().unwrap();
        most = most.max(conn.ctl.fds.len());
        if let Ok(n) = (&c).read(&mut ack[got..]) {
            got += n;
        }
        got == REC
    });
    assert_eq!(Ctl::decode(&ack).kind, K_REG_ACK);
    assert!(most <= 1, "the server held up to {most} stray descriptors");
}

/// A process whose uid is not allowed is told so and closed at accept; allowing the uid
/// lets it in.
#[test]
fn uids_not_allowed_are_refused_at_accept() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let mut l = ShmListener::bind(&sock).unwrap();
    let me = rustix::process::geteuid().as_raw();
    assert!(l.uids_allowed.contains(&me) && l.uids_allowed.contains(&0), "own uid and root");
    // As if we were another user: only some other uid is allowed.
    l.uids_allowed = vec![54_321];
    let connect = |sock: PathBuf| {
        std::thread::spawn(move || ShmClient::connect(&sock, Duration::from_secs(10)).err())
    };
    let client = connect(sock.clone());
    wait_until("the refusal", || {
        assert!(l.accept().unwrap().is_none());
        l.uid_refusals() == 1
    });
    let e = client.join().unwrap().expect("refused");
    assert!(e.to_string().contains("--shm-allow-uid"), "{e}");
    l.allow_uids(&[me]).unwrap();
    let client = connect(sock.clone());
    let mut conn = None;
    wait_until("the connection", || {
        conn = l.accept().unwrap();
        if let Some(c) = conn.as_mut() {
            // The client thread returns (and drops its connection) once connected, so
            // the connection may already be closed here: that is the success case too.
            match c.poll_event() {
                Ok(_) | Err(TransportError::Closed) => {}
                Err(e) => panic!("allowed uid: {e}"),
            }
        }
        client.is_finished()
    });
    assert!(client.join().unwrap().is_none(), "allowed uid connects");
    assert_eq!(l.uid_refusals(), 1);
}
