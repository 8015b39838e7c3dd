//! The stock PostMark program (Debian package `postmark`, v1.51), run unmodified: on a
//! local directory, through `LD_PRELOAD=libdafs_preload.so` and through a `dafs mount`.
//! It reads its commands from a file; we parse its report.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::engine::PmParams;
use crate::server::die_with_parent;

/// Longest a stock PostMark run may take before it counts as hung.
pub const STOCK_RUN_TIMEOUT: Duration = Duration::from_secs(1800);

/// How to run it: the environment added (LD_PRELOAD, DAFS_MOUNT) and where it works.
#[derive(Debug, Clone)]
pub struct StockTarget {
    pub label: String,
    /// `set location`: the directory PostMark works in (it must exist).
    pub location: String,
    pub env: Vec<(String, String)>,
}

/// What PostMark printed, plus our wall clock.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct StockRun {
    pub wall_secs: f64,
    /// Transactions over the wall-clock time of the whole run (pool creation and
    /// deletion included): PostMark itself only has whole seconds.
    pub tx_per_s_wall: f64,
    /// "N seconds of transactions (M per second)" as printed (1 s resolution).
    pub postmark_tx_secs: Option<f64>,
    pub postmark_tx_per_s: Option<f64>,
    pub created: u64,
    pub read: u64,
    pub appended: u64,
    pub deleted: u64,
    /// Error lines PostMark printed ("Error: Cannot ..."): any makes the run fail.
    pub errors: Vec<String>,
}

/// PostMark's commands for `p` in `location`.
pub fn config_text(p: &PmParams, location: &str) -> String {
    format!(
        "set location {location}\nset number {}\nset transactions {}\nset size {} {}\n\
         set read {}\nset write {}\nset bias read {}\nset bias create {}\nset seed {}\n\
         run\nquit\n",
        p.files,
        p.transactions,
        p.size_min_bytes,
        p.size_max_bytes,
        p.read_block_bytes,
        p.write_block_bytes,
        p.bias_read,
        p.bias_create,
        p.seed
    )
}

/// The stock `postmark` binary: `explicit`, else `postmark` on PATH.
pub fn find_postmark(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.into())
        } else {
            Err(format!("{}: no such file", p.display()))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join("postmark")).find(|p| p.is_file()).ok_or_else(
        || "no postmark program (Debian package `postmark`: apt-get install postmark)".into(),
    )
}

