//! Fig. 7 and Fig. 8 of the seed "Federated DAFS": server-to-server forwarding under
//! round-robin placement (see dafs-server's `forward`).
//!
//! Fig. 7: one client creates files and reads each of them back several times through
//! a cluster URL; every node's `dafs admin cluster` counters give its client requests
//! and, of those, the remote ones (for a file whose home is another node). Under
//! matched placement the client goes to the home: none are remote. Under round-robin
//! the landing node is the home one time in N: about (N-1)/N are remote.
//!
//! Fig. 8: a read-only workload (random open + read of the whole file + close) under
//! round-robin placement, with the forwarding nodes' block cache off
//! (`block_cache_bytes = 0`) and on (the default), in alternating runs. One client
//! thread: a forwarded request holds a worker of the forwarding node until the home
//! answers (see docs/architecture.md, "Forwarding"), so concurrent clients would
//! measure that limitation rather than the cache.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dafs_client::{Client, ClientConfig, OpenOptions};
use serde_json::Value;

use std::fmt::Write as _;

use super::FederationArgs;
use crate::util::{median, CHILDREN};

/// Files of Fig. 7 and Fig. 8 (with --quick: a quarter).
const FIG7_FILES: usize = 200;
const FIG7_READS_PER_FILE: usize = 3;
const FIG7_FILE_BYTES: usize = 4096;
const FIG8_FILES: usize = 64;
const FIG8_FILE_BYTES: usize = 128 * 1024;
/// A file changed less than this long ago is not cached (the cache's settle time).
const SETTLE: Duration = Duration::from_millis(1100);

