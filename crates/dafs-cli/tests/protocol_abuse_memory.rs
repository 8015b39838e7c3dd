//! Peers that never read their replies or stall mid-frame: the server's memory and CPU
//! stay bounded (dafsd's RSS and CPU ticks from /proc) and other clients are served.

mod abuse;
mod common;

use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::TestServer;

use dafs_proto::types::open_flags;
use dafs_proto::{AuthMethod, Header, Opcode, RemoteRegion, Request};
use dafs_transport::frame::FrameHeader;

use abuse::*;

// ------------------------------------------------------------------------------------
// 5. Clients that never read: bounded server memory
// ------------------------------------------------------------------------------------

/// A connection over which the peer's receive window stays tiny, so the server's
/// replies pile up in the server and not in kernel buffers.
fn connect_small_rcvbuf(addr: &str) -> TcpStream {
    use std::os::fd::FromRawFd;
    let a: SocketAddr = addr.parse().unwrap();
    let SocketAddr::V4(v4) = a else { panic!("IPv4 expected") };
    // SAFETY: plain socket/setsockopt/connect on a descriptor we create and then hand
    // to TcpStream, which owns it from then on.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let sz: libc::c_int = 4096;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &sz as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as u32,
        );
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
            sin_zero: [0; 8],
        };
        let r = libc::connect(
            fd,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

/// Send `batch` repeatedly until the server stops taking it (its backpressure) or
/// `max_bytes` went out. Returns bytes sent.
fn flood(srv: &TestServer, s: &mut TcpStream, batch: &[u8], max_bytes: usize) -> usize {
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut sent = 0;
    while sent < max_bytes {
        match s.write(batch) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => {
                server_alive(srv);
                panic!(
                    "flood write failed after {sent} bytes: {e}\nserver stderr:\n{}",
                    srv.stderr_log()
                );
            }
        }
    }
    sent
}

const RSS_LIMIT_KB: u64 = 200 * 1024;

#[test]
fn never_reading_client_null_flood_is_bounded() {
    let srv = TestServer::start(&[]);
    let pid = srv.pid().unwrap();
    let before = rss_kb(pid);
    let mut s = connect_small_rcvbuf(&srv.addr());
    // Session-less NULLs are answered without any slot, so every one produces a reply
    // that the client never reads.
    let one = msg_frame(&enc(&Header::request(Opcode::Null, 0, 0, 0, 0), &Request::Null));
    let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 2000).collect();
    let t = Instant::now();
    let sent = flood(&srv, &mut s, &batch, 160 << 20);
    std::thread::sleep(Duration::from_millis(300));
    let rss = rss_kb(pid);
    eprintln!(
        "null flood: sent {} MB ({} requests) in {:?}; server RSS {} -> {} kB",
        sent >> 20,
        sent / one.len(),
        t.elapsed(),
        before,
        rss
    );
    assert!(
        sent < 160 << 20,
        "the server kept reading {} MB from a client that never reads",
        sent >> 20
    );
    assert!(
        rss < RSS_LIMIT_KB,
        "server RSS {rss} kB after a never-reading client (limit {RSS_LIMIT_KB} kB)"
    );
    // The paused connection must not make the server spin.
    let t0 = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(pid) - t0;
    assert!(
        spent < 50,
        "server used {spent} ticks of CPU in 1 s while a never-reading client was paused"
    );
    assert_serves(&srv, "null flood");
    drop(s);
    assert_serves(&srv, "null flood after disconnect");
}

#[test]
fn never_reading_client_slot_refusals_are_bounded() {
    let srv = TestServer::start(&[]);
    let pid = srv.pid().unwrap();
    let mut raw = Raw::from_stream(connect_small_rcvbuf(&srv.addr()));
    raw.create(65536, 2, AuthMethod::None).unwrap();
    // Thousands of requests that are refused: misordered, bad slot, bad session.
    let mut batch = Vec::new();
    for i in 0..3000u32 {
        let h = Header::request(
            Opcode::Null,
            if i % 3 == 0 { 42 } else { raw.sid },
            i % 5,
            1000 + i,
            0,
        );
        batch.extend_from_slice(&msg_frame(&enc(&h, &Request::Null)));
    }
    let sent = flood(&srv, &mut raw.s, &batch, 160 << 20);
    std::thread::sleep(Duration::from_millis(300));
    let rss = rss_kb(pid);
    eprintln!("refusal flood: sent {} MB; server RSS {rss} kB", sent >> 20);
    assert!(rss < RSS_LIMIT_KB, "server RSS {rss} kB (limit {RSS_LIMIT_KB} kB)");
    assert_serves(&srv, "refusal flood");
}

/// READ_DIRECT of a large length from a tiny file by a client that never reads: each
/// placement is tiny, so it must not pin a full-length buffer in the server.
#[test]
fn never_reading_client_direct_reads_are_bounded() {
    let srv = TestServer::start(&[]);
    let pid = srv.pid().unwrap();
    std::fs::write(srv.dir().join("tiny"), b"x").unwrap();
    let mut raw = Raw::from_stream(connect_small_rcvbuf(&srv.addr()));
    let s = raw.create(65536, 2, AuthMethod::None).unwrap();
    let root = raw.root();
    let open_id = raw.open(root, b"tiny", open_flags::READ);
    let before = rss_kb(pid);
    raw.s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut rss = before;
    let mut sent = 0;
    // 400 requests in batches, watching the server's memory so that a leak shows up as
    // a failure instead of exhausting the machine.
    'outer: for _ in 0..40 {
        let mut batch = Vec::new();
        for _ in 0..10 {
            let m = raw.next(
                0,
                &Request::ReadDirect {
                    open_id,
                    offset: 0,
                    len: s.direct_bytes_max,
                    region: RemoteRegion { key: 12345, offset: 0 },
                },
            );
            batch.extend_from_slice(&msg_frame(&m));
        }
        match raw.s.write_all(&batch) {
            Ok(()) => sent += 10,
            Err(_) => break 'outer, // the server stopped reading: fine
        }
        std::thread::sleep(Duration::from_millis(15));
        rss = rss_kb(pid);
        if rss > before + 150 * 1024 {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    rss = rss.max(rss_kb(pid));
    eprintln!(
        "direct-read flood: {sent} requests of {} B each; server RSS {before} -> {rss} kB",
        s.direct_bytes_max
    );
    assert!(rss < before + 150 * 1024, "server RSS grew from {before} kB to {rss} kB after {sent} tiny READ_DIRECTs the client never read");
    assert_serves(&srv, "direct read flood");
}

/// Connections that announce a maximal message and then stall must not each pin
/// a maximal buffer before they even have a session.
#[test]
fn stalled_large_frames_before_session_are_cheap() {
    let srv = TestServer::start(&[]);
    let pid = srv.pid().unwrap();
    let before = rss_kb(pid);
    let mut conns = Vec::new();
    for _ in 0..48 {
        let mut s = TcpStream::connect(srv.addr()).unwrap();
        s.write_all(&FrameHeader::msg(MAX).encode()).unwrap();
        s.write_all(&[0u8; 48]).unwrap();
        conns.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    let rss = rss_kb(pid);
    eprintln!("48 stalled 4 MiB frames: server RSS {before} -> {rss} kB");
    assert!(
        rss < before + 64 * 1024,
        "48 stalled connections grew the server from {before} kB to {rss} kB"
    );
    assert_serves(&srv, "stalled frames");
    drop(conns);
}
