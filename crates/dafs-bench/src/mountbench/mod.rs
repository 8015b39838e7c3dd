//! `dafs bench mount`: programs through a `dafs mount` against the same programs on a
//! local directory of the same machine, in one run: dd-style sequential 1 MiB writes
//! and reads (cold: the pages dropped on both sides; and cached: the file opened again
//! unchanged), 4 KiB random reads, and untar + find + stat of a generated tree of small
//! files. PostMark through the mount is `dafs bench postmark` (targets postmark-local
//! and postmark-fuse), run here too unless --no-postmark.
//!
//! The mount is served by a dafsd started for the run (over shared memory when it
//! offers it, as `dafs mount` picks on one host). The NFS baseline needs a kernel NFS
//! client to be measured through a mount: where /proc/filesystems has none the report
//! says so instead of a figure.

mod workloads;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::postmark;
use crate::server::{find_dafsd, Dafsd};
use crate::util;
use workloads as w;

/// `dafs bench mount` options.
#[derive(clap::Args, Debug, Clone)]
pub struct MountBenchArgs {
    /// Short run: a 64 MiB file, 2,000 random reads, a 2,000-file tree, one run.
    #[arg(long)]
    pub quick: bool,
    /// Runs of every measurement; the median is reported. Default 3 (1 with --quick).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Size of the sequential file (suffixes k, m, g). Default 512m (64m with --quick).
    #[arg(long, value_parser = util::parse_size)]
    pub size: Option<u64>,
    /// 4 KiB random reads per run. Default 20000 (2000 with --quick).
    #[arg(long)]
    pub random_reads: Option<usize>,
    /// Files in the generated tree. Default 10000 (2000 with --quick).
    #[arg(long)]
    pub files: Option<usize>,
    /// Mount options for the dafs mount (as `dafs mount -o`), e.g. writeback_cache.
    #[arg(short = 'o', long = "mount-options", value_name = "OPTIONS")]
    pub mount_options: Option<String>,
    /// Skip PostMark (`dafs bench postmark --targets postmark-local,postmark-fuse`).
    #[arg(long)]
    pub no_postmark: bool,
    /// dafsd binary (default: next to this executable).
    #[arg(long)]
    pub dafsd: Option<PathBuf>,
    /// Parent directory of the temporary export and local directory (default $TMPDIR or /tmp).
    #[arg(long)]
    pub tmpdir: Option<PathBuf>,
    /// Output directory (mount.md).
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// Server busy-poll budget, passed to dafsd --spin-us.
    #[arg(long, default_value_t = 50)]
    pub server_spin_us: u64,
}

/// The two places every workload runs in.
const TARGETS: [&str; 2] = ["local", "mount"];

/// One workload's figure on both targets (medians over the runs).
struct Row {
    name: String,
    unit: &'static str,
    /// Higher is better (throughput) or lower (latency, seconds).
    higher_better: bool,
    local: Vec<f64>,
    mount: Vec<f64>,
    /// The target for mount relative to local (as a speed ratio), if any.
    target: Option<f64>,
}

impl Row {
    fn new(name: &str, unit: &'static str, higher_better: bool) -> Row {
        Row { name: name.into(), unit, higher_better, local: vec![], mount: vec![], target: None }
    }
    fn push(&mut self, target: &str, v: f64) {
        if target == "local" {
            self.local.push(v)
        } else {
            self.mount.push(v)
        }
    }
    /// The mount's speed relative to local (>1: faster), from the medians.
    fn ratio(&self) -> Option<f64> {
        let (l, m) = (util::median(&self.local), util::median(&self.mount));
        if self.higher_better {
            util::ratio(m, l)
        } else {
            util::ratio(l, m)
        }
    }
}

/// A `dafs mount` in the background, unmounted on drop.
struct Mount {
    dafs: PathBuf,
    dir: PathBuf,
}

