//! `dafs bench postmark`: the PostMark small-file workload (seed 000 Fig. 6, seed 003
//! Fig. 6), side by side on one machine:
//! - the native engine ([`engine`]) on local files, dafs over TCP and over shared memory;
//! - the stock `postmark` program, unmodified ([`stock`]): on a local directory, through
//!   `LD_PRELOAD=libdafs_preload.so` and through a `dafs mount` (FUSE);
//! - the I/O-boundedness sweep of seed 000 Fig. 6: ~150 files, transactions = create or
//!   delete + whole-file read, mean file size 4 KiB .. 64 KiB.
//!
//! The NFS baseline cannot run PostMark here (see [`NFS_WHY_NOT`]).
//!
//! Entry point for other reports: [`run_postmark`] returns [`PostmarkResults`].

pub mod engine;
mod nfs_fs;
pub mod report;
pub mod stock;

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use dafs_client::{Client, ClientConfig, Provider};
use serde::Serialize;

use crate::libnfs::LibNfs;
use crate::nfs as nfs_baseline;
use crate::server::{find_dafsd, Dafsd};
use crate::util::{self, median};
use engine::{DafsFs, LocalFs, PmCounts, PmParams};
use nfs_fs::NfsFs;
use stock::StockTarget;

/// Why the NFS baseline (NFS-Ganesha + libnfs) has no figure for the stock program (the
/// native engine runs on it: `native-nfs`).
pub const NFS_WHY_NOT: &str = "the stock PostMark program needs a mounted file system: this machine has no kernel NFS client (no nfs in /proc/filesystems), and Debian's libnfs packages ship no LD_PRELOAD shim (libnfs13 has only libnfs.so, libnfs-utils only nfs-cat/nfs-cp/nfs-ls; ld_nfs.so is an unpackaged example of the libnfs sources)";

/// Every target, in report order.
pub const ALL_TARGETS: [&str; 7] = [
    "native-local",
    "native-tcp",
    "native-shm",
    "native-nfs",
    "postmark-local",
    "postmark-preload",
    "postmark-fuse",
];

