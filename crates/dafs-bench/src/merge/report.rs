//! The merge experiment's targets and Markdown report.

use super::MergeResults;
use crate::apps::{fmt_ratio, table, targets_and_errors};
use crate::util::ratio;
use crate::Target;

/// DAFS over shared memory against NFS, at every record size (the seed: up to 1.4x).
pub const TARGET_VS_NFS: f64 = 1.2;
/// DAFS over shared memory against local files, at every record size.
pub const TARGET_VS_LOCAL: f64 = 0.9;

fn ratios(res: &MergeResults, a: &str, b: &str) -> Vec<(usize, Option<f64>)> {
    res.config
        .record_sizes
        .iter()
        .map(|&r| {
            let x = res.row(a, r).zip(res.row(b, r)).and_then(|(x, y)| ratio(x.mbps, y.mbps));
            (r, x)
        })
        .collect()
}

fn target(res: &MergeResults, against: &str, want: f64) -> Target {
    let rs = ratios(res, "dafs-shm", against);
    let name = format!("merge on dafs-shm >= {want}x {against} at every record size");
    let detail =
        rs.iter().map(|(r, x)| format!("{r} B: {}", fmt_ratio(*x))).collect::<Vec<_>>().join(", ");
    let status = if rs.iter().any(|(_, x)| x.is_none()) {
        format!("n/a (not measured on both dafs-shm and {against} at every record size)")
    } else if rs.iter().all(|(_, x)| x.unwrap() >= want) {
        "met".into()
    } else {
        "missed".into()
    };
    Target { name, status, detail }
}

pub fn targets(res: &MergeResults) -> Vec<Target> {
    vec![target(res, "nfs", TARGET_VS_NFS), target(res, "local", TARGET_VS_LOCAL)]
}

/// The report: throughput and CPU per GB by record size, ratios, targets.
pub fn markdown(res: &MergeResults, command: &str) -> String {
    let c = &res.config;
    let systems: Vec<&str> = c.systems.iter().map(String::as_str).collect();
    let mut md = String::from("# dafs bench merge: n-way merge (seed 000, Fig. 5)\n\n");
    md += &format!(
        "`{command}` — {}; load average at start {}; {:.0} s.\n\n",
        res.date, res.host_load_avg_at_start, res.elapsed_s
    );
    md += &format!(
        "n = {} inputs of {} blocks of {} B ({} MiB of input, as much output), read-ahead and \
         write-behind {} blocks deep, median of {} run(s). Throughput = 2·n·x·y / t (bytes read \
         + written per second). Every output checked: keys in order, checksum of all records = \
         the inputs'.\n\n",
        c.inputs,
        c.blocks_per_input(),
        c.block_bytes,
        c.bytes_moved() / 2 / (1 << 20),
        c.qd,
        c.runs
    );
    let mut head = vec!["record size".to_string()];
    for s in &systems {
        head.push(format!("{s} MB/s"));
    }
    for s in &systems {
        head.push(format!("{s} CPU s/GB"));
    }
    head.extend(["dafs-shm / nfs".into(), "dafs-shm / local".into(), "dafs-tcp / nfs".into()]);
    let mut rows = Vec::new();
    for &r in &c.record_sizes {
        let mut row = vec![format!("{r} B")];
        for s in &systems {
            row.push(res.row(s, r).map(|x| format!("{:.0}", x.mbps)).unwrap_or("-".into()));
        }
        for s in &systems {
            row.push(res.row(s, r).map(|x| format!("{:.2}", x.cpu_s_per_gb)).unwrap_or("-".into()));
        }
        let q = |a: &str, b: &str| {
            fmt_ratio(res.row(a, r).zip(res.row(b, r)).and_then(|(x, y)| ratio(x.mbps, y.mbps)))
        };
        row.extend([q("dafs-shm", "nfs"), q("dafs-shm", "local"), q("dafs-tcp", "nfs")]);
        rows.push(row);
    }
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    md += &table(&head, &rows);
    let srv: Vec<Vec<String>> = res
        .rows
        .iter()
        .filter_map(|r| {
            r.srv_cpu_s_per_gb
                .map(|s| vec![r.system.clone(), format!("{} B", r.record_bytes), format!("{s:.2}")])
        })
        .collect();
    if !srv.is_empty() {
        md += "\nServer CPU (dafsd / ganesha.nfsd), s per GB moved:\n\n";
        md += &table(&["system", "record size", "server CPU s/GB"], &srv);
    }
    let errs: Vec<String> = res
        .rows
        .iter()
        .filter_map(|r| {
            r.error.as_ref().map(|e| format!("- {} at {} B: {e}", r.system, r.record_bytes))
        })
        .collect();
    md += &targets_and_errors(&res.targets, "ratios measured", errs, &res.notes);
    md
}

/// merge_mbps.png and merge_cpu.png in `out` (throughput and client CPU per GB vs
/// record size, one line per system); returns the file names written.
pub fn plots(res: &MergeResults, out: &std::path::Path) -> Result<Vec<String>, String> {
    let text = crate::plot::load_font();
    let mut files = Vec::new();
    for (file, title, ydesc, f) in [
        (
            "merge_mbps.png",
            "n-way merge throughput vs record size",
            "MB/s (2nxy/t)",
            (|r: &super::MergeRow| r.mbps) as fn(&super::MergeRow) -> f64,
        ),
        ("merge_cpu.png", "n-way merge client CPU vs record size", "client CPU s/GB", |r| {
            r.cpu_s_per_gb
        }),
    ] {
        let series: crate::plot::Series = res
            .config
            .systems
            .iter()
            .map(|s| {
                let pts = res
                    .rows
                    .iter()
                    .filter(|r| &r.system == s && r.error.is_none())
                    .map(|r| (r.record_bytes as f64, f(r)))
                    .collect();
                (s.clone(), pts)
            })
            .collect();
        crate::plot::line_plot(
            &out.join(file),
            title,
            "record size (bytes)",
            ydesc,
            &series,
            text,
        )?;
        files.push(file.to_string());
    }
    Ok(files)
}
