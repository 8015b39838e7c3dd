//! `dafs bench gzip`: seed 001's gzip modified for the DAFS API. A large text-like file
//! is compressed in 16 KiB blocks read into registered memory with asynchronous reads
//! (the next block in flight while this one is compressed) and written behind from
//! registered memory, by 1 and by 2 processes (each compresses one half into its own
//! gzip member; the members concatenated are one valid gzip stream). Beside it, stock
//! GNU gzip at the same level on local files, through the LD_PRELOAD library and
//! through the FUSE mount. Every output passes `gzip -t` and decompresses to the input.

mod report;
mod stock;
pub mod worker;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;

use crate::apps::{self, Rig};
use crate::server::die_with_parent;
use crate::util::{self, proc_cpu};
use worker::{WorkerResult, WorkerSpec};

pub use report::markdown;

/// How gzip runs: the DAFS gzip over a transport, or stock gzip on some file access.
pub const WAYS: [&str; 5] = ["dafs-shm", "dafs-tcp", "local", "preload", "fuse"];
const DEFAULT_WAYS: [&str; 4] = ["dafs-shm", "local", "preload", "fuse"];
const INPUT: &str = "gzip-in.dat";
/// Most DAFS gzip processes at once.
pub const PROCESSES_MAX: usize = 16;

/// `dafs bench gzip` options.
#[derive(clap::Args, Debug, Clone)]
pub struct GzipArgs {
    /// Short run (well under a minute): a 16 MiB file, one run.
    #[arg(long)]
    pub quick: bool,
    /// Input size (suffixes k, m, g). Default 550m, the seed's (16m with --quick).
    #[arg(long, value_parser = util::parse_size)]
    pub size: Option<u64>,
    /// I/O block size.
    #[arg(long, default_value = "16k", value_parser = util::parse_size)]
    pub block_size: u64,
    /// Process counts of the DAFS gzip, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub processes: Vec<usize>,
    /// Compression level (gzip's default, 6, for both).
    #[arg(long, default_value_t = 6)]
    pub level: u32,
    /// Ways to run, comma separated: dafs-shm, dafs-tcp (the DAFS gzip), local, preload,
    /// fuse (stock gzip). Default: dafs-shm,local,preload,fuse.
    #[arg(long, value_delimiter = ',')]
    pub ways: Vec<String>,
    /// Runs of each; the median is reported. Default 3 (1 with --quick).
    #[arg(long)]
    pub runs: Option<usize>,
    /// dafsd binary (default: next to this executable).
    #[arg(long)]
    pub dafsd: Option<PathBuf>,
    /// dafs binary, for the worker processes and the FUSE mount (default: this one).
    #[arg(long)]
    pub dafs: Option<PathBuf>,
    /// The LD_PRELOAD library (default: libdafs_preload.so next to this executable).
    #[arg(long)]
    pub preload: Option<PathBuf>,
    /// Output directory (report.md, results.json).
    #[arg(long, default_value = "bench-out/gzip")]
    pub out: PathBuf,
    /// Parent directory of the temporary export (default: $TMPDIR or /tmp).
    #[arg(long)]
    pub tmpdir: Option<PathBuf>,
    /// Server busy-poll budget, passed to dafsd --spin-us.
    #[arg(long, default_value_t = 50)]
    pub server_spin_us: u64,
    /// Internal: run one DAFS gzip process (JSON spec) and print its result.
    #[arg(long, hide = true)]
    pub worker: Option<String>,
}

/// One gzip experiment, resolved (what `dafs bench seeds` passes to [`run_gzip`]).
#[derive(Debug, Clone, Serialize)]
pub struct GzipConfig {
    pub quick: bool,
    pub input_bytes: u64,
    pub block_bytes: usize,
    pub processes: Vec<usize>,
    pub level: u32,
    pub ways: Vec<String>,
    /// Ways named explicitly: one that cannot be set up is an error, not a note.
    pub ways_explicit: bool,
    pub runs: usize,
    pub dafsd: Option<PathBuf>,
    pub dafs: PathBuf,
    pub preload: Option<PathBuf>,
    pub tmpdir: Option<PathBuf>,
    pub server_spin_us: u64,
}

/// A file next to the running executable (target/<profile>/ when run from a test).
fn sibling(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(name), dir.parent()?.join(name)].into_iter().find(|p| p.is_file())
}

