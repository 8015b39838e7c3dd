//! A dafsd child process on a temporary export.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::util;

pub struct Dafsd {
    child: Child,
    pub pid: u32,
    /// "127.0.0.1:PORT"
    pub addr: String,
    /// "dafs+shm:///path.sock", when the server offers shared memory.
    pub shm_url: Option<String>,
    /// libfabric listeners (`ofi+NAME://HOST:PORT`), see [`crate::ofi`].
    pub ofi_urls: Vec<String>,
    pub log: PathBuf,
    pub args: Vec<String>,
    /// The admin socket, when dafsd has one.
    pub admin: Option<PathBuf>,
}

/// The dafsd binary: `explicit`, else next to the running executable.
pub fn find_dafsd(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--dafsd {}: no such file", p.display()))
        };
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the current executable: {e}"))?;
    let dir = exe.parent().ok_or("the current executable has no directory")?;
    let p = dir.join("dafsd");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("dafsd not found next to {} (build it: cargo build --release -p dafs-cli; or pass --dafsd PATH)", exe.display()))
    }
}

/// Ask the kernel to SIGTERM the child when we die, so no dafsd outlives the harness.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

impl Dafsd {
    pub fn start(
        bin: &Path,
        export: &Path,
        spin_us: u64,
        inline_threshold: Option<u32>,
        sock: &Path,
        log: &Path,
    ) -> Result<Dafsd, String> {
        let mut args: Vec<String> = vec![
            export.display().to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--spin-us".into(),
            spin_us.to_string(),
            "--shm-socket".into(),
            sock.display().to_string(),
        ];
        args.extend(crate::ofi::listen_args());
        if let Some(t) = inline_threshold {
            args.push("--inline-threshold".into());
            args.push(t.to_string());
        }
        Self::start_args(bin, args, log)
    }

    /// `bin ARGS...` (ARGS name the export and listen address), waiting for it to
    /// print its address.
    pub fn start_args(bin: &Path, args: Vec<String>, log: &Path) -> Result<Dafsd, String> {
        let logf = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::from(logf));
        die_with_parent(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let pid = child.id();
        util::CHILDREN.lock().unwrap().push(pid);
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        // Read the start-up lines, then keep draining stdout until the child exits.
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let mut d = Dafsd {
            child,
            pid,
            addr: String::new(),
            shm_url: None,
            ofi_urls: Vec::new(),
            log: log.to_path_buf(),
            args,
            admin: None,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(a) = line.strip_prefix("dafsd listening on ") {
                        d.addr = a.trim().to_string();
                    } else if let Some(u) = line.strip_prefix("libfabric: ") {
                        d.ofi_urls.extend(u.split(' ').next().map(str::to_string));
                    } else if let Some(u) = line.strip_prefix("shared memory: ") {
                        d.shm_url = Some(u.trim().to_string());
                    } else if let Some(p) = line.strip_prefix("admin: ") {
                        d.admin = Some(PathBuf::from(p.trim()));
                    } else if line.starts_with("exports:") {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        if d.addr.is_empty() {
            let log_text = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!(
                "dafsd did not start ({} {}): {}",
                bin.display(),
                d.args.join(" "),
                log_text.trim()
            ));
        }
        Ok(d)
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Dafsd {
    fn drop(&mut self) {
        // SAFETY: signalling the child we started, by its PID.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
        util::CHILDREN.lock().unwrap().retain(|p| *p != self.pid);
    }
}
