//! Runs the experiments that live outside this crate's `bench` entry point: the
//! `dafs bench merge|postmark|gzip` subcommands and the adapters' bench.sh scripts, each
//! as a child process in its own process group with a time budget, then collects the
//! `seed_points` of every JSON file it wrote.
//!
//! Contract with an experiment: it accepts `--quick` and `--out DIR`, writes its JSON
//! under DIR, exits 0 on success, and exits 77 (the automake "skip" code) with a reason
//! on its last stderr line when something it needs is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::measure::{self, Measured};
use super::report::ExperimentRun;

/// Exit code meaning "cannot run here" (missing package, hardware...).
pub const EXIT_SKIP: i32 = 77;

/// One child experiment.
pub struct Child {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub out_dir: PathBuf,
    pub budget: Duration,
    /// Working directory (the repository root for scripts).
    pub cwd: Option<PathBuf>,
    /// Extra environment (e.g. DAFS_PROFILE, where a script writes its JSON).
    pub env: Vec<(String, String)>,
}

/// The child's reason for failing: its first line saying "error", else its last
/// non-empty line (clap ends with "For more information, try '--help'.").
fn reason(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let err = s.lines().find(|l| l.to_ascii_lowercase().contains("error"));
    let last = || s.lines().rev().find(|l| !l.trim().is_empty());
    err.or_else(last).unwrap_or("").trim().chars().take(300).collect()
}

/// A failure that only says the experiment is not there yet (a skeleton subcommand,
/// or one that does not take --quick/--out).
fn is_absent(why: &str) -> bool {
    why.contains("not built yet") || why.contains("unexpected argument")
}

fn kill_group(pid: u32, sig: libc::c_int) {
    // SAFETY: signals the process group this runner created for its own child
    // (process_group(0) made the child's pid the group id).
    unsafe { libc::kill(-(pid as libc::pid_t), sig) };
}

/// Wait for the child; past the budget, stop its whole group (it may have started a
/// dafsd): SIGTERM, then SIGKILL two seconds later. Returns the exit code, or None on
/// timeout.
fn wait_budget(ch: &mut std::process::Child, budget: Duration) -> Result<Option<i32>, String> {
    let t0 = Instant::now();
    loop {
        if let Some(st) = ch.try_wait().map_err(|e| e.to_string())? {
            return Ok(Some(st.code().unwrap_or(-1)));
        }
        if t0.elapsed() > budget {
            kill_group(ch.id(), libc::SIGTERM);
            std::thread::sleep(Duration::from_secs(2));
            kill_group(ch.id(), libc::SIGKILL);
            let _ = ch.wait();
            return Ok(None);
        }
        crate::util::heartbeat("seeds: waiting for a child experiment");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every JSON file under `dir` (two levels deep), merged into one set of series.
pub fn collect(dir: &Path) -> (Measured, Vec<String>) {
    let mut m = Measured::default();
    let mut notes = Vec::new();
    let mut files = Vec::new();
    for d in std::iter::once(dir.to_path_buf()).chain(
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir()),
    ) {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "json") {
                files.push(e.path());
            }
        }
    }
    files.sort();
    for f in files {
        let doc = std::fs::read_to_string(&f)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).map_err(|e| e.to_string()))
            .and_then(|d| {
                let mut x = measure::from_json(&d)?;
                x.merge(super::convert::from_doc(&d));
                Ok(x)
            });
        match doc {
            Ok(x) => m.merge(x),
            Err(e) => notes.push(format!("{}: {e}", f.display())),
        }
    }
    (m, notes)
}

/// Run one child experiment and collect its series.
pub fn run_child(c: &Child) -> (ExperimentRun, Measured) {
    let t0 = Instant::now();
    let command = format!("{} {}", c.program.display(), c.args.join(" "));
    let mut run = ExperimentRun {
        name: c.name.clone(),
        command,
        status: String::new(),
        secs: 0.0,
        out_dir: Some(c.out_dir.display().to_string()),
        series: 0,
        notes: vec![],
    };
    let outcome = spawn_and_wait(c);
    run.secs = t0.elapsed().as_secs_f64();
    let err_log = c.out_dir.join("stderr.log");
    run.status = match outcome {
        Err(e) => format!("not available: {e}"),
        Ok(None) => format!("failed: over its budget of {} s, stopped", c.budget.as_secs()),
        Ok(Some(0)) => "ran".into(),
        Ok(Some(EXIT_SKIP)) => format!("not available: {}", reason(&err_log)),
        Ok(Some(code)) => {
            let why = reason(&err_log);
            if is_absent(&why) {
                format!("not available: {why}")
            } else {
                format!("failed (exit {code}): {why}")
            }
        }
    };
    let (m, notes) = collect(&c.out_dir);
    run.series = m.series.len();
    run.notes = notes;
    if run.status == "ran" && m.series.is_empty() {
        run.notes.push("its JSON has no seed_points: nothing to set beside the papers".into());
    }
    (run, m)
}

fn spawn_and_wait(c: &Child) -> Result<Option<i32>, String> {
    use std::os::unix::process::CommandExt;
    if !c.program.exists() {
        return Err(format!("{} is not in this tree", c.program.display()));
    }
    std::fs::create_dir_all(&c.out_dir).map_err(|e| format!("{}: {e}", c.out_dir.display()))?;
    let open = |n: &str| {
        std::fs::File::create(c.out_dir.join(n))
            .map_err(|e| format!("{}: {e}", c.out_dir.display()))
    };
    let mut cmd = Command::new(&c.program);
    cmd.args(&c.args)
        .stdin(Stdio::null())
        .stdout(open("stdout.log")?)
        .stderr(open("stderr.log")?)
        .process_group(0);
    if let Some(d) = &c.cwd {
        cmd.current_dir(d);
    }
    cmd.envs(c.env.iter().map(|(k, v)| (k, v)));
    let mut ch = cmd.spawn().map_err(|e| format!("{}: {e}", c.program.display()))?;
    wait_budget(&mut ch, c.budget)
}
