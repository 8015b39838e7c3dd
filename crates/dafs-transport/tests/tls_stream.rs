//! The TCP provider over TLS at the transport level, driven by hand: placements (PUT)
//! and pulls (GET) of several MiB through tiny socket buffers, so every write is partial
//! and both ends see `WouldBlock` many times; the server's backlog accounting must
//! include what rustls still holds, and nothing may be left behind when it says "done".

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use dafs_transport::tcp::{TcpClient, TcpListener};
use dafs_transport::tls::{TlsClientOptions, TlsServerOptions};
use dafs_transport::{
    ClientTransport, RemoteRegion, ServerConn, ServerEvent, ServerListener, TransportError, Wait,
};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&key, &ca_cert, &ca_key)
            .unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca_cert.pem()).unwrap();
        std::fs::write(dir.path().join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), key.serialize_pem()).unwrap();
        Pki { dir }
    }
    fn server(&self) -> TlsServerOptions {
        TlsServerOptions {
            cert_file: self.dir.path().join("cert.pem"),
            key_file: self.dir.path().join("key.pem"),
            client_ca_file: None,
        }
    }
    fn client(&self) -> TlsClientOptions {
        TlsClientOptions {
            ca_file: Some(self.dir.path().join("ca.pem")),
            server_name: Some("localhost".into()),
            ..Default::default()
        }
    }
}

fn small_buffers<F: AsFd>(fd: &F) {
    // Small send buffers (the kernel doubles this): every write of a large frame is
    // partial. Receive buffers stay as they are: shrinking them on a live connection
    // makes loopback TCP crawl on zero-window probes, whatever runs on top.
    rustix::net::sockopt::set_socket_send_buffer_size(fd, 16 * 1024).unwrap();
}

