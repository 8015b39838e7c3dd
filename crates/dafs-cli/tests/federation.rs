//! Federated DAFS over real dafsd processes with a static cluster.toml: routing (every
//! file lands in the export of exactly the node the hash names), WRONG_NODE from a node
//! asked for a name it does not manage, virtual directories (mkdir/rmdir on every node,
//! merged readdir, ENOTEMPTY when any node has an entry), EXDEV across nodes, and a
//! killed node failing only its own names until it is back.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Client, ClientConfig, TestServer};
use dafs_client::dafs_proto::Status;
use dafs_client::{Error, OpenOptions};

struct Cluster {
    nodes: Vec<TestServer>,
    addrs: Vec<String>,
    toml: PathBuf,
    _dir: tempfile::TempDir,
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn start_node(addr: &str, toml: &Path, export: Option<&Path>) -> TestServer {
    let args = ["--listen", addr, "--cluster", toml.to_str().unwrap(), "--no-shm"];
    match export {
        Some(d) => TestServer::start_with_dir(d, &args),
        None => TestServer::start(&args),
    }
}

fn cluster(n: usize) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let addrs: Vec<String> = (0..n).map(|_| free_addr()).collect();
    let list: Vec<String> = addrs.iter().map(|a| format!("{a:?}")).collect();
    let toml = dir.path().join("cluster.toml");
    std::fs::write(&toml, format!("[cluster]\nmembers = [{}]\n", list.join(", "))).unwrap();
    let nodes = addrs.iter().map(|a| start_node(a, &toml, None)).collect();
    Cluster { nodes, addrs, toml, _dir: dir }
}

impl Cluster {
    fn url(&self) -> String {
        format!("dafs://{}/", self.addrs.join(","))
    }

    fn client(&self) -> Client {
        let cfg = ClientConfig {
            connect_timeout: Duration::from_secs(1),
            request_deadline: Duration::from_secs(3),
            reconnect_timeout: Duration::from_secs(1),
            ..ClientConfig::default()
        };
        Client::connect(&self.url(), cfg).unwrap()
    }

    /// Which nodes' exports hold `name` on disk.
    fn holders(&self, name: &str) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].export_dir().join(name).symlink_metadata().is_ok())
            .collect()
    }

    fn index_of(&self, id: &str) -> usize {
        self.addrs.iter().position(|a| a == id).unwrap()
    }
}

#[test]
fn files_live_on_exactly_the_node_the_hash_names() {
    let cl = cluster(3);
    let mut c = cl.client();
    assert_eq!(c.cluster_nodes().unwrap().len(), 3);
    let mut per_node = [0usize; 3];
    for i in 0..60 {
        let name = format!("f{i}");
        let mut f = c.create(&name).unwrap();
        c.write(&mut f, name.as_bytes()).unwrap();
        c.close(f).unwrap();
        let home = cl.index_of(&c.cluster_node_for(&name).unwrap().unwrap());
        assert_eq!(cl.holders(&name), vec![home], "{name}");
        per_node[home] += 1;
        let f = c.open(&name, OpenOptions::read()).unwrap();
        let mut buf = vec![0; 16];
        let n = c.pread(&f, &mut buf, 0).unwrap();
        assert_eq!(&buf[..n], name.as_bytes());
        c.close(f).unwrap();
        assert_eq!(c.stat(&name).unwrap().size, name.len() as u64);
    }
    // Rendezvous hashing spreads 60 names over 3 nodes: none is empty.
    assert!(per_node.iter().all(|&n| n > 5), "{per_node:?}");
    let listed: Vec<String> = c.readdir("/").unwrap().iter().map(|e| e.name_lossy()).collect();
    assert_eq!(listed.len(), 60);
    for i in 0..60 {
        c.remove(&format!("f{i}")).unwrap();
    }
    assert!(c.readdir("/").unwrap().is_empty());
}

#[test]
fn a_node_refuses_a_name_it_does_not_manage_with_wrong_node() {
    let cl = cluster(2);
    let mut routed = cl.client();
    // A name node 1 manages, asked of node 0 directly (a one-server client).
    let name = (0..)
        .map(|i| format!("n{i}"))
        .find(|n| routed.cluster_node_for(n).unwrap().unwrap() == cl.addrs[1])
        .unwrap();
    let mut direct = Client::connect(&cl.addrs[0], ClientConfig::default()).unwrap();
    match direct.create(&name) {
        Err(Error::Status(Status::WrongNode)) => {}
        r => panic!("expected WRONG_NODE, got {r:?}"),
    }
    assert!(cl.holders(&name).is_empty());
    // Through the cluster client it lands on node 1, and node 0 then still refuses it.
    routed.create_and_write(&name, b"x", 0o644).unwrap();
    assert_eq!(cl.holders(&name), vec![1]);
    assert!(matches!(direct.stat(&name), Err(Error::Status(Status::WrongNode))));
    // Inside a chain too (LOOKUP + OPEN + READ): WRONG_NODE ends the chain as a status,
    // which is what lets the cluster client refresh its map and retry.
    match direct.open_and_read(&name, 16) {
        Err(Error::Status(Status::WrongNode)) => {}
        r => panic!("expected WRONG_NODE from a chain, got {r:?}"),
    }
    // The CLUSTER_MAP answer names the node and the epoch.
    assert_eq!(routed.cluster_epoch(), Some(1));
}

