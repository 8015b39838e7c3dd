//! `dafs bench federation`: the experiments of the seed "Federated DAFS" on a cluster
//! of `dafsd --cluster` nodes on loopback addresses.
//!
//! Parts (`--parts`, default all): `table1` (files per node for the PostMark pathname
//! trace on 2, 4, 8 nodes), `fig6` (PostMark-style throughput on 1, 2, 4, 8 nodes, each
//! node in its own CPU-quota cgroup), `fig7` (remote accesses per node under round-robin
//! vs matched placement) and `fig8` (a read-only workload under round-robin placement,
//! the forwarding nodes' block cache off and on; both in `forwarding`). Each part is a module with a
//! `run` and a `markdown`; [`run`] dispatches on the list. Output: Markdown on stdout
//! and OUT/federation.md, OUT/federation.json.

mod cgroup;
mod fig6;
pub mod forwarding;
mod nodefs;
mod table1;

use std::path::PathBuf;

use serde::Serialize;

use crate::util;

/// The parts this command knows, in the order they run.
pub const PARTS: [&str; 4] = ["table1", "fig6", "fig7", "fig8"];

/// `dafs bench federation` options.
#[derive(clap::Args, Debug, Clone)]
pub struct FederationArgs {
    /// Parts to run, comma separated: table1, fig6, fig7, fig8 (default all).
    #[arg(long, value_delimiter = ',')]
    pub parts: Vec<String>,
    /// Short run: nodes 1,2,4; 60 transactions per client; 1 run.
    #[arg(long)]
    pub quick: bool,
    /// Node counts of Figs. 6 and 7 (comma separated). Default 1,2,4,8 (Fig. 7 skips 1).
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<usize>,
    /// CPUs each dafsd may use (a CFS quota in its own cgroup; 0: no quota). The
    /// default, 0.1, keeps 8 nodes (0.8 CPU) clear of a 2-core host's limit so the
    /// clients are not the bottleneck.
    #[arg(long, default_value_t = 0.1)]
    pub node_cpus: f64,
    /// The file system under each node's export (Fig. 6): `ext4` (a loop-mounted
    /// image per node, as each machine has its own disk), `tmpfs` (one per node) or
    /// `shared` (directories of --tmpdir's file system, which all nodes then share).
    #[arg(long, value_enum, default_value_t = nodefs::NodeFsKind::Ext4)]
    pub node_fs: nodefs::NodeFsKind,
    /// Client threads per node (each a cluster client running PostMark in its own
    /// directory). The default, 6, keeps every quota'd node busy (>= 0.9 of its
    /// quota; the report shows it): with 2 per node, clients waiting on one node
    /// leave others idle and the speedup measures the client count, not the design.
    #[arg(long, default_value_t = 6)]
    pub clients_per_node: usize,
    /// Fewest clients of any point.
    #[arg(long, default_value_t = 2)]
    pub clients_min: usize,
    /// Files per client (PostMark `set number`; the seed's 150).
    #[arg(long, default_value_t = 150)]
    pub files_per_client: usize,
    /// Transactions per client. Default 300 (60 with --quick).
    #[arg(long)]
    pub transactions: Option<usize>,
    /// Runs of every point; the median is reported. Default 1 for Fig. 6; for Fig. 8
    /// 3 (1 with --quick), cache off and on alternating.
    #[arg(long)]
    pub runs: Option<usize>,
    /// Cluster size of Fig. 8.
    #[arg(long, default_value_t = 4)]
    pub cache_nodes: usize,
    /// Seconds per measurement of Fig. 8. Default 3 (1 with --quick).
    #[arg(long)]
    pub secs: Option<f64>,
    /// dafsd binary (default: next to this executable).
    #[arg(long)]
    pub dafsd: Option<PathBuf>,
    /// Parent directory of the nodes' exports (default $TMPDIR or /tmp).
    #[arg(long)]
    pub tmpdir: Option<PathBuf>,
    /// Output directory (federation.md, federation.json).
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
}

/// What [`FederationArgs`] resolves to.
#[derive(Debug, Clone)]
pub struct FederationCfg {
    pub parts: Vec<String>,
    pub nodes: Vec<usize>,
    pub node_cpus: f64,
    pub node_fs: nodefs::NodeFsKind,
    pub clients_per_node: usize,
    pub clients_min: usize,
    pub files_per_client: usize,
    pub transactions: usize,
    pub runs: usize,
    pub dafsd: PathBuf,
    pub tmpdir: PathBuf,
    /// The options as given (Figs. 7 and 8 read theirs from here).
    pub args: FederationArgs,
}