/// A connected (client, server) pair over TLS.
fn pair(pki: &Pki) -> (TcpClient, dafs_transport::tcp::TcpServerConn) {
    let tls = std::env::var_os("DAFS_TEST_PLAIN").is_none(); // the same test over plain TCP, for comparison
    let mut l = TcpListener::bind("127.0.0.1:0").unwrap();
    if tls {
        l.set_tls(pki.server().build().unwrap());
    }
    let addr = l.local_addr();
    let copts = pki.client();
    // The client's handshake blocks until done; the server side progresses on this thread.
    let h = std::thread::spawn(move || {
        if tls {
            TcpClient::connect_tls(&addr, Duration::from_secs(10), &copts)
        } else {
            TcpClient::connect(&addr, Duration::from_secs(10))
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut conn = loop {
        if let Some(c) = l.accept().unwrap() {
            break c;
        }
        assert!(Instant::now() < deadline, "no connection");
        std::thread::sleep(Duration::from_millis(1));
    };
    while !h.is_finished() {
        assert!(conn.poll_event().unwrap().is_none());
        conn.flush().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    let client = h.join().unwrap().unwrap();
    assert_eq!(client.provider(), if tls { "tcp+tls" } else { "tcp" });
    (client, conn)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[1] ^ seed).collect()
}

#[test]
fn placements_and_pulls_through_tiny_socket_buffers() {
    let pki = Pki::new();
    let (mut client, mut conn) = pair(&pki);
    small_buffers(&unsafe_fd(&client));
    small_buffers(conn.mio());
    const N: usize = 6 << 20;
    let (key, ptr) = client.alloc_registered(N).unwrap();
    let data = pattern(N, 3);

    // Server: a 6 MiB placement, then a reply message, queued at once.
    let placed =
        conn.put(RemoteRegion { key, offset: 0 }, N, &mut |b| Ok(b.copy_from(&data))).unwrap();
    assert_eq!(placed, N);
    conn.send(b"reply after the placement").unwrap();
    assert!(!conn.flush().unwrap(), "6 MiB cannot fit in the socket buffers");
    assert!(conn.backlog_bytes() > 0);

    // Alternate: the client takes what arrived, the server writes more.
    let deadline = Instant::now() + Duration::from_secs(30);
    let msg = loop {
        if let Some(m) = client.recv(Wait::NoWait).unwrap() {
            break m;
        }
        // A server event loop reads whenever the socket is readable (here: the client's
        // handshake Finished, which the server needs before it may send data).
        assert!(conn.poll_event().unwrap().is_none());
        conn.flush().unwrap();
        assert!(
            Instant::now() < deadline,
            "placement stalled with {} bytes of backlog",
            conn.backlog_bytes()
        );
    };
    assert_eq!(msg, b"reply after the placement", "the placement is ordered before the reply");
    // SAFETY: the region is N bytes, allocated above and not deregistered.
    let region = unsafe { std::slice::from_raw_parts(ptr, N) };
    assert!(region == &data[..], "placed bytes differ");
    assert!(conn.flush().unwrap());
    assert_eq!(conn.backlog_bytes(), 0);
    assert_eq!(client.stats().placed_bytes, N as u64);

    // Server pulls 5 MiB back from another offset; the client answers while it polls.
    let back = pattern(N, 9);
    // SAFETY: as above; nothing is in flight on the region.
    unsafe { std::ptr::copy_nonoverlapping(back.as_ptr(), ptr, N) };
    conn.pull(RemoteRegion { key, offset: 1 << 20 }, 5 << 20, 42).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let got = loop {
        conn.flush().unwrap();
        let _ = client.recv(Wait::NoWait).unwrap();
        match conn.poll_event().unwrap() {
            Some(ServerEvent::Pulled { tag, data }) => {
                assert_eq!(tag, 42);
                break data.unwrap();
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => {}
        }
        assert!(Instant::now() < deadline, "pull stalled");
    };
    assert!(got == back[1 << 20..6 << 20], "pulled bytes differ");
    assert_eq!(conn.backlog_bytes(), 0);

    // Many small messages in one burst: the server drains every one before reporting
    // "nothing more", so no decrypted input is left where epoll cannot see it.
    for i in 0..200u32 {
        client.send(&i.to_le_bytes()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = 0u32;
    while seen < 200 {
        let _ = client.recv(Wait::NoWait).unwrap(); // flushes the client's queue
        while let Some(ev) = conn.poll_event().unwrap() {
            let ServerEvent::Message(m) = ev else { panic!("unexpected event") };
            assert_eq!(m, seen.to_le_bytes());
            seen += 1;
        }
        assert!(!conn.input_pending(), "poll_event returned None with input still buffered");
        assert!(Instant::now() < deadline, "only {seen} messages arrived");
    }

    // The client goes away: the server sees a clean close (close_notify), not an error.
    drop(client);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match conn.poll_event() {
            Err(TransportError::Closed) => break,
            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
            other => panic!("expected Closed, got {other:?}"),
        }
        assert!(Instant::now() < deadline);
    }
}

fn unsafe_fd(c: &TcpClient) -> std::os::fd::BorrowedFd<'_> {
    // SAFETY: the descriptor belongs to `c`, which outlives the borrow.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(c.raw_fd()) }
}

#[test]
fn plaintext_bytes_fail_the_server_handshake_cleanly() {
    let pki = Pki::new();
    let mut l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_tls(pki.server().build().unwrap());
    let mut plain = TcpClient::connect(&l.local_addr(), Duration::from_secs(5)).unwrap();
    plain.send(b"a DAFS message where a ClientHello belongs").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut conn = loop {
        if let Some(c) = l.accept().unwrap() {
            break c;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    };
    let err = loop {
        match conn.poll_event() {
            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
            Ok(Some(e)) => panic!("event from a plaintext peer: {e:?}"),
            Err(e) => break e,
        }
        assert!(Instant::now() < deadline);
    };
    assert!(matches!(err, TransportError::Tls(_)), "{err:?}");
    drop(conn);
    // The plaintext client gets the server's alert and says what it means.
    let e = match plain.recv(Wait::Timeout(Duration::from_secs(5))) {
        Ok(None) => panic!("no answer"),
        Ok(Some(m)) => panic!("message {m:?}"),
        Err(e) => e,
    };
    assert!(matches!(&e, TransportError::Tls(m) if m.contains("requires TLS")), "{e:?}");
}
