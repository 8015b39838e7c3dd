//! The etcd client against a real etcd.

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::Etcd;
use dafs_cluster::etcd::{EtcdClient, EtcdError};

const TIMEOUT: Duration = Duration::from_millis(1500);

#[test]
fn keys_prefixes_and_compare_and_swap() {
    let etcd = Etcd::start();
    let c = etcd.client(TIMEOUT);
    assert_eq!(c.get(b"/t/a").unwrap(), None);
    c.put(b"/t/a", b"1", None).unwrap();
    c.put(b"/t/b", b"\xff\x00binary", None).unwrap();
    c.put(b"/u/c", b"3", None).unwrap();
    let a = c.get(b"/t/a").unwrap().unwrap();
    assert_eq!(a.value, b"1");
    let keys: Vec<Vec<u8>> = c.get_prefix(b"/t/").unwrap().into_iter().map(|kv| kv.key).collect();
    assert_eq!(keys, [b"/t/a".to_vec(), b"/t/b".to_vec()]);
    assert_eq!(c.get(b"/t/b").unwrap().unwrap().value, b"\xff\x00binary");

    // Compare-and-swap on mod_revision: only the writer that saw the last write wins.
    assert!(c.put_if_mod_revision(b"/t/a", b"2", a.mod_revision, None).unwrap());
    assert!(!c.put_if_mod_revision(b"/t/a", b"3", a.mod_revision, None).unwrap());
    assert_eq!(c.get(b"/t/a").unwrap().unwrap().value, b"2");
    // 0 means "only if absent".
    assert!(!c.put_if_mod_revision(b"/t/a", b"4", 0, None).unwrap());
    assert!(c.put_if_mod_revision(b"/t/new", b"5", 0, None).unwrap());

    c.delete(b"/t/a").unwrap();
    assert_eq!(c.get(b"/t/a").unwrap(), None);
}

#[test]
fn leases_expire_unless_kept_alive() {
    let etcd = Etcd::start();
    let c = etcd.client(TIMEOUT);
    let kept = c.grant(1).unwrap();
    let dropped = c.grant(1).unwrap();
    c.put(b"/l/kept", b"k", Some(kept)).unwrap();
    c.put(b"/l/dropped", b"d", Some(dropped)).unwrap();
    assert_eq!(c.get(b"/l/kept").unwrap().unwrap().lease, kept);
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.get(b"/l/dropped").unwrap().is_some() {
        assert!(Instant::now() < deadline, "a 1 s lease outlived 10 s");
        assert!(c.keep_alive(kept).unwrap() >= 1);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(c.get(b"/l/kept").unwrap().is_some(), "a renewed lease expired");
    assert_eq!(c.keep_alive(dropped), Err(EtcdError::LeaseExpired(dropped)));
    c.revoke(kept).unwrap();
    assert_eq!(c.get(b"/l/kept").unwrap(), None);
    // Revoking twice (or an unknown lease) is harmless; putting under it is refused.
    c.revoke(kept).unwrap();
    assert!(matches!(c.put(b"/l/x", b"x", Some(kept)), Err(EtcdError::Refused { .. })));
}

#[test]
fn etcd_down_is_a_clear_error_within_the_timeout() {
    let mut etcd = Etcd::start();
    let c = etcd.client(TIMEOUT);
    c.put(b"/x", b"1", None).unwrap();
    etcd.kill();
    let t0 = Instant::now();
    let err = c.get(b"/x").unwrap_err();
    assert!(t0.elapsed() <= TIMEOUT + Duration::from_millis(200), "{:?}", t0.elapsed());
    assert!(matches!(err, EtcdError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains(&etcd.endpoint), "{err}");

    // A peer that accepts and never answers: a timeout, not a hang.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let c =
        EtcdClient::new(vec![silent.local_addr().unwrap().to_string()], Duration::from_millis(300));
    let t0 = Instant::now();
    let err = c.grant(5).unwrap_err();
    let took = t0.elapsed();
    assert!(matches!(err, EtcdError::Timeout { timeout_ms: 300, .. }), "{err:?}");
    assert!(took >= Duration::from_millis(250) && took < Duration::from_millis(800), "{took:?}");
}

#[test]
fn a_dead_endpoint_is_skipped() {
    let etcd = Etcd::start();
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let c = EtcdClient::new(vec![dead, etcd.endpoint.clone()], TIMEOUT);
    c.put(b"/f", b"1", None).unwrap();
    assert_eq!(c.get(b"/f").unwrap().unwrap().value, b"1");
}
