//! The shared-memory provider against a real dafsd: direct placement into sealed memfd
//! regions, the process_vm fallback, bad regions, concurrency, and death of either side.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{pattern, TestServer};
use dafs_client::dafs_proto::{Opcode, RemoteRegion, Request, Status};
use dafs_client::{Client, ClientConfig, Error, IoBuf, OpenOptions, Provider};

/// Tests of this binary one at a time: `killed_client_mid_io_is_cleaned_up` counts the
/// shared-memory mappings of this process (`/proc/self/maps`), which every in-process
/// client and server of the other tests adds to while it runs.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A server with its shm socket at a known path; returns (server, "dafs+shm://...").
fn shm_server(extra: &[&str]) -> (TestServer, String, tempfile::TempDir) {
    let sockdir = tempfile::tempdir().unwrap();
    let sock = sockdir.path().join("dafsd.sock");
    let mut args = vec!["--shm-socket", sock.to_str().unwrap()];
    args.extend_from_slice(extra);
    let srv = TestServer::start(&args);
    (srv, format!("dafs+shm://{}", sock.display()), sockdir)
}

fn shm_client(target: &str) -> Client {
    Client::connect(
        target,
        ClientConfig { connect_timeout: Duration::from_secs(10), ..Default::default() },
    )
    .expect("shm connect")
}

#[test]
fn same_host_tcp_target_switches_to_shm_unless_told_not_to() {
    let _maps = one_at_a_time();
    let (srv, _, _d) = shm_server(&[]);
    let c = srv.client_with(|c| c.provider = Provider::Auto).unwrap();
    assert_eq!(c.provider(), "shm");
    let c = srv.client_with(|c| c.provider = Provider::Tcp).unwrap();
    assert_eq!(c.provider(), "tcp");
    let (srv2, _) = (TestServer::start(&["--no-shm"]), ());
    let c = srv2.client_with(|c| c.provider = Provider::Auto).unwrap();
    assert_eq!(c.provider(), "tcp", "no shm offered: stays on tcp");
}

#[test]
fn direct_reads_and_writes_land_in_registered_memory() {
    let _maps = one_at_a_time();
    let (srv, target, _d) = shm_server(&[]);
    let mut c = shm_client(&target);
    assert_eq!(c.provider(), "shm");
    let f = c.open("data", OpenOptions::read_write().create(true)).unwrap();
    let len = 3 << 20;
    let data = pattern(0, len, 7);
    // Write from a registered (memfd) region: the server pwrites straight from it.
    let r = c.alloc_registered(len).unwrap();
    c.region_mut(r).unwrap().copy_from_slice(&data);
    let cg = c.create_cg().unwrap();
    c.submit_write(&f, 0, IoBuf::Region { region: r, offset: 0, len }, cg, 1).unwrap();
    let done = c.wait_one(cg, None).unwrap().unwrap();
    assert_eq!(done.result.unwrap(), len);
    assert_eq!(std::fs::read(srv.dir().join("data")).unwrap(), data);
    // Read into a second region at an offset: exactly the target range changes.
    let r2 = c.alloc_registered(len + 8192).unwrap();
    c.region_mut(r2).unwrap().fill(0xEE);
    c.submit_read(&f, 0, IoBuf::Region { region: r2, offset: 4096, len }, cg, 2).unwrap();
    let done = c.wait_one(cg, None).unwrap().unwrap();
    assert_eq!(done.result.unwrap(), len);
    let m = c.region(r2).unwrap();
    assert!(m[..4096].iter().all(|&b| b == 0xEE), "bytes before the target range untouched");
    assert_eq!(&m[4096..4096 + len], &data[..]);
    assert!(m[4096 + len..].iter().all(|&b| b == 0xEE), "bytes after the target range untouched");
    let st = c.stats();
    assert_eq!(st.off_direct_path, 0);
    assert_eq!(st.transport.vm_registrations, 0);
    // Blocking pread into application memory: process_vm fallback, counted.
    let mut buf = vec![0u8; 1 << 20];
    assert_eq!(c.pread(&f, &mut buf, 1 << 20).unwrap(), 1 << 20);
    assert_eq!(&buf[..], &data[1 << 20..2 << 20]);
    let st = c.stats();
    assert!(
        st.off_direct_path >= 1 && st.transport.vm_registrations >= 1,
        "fallback is visible in stats: {st:?}"
    );
    // And a blocking pwrite from application memory.
    let other = pattern(0, 1 << 20, 9);
    c.pwrite(&f, &other, 0).unwrap();
    assert_eq!(&std::fs::read(srv.dir().join("data")).unwrap()[..1 << 20], &other[..]);
    c.close(f).unwrap();
}

