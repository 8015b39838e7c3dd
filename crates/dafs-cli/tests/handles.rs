//! File handles and descriptors in the server: handles cannot be forged or carried to
//! an export the session may not use; they survive a restart with a state directory;
//! dafsd works within a small descriptor limit; deleted files release their space.
//!
//! A small raw client (TCP frames by hand, like `protocol_abuse.rs`) sends handles the
//! client library would never send.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Client, ClientConfig, TestServer};
use dafs_client::OpenOptions;
use dafs_proto::types::open_flags;
use dafs_proto::{
    decode_reply, encode_request, limits, AuthMethod, FileHandle, FileType, Header, Opcode, Reply,
    Request, Status,
};
use dafs_transport::frame::{FrameHeader, FRAME_HEADER_LEN};

const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;

/// One session on one slot over a raw TCP connection.
struct Raw {
    s: TcpStream,
    sid: u64,
    seq: u32,
}

impl Raw {
    fn connect(addr: &str, client_id: &str) -> Raw {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = Raw { s, sid: 0, seq: 1 };
        let req = Request::SessionCreate {
            msg_size_bytes_max: 65536,
            slots: 1,
            auth: AuthMethod::None,
            flags: 0,
            client_id: client_id.as_bytes(),
        };
        let reply = r.send(&Header::request(Opcode::SessionCreate, 0, 0, 0, 0), &req);
        let (h, rep) = decode_reply(&reply, MAX).expect("SESSION_CREATE reply decodes");
        assert!(matches!(rep, Reply::SessionCreate { .. }), "SESSION_CREATE: {rep:?}");
        r.sid = h.session_id;
        r
    }

    fn send(&mut self, h: &Header, req: &Request) -> Vec<u8> {
        let mut msg = Vec::new();
        encode_request(h, req, &mut msg, MAX).expect("test request encodes");
        let mut frame = FrameHeader::msg(msg.len()).encode().to_vec();
        frame.extend_from_slice(&msg);
        self.s.write_all(&frame).expect("send");
        let mut fh = [0u8; FRAME_HEADER_LEN];
        self.s.read_exact(&mut fh).expect("reply frame header");
        let fh = FrameHeader::decode(&fh).expect("frame header decodes");
        let mut payload = vec![0u8; fh.len as usize];
        self.s.read_exact(&mut payload).expect("reply payload");
        payload
    }

    /// `req` on slot 0; the encoded reply.
    fn call(&mut self, req: &Request) -> Vec<u8> {
        let h = Header::request(req.opcode(), self.sid, 0, self.seq, 0);
        self.seq += 1;
        self.send(&h, req)
    }

    fn status(&mut self, req: &Request) -> Status {
        status(&self.call(req))
    }

    /// A handle from GET_ROOTHANDLE or LOOKUP (panics on any other reply).
    fn handle(&mut self, req: &Request) -> FileHandle {
        match decode_reply(&self.call(req), MAX).unwrap().1 {
            Reply::Handle { fh, .. } => fh,
            other => panic!("{:?}: {other:?}", req.opcode()),
        }
    }

    fn root(&mut self, export: &str) -> FileHandle {
        self.handle(&Request::GetRootHandle { export: export.as_bytes() })
    }

    fn lookup(&mut self, dir: FileHandle, path: &str) -> FileHandle {
        self.handle(&Request::Lookup { dir, path: path.as_bytes(), follow: true })
    }

    fn open(&mut self, fh: FileHandle, name: &str, flags: u32) -> Result<u64, Status> {
        let r =
            self.call(&Request::Open { fh, flags, mode: 0o644, name: name.as_bytes(), key: b"" });
        match decode_reply(&r, MAX).unwrap().1 {
            Reply::Open { open_id, .. } => Ok(open_id),
            other => Err(other.status()),
        }
    }

    fn read(&mut self, open_id: u64, len: u32) -> Vec<u8> {
        let r = self.call(&Request::ReadInline { open_id, offset: 0, len });
        match decode_reply(&r, MAX).unwrap().1 {
            Reply::ReadInline { data, .. } => data.to_vec(),
            other => panic!("READ_INLINE: {other:?}"),
        }
    }
}

fn status(reply: &[u8]) -> Status {
    decode_reply(reply, MAX).expect("reply decodes").1.status()
}

