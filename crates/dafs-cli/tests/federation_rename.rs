//! Cross-node rename (CLUSTER_RENAME) over real dafsd processes: the file moves to the
//! node its new name hashes to, with its data and attributes, and a second client sees
//! it there; and a `kill -9` of the source or the target node at each phase of the move
//! (`DAFSD_XRENAME_PAUSE` holds the source there) leaves exactly one of the two names,
//! with the right content, once the killed node is back.

#[macro_use]
mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Client, ClientConfig, TestServer};
use dafs_client::dafs_proto::Status;
use dafs_client::{Error, OpenOptions};

struct Cluster {
    nodes: Vec<TestServer>,
    addrs: Vec<String>,
    dir: tempfile::TempDir,
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Node `i` of the cluster, with its state directory (kept across restarts) and
/// `env` for dafsd.
fn start_node(
    dir: &Path,
    addr: &str,
    i: usize,
    export: Option<&Path>,
    env: &[(&str, &str)],
) -> TestServer {
    let toml = dir.join("cluster.toml");
    let state = dir.join(format!("state{i}"));
    let args = [
        "--listen",
        addr,
        "--cluster",
        toml.to_str().unwrap(),
        "--no-shm",
        "--state-dir",
        state.to_str().unwrap(),
        "--grace-secs",
        "0",
    ];
    TestServer::try_start_env(&args, None, export, env).unwrap_or_else(|e| panic!("{e}"))
}

fn cluster(n: usize, env0: &[(&str, &str)]) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let addrs: Vec<String> = (0..n).map(|_| free_addr()).collect();
    let list: Vec<String> = addrs.iter().map(|a| format!("{a:?}")).collect();
    let toml = dir.path().join("cluster.toml");
    std::fs::write(&toml, format!("[cluster]\nmembers = [{}]\n", list.join(", "))).unwrap();
    let nodes = (0..n)
        .map(|i| start_node(dir.path(), &addrs[i], i, None, if i == 0 { env0 } else { &[] }))
        .collect();
    Cluster { nodes, addrs, dir }
}

impl Cluster {
    fn client(&self) -> Client {
        let cfg = ClientConfig {
            connect_timeout: Duration::from_secs(1),
            request_deadline: Duration::from_secs(3),
            reconnect_timeout: Duration::from_secs(1),
            ..ClientConfig::default()
        };
        Client::connect(&format!("dafs://{}/", self.addrs.join(",")), cfg).unwrap()
    }

    fn holders(&self, name: &str) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].export_dir().join(name).symlink_metadata().is_ok())
            .collect()
    }

    /// The `skip`th name `prefixN` the map places on node `node`.
    fn name_on(&self, c: &Client, prefix: &str, node: usize, skip: usize) -> String {
        (0..)
            .map(|i| format!("{prefix}{i}"))
            .filter(|n| c.cluster_node_for(n).unwrap().unwrap() == self.addrs[node])
            .nth(skip)
            .unwrap()
    }

    /// SIGKILL node `i` (no clean shutdown) and reap it.
    fn kill9(&mut self, i: usize) {
        let pid = self.nodes[i].pid().expect("running");
        // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        self.nodes[i].kill();
    }

    /// Start node `i` again on its export and state directory; the old server (its
    /// temporary directory holds the export) is returned, to be kept alive.
    fn restart(&mut self, i: usize) -> TestServer {
        let export = self.nodes[i].export_dir().to_path_buf();
        let n = start_node(self.dir.path(), &self.addrs[i], i, Some(&export), &[]);
        std::mem::replace(&mut self.nodes[i], n)
    }

    fn staging_entries(&self, i: usize) -> usize {
        let d = self.nodes[i].export_dir().join(".dafs-xrename");
        std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0)
    }

    fn records(&self, i: usize) -> usize {
        let d = self.dir.path().join(format!("state{i}/xrename"));
        std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0)
    }
}

/// Create `path` holding `data` (in 16 KiB writes).
fn put(c: &mut Client, path: &str, data: &[u8], mode: u32) {
    let f = c.open(path, OpenOptions::write_only().create(true).truncate(true).mode(mode)).unwrap();
    for (k, chunk) in data.chunks(16 << 10).enumerate() {
        assert_eq!(c.pwrite(&f, chunk, (k * (16 << 10)) as u64).unwrap(), chunk.len());
    }
    c.close(f).unwrap();
}