impl Mount {
    fn new(url: &str, dir: &Path, opts: Option<&str>) -> Result<Mount, String> {
        let dafs = std::env::current_exe().map_err(|e| e.to_string())?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cmd = Command::new(&dafs);
        cmd.args(["mount", url]).arg(dir).args(["-d", "-q"]);
        if let Some(o) = opts {
            cmd.args(["-o", o]);
        }
        let out = cmd.output().map_err(|e| format!("{} mount: {e}", dafs.display()))?;
        if !out.status.success() {
            return Err(format!(
                "dafs mount {url} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount { dafs, dir: dir.to_path_buf() })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new(&self.dafs).arg("umount").arg(&self.dir).status();
    }
}

fn progress(msg: &str) {
    eprintln!("[bench mount] {msg}");
}

/// Why the NFS baseline is not measured through a mount on this machine, if it is not.
fn nfs_why_not() -> String {
    let kernel_nfs = std::fs::read_to_string("/proc/filesystems")
        .is_ok_and(|s| s.lines().any(|l| l.split_whitespace().last() == Some("nfs")));
    if kernel_nfs {
        "not measured: mounting the NFS baseline needs root and mount.nfs; run the same \
         programs on such a mount by hand"
            .into()
    } else {
        "not measured: this machine has no kernel NFS client (no nfs in /proc/filesystems), \
         so nothing can mount the NFS baseline; its figures through libnfs are in `dafs bench` \
         and `dafs bench postmark`"
            .into()
    }
}

/// `dafs bench mount`.
pub fn run(a: &MountBenchArgs) -> Result<(), String> {
    let runs = a.runs.unwrap_or(if a.quick { 1 } else { 3 }).max(1);
    let size = a.size.unwrap_or(if a.quick { 64 << 20 } else { 512 << 20 });
    let nrand = a.random_reads.unwrap_or(if a.quick { 2000 } else { 20000 });
    let files = a.files.unwrap_or(if a.quick { 2000 } else { 10000 });
    if size < w::SEQ_BLOCK_BYTES as u64 || files == 0 || nrand == 0 {
        return Err("--size must be at least 1 MiB, --files and --random-reads at least 1".into());
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let parent = a.tmpdir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("dafs-bench-mount-")
        .tempdir_in(&parent)
        .map_err(|e| format!("temporary directory in {}: {e}", parent.display()))?;
    let local = tmp.path().join("local");
    let export = tmp.path().join("export");
    for d in [&local, &export] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let bin = find_dafsd(a.dafsd.as_deref())?;
    let srv = Dafsd::start(
        &bin,
        &export,
        a.server_spin_us,
        None,
        &tmp.path().join("dafsd.sock"),
        &tmp.path().join("dafsd.log"),
    )?;
    let url = match &srv.shm_url {
        Some(u) => format!("{}/", u.trim_end_matches('/')),
        None => format!("dafs://{}/", srv.addr),
    };
    progress(&format!("dafsd (pid {}) at {url}; local directory {}", srv.pid, local.display()));
    let mnt = tmp.path().join("mnt");
    let opts = a.mount_options.as_deref();
    let mut mount = Some(Mount::new(&url, &mnt, opts)?);
    let tar = tmp.path().join("tree.tar");
    let tar_bytes = w::make_tree_tar(tmp.path(), files, &tar)?;
    progress(&format!("generated tree: {files} files, tar {}", util::fmt_size(tar_bytes)));
    util::start_watchdog(Duration::from_secs(600));
    let load_before = load_average();

    let mut rows = vec![
        Row::new("seq write 1 MiB (+fsync)", "MB/s", true),
        Row::new("seq read 1 MiB, cold", "MB/s", true),
        Row::new("seq read 1 MiB, reopened unchanged", "MB/s", true),
        Row::new("4 KiB random read p50", "us", false),
        Row::new("4 KiB random read p99", "us", false),
        Row::new(&format!("untar {files} files"), "s", false),
        Row::new("find (cold mount)", "s", false),
        Row::new("stat every entry", "s", false),
    ];
    rows[0].target = Some(0.7);
    rows[1].target = Some(0.7);
    rows[5].target = Some(0.5);
    for run in 0..runs {
        for t in TARGETS {
            let dir = if t == "local" { local.clone() } else { mnt.clone() };
            util::heartbeat(&format!("run {run} {t}: sequential"));
            let f = dir.join("seq.dat");
            rows[0].push(t, w::seq_write(&f, size)?);
            // Cold: neither the reader's pages nor (for the mount) the server's.
            w::drop_pages(&f)?;
            if t == "mount" {
                w::drop_pages(&export.join("seq.dat"))?;
            }
            rows[1].push(t, w::seq_read(&f, size)?);
            rows[2].push(t, w::seq_read(&f, size)?);
            util::heartbeat(&format!("run {run} {t}: random reads"));
            // The reader's pages dropped, the server's (or local disk's) kept: each read
            // measures the path to the data, not the disk.
            w::drop_pages(&f)?;
            let lat = w::random_reads(&f, size, nrand, 99 + run as u64)?;
            rows[3].push(t, w::quantile(&lat, 0.5));
            rows[4].push(t, w::quantile(&lat, 0.99));
            std::fs::remove_file(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            util::heartbeat(&format!("run {run} {t}: untar"));
            let tree = dir.join(format!("tree{run}"));
            rows[5].push(t, w::untar(&tar, &tree)?);
            if t == "mount" {
                // Start find from a cold kernel cache: a new mount.
                drop(mount.take());
                mount = Some(Mount::new(&url, &mnt, opts)?);
            }
            let (secs, n) = w::find(&tree)?;
            rows[6].push(t, secs);
            let (secs2, n2) = w::stat_all(&tree)?;
            rows[7].push(t, secs2);
            let want = files + files.div_ceil(100) + 1;
            if n != want || n2 + 1 != want {
                return Err(format!("{t}: find saw {n}, stat {n2} entries; the tree has {want}"));
            }
            std::fs::remove_dir_all(&tree).map_err(|e| format!("{}: {e}", tree.display()))?;
        }
    }
    util::stop_watchdog();
    drop(mount);
    drop(srv);
    let pm = if a.no_postmark { Err("skipped (--no-postmark)".into()) } else { postmark(a) };
    let md = report(a, &rows, &pm, files, size, runs, load_before);
    println!("{md}");
    let p = a.out.join("mount.md");
    std::fs::write(&p, &md).map_err(|e| format!("{}: {e}", p.display()))?;
    progress(&format!("wrote {}", p.display()));
    Ok(())
}

/// `dafs bench postmark --quick --no-sweep --targets postmark-local,postmark-fuse`:
/// (local, mount) transactions per second.
fn postmark(a: &MountBenchArgs) -> Result<(f64, f64), String> {
    progress(
        "postmark: dafs bench postmark --quick --no-sweep --targets postmark-local,postmark-fuse",
    );
    let mut args = vec!["--quick", "--no-sweep", "--targets", "postmark-local,postmark-fuse"];
    let tmpdir = a.tmpdir.as_ref().map(|t| t.display().to_string());
    if let Some(t) = &tmpdir {
        args.extend(["--tmpdir", t]);
    }
    let cfg = postmark::PostmarkConfig::from_cli(&args)?;
    let res = postmark::run_postmark(&cfg)?;
    let tps = |t: &str| {
        res.main.iter().find(|r| r.target == t).and_then(|r| match &r.error {
            Some(e) => Some(Err(format!("{t}: {e}"))),
            None => r.tx_per_s_wall.map(Ok),
        })
    };
    match (tps("postmark-local"), tps("postmark-fuse")) {
        (Some(l), Some(m)) => Ok((l?, m?)),
        _ => Err(res.notes.join("; ")),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn report(
    a: &MountBenchArgs,
    rows: &[Row],
    pm: &Result<(f64, f64), String>,
    files: usize,
    size: u64,
    runs: usize,
    load_before: String,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# dafs bench mount\n");
    let _ = writeln!(
        s,
        "Command: `{}`  \nDate: {}; load average before {load_before}, after {}; {runs} run(s), medians; \
         sequential file {}, tree of {files} files; mount options: {}\n",
        std::env::args().collect::<Vec<_>>().join(" "),
        util::utc_now(),
        load_average(),
        util::fmt_size(size),
        a.mount_options.as_deref().unwrap_or("(defaults: cache=cto)"),
    );
    let _ = writeln!(s, "| workload | local | dafs mount | mount vs local | target |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for r in rows {
        let fmt = |v: &[f64]| format!("{:.1} {}", util::median(v), r.unit);
        let ratio = r.ratio().map(|x| format!("{x:.2}x")).unwrap_or_else(|| "n/a".into());
        let target = match (r.target, r.ratio()) {
            (Some(t), Some(x)) => format!("≥ {t}x: {}", if x >= t { "met" } else { "MISSED" }),
            (Some(t), None) => format!("≥ {t}x: n/a"),
            (None, _) => String::new(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {ratio} | {target} |",
            r.name,
            fmt(&r.local),
            fmt(&r.mount)
        );
    }
    match pm {
        Ok((l, m)) => {
            let ratio = util::ratio(*m, *l).map(|x| format!("{x:.2}x")).unwrap_or_default();
            let _ =
                writeln!(s, "| PostMark (--quick), transactions/s | {l:.0} | {m:.0} | {ratio} | |");
        }
        Err(e) => {
            let _ = writeln!(s, "\nPostMark: not measured: {e}");
        }
    }
    let _ = writeln!(s, "\nmount vs local: the mount's speed relative to local (above 1: faster).");
    let _ = writeln!(s, "NFS through a mount: {}.", nfs_why_not());
    s
}
