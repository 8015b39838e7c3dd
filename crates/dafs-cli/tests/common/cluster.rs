//! A static federated cluster of real `dafsd` processes for tests: N nodes on free
//! loopback ports, one cluster.toml naming them, each exporting its own temporary
//! directory (TCP only: cluster nodes are reached by address).
//!
//! ```ignore
//! let cl = common::cluster::Cluster::start(3);
//! let mut c = cl.client();                  // a front client on the cluster URL
//! c.create_and_write("f", b"x", 0o644).unwrap();
//! assert_eq!(cl.holders("f").len(), 1);     // on exactly one node's disk
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Client, ClientConfig, TestServer};

pub struct Cluster {
    pub nodes: Vec<TestServer>,
    pub addrs: Vec<String>,
    pub toml: PathBuf,
    _dir: tempfile::TempDir,
}

/// A loopback address with a port free now.
pub fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Start one node of the cluster `toml` describes on `addr` (exporting `export`, or
/// a fresh directory), with `extra` arguments.
pub fn start_node(addr: &str, toml: &Path, export: Option<&Path>, extra: &[&str]) -> TestServer {
    let mut args = vec!["--listen", addr, "--cluster", toml.to_str().unwrap(), "--no-shm"];
    args.extend_from_slice(extra);
    match export {
        Some(d) => TestServer::start_with_dir(d, &args),
        None => TestServer::start(&args),
    }
}

/// How [`Cluster::start_with`] starts the nodes.
#[derive(Default)]
pub struct Options<'a> {
    /// Lines added to `[cluster]` (e.g. `placement = "round-robin"`).
    pub toml_extra: &'a str,
    /// Arguments added to every node's command line.
    pub args: &'a [&'a str],
    /// Give node i `--state-dir BASE/state{i}` (cross-node renames need one).
    pub state_dirs: bool,
}

impl Cluster {
    /// `n` nodes, matched placement, default server options.
    pub fn start(n: usize) -> Cluster {
        Cluster::start_with(n, Options::default())
    }

    pub fn start_with(n: usize, o: Options) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let addrs: Vec<String> = (0..n).map(|_| free_addr()).collect();
        let list: Vec<String> = addrs.iter().map(|a| format!("{a:?}")).collect();
        let toml = dir.path().join("cluster.toml");
        let text = format!("[cluster]\nmembers = [{}]\n{}\n", list.join(", "), o.toml_extra);
        std::fs::write(&toml, text).unwrap();
        let nodes = (0..n)
            .map(|i| {
                let state = dir.path().join(format!("state{i}"));
                let mut args: Vec<&str> = o.args.to_vec();
                if o.state_dirs {
                    args.extend(["--state-dir", state.to_str().unwrap()]);
                }
                start_node(&addrs[i], &toml, None, &args)
            })
            .collect();
        Cluster { nodes, addrs, toml, _dir: dir }
    }

    /// The cluster URL naming every node.
    pub fn url(&self) -> String {
        format!("dafs://{}/", self.addrs.join(","))
    }

    /// Short timeouts, so that a node down fails calls promptly.
    pub fn config() -> ClientConfig {
        ClientConfig {
            connect_timeout: Duration::from_secs(1),
            request_deadline: Duration::from_secs(3),
            reconnect_timeout: Duration::from_secs(1),
            ..ClientConfig::default()
        }
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.url(), Cluster::config()).unwrap()
    }

    /// Which nodes' exports hold `name` on disk.
    pub fn holders(&self, name: &str) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].export_dir().join(name).symlink_metadata().is_ok())
            .collect()
    }

    /// The index of the node with id (address) `id`.
    pub fn index_of(&self, id: &str) -> usize {
        self.addrs.iter().position(|a| a == id).unwrap()
    }

    /// A name (`prefix` + number) the map places on node `i`.
    pub fn name_on(&self, c: &Client, prefix: &str, i: usize) -> String {
        (0..)
            .map(|k| format!("{prefix}{k}"))
            .find(|n| c.cluster_node_for(n).unwrap().unwrap() == self.addrs[i])
            .unwrap()
    }
}
