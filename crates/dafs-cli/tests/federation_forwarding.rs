//! Round-robin placement over real dafsd processes: requests land on the nodes in turn,
//! a node that does not hold a file forwards to its home over DAFS (proxied opens),
//! the forwarding node's block cache serves repeated reads, and close-to-open
//! consistency holds across nodes (a write through any node is seen by the next open
//! through any other). Counters come from `dafs admin --json cluster`.

#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Client, ClientConfig, TestServer};
use dafs_client::OpenOptions;
use serde_json::Value;

struct Cluster {
    nodes: Vec<TestServer>,
    addrs: Vec<String>,
    dir: tempfile::TempDir,
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn cluster(n: usize, placement: &str) -> Cluster {
    cluster_with(n, placement, &[])
}

/// `n` nodes started with `extra` dafsd arguments besides the cluster's.
fn cluster_with(n: usize, placement: &str, extra: &[&str]) -> Cluster {
    cluster_env(n, placement, extra, None, &[])
}

/// [`cluster_with`], every node with the shared secret `secret` and environment `env`.
fn cluster_env(
    n: usize,
    placement: &str,
    extra: &[&str],
    secret: Option<&[u8]>,
    env: &[(&str, &str)],
) -> Cluster {
    // The members' addresses are written before any node starts, so another test may
    // take a port in between: start again on new ports then.
    for attempt in 1.. {
        match try_cluster_env(n, placement, extra, secret, env) {
            Ok(c) => return c,
            Err(e) if e.contains("Address already in use") && attempt < 5 => continue,
            Err(e) => panic!("{e}"),
        }
    }
    unreachable!()
}

fn try_cluster_env(
    n: usize,
    placement: &str,
    extra: &[&str],
    secret: Option<&[u8]>,
    env: &[(&str, &str)],
) -> Result<Cluster, String> {
    let dir = tempfile::tempdir().unwrap();
    let addrs: Vec<String> = (0..n).map(|_| free_addr()).collect();
    let list: Vec<String> = addrs.iter().map(|a| format!("{a:?}")).collect();
    let toml = dir.path().join("cluster.toml");
    let text = format!("[cluster]\nmembers = [{}]\nplacement = {placement:?}\n", list.join(", "));
    std::fs::write(&toml, text).unwrap();
    let nodes = (0..n)
        .map(|i| {
            let admin = admin_socket(dir.path(), i);
            let mut args = vec![
                "--listen",
                &addrs[i],
                "--cluster",
                toml.to_str().unwrap(),
                "--no-shm",
                "--admin-socket",
                admin.to_str().unwrap(),
            ];
            args.extend_from_slice(extra);
            TestServer::try_start_env(&args, secret, None, env)
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Cluster { nodes, addrs, dir })
}

fn admin_socket(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("admin{i}.sock"))
}

fn cfg() -> ClientConfig {
    ClientConfig {
        connect_timeout: Duration::from_secs(1),
        request_deadline: Duration::from_secs(10),
        reconnect_timeout: Duration::from_secs(1),
        ..ClientConfig::default()
    }
}

impl Cluster {
    fn client(&self) -> Client {
        Client::connect(&format!("dafs://{}/", self.addrs.join(",")), cfg()).unwrap()
    }

    /// A client of node `i` alone (not a cluster client): its requests land there.
    fn node_client(&self, i: usize) -> Client {
        Client::connect(&self.addrs[i], cfg()).unwrap()
    }

    /// `dafs admin --json cluster` of node `i`.
    fn admin(&self, i: usize) -> Value {
        let out = std::process::Command::new(common::dafs_bin())
            .args(["admin", "--json", "--socket"])
            .arg(admin_socket(self.dir.path(), i))
            .arg("cluster")
            .output()
            .expect("run dafs admin");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("cluster status is JSON")
    }

    fn sum(&self, f: impl Fn(&Value) -> u64) -> u64 {
        (0..self.nodes.len()).map(|i| f(&self.admin(i))).sum()
    }

    fn home_of(&self, c: &Client, path: &str) -> usize {
        let id = c.cluster_node_for(path).unwrap().unwrap();
        self.addrs.iter().position(|a| *a == id).unwrap()
    }

    fn holders(&self, name: &str) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].export_dir().join(name).symlink_metadata().is_ok())
            .collect()
    }
}

fn forwarding(v: &Value, key: &str) -> u64 {
    v["forwarding"][key].as_u64().unwrap_or_else(|| panic!("no forwarding.{key} in {v}"))
}

fn content(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7 + j / 251) as u8).collect()
}

fn write_file(c: &mut Client, path: &str, data: &[u8]) {
    let f = c.open(path, OpenOptions::read_write().create(true).truncate(true)).unwrap();
    assert_eq!(c.pwrite(&f, data, 0).unwrap(), data.len());
    c.close(f).unwrap();
}

