//! The application experiments with a Rust entry point, run in this process:
//! `merge::run_merge` (seed 000 Fig. 5), `postmark::run_postmark` (000 Fig. 6, 003
//! Fig. 6) and `gzip::run_gzip` (001; its workers are processes of the dafs binary). Each is configured by parsing its own command line (`--quick --out DIR`), so
//! its defaults stay its own; its results are written to OUT/<name>/results.json and
//! turned into the series the paper table names.

use std::path::Path;
use std::time::Instant;

use clap::Parser;

use super::measure::Measured;
use super::report::ExperimentRun;
use super::SeedsArgs;
use crate::gzip::{self, GzipResults};
use crate::merge::{self, MergeResults};
use crate::postmark::{self, PostmarkResults};

#[derive(Parser, Debug)]
struct MergeCli {
    #[command(flatten)]
    args: merge::MergeArgs,
}

#[derive(Parser, Debug)]
struct GzipCli {
    #[command(flatten)]
    args: gzip::GzipArgs,
}

#[derive(Parser, Debug)]
struct PostmarkCli {
    #[command(flatten)]
    args: postmark::PostmarkArgs,
}

/// How the postmark targets appear in the paper table's series.
const POSTMARK_SERIES: [(&str, &str); 7] = [
    ("native-local", "native-local"),
    ("native-tcp", "dafs-tcp"),
    ("native-shm", "dafs-shm"),
    ("native-nfs", "nfs"),
    ("postmark-local", "local"),
    ("postmark-preload", "preload"),
    ("postmark-fuse", "fuse"),
];

/// Merge throughput and client CPU per record size, verified runs only.
pub fn from_merge(r: &MergeResults) -> Measured {
    let mut m = Measured::default();
    for row in r.rows.iter().filter(|x| x.error.is_none() && x.verified && !x.runs.is_empty()) {
        let x = row.record_bytes as f64;
        m.add(&format!("merge.mbps.{}", row.system), x, row.mbps);
        m.add(&format!("merge.cpugb.{}", row.system), x, row.cpu_s_per_gb);
    }
    m
}

/// Transactions per second (wall clock, the same clock for every target) per mean file
/// size of the I/O-boundedness sweep.
pub fn from_postmark(r: &PostmarkResults) -> Measured {
    let mut m = Measured::default();
    for p in &r.sweep {
        for t in p.results.iter().filter(|t| t.error.is_none()) {
            let Some(name) = POSTMARK_SERIES.iter().find(|s| s.0 == t.target).map(|s| s.1) else {
                continue;
            };
            if let Some(v) = t.tx_per_s_wall {
                m.add(&format!("postmark.tps.{name}"), p.mean_size_bytes as f64, v);
            }
        }
    }
    m
}

/// Compression throughput (input MB/s) per way and process count, verified runs only.
pub fn from_gzip(r: &GzipResults) -> Measured {
    let mut m = Measured::default();
    for row in r.rows.iter().filter(|x| x.error.is_none() && x.verified && !x.runs.is_empty()) {
        m.add(&format!("gzip.mbps.{}.p{}", row.way, row.processes), 0.0, row.mbps);
    }
    m
}

fn argv(a: &SeedsArgs, out: &Path) -> Vec<String> {
    let mut v = vec!["x".to_string(), "--out".into(), out.display().to_string()];
    if a.quick {
        v.push("--quick".into());
    }
    v
}

fn write_json(out: &Path, json: &impl serde::Serialize) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let p = out.join("results.json");
    let s = serde_json::to_string_pretty(json).map_err(|e| e.to_string())?;
    std::fs::write(&p, s).map_err(|e| format!("{}: {e}", p.display()))
}

fn finish(
    name: &str,
    quick: bool,
    out: &Path,
    t0: Instant,
    res: Result<(Measured, Vec<String>), String>,
) -> (ExperimentRun, Measured) {
    let mut run = ExperimentRun {
        name: name.into(),
        command: format!(
            "dafs bench {name}{} --out {}",
            if quick { " --quick" } else { "" },
            out.display()
        ),
        status: "ran".into(),
        secs: t0.elapsed().as_secs_f64(),
        out_dir: Some(out.display().to_string()),
        series: 0,
        notes: vec![],
    };
    match res {
        Ok((m, notes)) => {
            run.series = m.series.len();
            run.notes = notes;
            (run, m)
        }
        Err(e) => {
            run.status = format!("failed: {e}");
            (run, Measured::default())
        }
    }
}

/// `dafs bench merge` through `merge::run_merge`.
pub fn run_merge(a: &SeedsArgs) -> (ExperimentRun, Measured) {
    let out = a.out.join("merge");
    let t0 = Instant::now();
    let res = MergeCli::try_parse_from(argv(a, &out))
        .map_err(|e| e.to_string())
        .and_then(|c| merge::MergeConfig::from_args(&c.args))
        .and_then(|cfg| {
            crate::util::start_watchdog(std::time::Duration::from_secs(120));
            let r = merge::run_merge(&cfg);
            crate::util::stop_watchdog();
            r
        })
        .and_then(|r| {
            write_json(&out, &r)?;
            let md = merge::markdown(&r, "dafs bench seeds (merge)");
            let _ = std::fs::write(out.join("report.md"), md);
            let mut notes = r.notes.clone();
            notes.extend(
                r.rows
                    .iter()
                    .filter_map(|x| x.error.as_ref().map(|e| format!("{}: {e}", x.system))),
            );
            Ok((from_merge(&r), notes))
        });
    finish("merge", a.quick, &out, t0, res)
}

/// `dafs bench postmark` through `postmark::run_postmark`.
pub fn run_postmark(a: &SeedsArgs) -> (ExperimentRun, Measured) {
    let out = a.out.join("postmark");
    let t0 = Instant::now();
    let res = PostmarkCli::try_parse_from(argv(a, &out))
        .map_err(|e| e.to_string())
        .and_then(|c| postmark::PostmarkConfig::from_args(&c.args))
        .and_then(|cfg| {
            let r = postmark::run_postmark(&cfg);
            crate::util::stop_watchdog();
            r
        })
        .and_then(|r| {
            write_json(&out, &r)?;
            Ok((from_postmark(&r), r.notes.clone()))
        });
    finish("postmark", a.quick, &out, t0, res)
}

/// `dafs bench gzip` through `gzip::run_gzip`.
pub fn run_gzip(a: &SeedsArgs) -> (ExperimentRun, Measured) {
    let out = a.out.join("gzip");
    let t0 = Instant::now();
    let res = GzipCli::try_parse_from(argv(a, &out))
        .map_err(|e| e.to_string())
        .and_then(|c| gzip::GzipConfig::from_args(&c.args))
        .and_then(|cfg| {
            crate::util::start_watchdog(std::time::Duration::from_secs(300));
            let r = gzip::run_gzip(&cfg);
            crate::util::stop_watchdog();
            r
        })
        .and_then(|r| {
            write_json(&out, &r)?;
            let md = gzip::markdown(&r, "dafs bench seeds (gzip)");
            let _ = std::fs::write(out.join("report.md"), md);
            let mut notes = r.notes.clone();
            notes.extend(
                r.rows.iter().filter_map(|x| x.error.as_ref().map(|e| format!("{}: {e}", x.way))),
            );
            Ok((from_gzip(&r), notes))
        });
    finish("gzip", a.quick, &out, t0, res)
}