/// Run PostMark once; `scratch` holds the config file.
pub fn run(bin: &Path, t: &StockTarget, p: &PmParams, scratch: &Path) -> Result<StockRun, String> {
    if p.transactions < 10 {
        // PostMark 1.51 prints a progress dot every transactions/10: fewer is SIGFPE.
        return Err(
            "stock PostMark needs at least 10 transactions (it divides by transactions/10)".into(),
        );
    }
    if p.size_min_bytes == p.size_max_bytes {
        // PostMark 1.51 picks sizes with RND() % (max - min): min == max divides by zero.
        return Err("stock PostMark needs min < max file size".into());
    }
    let cfg = scratch.join(format!("postmark-{}.cfg", t.label.replace('/', "_")));
    std::fs::write(&cfg, config_text(p, &t.location))
        .map_err(|e| format!("{}: {e}", cfg.display()))?;
    // Output to files: thousands of error lines must not fill a pipe and stall it.
    let out_path = scratch.join(format!("postmark-{}.out", t.label));
    let err_path = scratch.join(format!("postmark-{}.err", t.label));
    let file = |p: &Path| std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut cmd = Command::new(bin);
    cmd.arg(&cfg)
        .current_dir(scratch)
        .stdin(Stdio::null())
        .stdout(file(&out_path)?)
        .stderr(file(&err_path)?);
    for (k, v) in &t.env {
        cmd.env(k, v);
    }
    die_with_parent(&mut cmd);
    let t0 = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let pid = child.id();
    crate::util::CHILDREN.lock().unwrap().push(pid);
    let status = wait(&mut child, &t.label);
    crate::util::CHILDREN.lock().unwrap().retain(|x| *x != pid);
    let status = status?;
    let wall = t0.elapsed().as_secs_f64();
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    let (stdout, stderr) = (read(&out_path), read(&err_path));
    let mut r = parse_report(&stdout, &stderr);
    r.wall_secs = wall;
    r.tx_per_s_wall = p.transactions as f64 / wall.max(1e-9);
    if !status.success() || !r.errors.is_empty() {
        let first: Vec<&str> = r.errors.iter().take(3).map(|s| s.as_str()).collect();
        return Err(format!(
            "postmark ({}) failed ({}, {} error lines): {} {}",
            t.label,
            status,
            r.errors.len(),
            first.join("; "),
            stderr
                .lines()
                .filter(|l| !l.starts_with("Error"))
                .take(3)
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if r.created == 0 || r.postmark_tx_per_s.is_none() {
        if stdout.contains("out of files!") {
            return Err(format!(
                "postmark ({}): its pool ran out of files (create/delete is a random walk): \
                 raise the files or lower the transactions",
                t.label
            ));
        }
        return Err(format!("postmark ({}): no report in its output:\n{stdout}", t.label));
    }
    Ok(r)
}

/// Wait for the child (blocking, so the wall clock is exact) while a helper thread
/// tells the watchdog we are alive and kills the child after [`STOCK_RUN_TIMEOUT`].
fn wait(child: &mut std::process::Child, label: &str) -> Result<std::process::ExitStatus, String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let done = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    let (d, to, pid, what) =
        (done.clone(), timed_out.clone(), child.id(), format!("stock postmark ({label})"));
    let helper = std::thread::spawn(move || {
        let t0 = Instant::now();
        while !d.load(Ordering::SeqCst) {
            crate::util::heartbeat(&what);
            if t0.elapsed() > STOCK_RUN_TIMEOUT {
                to.store(true, Ordering::SeqCst);
                // SAFETY: plain kill(2) of our child. It can have been reaped only in the
                // instant between wait() returning and `done` being set, and only at the timeout.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let status = child.wait();
    done.store(true, Ordering::SeqCst);
    let _ = helper.join();
    if timed_out.load(Ordering::SeqCst) {
        return Err(format!(
            "postmark ({label}) still running after {} s (STOCK_RUN_TIMEOUT): killed",
            STOCK_RUN_TIMEOUT.as_secs()
        ));
    }
    status.map_err(|e| format!("postmark ({label}): {e}"))
}

/// Parse PostMark 1.51's report (terse or verbose) and its error lines.
pub fn parse_report(stdout: &str, stderr: &str) -> StockRun {
    let mut r = StockRun::default();
    let first_num = |l: &str| -> Option<f64> { l.split_whitespace().next()?.parse().ok() };
    for line in stdout.lines().map(str::trim) {
        if line.contains("seconds of transactions") {
            r.postmark_tx_secs = first_num(line);
            r.postmark_tx_per_s = line
                .split('(')
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .and_then(|s| s.parse().ok());
        } else if line.ends_with("per second)") || line.contains(" (") {
            let n = first_num(line).unwrap_or(0.0) as u64;
            let word = line.split_whitespace().nth(1).unwrap_or("");
            match word {
                "created" => r.created = n,
                "read" => r.read = n,
                "appended" => r.appended = n,
                "deleted" => r.deleted = n,
                _ => {}
            }
        }
    }
    r.errors = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| l.starts_with("Error"))
        .map(str::to_string)
        .collect();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERBOSE: &str = "PostMark v1.51 : 8/14/01\nCreating files...Done\nTime:\n\t1 seconds total\n\t1 seconds of transactions (200 per second)\n\nFiles:\n\t149 created (149 per second)\n\t\tCreation alone: 50 files (50 per second)\n\t\tMixed with transactions: 99 files (99 per second)\n\t106 read (106 per second)\n\t94 appended (94 per second)\n\t149 deleted (149 per second)\n\t\tDeletion alone: 48 files (48 per second)\n\t\tMixed with transactions: 101 files (101 per second)\n\nData:\n\t698.56 kilobytes read (698.56 kilobytes per second)\n";

    #[test]
    fn parses_the_verbose_report() {
        let r = parse_report(VERBOSE, "");
        assert_eq!(r.postmark_tx_secs, Some(1.0));
        assert_eq!(r.postmark_tx_per_s, Some(200.0));
        assert_eq!((r.created, r.read, r.appended, r.deleted), (149, 106, 94, 149));
        assert!(r.errors.is_empty());
    }

    #[test]
    fn error_lines_are_collected() {
        let r =
            parse_report(VERBOSE, "Error: Cannot delete '/x/49'\nError: Cannot delete '/x/4'\n");
        assert_eq!(r.errors.len(), 2);
    }

    #[test]
    fn parameters_the_stock_program_cannot_take_are_refused_first() {
        let scratch = std::env::temp_dir();
        let bin = Path::new("/nonexistent/postmark");
        let t = StockTarget { label: "x".into(), location: "/nonexistent".into(), env: vec![] };
        let p = PmParams { transactions: 9, ..PmParams::postmark_defaults() };
        assert!(run(bin, &t, &p, &scratch).unwrap_err().contains("at least 10 transactions"));
        let p =
            PmParams { size_min_bytes: 600, size_max_bytes: 600, ..PmParams::postmark_defaults() };
        assert!(run(bin, &t, &p, &scratch).unwrap_err().contains("min < max"));
    }

    #[test]
    fn config_names_every_parameter() {
        let t = config_text(&PmParams::postmark_defaults(), "/tmp/x");
        for k in [
            "location /tmp/x",
            "number 500",
            "transactions 500",
            "size 500 10000",
            "read 512",
            "write 512",
            "bias read 5",
            "bias create 5",
            "seed 42",
            "\nrun\n",
        ] {
            assert!(t.contains(k), "{k} missing from {t}");
        }
    }
}