/// `dafs bench postmark` options.
#[derive(clap::Args, Debug, Clone)]
pub struct PostmarkArgs {
    /// Short run (well under a minute): 100 files, 1000 transactions, 1 run; sweep at 4 and
    /// 64 KiB with 300 transactions.
    #[arg(long)]
    pub quick: bool,
    /// Runs of every measurement; the median is reported. Default 3 (1 with --quick).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Files in the pool (PostMark `set number`). Default 500 (100 with --quick).
    #[arg(long)]
    pub files: Option<usize>,
    /// Transactions (PostMark `set transactions`). Default 20000 (1000 with --quick).
    #[arg(long)]
    pub transactions: Option<usize>,
    /// Smallest file (PostMark `set size MIN MAX`; suffixes k, m).
    #[arg(long, default_value = "500", value_parser = util::parse_size)]
    pub size_min: u64,
    /// Largest file.
    #[arg(long, default_value = "10000", value_parser = util::parse_size)]
    pub size_max: u64,
    /// Read block size (PostMark `set read`).
    #[arg(long, default_value = "512", value_parser = util::parse_size)]
    pub read_block: u64,
    /// Write block size (PostMark `set write`).
    #[arg(long, default_value = "512", value_parser = util::parse_size)]
    pub write_block: u64,
    /// Read/append bias, out of 10 (-1: no read/append).
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    pub bias_read: i32,
    /// Create/delete bias, out of 10 (-1: no create/delete).
    #[arg(long, default_value_t = 5, allow_negative_numbers = true)]
    pub bias_create: i32,
    /// Random seed (PostMark `set seed`).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Targets, comma separated (default all): native-local, native-tcp, native-shm,
    /// native-nfs, postmark-local, postmark-preload, postmark-fuse.
    #[arg(long, value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Mean file sizes of the I/O-boundedness sweep (comma separated). Default
    /// 4k,8k,16k,32k,64k (4k,64k with --quick). Each point: sizes mean/2 .. 3*mean/2.
    #[arg(long, value_delimiter = ',', value_parser = util::parse_size)]
    pub sweep_sizes: Vec<u64>,
    /// Files in the sweep's pool (seed 000: about 150).
    #[arg(long, default_value_t = 150)]
    pub sweep_files: usize,
    /// Transactions per sweep point. Default 2000 (300 with --quick): with 150 files and
    /// create/delete at even odds the pool is a random walk, and the stock program stops
    /// ("out of files!") once it empties; seed 000's 30,000 would empty it most runs.
    #[arg(long)]
    pub sweep_transactions: Option<usize>,
    /// Read and write block size of the sweep: whole files in one request up to this
    /// size (seed 000 tuned NFS to a block = the file size up to 32 KiB; DAFS read whole
    /// files directly).
    #[arg(long, default_value = "64k", value_parser = util::parse_size)]
    pub sweep_block: u64,
    /// No I/O-boundedness sweep.
    #[arg(long)]
    pub no_sweep: bool,
    /// dafsd binary (default: next to this executable).
    #[arg(long)]
    pub dafsd: Option<PathBuf>,
    /// libdafs_preload.so (default: next to this executable).
    #[arg(long)]
    pub preload_lib: Option<PathBuf>,
    /// The stock postmark program (default: `postmark` on PATH).
    #[arg(long)]
    pub postmark: Option<PathBuf>,
    /// Parent directory of the temporary export and local directory (default $TMPDIR or /tmp).
    #[arg(long)]
    pub tmpdir: Option<PathBuf>,
    /// Output directory (postmark.md, postmark.json).
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// Server busy-poll budget, passed to dafsd --spin-us.
    #[arg(long, default_value_t = 50)]
    pub server_spin_us: u64,
    /// NFS URL for native-nfs (default: the loopback baseline, when something listens on
    /// 127.0.0.1:2049; start it with SERVE_ONLY=1 shared/peers/nfs/run_baseline.sh).
    #[arg(long)]
    pub nfs_url: Option<String>,
}

/// Everything a run needs (what [`PostmarkArgs`] resolves to).
#[derive(Debug, Clone, Serialize)]
pub struct PostmarkConfig {
    pub quick: bool,
    pub runs: usize,
    pub params: PmParams,
    pub targets: Vec<String>,
    /// Mean file sizes of the sweep (empty: no sweep).
    pub sweep_sizes_bytes: Vec<u64>,
    pub sweep_files: usize,
    pub sweep_transactions: usize,
    pub sweep_block_bytes: usize,
    pub dafsd: Option<PathBuf>,
    pub preload_lib: Option<PathBuf>,
    pub postmark: Option<PathBuf>,
    pub tmpdir: Option<PathBuf>,
    pub server_spin_us: u64,
    pub nfs_url: Option<String>,
}

/// `dafs bench postmark ARGS...` as a parser, for callers without a command line.
#[derive(clap::Parser, Debug)]
#[command(name = "postmark")]
struct ArgsOnly {
    #[command(flatten)]
    a: PostmarkArgs,
}

impl PostmarkConfig {
    /// The configuration `dafs bench postmark ARGS...` would run, e.g.
    /// `PostmarkConfig::from_cli(&["--quick"])` (for `dafs bench seeds`).
    pub fn from_cli(args: &[&str]) -> Result<PostmarkConfig, String> {
        use clap::Parser;
        let all = std::iter::once("postmark").chain(args.iter().copied());
        let w = ArgsOnly::try_parse_from(all).map_err(|e| e.to_string())?;
        PostmarkConfig::from_args(&w.a)
    }

