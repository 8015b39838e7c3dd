//! Who may hold what before proving anything: unauthenticated peers cannot fill the
//! session table or the connection limit, idle and trickling sockets are closed at the
//! handshake deadline, sessions of vanished clients make room for live ones, many
//! never-reading clients stay within the global memory budget, malformed traffic
//! cannot flood the log, and session ids neither leak nor can be guessed.

mod common;
mod raw;

use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use common::TestServer;
use dafs_client::{OpenOptions, Provider};
use dafs_proto::types::open_flags;
use dafs_proto::{auth, decode_reply, AuthMethod, Header, Opcode, Request, Status};
use dafs_transport::frame::FrameHeader;
use raw::{connect_from, enc, free_addr, metric, msg_frame, rss_kb, Raw, MAX};

const SECRET: &[u8] = b"admission-test-secret";

/// A well-behaved client (over TCP) connects and is served within 3 s, retrying
/// refusals meanwhile (a just-closed connection's session is released, and idle
/// connections are evicted, asynchronously: within about 100 ms).
fn assert_connects(srv: &TestServer, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut c = loop {
        match srv.client_with(|cfg| cfg.provider = Provider::Tcp) {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("{what}: a legitimate client cannot connect within 3 s: {e}"),
        }
    };
    assert!(c.stat("/").unwrap_or_else(|e| panic!("{what}: stat /: {e}")).is_dir());
}

fn loopback(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 1, i)
}

/// Item 2: SESSION_CREATEs without the secret's proof do not count against
/// `sessions_max`, while connected or after their connection is gone.
#[test]
fn unauthenticated_sessions_do_not_fill_the_session_table() {
    let srv = TestServer::start_with_secret(SECRET, &["--max-sessions", "4"]);
    let mut squatters = Vec::new();
    for i in 0..12 {
        let mut r = Raw::new(connect_from(&srv.addr(), loopback(i + 1), None));
        // Whether the server takes the create or not, the squatter never authenticates.
        let _ = r.create(AuthMethod::HmacSha256);
        squatters.push(r);
    }
    assert_connects(&srv, "12 unauthenticated sessions open");
    drop(squatters);
    std::thread::sleep(Duration::from_millis(200));
    assert_connects(&srv, "12 unauthenticated sessions dropped");
    // An authenticated session still counts: 4 of them fill the table.
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut r = Raw::connect(&srv.addr());
        r.create(AuthMethod::HmacSha256).unwrap();
        assert_eq!(r.authenticate(SECRET), Status::Ok);
        held.push(r);
    }
    let mut c = srv.client();
    let mut r = Raw::connect(&srv.addr());
    r.create(AuthMethod::HmacSha256).unwrap();
    // (Nothing is parked: the clients above ended their sessions when dropped.)
    assert_eq!(r.authenticate(SECRET), Status::Limit, "the fifth authenticated session");
    c.null().unwrap();
}