#[test]
fn large_direct_reads_split_over_copy_engines_end_where_the_file_ends() {
    let _maps = one_at_a_time();
    // Three engines: a 2 MiB read is cut into chunks placed by four threads at once.
    let (srv, target, _d) = shm_server(&["--copy-threads", "3"]);
    let len = (1 << 20) + 300 * 1024 + 5;
    let data = pattern(0, len, 3);
    std::fs::write(srv.dir().join("short"), &data).unwrap();
    let mut c = shm_client(&target);
    let f = c.open("short", OpenOptions::read()).unwrap();
    let r = c.alloc_registered(2 << 20).unwrap();
    let cg = c.create_cg().unwrap();
    for offset in [0usize, 4096, 1 << 20, len - 1, len] {
        c.region_mut(r).unwrap().fill(0xEE);
        c.submit_read(
            &f,
            offset as u64,
            IoBuf::Region { region: r, offset: 0, len: 2 << 20 },
            cg,
            1,
        )
        .unwrap();
        let done = c.wait_one(cg, None).unwrap().unwrap();
        let n = done.result.unwrap();
        assert_eq!(n, len - offset, "read at {offset}");
        assert!(done.eof, "a short direct read is end of file");
        let m = c.region(r).unwrap();
        assert_eq!(&m[..n], &data[offset..], "bytes at {offset}");
        assert!(m[n..].iter().all(|&b| b == 0xEE), "nothing placed past the end ({offset})");
    }
}

#[test]
fn each_provider_gets_its_own_inline_threshold() {
    let _maps = one_at_a_time();
    let (srv, _, _d) =
        shm_server(&["--inline-threshold", "4096", "--inline-threshold-shm", "32768"]);
    let c = srv.client_with(|c| c.provider = Provider::Auto).unwrap();
    assert_eq!((c.provider(), c.inline_threshold()), ("shm", 32768));
    let c = srv.client_with(|c| c.provider = Provider::Tcp).unwrap();
    assert_eq!((c.provider(), c.inline_threshold()), ("tcp", 4096));
    // The common setting alone applies to both.
    let (srv, _, _d) = shm_server(&["--inline-threshold", "8192"]);
    let c = srv.client_with(|c| c.provider = Provider::Auto).unwrap();
    assert_eq!((c.provider(), c.inline_threshold()), ("shm", 8192));
    let c = srv.client_with(|c| c.provider = Provider::Tcp).unwrap();
    assert_eq!((c.provider(), c.inline_threshold()), ("tcp", 8192));
}