fn read_file(c: &mut Client, path: &str, len: usize) -> Vec<u8> {
    let f = c.open(path, OpenOptions::read()).unwrap();
    let mut buf = vec![0u8; len + 10];
    let mut got = 0;
    while got < buf.len() {
        let n = c.pread(&f, &mut buf[got..], got as u64).unwrap();
        if n == 0 {
            break;
        }
        got += n;
    }
    c.close(f).unwrap();
    buf.truncate(got);
    buf
}

#[test]
fn round_robin_reads_writes_and_creates_give_the_right_data_from_any_node() {
    let cl = cluster(3, "round-robin");
    let mut c = cl.client();
    // Small files travel inline, large ones by direct placement (pulled and placed by
    // the forwarding node, sent on to the home).
    let sizes = [0usize, 100, 5000, 200 * 1024];
    for i in 0..24 {
        let name = format!("f{i}");
        write_file(&mut c, &name, &content(i, sizes[i % sizes.len()]));
    }
    for i in 0..24 {
        let name = format!("f{i}");
        let len = sizes[i % sizes.len()];
        assert_eq!(read_file(&mut c, &name, len), content(i, len), "{name}");
        assert_eq!(c.stat(&name).unwrap().size, len as u64);
        // Stored at its home only, whichever node the create landed on.
        assert_eq!(cl.holders(&name), vec![cl.home_of(&c, &name)], "{name}");
    }
    for i in (0..24).step_by(2) {
        c.remove(&format!("f{i}")).unwrap();
    }
    for i in 0..24 {
        let gone = cl.holders(&format!("f{i}")).is_empty();
        assert_eq!(gone, i % 2 == 0, "f{i}");
    }
    // Whole-file calls (chains) land round-robin too.
    c.create_and_write("small", b"chained", 0o644).unwrap();
    let (f, data, _) = c.open_and_read("small", 100).unwrap();
    assert_eq!(data, b"chained");
    c.close(f).unwrap();
    let forwarded = cl.sum(|v| forwarding(v, "forwarded"));
    assert!(forwarded > 0, "nothing was forwarded");
    assert_eq!(cl.sum(|v| v["counters"]["wrong_node"].as_u64().unwrap()), 0);
}

/// Client requests for a file whose home is another node, over all client requests.
fn remote_share(placement: &str, n: usize) -> (f64, u64) {
    let cl = cluster(n, placement);
    let mut c = cl.client();
    for i in 0..40 {
        write_file(&mut c, &format!("r{i}"), &content(i, 64));
    }
    for round in 0..4 {
        for i in 0..40 {
            assert_eq!(read_file(&mut c, &format!("r{i}"), 64), content(i, 64), "{round}");
        }
    }
    let counter = |k: &'static str| cl.sum(move |v| v["counters"][k].as_u64().unwrap());
    let (remote, requests) = (counter("remote_requests"), counter("requests"));
    assert_eq!(counter("wrong_node"), 0);
    (remote as f64 / requests as f64, cl.sum(|v| forwarding(v, "forwarded")))
}

#[test]
fn remote_accesses_are_n_minus_1_over_n_under_round_robin_and_none_under_matched() {
    let (share, _) = remote_share("round-robin", 4);
    assert!((0.6..=0.9).contains(&share), "round-robin on 4 nodes: {share} (expected ~0.75)");
    let (share, forwarded) = remote_share("matched", 4);
    assert_eq!((share, forwarded), (0.0, 0));
}

/// A name whose home is node `home` (as the cluster client's map says).
fn name_homed_at(cl: &Cluster, c: &Client, home: usize, prefix: &str) -> String {
    (0..1000)
        .map(|i| format!("{prefix}{i}"))
        .find(|n| cl.home_of(c, n) == home)
        .expect("some name hashes to every node")
}

#[test]
fn a_repeated_read_through_a_forwarding_node_is_served_from_its_cache() {
    let cl = cluster(2, "round-robin");
    let c = cl.client();
    let name = name_homed_at(&cl, &c, 1, "cached");
    let data = content(7, 100 * 1024); // two blocks
    write_file(&mut cl.node_client(1), &name, &data);
    // A file changed within the settle time is not cached (see forward/cache.rs).
    std::thread::sleep(Duration::from_millis(1100));
    let mut a = cl.node_client(0);
    let read = |a: &mut Client| {
        let f = a.open_by_name(&name, OpenOptions::read()).unwrap();
        let mut buf = vec![0u8; data.len()];
        assert_eq!(a.pread(&f, &mut buf, 0).unwrap(), data.len());
        a.close(f).unwrap();
        buf
    };
    assert_eq!(read(&mut a), data);
    let v = cl.admin(0);
    assert_eq!((forwarding(&v, "cache_misses"), forwarding(&v, "cache_hits")), (2, 0));
    assert_eq!(read(&mut a), data);
    let v = cl.admin(0);
    assert_eq!((forwarding(&v, "cache_misses"), forwarding(&v, "cache_hits")), (2, 2));
    assert_eq!(forwarding(&v, "cache_bytes"), data.len() as u64);
}