/// Items 2 and 3: a connection that does not authenticate within
/// `handshake_timeout_ms` — silent, trickling one byte at a time, or created but never
/// authenticated — is closed and counted.
#[test]
fn handshake_deadline_closes_idle_and_slow_connections() {
    let metrics = free_addr();
    let srv = TestServer::start_with_secret(
        SECRET,
        &["--handshake-timeout-ms", "300", "--metrics-listen", &metrics],
    );
    let mut idle = Raw::connect(&srv.addr());
    let mut created = Raw::connect(&srv.addr());
    created.create(AuthMethod::HmacSha256).unwrap();
    let mut slow = Raw::connect(&srv.addr());
    let t = Instant::now();
    let frame = msg_frame(&enc(&Header::request(Opcode::Null, 0, 0, 0, 0), &Request::Null));
    let mut slow_closed = false;
    for b in frame.iter().cycle().take(40) {
        if slow.s.write_all(&[*b]).is_err() {
            slow_closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    slow_closed = slow_closed || slow.closed_within(Duration::from_secs(2));
    assert!(slow_closed, "a one-byte-per-50-ms peer was not closed");
    assert!(idle.closed_within(Duration::from_secs(2)), "an idle connection was not closed");
    assert!(created.closed_within(Duration::from_secs(2)), "an unauthenticated session stays");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(metric(&metrics, "handshake_timeouts") >= 3);
    // An authenticated client is not subject to the deadline.
    let mut c = srv.client();
    std::thread::sleep(Duration::from_millis(700));
    c.null().unwrap();
}

/// Item 3: idle sockets cannot take the whole connection limit: those not yet
/// authenticated get at most a quarter of `connections_max` by default.
#[test]
fn idle_connections_cannot_lock_out_clients() {
    let srv = TestServer::start(&["--max-connections", "16"]);
    let idle: Vec<TcpStream> =
        (0..20).map(|i| connect_from(&srv.addr(), loopback(i + 1), None)).collect();
    std::thread::sleep(Duration::from_millis(200));
    for i in 0..6 {
        assert_connects(&srv, &format!("20 idle sockets, client {i}"));
    }
    drop(idle);
}

/// Item 3: at most `connections_per_addr_max` connections from one source address;
/// another address is unaffected.
#[test]
fn connections_per_address_are_capped() {
    let metrics = free_addr();
    let srv = TestServer::start(&["--max-connections-per-addr", "3", "--metrics-listen", &metrics]);
    let mut from_one: Vec<Raw> =
        (0..5).map(|_| Raw::new(connect_from(&srv.addr(), loopback(9), None))).collect();
    let closed: Vec<bool> =
        from_one.iter_mut().map(|r| r.closed_within(Duration::from_millis(300))).collect();
    assert_eq!(closed, [false, false, false, true, true], "the 4th and 5th are refused");
    assert_eq!(metric(&metrics, "per_addr_refusals"), 2);
    let mut other = Raw::new(connect_from(&srv.addr(), loopback(10), None));
    other.create(AuthMethod::None).unwrap();
    assert_connects(&srv, "one address at its cap");
}

/// Item 8: sessions whose clients vanished without SESSION_DESTROY (parked for their
/// lease) make room for a live client at `sessions_max` (oldest first: see the unit
/// test `sessions::tests::oldest_parked_is_taken_first_and_bound_never`).
#[test]
fn parked_sessions_make_room_at_the_session_limit() {
    let metrics = free_addr();
    let srv = TestServer::start(&["--max-sessions", "4", "--metrics-listen", &metrics]);
    let mut sids = Vec::new();
    for _ in 0..4 {
        let mut r = Raw::connect(&srv.addr());
        r.create(AuthMethod::None).unwrap();
        sids.push(r.sid);
        drop(r); // no SESSION_DESTROY: the session is parked for its 90 s lease
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(metric(&metrics, "sessions_live"), 4);
    assert_connects(&srv, "4 parked sessions");
    assert_eq!(metric(&metrics, "sessions_reclaimed"), 1);
    // Exactly one went (a bind to it answers BAD_SESSION); the others are still parked
    // (a bind without their token answers AUTH_FAILED).
    let mut r = Raw::connect(&srv.addr());
    let id = r.client_id.clone();
    let bind = Request::SessionBind { client_nonce: [1; 32], proof: [0; 32], client_id: &id };
    let gone = sids
        .iter()
        .filter(|&&sid| {
            let m = enc(&Header::request(Opcode::SessionBind, sid, 0, 0, 0), &bind);
            let st = decode_reply(&r.roundtrip(&m), MAX).unwrap().1.status();
            assert!(matches!(st, Status::BadSession | Status::AuthFailed), "{st:?}");
            st == Status::BadSession
        })
        .count();
    assert_eq!(gone, 1);
}

/// Item 4: before authentication the server buffers no message larger than a handshake.
#[test]
fn no_large_buffer_before_authentication() {
    let srv = TestServer::start_with_secret(SECRET, &[]);
    let mut r = Raw::connect(&srv.addr());
    r.s.write_all(&FrameHeader::msg(64 * 1024).encode()).unwrap();
    r.s.write_all(&[0u8; 2048]).unwrap();
    assert!(r.closed_within(Duration::from_secs(2)), "a 64 KiB message before a session");
    let mut r = Raw::connect(&srv.addr());
    r.create(AuthMethod::HmacSha256).unwrap();
    r.s.write_all(&FrameHeader::msg(64 * 1024).encode()).unwrap();
    assert!(r.closed_within(Duration::from_secs(2)), "a 64 KiB message before SESSION_AUTH");
    let mut r = Raw::connect(&srv.addr());
    r.create(AuthMethod::HmacSha256).unwrap();
    assert_eq!(r.authenticate(SECRET), Status::Ok);
    assert_eq!(decode_reply(&r.call(0, &Request::Null), MAX).unwrap().1.status(), Status::Ok);
}

/// Item 4: many clients that never read their replies stay within `memory_bytes_max`
/// together (each alone could queue `backlog_bytes_max`, 32 MiB).
#[test]
fn never_reading_clients_stay_within_the_memory_budget() {
    const CLIENTS: usize = 8;
    let metrics = free_addr();
    // Without the I/O pool: the flood below reuses slot 0 without reading its replies, so
    // each read must run before the next is read for its large reply to be queued. With
    // the pool a read runs beside the worker, and the next one on its still-busy slot is
    // answered SLOT_BUSY (a few bytes): correct, but the budget would never fill.
    let srv = TestServer::start(&[
        "--memory-max",
        "16777216",
        "--metrics-listen",
        &metrics,
        "--io-threads",
        "0",
    ]);
    let pid = srv.pid().unwrap();
    std::fs::write(srv.dir().join("data"), vec![3u8; 64 * 1024]).unwrap();
    // A well-behaved client, connected before the budget fills up.
    let mut pipelined = Raw::connect(&srv.addr());
    pipelined.create(AuthMethod::None).unwrap();
    let before = rss_kb(pid);
    // Sessions first: once the budget is full, SESSION_CREATE answers LIMIT.
    let clients: Vec<(Raw, u64)> = (0..CLIENTS)
        .map(|i| {
            let mut r = Raw::new(connect_from(&srv.addr(), loopback(40 + i as u8), Some(4096)));
            r.create(AuthMethod::None).unwrap();
            let root = r.root();
            let open_id = r.open(root, b"data", open_flags::READ);
            (r, open_id)
        })
        .collect();
    let threads: Vec<_> = clients
        .into_iter()
        .map(|(mut r, open_id)| {
            std::thread::spawn(move || {
                r.s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
                let mut sent = 0usize;
                // Each READ_INLINE of ~60 KiB is ~100 bytes: 2,000 of them ask for 120 MiB.
                for _ in 0..20 {
                    let mut batch = Vec::new();
                    for _ in 0..100 {
                        let m = r.next(0, &Request::ReadInline { open_id, offset: 0, len: 60_000 });
                        batch.extend_from_slice(&msg_frame(&m));
                    }
                    match r.s.write_all(&batch) {
                        Ok(()) => sent += 100,
                        Err(_) => break, // the server stopped reading us
                    }
                }
                (r, sent)
            })
        })
        .collect();
    let held: Vec<(Raw, usize)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let rss = rss_kb(pid);
    let used = metric(&metrics, "memory_bytes_used");
    let sent: usize = held.iter().map(|(_, n)| n).sum();
    eprintln!("{CLIENTS} never-reading clients sent {sent} reads; RSS {before} -> {rss} kB; budget used {used} B");
    assert!(used <= 16 * 1024 * 1024 + CLIENTS as u64 * 128 * 1024, "budget used {used} B");
    assert!(rss < before + 64 * 1024, "server RSS grew from {before} kB to {rss} kB");
    assert!(metric(&metrics, "memory_pauses") >= 1);
    // Over the budget a connection that drains its replies is read again: ten requests
    // sent at once all get their replies (none waits for an event that never comes).
    let mut batch = Vec::new();
    for i in 0..10 {
        batch.extend_from_slice(&msg_frame(&pipelined.next(i % 2, &Request::Null)));
    }
    pipelined.s.write_all(&batch).unwrap();
    for _ in 0..10 {
        let r = pipelined.reply();
        assert_eq!(decode_reply(&r, MAX).unwrap().1.status(), Status::Ok);
    }
    drop(held);
    assert_connects(&srv, "never-reading clients gone");
}

/// Item 7: malformed traffic from one address logs a bounded amount, the rest is
/// counted as suppressed.
#[test]
fn malformed_traffic_cannot_flood_the_log() {
    let metrics = free_addr();
    let srv = TestServer::start(&["--metrics-listen", &metrics]);
    let garbage = [0xffu8; 64];
    for _ in 0..2000 {
        let mut s = connect_from(&srv.addr(), loopback(77), None);
        let _ = s.write_all(&garbage);
        let mut r = Raw::new(s);
        assert!(r.closed_within(Duration::from_secs(2)), "garbage closes the connection");
    }
    let log = srv.stderr_log();
    eprintln!("2000 garbage connections: {} bytes of log", log.len());
    assert!(log.len() < 32 * 1024, "{} bytes of log for 2000 malformed connections", log.len());
    assert!(
        log.contains("similar warnings suppressed") || metric(&metrics, "warnings_suppressed") > 0
    );
    assert!(metric(&metrics, "warnings_suppressed") >= 1900);
    assert_connects(&srv, "after the garbage");
}

/// Item 5: LOCKT never reveals another session's id (an opaque owner instead), ids are
/// not sequential, and a bind to a guessed id fails.
#[test]
fn session_ids_are_neither_leaked_nor_guessable() {
    let srv = TestServer::start(&[]);
    let mut a = srv.client_tcp();
    let mut b = srv.client_tcp();
    std::fs::write(srv.dir().join("l"), b"x").unwrap();
    let fa = a.open("l", OpenOptions::read_write()).unwrap();
    let fb = b.open("l", OpenOptions::read_write()).unwrap();
    a.lock(&fa, 0, 10, true).unwrap();
    let c1 = b.test_lock(&fb, 0, 1, true).unwrap().expect("a conflict");
    let c2 = b.test_lock(&fb, 5, 1, true).unwrap().expect("a conflict");
    assert_ne!(c1.owner, a.session_id(), "LOCKT revealed the owner's session id");
    assert_ne!(c1.owner, 0, "a conflict names some owner");
    assert_eq!(c1.owner, c2.owner, "the same owner reads the same");
    assert!(b.test_lock(&fb, 20, 1, true).unwrap().is_none(), "outside the lock");
    // Session ids are random: neither neighbour of an id is the next session's.
    let mut r1 = Raw::connect(&srv.addr());
    r1.create(AuthMethod::None).unwrap();
    let mut r2 = Raw::connect(&srv.addr());
    r2.create(AuthMethod::None).unwrap();
    assert!(r1.sid.abs_diff(r2.sid) > 1 << 20, "ids {} and {} look sequential", r1.sid, r2.sid);
    // Binding a guessed id (a neighbour of a live one) without its token fails.
    let id = r1.client_id.clone();
    let mut thief = Raw::connect(&srv.addr());
    for guess in [r1.sid + 1, r1.sid - 1, r1.sid ^ 2] {
        let proof =
            auth::bind_proof(&auth::bind_key(None, &[0; 32]), guess, &[0; 32], &[1; 32], &id);
        let bind = Request::SessionBind { client_nonce: [1; 32], proof, client_id: &id };
        let reply =
            thief.roundtrip(&enc(&Header::request(Opcode::SessionBind, guess, 0, 0, 0), &bind));
        assert_eq!(decode_reply(&reply, MAX).unwrap().1.status(), Status::BadSession);
    }
}