/// A counter from `dafs admin --json stats`.
fn admin_counter(socket: &Path, name: &str) -> u64 {
    let out = Command::new(common::dafs_bin())
        .args(["admin", "--json", "--socket"])
        .arg(socket)
        .arg("stats")
        .output()
        .expect("run dafs admin");
    assert!(out.status.success(), "dafs admin stats: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats are JSON");
    v["counters"][name].as_u64().unwrap_or_else(|| panic!("no counter {name} in {v}"))
}

// ------------------------------------------------------------------------------------
// 1. Unforgeable handles, checked per export
// ------------------------------------------------------------------------------------

/// FNV-1a, the unkeyed check word of the handles before they carried a MAC: a forger
/// can recompute it.
fn fnv1a(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, &x| (h ^ x as u32).wrapping_mul(0x0100_0193))
}

/// Handles a client admitted to export 0 only could make up for export 1 from its own
/// root handle `a`: the export field rewritten (today's layout and the earlier one, with
/// the earlier unkeyed check recomputed over guessed slot indexes and generations).
fn forgeries(a: FileHandle, b_root_ino: u64) -> Vec<FileHandle> {
    let mut out = Vec::new();
    let mut f = a;
    f.0[2] = 1;
    out.push(f);
    for index in 0u32..8 {
        for gen in 1u32..3 {
            let mut f = a;
            f.0[8..12].copy_from_slice(&index.to_le_bytes());
            f.0[12..16].copy_from_slice(&gen.to_le_bytes());
            f.0[16..24].copy_from_slice(&b_root_ino.to_le_bytes());
            f.0[24..28].copy_from_slice(&1u32.to_le_bytes());
            let c = fnv1a(&f.0[..28]);
            f.0[28..32].copy_from_slice(&c.to_le_bytes());
            out.push(f);
        }
    }
    out
}

/// The handle-based requests a client refused by export B must not get through with a
/// handle `fh` of B.
fn attempts(fh: FileHandle) -> Vec<(&'static str, Request<'static>)> {
    let open =
        |flags, name: &'static [u8]| Request::Open { fh, flags, mode: 0o644, name, key: b"" };
    vec![
        ("GETATTR", Request::GetAttr { fh }),
        ("LOOKUP", Request::Lookup { dir: fh, path: b"secret", follow: true }),
        (
            "CREATE",
            Request::Create {
                dir: fh,
                ftype: FileType::Regular,
                mode: 0o644,
                exclusive: false,
                name: b"planted",
            },
        ),
        ("OPEN for READ", open(open_flags::READ, b"secret")),
        ("OPEN for WRITE", open(open_flags::WRITE, b"secret")),
        ("OPEN CREATE", open(open_flags::WRITE | open_flags::CREATE, b"planted")),
    ]
}