#[test]
fn a_write_through_another_node_is_seen_by_the_next_open_through_a_caching_node() {
    let cl = cluster(3, "round-robin");
    let c = cl.client();
    let name = name_homed_at(&cl, &c, 2, "shared");
    let (mut a, mut b, mut home) = (cl.node_client(0), cl.node_client(1), cl.node_client(2));
    let len = 70 * 1024;
    write_file(&mut home, &name, &content(1, len));
    std::thread::sleep(Duration::from_millis(1100));
    let mut read_a = |want: usize| {
        let f = a.open_by_name(&name, OpenOptions::read()).unwrap();
        let mut buf = vec![0u8; len];
        assert_eq!(a.pread(&f, &mut buf, 0).unwrap(), len);
        a.close(f).unwrap();
        assert!(buf == content(want, len), "node 0 read stale data (wanted version {want})");
    };
    read_a(1);
    read_a(1); // now cached at node 0
    assert!(forwarding(&cl.admin(0), "cache_hits") > 0);
    // Same size, through another forwarding node, then through the home itself at
    // once (within one timestamp tick of the file system, possibly).
    let f = b.open_by_name(&name, OpenOptions::write_only()).unwrap();
    b.pwrite(&f, &content(2, len), 0).unwrap();
    b.close(f).unwrap();
    read_a(2);
    let f = home.open(&name, OpenOptions::write_only()).unwrap();
    home.pwrite(&f, &content(3, len), 0).unwrap();
    home.close(f).unwrap();
    read_a(3);
    std::thread::sleep(Duration::from_millis(1100));
    read_a(3);
    read_a(3); // cached again once settled
    let f = home.open(&name, OpenOptions::write_only()).unwrap();
    home.pwrite(&f, &content(4, len), 0).unwrap();
    home.close(f).unwrap();
    read_a(4);
    // A change older than the settle time is caught by the validator (ctime, mtime).
    std::thread::sleep(Duration::from_millis(1100));
    read_a(4);
    let hits = forwarding(&cl.admin(0), "cache_hits");
    read_a(4);
    assert!(forwarding(&cl.admin(0), "cache_hits") > hits, "version 4 was not cached");
    let f = b.open_by_name(&name, OpenOptions::write_only()).unwrap();
    b.pwrite(&f, &content(5, len), 0).unwrap();
    b.close(f).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    read_a(5);
}

