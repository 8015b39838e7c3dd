//! libfabric's `shm` provider creates each endpoint's region exclusively under
//! /dev/shm. A process killed with SIGKILL leaves its regions there; a later process
//! that gets the same (recycled) pid must still open endpoints. Before the shim named
//! shm endpoints itself, libfabric 1.17 named them "PID:DOMAIN:EP" and the open failed
//! with EBUSY ("Device or resource busy").

mod common;

use dafs_transport::{ClientTransport, ServerEvent};

/// Regions a killed process with this process's pid would have left (every domain and
/// endpoint index this test can reach), removed again on drop.
struct StaleRegions(Vec<std::path::PathBuf>);

impl StaleRegions {
    fn plant() -> StaleRegions {
        let pid = std::process::id();
        let mut made = Vec::new();
        for dom in 0..8 {
            for ep in 0..16 {
                let p = std::path::PathBuf::from(format!("/dev/shm/{pid}:{dom}:{ep}"));
                if std::fs::OpenOptions::new().write(true).create_new(true).open(&p).is_ok() {
                    made.push(p);
                }
            }
        }
        StaleRegions(made)
    }
}

impl Drop for StaleRegions {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[test]
fn shm_endpoints_open_beside_a_dead_process_s_regions() {
    let stale = StaleRegions::plant();
    assert!(!stale.0.is_empty(), "could not plant regions under /dev/shm");
    let (mut c, mut s) = common::pair("shm");
    c.send(b"hello").unwrap();
    match common::server_event(&mut c, &mut s) {
        ServerEvent::Message(m) => assert_eq!(&m[..], b"hello"),
        e => panic!("expected the message, got {e:?}"),
    }
}