#[test]
fn bad_keys_offsets_and_lengths_are_refused() {
    let _maps = one_at_a_time();
    let (srv, target, _d) = shm_server(&[]);
    std::fs::write(srv.dir().join("f"), vec![1u8; 1 << 20]).unwrap();
    let mut c = shm_client(&target);
    let f = c.open("f", OpenOptions::read_write()).unwrap();
    let r = c.alloc_registered(64 * 1024).unwrap();
    let key = r.0;
    let read = |c: &mut Client, key: u64, offset: u64, len: u32| {
        let m = c
            .raw_call(&Request::ReadDirect {
                open_id: f.open_id(),
                offset: 0,
                len,
                region: RemoteRegion { key, offset },
            })
            .unwrap();
        dafs_client::dafs_proto::decode_reply(&m, 1 << 22).unwrap().0.status
    };
    let write = |c: &mut Client, key: u64, offset: u64, len: u32| {
        let m = c
            .raw_call(&Request::WriteDirect {
                open_id: f.open_id(),
                offset: 0,
                len,
                stable: false,
                region: RemoteRegion { key, offset },
            })
            .unwrap();
        dafs_client::dafs_proto::decode_reply(&m, 1 << 22).unwrap().0.status
    };
    assert_eq!(read(&mut c, key, 0, 65536), Status::Ok);
    assert_eq!(read(&mut c, key + 1000, 0, 16), Status::BadRegion, "unknown key");
    assert_eq!(read(&mut c, key, 65536 - 8, 16), Status::BadRegion, "runs past the end");
    assert_eq!(read(&mut c, key, u64::MAX - 4, 16), Status::BadRegion, "offset overflow");
    assert_eq!(read(&mut c, key, 70_000, 0), Status::BadRegion, "empty range outside the region");
    assert_eq!(write(&mut c, key, 65535, 2), Status::BadRegion);
    assert_eq!(write(&mut c, key + 1000, 0, 2), Status::BadRegion);
    // A deregistered region is gone for the server too.
    c.unregister(r).unwrap();
    assert_eq!(read(&mut c, key, 0, 16), Status::BadRegion, "deregistered");
    // The file was not modified by the refused writes.
    assert!(std::fs::read(srv.dir().join("f")).unwrap().iter().all(|&b| b == 1));
    // The session still works.
    let mut b = [0u8; 4];
    assert_eq!(c.pread(&f, &mut b, 0).unwrap(), 4);
    let _ = Opcode::Null;
}

#[test]
fn concurrent_shm_clients() {
    let _maps = one_at_a_time();
    let (srv, target, _d) = shm_server(&[]);
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let target = target.clone();
            std::thread::spawn(move || {
                let mut c = shm_client(&target);
                let name = format!("file{t}");
                let f = c.open(&name, OpenOptions::read_write().create(true)).unwrap();
                let r = c.alloc_registered(256 * 1024).unwrap();
                let cg = c.create_cg().unwrap();
                for i in 0..40u64 {
                    let data = pattern(i * 256 * 1024, 256 * 1024, t);
                    c.region_mut(r).unwrap().copy_from_slice(&data);
                    c.submit_write(
                        &f,
                        i * 256 * 1024,
                        IoBuf::Region { region: r, offset: 0, len: 256 * 1024 },
                        cg,
                        i,
                    )
                    .unwrap();
                    assert_eq!(c.wait_one(cg, None).unwrap().unwrap().result.unwrap(), 256 * 1024);
                }
                for i in (0..40u64).rev() {
                    c.submit_read(
                        &f,
                        i * 256 * 1024,
                        IoBuf::Region { region: r, offset: 0, len: 256 * 1024 },
                        cg,
                        i,
                    )
                    .unwrap();
                    assert_eq!(c.wait_one(cg, None).unwrap().unwrap().result.unwrap(), 256 * 1024);
                    assert_eq!(c.region(r).unwrap(), &pattern(i * 256 * 1024, 256 * 1024, t)[..]);
                }
                c.close(f).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for t in 0..4u8 {
        let on_disk = std::fs::read(srv.dir().join(format!("file{t}"))).unwrap();
        assert_eq!(on_disk, pattern(0, 40 * 256 * 1024, t));
    }
}

#[test]
fn server_death_is_reported_promptly() {
    let _maps = one_at_a_time();
    let (mut srv, target, _d) = shm_server(&[]);
    let mut c = shm_client(&target);
    let f = c.open("x", OpenOptions::read_write().create(true)).unwrap();
    c.pwrite(&f, b"abc", 0).unwrap();
    let pid = srv.pid().unwrap() as i32;
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    srv.kill();
    let t = Instant::now();
    let mut b = [0u8; 3];
    let e = c.pread(&f, &mut b, 0).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(3), "error took {:?}", t.elapsed());
    assert!(matches!(e, Error::Transport(_) | Error::Disconnected), "{e:?}");
    assert!(matches!(c.null(), Err(Error::Disconnected)), "stays disconnected");
}

fn server_sessions(srv: &dafs_server::ServerHandle) -> usize {
    srv.sessions_live()
}

fn count_maps(pattern: &str) -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains(pattern))
        .count()
}

