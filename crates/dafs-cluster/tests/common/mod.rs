//! A real etcd for tests: its own data directory and free loopback ports, stopped
//! (killed) when dropped.

#![allow(dead_code)] // each test binary uses part of this

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dafs_cluster::etcd::EtcdClient;

/// How long etcd may take to start answering (it elects itself leader first).
const START_TIMEOUT: Duration = Duration::from_secs(20);

pub struct Etcd {
    child: Child,
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `DAFS_ETCD_BIN`, else `etcd` on PATH, else Debian's /usr/bin/etcd.
fn etcd_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("DAFS_ETCD_BIN") {
        return p.into();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
        let p = dir.join("etcd");
        if p.is_file() {
            return p;
        }
    }
    panic!("etcd not found: install the Debian package etcd-server (scripts/lib-etcd.sh: ensure_etcd) or set DAFS_ETCD_BIN");
}

impl Etcd {
    pub fn start() -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let (client, peer) = (free_port(), free_port());
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = std::fs::File::create(dir.path().join("etcd.log")).unwrap();
        // Short heartbeat and election: etcd's smallest lease is 1.5 election timeouts,
        // and the tests let 1-second leases expire.
        let child = Command::new(etcd_binary())
            .arg("--name=t")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=t={peer_url}"))
            .arg("--heartbeat-interval=10")
            .arg("--election-timeout=100")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        let etcd = Etcd { child, endpoint: format!("127.0.0.1:{client}"), _dir: dir };
        let c = etcd.client(Duration::from_millis(500));
        let deadline = Instant::now() + START_TIMEOUT;
        while c.get(b"/ready-probe").is_err() {
            assert!(Instant::now() < deadline, "etcd did not start within {START_TIMEOUT:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        etcd
    }

    pub fn client(&self, timeout: Duration) -> EtcdClient {
        EtcdClient::new(vec![self.endpoint.clone()], timeout)
    }

    /// Kill etcd now (SIGKILL) and reap it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}
