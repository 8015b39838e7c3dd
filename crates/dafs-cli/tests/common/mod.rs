//! Test harness shared by the dafs-cli integration tests: runs a real `dafsd` process on
//! an ephemeral loopback port, exporting a fresh temporary directory.
//!
//! ```ignore
//! mod common;
//! use common::TestServer;
//! let srv = TestServer::start(&["--slots", "4"]);
//! let mut c = srv.client();
//! std::fs::write(srv.dir().join("x"), b"hi").unwrap();
//! assert_eq!(c.stat("x").unwrap().size, 2);
//! ```
//!
//! Layout of the temporary directory (all removed on drop):
//! `base/export` — the default export (`dir()`), `base/dafsd.stderr` — the server's
//! stderr (`stderr_log()`), `base/secret` — the secret file of `start_with_secret`,
//! `base/dafsd.sock` — the shared-memory provider's socket (passed as `--shm-socket`
//! unless the extra args give `--shm-socket` or `--no-shm`).
//!
//! Providers: `client()` uses the default configuration (`Provider::Auto`: on this host
//! the library switches to shared memory); `client_tcp()` forces TCP, `client_shm()`
//! insists on shared memory (both assert which provider they got).
//!
//! Stable API: `start`, `start_with_secret`, `start_with_dir`, `try_start`, `addr`,
//! `dir`, `export_dir`, `base_dir`, `url`, `shm_socket`, `shm_url`, `config`,
//! `client`, `client_tcp`, `client_shm`, `client_on`, `client_with`, `connect`, `kill`,
//! `pid`, `stderr_log`, `secret_path`, plus the free functions `dafs_bin`, `dafsd_bin`,
//! `pattern`.
//!
//! TLS: [`tls::Pki`] generates a throwaway CA and certificates; start a TLS server with
//! `TestServer::start(&tls::strs(&pki.server_args()))`.
#![allow(dead_code)]

pub mod cluster;
pub mod mount;
pub mod restart;
pub mod tls;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use dafs_client::{Client, ClientConfig, Provider};

/// Path of the `dafsd` binary built for these tests.
pub fn dafsd_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dafsd"))
}

/// Path of the `dafs` binary built for these tests.
pub fn dafs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dafs"))
}

/// A running `dafsd`; SIGTERMed and reaped on drop.
pub struct TestServer {
    child: Option<Child>,
    /// Kept open so the server never gets EPIPE/SIGPIPE writing its stdout.
    _stdout: Option<BufReader<ChildStdout>>,
    addr: String,
    export: PathBuf,
    base: tempfile::TempDir,
    secret: Option<Vec<u8>>,
    shm_socket: Option<PathBuf>,
    /// libfabric listeners, `ofi+NAME://127.0.0.1:PORT`.
    ofi: Vec<String>,
    exit: Option<ExitStatus>,
}

/// The libfabric listeners every test server has (unless the extra args give their
/// own `--ofi-listen` or `--no-ofi`): the providers of the `ofi_*` test matrices.
pub const OFI_LISTENERS: [&str; 2] = ["ofi+tcp://127.0.0.1:0", "ofi+shm://127.0.0.1:0"];

/// `extra_args` plus the default libfabric listeners (`--no-ofi`: none; it is the
/// harness's, not dafsd's). Returns the arguments and how many listeners they have.
pub fn with_ofi_listeners(extra_args: &[&str]) -> (Vec<String>, usize) {
    let mut args: Vec<String> =
        extra_args.iter().filter(|a| **a != "--no-ofi").map(|a| a.to_string()).collect();
    let given = args.iter().filter(|a| a.starts_with("ofi+")).count();
    if given == 0 && !extra_args.contains(&"--no-ofi") {
        for l in OFI_LISTENERS {
            args.push("--ofi-listen".into());
            args.push(l.into());
        }
        return (args, OFI_LISTENERS.len());
    }
    (args, given)
}

/// Read the `libfabric: URL ...` lines dafsd prints after its first line.
pub fn read_ofi_urls(out: &mut impl BufRead, n: usize) -> Vec<String> {
    (0..n)
        .filter_map(|_| {
            let mut line = String::new();
            out.read_line(&mut line).ok()?;
            Some(line.trim().strip_prefix("libfabric: ")?.split(' ').next()?.to_string())
        })
        .collect()
}

/// `host:port` of the listener for libfabric provider `name` among `urls`.
pub fn ofi_addr_in(urls: &[String], name: &str) -> String {
    let prefix = format!("ofi+{name}://");
    urls.iter()
        .find_map(|u| u.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} listener among {urls:?}"))
        .to_string()
}