/// Two nodes with one worker each, many concurrent clients whose requests land on both:
/// each node forwards to the other while serving the other's forwards. A forwarded
/// request must not hold the worker the other node's forwards need (both would stall
/// until the forwarding deadline and answer EIO).
#[test]
fn concurrent_clients_forwarding_both_ways_through_single_worker_nodes_never_stall() {
    const CLIENTS: usize = 8;
    const FILES: usize = 12;
    let cl = cluster_with(2, "round-robin", &["--workers", "1"]);
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        let cl = &cl;
        let threads: Vec<_> = (0..CLIENTS)
            .map(|t| {
                s.spawn(move || {
                    let mut c = cl.client();
                    c.mkdir(&format!("/d{t}"), 0o755).unwrap();
                    // Inline and direct sizes: proxied writes of both kinds.
                    let sizes = [3000usize, 70 * 1024];
                    for i in 0..FILES {
                        let (name, len) = (format!("/d{t}/f{i}"), sizes[i % 2]);
                        write_file(&mut c, &name, &content(t * FILES + i, len));
                        assert_eq!(c.stat(&name).unwrap().size, len as u64, "{name}");
                        assert!(read_file(&mut c, &name, len) == content(t * FILES + i, len));
                        if i % 3 == 0 {
                            c.remove(&name).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a client failed");
        }
    });
    // Far below the forwarding deadline (5 s) times the operations: nothing waited it out.
    let took = start.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_eq!(cl.sum(|v| forwarding(v, "forward_failures")), 0);
    let forwarded = cl.sum(|v| forwarding(v, "forwarded"));
    assert!(forwarded > (CLIENTS * FILES) as u64 / 2, "forwarded {forwarded}");
    // Every proxied open's writes and reads were carried to the home.
    assert!(cl.sum(|v| forwarding(v, "forwarded_io")) > 0);
    for t in 0..CLIENTS {
        for i in 0..FILES {
            let name = format!("d{t}/f{i}");
            assert_eq!(cl.holders(&name).len(), usize::from(i % 3 != 0), "{name}");
        }
    }
}

/// Byte-range locks, attributes and fsync on proxied opens work as on the home: two
/// clients landing on different forwarding nodes (and one at the home) contend for the
/// same file's locks, and a client's locks go when its session ends.
#[test]
fn locks_and_attributes_of_proxied_opens_work_as_at_the_home() {
    let cl = cluster(3, "round-robin");
    let c = cl.client();
    let name = name_homed_at(&cl, &c, 2, "locked");
    let (mut a, mut b, mut home) = (cl.node_client(0), cl.node_client(1), cl.node_client(2));
    let rw = OpenOptions::read_write().create(true);
    let fa = a.open_by_name(&name, rw).unwrap();
    let fb = b.open_by_name(&name, rw).unwrap();
    let fh = home.open(&name, OpenOptions::read_write()).unwrap();
    // Exclusive through node 0: node 1's client and the home's are refused.
    a.lock(&fa, 0, 100, true).unwrap();
    let denied = |r: dafs_client::Result<()>| {
        matches!(r, Err(dafs_client::Error::Status(dafs_proto::Status::Denied)))
    };
    assert!(denied(b.lock(&fb, 50, 10, false)));
    assert!(denied(home.lock(&fh, 0, 1, true)));
    let seen = b.test_lock(&fb, 0, 10, false).unwrap().expect("node 0's lock is seen");
    assert!(seen.exclusive);
    assert_eq!((seen.offset, seen.len), (0, 100));
    // Beyond the range: free. Two clients of one forwarding node are two owners.
    b.lock(&fb, 100, 10, true).unwrap();
    let mut a2 = cl.node_client(0);
    let fa2 = a2.open_by_name(&name, rw).unwrap();
    assert!(denied(a2.lock(&fa2, 100, 1, false)));
    // Unlock through node 0: node 1 takes it.
    a.unlock(&fa, 0, 100).unwrap();
    b.lock(&fb, 0, 100, true).unwrap();
    assert!(a.test_lock(&fa, 0, 1, false).unwrap().is_some());
    // Attributes and fsync by the proxied open.
    a.pwrite(&fa, b"0123456789", 0).unwrap();
    a.fsync(&fa).unwrap();
    assert_eq!(a.fstat(&fa).unwrap().size, 10);
    assert_eq!(b.ftruncate(&fb, 4).unwrap().size, 4);
    assert_eq!(a.fstat(&fa).unwrap().size, 4);
    assert_eq!(home.fstat(&fh).unwrap().size, 4);
    // Node 1's client ends its session: its locks at the home go with it.
    drop(fb);
    drop(b);
    a.lock_wait(&fa, 0, 200, true, Duration::from_secs(10)).unwrap();
    assert!(denied(home.lock(&fh, 150, 1, false)));
    assert!(cl.admin(0)["forwarding"]["lock_sessions"].as_u64().unwrap() >= 1);
    a.close(fa).unwrap();
    drop(a);
    home.lock_wait(&fh, 0, 0, true, Duration::from_secs(10)).unwrap();
}

/// Nodes that listen with TLS and require the cluster's secret forward over TLS with
/// the secret too (verifying the home's certificate as a client does: here against the
/// test CA, given to dafsd as the system trust store, `SSL_CERT_FILE`).
#[test]
fn forwarding_uses_tls_and_the_secret_when_the_nodes_require_them() {
    let pki = common::tls::Pki::generate();
    let tls_args = pki.server_args();
    let extra = common::tls::strs(&tls_args);
    let ca = pki.ca().display().to_string();
    let secret = b"cluster secret for forwarding";
    let cl = cluster_env(2, "round-robin", &extra, Some(secret), &[("SSL_CERT_FILE", &ca)]);
    let cfg = || ClientConfig {
        secret: Some(secret.to_vec()),
        tls: Some(pki.client_options()),
        provider: dafs_client::Provider::Tcp,
        ..cfg()
    };
    let url = format!("dafs+tls://{}/", cl.addrs.join(","));
    let c = Client::connect(&url, cfg()).unwrap();
    let name = name_homed_at(&cl, &c, 1, "secure");
    // Through node 0, which forwards to node 1 over TLS with the secret.
    let mut a = Client::connect(&format!("dafs+tls://{}", cl.addrs[0]), cfg()).unwrap();
    let f = a.open_by_name(&name, OpenOptions::read_write().create(true)).unwrap();
    a.pwrite(&f, b"over tls", 0).unwrap();
    a.close(f).unwrap();
    assert_eq!(cl.holders(&name), vec![1]);
    assert_eq!(std::fs::read(cl.nodes[1].export_dir().join(&name)).unwrap(), b"over tls");
    let v = cl.admin(0);
    assert!(forwarding(&v, "forwarded") >= 1);
    assert_eq!(forwarding(&v, "forward_failures"), 0);
}