#[test]
fn virtual_directories_span_every_node() {
    let cl = cluster(3);
    let mut c = cl.client();
    c.mkdir("d", 0o750).unwrap();
    assert_eq!(cl.holders("d"), vec![0, 1, 2]);
    assert!(matches!(c.mkdir("d", 0o750), Err(Error::Status(Status::Exist))));
    let names: BTreeSet<String> = (0..30).map(|i| format!("d/x{i}")).collect();
    for n in &names {
        c.create_and_write(n, b"1", 0o644).unwrap();
    }
    // Spread over the nodes, listed once each.
    let used: BTreeSet<usize> = names.iter().flat_map(|n| cl.holders(n)).collect();
    assert!(used.len() > 1);
    let listed: BTreeSet<String> =
        c.readdir("d").unwrap().iter().map(|e| format!("d/{}", e.name_lossy())).collect();
    assert_eq!(listed, names);
    let root: Vec<String> = c.readdir("/").unwrap().iter().map(|e| e.name_lossy()).collect();
    assert_eq!(root, vec!["d".to_string()]);
    // Non-empty on any one node: refused, and nothing removed.
    let last = names.iter().next_back().unwrap().clone();
    for n in names.iter().filter(|n| **n != last) {
        c.remove(n).unwrap();
    }
    assert!(matches!(c.rmdir("d"), Err(Error::Status(Status::NotEmpty))));
    assert_eq!(cl.holders("d"), vec![0, 1, 2]);
    c.remove(&last).unwrap();
    c.rmdir("d").unwrap();
    assert!(cl.holders("d").is_empty());
    assert!(matches!(c.stat("d"), Err(Error::Status(Status::NoEnt))));
}

#[test]
fn renames_stay_on_one_node_and_answer_exdev_across() {
    let cl = cluster(2);
    let mut c = cl.client();
    let on = |c: &Client, node: usize, skip: usize| {
        (0..)
            .map(|i| format!("r{i}"))
            .filter(|n| c.cluster_node_for(n).unwrap().unwrap() == cl.addrs[node])
            .nth(skip)
            .unwrap()
    };
    let (a0, b0, a1) = (on(&c, 0, 0), on(&c, 0, 1), on(&c, 1, 0));
    c.create_and_write(&a0, b"data", 0o644).unwrap();
    c.rename(&a0, &b0).unwrap();
    assert_eq!(cl.holders(&b0), vec![0]);
    assert!(cl.holders(&a0).is_empty());
    assert!(matches!(c.rename(&b0, &a1), Err(Error::Status(Status::XDev))));
    assert_eq!(cl.holders(&b0), vec![0]);
    assert!(cl.holders(&a1).is_empty());
    c.mkdir("dir", 0o755).unwrap();
    assert!(matches!(c.rename("dir", "dir2"), Err(Error::Status(Status::XDev))));
}

#[test]
fn a_killed_node_fails_only_its_names_and_serves_them_after_a_restart() {
    let mut cl = cluster(3);
    let mut c = cl.client();
    let names: Vec<String> = (0..24).map(|i| format!("k{i}")).collect();
    for n in &names {
        c.create_and_write(n, n.as_bytes(), 0o644).unwrap();
    }
    let export = cl.nodes[2].export_dir().to_path_buf();
    cl.nodes[2].kill();
    let started = Instant::now();
    for n in &names {
        let home = cl.index_of(&c.cluster_node_for(n).unwrap().unwrap());
        let r = c.stat(n);
        if home == 2 {
            match r {
                Err(e @ Error::NodeUnavailable { .. }) => {
                    assert!(e.to_string().contains(&cl.addrs[2]), "{e}")
                }
                other => panic!("{n} on the dead node: {other:?}"),
            }
        } else {
            assert_eq!(r.unwrap().size, n.len() as u64, "{n}");
        }
    }
    // Every failure came within the client's deadlines, not a hang.
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
    let addr = cl.addrs[2].clone();
    // The killed server's temporary directory holds the export: keep it until the end.
    let _killed = std::mem::replace(&mut cl.nodes[2], start_node(&addr, &cl.toml, Some(&export)));
    for n in &names {
        assert_eq!(c.stat(n).unwrap().size, n.len() as u64, "{n} after the restart");
    }
}

#[test]
fn handle_relative_calls_are_routed_on_a_cluster_url() {
    let cl = cluster(2);
    let mut c = cl.client();
    c.create_and_write("a", b"x", 0o644).unwrap();
    let root = c.root_handle();
    let (page, eof) = c.readdir_at(root, 0, 10).unwrap();
    assert!(eof);
    assert_eq!(page.iter().map(|e| e.entry.name_lossy()).collect::<Vec<_>>(), vec!["a"]);
}
