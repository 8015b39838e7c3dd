//! # dafs-bench — `dafs bench`, the project's performance harness
//!
//! One run measures, side by side on the same machine and the same data file:
//! local files (pread/pwrite), DAFS over TCP, DAFS over shared memory (a dafsd child
//! started by the harness on a temporary export), and the NFS baseline (NFS-Ganesha +
//! libnfs via the peer's `nfsbench`) when it is running.
//!
//! Workloads (after the experiments of "DAFS structure and performance"):
//! - `bandwidth`: bandwidth and client/server CPU per GB vs block size, for random
//!   reads at QD1, sequential reads at QD1 and QD N (asynchronous), random writes at
//!   QD1 and sequential writes at QD N;
//! - `latency`: NULL round trip, read latency vs size forcing inline and forcing
//!   direct transfers, a fitted per-op + per-byte model for each, and the crossover
//!   (the recommended inline threshold);
//! - `metadata`: a PostMark-like small-file mix (create+write+close, open+read+close,
//!   unlink);
//! - `overlap`: how much I/O time asynchronous reads hide behind computation.
//!
//! Output: Markdown on stdout and OUT/report.md, OUT/results.json, PNG plots.

// `x % n == 0` rather than `is_multiple_of` (workspace rust-version 1.82).
#![allow(clippy::manual_is_multiple_of)]

mod apps;
mod backends;
pub mod copy;
pub mod federation;
pub mod gzip;
mod latency;
mod libnfs;
pub mod merge;
mod mountbench;
mod nfs;
mod ofi;
mod overlap;
mod plot;
pub mod postmark;
mod report;
mod results;
pub mod seeds;
mod server;
mod targets;
mod util;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dafs_client::Provider;

use backends::{Backend, Dafs, DataSpec, Local, MetaSample, Sample};
use server::Dafsd;
use util::{heartbeat, median, median_opt, Burner};

use latency::latency_model;
use overlap::overlap_one;
pub(crate) use results::summarize;
pub use results::{
    Crossover, DataRow, LatFit, LatPoint, LatencyResults, MetaRow, OverlapRow, Results, RunInfo,
    Target,
};

/// `dafs bench` options.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// An application experiment instead of the microbenchmarks (see docs/benchmarks.md).
    #[command(subcommand)]
    pub cmd: Option<BenchCmd>,
    /// Short run (well under a minute): 64 MiB file, 4 KiB and 1 MiB blocks, about 1 s per
    /// test (all its runs together), 300 files in the metadata mix.
    #[arg(long)]
    pub quick: bool,
    /// Runs of every measurement; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Data file size (suffixes k, m, g). Default 1g (64m with --quick).
    #[arg(long, value_parser = util::parse_size)]
    pub size: Option<u64>,
    /// Seconds per run of each data test. Default 2 (0.25 with --quick).
    #[arg(long)]
    pub secs: Option<f64>,
    /// Queue depth of the asynchronous tests (and threads of local at that depth).
    #[arg(long, default_value_t = 8)]
    pub qd: usize,
    /// Block sizes, comma separated (suffixes k, m). Default 4k,16k,64k,256k,1m (4k,1m with --quick).
    #[arg(long, value_delimiter = ',', value_parser = util::parse_size)]
    pub block_sizes: Vec<u64>,
    /// Backends, comma separated: local, dafs-tcp, dafs-shm, nfs. Default: all available.
    #[arg(long, value_delimiter = ',')]
    pub backends: Vec<String>,
    /// Workloads, comma separated: bandwidth, latency, metadata, overlap. Default: all.
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// NFS URL (default: the loopback baseline, when something listens on 127.0.0.1:2049).
    #[arg(long)]
    pub nfs_url: Option<String>,
    /// nfsbench binary (default: /tmp/nfsbaseline/nfsbench, built by run_baseline.sh).
    #[arg(long)]
    pub nfsbench: Option<PathBuf>,
    /// dafsd binary (default: next to this executable).
    #[arg(long)]
    pub dafsd: Option<PathBuf>,
    /// Output directory (report.md, results.json, plots).
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// Server busy-poll budget, passed to dafsd --spin-us.
    #[arg(long, default_value_t = 50)]
    pub server_spin_us: u64,
    /// Files in the metadata mix. Default 1000 (300 with --quick).
    #[arg(long)]
    pub files: Option<usize>,
    /// Computation per block in the overlap test, microseconds. Default: the measured
    /// synchronous I/O time per block of that backend and block size.
    #[arg(long)]
    pub compute_us: Option<f64>,
    /// Parent directory of the temporary export (default: $TMPDIR or /tmp).
    #[arg(long)]
    pub tmpdir: Option<PathBuf>,
    /// Write the report to OUT only, not to stdout (dafs bench seeds prints its own).
    #[arg(long, hide = true)]
    pub no_print: bool,
}

