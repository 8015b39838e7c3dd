//! Shared by the provider's integration tests.

use std::time::{Duration, Instant};

use dafs_ofi::{OfiClient, OfiListener, OfiServerConn};
use dafs_transport::{ClientTransport, ServerConn, ServerEvent, ServerListener, Wait};

/// A connected client and server of provider `name` ("tcp", "shm"), both in this
/// process: the listener accepts on its own thread while the client connects.
pub fn pair(name: &str) -> (OfiClient, OfiServerConn) {
    let mut l = OfiListener::bind(&format!("ofi+{name}://127.0.0.1:0")).unwrap();
    let addr = l.local_addr();
    let t = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(c) = l.accept().unwrap() {
                return c;
            }
            assert!(Instant::now() < deadline, "no connection");
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let c = OfiClient::connect(&addr, Some(&dafs_ofi::provider_for(name)), Duration::from_secs(10))
        .unwrap();
    (c, t.join().unwrap())
}

/// Drive both ends until the server has an event (the client progresses meanwhile:
/// manual-progress providers move data only while the target polls).
pub fn server_event(c: &mut OfiClient, s: &mut OfiServerConn) -> ServerEvent {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(e) = s.poll_event().unwrap() {
            return e;
        }
        s.flush().unwrap();
        assert!(c.recv(Wait::NoWait).unwrap().is_none(), "no message expected yet");
        assert!(Instant::now() < deadline, "server event timed out");
    }
}
