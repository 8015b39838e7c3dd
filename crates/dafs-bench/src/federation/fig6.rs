//! Fig. 6 of the seed: PostMark-style throughput on 1, 2, 4 and 8 nodes.
//!
//! Each node is a `dafsd --cluster` on its own loopback address (127.0.0.2, .3, ...)
//! in its own CPU-quota cgroup; the clients are threads of this process, each a
//! cluster client (`dafs://a,b,.../`) running the PostMark engine in its own directory
//! `/pmC` (150 files of 2–16 KiB; transactions create/delete and read whole files).
//! Throughput: every file operation of every client (pool creation, transactions,
//! deletion) over the wall time from the common start to the last client's end.

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use dafs_client::{Client, ClientConfig};
use serde::Serialize;

use super::cgroup::CpuGroups;
use super::nodefs::NodeFs;
use super::FederationCfg;
use crate::postmark::engine::{self, DafsFs, PmParams};
use crate::server::Dafsd;
use crate::util::{heartbeat, proc_cpu};

/// Most nodes one run starts (loopback addresses 127.0.0.2 ..).
pub const NODES_MAX: usize = 64;

#[derive(Debug, Clone, Serialize)]
pub struct Fig6Point {
    pub nodes: usize,
    pub clients: usize,
    /// File operations (creates, reads, deletes) of all clients.
    pub ops: u64,
    pub wall_secs: f64,
    pub ops_per_s: f64,
    /// Against the 1-node point of the same run.
    pub speedup: Option<f64>,
    /// Requests each node served (the cluster client's per-node counts, summed).
    pub requests_per_node: Vec<u64>,
    /// CPU each node used over the run, as a share of its quota (1.0: saturated; no
    /// quota: of one CPU). Below ~0.9 the clients did not keep the node busy.
    pub node_busy: Vec<f64>,
    /// Node CPU per request served, microseconds (all nodes' CPU over all requests):
    /// what one request costs a node. Nodes sharing a host's two cores pay more per
    /// request as their number grows (caches, scheduler); this shows how much.
    pub node_cpu_us_per_request: f64,
}

/// N nodes, each in its CPU group on its own file system; stopped, then the groups
/// removed and the file systems unmounted, on drop (fields drop in this order).
struct Nodes {
    procs: Vec<Dafsd>,
    addrs: Vec<String>,
    _groups: Option<CpuGroups>,
    _fs: NodeFs,
    _dir: tempfile::TempDir,
}