    pub fn from_args(a: &PostmarkArgs) -> Result<PostmarkConfig, String> {
        let targets: Vec<String> = if a.targets.is_empty() {
            ALL_TARGETS.iter().map(|s| s.to_string()).collect()
        } else {
            a.targets.iter().map(|s| s.trim().to_ascii_lowercase()).collect()
        };
        for t in &targets {
            if !ALL_TARGETS.contains(&t.as_str()) {
                return Err(format!("unknown target {t:?} (known: {})", ALL_TARGETS.join(", ")));
            }
        }
        let params = PmParams {
            files: a.files.unwrap_or(if a.quick { 100 } else { 500 }),
            transactions: a.transactions.unwrap_or(if a.quick { 1000 } else { 20_000 }),
            size_min_bytes: a.size_min,
            size_max_bytes: a.size_max,
            read_block_bytes: a.read_block as usize,
            write_block_bytes: a.write_block as usize,
            bias_read: a.bias_read,
            bias_create: a.bias_create,
            seed: a.seed,
            keep_files: false,
        };
        params.check()?;
        let sweep = if a.no_sweep {
            vec![]
        } else if a.sweep_sizes.is_empty() {
            let k = |n: u64| n << 10;
            if a.quick {
                vec![k(4), k(64)]
            } else {
                vec![k(4), k(8), k(16), k(32), k(64)]
            }
        } else {
            a.sweep_sizes.clone()
        };
        if sweep.iter().any(|&s| s < 2 || s + s / 2 > engine::FILE_BYTES_MAX) {
            return Err(format!("sweep sizes must be 2 B..{} B", engine::FILE_BYTES_MAX * 2 / 3));
        }
        if a.sweep_block == 0 {
            return Err("--sweep-block must be at least 1 byte".into());
        }
        let runs = a.runs.unwrap_or(if a.quick { 1 } else { 3 });
        if runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        Ok(PostmarkConfig {
            quick: a.quick,
            runs,
            params,
            targets,
            sweep_sizes_bytes: sweep,
            sweep_files: a.sweep_files,
            sweep_transactions: a.sweep_transactions.unwrap_or(if a.quick { 300 } else { 2_000 }),
            sweep_block_bytes: a.sweep_block as usize,
            nfs_url: a.nfs_url.clone(),
            dafsd: a.dafsd.clone(),
            preload_lib: a.preload_lib.clone(),
            postmark: a.postmark.clone(),
            tmpdir: a.tmpdir.clone(),
            server_spin_us: a.server_spin_us,
        })
    }
}

/// One target at one parameter set (medians over the runs).
#[derive(Debug, Clone, Serialize, Default)]
pub struct TargetResult {
    pub target: String,
    /// What it ran on ("dafs+shm", "tcp", "ext4 /tmp/...").
    pub via: String,
    /// Transactions per second over the whole run, wall clock (median).
    pub tx_per_s_wall: Option<f64>,
    /// Each run's wall-clock figure.
    pub runs_tx_per_s_wall: Vec<f64>,
    /// Transactions per second of the transaction phase: exact for the native engine,
    /// PostMark's own (whole seconds) for the stock program.
    pub tx_per_s_phase: Option<f64>,
    /// Client CPU seconds per transaction, microseconds (native engine).
    pub client_cpu_us_per_tx: Option<f64>,
    /// Counts of the last run (native: the engine's; stock: PostMark's).
    pub counts: Option<PmCounts>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    pub mean_size_bytes: u64,
    pub size_min_bytes: u64,
    pub size_max_bytes: u64,
    pub results: Vec<TargetResult>,
}