#[test]
fn killed_client_mid_io_is_cleaned_up() {
    let _maps = one_at_a_time();
    // Server in this process (so its sessions and mappings can be observed), the client
    // a `dafs get` child process killed in the middle of a large transfer.
    let export = tempfile::tempdir().unwrap();
    let sockdir = tempfile::tempdir().unwrap();
    let sock: PathBuf = sockdir.path().join("s.sock");
    let big = vec![5u8; 256 << 20];
    std::fs::write(export.path().join("big"), &big).unwrap();
    let mut cfg = dafs_server::ServerConfig::new(export.path());
    cfg.listen = "127.0.0.1:0".into();
    cfg.shm_socket = Some(sock.clone());
    // A killed client's session is released when its lease expires (a live client
    // would reconnect and resume it within the lease).
    cfg.lease_secs = 1;
    let srv = dafs_server::start(cfg).unwrap();
    let maps_before = count_maps("dafs-region");
    for round in 0..3 {
        let out = tempfile::NamedTempFile::new().unwrap();
        let mut child = std::process::Command::new(common::dafs_bin())
            .args([
                "-q",
                "get",
                &format!("dafs+shm://{}/big", sock.display()),
                out.path().to_str().unwrap(),
            ])
            .spawn()
            .unwrap();
        // Wait until the transfer is under way, then kill it mid-I/O.
        let t = Instant::now();
        while std::fs::metadata(out.path()).map(|m| m.len()).unwrap_or(0) < (8 << 20)
            && t.elapsed() < Duration::from_secs(20)
        {
            if server_sessions(&srv) == 0 {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(server_sessions(&srv) >= 1, "round {round}: the client had a session");
        let _ = child.kill();
        let _ = child.wait();
        let t = Instant::now();
        while (server_sessions(&srv) > 0
            || count_maps("dafs-region") > maps_before
            || count_maps("dafs-rings") > 0)
            && t.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(server_sessions(&srv), 0, "round {round}: session released");
        assert_eq!(
            count_maps("dafs-region"),
            maps_before,
            "round {round}: client region mappings released"
        );
        assert_eq!(count_maps("dafs-rings"), 0, "round {round}: ring mapping released");
    }
    // Still serving.
    let mut c = Client::connect(&format!("dafs+shm://{}", sock.display()), ClientConfig::default())
        .unwrap();
    assert_eq!(c.stat("big").unwrap().size, big.len() as u64);
    drop(c);
    srv.shutdown();
}

/// A dafsd started without `--shm-socket`, with `XDG_RUNTIME_DIR` and `TMPDIR` given;
/// killed on drop.
struct DefaultShmServer {
    child: std::process::Child,
    socket: PathBuf,
}

impl DefaultShmServer {
    fn start(xdg: &std::path::Path, tmp: &std::path::Path, export: &std::path::Path) -> Self {
        let mut cmd = std::process::Command::new(common::dafsd_bin());
        cmd.arg(export)
            .args(["--listen", "127.0.0.1:0", "--no-admin"])
            .env("XDG_RUNTIME_DIR", xdg)
            .env("TMPDIR", tmp);
        let (child, socket) = spawn_announcing(cmd, "shared memory: dafs+shm://");
        DefaultShmServer { child, socket }
    }
}

/// Start dafsd and read its standard output up to the line that starts with `prefix`:
/// the path that follows it. Kills dafsd and panics if it does not announce one.
fn spawn_announcing(
    mut cmd: std::process::Command,
    prefix: &str,
) -> (std::process::Child, PathBuf) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut found = None;
    for _ in 0..6 {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(p) = line.trim().strip_prefix(prefix) {
            found = Some(PathBuf::from(p));
            break;
        }
    }
    let Some(path) = found else {
        let _ = child.kill();
        panic!("dafsd did not announce {prefix:?}");
    };
    // Keep stdout drained so the server never blocks writing it.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (child, path)
}

impl Drop for DefaultShmServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mode_and_owner(p: &std::path::Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.mode() & 0o7777, m.uid())
}