/// `dafs bench SUBCOMMAND`: the seeds' application experiments.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCmd {
    /// TPIE-style n-way merge of sorted record files (seed 000, Fig. 5).
    Merge(merge::MergeArgs),
    /// The PostMark small-file workload (seed 000 Fig. 6, seed 003 Fig. 6).
    Postmark(Box<postmark::PostmarkArgs>),
    /// Compress a large file in 16 KiB blocks with asynchronous I/O (seed 001).
    Gzip(gzip::GzipArgs),
    /// Every seed experiment, one report beside the papers' published values.
    Seeds(seeds::SeedsArgs),
    /// Programs through a `dafs mount` beside a local directory: dd-style 1 MiB
    /// sequential I/O, 4 KiB random reads, untar + find + stat, PostMark.
    Mount(mountbench::MountBenchArgs),
    /// dafs put/get and cp/dd/tar through the preload library against local copies.
    Copy(copy::CopyArgs),
    /// Federated DAFS on N local dafsd nodes (seed 003): Table I (placement spread), Fig. 6
    /// (PostMark throughput on 1-8 nodes under one CPU quota each), Figs. 7 and 8
    /// (forwarding under round-robin placement, the block cache).
    Federation(federation::FederationArgs),
}

const ALL_BACKENDS: [&str; 6] =
    ["local", "dafs-tcp", "dafs-shm", ofi::BACKENDS[0], ofi::BACKENDS[1], "nfs"];
const ALL_WORKLOADS: [&str; 4] = ["bandwidth", "latency", "metadata", "overlap"];
const DATA_FILE: &str = "bench.dat";

struct Cfg {
    quick: bool,
    runs: usize,
    size: u64,
    secs: f64,
    qd: usize,
    bss: Vec<usize>,
    backends: Vec<String>,
    backends_explicit: bool,
    workloads: Vec<String>,
    files: usize,
    lat_secs: f64,
    lat_sizes: Vec<usize>,
    overlap_bss: Vec<usize>,
    overlap_bytes: u64,
}

