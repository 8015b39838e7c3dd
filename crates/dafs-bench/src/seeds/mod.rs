//! `dafs bench seeds`: every experiment of the seeds that the tree can run, in one
//! report beside the papers' published values.
//!
//! Order: in this process, through their Rust entry points, the `dafs bench`
//! microbenchmarks (bandwidth and CPU vs block size, latency inline vs direct, overlap),
//! `merge::run_merge`, `postmark::run_postmark` and `gzip::run_gzip`; then as child
//! processes with a time budget each, the adapters' `bench.sh` for MPI-IO, Berkeley DB and
//! ODM. Output: OUT/seeds.md, OUT/seeds.json,
//! OUT/seeds-*.png, and each experiment's own output under OUT/<name>/.

mod convert;
mod inproc;
mod markdown;
pub mod measure;
pub mod paper;
mod plot;
pub mod report;
mod runner;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;

use measure::Measured;
use report::{ExperimentRun, SeedsInfo};

/// Experiments `dafs bench seeds` knows, in running order.
pub const EXPERIMENTS: [&str; 7] = ["bench", "merge", "postmark", "gzip", "mpiio", "bdb", "odm"];

/// `dafs bench seeds` options.
#[derive(clap::Args, Debug, Clone)]
pub struct SeedsArgs {
    /// Short run (under 5 minutes on 2 cores): every experiment with --quick and a short
    /// time budget.
    #[arg(long)]
    pub quick: bool,
    /// Output directory (seeds.md, seeds.json, plots, and one directory per experiment).
    #[arg(long, default_value = "seeds-out")]
    pub out: PathBuf,
    /// Experiments to run, comma separated (default: all of bench, merge, postmark, gzip,
    /// mpiio, bdb, odm).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Time budget of each child experiment in seconds (default with --quick: 75 for
    /// mpiio, 45 for bdb and odm, so the whole run stays under 5 minutes; 3600 without);
    /// one over it is stopped and reported as failed.
    #[arg(long)]
    pub budget_s: Option<u64>,
    /// Extra flags for the microbenchmarks, one string (e.g. "--nfs-url URL --qd 16";
    /// not --out, nor --runs with --quick).
    #[arg(long, allow_hyphen_values = true)]
    pub bench_args: Option<String>,
    /// The repository root holding adapters/ (default: found upwards from the current
    /// directory, then from this executable).
    #[arg(long)]
    pub repo: Option<PathBuf>,
}

/// Parse `dafs bench` arguments for the microbenchmarks (the same parser the CLI uses).
#[derive(Parser, Debug)]
struct BenchOnly {
    #[command(flatten)]
    args: crate::BenchArgs,
}

fn find_repo(a: &SeedsArgs) -> Option<PathBuf> {
    if let Some(r) = &a.repo {
        return Some(r.clone());
    }
    let starts = [std::env::current_dir().ok(), std::env::current_exe().ok()];
    starts.into_iter().flatten().find_map(|s| {
        s.ancestors()
            .find(|d| d.join("adapters").is_dir() && d.join("Cargo.toml").is_file())
            .map(Path::to_path_buf)
    })
}

/// The microbenchmarks through `crate::bench`, their report under OUT/bench.
fn run_bench(a: &SeedsArgs) -> (ExperimentRun, Measured) {
    let out = a.out.join("bench");
    // The seeds report is the one printed: the microbenchmarks' own stays in OUT/bench.
    let mut argv: Vec<String> =
        vec!["bench".into(), "--out".into(), out.display().to_string(), "--no-print".into()];
    if a.quick {
        // One run of each: the quick report is indicative, and the budget is 5 minutes.
        argv.extend(["--quick", "--runs", "1"].map(String::from));
    }
    argv.extend(a.bench_args.iter().flat_map(|s| s.split_whitespace().map(String::from)));
    let t0 = Instant::now();
    let command = format!("dafs {}", argv.join(" "));
    let res = BenchOnly::try_parse_from(&argv)
        .map_err(|e| e.to_string())
        .and_then(|b| crate::bench(&b.args));
    let mut run = ExperimentRun {
        name: "bench".into(),
        command,
        status: "ran".into(),
        secs: t0.elapsed().as_secs_f64(),
        out_dir: Some(out.display().to_string()),
        series: 0,
        notes: vec![],
    };
    match res {
        Ok(r) => {
            run.notes.push(format!("nfs: {}", r.info.nfs));
            if let Some(l) = &r.latency {
                // A fit with a slope <= 0 (noise on a loaded machine) gives no rate.
                for f in l.fits.iter().filter(|f| f.slope_ns_per_byte <= 0.0) {
                    run.notes.push(format!(
                        "latency fit {} {}: slope {:.3} ns/byte (r2 {:.2}) is not positive, so no transfer rate",
                        f.transport, f.mode, f.slope_ns_per_byte, f.r2
                    ));
                }
            }
            run.notes.extend(r.errors.iter().take(5).map(|e| format!("error: {e}")));
            let m = measure::from_bench(&r);
            run.series = m.series.len();
            (run, m)
        }
        Err(e) => {
            run.status = format!("failed: {e}");
            (run, Measured::default())
        }
    }
}

