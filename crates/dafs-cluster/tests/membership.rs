//! Membership and placement epochs against a real etcd.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::Etcd;
use dafs_cluster::etcd::EtcdError;
use dafs_cluster::membership::{Membership, MembershipError};
use dafs_cluster::{ClusterConfig, ClusterPath, ClusterUrl, Member, NodeId, Policy};

const TIMEOUT: Duration = Duration::from_millis(1500);

fn member(id: &str, port: u16) -> Member {
    Member::new(NodeId::new(id).unwrap(), format!("127.0.0.1:{port}"))
}

fn cluster(etcd: &Etcd, name: &str) -> Membership {
    Membership::new(etcd.client(TIMEOUT), name, Policy::Matched)
}

fn ids(members: &[Member]) -> Vec<&str> {
    members.iter().map(|m| m.id.as_str()).collect()
}

#[test]
fn joins_and_leaves_bump_the_epoch() {
    let etcd = Etcd::start();
    let c = cluster(&etcd, "jl");
    assert!(c.current_map().unwrap().is_none());
    let (a, map) = c.join(member("a", 7420), 30).unwrap();
    assert_eq!((map.epoch(), ids(map.members())), (1, vec!["a"]));
    let (b, map) = c.join(member("b", 7421), 30).unwrap();
    assert_eq!((map.epoch(), ids(map.members())), (2, vec!["a", "b"]));
    // Nothing changed: heartbeats and reconciles keep the epoch.
    assert_eq!(c.heartbeat(&a).unwrap().epoch(), 2);
    assert_eq!(c.reconcile().unwrap().epoch(), 2);
    // Another process sees the same map, and places paths the same way.
    let other = cluster(&etcd, "jl");
    let (seen, _) = other.current_map().unwrap().unwrap();
    assert_eq!(seen, map);
    let p = ClusterPath::new("/pm0/17").unwrap();
    assert_eq!(seen.manager(&p), map.manager(&p));
    // An id held by a live node is refused, and the refusal leaves no lease behind.
    assert_eq!(
        c.join(member("a", 7499), 30).unwrap_err(),
        MembershipError::IdTaken(NodeId::new("a").unwrap())
    );
    assert_eq!(ids(&c.live_members().unwrap()), ["a", "b"]);
    // A clean leave bumps at once.
    let map = c.leave(b).unwrap().unwrap();
    assert_eq!((map.epoch(), ids(map.members())), (3, vec!["a"]));
    assert_eq!(c.leave(a).unwrap(), None, "the last member leaves no live map to write");
    // Clusters with other names are separate.
    assert!(cluster(&etcd, "other").current_map().unwrap().is_none());
}

