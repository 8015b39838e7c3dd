//! The heartbeat thread against a real etcd.

mod common;

use std::time::{Duration, Instant};

use common::Etcd;
use dafs_cluster::heartbeat::Heartbeat;
use dafs_cluster::membership::Membership;
use dafs_cluster::{Member, NodeId, Policy};

fn member(id: &str, port: u16) -> Member {
    Member::new(NodeId::new(id).unwrap(), format!("127.0.0.1:{port}"))
}

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_beating_node_outlives_its_ttl_and_sees_others_leave() {
    let etcd = Etcd::start();
    let c = Membership::new(etcd.client(Duration::from_millis(1500)), "hb", Policy::Matched);
    let a = Heartbeat::start(c.clone(), member("a", 7420), 1).unwrap();
    // b joins without a heartbeat: it is gone after its 1 s lease, a's beat notices.
    let (_b, map) = c.join(member("b", 7421), 1).unwrap();
    assert_eq!(map.epoch(), 2);
    wait_until("b's expiry seen by a", Duration::from_secs(10), || a.map().epoch() == 3);
    assert_eq!(a.map().members().len(), 1);
    // Well past a's own TTL: still a member, no error, no rejoin.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.reconcile().unwrap().epoch(), 3);
    assert_eq!((a.last_error(), a.rejoins()), (None, 0));
    // A clean leave removes it at once.
    assert_eq!(a.leave().unwrap(), None);
    assert!(c.live_members().unwrap().is_empty());
}

#[test]
fn a_node_that_lost_its_lease_joins_again() {
    let etcd = Etcd::start();
    let c = Membership::new(etcd.client(Duration::from_millis(1500)), "rejoin", Policy::Matched);
    let a = Heartbeat::start(c.clone(), member("a", 7420), 1).unwrap();
    let first = a.lease();
    // Cut the node off as etcd would after a partition longer than the TTL.
    etcd.client(Duration::from_secs(1)).revoke(first).unwrap();
    wait_until("rejoin", Duration::from_secs(5), || a.rejoins() == 1);
    assert_ne!(a.lease(), first);
    let (map, _) = c.current_map().unwrap().unwrap();
    assert!(map.member(&NodeId::new("a").unwrap()).is_some());
    assert_eq!(map.epoch(), 2, "the rejoin is a new epoch");
    assert_eq!(map.members()[0].incarnation, a.lease() as u64);
    // Dropping without leave is a crash: the record goes when the lease expires.
    drop(a);
    wait_until("crashed node's expiry", Duration::from_secs(10), || {
        c.live_members().unwrap().is_empty()
    });
}