fn child_for(name: &str, a: &SeedsArgs, repo: &Option<PathBuf>, budget: Duration) -> runner::Child {
    let out_dir = a.out.join(name);
    let mut args: Vec<String> = Vec::new();
    let dir = if name == "mpiio" { "ompio" } else { name };
    let root = repo.clone().unwrap_or_else(|| PathBuf::from("."));
    let (program, cwd) = (root.join("adapters").join(dir).join("bench.sh"), Some(root));
    if a.quick {
        args.push("--quick".into());
    }
    args.extend(["--out".to_string(), out_dir.display().to_string()]);
    let mut env = vec![("DAFS_PROFILE".to_string(), profile())];
    if name == "bdb" {
        // bdb/bench.sh takes no --out: its JSON goes where BDB_BENCH_JSON says.
        env.push(("BDB_BENCH_JSON".into(), out_dir.join("bdb-fig7.json").display().to_string()));
    }
    runner::Child { name: name.into(), program, args, out_dir, budget, cwd, env }
}

/// The build profile the adapters' scripts should use: $DAFS_PROFILE, else the one this
/// executable comes from (target/<profile>/dafs), so a script does not start a release
/// build of the workspace under a debug run.
fn profile() -> String {
    if let Ok(p) = std::env::var("DAFS_PROFILE") {
        return p;
    }
    let exe = std::env::current_exe().ok();
    let dir = exe.as_deref().and_then(|e| e.parent()).and_then(|d| d.file_name());
    match dir.and_then(|d| d.to_str()) {
        Some("release") => "release".into(),
        _ => "debug".into(),
    }
}

/// A child's time budget: --budget-s, else by experiment (quick: MPI-IO compiles and
/// runs four backends, the others two or three).
fn budget(a: &SeedsArgs, name: &str) -> Duration {
    let quick_s = if name == "mpiio" { 75 } else { 45 };
    Duration::from_secs(a.budget_s.unwrap_or(if a.quick { quick_s } else { 3600 }))
}

fn selected(a: &SeedsArgs) -> Result<Vec<String>, String> {
    if a.only.is_empty() {
        return Ok(EXPERIMENTS.iter().map(|s| s.to_string()).collect());
    }
    let mut v = Vec::new();
    for s in &a.only {
        let s = s.trim().to_ascii_lowercase();
        if !EXPERIMENTS.contains(&s.as_str()) {
            return Err(format!("unknown experiment {s:?} (known: {})", EXPERIMENTS.join(", ")));
        }
        v.push(s);
    }
    Ok(v)
}

/// Write OUT/seeds.md, OUT/seeds.json and the plots; returns the Markdown.
pub fn write_report(out: &Path, rep: &mut report::SeedsReport) -> Result<String, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    if let Err(e) = plot::plots(rep, out) {
        eprintln!("[dafs bench seeds] plots: {e}");
    }
    let md = markdown::markdown(rep);
    let p = out.join("seeds.md");
    std::fs::write(&p, &md).map_err(|e| format!("{}: {e}", p.display()))?;
    let j = serde_json::to_string_pretty(rep).map_err(|e| e.to_string())?;
    let p = out.join("seeds.json");
    std::fs::write(&p, j).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(md)
}

/// `dafs bench seeds`.
pub fn run(a: &SeedsArgs) -> Result<(), String> {
    let t0 = Instant::now();
    let paper = paper::paper()?;
    let which = selected(a)?;
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    // Absolute: the adapters' scripts run from the repository root, not from here.
    let mut abs = a.clone();
    abs.out = std::fs::canonicalize(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let a = &abs;
    let repo = find_repo(a);

    let mut measured = Measured::default();
    let mut runs = Vec::new();
    for name in &which {
        eprintln!("[dafs bench seeds] {name} ...");
        let (run, m) = match name.as_str() {
            "bench" => run_bench(a),
            "merge" => inproc::run_merge(a),
            "postmark" => inproc::run_postmark(a),
            "gzip" => inproc::run_gzip(a),
            _ => runner::run_child(&child_for(name, a, &repo, budget(a, name))),
        };
        eprintln!(
            "[dafs bench seeds] {name}: {} ({:.0} s, {} series)",
            run.status, run.secs, run.series
        );
        measured.merge(m);
        runs.push(run);
    }
    let info = SeedsInfo {
        date: crate::util::utc_now(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        host: crate::host_info(),
        quick: a.quick,
        elapsed_s: t0.elapsed().as_secs_f64(),
    };
    let mut rep = report::build(info, &paper, measured, runs);
    let md = write_report(&a.out, &mut rep)?;
    println!("{md}");
    eprintln!(
        "[dafs bench seeds] wrote {}/seeds.md and seeds.json in {:.0} s",
        a.out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests;
