//! A `dafsd` that can be killed with SIGKILL and started again on the same export, port
//! and shared-memory socket: what a crash and a supervisor's restart look like to the
//! clients.
//!
//! ```ignore
//! let mut srv = RestartableServer::start(&[]);
//! let mut c = Client::connect(&srv.addr(), ClientConfig::default())?;
//! srv.kill9();
//! srv.restart();
//! ```

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::dafsd_bin;

pub struct RestartableServer {
    child: Option<(Child, BufReader<ChildStdout>)>,
    addr: String,
    base: tempfile::TempDir,
    extra: Vec<String>,
    /// libfabric listeners (ports of the first start, reused by restarts).
    ofi: Vec<String>,
    restarts: u32,
}

impl RestartableServer {
    /// Start `dafsd <fresh export> --listen 127.0.0.1:0 --shm-socket <base>/dafsd.sock
    /// <extra_args...>`; restarts reuse the port the first start got.
    pub fn start(extra_args: &[&str]) -> RestartableServer {
        let base = tempfile::Builder::new().prefix("dafs-restart-").tempdir().unwrap();
        std::fs::create_dir(base.path().join("export")).unwrap();
        let mut s = RestartableServer {
            child: None,
            addr: "127.0.0.1:0".into(),
            base,
            extra: extra_args.iter().map(|a| a.to_string()).collect(),
            ofi: Vec::new(),
            restarts: 0,
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "the previous dafsd is gone");
        // The old process's listening socket may linger for a moment after SIGKILL.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.base.path().join("dafsd.stderr"))
                .unwrap();
            let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
            let (mut args, n_ofi) = super::with_ofi_listeners(&extra);
            if !self.ofi.is_empty() {
                // Same ports as the first start: clients reconnect to them.
                args.retain(|a| a != "--ofi-listen" && !a.starts_with("ofi+"));
                for u in &self.ofi {
                    args.push("--ofi-listen".into());
                    args.push(u.clone());
                }
            }
            let mut child = Command::new(dafsd_bin())
                .arg(self.dir())
                .arg("--listen")
                .arg(&self.addr)
                .arg("--shm-socket")
                .arg(self.shm_socket())
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(log))
                .spawn()
                .unwrap();
            let mut out = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            let _ = out.read_line(&mut line);
            if let Some(a) = line.trim().strip_prefix("dafsd listening on ") {
                self.addr = a.to_string();
                self.ofi = super::read_ofi_urls(&mut out, n_ofi);
                self.child = Some((child, out));
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            assert!(Instant::now() < deadline, "dafsd did not start:\n{}", self.stderr_log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL the server and reap it (no clean shutdown: sessions, open files and the
    /// shared-memory socket are left as a crash leaves them).
    pub fn kill9(&mut self) {
        if let Some((mut child, _out)) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start the server again (same export, port, socket and arguments).
    pub fn restart(&mut self) {
        self.kill9();
        self.restarts += 1;
        self.spawn();
    }

    /// Send `sig` to the running server (e.g. SIGSTOP: a server that hangs).
    pub fn signal(&self, sig: i32) {
        let (child, _) = self.child.as_ref().expect("the server runs");
        // SAFETY: kill(2) on our own child, not reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        if sig == libc::SIGSTOP {
            // Delivery is asynchronous: wait until every thread has stopped.
            let task = format!("/proc/{}/task", child.id());
            let stopped = || {
                std::fs::read_dir(&task).unwrap().all(|t| {
                    let stat =
                        std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap_or_default();
                    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                    state.starts_with('T') || state.starts_with('t')
                })
            };
            let deadline = Instant::now() + Duration::from_secs(5);
            while !stopped() {
                assert!(Instant::now() < deadline, "dafsd did not stop");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// The address a client with `provider` connects to (see `TestServer::addr_for`).
    pub fn addr_for(&self, provider: super::Provider) -> String {
        match provider {
            super::Provider::Ofi(name) => super::ofi_addr_in(&self.ofi, name),
            _ => self.addr.clone(),
        }
    }

    pub fn restarts(&self) -> u32 {
        self.restarts
    }
    pub fn addr(&self) -> String {
        self.addr.clone()
    }
    pub fn dir(&self) -> PathBuf {
        self.base.path().join("export")
    }
    pub fn base_dir(&self) -> &Path {
        self.base.path()
    }
    pub fn shm_socket(&self) -> PathBuf {
        self.base.path().join("dafsd.sock")
    }
    pub fn stderr_log(&self) -> String {
        std::fs::read_to_string(self.base.path().join("dafsd.stderr")).unwrap_or_default()
    }
}

impl Drop for RestartableServer {
    fn drop(&mut self) {
        self.kill9();
    }
}