#[test]
fn an_expired_lease_drops_the_node_and_bumps_the_epoch() {
    let etcd = Etcd::start();
    let c = cluster(&etcd, "exp");
    let (a, _) = c.join(member("a", 7420), 30).unwrap();
    let (b, map) = c.join(member("b", 7421), 1).unwrap();
    assert_eq!(map.epoch(), 2);
    // b stops renewing (it "crashed"); a keeps beating and notices.
    let deadline = Instant::now() + Duration::from_secs(10);
    let map = loop {
        let map = c.heartbeat(&a).unwrap();
        if map.epoch() > 2 {
            break map;
        }
        assert!(Instant::now() < deadline, "b's 1 s lease outlived 10 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!((map.epoch(), ids(map.members())), (3, vec!["a"]));
    // b finds out it was dropped when it next beats; it must join again.
    assert_eq!(
        c.heartbeat(&b).unwrap_err(),
        MembershipError::Etcd(EtcdError::LeaseExpired(b.lease))
    );
    let (_, map) = c.join(member("b", 7421), 30).unwrap();
    assert_eq!((map.epoch(), ids(map.members())), (4, vec!["a", "b"]));
}

#[test]
fn a_node_back_under_a_new_lease_is_a_new_epoch_even_if_unseen() {
    let etcd = Etcd::start();
    let c = cluster(&etcd, "again");
    let (a, map) = c.join(member("a", 7420), 30).unwrap();
    assert_eq!(map.members()[0].incarnation, a.lease as u64);
    // Its lease goes (a crash, a partition) and it is back before anyone reconciled:
    // the map must still change, since nothing of its old life survived.
    etcd.client(TIMEOUT).revoke(a.lease).unwrap();
    let (a2, map) = c.join(member("a", 7420), 30).unwrap();
    assert_eq!(map.epoch(), 2);
    assert_eq!(map.members()[0].incarnation, a2.lease as u64);
}

#[test]
fn nodes_from_cluster_toml_and_clients_from_a_url_see_one_map() {
    let etcd = Etcd::start();
    let toml = format!(
        "[cluster]\netcd = \"http://{}\"\nname = \"prod\"\npolicy = \"round-robin\"\n",
        etcd.endpoint
    );
    let config = ClusterConfig::parse(&toml).unwrap();
    let node = Membership::from_config(&config).expect("etcd membership");
    node.join(member("a", 7420), config.lease_ttl_s).unwrap();
    let (_, written) = node.join(member("b", 7421), config.lease_ttl_s).unwrap();
    assert_eq!(written.policy(), Policy::RoundRobin);
    let url = ClusterUrl::parse(&format!("dafs+etcd://{}/prod/some/dir", etcd.endpoint)).unwrap();
    let client = Membership::from_url(&url, TIMEOUT).expect("an etcd URL");
    let (seen, _) = client.current_map().unwrap().unwrap();
    assert_eq!(seen, written);
    assert!(Membership::from_url(&ClusterUrl::parse("dafs://h1,h2/").unwrap(), TIMEOUT).is_none());
    // A node configured with another policy joins the map as it is: no flip.
    let matched = Membership::new(etcd.client(TIMEOUT), "prod", Policy::Matched);
    let (_, map) = matched.join(member("c", 7422), 30).unwrap();
    assert_eq!((map.epoch(), map.policy()), (3, Policy::RoundRobin));
    let static_toml = ClusterConfig::parse("[cluster]\nmembers = [\"h:1\"]\n").unwrap();
    assert!(Membership::from_config(&static_toml).is_none());
}

#[test]
fn racing_bumps_give_consecutive_epochs() {
    let etcd = Etcd::start();
    let c = cluster(&etcd, "race");
    c.join(member("a", 7420), 30).unwrap();
    const PER_THREAD: usize = 15;
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (c, barrier) = (c.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                (0..PER_THREAD).map(|_| c.bump_epoch().unwrap().epoch()).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all = BTreeSet::new();
    for t in threads {
        for e in t.join().unwrap() {
            assert!(all.insert(e), "epoch {e} was written twice");
        }
    }
    // Started at 1 (the join); every bump took the next number, none was lost.
    let expected: BTreeSet<u64> = (2..2 + 2 * PER_THREAD as u64).collect();
    assert_eq!(all, expected);
    assert_eq!(c.current_map().unwrap().unwrap().0.epoch(), 1 + 2 * PER_THREAD as u64);
}

#[test]
fn nodes_reconciling_at_once_bump_a_change_exactly_once() {
    let etcd = Etcd::start();
    let c = cluster(&etcd, "once");
    c.join(member("a", 7420), 30).unwrap();
    c.join(member("b", 7421), 30).unwrap();
    // c joins while a and b (and c itself) reconcile concurrently.
    let (_reg, _) = c.join(member("c", 7422), 30).unwrap();
    let barrier = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (c, barrier) = (c.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                c.reconcile().unwrap().epoch()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 3);
    }
    // Several nodes joining at the same time: every join is recorded, epochs stay
    // consecutive, the final map holds them all, and no map in between drops a node
    // that had joined (the snapshot rule: members and map read at one revision).
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (c, stop) = (c.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = BTreeMap::new();
            while !stop.load(Ordering::Relaxed) {
                let (map, _) = c.current_map().unwrap().unwrap();
                let members: BTreeSet<String> =
                    map.members().iter().map(|m| m.id.to_string()).collect();
                seen.insert(map.epoch(), members);
            }
            seen
        })
    };
    let barrier = Arc::new(Barrier::new(3));
    let threads: Vec<_> = ["d", "e", "f"]
        .into_iter()
        .enumerate()
        .map(|(i, id)| {
            let (c, barrier) = (c.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let (_, map) = c.join(member(id, 7430 + i as u16), 30).unwrap();
                assert!(
                    map.member(&NodeId::new(id).unwrap()).is_some(),
                    "{id} joined but is not in {map:?}"
                );
                map.epoch()
            })
        })
        .collect();
    for t in threads {
        let e = t.join().unwrap();
        assert!((4..=6).contains(&e), "epoch {e}");
    }
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    let (map, _) = c.current_map().unwrap().unwrap();
    assert_eq!(ids(map.members()), ["a", "b", "c", "d", "e", "f"]);
    assert!(map.epoch() >= 4 && map.epoch() <= 6, "three joins made epoch {}", map.epoch());
    for (w0, w1) in seen.iter().zip(seen.iter().skip(1)) {
        assert!(
            w0.1.is_subset(w1.1),
            "epoch {} {:?} dropped a member of epoch {} {:?}",
            w1.0,
            w1.1,
            w0.0,
            w0.1
        );
    }
}

#[test]
fn waiting_for_an_epoch_change() {
    let etcd = Etcd::start();
    let c = cluster(&etcd, "wait");
    c.join(member("a", 7420), 30).unwrap();
    let poll = Duration::from_millis(20);
    let t0 = Instant::now();
    let err = c.wait_for_epoch_after(1, poll, Duration::from_millis(300)).unwrap_err();
    assert_eq!(err, MembershipError::EpochWaitTimeout { epoch: 1, timeout_ms: 300 });
    assert!(t0.elapsed() < Duration::from_millis(1000));
    let joiner = {
        let c = c.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            c.join(member("b", 7421), 30).unwrap()
        })
    };
    let map = c.wait_for_epoch_after(1, poll, Duration::from_secs(5)).unwrap();
    assert_eq!((map.epoch(), ids(map.members())), (2, vec!["a", "b"]));
    joiner.join().unwrap();
}

#[test]
fn etcd_down_fails_membership_calls_within_the_timeout() {
    let mut etcd = Etcd::start();
    let c = Membership::new(etcd.client(Duration::from_millis(400)), "down", Policy::Matched);
    let (a, _) = c.join(member("a", 7420), 30).unwrap();
    etcd.kill();
    let t0 = Instant::now();
    let err = c.heartbeat(&a).unwrap_err();
    assert!(matches!(err, MembershipError::Etcd(EtcdError::Unreachable { .. })), "{err:?}");
    assert!(t0.elapsed() < Duration::from_millis(600), "{:?}", t0.elapsed());
    assert!(err.to_string().contains("unreachable"), "{err}");
}