/// A target of the issue, checked against this run's ratios.
#[derive(Debug, Clone, Serialize)]
pub struct TargetCheck {
    pub what: String,
    pub wanted: f64,
    pub measured: Option<f64>,
    pub met: Option<bool>,
    pub note: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PostmarkResults {
    pub date: String,
    pub command: String,
    pub config: PostmarkConfig,
    /// File system of the local directory (and of the export).
    pub local_fs: String,
    pub main: Vec<TargetResult>,
    pub sweep: Vec<SweepPoint>,
    pub checks: Vec<TargetCheck>,
    pub notes: Vec<String>,
    pub elapsed_s: f64,
}

fn progress(msg: &str) {
    eprintln!("[dafs bench postmark] {msg}");
}

/// `dafs bench postmark`: run, print the Markdown, write OUT/postmark.{md,json}.
pub fn run(a: &PostmarkArgs) -> Result<(), String> {
    let cfg = PostmarkConfig::from_args(a)?;
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let res = run_postmark(&cfg)?;
    let md = report::markdown(&res);
    println!("{md}");
    let md_path = a.out.join("postmark.md");
    std::fs::write(&md_path, &md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    let json_path = a.out.join("postmark.json");
    let json = serde_json::to_string_pretty(&res).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json).map_err(|e| format!("{}: {e}", json_path.display()))?;
    match report::sweep_plot(&res, &a.out) {
        Ok(Some(f)) => progress(&format!("plot: {}", a.out.join(f).display())),
        Ok(None) => {}
        Err(e) => progress(&format!("no sweep plot: {e}")),
    }
    progress(&format!("wrote {} and {}", md_path.display(), json_path.display()));
    let failed: Vec<String> = res
        .main
        .iter()
        .chain(res.sweep.iter().flat_map(|p| p.results.iter()))
        .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.target)))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("{} measurement(s) failed; first: {}", failed.len(), failed[0]))
    }
}

/// The systems a run measures, set up once. Fields drop in order: unmount, stop the
/// server, then remove the temporary directory (never through a live mount).
struct Rig {
    mount: Option<Mount>,
    srv: Option<Dafsd>,
    tmp: tempfile::TempDir,
    local: PathBuf,
    export: PathBuf,
    preload_lib: Option<PathBuf>,
    postmark: Option<PathBuf>,
    /// Why a target is unavailable.
    missing: Vec<(String, String)>,
    /// libnfs and the URL of the NFS baseline, for native-nfs.
    nfs: Option<(Arc<LibNfs>, String)>,
}

/// A `dafs mount` in the background, unmounted on drop.
struct Mount {
    dafs: PathBuf,
    dir: PathBuf,
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new(&self.dafs).arg("umount").arg(&self.dir).status();
    }
}

/// libnfs and the baseline's URL, or why native-nfs cannot run.
fn detect_nfs(cfg: &PostmarkConfig) -> Result<(Arc<LibNfs>, String), String> {
    let url = match &cfg.nfs_url {
        Some(u) => u.clone(),
        None if nfs_baseline::listening("127.0.0.1:2049") => nfs_baseline::DEFAULT_URL.into(),
        None => {
            return Err(format!("the NFS baseline is not running ({})", nfs_baseline::HOW_TO_START))
        }
    };
    Ok((LibNfs::load()?, url))
}

fn next_to_exe(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join(name);
    p.is_file().then_some(p)
}