/// N dafsd nodes of one cluster on 127.0.0.1..N, each with an admin socket.
struct Nodes {
    children: Vec<Child>,
    addrs: Vec<String>,
    dir: tempfile::TempDir,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_addr(host: &str) -> Result<String, String> {
    let l = std::net::TcpListener::bind((host, 0)).map_err(|e| format!("{host}: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.to_string())
}

fn start(bin: &Path, n: usize, placement: &str, cache: Option<u64>) -> Result<Nodes, String> {
    let dir =
        tempfile::Builder::new().prefix("dafs-federation-").tempdir().map_err(|e| e.to_string())?;
    let addrs =
        (0..n).map(|i| free_addr(&format!("127.0.0.{}", i + 1))).collect::<Result<Vec<_>, _>>()?;
    let list: Vec<String> = addrs.iter().map(|a| format!("{a:?}")).collect();
    let mut toml =
        format!("[cluster]\nmembers = [{}]\nplacement = {placement:?}\n", list.join(", "));
    if let Some(b) = cache {
        toml.push_str(&format!("block_cache_bytes = {b}\n"));
    }
    let toml_path = dir.path().join("cluster.toml");
    std::fs::write(&toml_path, toml).map_err(|e| e.to_string())?;
    let mut nodes = Nodes { children: Vec::new(), addrs, dir };
    for i in 0..n {
        let export = nodes.dir.path().join(format!("export{i}"));
        std::fs::create_dir(&export).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(nodes.dir.path().join(format!("dafsd{i}.log")))
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(bin);
        cmd.arg(&export)
            .args(["--listen", &nodes.addrs[i], "--no-shm", "--cluster"])
            .arg(&toml_path)
            .arg("--admin-socket")
            .arg(admin_socket(nodes.dir.path(), i))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        crate::server::die_with_parent(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        CHILDREN.lock().unwrap().push(child.id());
        let mut first = String::new();
        let out = child.stdout.take().expect("piped stdout");
        let mut out = BufReader::new(out);
        let _ = out.read_line(&mut first);
        // Keep draining its stdout so the node never blocks on a full pipe.
        std::thread::spawn(move || for _ in out.lines() {});
        nodes.children.push(child);
        if !first.starts_with("dafsd listening on ") {
            let log = std::fs::read_to_string(nodes.dir.path().join(format!("dafsd{i}.log")));
            return Err(format!("node {i} did not start: {}", log.unwrap_or_default().trim()));
        }
    }
    Ok(nodes)
}

fn admin_socket(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("admin{i}.sock"))
}

impl Nodes {
    fn client(&self) -> Result<Client, String> {
        let cfg = ClientConfig { request_deadline: Duration::from_secs(30), ..Default::default() };
        let url = format!("dafs://{}/", self.addrs.join(","));
        Client::connect(&url, cfg).map_err(|e| format!("{url}: {e}"))
    }

    /// Node `i`'s `cluster` admin answer (JSON), over its admin socket.
    fn admin(&self, i: usize) -> Result<Value, String> {
        use std::io::{Read, Write};
        let path = admin_socket(self.dir.path(), i);
        let mut s = std::os::unix::net::UnixStream::connect(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        s.write_all(b"cluster\n").map_err(|e| e.to_string())?;
        s.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
        let mut text = String::new();
        s.read_to_string(&mut text).map_err(|e| e.to_string())?;
        serde_json::from_str(&text).map_err(|e| format!("admin answer: {e}"))
    }
}

fn data(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 13 + j) as u8).collect()
}

fn create_files(c: &mut Client, prefix: &str, n: usize, len: usize) -> Result<(), String> {
    for i in 0..n {
        let path = format!("{prefix}{i}");
        let f = c
            .open(&path, OpenOptions::read_write().create(true).truncate(true))
            .map_err(|e| format!("create {path}: {e}"))?;
        c.pwrite(&f, &data(i, len), 0).map_err(|e| format!("write {path}: {e}"))?;
        c.close(f).map_err(|e| format!("close {path}: {e}"))?;
    }
    Ok(())
}

/// Open, read all of it, check it, close.
fn read_file(c: &mut Client, path: &str, i: usize, buf: &mut [u8]) -> Result<(), String> {
    let f = c.open(path, OpenOptions::read()).map_err(|e| format!("open {path}: {e}"))?;
    let n = c.pread(&f, buf, 0).map_err(|e| format!("read {path}: {e}"))?;
    c.close(f).map_err(|e| format!("close {path}: {e}"))?;
    if buf[..n] != data(i, n)[..] || n != buf.len() {
        return Err(format!("{path}: wrong data read back"));
    }
    Ok(())
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Fig. 7: remote accesses per node, round-robin vs matched.
pub fn fig7(bin: &Path, a: &FederationArgs, md: &mut String) -> Result<(), String> {
    let sizes: Vec<usize> = if a.nodes.is_empty() {
        vec![2, 4, 8]
    } else {
        a.nodes.iter().copied().filter(|&n| n >= 2).collect()
    };
    let files = if a.quick { FIG7_FILES / 4 } else { FIG7_FILES };
    let _ = writeln!(md, "## Fig. 7: remote accesses per node (load {})\n", load());
    let _ = writeln!(
        md,
        "{files} files of {FIG7_FILE_BYTES} B created, then each opened, read and closed \
         {FIG7_READS_PER_FILE} times by one client. Remote: client requests for a file \
         whose home is another node.\n"
    );
    let _ = writeln!(md, "| nodes | placement | remote / requests per node | total | (N-1)/N |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    for &n in &sizes {
        for placement in ["matched", "round-robin"] {
            let nodes = start(bin, n, placement, None)?;
            let mut c = nodes.client()?;
            create_files(&mut c, "f", files, FIG7_FILE_BYTES)?;
            let mut buf = vec![0u8; FIG7_FILE_BYTES];
            for _ in 0..FIG7_READS_PER_FILE {
                for i in 0..files {
                    read_file(&mut c, &format!("f{i}"), i, &mut buf)?;
                }
            }
            let (mut cells, mut remote, mut requests) = (Vec::new(), 0, 0);
            for i in 0..n {
                let v = nodes.admin(i)?;
                let r = v["counters"]["remote_requests"].as_u64().unwrap_or(0);
                let q = v["counters"]["requests"].as_u64().unwrap_or(0);
                cells.push(format!("{r}/{q}"));
                remote += r;
                requests += q;
            }
            let _ = writeln!(
                md,
                "| {n} | {placement} | {} | {:.2} | {:.2} |",
                cells.join(" "),
                remote as f64 / requests.max(1) as f64,
                (n - 1) as f64 / n as f64
            );
        }
    }
    md.push('\n');
    Ok(())
}

/// One Fig. 8 measurement: reads per second for `secs`.
fn fig8_run(
    bin: &Path,
    n: usize,
    cache: Option<u64>,
    files: usize,
    secs: f64,
) -> Result<(f64, u64), String> {
    let nodes = start(bin, n, "round-robin", cache)?;
    let mut c = nodes.client()?;
    create_files(&mut c, "r", files, FIG8_FILE_BYTES)?;
    std::thread::sleep(SETTLE);
    let mut buf = vec![0u8; FIG8_FILE_BYTES];
    // A fixed pseudo-random order (xorshift), the same in every run.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let (t0, mut ops) = (Instant::now(), 0u64);
    while t0.elapsed().as_secs_f64() < secs {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % files as u64) as usize;
        read_file(&mut c, &format!("r{i}"), i, &mut buf)?;
        ops += 1;
    }
    let rate = ops as f64 / t0.elapsed().as_secs_f64();
    let mut hits = 0;
    for i in 0..n {
        hits += nodes.admin(i)?["forwarding"]["cache_hits"].as_u64().unwrap_or(0);
    }
    Ok((rate, hits))
}

/// Fig. 8: read-only workload, round-robin placement, block cache off vs on.
pub fn fig8(bin: &Path, a: &FederationArgs, md: &mut String) -> Result<(), String> {
    let files = if a.quick { FIG8_FILES / 4 } else { FIG8_FILES };
    let secs = a.secs.unwrap_or(if a.quick { 1.0 } else { 3.0 });
    let runs = a.runs.unwrap_or(if a.quick { 1 } else { 3 }).max(1);
    let n = a.cache_nodes.max(2);
    let (mut off, mut on, mut hits) = (Vec::new(), Vec::new(), 0);
    for _ in 0..runs {
        off.push(fig8_run(bin, n, Some(0), files, secs)?.0);
        let (rate, h) = fig8_run(bin, n, None, files, secs)?;
        on.push(rate);
        hits += h;
    }
    let (off, on) = (median(&off), median(&on));
    let _ = writeln!(
        md,
        "## Fig. 8: read-only workload, round-robin placement, block cache (load {})\n",
        load()
    );
    let _ = writeln!(
        md,
        "{n} nodes, {files} files of {} KiB, one client: open + read + close of a random \
         file, {secs} s per run, median of {runs} runs.\n",
        FIG8_FILE_BYTES / 1024
    );
    let _ = writeln!(md, "| block cache | reads/s |");
    let _ = writeln!(md, "|---|---|");
    let _ = writeln!(md, "| off | {off:.0} |");
    let _ = writeln!(md, "| on | {on:.0} |");
    let _ = writeln!(
        md,
        "\ncache on / off: {:.2}x ({hits} block hits; seed: +35%)\n",
        on / off.max(f64::MIN_POSITIVE)
    );
    Ok(())
}