fn resolve(a: &BenchArgs) -> Result<Cfg, String> {
    let norm = |s: &str| -> String {
        match s.trim().to_ascii_lowercase().as_str() {
            "tcp" => "dafs-tcp".into(),
            "shm" => "dafs-shm".into(),
            x => ofi::backend_alias(x).unwrap_or(x).into(),
        }
    };
    let backends: Vec<String> = if a.backends.is_empty() {
        ALL_BACKENDS.iter().map(|s| s.to_string()).collect()
    } else {
        a.backends.iter().map(|s| norm(s)).collect()
    };
    for b in &backends {
        if !ALL_BACKENDS.contains(&b.as_str()) {
            return Err(format!("unknown backend {b:?} (known: {})", ALL_BACKENDS.join(", ")));
        }
    }
    let workloads: Vec<String> = if a.workloads.is_empty() {
        ALL_WORKLOADS.iter().map(|s| s.to_string()).collect()
    } else {
        a.workloads.iter().map(|s| s.trim().to_ascii_lowercase()).collect()
    };
    for w in &workloads {
        if !ALL_WORKLOADS.contains(&w.as_str()) {
            return Err(format!("unknown workload {w:?} (known: {})", ALL_WORKLOADS.join(", ")));
        }
    }
    let size = a.size.unwrap_or(if a.quick { 64 << 20 } else { 1 << 30 });
    let bss: Vec<usize> = if a.block_sizes.is_empty() {
        if a.quick {
            vec![4096, 1 << 20]
        } else {
            vec![4096, 16384, 65536, 262144, 1 << 20]
        }
    } else {
        a.block_sizes.iter().map(|b| *b as usize).collect()
    };
    if a.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if a.qd == 0 || a.qd > 32 {
        return Err("--qd must be 1..=32 (the client asks for 32 slots)".into());
    }
    for &b in &bss {
        if b == 0 || b as u64 > size {
            return Err(format!("block size {b} must be 1..=file size {size}"));
        }
    }
    let overlap_bss: Vec<usize> =
        if a.quick { vec![65536, 1 << 20] } else { vec![65536, 262144, 1 << 20] };
    Ok(Cfg {
        quick: a.quick,
        runs: a.runs,
        size,
        secs: a.secs.unwrap_or(if a.quick { 0.25 } else { 2.0 }),
        qd: a.qd,
        bss,
        backends,
        backends_explicit: !a.backends.is_empty(),
        workloads,
        files: a.files.unwrap_or(if a.quick { 300 } else { 1000 }),
        lat_secs: if a.quick { 0.03 } else { 0.25 },
        lat_sizes: vec![512, 1024, 2048, 4096, 8192, 16384, 32768, 65536],
        overlap_bss,
        overlap_bytes: size.min(if a.quick { 32 << 20 } else { 256 << 20 }),
    })
}

// Result types (results.rs), the latency model (latency.rs) and the overlap test
// (overlap.rs) live in their own modules.

// ------------------------------------------------------------------ helpers

fn create_data_file(path: &Path, size: u64) -> Result<(), String> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    let mut i = 0;
    while off < size {
        util::fill(&mut buf, i);
        let n = (size - off).min(buf.len() as u64) as usize;
        f.write_all(&buf[..n]).map_err(|e| format!("{}: {e}", path.display()))?;
        off += n as u64;
        i += 1;
    }
    f.sync_all().map_err(|e| format!("{}: {e}", path.display()))
}

fn host_info() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown cpu".into());
    let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().next().map(|l| {
                l.split_whitespace().nth(1).and_then(|k| k.parse::<u64>().ok()).unwrap_or(0)
            })
        })
        .unwrap_or(0);
    format!("{cpu}, {n} CPUs, {:.0} GiB RAM, Linux {}", mem as f64 / 1048576.0, kernel.trim())
}

fn progress(msg: &str) {
    eprintln!("[dafs bench] {msg}");
}

fn run_one(
    b: &mut dyn Backend,
    what: &str,
    f: impl FnOnce(&mut dyn Backend) -> Result<Sample, String>,
) -> Result<Sample, String> {
    heartbeat(&format!("{what} on {}", b.name()));
    f(b)
}

// ------------------------------------------------------------------ the run

/// `dafs bench`.
pub fn run(a: &BenchArgs) -> Result<(), String> {
    match &a.cmd {
        Some(BenchCmd::Merge(m)) => return merge::run(m),
        Some(BenchCmd::Postmark(p)) => return postmark::run(p),
        Some(BenchCmd::Gzip(g)) => return gzip::run(g),
        Some(BenchCmd::Seeds(s)) => return seeds::run(s),
        Some(BenchCmd::Mount(m)) => return mountbench::run(m),
        Some(BenchCmd::Copy(c)) => return copy::run(c),
        Some(BenchCmd::Federation(f)) => return federation::run(f),
        None => {}
    }
    bench(a).map(|_| ())
}

