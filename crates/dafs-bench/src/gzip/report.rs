//! The gzip experiment's target and Markdown report.

use super::GzipResults;
use crate::apps::{fmt_ratio, table, targets_and_errors};
use crate::util::ratio;
use crate::Target;

/// The DAFS gzip with 2 processes against 1, on shared memory (the seed: 2x on 2 CPUs).
pub const TARGET_2P_SPEEDUP: f64 = 1.8;

pub fn targets(res: &GzipResults) -> Vec<Target> {
    let name = format!("gzip with 2 processes on dafs-shm >= {TARGET_2P_SPEEDUP}x one process");
    let r =
        res.row("dafs-shm", 2).zip(res.row("dafs-shm", 1)).and_then(|(a, b)| ratio(a.mbps, b.mbps));
    let status = match r {
        None => "n/a (dafs-shm not measured with 1 and 2 processes)".to_string(),
        Some(_) if res.cpus < 2 => "n/a (fewer than 2 CPUs)".into(),
        Some(x) if x >= TARGET_2P_SPEEDUP => "met".into(),
        Some(_) => "missed".into(),
    };
    vec![Target { name, status, detail: format!("{} on {} CPUs", fmt_ratio(r), res.cpus) }]
}

pub fn markdown(res: &GzipResults, command: &str) -> String {
    let c = &res.config;
    let mut md = String::from("# dafs bench gzip: compress a large file (seed 001)\n\n");
    md += &format!(
        "`{command}` — {}; {} CPUs; load average at start {}; {:.0} s.\n\n",
        res.date, res.cpus, res.host_load_avg_at_start, res.elapsed_s
    );
    md += &format!(
        "{} MiB of generated text, level {}, median of {} run(s). DAFS gzip: {} B blocks, \
         double-buffered asynchronous reads and writes in registered memory, one gzip member \
         per process. Stock gzip: `gzip -c -{} IN > OUT`. Every output passed `gzip -t` and \
         decompressed to the input.\n\n",
        c.input_bytes >> 20,
        c.level,
        c.runs,
        c.block_bytes,
        c.level
    );
    let one = res.row("dafs-shm", 1).map(|r| r.mbps);
    let rows: Vec<Vec<String>> = res
        .rows
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| {
            let cpu = crate::util::median(&r.runs.iter().map(|s| s.cpu_s).collect::<Vec<_>>());
            let what = if r.way.starts_with("dafs-") { "DAFS gzip" } else { "stock gzip" };
            vec![
                format!("{what}, {}", r.way),
                r.processes.to_string(),
                format!("{:.2}", r.secs),
                format!("{:.1}", r.mbps),
                format!("{cpu:.2}"),
                format!("{:.2}", r.ratio),
                fmt_ratio(one.and_then(|o| ratio(r.mbps, o))),
            ]
        })
        .collect();
    md += &table(
        &[
            "run",
            "processes",
            "seconds",
            "input MB/s",
            "CPU s",
            "compression ratio",
            "vs DAFS gzip 1 process",
        ],
        &rows,
    );
    let errs: Vec<String> = res
        .rows
        .iter()
        .filter_map(|r| {
            r.error.as_ref().map(|e| format!("- {} ({} processes): {e}", r.way, r.processes))
        })
        .collect();
    md += &targets_and_errors(&res.targets, "measured", errs, &res.notes);
    md
}