impl FederationCfg {
    pub fn from_args(a: &FederationArgs) -> Result<FederationCfg, String> {
        let parts: Vec<String> = if a.parts.is_empty() {
            PARTS.iter().map(|s| s.to_string()).collect()
        } else {
            a.parts.iter().map(|s| s.trim().to_ascii_lowercase()).collect()
        };
        if let Some(p) = parts.iter().find(|p| !PARTS.contains(&p.as_str())) {
            return Err(format!("--parts: unknown part {p:?} (known: {})", PARTS.join(", ")));
        }
        let nodes = match (&a.nodes[..], a.quick) {
            ([], false) => vec![1, 2, 4, 8],
            ([], true) => vec![1, 2, 4],
            (n, _) => n.to_vec(),
        };
        if let Some(&n) = nodes.iter().find(|&&n| n == 0 || n > fig6::NODES_MAX) {
            return Err(format!("--nodes: {n} is not in 1..={}", fig6::NODES_MAX));
        }
        if a.runs == Some(0) || a.files_per_client == 0 || a.clients_per_node == 0 {
            return Err(
                "--runs, --files-per-client and --clients-per-node must be at least 1".into()
            );
        }
        let need_dafsd = parts.iter().any(|p| p != "table1");
        let dafsd = if need_dafsd {
            crate::server::find_dafsd(a.dafsd.as_deref())?
        } else {
            PathBuf::new()
        };
        let tmpdir = a.tmpdir.clone().unwrap_or_else(std::env::temp_dir);
        fig6::check_tmpdir(&tmpdir)?;
        Ok(FederationCfg {
            parts,
            nodes,
            node_cpus: a.node_cpus,
            node_fs: a.node_fs,
            clients_per_node: a.clients_per_node,
            clients_min: a.clients_min.max(1),
            files_per_client: a.files_per_client,
            transactions: a.transactions.unwrap_or(if a.quick { 60 } else { 300 }),
            runs: a.runs.unwrap_or(1),
            dafsd,
            tmpdir,
            args: a.clone(),
        })
    }
}

/// Everything a run measured (the parts not run are absent).
#[derive(Debug, Clone, Serialize, Default)]
pub struct FederationResults {
    pub started_utc: String,
    /// The host's load average (1 min) at the start: figures from a busy host are
    /// noisy.
    pub load_avg_1m: Option<f64>,
    pub cpu_quota: Option<String>,
    pub node_cpus: f64,
    pub node_fs: Option<nodefs::NodeFsKind>,
    pub table1: Option<Vec<table1::Table1Row>>,
    pub fig6: Option<Vec<fig6::Fig6Point>>,
}

fn load_avg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Run the parts of `cfg`, in order.
pub fn run_parts(cfg: &FederationCfg) -> Result<(FederationResults, String), String> {
    let mut res = FederationResults {
        started_utc: util::utc_now(),
        load_avg_1m: load_avg(),
        node_cpus: cfg.node_cpus,
        ..Default::default()
    };
    let mut md = format!(
        "## dafs bench federation ({}; load average {})\n\n",
        res.started_utc,
        res.load_avg_1m.map_or("?".into(), |l| format!("{l:.2}"))
    );
    for part in &cfg.parts {
        match part.as_str() {
            "table1" => {
                let rows = table1::run()?;
                md += &table1::markdown(&rows);
                res.table1 = Some(rows);
            }
            "fig6" => {
                let quota = if cfg.node_cpus > 0.0 {
                    // Probe once, so a host without cgroups fails before any server runs.
                    cgroup::CpuGroups::new(cfg.node_cpus)?.describe()
                } else {
                    "no CPU quota".to_string()
                };
                let points = fig6::run(cfg)?;
                md += &fig6::markdown(&points, &quota, cfg.node_fs.describe());
                res.node_fs = Some(cfg.node_fs);
                res.cpu_quota = Some(quota);
                res.fig6 = Some(points);
            }
            "fig7" => forwarding::fig7(&cfg.dafsd, &cfg.args, &mut md)?,
            "fig8" => forwarding::fig8(&cfg.dafsd, &cfg.args, &mut md)?,
            other => unreachable!("part {other} was checked by from_args"),
        }
        md.push('\n');
    }
    Ok((res, md))
}

/// `dafs bench federation`: run, print the Markdown, write OUT/federation.{md,json}.
pub fn run(a: &FederationArgs) -> Result<(), String> {
    let cfg = FederationCfg::from_args(a)?;
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let (res, md) = run_parts(&cfg)?;
    println!("{md}");
    let md_path = a.out.join("federation.md");
    std::fs::write(&md_path, &md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    let json_path = a.out.join("federation.json");
    let json = serde_json::to_string_pretty(&res).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json).map_err(|e| format!("{}: {e}", json_path.display()))?;
    eprintln!("[dafs bench federation] wrote {} and {}", md_path.display(), json_path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: FederationArgs,
    }

    fn cfg(args: &[&str]) -> Result<FederationCfg, String> {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        FederationCfg::from_args(&cli.a)
    }

    #[test]
    fn parts_and_nodes_are_checked() {
        let c = cfg(&["--parts", "table1"]).unwrap();
        assert_eq!(
            (c.parts.clone(), c.nodes.clone()),
            (vec!["table1".to_string()], vec![1, 2, 4, 8])
        );
        assert!(cfg(&["--parts", "fig9"]).unwrap_err().contains("unknown part"));
        assert!(cfg(&["--parts", "table1", "--nodes", "0"]).unwrap_err().contains("--nodes"));
        assert_eq!(cfg(&["--parts", "table1", "--quick"]).unwrap().transactions, 60);
    }

    #[test]
    fn table1_alone_writes_its_table() {
        let c = cfg(&["--parts", "table1"]).unwrap();
        let (res, md) = run_parts(&c).unwrap();
        assert_eq!(res.table1.unwrap().len(), 3);
        assert!(res.fig6.is_none());
        assert!(md.contains("Table I"), "{md}");
    }
}