/// The microbenchmarks of `dafs bench` (no subcommand): measures, writes OUT/report.md,
/// OUT/results.json and the plots, and returns the results (`dafs bench seeds` reads them).
pub fn bench(a: &BenchArgs) -> Result<Results, String> {
    let t_start = Instant::now();
    let cfg = resolve(a)?;
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let info = RunInfo {
        date: util::utc_now(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        host: host_info(),
        load_avg_at_start: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string(),
        quick: cfg.quick,
        runs: cfg.runs,
        file_size: cfg.size,
        secs_per_run: cfg.secs,
        qd: cfg.qd,
        block_sizes: cfg.bss.clone(),
        workloads: cfg.workloads.clone(),
        client_spin_us: match std::env::var("DAFS_SPIN_US") {
            Ok(v) => format!("{v} (DAFS_SPIN_US)"),
            Err(_) => "50 (default; set DAFS_SPIN_US to change)".into(),
        },
        server_spin_us: a.server_spin_us,
        meta_files: cfg.files,
        ..Default::default()
    };
    let mut res = Results { info, ..Default::default() };

    let tmp_parent = a.tmpdir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("dafs-bench-")
        .tempdir_in(&tmp_parent)
        .map_err(|e| format!("temporary directory in {}: {e}", tmp_parent.display()))?;
    let export = tmp.path().join("export");
    std::fs::create_dir_all(&export).map_err(|e| e.to_string())?;
    let data_path = export.join(DATA_FILE);
    res.info.export_dir = export.display().to_string();
    progress(&format!("writing a {} data file in {}", util::fmt_size(cfg.size), export.display()));
    create_data_file(&data_path, cfg.size)?;

    util::start_watchdog(Duration::from_secs_f64(120.0 + cfg.secs * 4.0));
    let burner = Burner::calibrate();
    res.info.burner_iters_per_us = burner.iters_per_us;

    // --- the systems under test
    let want = |b: &str| cfg.backends.iter().any(|x| x == b);
    let mut dafsd_bin = None;
    let mut main_srv = None;
    if want("dafs-tcp") || want("dafs-shm") || ofi::BACKENDS.iter().any(|b| want(b)) {
        let bin = server::find_dafsd(a.dafsd.as_deref())?;
        res.info.dafsd = bin.display().to_string();
        let srv = Dafsd::start(
            &bin,
            &export,
            a.server_spin_us,
            None,
            &tmp.path().join("main.sock"),
            &tmp.path().join("dafsd-main.log"),
        )?;
        progress(&format!(
            "dafsd (pid {}) listening on {}, {}",
            srv.pid,
            srv.addr,
            srv.shm_url.as_deref().unwrap_or("no shared memory")
        ));
        dafsd_bin = Some(bin);
        main_srv = Some(srv);
    }
    let mut backends: Vec<Box<dyn Backend>> = Vec::new();
    if want("local") {
        backends.push(Box::new(Local {
            path: data_path.clone(),
            meta_dir: tmp.path().join("local-meta"),
            size: cfg.size,
        }));
    }
    if let Some(srv) = &main_srv {
        for (name, url) in ofi::targets(srv).into_iter().filter(|(n, _)| want(n)) {
            let mut d = Dafs::new(name, url, Provider::Auto, srv.pid, cfg.size, DATA_FILE);
            match d.describe() {
                Ok(s) => {
                    res.info.sessions.push((name.into(), s));
                    backends.push(Box::new(d));
                }
                Err(e) => res.errors.push(format!("{name}: {e}")),
            }
        }
        if want("dafs-tcp") {
            let mut d = Dafs::new(
                "dafs-tcp",
                srv.addr.clone(),
                Provider::Tcp,
                srv.pid,
                cfg.size,
                DATA_FILE,
            );
            match d.describe() {
                Ok(s) => {
                    res.info.sessions.push(("dafs-tcp".into(), s));
                    backends.push(Box::new(d));
                }
                Err(e) => res.errors.push(format!("dafs-tcp: {e}")),
            }
        }
        if want("dafs-shm") {
            match &srv.shm_url {
                Some(u) => {
                    let mut d = Dafs::new(
                        "dafs-shm",
                        u.clone(),
                        Provider::Auto,
                        srv.pid,
                        cfg.size,
                        DATA_FILE,
                    );
                    match d.describe() {
                        Ok(s) => {
                            res.info.sessions.push(("dafs-shm".into(), s));
                            backends.push(Box::new(d));
                        }
                        Err(e) => res.errors.push(format!("dafs-shm: {e}")),
                    }
                }
                None => res.errors.push("dafs-shm: dafsd offered no shared-memory socket".into()),
            }
        }
    }
    let mut nfs_backend = None;
    if want("nfs") {
        match nfs::Nfs::detect(a.nfs_url.as_deref(), a.nfsbench.as_deref(), cfg.size) {
            Ok(mut n) => {
                progress(&format!(
                    "nfs: {} via {} (ganesha pid {:?}); creating its data file",
                    n.url,
                    n.bin.display(),
                    n.pid
                ));
                heartbeat("nfs prepare");
                match n.prepare() {
                    Ok(()) => {
                        res.info.nfs = format!(
                            "{} (nfsbench {}, server CPU from {})",
                            n.url,
                            n.bin.display(),
                            n.pid
                                .map(|p| format!("ganesha.nfsd pid {p}"))
                                .unwrap_or_else(|| "nowhere: ganesha.nfsd not found".into())
                        );
                        nfs_backend = Some(n);
                    }
                    Err(e) => {
                        res.info.nfs = format!("unavailable: {e}");
                        res.errors.push(format!("nfs: {e}"));
                    }
                }
            }
            Err(why) => {
                res.info.nfs = why.clone();
                if cfg.backends_explicit {
                    res.errors.push(format!("nfs requested but {why}"));
                }
            }
        }
    } else {
        res.info.nfs = "not selected".into();
    }
    progress(&format!("nfs: {}", res.info.nfs));
    let have_nfs = nfs_backend.is_some();
    let nfs_leftover = nfs_backend.as_ref().and_then(|n| n.local_copy.clone());
    if let Some(n) = nfs_backend.take() {
        backends.push(Box::new(n));
    }
    res.info.backends = backends.iter().map(|b| b.name().to_string()).collect();
    let wl = |w: &str| cfg.workloads.iter().any(|x| x == w);

    // --- (1) bandwidth and CPU vs block size
    if wl("bandwidth") {
        let tests: [(&'static str, &'static str, usize); 5] = [
            ("read", "rand", 1),
            ("read", "seq", 1),
            ("read", "seq", cfg.qd),
            ("write", "rand", 1),
            ("write", "seq", cfg.qd),
        ];
        for (op, pat, qd) in tests {
            for &bs in &cfg.bss {
                let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); backends.len()];
                let mut errs: Vec<Option<String>> = vec![None; backends.len()];
                for run in 0..cfg.runs {
                    for (i, b) in backends.iter_mut().enumerate() {
                        if errs[i].is_some() {
                            continue;
                        }
                        if b.name() != "nfs" {
                            let _ = util::warm(&data_path);
                        }
                        let spec = DataSpec {
                            write: op == "write",
                            rand: pat == "rand",
                            qd,
                            bs,
                            secs: cfg.secs,
                            seed: 1 + run as u64 * 1000 + bs as u64,
                        };
                        let what = format!("{op} {pat} QD{qd} {}", util::fmt_size(bs as u64));
                        let busy0 = util::machine_busy();
                        let cpu0 = util::cpu_self();
                        match run_one(b.as_mut(), &what, |b| b.data(&spec)) {
                            Ok(mut s) => {
                                // Other load: machine busy time less this process and the server.
                                let ours = if b.name() == "nfs" {
                                    s.cpu_s
                                } else {
                                    util::cpu_self() - cpu0
                                };
                                if let (Some(a), Some(z)) = (busy0, util::machine_busy()) {
                                    s.other_cores = Some(
                                        ((z - a) - ours - s.srv_cpu_s.unwrap_or(0.0)).max(0.0)
                                            / s.secs.max(1e-3),
                                    );
                                }
                                progress(&format!("{what} {:<8} run {}: {:>9.1} MB/s, {:>8.2} us/op, client {:.3} s/GB", b.name(), run + 1, s.bytes as f64 / s.secs / 1e6, s.secs * 1e6 * qd as f64 / s.ops.max(1) as f64, s.cpu_s / (s.bytes as f64 / 1e9)));
                                samples[i].push(s);
                            }
                            Err(e) => {
                                progress(&format!("{what} {}: ERROR {e}", b.name()));
                                res.errors.push(format!("bandwidth {what} on {}: {e}", b.name()));
                                errs[i] = Some(e);
                            }
                        }
                    }
                }
                for (i, b) in backends.iter().enumerate() {
                    res.data.push(summarize(
                        op,
                        pat,
                        qd,
                        bs,
                        b.name(),
                        std::mem::take(&mut samples[i]),
                        errs[i].take(),
                    ));
                }
            }
        }
    }

    // --- (2) latency model: NULL, inline vs direct
    if wl("latency") {
        let mut lr = LatencyResults::default();
        for b in backends.iter_mut().filter(|b| b.name().starts_with("dafs-")) {
            heartbeat(&format!("null on {}", b.name()));
            let mut v = Vec::new();
            for _ in 0..cfg.runs {
                match b.null_us(cfg.lat_secs.max(0.1)) {
                    Ok(Some(us)) => v.push(us),
                    Ok(None) => {}
                    Err(e) => {
                        res.errors.push(format!("null on {}: {e}", b.name()));
                        break;
                    }
                }
            }
            if !v.is_empty() {
                progress(&format!("NULL {}: {:.2} us", b.name(), median(&v)));
                lr.null_us.push((b.name().to_string(), median(&v)));
            }
        }
        if let (Some(bin), Some(_)) = (&dafsd_bin, &main_srv) {
            lr.default_threshold = res.info.sessions.first().and_then(|(_, s)| {
                s.split("inline threshold ").nth(1)?.split(' ').next()?.parse().ok()
            });
            match latency_model(
                &cfg,
                bin,
                &export,
                a.server_spin_us,
                tmp.path(),
                &want,
                &mut lr,
                &mut res.errors,
            ) {
                Ok(()) => {}
                Err(e) => res.errors.push(format!("latency model: {e}")),
            }
        } else {
            res.notes.push("latency model skipped: needs dafs-tcp or dafs-shm".into());
        }
        res.latency = Some(lr);
    }

    // --- (3) metadata mix
    if wl("metadata") {
        let mut runs: Vec<Vec<MetaSample>> = vec![Vec::new(); backends.len()];
        let mut errs: Vec<Option<String>> = vec![None; backends.len()];
        for run in 0..cfg.runs {
            for (i, b) in backends.iter_mut().enumerate() {
                if errs[i].is_some() {
                    continue;
                }
                heartbeat(&format!("metadata on {}", b.name()));
                match b.meta(cfg.files) {
                    Ok(m) => {
                        progress(&format!(
                            "metadata {:<8} run {}: {:.0} / {:.0} / {:.0} ops/s",
                            b.name(),
                            run + 1,
                            cfg.files as f64 / m.secs[0],
                            cfg.files as f64 / m.secs[1],
                            cfg.files as f64 / m.secs[2]
                        ));
                        runs[i].push(m);
                    }
                    Err(e) => {
                        progress(&format!("metadata {}: ERROR {e}", b.name()));
                        res.errors.push(format!("metadata on {}: {e}", b.name()));
                        errs[i] = Some(e);
                    }
                }
            }
        }
        for (i, b) in backends.iter().enumerate() {
            let rs = std::mem::take(&mut runs[i]);
            let n = cfg.files as f64;
            let ph = |g: &dyn Fn(&MetaSample) -> f64| median(&rs.iter().map(g).collect::<Vec<_>>());
            res.metadata.push(MetaRow {
                backend: b.name().into(),
                files: cfg.files,
                ops_s: [ph(&|m| n / m.secs[0]), ph(&|m| n / m.secs[1]), ph(&|m| n / m.secs[2])],
                cpu_us_per_op: [
                    ph(&|m| m.cpu_s[0] * 1e6 / n),
                    ph(&|m| m.cpu_s[1] * 1e6 / n),
                    ph(&|m| m.cpu_s[2] * 1e6 / n),
                ],
                srv_cpu_us_per_op: [0, 1, 2].map(|p| {
                    median_opt(
                        &rs.iter().map(|m| m.srv_cpu_s[p].map(|c| c * 1e6 / n)).collect::<Vec<_>>(),
                    )
                }),
                mix_ops_s: median(
                    &rs.iter().map(|m| 3.0 * n / m.secs.iter().sum::<f64>()).collect::<Vec<_>>(),
                ),
                runs: rs,
                error: errs[i].take(),
            });
        }
    }

    // --- (4) overlap of computation and I/O
    if wl("overlap") {
        let depth = cfg.qd.max(2);
        for &bs in &cfg.overlap_bss {
            let n = (cfg.overlap_bytes / bs as u64).max(1) as usize;
            for b in backends.iter_mut().filter(|b| b.name() != "nfs") {
                let name = b.name().to_string();
                heartbeat(&format!("overlap {} on {name}", util::fmt_size(bs as u64)));
                let r = overlap_one(
                    b.as_mut(),
                    &data_path,
                    bs,
                    n,
                    depth,
                    a.compute_us,
                    &burner,
                    cfg.runs,
                    if cfg.quick { 0.05 } else { 0.25 },
                );
                match r {
                    Ok(row) => {
                        progress(&format!("overlap {:<8} {}: compute {:.0} us/block, io {:.3}s sync {:.3}s async {:.3}s -> hidden {:.0}%", name, util::fmt_size(bs as u64), row.compute_us, row.t_io, row.t_sync, row.t_async, row.hidden * 100.0));
                        res.overlap.push(row);
                    }
                    Err(e) => {
                        res.errors
                            .push(format!("overlap {} on {name}: {e}", util::fmt_size(bs as u64)));
                        res.overlap.push(OverlapRow {
                            backend: name,
                            bs,
                            blocks: n,
                            depth,
                            compute_us: 0.0,
                            t_io: f64::NAN,
                            t_compute: f64::NAN,
                            t_sync: f64::NAN,
                            t_async: f64::NAN,
                            hidden: f64::NAN,
                            error: Some(e),
                        });
                    }
                }
            }
        }
    }

    // --- path counters, server health
    for b in backends.iter() {
        if let Some(s) = b.stats() {
            res.client_stats.push((
                b.name().into(),
                format!(
                    "requests {}, inline reads/writes {}/{}, direct reads/writes {}/{}, off_direct_path {}, slot_waits {}, errors {}, waits spun/slept {}/{}, vm_registrations {}",
                    s.requests, s.inline_reads, s.inline_writes, s.direct_reads, s.direct_writes, s.off_direct_path, s.slot_waits, s.errors, s.transport.waits_spun, s.transport.waits_slept, s.transport.vm_registrations
                ),
            ));
        }
    }
    if let Some(srv) = main_srv.as_mut() {
        if !srv.alive() {
            res.errors.push(format!(
                "dafsd (pid {}) died during the run; its log: {}",
                srv.pid,
                std::fs::read_to_string(&srv.log).unwrap_or_default().trim()
            ));
        }
        let log = std::fs::read_to_string(&srv.log).unwrap_or_default();
        let warn: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("panick"))
            .take(10)
            .collect();
        if !warn.is_empty() {
            res.notes
                .push(format!("dafsd log has warnings/errors:\n```\n{}\n```", warn.join("\n")));
        }
    }
    if !have_nfs {
        res.notes.push(format!("nfs: {}", res.info.nfs));
    }
    drop(backends);
    drop(main_srv);
    if let Some(p) = nfs_leftover {
        // nfsbench cannot remove files: drop the data file from the loopback export.
        let _ = std::fs::remove_file(p);
    }

    res.targets = targets::evaluate(&res, cfg.qd, have_nfs);
    res.info.other_load_cores = median_opt(
        &res.data.iter().flat_map(|r| r.runs.iter().map(|s| s.other_cores)).collect::<Vec<_>>(),
    );
    res.info.load_avg_at_end =
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    if let Some(o) = res.info.other_load_cores {
        if o > 0.3 {
            res.errors.push(format!(
                "the machine was shared: other processes used {o:.2} cores (median) during the data tests (of {} CPUs); spin-then-sleep waits and the server thread then lose their CPU, so latencies and small-block numbers are inflated and noisy. Re-run on a quiet machine.",
                std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
            ));
        }
    }
    res.info.elapsed_s = t_start.elapsed().as_secs_f64();

    // --- output
    heartbeat("writing the report");
    match plot::plots(&res, &a.out) {
        Ok((files, note)) => {
            res.plots = files;
            if let Some(n) = note {
                res.notes.push(n);
            }
        }
        Err(e) => res.errors.push(format!("plots: {e}")),
    }
    util::stop_watchdog();
    let md = report::markdown(&res);
    if !a.no_print {
        println!("{md}");
    }
    let md_path = a.out.join("report.md");
    std::fs::write(&md_path, &md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    let json_path = a.out.join("results.json");
    let json = serde_json::to_string_pretty(&res).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json).map_err(|e| format!("{}: {e}", json_path.display()))?;
    progress(&format!(
        "wrote {}, {} and {} plot(s) in {:.0} s",
        md_path.display(),
        json_path.display(),
        res.plots.len(),
        res.info.elapsed_s
    ));
    Ok(res)
}

