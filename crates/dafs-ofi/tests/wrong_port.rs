//! A client pointed at something other than a dafs libfabric listener (dafsd's TCP
//! port, another service, a silent peer, nothing) gets a clear error naming the
//! address, and at once where the peer answers, instead of a bare time-out.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use dafs_ofi::OfiClient;

/// Connect to a peer played by `serve` on its own thread: (error text, time taken).
fn connect_to(
    timeout: Duration,
    serve: impl FnOnce(TcpListener) + Send + 'static,
) -> (String, Duration) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let peer = thread::spawn(move || serve(l));
    let t0 = Instant::now();
    let r = OfiClient::connect(&addr, None, timeout);
    let took = t0.elapsed();
    let e = r.err().expect("connected to something that is no libfabric listener");
    peer.join().unwrap();
    (e.to_string(), took)
}

#[test]
fn a_dafs_tcp_port_refusing_the_preamble_is_a_clear_error_at_once() {
    // What dafsd's TCP listener does: read a 32-byte frame header, find no frame kind
    // in it, close.
    let (e, took) = connect_to(Duration::from_secs(10), |l| {
        let (mut s, _) = l.accept().unwrap();
        let mut hdr = [0u8; 32];
        s.read_exact(&mut hdr).unwrap();
    });
    assert!(e.contains("not a dafs libfabric listener"), "{e}");
    assert!(e.contains("closed the connection"), "{e}");
    assert!(took < Duration::from_secs(5), "took {took:?}: waited for the time-out");
}

#[test]
fn another_service_answering_is_a_clear_error_at_once() {
    let (e, took) = connect_to(Duration::from_secs(10), |l| {
        let (mut s, _) = l.accept().unwrap();
        s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap();
        thread::sleep(Duration::from_millis(200));
    });
    assert!(e.contains("not a dafs libfabric listener"), "{e}");
    assert!(e.contains("answered something else"), "{e}");
    assert!(took < Duration::from_secs(5), "took {took:?}: waited for the time-out");
}

#[test]
fn a_silent_peer_is_named_after_the_time_out() {
    let (e, took) = connect_to(Duration::from_millis(500), |l| {
        let (_s, _) = l.accept().unwrap();
        thread::sleep(Duration::from_secs(1));
    });
    assert!(e.contains("not a dafs libfabric listener") && e.contains("no hello within"), "{e}");
    assert!(took >= Duration::from_millis(500), "{took:?}");
}

#[test]
fn nothing_listening_names_the_address() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let e = OfiClient::connect(&addr, None, Duration::from_secs(2)).err().unwrap().to_string();
    assert!(e.contains(&addr) && e.contains("cannot reach"), "{e}");
}