impl GzipConfig {
    /// The defaults of `dafs bench gzip` (`--quick` when `quick`).
    pub fn defaults(quick: bool) -> Result<GzipConfig, String> {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            a: GzipArgs,
        }
        let args: &[&str] = if quick { &["gzip", "--quick"] } else { &["gzip"] };
        let p = <P as clap::Parser>::try_parse_from(args).map_err(|e| e.to_string())?;
        GzipConfig::from_args(&p.a)
    }

    pub fn from_args(a: &GzipArgs) -> Result<GzipConfig, String> {
        let dafs = match &a.dafs {
            Some(p) => p.clone(),
            None => sibling("dafs").ok_or("no dafs binary next to this one (pass --dafs PATH)")?,
        };
        let ways = if a.ways.is_empty() {
            DEFAULT_WAYS.iter().map(|s| s.to_string()).collect()
        } else {
            apps::parse_systems(&a.ways, &WAYS)?
        };
        let c = GzipConfig {
            quick: a.quick,
            input_bytes: a.size.unwrap_or(if a.quick { 16 << 20 } else { 550 << 20 }),
            block_bytes: a.block_size as usize,
            processes: a.processes.clone(),
            level: a.level,
            ways,
            ways_explicit: !a.ways.is_empty(),
            runs: a.runs.unwrap_or(if a.quick { 1 } else { 3 }),
            dafsd: a.dafsd.clone(),
            dafs,
            preload: a.preload.clone().or_else(|| sibling("libdafs_preload.so")),
            tmpdir: a.tmpdir.clone(),
            server_spin_us: a.server_spin_us,
        };
        c.check()?;
        Ok(c)
    }

    pub fn check(&self) -> Result<(), String> {
        if self.input_bytes == 0 {
            return Err("--size must be at least 1 byte".into());
        }
        if self.block_bytes < 512 || self.block_bytes > (1 << 20) {
            return Err("--block-size must be 512 B..1 MiB".into());
        }
        if self.processes.is_empty() || self.processes.iter().any(|&p| p == 0 || p > PROCESSES_MAX)
        {
            return Err(format!("--processes: each 1..={PROCESSES_MAX}"));
        }
        if self.level > 9 {
            return Err("--level must be 0..=9".into());
        }
        if self.runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        Ok(())
    }
}