/// Run the experiment described by `cfg`.
pub fn run_postmark(cfg: &PostmarkConfig) -> Result<PostmarkResults, String> {
    let t0 = std::time::Instant::now();
    let want = |t: &str| cfg.targets.iter().any(|x| x == t);
    let mut rig = Rig::new(cfg, &want)?;
    util::start_watchdog(Duration::from_secs(300));
    let mut res = PostmarkResults {
        date: util::utc_now(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        config: cfg.clone(),
        local_fs: report::fs_type(&rig.local),
        main: vec![],
        sweep: vec![],
        checks: vec![],
        notes: vec![format!("postmark-nfs: not measured: {NFS_WHY_NOT}")],
        elapsed_s: 0.0,
    };
    for (t, why) in &rig.missing {
        res.notes.push(format!("{t}: not measured: {why}"));
    }
    progress(&format!("main run: {} targets, {} run(s) each", cfg.targets.len(), cfg.runs));
    res.main = rig.measure_all(cfg, &cfg.params, cfg.runs, "main");
    for &mean in &cfg.sweep_sizes_bytes {
        let p = sweep_params(cfg, mean);
        progress(&format!("sweep: mean file size {}", util::fmt_size(mean)));
        let results = rig.measure_all(cfg, &p, 1, &format!("sweep{mean}"));
        res.sweep.push(SweepPoint {
            mean_size_bytes: mean,
            size_min_bytes: p.size_min_bytes,
            size_max_bytes: p.size_max_bytes,
            results,
        });
    }
    util::stop_watchdog();
    rig.mount = None;
    drop(rig.srv.take());
    res.checks = report::checks(&res);
    res.elapsed_s = t0.elapsed().as_secs_f64();
    drop(rig.tmp);
    Ok(res)
}

/// The sweep of seed 000 Fig. 6: every transaction reads a whole file and creates or
/// deletes one (no appends), sizes mean/2 .. 3*mean/2.
pub fn sweep_params(cfg: &PostmarkConfig, mean: u64) -> PmParams {
    PmParams {
        files: cfg.sweep_files,
        transactions: cfg.sweep_transactions,
        size_min_bytes: (mean / 2).max(1),
        size_max_bytes: mean + mean / 2,
        read_block_bytes: cfg.sweep_block_bytes,
        write_block_bytes: cfg.sweep_block_bytes,
        bias_read: 10,
        bias_create: 5,
        ..cfg.params.clone()
    }
}

impl Rig {
    fn new(cfg: &PostmarkConfig, want: &dyn Fn(&str) -> bool) -> Result<Rig, String> {
        let parent = cfg.tmpdir.clone().unwrap_or_else(std::env::temp_dir);
        let tmp = tempfile::Builder::new()
            .prefix("dafs-bench-postmark-")
            .tempdir_in(&parent)
            .map_err(|e| format!("temporary directory in {}: {e}", parent.display()))?;
        let local = tmp.path().join("local");
        let export = tmp.path().join("export");
        for d in [&local, &export] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let mut rig = Rig {
            local,
            export,
            srv: None,
            mount: None,
            preload_lib: None,
            postmark: None,
            missing: vec![],
            nfs: None,
            tmp,
        };
        if want("native-nfs") {
            match detect_nfs(cfg) {
                Ok(n) => rig.nfs = Some(n),
                Err(e) => rig.missing.push(("native-nfs".into(), e)),
            }
        }
        let needs_srv = ALL_TARGETS[1..].iter().any(|t| *t != "postmark-local" && want(t));
        if needs_srv {
            let bin = find_dafsd(cfg.dafsd.as_deref())?;
            let srv = Dafsd::start(
                &bin,
                &rig.export,
                cfg.server_spin_us,
                None,
                &rig.tmp.path().join("dafsd.sock"),
                &rig.tmp.path().join("dafsd.log"),
            )?;
            progress(&format!("dafsd (pid {}) on {}, {:?}", srv.pid, srv.addr, srv.shm_url));
            rig.srv = Some(srv);
        }
        if want("postmark-local") || want("postmark-preload") || want("postmark-fuse") {
            match stock::find_postmark(cfg.postmark.as_deref()) {
                Ok(p) => rig.postmark = Some(p),
                Err(e) => {
                    for t in ["postmark-local", "postmark-preload", "postmark-fuse"] {
                        rig.missing.push((t.into(), e.clone()));
                    }
                }
            }
        }
        if want("postmark-preload") {
            match cfg.preload_lib.clone().or_else(|| next_to_exe("libdafs_preload.so")) {
                Some(p) if p.is_file() => rig.preload_lib = Some(p),
                _ => rig.missing.push(("postmark-preload".into(), "libdafs_preload.so not found next to this executable (cargo build -p dafs-preload, or pass --preload-lib)".into())),
            }
        }
        if want("postmark-fuse") {
            if let Err(e) = rig.mount() {
                rig.missing.push(("postmark-fuse".into(), e));
            }
        }
        Ok(rig)
    }

    /// The URL clients use: shared memory when dafsd offers it (what the preload
    /// library and the mount would pick on this host anyway), else TCP.
    fn url(&self) -> Option<String> {
        let s = self.srv.as_ref()?;
        Some(match &s.shm_url {
            Some(u) => format!("{}/", u.trim_end_matches('/')),
            None => format!("dafs://{}/", s.addr),
        })
    }

    fn mount(&mut self) -> Result<(), String> {
        let url = self.url().ok_or("no dafsd")?;
        let dafs = std::env::current_exe().map_err(|e| e.to_string())?;
        let dir = self.tmp.path().join("mnt");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let out = std::process::Command::new(&dafs)
            .args(["mount", &url])
            .arg(&dir)
            .args(["-d", "-q"])
            .output()
            .map_err(|e| format!("{} mount: {e}", dafs.display()))?;
        if !out.status.success() {
            return Err(format!(
                "dafs mount {url} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        self.mount = Some(Mount { dafs, dir });
        Ok(())
    }

    fn measure_all(
        &mut self,
        cfg: &PostmarkConfig,
        p: &PmParams,
        runs: usize,
        tag: &str,
    ) -> Vec<TargetResult> {
        let mut out = vec![];
        for t in &cfg.targets {
            if self.missing.iter().any(|(m, _)| m == t) {
                continue;
            }
            util::heartbeat(&format!("postmark {tag} {t}"));
            let mut r = TargetResult { target: t.clone(), ..Default::default() };
            for i in 0..runs {
                let dir = format!("pm-{tag}-{t}-{i}");
                if let Err(e) = self.measure_one(t, p, &dir, &mut r) {
                    r.error = Some(e);
                    break;
                }
            }
            r.tx_per_s_wall =
                (!r.runs_tx_per_s_wall.is_empty()).then(|| median(&r.runs_tx_per_s_wall));
            match (&r.tx_per_s_wall, &r.error) {
                (_, Some(e)) => progress(&format!("{t}: FAILED: {e}")),
                (Some(v), None) => progress(&format!("{t}: {v:.0} tx/s (wall clock)")),
                _ => {}
            }
            out.push(r);
        }
        out
    }

    /// One run of target `t` in directory `dir` (relative to its root).
    fn measure_one(
        &mut self,
        t: &str,
        p: &PmParams,
        dir: &str,
        r: &mut TargetResult,
    ) -> Result<(), String> {
        if let Some(kind) = t.strip_prefix("native-") {
            let run = match kind {
                "local" => {
                    r.via = format!("{} (std::fs)", self.local.display());
                    engine::run(&mut LocalFs { root: self.local.clone() }, dir, p)?
                }
                "nfs" => {
                    let (lib, url) = self.nfs.as_ref().ok_or("no NFS baseline")?;
                    r.via = format!("{url} (libnfs)");
                    engine::run(&mut NfsFs::mount(lib, url)?, dir, p)?
                }
                _ => {
                    let srv = self.srv.as_ref().ok_or("no dafsd")?;
                    let (target, provider) = if kind == "tcp" {
                        (srv.addr.clone(), Provider::Tcp)
                    } else {
                        (
                            srv.shm_url.clone().ok_or("dafsd offers no shared memory")?,
                            Provider::Auto,
                        )
                    };
                    let mut c =
                        Client::connect(&target, ClientConfig { provider, ..Default::default() })
                            .map_err(|e| format!("connect {target}: {e}"))?;
                    r.via = format!("{} ({})", target, c.provider());
                    engine::run(&mut DafsFs::new(&mut c, ""), dir, p)?
                }
            };
            r.runs_tx_per_s_wall.push(run.tx_per_s_wall);
            r.tx_per_s_phase = Some(run.tx_per_s);
            r.client_cpu_us_per_tx = Some(run.client_cpu_s * 1e6 / p.transactions.max(1) as f64);
            r.counts = Some(run.counts);
            return Ok(());
        }
        let bin = self.postmark.clone().ok_or("no postmark program")?;
        let target = self.stock_target(t, dir)?;
        r.via = target.location.clone();
        let s = stock::run(&bin, &target, p, self.tmp.path())?;
        r.runs_tx_per_s_wall.push(s.tx_per_s_wall);
        r.tx_per_s_phase = s.postmark_tx_per_s;
        r.counts = Some(PmCounts {
            created_alone: 0,
            created_mixed: s.created,
            read: s.read,
            appended: s.appended,
            deleted_mixed: s.deleted,
            ..Default::default()
        });
        Ok(())
    }

    fn stock_target(&self, t: &str, dir: &str) -> Result<StockTarget, String> {
        let mk = |root: &Path| -> Result<String, String> {
            let d = root.join(dir);
            std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
            Ok(d.display().to_string())
        };
        match t {
            "postmark-local" => {
                Ok(StockTarget { label: t.into(), location: mk(&self.local)?, env: vec![] })
            }
            "postmark-fuse" => {
                let m = self.mount.as_ref().ok_or("not mounted")?;
                Ok(StockTarget { label: t.into(), location: mk(&m.dir)?, env: vec![] })
            }
            "postmark-preload" => {
                let lib = self.preload_lib.as_ref().ok_or("no preload library")?;
                let url = self.url().ok_or("no dafsd")?;
                mk(&self.export)?; // PostMark only creates files: its directory must exist
                let prefix = format!("/dafs-bench-postmark-{}", std::process::id());
                Ok(StockTarget {
                    label: t.into(),
                    location: format!("{prefix}/{dir}"),
                    env: vec![
                        ("LD_PRELOAD".into(), lib.display().to_string()),
                        ("DAFS_MOUNT".into(), format!("{prefix}={url}")),
                    ],
                })
            }
            _ => Err(format!("unknown target {t}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Create/delete at even odds make the sweep's pool a random walk of `transactions`
    /// steps (standard deviation sqrt(transactions)): the stock program stops with "out of
    /// files!" when it empties. The defaults keep three deviations inside the pool (30,000
    /// transactions over 150 files emptied it in most runs).
    #[test]
    fn the_default_sweep_does_not_empty_its_pool() {
        for args in [&[][..], &["--quick"][..]] {
            let c = PostmarkConfig::from_cli(args).unwrap();
            let sd = (c.sweep_transactions as f64).sqrt();
            assert!(
                3.0 * sd <= c.sweep_files as f64,
                "{args:?}: {} tx over {} files",
                c.sweep_transactions,
                c.sweep_files
            );
        }
    }

    #[test]
    fn defaults_are_postmarks_but_the_length() {
        let c = PostmarkConfig::from_cli(&[]).unwrap();
        let d = PmParams::postmark_defaults();
        assert_eq!(c.params.transactions, 20_000);
        assert_eq!(c.params.seed, d.seed);
        assert_eq!(
            (c.params.files, c.params.size_min_bytes, c.params.size_max_bytes),
            (500, 500, 10_000)
        );
        assert_eq!(
            (c.params.read_block_bytes, c.params.bias_read, c.params.bias_create),
            (512, 5, 5)
        );
        assert_eq!(c.targets.len(), ALL_TARGETS.len());
        assert_eq!(c.sweep_sizes_bytes, vec![4096, 8192, 16384, 32768, 65536]);
        let q = PostmarkConfig::from_cli(&["--quick"]).unwrap();
        assert_eq!((q.runs, q.params.transactions, q.sweep_transactions), (1, 1000, 300));
        let s = sweep_params(&c, 4096);
        assert_eq!(
            (s.size_min_bytes, s.size_max_bytes, s.bias_read, s.files),
            (2048, 6144, 10, 150)
        );
    }

    #[test]
    fn bad_input_gets_a_clear_error() {
        for (args, says) in [
            (&["--targets", "native-local,nfs"][..], "unknown target"),
            (&["--runs", "0"][..], "--runs"),
            (&["--size-min", "20k", "--size-max", "10k"][..], "min <= max"),
            (&["--bias-read", "12"][..], "bias read"),
            (&["--sweep-sizes", "1"][..], "sweep sizes"),
            (&["--sweep-block", "0"][..], "--sweep-block"),
            (&["--files", "0"][..], "files must be"),
        ] {
            let e = PostmarkConfig::from_cli(args).unwrap_err();
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