pub use util::parse_size;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::fit_line;

    #[test]
    fn sizes() {
        assert_eq!(util::parse_size("4k").unwrap(), 4096);
        assert_eq!(util::parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(util::parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(util::parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(util::parse_size("512").unwrap(), 512);
        assert!(util::parse_size("x").is_err());
        assert_eq!(util::fmt_size(4096), "4 KiB");
        assert_eq!(util::fmt_size(1 << 20), "1 MiB");
        assert_eq!(util::fmt_size(1536), "1536 B");
    }

    #[test]
    fn medians_and_fits() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        let (a, b, r2) = fit_line(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert!((a - 1.0).abs() < 1e-9 && (b - 2.0).abs() < 1e-9 && (r2 - 1.0).abs() < 1e-9);
        assert!(fit_line(&[(1.0, 1.0)]).is_none());
        assert!(util::utc_now().ends_with(" UTC"));
        assert!(util::proc_cpu(std::process::id()).is_some());
    }

    #[test]
    fn rejects_bad_options() {
        let mut a = BenchArgs::parse_from_test(&["--backends", "ftp"]);
        assert!(resolve(&a).is_err());
        a = BenchArgs::parse_from_test(&["--workloads", "tpc"]);
        assert!(resolve(&a).is_err());
        a = BenchArgs::parse_from_test(&["--qd", "0"]);
        assert!(resolve(&a).is_err());
        a = BenchArgs::parse_from_test(&["--quick", "--backends", "tcp,shm"]);
        let c = resolve(&a).unwrap();
        assert_eq!(c.backends, vec!["dafs-tcp", "dafs-shm"]);
        assert_eq!(c.size, 64 << 20);
    }

    /// End to end on the local backend only (no dafsd needed): every output is written
    /// and the NFS and DAFS targets say why they were not evaluated.
    #[test]
    fn local_only_run_writes_report_json_and_plots() {
        let out = tempfile::tempdir().unwrap();
        let a = BenchArgs::parse_from_test(&[
            "--backends",
            "local",
            "--size",
            "1m",
            "--block-sizes",
            "4k,64k",
            "--secs",
            "0.02",
            "--runs",
            "1",
            "--files",
            "20",
            "--workloads",
            "bandwidth,metadata",
            "--out",
            out.path().to_str().unwrap(),
        ]);
        run(&a).unwrap();
        let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
        assert!(md.contains("## Targets"));
        assert!(md.contains("n/a (not measured"));
        assert!(md.contains("### Random reads, QD 1"));
        assert!(md.contains("## 3. Small-file metadata mix"));
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.path().join("results.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(json["targets"].as_array().unwrap().len(), 11);
        assert!(json["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["error"].is_null() && r["mbps"].as_f64().unwrap() > 0.0));
        assert!(out.path().join("bw_rand_read_qd1.png").is_file());
    }

    impl BenchArgs {
        fn parse_from_test(args: &[&str]) -> BenchArgs {
            #[derive(clap::Parser)]
            struct T {
                #[command(flatten)]
                a: BenchArgs,
            }
            use clap::Parser;
            T::parse_from(std::iter::once("bench").chain(args.iter().copied())).a
        }
    }
}