/// One timed compression.
#[derive(Debug, Clone, Serialize, Default)]
pub struct GzipSample {
    pub secs: f64,
    /// CPU seconds of the compressing processes (user+sys).
    pub cpu_s: f64,
    pub srv_cpu_s: Option<f64>,
    pub out_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct GzipRow {
    pub way: String,
    pub processes: usize,
    pub runs: Vec<GzipSample>,
    /// Every output passed gzip -t and decompressed to the input.
    pub verified: bool,
    pub error: Option<String>,
    /// Median input MB compressed per second.
    pub mbps: f64,
    pub secs: f64,
    pub ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct GzipResults {
    pub date: String,
    pub host_load_avg_at_start: String,
    pub cpus: usize,
    pub config: GzipConfig,
    pub rows: Vec<GzipRow>,
    pub targets: Vec<crate::Target>,
    pub notes: Vec<String>,
    pub elapsed_s: f64,
}

impl GzipResults {
    pub fn row(&self, way: &str, p: usize) -> Option<&GzipRow> {
        self.rows.iter().find(|r| r.way == way && r.processes == p && r.error.is_none())
    }
}

/// The ways to run, each with its process counts.
fn plan(cfg: &GzipConfig) -> Vec<(String, usize)> {
    let mut v = Vec::new();
    for w in &cfg.ways {
        if w.starts_with("dafs-") {
            v.extend(cfg.processes.iter().map(|&p| (w.clone(), p)));
        } else {
            v.push((w.clone(), 1));
        }
    }
    v
}

/// Run the gzip experiment.
pub fn run_gzip(cfg: &GzipConfig) -> Result<GzipResults, String> {
    cfg.check()?;
    let t0 = Instant::now();
    let rig = Rig::start(cfg.tmpdir.as_deref(), cfg.dafsd.as_deref(), cfg.server_spin_us, true)?;
    let input = rig.export.join(INPUT);
    util::heartbeat("gzip: writing the input");
    stock::make_input(&input, cfg.input_bytes, 1)?;
    let mut res = GzipResults {
        date: util::utc_now(),
        host_load_avg_at_start: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .into(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        config: cfg.clone(),
        rows: Vec::new(),
        targets: Vec::new(),
        notes: Vec::new(),
        elapsed_s: 0.0,
    };
    let mut mount = None;
    let mut ways = Vec::new();
    for w in &cfg.ways {
        match setup(cfg, &rig, w, &mut mount) {
            Ok(()) => ways.push(w.clone()),
            Err(e) => res.notes.push(format!("{w}: not measured: {e}")),
        }
    }
    let cfg = &GzipConfig { ways, ..cfg.clone() };
    if cfg.ways_explicit && !res.notes.is_empty() {
        return Err(res.notes.join("; "));
    }
    let plan = plan(cfg);
    let mut runs: Vec<Vec<GzipSample>> = vec![Vec::new(); plan.len()];
    let mut errors: Vec<Option<String>> = vec![None; plan.len()];
    for _ in 0..cfg.runs {
        for (k, (way, p)) in plan.iter().enumerate() {
            if errors[k].is_some() {
                continue;
            }
            util::heartbeat(&format!("gzip: {way}, {p} process(es)"));
            match once(cfg, &rig, way, *p, &input, &mut mount) {
                Ok(s) => runs[k].push(s),
                Err(e) => errors[k] = Some(e),
            }
        }
    }
    drop(mount);
    for (k, (way, p)) in plan.iter().enumerate() {
        let r = std::mem::take(&mut runs[k]);
        let med =
            |f: &dyn Fn(&GzipSample) -> f64| util::median(&r.iter().map(f).collect::<Vec<_>>());
        res.rows.push(GzipRow {
            way: way.clone(),
            processes: *p,
            verified: errors[k].is_none() && !r.is_empty(),
            error: errors[k].take(),
            mbps: med(&|s| cfg.input_bytes as f64 / s.secs / 1e6),
            secs: med(&|s| s.secs),
            ratio: med(&|s| cfg.input_bytes as f64 / s.out_bytes.max(1) as f64),
            runs: r,
        });
    }
    res.targets = report::targets(&res);
    res.elapsed_s = t0.elapsed().as_secs_f64();
    Ok(res)
}

/// What `way` needs before it can run: the preload library, the FUSE mount.
fn setup(
    cfg: &GzipConfig,
    rig: &Rig,
    way: &str,
    mount: &mut Option<stock::Mount>,
) -> Result<(), String> {
    match way {
        "preload" => match &cfg.preload {
            Some(p) if p.is_file() => Ok(()),
            Some(p) => Err(format!("--preload {}: no such file", p.display())),
            None => Err(
                "no libdafs_preload.so next to dafs (build dafs-preload, or pass --preload PATH)"
                    .into(),
            ),
        },
        "fuse" => {
            *mount =
                Some(stock::Mount::start(&cfg.dafs, &stock_url(rig)?, &rig.dir().join("mnt"))?);
            Ok(())
        }
        "dafs-shm" | "dafs-tcp" => rig.target(way).map(|_| ()),
        _ => Ok(()),
    }
}

/// The DAFS URL stock gzip reaches the server by: shared memory when offered.
fn stock_url(rig: &Rig) -> Result<String, String> {
    Ok(match rig.target("dafs-shm") {
        Ok((u, _)) => format!("{}/", u.trim_end_matches('/')),
        Err(_) => format!("dafs://{}/", rig.target("dafs-tcp")?.0),
    })
}

/// One timed compression `way` with `p` processes, its output checked, then removed.
fn once(
    cfg: &GzipConfig,
    rig: &Rig,
    way: &str,
    p: usize,
    input: &Path,
    mount: &mut Option<stock::Mount>,
) -> Result<GzipSample, String> {
    let srv = rig.server_pid();
    let srv0 = srv.and_then(proc_cpu);
    let (mut s, parts) = match way {
        "dafs-shm" | "dafs-tcp" => native(cfg, rig, way, p)?,
        _ => stock_way(cfg, rig, way, input, mount)?,
    };
    s.srv_cpu_s = match (srv0, srv.and_then(proc_cpu)) {
        (Some(a), Some(b)) if way != "local" => Some(b - a),
        _ => None,
    };
    s.out_bytes = parts.iter().map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).sum();
    stock::verify(&parts, input).map_err(|e| format!("output check: {e}"))?;
    for p in parts {
        std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(s)
}

/// The DAFS gzip: `p` worker processes, each a contiguous share of the input.
fn native(
    cfg: &GzipConfig,
    rig: &Rig,
    way: &str,
    p: usize,
) -> Result<(GzipSample, Vec<PathBuf>), String> {
    let (url, provider) = rig.target(way)?;
    let bs = cfg.block_bytes as u64;
    // Shares are whole blocks; the last takes the rest.
    let per = cfg.input_bytes.div_ceil(bs).div_ceil(p as u64) * bs;
    let specs: Vec<WorkerSpec> = (0..p as u64)
        .map(|k| WorkerSpec {
            url: url.clone(),
            shm: provider != dafs_client::Provider::Tcp,
            input: INPUT.into(),
            output: format!("gzip-out-{way}-{p}.gz.{k}"),
            start: (k * per).min(cfg.input_bytes),
            end: ((k + 1) * per).min(cfg.input_bytes),
            block_bytes: cfg.block_bytes,
            level: cfg.level,
        })
        .collect();
    let c0 = stock::children_cpu();
    let t0 = Instant::now();
    let mut kids = Vec::new();
    for s in &specs {
        let json = serde_json::to_string(s).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&cfg.dafs);
        cmd.args(["bench", "gzip", "--worker", &json])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        die_with_parent(&mut cmd);
        kids.push(cmd.spawn().map_err(|e| format!("{}: {e}", cfg.dafs.display()))?);
    }
    let mut results = Vec::new();
    for k in kids {
        let out = k.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "gzip worker failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let line = String::from_utf8_lossy(&out.stdout);
        let r: WorkerResult = serde_json::from_str(line.trim().lines().last().unwrap_or(""))
            .map_err(|e| format!("gzip worker printed no result ({e}): {line}"))?;
        results.push(r);
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu_s = stock::children_cpu() - c0;
    let done: u64 = results.iter().map(|r| r.in_bytes).sum();
    if done != cfg.input_bytes {
        return Err(format!("workers compressed {done} of {} bytes", cfg.input_bytes));
    }
    let parts = specs.iter().map(|s| rig.export.join(&s.output)).collect();
    Ok((GzipSample { secs, cpu_s, ..Default::default() }, parts))
}

fn stock_way(
    cfg: &GzipConfig,
    rig: &Rig,
    way: &str,
    input: &Path,
    mount: &mut Option<stock::Mount>,
) -> Result<(GzipSample, Vec<PathBuf>), String> {
    let url = stock_url(rig)?;
    let out_name = format!("gzip-{way}.gz");
    let (inp, out, env) = match way {
        "local" => {
            let out = rig.dir().join(&out_name);
            (input.to_path_buf(), out, vec![])
        }
        "preload" => {
            let lib = cfg.preload.as_ref().ok_or("no libdafs_preload.so (pass --preload PATH)")?;
            let prefix = format!("/dafs-bench-gzip-{}", std::process::id());
            let env = vec![
                ("LD_PRELOAD".to_string(), lib.display().to_string()),
                ("DAFS_MOUNT".to_string(), format!("{prefix}={url}")),
            ];
            (Path::new(&prefix).join(INPUT), Path::new(&prefix).join(&out_name), env)
        }
        _ => {
            let dir = &mount.as_ref().ok_or("not mounted")?.dir;
            (dir.join(INPUT), dir.join(&out_name), vec![])
        }
    };
    let (secs, cpu_s) =
        stock::run_gzip(&inp.to_string_lossy(), &out.to_string_lossy(), cfg.level, &env)?;
    let part = if way == "local" { out } else { rig.export.join(&out_name) };
    Ok((GzipSample { secs, cpu_s, ..Default::default() }, vec![part]))
}

/// `dafs bench gzip`.
pub fn run(a: &GzipArgs) -> Result<(), String> {
    if let Some(spec) = &a.worker {
        let spec: WorkerSpec = serde_json::from_str(spec).map_err(|e| format!("--worker: {e}"))?;
        let r = worker::compress(&spec)?;
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let cfg = GzipConfig::from_args(a)?;
    // No heartbeat during one compression: allow 1 MB/s for it.
    let limit_s = 300 + cfg.input_bytes / 1_000_000;
    util::start_watchdog(std::time::Duration::from_secs(limit_s));
    let res = run_gzip(&cfg);
    util::stop_watchdog();
    let res = res?;
    let md = markdown(&res, &std::env::args().collect::<Vec<_>>().join(" "));
    apps::write_outputs(&a.out, &md, &res)?;
    println!("{md}");
    eprintln!("dafs bench gzip: wrote {}/report.md and results.json", a.out.display());
    let failed: Vec<String> = res
        .rows
        .iter()
        .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.way)))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("some runs failed: {}", failed.join("; ")))
    }
}