fn my_uid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

#[test]
fn default_shm_socket_lives_in_a_private_directory_and_squatters_cannot_stop_dafsd() {
    let _maps = one_at_a_time();
    let export = tempfile::tempdir().unwrap();
    let xdg = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // Unsquatted: $XDG_RUNTIME_DIR/dafsd/, created 0700.
    {
        let srv = DefaultShmServer::start(xdg.path(), tmp.path(), export.path());
        let dir = srv.socket.parent().unwrap();
        assert_eq!(dir, xdg.path().join("dafsd"), "socket {:?}", srv.socket);
        assert_eq!(mode_and_owner(dir), (0o700, my_uid()));
        let mut c = shm_client(&format!("dafs+shm://{}", srv.socket.display()));
        assert_eq!(c.provider(), "shm");
        c.null().unwrap();
    }
    // Squatted: the directory's name is a symlink to a directory someone else controls.
    let xdg2 = tempfile::tempdir().unwrap();
    let squat = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(squat.path(), xdg2.path().join("dafsd")).unwrap();
    let srv = DefaultShmServer::start(xdg2.path(), tmp.path(), export.path());
    let dir = srv.socket.parent().unwrap();
    assert!(!srv.socket.starts_with(squat.path()) && dir != xdg2.path().join("dafsd"));
    assert!(dir.starts_with(tmp.path()), "fresh private directory: {:?}", srv.socket);
    assert_eq!(mode_and_owner(dir), (0o700, my_uid()));
    assert_eq!(std::fs::read_dir(squat.path()).unwrap().count(), 0, "nothing put there");
    let mut c = shm_client(&format!("dafs+shm://{}", srv.socket.display()));
    c.null().unwrap();
}

#[test]
fn explicit_shm_socket_in_an_unsafe_place_is_refused_clearly() {
    let _maps = one_at_a_time();
    use std::os::unix::fs::PermissionsExt;
    let start = |sock: &std::path::Path| {
        common::TestServer::try_start(&["--shm-socket", sock.to_str().unwrap()], None, None)
    };
    // A directory anyone may write (no sticky bit): another user could swap the socket.
    let open = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = start(&open.path().join("s.sock")).err().expect("refused");
    assert!(e.contains("writable by other users"), "{e}");
    // Sticky (like /tmp): fine.
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let srv = start(&open.path().join("s.sock")).unwrap();
    drop(srv);
    // A pre-existing symlink is never followed (nor removed).
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, b"keep").unwrap();
    let link = dir.path().join("s.sock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = start(&link).err().expect("refused");
    assert!(e.contains("symlink"), "{e}");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    // A stale socket of another user is not removed.
    let theirs = dir.path().join("theirs.sock");
    drop(std::os::unix::net::UnixListener::bind(&theirs).unwrap());
    if std::os::unix::fs::lchown(&theirs, Some(54_321), None).is_ok() {
        let e = start(&theirs).err().expect("refused");
        assert!(e.contains("refusing to remove"), "{e}");
        assert!(theirs.exists());
    }
}