#[test]
fn handles_are_checked_per_export() {
    let base = tempfile::tempdir().unwrap();
    let (a, b) = (base.path().join("a"), base.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    std::fs::write(b.join("secret"), b"only for bob").unwrap();
    let cfg = base.path().join("dafsd.toml");
    let toml = format!("[[exports]]\nname = \"b\"\npath = {:?}\nclients = [\"bob\"]\n", b);
    std::fs::write(&cfg, toml).unwrap();
    let admin = base.path().join("admin.sock");
    let cfg_s = cfg.to_str().unwrap();
    let admin_s = admin.to_str().unwrap();
    let srv = TestServer::start_with_dir(
        &a,
        &["--allow-client", "alice", "--config", cfg_s, "--admin-socket", admin_s],
    );

    let mut bob = Raw::connect(&srv.addr(), "bob");
    let b_root = bob.root("b");
    bob.lookup(b_root, "secret");
    let mut alice = Raw::connect(&srv.addr(), "alice");
    let a_root = alice.root("");
    assert_eq!(alice.status(&Request::GetRootHandle { export: b"b" }), Status::Access);

    // A genuine handle of B, replayed by a session B does not admit.
    for (what, req) in attempts(b_root) {
        let st = alice.status(&req);
        assert!(
            matches!(st, Status::Access | Status::BadHandle),
            "{what} with bob's handle of export b by alice: {st:?}"
        );
    }
    // Handles alice makes up from her own.
    use std::os::unix::fs::MetadataExt;
    let b_ino = std::fs::metadata(&b).unwrap().ino();
    for (i, f) in forgeries(a_root, b_ino).into_iter().enumerate() {
        for (what, req) in attempts(f) {
            let st = alice.status(&req);
            assert!(
                matches!(st, Status::Access | Status::BadHandle | Status::Stale),
                "{what} with forgery {i}: {st:?}"
            );
        }
    }
    assert!(!b.join("planted").exists(), "a refused client created a file in export b");
    assert!(admin_counter(&admin, "handle_refusals") > 0);
    // Bob is still served, and so is alice on her own export.
    assert_eq!(bob.status(&Request::GetAttr { fh: b_root }), Status::Ok);
    assert_eq!(alice.status(&Request::GetAttr { fh: a_root }), Status::Ok);
}

// ------------------------------------------------------------------------------------
// 2. Persistent handles
// ------------------------------------------------------------------------------------

fn kill_9(srv: &mut TestServer) {
    let pid = srv.pid().expect("server running") as libc::pid_t;
    // SAFETY: kill(2) of our own child, not reaped yet (srv.kill() reaps it below).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    srv.kill();
}

#[test]
fn handles_survive_a_restart_with_the_state_dir() {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: open_by_handle_at needs CAP_DAC_READ_SEARCH (run as root)");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let (export, state) = (base.path().join("export"), base.path().join("state"));
    std::fs::create_dir_all(export.join("sub")).unwrap();
    std::fs::write(export.join("keep"), b"persistent data").unwrap();
    std::fs::write(export.join("doomed"), b"x").unwrap();
    std::fs::write(export.join("sub/inner"), b"in").unwrap();
    let state_s = state.to_str().unwrap();
    let mut srv = TestServer::start_with_dir(&export, &["--state-dir", state_s]);
    let mut raw = Raw::connect(&srv.addr(), "before");
    let root = raw.root("");
    let (keep, doomed, sub) =
        (raw.lookup(root, "keep"), raw.lookup(root, "doomed"), raw.lookup(root, "sub"));
    kill_9(&mut srv);
    std::fs::remove_file(export.join("doomed")).unwrap();

    let mut srv = TestServer::start_with_dir(&export, &["--state-dir", state_s]);
    assert!(!srv.stderr_log().contains("volatile"), "{}", srv.stderr_log());
    let mut raw = Raw::connect(&srv.addr(), "after");
    let id = raw.open(keep, "", open_flags::READ | open_flags::WRITE).expect("OPEN old handle");
    assert_eq!(raw.read(id, 64), b"persistent data");
    let w = Request::WriteInline { open_id: id, offset: 0, stable: true, data: b"PERSISTENT" };
    assert_eq!(raw.status(&w), Status::Ok);
    assert_eq!(std::fs::read(export.join("keep")).unwrap(), b"PERSISTENT data");
    assert_eq!(raw.status(&Request::GetAttr { fh: doomed }), Status::Stale, "deleted meanwhile");
    raw.lookup(sub, "inner");
    raw.lookup(root, "keep");
    drop(raw);
    srv.kill();

    // Without the state dir (a new secret), or with another one: never another file.
    let other = base.path().join("other-state");
    for args in [vec![], vec!["--state-dir", other.to_str().unwrap()]] {
        let srv = TestServer::start_with_dir(&export, &args);
        let mut raw = Raw::connect(&srv.addr(), "later");
        for fh in [keep, sub, root] {
            let st = raw.status(&Request::GetAttr { fh });
            assert!(matches!(st, Status::Stale | Status::BadHandle), "{args:?}: {st:?}");
        }
        assert!(raw.open(keep, "", open_flags::READ).is_err());
    }
}

// ------------------------------------------------------------------------------------
// 3. Bounded descriptors
// ------------------------------------------------------------------------------------

/// dafsd started by hand (the harness cannot set limits on its child or run it through
/// a wrapper): with RLIMIT_NOFILE `nofile` (soft and hard), or through `setpriv` with
/// `setpriv_args`. Killed on drop.
struct LimitedServer {
    child: std::process::Child,
    _stdout: std::io::BufReader<std::process::ChildStdout>,
    addr: String,
    admin: PathBuf,
    export: PathBuf,
    _base: tempfile::TempDir,
}

impl LimitedServer {
    fn start(nofile: u64) -> LimitedServer {
        let base = tempfile::tempdir().unwrap();
        let export = base.path().join("export");
        std::fs::create_dir(&export).unwrap();
        Self::start_with(base, export, nofile, &[], &[])
    }

    fn start_with(
        base: tempfile::TempDir,
        export: PathBuf,
        nofile: u64,
        setpriv_args: &[&str],
        args: &[&str],
    ) -> LimitedServer {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let admin = base.path().join("admin.sock");
        let log = std::fs::File::create(base.path().join("dafsd.stderr")).unwrap();
        let mut cmd = if setpriv_args.is_empty() {
            Command::new(common::dafsd_bin())
        } else {
            let mut c = Command::new("setpriv");
            c.args(setpriv_args).arg(common::dafsd_bin());
            c
        };
        cmd.arg(&export)
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--shm-socket"])
            .arg(base.path().join("dafsd.sock"))
            .arg("--admin-socket")
            .arg(&admin)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        let lim = libc::rlimit { rlim_cur: nofile, rlim_max: nofile };
        // SAFETY: runs in the child between fork and exec; setrlimit is async-signal-safe
        // and `lim` is a plain value copied into the closure.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("run dafsd");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let Some(addr) = line.trim().strip_prefix("dafsd listening on ").map(str::to_string) else {
            let _ = child.kill();
            let err = std::fs::read_to_string(base.path().join("dafsd.stderr")).unwrap();
            panic!("dafsd did not start: {line:?}\n{err}");
        };
        LimitedServer { child, _stdout: out, addr, admin, export, _base: base }
    }

    fn client(&self) -> Client {
        let cfg = ClientConfig { connect_timeout: Duration::from_secs(10), ..Default::default() };
        Client::connect(&self.addr, cfg).expect("connect")
    }

    fn fds_open(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).unwrap().count()
    }

    fn stderr_log(&self) -> String {
        std::fs::read_to_string(self._base.path().join("dafsd.stderr")).unwrap_or_default()
    }
}