fn free_port(ip: &str) -> Result<u16, String> {
    let l = std::net::TcpListener::bind((ip, 0)).map_err(|e| format!("bind {ip}:0: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn start_nodes(cfg: &FederationCfg, n: usize) -> Result<Nodes, String> {
    assert!((1..=NODES_MAX).contains(&n));
    let dir = tempfile::Builder::new()
        .prefix("dafs-bench-fed-")
        .tempdir_in(&cfg.tmpdir)
        .map_err(|e| format!("{}: {e}", cfg.tmpdir.display()))?;
    let mut addrs = Vec::with_capacity(n);
    for i in 0..n {
        let ip = format!("127.0.0.{}", i + 2);
        addrs.push(format!("{ip}:{}", free_port(&ip)?));
    }
    let list: Vec<String> = addrs.iter().map(|a| format!("{a:?}")).collect();
    let toml = dir.path().join("cluster.toml");
    std::fs::write(&toml, format!("[cluster]\nmembers = [{}]\n", list.join(", ")))
        .map_err(|e| format!("{}: {e}", toml.display()))?;
    let (fs, exports) = NodeFs::make(cfg.node_fs, dir.path(), n)?;
    let mut groups = if cfg.node_cpus > 0.0 { Some(CpuGroups::new(cfg.node_cpus)?) } else { None };
    if let Some(g) = groups.as_mut() {
        g.adopt_self()?;
    }
    let mut procs = Vec::with_capacity(n);
    for (i, (addr, export)) in addrs.iter().zip(&exports).enumerate() {
        let args = vec![
            export.display().to_string(),
            "--listen".into(),
            addr.clone(),
            "--cluster".into(),
            toml.display().to_string(),
            "--no-shm".into(),
        ];
        let d = Dafsd::start_args(&cfg.dafsd, args, &dir.path().join(format!("dafsd{i}.log")))?;
        if let Some(g) = groups.as_mut() {
            g.add(i, d.pid)?;
        }
        procs.push(d);
    }
    Ok(Nodes { procs, addrs, _groups: groups, _fs: fs, _dir: dir })
}

fn params(cfg: &FederationCfg, seed: u64) -> PmParams {
    PmParams {
        files: cfg.files_per_client,
        transactions: cfg.transactions,
        size_min_bytes: 2 << 10,
        size_max_bytes: 16 << 10,
        read_block_bytes: 16 << 10,
        write_block_bytes: 16 << 10,
        // Transactions read whole files (no appends) and create or delete.
        bias_read: 10,
        bias_create: 5,
        seed,
        keep_files: false,
    }
}

/// One point: `n` nodes, `clients` client threads.
fn point(cfg: &FederationCfg, n: usize, clients: usize) -> Result<Fig6Point, String> {
    let nodes = start_nodes(cfg, n)?;
    // One node is an ordinary server to the client (a cluster URL names two or more).
    let url = match &nodes.addrs[..] {
        [one] => one.clone(),
        many => format!("dafs://{}/", many.join(",")),
    };
    let start = Arc::new(Barrier::new(clients + 1));
    let mut threads = Vec::with_capacity(clients);
    for c in 0..clients {
        let (url, start, p) = (url.clone(), start.clone(), params(cfg, 42 + c as u64));
        threads.push(std::thread::spawn(move || -> Result<(u64, Vec<(String, u64)>), String> {
            // One client id per thread: a server bounds connections per client id.
            let id = format!("dafs-bench-federation-{}-{c}", std::process::id());
            let conn = Client::connect(&url, ClientConfig { client_id: id, ..Default::default() });
            start.wait();
            let mut client = conn.map_err(|e| format!("connect {url}: {e}"))?;
            let run = engine::run(&mut DafsFs::new(&mut client, ""), &format!("pm{c}"), &p)?;
            let k = &run.counts;
            let ops = k.created_alone + k.created_mixed + k.read + k.appended;
            let ops = ops + k.deleted_mixed + k.deleted_alone;
            let per_node = match client.cluster_nodes() {
                Some(nodes) => nodes.into_iter().map(|x| (x.addr, x.requests)).collect(),
                // One node: a plain client, whose own count is the node's.
                None => vec![(url.clone(), client.stats().requests)],
            };
            Ok((ops, per_node))
        }));
    }
    heartbeat(&format!("federation fig6: {n} node(s), {clients} clients"));
    let cpu0: Vec<f64> = nodes.procs.iter().map(|d| proc_cpu(d.pid).unwrap_or(0.0)).collect();
    start.wait();
    let t0 = Instant::now();
    let mut ops = 0;
    let mut requests_per_node = vec![0u64; n];
    let mut first_err = None;
    for t in threads {
        match t.join().map_err(|_| "a client thread panicked".to_string()).and_then(|r| r) {
            Ok((o, per)) => {
                ops += o;
                for (addr, r) in per {
                    if let Some(i) = nodes.addrs.iter().position(|a| *a == addr) {
                        requests_per_node[i] += r;
                    }
                }
            }
            Err(e) => first_err = first_err.or(Some(e)),
        }
    }
    let wall_secs = t0.elapsed().as_secs_f64();
    let budget = if cfg.node_cpus > 0.0 { cfg.node_cpus } else { 1.0 };
    let node_cpu: Vec<f64> = (nodes.procs.iter().zip(&cpu0))
        .map(|(d, c0)| proc_cpu(d.pid).unwrap_or(0.0) - c0)
        .collect();
    let node_busy = node_cpu.iter().map(|c| c / (wall_secs.max(1e-9) * budget)).collect();
    if let Some(e) = first_err {
        let logs: Vec<String> = nodes
            .procs
            .iter()
            .map(|d| std::fs::read_to_string(&d.log).unwrap_or_default())
            .filter(|l| !l.trim().is_empty())
            .collect();
        return Err(format!("{n} node(s): {e} (server logs: {})", logs.join(" | ").trim()));
    }
    Ok(Fig6Point {
        nodes: n,
        clients,
        ops,
        wall_secs,
        ops_per_s: ops as f64 / wall_secs.max(1e-9),
        speedup: None,
        node_cpu_us_per_request: node_cpu.iter().sum::<f64>() * 1e6
            / requests_per_node.iter().sum::<u64>().max(1) as f64,
        requests_per_node,
        node_busy,
    })
}

/// Every node count of `cfg` (the median of `cfg.runs` runs each), speedups against
/// the 1-node point.
pub fn run(cfg: &FederationCfg) -> Result<Vec<Fig6Point>, String> {
    let mut out: Vec<Fig6Point> = Vec::new();
    for &n in &cfg.nodes {
        let clients = (cfg.clients_per_node * n).max(cfg.clients_min);
        let mut runs = Vec::with_capacity(cfg.runs);
        for _ in 0..cfg.runs {
            runs.push(point(cfg, n, clients)?);
        }
        runs.sort_by(|a, b| a.ops_per_s.total_cmp(&b.ops_per_s));
        let mut p = runs.swap_remove(runs.len() / 2);
        eprintln!(
            "[dafs bench federation] fig6: {n} node(s), {clients} clients: {:.0} ops/s",
            p.ops_per_s
        );
        p.speedup = out.iter().find(|q| q.nodes == 1).map(|one| p.ops_per_s / one.ops_per_s);
        if n == 1 {
            p.speedup = Some(1.0);
        }
        out.push(p);
    }
    Ok(out)
}

pub fn markdown(points: &[Fig6Point], quota: &str, fs: &str) -> String {
    let mut s = format!(
        "### Fig. 6: PostMark throughput vs nodes ({quota} per dafsd; exports: {fs})\n\n\
         | Nodes | Clients | Ops | Wall (s) | Ops/s | Speedup | Requests per node | Node CPU / quota | Node CPU us / request |\n\
         |---|---|---|---|---|---|---|---|---|\n"
    );
    for p in points {
        let per: Vec<String> = p.requests_per_node.iter().map(|r| r.to_string()).collect();
        let busy: Vec<String> = p.node_busy.iter().map(|b| format!("{b:.2}")).collect();
        s += &format!(
            "| {} | {} | {} | {:.2} | {:.0} | {} | {} | {} | {:.0} |\n",
            p.nodes,
            p.clients,
            p.ops,
            p.wall_secs,
            p.ops_per_s,
            p.speedup.map_or("-".into(), |x| format!("{x:.2}x")),
            per.join(" / "),
            busy.join(" / "),
            p.node_cpu_us_per_request
        );
    }
    s
}

/// Whether `dir` can hold the runs' exports (a clear error before any server starts).
pub fn check_tmpdir(dir: &Path) -> Result<(), String> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(format!("--tmpdir {}: not a directory", dir.display()))
    }
}