impl TestServer {
    /// Start `dafsd <fresh dir> --listen 127.0.0.1:0 <extra_args...>` (no `--listen`
    /// added if the extra args have one). Panics (with the server's stderr) if it does
    /// not come up.
    pub fn start(extra_args: &[&str]) -> TestServer {
        Self::try_start(extra_args, None, None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like `start`, with `--secret-file` holding `secret` (clients from `client()`
    /// then authenticate with it).
    pub fn start_with_secret(secret: &[u8], extra_args: &[&str]) -> TestServer {
        Self::try_start(extra_args, Some(secret), None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like `start`, exporting an existing directory instead of a fresh one.
    pub fn start_with_dir(dir: &Path, extra_args: &[&str]) -> TestServer {
        Self::try_start(extra_args, None, Some(dir)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Start, returning an error (with the server's stderr) instead of panicking.
    pub fn try_start(
        extra_args: &[&str],
        secret: Option<&[u8]>,
        dir: Option<&Path>,
    ) -> Result<TestServer, String> {
        Self::try_start_env(extra_args, secret, dir, &[])
    }

    /// Like `try_start`, with extra environment variables for dafsd (test hooks).
    pub fn try_start_env(
        extra_args: &[&str],
        secret: Option<&[u8]>,
        dir: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Result<TestServer, String> {
        let base =
            tempfile::Builder::new().prefix("dafs-test-").tempdir().map_err(|e| e.to_string())?;
        let export = match dir {
            Some(d) => d.to_path_buf(),
            None => {
                let e = base.path().join("export");
                std::fs::create_dir(&e).map_err(|e| e.to_string())?;
                e
            }
        };
        let log_path = base.path().join("dafsd.stderr");
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(dafsd_bin());
        cmd.envs(env.iter().copied());
        cmd.arg(&export);
        if !extra_args.iter().any(|a| *a == "--listen" || a.starts_with("--listen=")) {
            cmd.arg("--listen").arg("127.0.0.1:0");
        }
        if let Some(s) = secret {
            let p = base.path().join("secret");
            std::fs::write(&p, s).map_err(|e| e.to_string())?;
            cmd.arg("--secret-file").arg(&p);
        }
        let shm_socket = if extra_args.contains(&"--no-shm") {
            None
        } else if let Some(i) = extra_args.iter().position(|a| *a == "--shm-socket") {
            extra_args.get(i + 1).map(PathBuf::from)
        } else if let Some(a) = extra_args.iter().find_map(|a| a.strip_prefix("--shm-socket=")) {
            Some(PathBuf::from(a))
        } else {
            let p = base.path().join("dafsd.sock");
            cmd.arg("--shm-socket").arg(&p);
            Some(p)
        };
        let (extra, n_ofi) = with_ofi_listeners(extra_args);
        cmd.args(&extra).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::from(log));
        let mut child =
            cmd.spawn().map_err(|e| format!("cannot run {}: {e}", dafsd_bin().display()))?;
        let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        // dafsd prints the address first; if it fails it exits and stdout hits EOF.
        let read = out.read_line(&mut line);
        let addr = line.trim().strip_prefix("dafsd listening on ").map(str::to_string);
        let Some(addr) = addr.filter(|_| read.is_ok()) else {
            let _ = child.kill();
            let status = child.wait();
            let err = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(format!(
                "dafsd did not start (first stdout line {line:?}, exit {status:?}); stderr:\n{err}"
            ));
        };
        let ofi = read_ofi_urls(&mut out, n_ofi);
        Ok(TestServer {
            child: Some(child),
            ofi,
            _stdout: Some(out),
            addr,
            export,
            base,
            secret: secret.map(<[u8]>::to_vec),
            shm_socket,
            exit: None,
        })
    }

    /// "127.0.0.1:PORT".
    pub fn addr(&self) -> String {
        self.addr.clone()
    }

    /// The default export's directory on disk.
    pub fn dir(&self) -> &Path {
        &self.export
    }

    /// Same as [`TestServer::dir`].
    pub fn export_dir(&self) -> &Path {
        &self.export
    }

    /// The temporary directory holding the export, the log and the secret (scratch
    /// space for tests: it is not exported).
    pub fn base_dir(&self) -> &Path {
        self.base.path()
    }

    /// Path of the secret file, if started with one.
    pub fn secret_path(&self) -> Option<PathBuf> {
        self.secret.as_ref().map(|_| self.base.path().join("secret"))
    }

    /// `dafs://ADDR/path` (a leading '/' in `path` is optional).
    pub fn url(&self, path: &str) -> String {
        format!("dafs://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// The shared-memory provider's socket, unless started with `--no-shm`.
    pub fn shm_socket(&self) -> Option<&Path> {
        self.shm_socket.as_deref()
    }

    /// `dafs+shm:///SOCKET/path`.
    pub fn shm_url(&self, path: &str) -> String {
        format!(
            "dafs+shm://{}/{}",
            self.shm_socket.as_ref().expect("server started with --no-shm").display(),
            path.trim_start_matches('/')
        )
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// A configuration for this server (with the secret, if any).
    pub fn config(&self) -> ClientConfig {
        ClientConfig {
            secret: self.secret.clone(),
            connect_timeout: Duration::from_secs(10),
            ..ClientConfig::default()
        }
    }

    /// Connect with `cfg` as given (no secret added); with `Provider::Ofi(name)` to the
    /// libfabric listener for `name`.
    pub fn connect(&self, cfg: ClientConfig) -> dafs_client::Result<Client> {
        Client::connect(&self.addr_for(cfg.provider), cfg)
    }

    /// The address a client with `provider` connects to: the libfabric listener's for
    /// `Provider::Ofi`, else the TCP one.
    pub fn addr_for(&self, provider: Provider) -> String {
        match provider {
            Provider::Ofi(name) => ofi_addr_in(&self.ofi, name),
            _ => self.addr.clone(),
        }
    }

    /// The libfabric listeners' URLs (`ofi+NAME://HOST:PORT`).
    pub fn ofi_urls(&self) -> &[String] {
        &self.ofi
    }

    /// Connect with [`TestServer::config`] modified by `f`.
    pub fn client_with(&self, f: impl FnOnce(&mut ClientConfig)) -> dafs_client::Result<Client> {
        let mut cfg = self.config();
        f(&mut cfg);
        self.connect(cfg)
    }

    /// A connected client (default config, plus the secret if any). Panics on failure.
    pub fn client(&self) -> Client {
        self.connect(self.config()).unwrap_or_else(|e| {
            panic!("connect to {}: {e}\nstderr:\n{}", self.addr, self.stderr_log())
        })
    }

    /// A connected client over TCP (never switches to shared memory).
    pub fn client_tcp(&self) -> Client {
        self.client_on(Provider::Tcp)
    }

    /// A connected client over shared memory (through the automatic same-host switch).
    pub fn client_shm(&self) -> Client {
        self.client_on(Provider::Auto)
    }

    /// A client with `provider`; asserts that the connection uses the provider expected
    /// (`Tcp` -> "tcp", `Auto` -> "shm" when the server offers shared memory).
    pub fn client_on(&self, provider: Provider) -> Client {
        let c = self.client_with(|cfg| cfg.provider = provider).unwrap_or_else(|e| {
            panic!("connect to {} ({provider:?}): {e}\nstderr:\n{}", self.addr, self.stderr_log())
        });
        let ofi_name;
        let want = match provider {
            Provider::Tcp => "tcp",
            Provider::Ofi(name) => {
                ofi_name = format!("ofi+{name}");
                ofi_name.as_str()
            }
            _ if self.shm_socket.is_some() => "shm",
            _ => "tcp",
        };
        assert_eq!(c.provider(), want, "connected with {provider:?}");
        c
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr_log(&self) -> String {
        std::fs::read_to_string(self.base.path().join("dafsd.stderr")).unwrap_or_default()
    }

    /// SIGTERM the server and wait for it (SIGKILL after 10 s). Idempotent; returns the
    /// exit status.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if let Some(mut child) = self.child.take() {
            // SAFETY: plain kill(2) on our own child's pid, which we have not reaped yet.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            let status = loop {
                match child.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Ok(None) => {
                        let _ = child.kill();
                        break child.wait().ok();
                    }
                    Err(_) => break None,
                }
            };
            self._stdout = None;
            self.exit = status;
        }
        self.exit
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Deterministic test data: byte `i` of a buffer starting at file offset `off`.
pub fn pattern(off: u64, len: usize, seed: u8) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            let x = off + i;
            (x ^ (x >> 8) ^ (x >> 16) ^ (x >> 24)) as u8 ^ seed
        })
        .collect()
}

/// Define one `#[test]` per listed function and provider: `tcp::NAME` with
/// `Provider::Tcp`, `shm::NAME` with `Provider::Auto` (what a client on the server's host
/// gets by default), `ofi_tcp::NAME` / `ofi_shm::NAME` with `Provider::Ofi("tcp")` /
/// `Provider::Ofi("shm")` (libfabric `tcp;ofi_rxm` / `shm`). The test file must have `Provider` in scope.
#[allow(unused_macros)]
macro_rules! for_each_provider {
    ($($name:ident),* $(,)?) => {
        mod tcp {
            $( #[test] fn $name() { super::$name(super::Provider::Tcp) } )*
        }
        mod shm {
            $( #[test] fn $name() { super::$name(super::Provider::Auto) } )*
        }
        mod ofi_tcp {
            $( #[test] fn $name() { super::$name(super::Provider::Ofi("tcp")) } )*
        }
        mod ofi_shm {
            $( #[test] fn $name() { super::$name(super::Provider::Ofi("shm")) } )*
        }
    };
}

/// The server status of a failed call (panics if it succeeded or failed otherwise).
#[track_caller]
pub fn status<T: std::fmt::Debug>(r: dafs_client::Result<T>) -> dafs_client::dafs_proto::Status {
    match r {
        Err(e) => e.status().unwrap_or_else(|| panic!("expected a server status, got {e:?}")),
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
    }
}

/// Decode a raw reply and return its status (Ok for success replies).
pub fn raw_status(c: &Client, msg: &[u8]) -> dafs_client::dafs_proto::Status {
    use dafs_client::dafs_proto::{decode_reply, Reply, Status};
    match decode_reply(msg, c.msg_size_bytes_max()).expect("well-formed reply").1 {
        Reply::Error(s) => s,
        _ => Status::Ok,
    }
}