impl Drop for LimitedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Create, stat and read back `n` files named `{prefix}{i}`.
fn touch_files(c: &mut Client, prefix: &str, n: usize) {
    for i in 0..n {
        let name = format!("{prefix}{i}");
        let data = format!("file {name}");
        let f = c
            .open(&name, OpenOptions::read_write().create(true).truncate(true))
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        c.pwrite(&f, data.as_bytes(), 0).unwrap_or_else(|e| panic!("write {name}: {e}"));
        c.close(f).unwrap();
        let size = c.stat(&name).unwrap_or_else(|e| panic!("stat {name}: {e}")).size;
        assert_eq!(size, data.len() as u64, "{name}");
        let (f, back, _) =
            c.open_and_read(&name, 64).unwrap_or_else(|e| panic!("read {name}: {e}"));
        assert_eq!(back, data.as_bytes(), "{name}");
        c.close(f).unwrap();
    }
}

#[test]
fn many_files_within_a_small_descriptor_limit() {
    const NOFILE: u64 = 256;
    const CLIENTS: usize = 4;
    const FILES_PER_CLIENT: usize = 5000;
    let srv = LimitedServer::start(NOFILE);
    let ok = std::thread::scope(|s| {
        let ts: Vec<_> = (0..CLIENTS)
            .map(|t| {
                let srv = &srv;
                s.spawn(move || touch_files(&mut srv.client(), &format!("c{t}-"), FILES_PER_CLIENT))
            })
            .collect();
        // Join every thread (not `all`, which stops at the first failure and leaves the
        // rest to the scope, which then panics before dafsd's log is shown).
        ts.into_iter().map(|t| t.join().is_ok()).fold(true, |a, b| a & b)
    });
    assert!(ok, "a client failed; dafsd's log:\n{}", srv.stderr_log());
    assert!(srv.fds_open() < NOFILE as usize, "{} descriptors open", srv.fds_open());
    let files = std::fs::read_dir(&srv.export).unwrap().count();
    assert_eq!(files, CLIENTS * FILES_PER_CLIENT);
    assert!(admin_counter(&srv.admin, "descriptors_evicted") > 0);
    // A new client is still served, READDIR included.
    let mut c = srv.client();
    assert_eq!(c.stat("c0-0").unwrap().size, "file c0-0".len() as u64);
    assert_eq!(c.readdir("/").unwrap().len(), CLIENTS * FILES_PER_CLIENT);
    assert!(!srv.stderr_log().contains("panicked"), "{}", srv.stderr_log());
}