/// `shm_allow_uids` (TOML; `--shm-allow-uid` on the command line) lets another user's
/// processes use shared memory; a uid not in the list is refused with a clear error on
/// a `dafs+shm://` target, stays on TCP with a TCP target, and is counted.
#[test]
fn shm_allow_uids_admits_listed_users_only() {
    let _maps = one_at_a_time();
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    const ALLOWED: u32 = 54_321;
    const OTHER: u32 = 54_322;
    let dir = tempfile::tempdir().unwrap();
    // Other users may traverse (not list or write) the socket's directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let sock = dir.path().join("s.sock");
    let admin = dir.path().join("admin.sock");
    let conf = dir.path().join("dafsd.toml");
    std::fs::write(&conf, format!("shm_allow_uids = [{ALLOWED}]\n")).unwrap();
    let srv = TestServer::start(&[
        "--shm-socket",
        sock.to_str().unwrap(),
        "--config",
        conf.to_str().unwrap(),
        "--admin-socket",
        admin.to_str().unwrap(),
    ]);
    let ping = |uid: u32, url: &str| {
        let out = std::process::Command::new(common::dafs_bin())
            .args(["ping", url])
            .uid(uid)
            .gid(uid)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let shm_url = format!("dafs+shm://{}/", sock.display());
    let tcp_url = srv.url("/");
    let (ok, text) = ping(my_uid(), &tcp_url);
    assert!(ok && text.contains("over shm"), "dafsd's own uid is always allowed: {text}");
    if my_uid() != 0 {
        eprintln!("not root: cannot run clients as other uids; only the own uid was checked");
        return;
    }
    let (ok, text) = ping(ALLOWED, &shm_url);
    assert!(ok && text.contains("over shm"), "allowed uid over shm: {text}");
    let (ok, text) = ping(ALLOWED, &tcp_url);
    assert!(ok && text.contains("over shm"), "allowed uid switches to shm: {text}");
    let (ok, text) = ping(OTHER, &shm_url);
    assert!(!ok && text.contains("--shm-allow-uid"), "other uid refused clearly: {text}");
    let (ok, text) = ping(OTHER, &tcp_url);
    assert!(ok && text.contains("over tcp"), "other uid stays on tcp: {text}");
    let out = std::process::Command::new(common::dafs_bin())
        .args(["admin", "--socket", admin.to_str().unwrap(), "--json", "stats"])
        .output()
        .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["counters"]["shm_uid_refusals"], 2, "{stats}");
}

/// The admin socket lives in dafsd's private runtime directory too (never a guessable
/// name in a directory others can write, where a local user could squat it or stand in
/// for it), `dafs admin` finds it there, and an explicit path in a directory anyone may
/// write is refused.
#[test]
fn admin_socket_lives_in_the_private_runtime_directory() {
    let _maps = one_at_a_time();
    use std::os::unix::fs::PermissionsExt;
    let export = tempfile::tempdir().unwrap();
    let xdg = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(common::dafsd_bin());
    cmd.arg(export.path())
        .args(["--listen", "127.0.0.1:0", "--no-shm"])
        .env("XDG_RUNTIME_DIR", xdg.path());
    let (mut child, admin) = spawn_announcing(cmd, "admin: ");
    assert_eq!(admin.parent().unwrap(), xdg.path().join("dafsd"), "{admin:?}");
    assert_eq!(mode_and_owner(admin.parent().unwrap()), (0o700, my_uid()));
    let found = std::process::Command::new(common::dafs_bin())
        .args(["admin", "stats"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(found.status.success(), "{}", String::from_utf8_lossy(&found.stderr));
    // An explicit path where other users could replace it: refused.
    let open = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock = open.path().join("admin.sock");
    let e = common::TestServer::try_start(&["--admin-socket", sock.to_str().unwrap()], None, None)
        .err()
        .expect("refused");
    assert!(e.contains("writable by other users"), "{e}");
}
