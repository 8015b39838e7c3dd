//! Table I of the seed: files per node for the PostMark pathname trace.

use dafs_cluster::placement::{Member, NodeId, PlacementMap, Policy};
use dafs_cluster::trace::{postmark_pool_paths, SEED_FILES_PER_CLIENT, SEED_TABLE_I};
use serde::Serialize;

/// Largest spread the issue accepts: every node within this share of the mean.
pub const SPREAD_MAX: f64 = 0.10;

#[derive(Debug, Clone, Serialize)]
pub struct Table1Row {
    pub nodes: usize,
    pub clients: usize,
    pub files: usize,
    pub files_per_node: Vec<usize>,
    pub mean: f64,
    /// Largest |count − mean| / mean over the nodes.
    pub max_deviation: f64,
    pub within_target: bool,
}

/// Member ids as the short form of cluster.toml names them for `127.0.0.1:7420+i`
/// (the ids hash; the addresses a run uses do not matter to placement).
fn members(n: usize) -> Vec<Member> {
    (0..n)
        .map(|i| {
            let addr = format!("127.0.0.1:{}", 7420 + i);
            Member::new(NodeId::new(addr.clone()).expect("valid id"), addr)
        })
        .collect()
}

/// The seed's pools (150 files per client; 6, 10, 16 clients on 2, 4, 8 nodes) under
/// the placement hash.
pub fn run() -> Result<Vec<Table1Row>, String> {
    let mut rows = Vec::new();
    for (n, clients) in SEED_TABLE_I {
        let paths = postmark_pool_paths(clients, SEED_FILES_PER_CLIENT);
        let map = PlacementMap::new(1, Policy::Matched, members(n)).map_err(|e| e.to_string())?;
        let counts = map.spread(&paths);
        assert_eq!(counts.iter().sum::<usize>(), paths.len(), "every path has one manager");
        let mean = paths.len() as f64 / n as f64;
        let dev = counts.iter().map(|&c| (c as f64 - mean).abs() / mean).fold(0.0, f64::max);
        rows.push(Table1Row {
            nodes: n,
            clients,
            files: paths.len(),
            files_per_node: counts,
            mean,
            max_deviation: dev,
            within_target: dev <= SPREAD_MAX,
        });
    }
    Ok(rows)
}

pub fn markdown(rows: &[Table1Row]) -> String {
    let mut s = String::from(
        "### Table I: files per node (PostMark pathname trace)\n\n\
         | Nodes | Clients | Files | Files per node | Mean | Max deviation | Within ±10% |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let per: Vec<String> = r.files_per_node.iter().map(|c| c.to_string()).collect();
        s += &format!(
            "| {} | {} | {} | {} | {:.0} | {:.1}% | {} |\n",
            r.nodes,
            r.clients,
            r.files,
            per.join(" / "),
            r.mean,
            r.max_deviation * 100.0,
            if r.within_target { "yes" } else { "no" }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_seed_trace_spreads_within_ten_percent() {
        let rows = super::run().unwrap();
        assert_eq!(rows.iter().map(|r| r.nodes).collect::<Vec<_>>(), vec![2, 4, 8]);
        for r in &rows {
            assert!(r.within_target, "{r:?}");
            assert_eq!(r.files, r.clients * 150);
        }
        assert!(super::markdown(&rows).contains("| 8 | 16 | 2400 |"));
    }
}