/// The whole of `path`, or its error.
fn get(c: &mut Client, path: &str) -> dafs_client::Result<Vec<u8>> {
    let f = c.open(path, OpenOptions::read())?;
    let (mut out, mut buf) = (Vec::new(), vec![0u8; 16 << 10]);
    loop {
        let n = c.pread(&f, &mut buf, out.len() as u64)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    c.close(f)?;
    Ok(out)
}

fn content(i: usize) -> Vec<u8> {
    (0..300_000u32).map(|x| (x.wrapping_mul(31) ^ i as u32) as u8).collect()
}

#[test]
fn a_file_renamed_across_nodes_moves_with_its_attributes_and_a_second_client_sees_it() {
    let cl = cluster(2, &[]);
    let mut c = cl.client();
    let (src, dst) = (cl.name_on(&c, "s", 0, 0), cl.name_on(&c, "t", 1, 0));
    let data = content(1);
    put(&mut c, &src, &data, 0o640);
    c.set_times(&src, 1_000_000_000_123, 2_000_000_000_456).unwrap();
    assert_eq!(cl.holders(&src), vec![0]);
    c.rename(&src, &dst).unwrap();
    assert_eq!(cl.holders(&dst), vec![1], "the file lives where its new name hashes");
    assert!(cl.holders(&src).is_empty());
    let mut other = cl.client();
    let a = other.stat(&dst).unwrap();
    assert_eq!(
        (a.size, a.mode & 0o7777, a.mtime_ns),
        (data.len() as u64, 0o640, 2_000_000_000_456)
    );
    assert_eq!(get(&mut other, &dst).unwrap(), data);
    assert!(matches!(other.stat(&src), Err(Error::Status(Status::NoEnt))));
    // Replacing an existing file, as rename(2) does; into a subdirectory.
    c.mkdir("sub", 0o755).unwrap();
    let sub_dst = (0..)
        .map(|i| format!("sub/v{i}"))
        .find(|n| c.cluster_node_for(n).unwrap().unwrap() == cl.addrs[0])
        .unwrap();
    c.create_and_write(&sub_dst, b"old", 0o600).unwrap();
    c.rename(&dst, &sub_dst).unwrap();
    assert_eq!(get(&mut other, &sub_dst).unwrap(), data);
    assert!(matches!(other.stat(&dst), Err(Error::Status(Status::NoEnt))));
    // The staging directory is no name of the cluster's.
    let root: Vec<String> = c.readdir("/").unwrap().iter().map(|e| e.name_lossy()).collect();
    assert_eq!(root, vec!["sub".to_string()]);
    // Directories stay EXDEV across nodes (they exist on every node).
    assert!(matches!(c.rename("sub", "sub2"), Err(Error::Status(Status::XDev))));
    assert_eq!((cl.records(0), cl.records(1)), (0, 0));
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Node 0 (the source) pauses at `phase`; `victim` is killed with SIGKILL there and
/// restarted. Afterwards exactly `expect_new` (the new name) or the old one exists.
fn crash_case(phase: &str, victim: usize, expect_new: bool) {
    let hook = tempfile::tempdir().unwrap();
    let env = format!("{phase}:{}", hook.path().display());
    let mut cl = cluster(2, &[("DAFSD_XRENAME_PAUSE", &env)]);
    let mut c = cl.client();
    let (src, dst) = (cl.name_on(&c, "s", 0, 0), cl.name_on(&c, "t", 1, 0));
    let data = content(phase.len() + victim);
    put(&mut c, &src, &data, 0o644);
    let mover = {
        let (src, dst) = (src.clone(), dst.clone());
        let mut c2 = cl.client();
        std::thread::spawn(move || c2.rename(&src, &dst))
    };
    let paused = hook.path().join(format!("paused-{phase}"));
    wait_for("the pause", Duration::from_secs(20), || paused.exists());
    cl.kill9(victim);
    let mut keep = Vec::new();
    if victim == 1 {
        // The source goes on against a dead target, then the target comes back.
        std::fs::write(hook.path().join("go"), b"").unwrap();
        let _ = mover.join().unwrap();
        keep.push(cl.restart(1));
    } else {
        // The client's request dies with the source; the source restarts without the
        // hook and its recovery thread resolves the record.
        let _ = mover.join().unwrap();
        keep.push(cl.restart(0));
    }
    let (want, gone, want_node) = if expect_new { (&dst, &src, 1) } else { (&src, &dst, 0) };
    wait_for(&format!("{phase}/{victim}: one name"), Duration::from_secs(20), || {
        cl.holders(want) == vec![want_node] && cl.holders(gone).is_empty() && cl.records(0) == 0
    });
    assert_eq!(std::fs::read(cl.nodes[want_node].export_dir().join(want)).unwrap(), data);
    let mode = std::fs::metadata(cl.nodes[want_node].export_dir().join(want)).unwrap();
    assert_eq!(mode.permissions().mode() & 0o777, 0o644, "{phase}/{victim}");
    wait_for("staging emptied", Duration::from_secs(10), || cl.staging_entries(1) == 0);
    let mut c = cl.client();
    assert_eq!(get(&mut c, want).unwrap(), data, "{phase}/{victim}");
    assert!(matches!(c.stat(gone), Err(Error::Status(Status::NoEnt))), "{phase}/{victim}");
    drop(keep);
}

#[test]
fn a_source_killed_before_the_commit_point_keeps_the_old_name() {
    crash_case("intent", 0, false);
    crash_case("copied", 0, false);
}

#[test]
fn a_source_killed_after_the_commit_point_finishes_the_move_on_restart() {
    crash_case("committing", 0, true);
    crash_case("renamed", 0, true);
}

#[test]
fn a_target_killed_during_the_move_gets_the_file_when_it_is_back() {
    crash_case("intent", 1, false);
    crash_case("copied", 1, true);
    crash_case("committing", 1, true);
    crash_case("renamed", 1, true);
}

#[test]
fn without_a_state_directory_cross_node_renames_answer_exdev() {
    let dir = tempfile::tempdir().unwrap();
    let addrs = [free_addr(), free_addr()];
    let toml = dir.path().join("cluster.toml");
    std::fs::write(&toml, format!("[cluster]\nmembers = [{:?}, {:?}]\n", addrs[0], addrs[1]))
        .unwrap();
    let _nodes: Vec<TestServer> = addrs
        .iter()
        .map(|a| {
            TestServer::start(&["--listen", a, "--cluster", toml.to_str().unwrap(), "--no-shm"])
        })
        .collect();
    let mut c =
        Client::connect(&format!("dafs://{}/", addrs.join(",")), ClientConfig::default()).unwrap();
    let on = |c: &Client, node: usize| {
        (0..)
            .map(|i| format!("x{i}"))
            .find(|n| c.cluster_node_for(n).unwrap().unwrap() == addrs[node])
            .unwrap()
    };
    let (a, b) = (on(&c, 0), on(&c, 1));
    c.create_and_write(&a, b"x", 0o644).unwrap();
    assert!(matches!(c.rename(&a, &b), Err(Error::Status(Status::XDev))));
    assert_eq!(c.stat(&a).unwrap().size, 1);
}
