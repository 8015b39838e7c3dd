//! Table I of the seed: how the placement hash spreads the PostMark pathname trace.
//!
//! ```text
//! cargo run -p dafs-cluster --example placement_spread -- [--json FILE]
//! ```
//!
//! Prints, as Markdown, the files per node for the seed's pools (150 files per client;
//! 6, 10 and 16 clients on 2, 4 and 8 nodes; members `127.0.0.1:7420+i` as the short
//! form of cluster.toml names them) and, for each size, the share of those names that
//! move when one node is added (ideal 1/(N+1)). Writes the same figures as JSON to
//! FILE (default `placement_spread.json`).

use dafs_cluster::placement::{Member, NodeId, PlacementMap, Policy};
use dafs_cluster::trace::{postmark_pool_paths, SEED_FILES_PER_CLIENT, SEED_TABLE_I};

fn nodes(n: usize) -> Vec<Member> {
    (0..n)
        .map(|i| {
            let addr = format!("127.0.0.1:{}", 7420 + i);
            Member::new(NodeId::new(addr.clone()).expect("valid id"), addr)
        })
        .collect()
}

fn main() {
    let mut json_path = "placement_spread.json".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json_path = args.next().expect("--json needs a file name"),
            other => {
                eprintln!("usage: placement_spread [--json FILE] (unknown argument {other:?})");
                std::process::exit(2);
            }
        }
    }
    let mut rows = Vec::new();
    println!("| Nodes | Clients | Files | Files per node | Max deviation from mean | Moved when adding a node (ideal) |");
    println!("|---|---|---|---|---|---|");
    for (n, clients) in SEED_TABLE_I {
        let paths = postmark_pool_paths(clients, SEED_FILES_PER_CLIENT);
        let map = PlacementMap::new(1, Policy::Matched, nodes(n)).expect("valid map");
        let bigger = PlacementMap::new(2, Policy::Matched, nodes(n + 1)).expect("valid map");
        let counts = map.spread(&paths);
        let mean = paths.len() as f64 / n as f64;
        let dev = counts.iter().map(|&c| (c as f64 - mean).abs() / mean).fold(0.0, f64::max);
        let moved = paths.iter().filter(|p| map.manager(p).id != bigger.manager(p).id).count();
        let moved_share = moved as f64 / paths.len() as f64;
        println!(
            "| {n} | {clients} | {} | {} | {:.1}% | {:.1}% ({:.1}%) |",
            paths.len(),
            counts.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" / "),
            dev * 100.0,
            moved_share * 100.0,
            100.0 / (n + 1) as f64
        );
        rows.push(serde_json::json!({
            "nodes": n, "clients": clients, "files": paths.len(), "files_per_node": counts,
            "max_deviation_from_mean": dev, "moved_when_adding_a_node": moved_share,
            "moved_ideal": 1.0 / (n + 1) as f64,
        }));
    }
    let doc = serde_json::json!({
        "experiment": "federation placement spread (seed Table I)",
        "hash": dafs_cluster::hash::HASH_NAME,
        "files_per_client": SEED_FILES_PER_CLIENT,
        "rows": rows,
    });
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc).expect("json") + "\n")
        .unwrap_or_else(|e| panic!("cannot write {json_path}: {e}"));
    eprintln!("wrote {json_path}");
}