/// One session cannot hold every open file: it gets LIMIT at its share, and others
/// are still served.
#[test]
fn one_session_cannot_take_every_descriptor() {
    let srv = LimitedServer::start(256);
    let mut hog = srv.client();
    let mut held = Vec::new();
    let err = loop {
        let name = format!("h{}", held.len());
        match hog.open(&name, OpenOptions::read_write().create(true)) {
            Ok(f) => held.push(f),
            Err(e) => break e,
        }
        assert!(held.len() < 256, "no per-session bound on open files");
    };
    assert_eq!(err.status(), Some(Status::Limit), "{err}");
    let mut other = srv.client();
    let f = other.open("other", OpenOptions::read_write().create(true)).expect("other session");
    other.close(f).unwrap();
    assert!(other.stat("h0").is_ok());
}

// ------------------------------------------------------------------------------------
// 4. Deleted files release their space
// ------------------------------------------------------------------------------------

/// Does `pid` hold a descriptor of a deleted file named `name`?
fn holds_deleted(pid: u32, name: &str) -> bool {
    let suffix = format!("/{name} (deleted)");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().ends_with(&suffix)))
}

#[test]
fn a_file_deleted_outside_dafs_releases_its_space() {
    const MIB: usize = 1 << 20;
    let srv = TestServer::start(&[]);
    let pid = srv.pid().unwrap();
    let mut c = srv.client();
    let f = c.open("big", OpenOptions::read_write().create(true)).unwrap();
    let chunk = common::pattern(0, MIB, 7);
    for i in 0..64 {
        assert_eq!(c.pwrite(&f, &chunk, (i * MIB) as u64).unwrap(), MIB);
    }
    c.close(f).unwrap();
    let f = c.open("big", OpenOptions::read()).unwrap();
    let mut back = vec![0u8; MIB];
    assert_eq!(c.pread(&f, &mut back, 0).unwrap(), MIB);
    c.close(f).unwrap();
    assert_eq!(c.stat("big").unwrap().size, 64 * MIB as u64);

    std::fs::remove_file(srv.dir().join("big")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while holds_deleted(pid, "big") {
        assert!(Instant::now() < deadline, "dafsd still holds the deleted file after 5 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(c.stat("big").is_err());
}

/// Without CAP_DAC_READ_SEARCH (open_by_handle_at refused) dafsd falls back to
/// volatile handles, says so once, and handles from before a restart answer STALE.
#[test]
fn without_the_capability_handles_are_volatile() {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to drop the capability with setpriv");
        return;
    }
    let no_cap = ["--inh-caps=-all", "--bounding-set=-dac_read_search"];
    let start = |base: &Path, export: &Path| {
        let base2 = tempfile::tempdir_in(base).unwrap();
        let state = base.join("state");
        let other = format!("second={}", base.join("second").display());
        let args = ["--state-dir", state.to_str().unwrap(), "--export", &other];
        LimitedServer::start_with(base2, export.to_path_buf(), 1024, &no_cap, &args)
    };
    let base = tempfile::tempdir().unwrap();
    let export = base.path().join("export");
    std::fs::create_dir_all(&export).unwrap();
    std::fs::create_dir_all(base.path().join("second")).unwrap();
    std::fs::write(export.join("f"), b"data").unwrap();
    let srv = start(base.path(), &export);
    let log = srv.stderr_log();
    assert_eq!(log.matches("file handles are volatile").count(), 1, "said once:\n{log}");
    let mut raw = Raw::connect(&srv.addr, "c");
    let root = raw.root("");
    let f = raw.lookup(root, "f");
    assert_eq!(raw.status(&Request::GetAttr { fh: f }), Status::Ok);
    let id = raw.open(f, "", open_flags::READ).unwrap();
    assert_eq!(raw.read(id, 16), b"data");
    drop(raw);
    drop(srv);
    let srv = start(base.path(), &export);
    let mut raw = Raw::connect(&srv.addr, "c");
    assert_eq!(raw.status(&Request::GetAttr { fh: f }), Status::Stale);
    let root = raw.root("");
    let f = raw.lookup(root, "f");
    assert_eq!(raw.status(&Request::GetAttr { fh: f }), Status::Ok, "a fresh lookup works");
}
