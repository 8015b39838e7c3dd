//! Sessions that survive failure, against a real dafsd: exactly-once execution across
//! 1,000+ cut connections over TCP and 300+ over each other provider (fault-injecting
//! transport, fixed seeds), reconnection within
//! the lease, lease expiry (BADSESSION, then re-establishing and re-opening by path),
//! fencing through `dafs admin`, server-directed slot targets, limits, access control,
//! per-request credentials and the Prometheus endpoint.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{dafs_bin, pattern, Client, ClientConfig, Provider, TestServer};
use dafs_client::{Error, IoBuf, OpenOptions};
use dafs_proto::{rename_flags, Status};
use dafs_transport::fault::{FaultControl, FaultPlan, FaultyTransport};
use dafs_transport::shm::ShmClient;
use dafs_transport::tcp::TcpClient;
use dafs_transport::ClientTransport;

/// A client whose transport injects faults by `plan` (none during session set-up).
fn faulty_client(
    srv: &TestServer,
    provider: Provider,
    plan: FaultPlan,
    seed: u64,
    cfg: ClientConfig,
) -> (Client, std::sync::Arc<FaultControl>) {
    let inner: Box<dyn ClientTransport> = match provider {
        Provider::Tcp => Box::new(TcpClient::connect(&srv.addr(), Duration::from_secs(5)).unwrap()),
        Provider::Ofi(name) => Box::new(
            dafs_ofi::OfiClient::connect(
                &srv.addr_for(provider),
                Some(&dafs_ofi::provider_for(name)),
                Duration::from_secs(5),
            )
            .unwrap(),
        ),
        _ => {
            Box::new(ShmClient::connect(srv.shm_socket().unwrap(), Duration::from_secs(5)).unwrap())
        }
    };
    let mut t = FaultyTransport::new(inner, FaultPlan::default(), seed);
    let ctl = t.control();
    t.set_plan(plan);
    t.quiet_for(16);
    let c = Client::with_transport(Box::new(t), cfg)
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", srv.stderr_log()));
    (c, ctl)
}

/// The answer of `dafs admin --socket S --json ARGS...`.
fn admin(sock: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(dafs_bin())
        .arg("admin")
        .arg("--socket")
        .arg(sock)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "dafs admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn counter(sock: &Path, name: &str) -> u64 {
    admin(sock, &["stats"])["counters"][name].as_u64().unwrap_or_else(|| panic!("counter {name}"))
}

/// Exactly-once under fire: a mixed workload of creates, inline and direct writes,
/// atomic appends, renames (plain, NOREPLACE, EXCHANGE) and removes while the transport drops, duplicates, delays and
/// cuts. Every operation must succeed (each is executed once however often it is
/// resent), and at the end the export must match a model of what should be there.
/// `connections`: the TCP session's connections (trunking; other providers use one).
/// `cuts`: about how many connection cuts the run makes.
fn exactly_once_under_cut_connections(provider: Provider, connections: u32, cuts: u64) {
    let base = tempfile::tempdir().unwrap();
    let admin_sock = base.path().join("admin.sock");
    let srv = TestServer::start(&["--admin-socket", admin_sock.to_str().unwrap()]);
    let plan = FaultPlan {
        drop_ppm: 8_000,
        cut_after_send_ppm: 25_000,
        cut_before_recv_ppm: 12_000,
        duplicate_ppm: 20_000,
        delay_ppm: 10_000,
    };
    let seed = if provider == Provider::Tcp { 0x5eed_0001 } else { 0x5eed_0002 };
    let cfg = ClientConfig { connections, ..srv.config() };
    let (mut c, ctl) = faulty_client(&srv, provider, plan, seed, cfg);
    if provider == Provider::Tcp {
        assert_eq!(c.connections() as u32, connections);
    }
    let threshold = c.inline_threshold();
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut rng: u64 = seed;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut created = 0u64;
    let mut ops = 0u64;
    let t0 = Instant::now();
    while ctl.counts().cuts < cuts {
        assert!(ops < 200_000, "too few cuts: {:?} after {ops} ops", ctl.counts());
        assert!(
            t0.elapsed() < Duration::from_secs(240),
            "too slow: {:?} after {ops} ops",
            ctl.counts()
        );
        ops += 1;
        let r = next();
        let names: Vec<String> = model.keys().cloned().collect();
        let pick = |k: u64| names[(k % names.len() as u64) as usize].clone();
        let what = if names.len() < 4 { 0 } else { r % 10 };
        let ctx = format!("op {ops} kind {what} (cuts so far {:?})", ctl.counts());
        match what {
            // Exclusive create with initial content (OPEN CREATE|EXCLUSIVE, WRITE, CLOSE).
            0 | 1 => {
                created += 1;
                let name = format!("f{created}");
                let data = pattern(created, (r % 3000) as usize + 1, created as u8);
                let f = c
                    .open(&name, OpenOptions::read_write().create(true).exclusive(true))
                    .unwrap_or_else(|e| panic!("{ctx}: create {name}: {e}"));
                c.pwrite(&f, &data, 0).unwrap_or_else(|e| panic!("{ctx}: write {name}: {e}"));
                c.close(f).unwrap_or_else(|e| panic!("{ctx}: close {name}: {e}"));
                model.insert(name, data);
            }
            // Overwrite a range inline, or directly (above the threshold).
            2 | 3 => {
                let name = pick(r >> 8);
                let len = if what == 2 {
                    (r >> 20) as usize % 2000 + 1
                } else {
                    threshold + 1 + (r >> 20) as usize % 70_000
                };
                let content = model.get_mut(&name).unwrap();
                let off = (r >> 40) as usize % (content.len() + 1);
                let data = pattern(ops, len, (r >> 3) as u8);
                let f = c
                    .open(&name, OpenOptions::read_write())
                    .unwrap_or_else(|e| panic!("{ctx}: open {name}: {e}"));
                let n = c
                    .pwrite(&f, &data, off as u64)
                    .unwrap_or_else(|e| panic!("{ctx}: pwrite {name}: {e}"));
                assert_eq!(n, len, "{ctx}");
                c.close(f).unwrap_or_else(|e| panic!("{ctx}: close {name}: {e}"));
                if content.len() < off + len {
                    content.resize(off + len, 0);
                }
                content[off..off + len].copy_from_slice(&data);
            }
            // Atomic append: the offset the server chose must be the model's end.
            4 | 5 => {
                let name = pick(r >> 8);
                let data = pattern(ops, (r >> 24) as usize % 600 + 1, 7);
                let f = c
                    .open(&name, OpenOptions::write_only().append(true))
                    .unwrap_or_else(|e| panic!("{ctx}: open {name}: {e}"));
                let at =
                    c.append(&f, &data).unwrap_or_else(|e| panic!("{ctx}: append {name}: {e}"));
                c.close(f).unwrap_or_else(|e| panic!("{ctx}: close {name}: {e}"));
                let content = model.get_mut(&name).unwrap();
                assert_eq!(
                    at,
                    content.len() as u64,
                    "{ctx}: append to {name} landed at {at}, model length {}",
                    content.len()
                );
                content.extend_from_slice(&data);
            }
            // Swap two names with RENAME_EXCHANGE: executed twice, it would swap them back.
            6 if (r >> 60) % 3 == 0 => {
                let (a, b) = (pick(r >> 8), pick((r >> 8) + 1));
                c.rename_with_flags(&a, &b, rename_flags::EXCHANGE)
                    .unwrap_or_else(|e| panic!("{ctx}: exchange {a} <-> {b}: {e}"));
                let (va, vb) = (model.remove(&a).unwrap(), model.remove(&b).unwrap());
                model.insert(a, vb);
                model.insert(b, va);
            }
            // Rename to a fresh name (a replayed rename must not fail with ENOENT, nor a
            // replayed NOREPLACE one with EEXIST).
            6 => {
                let from = pick(r >> 8);
                created += 1;
                let to = format!("r{created}");
                let flags = if (r >> 60) % 3 == 1 { rename_flags::NOREPLACE } else { 0 };
                c.rename_with_flags(&from, &to, flags)
                    .unwrap_or_else(|e| panic!("{ctx}: rename {from} -> {to} ({flags}): {e}"));
                let v = model.remove(&from).unwrap();
                model.insert(to, v);
            }
            // Remove (a replayed remove must not fail with ENOENT).
            7 => {
                let name = pick(r >> 8);
                c.remove(&name).unwrap_or_else(|e| panic!("{ctx}: remove {name}: {e}"));
                model.remove(&name);
            }
            // Read back and compare (idempotent: re-executed on retransmission).
            _ => {
                let name = pick(r >> 8);
                let want = &model[&name];
                let f = c
                    .open(&name, OpenOptions::read())
                    .unwrap_or_else(|e| panic!("{ctx}: open {name}: {e}"));
                let mut buf = vec![0u8; want.len()];
                let n =
                    c.pread(&f, &mut buf, 0).unwrap_or_else(|e| panic!("{ctx}: read {name}: {e}"));
                c.close(f).unwrap_or_else(|e| panic!("{ctx}: close {name}: {e}"));
                assert_eq!(n, want.len(), "{ctx}: {name}");
                assert!(buf == *want, "{ctx}: {name} content differs");
            }
        }
    }
    let stats = c.stats();
    let counts = ctl.counts();
    drop(c);
    // The export holds exactly the model, byte for byte.
    let mut on_disk = BTreeMap::new();
    for e in std::fs::read_dir(srv.dir()).unwrap() {
        let e = e.unwrap();
        on_disk
            .insert(e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap());
    }
    assert_eq!(on_disk.keys().collect::<Vec<_>>(), model.keys().collect::<Vec<_>>(), "file names");
    for (k, v) in &model {
        assert!(on_disk[k] == *v, "{k}: content differs from the model");
    }
    assert!(
        counts.cuts >= cuts && counts.duplicated > 0 && counts.delayed > 0 && counts.dropped > 0,
        "{counts:?}"
    );
    // A cut connection of a trunked session is dropped alone (the others carry on);
    // the last one is reconnected.
    assert!(stats.reconnects + stats.connections_lost >= cuts * 9 / 10, "{stats:?}");
    // The server saw retransmissions and answered some from its reply cache.
    let replays = counter(&admin_sock, "replays");
    let binds = counter(&admin_sock, "binds");
    assert!(
        replays > 0 && binds >= stats.reconnects,
        "replays {replays}, binds {binds}, client {stats:?}"
    );
    eprintln!("{provider:?}: {ops} ops, {counts:?}, client reconnects {}, retransmits {}, stale replies {}, server replays {replays}, binds {binds}", stats.reconnects, stats.retransmits, stats.stale_replies);
}

/// Within the lease, a reconnect keeps open files, locks and share reservations.
fn reconnect_keeps_session_state(provider: Provider) {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("held"), pattern(0, 100_000, 1)).unwrap();
    // One connection: its cut is the session's connection breaking (a trunked session
    // would go on over its others).
    let cfg = ClientConfig { connections: 1, ..srv.config() };
    let (mut c, ctl) = faulty_client(&srv, provider, FaultPlan::default(), 1, cfg);
    let f = c.open("held", OpenOptions::read_write().deny_write(true)).unwrap();
    c.lock(&f, 0, 10, true).unwrap();
    let sid = c.session_id();
    ctl.cut();
    // The same open file works after the reconnect (direct and inline).
    let mut buf = vec![0u8; 100_000];
    assert_eq!(c.pread(&f, &mut buf, 0).unwrap(), 100_000);
    assert_eq!(buf, pattern(0, 100_000, 1));
    assert_eq!(c.session_id(), sid, "same session");
    assert_eq!(c.stats().reconnects, 1);
    // Another client still sees the lock and the deny-write reservation.
    let mut other = srv.client_on(Provider::Tcp);
    let g = other.open("held", OpenOptions::read()).unwrap();
    assert!(other.test_lock(&g, 0, 10, true).unwrap().is_some(), "lock kept across the reconnect");
    assert_eq!(
        other.open("held", OpenOptions::write_only()).unwrap_err().status(),
        Some(Status::ShareDenied)
    );
    c.unlock(&f, 0, 10).unwrap();
    c.close(f).unwrap();
    assert!(other.test_lock(&g, 0, 10, true).unwrap().is_none());
}

/// After the lease, the session is gone: the client learns BADSESSION, its locks and
/// reservations were released, and it can re-establish and re-open by path.
fn lease_expiry_releases_state(provider: Provider) {
    let srv = TestServer::start(&["--lease-secs", "1"]);
    std::fs::write(srv.dir().join("leased"), b"0123456789").unwrap();
    // One connection: its cut is the session's connection breaking (a trunked session
    // would go on over its others).
    let cfg = ClientConfig { connections: 1, ..srv.config() };
    let (mut c, ctl) = faulty_client(&srv, provider, FaultPlan::default(), 2, cfg);
    let mut f = c.open("leased", OpenOptions::read_write().deny_write(true)).unwrap();
    c.lock(&f, 0, 0, true).unwrap();
    f.pos = 4;
    ctl.cut();
    let mut other = srv.client_on(Provider::Tcp);
    // While parked (within the lease) the reservation still holds.
    assert_eq!(
        other.open("leased", OpenOptions::write_only()).unwrap_err().status(),
        Some(Status::ShareDenied)
    );
    // After the lease the server has released everything.
    let t = Instant::now();
    loop {
        match other.open("leased", OpenOptions::write_only()) {
            Ok(g) => {
                assert!(
                    other.test_lock(&g, 0, 0, true).unwrap().is_none(),
                    "lock released with the session"
                );
                other.close(g).unwrap();
                break;
            }
            Err(e) if t.elapsed() < Duration::from_secs(10) => {
                assert_eq!(e.status(), Some(Status::ShareDenied));
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("lease never expired: {e}"),
        }
    }
    assert!(
        t.elapsed() >= Duration::from_millis(700),
        "released before the lease ran out ({:?})",
        t.elapsed()
    );
    // The client finds out on its next call.
    let mut buf = [0u8; 4];
    let e = c.pread(&f, &mut buf, 0).unwrap_err();
    assert_eq!(e.status(), Some(Status::BadSession), "{e}");
    assert_eq!(c.session_lost(), Some(Status::BadSession));
    assert_eq!(
        c.stat("leased").unwrap_err().status(),
        Some(Status::BadSession),
        "every call says so"
    );
    // The documented way back: a new session, files re-opened by path.
    c.reestablish().unwrap();
    let g = c.reopen(&f).unwrap();
    assert_eq!(g.pos, 4);
    let mut buf = [0u8; 6];
    assert_eq!(c.pread(&g, &mut buf, 4).unwrap(), 6);
    assert_eq!(&buf, b"456789");
    c.close(g).unwrap();
}

for_each_provider!(
    reconnect_keeps_session_state,
    lease_expiry_releases_state,
    fsynced_records_survive_server_restarts
);

/// On `ofi+shm` this failed deterministically (seed 0x5eed_0002: a request timed out at
/// operation 1040-1042, after 145 cuts): a READ_DIRECT and its injected duplicate
/// arrived on one connection, the server answered the first and re-executed the second
/// (reads are idempotent), and the second RMA write landed after the client had taken
/// the reply and withdrawn its region. libfabric 1.17's `shm` drops an RMA to a closed
/// key at the target without telling the initiator, so it never completed and every later
/// RMA of the connection queued behind it. A copy arriving on the connection that already
/// carried its original's reply is now dropped (see `Session::answered_here`).
///
/// The replay logic under test (slots, sequence ids, the reply cache, re-binding) sits
/// above the transport: the full 1,000 cuts run over TCP; the other providers and the
/// trunked session, whose own part is how a connection is cut and re-made and how direct
/// transfers are placed, run 300, still about 30 cuts per kind of operation (1,000 on
/// each repeated that work).
mod exactly_once {
    use super::Provider;
    #[test]
    fn tcp() {
        super::exactly_once_under_cut_connections(Provider::Tcp, 1, 1000)
    }
    /// One session over three connections (trunking): cuts drop single members, which
    /// the client replaces with trunking binds while requests are resent on the others.
    #[test]
    fn tcp_trunked() {
        super::exactly_once_under_cut_connections(Provider::Tcp, 3, 300)
    }
    #[test]
    fn shm() {
        super::exactly_once_under_cut_connections(Provider::Auto, 1, 300)
    }
    #[test]
    fn ofi_tcp() {
        super::exactly_once_under_cut_connections(Provider::Ofi("tcp"), 1, 300)
    }
    #[test]
    fn ofi_shm() {
        super::exactly_once_under_cut_connections(Provider::Ofi("shm"), 1, 300)
    }
}

#[test]
fn fencing_and_admin_sessions() {
    let base = tempfile::tempdir().unwrap();
    let sock = base.path().join("admin.sock");
    let srv = TestServer::start(&["--admin-socket", sock.to_str().unwrap()]);
    let mut a = srv.client_with(|c| c.client_id = "tenant-a:1".into()).unwrap();
    let f = a.open("x", OpenOptions::read_write().create(true)).unwrap();
    let mut b = srv.client_with(|c| c.client_id = "tenant-b:1".into()).unwrap();
    b.null().unwrap();
    let list = admin(&sock, &["sessions"]);
    let list = list.as_array().unwrap();
    let sa = list.iter().find(|s| s["client"] == "tenant-a:1").expect("tenant-a listed");
    assert_eq!(sa["state"], "bound");
    assert_eq!(sa["open_files"], 1);
    assert!(sa["slots"].as_u64().unwrap() >= 1);
    // Human-readable listing works too.
    let out = Command::new(dafs_bin())
        .args(["admin", "--socket", sock.to_str().unwrap(), "sessions"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("tenant-a:1"));
    // Fence tenant-a (prefix): its session ends, its requests are refused.
    let r = admin(&sock, &["fence", "tenant-a:*"]);
    assert_eq!(r["sessions"], 1);
    let e = a.pwrite(&f, b"data", 0).unwrap_err();
    assert_eq!(e.status(), Some(Status::Fenced), "{e}");
    assert_eq!(a.session_lost(), Some(Status::Fenced));
    let e = srv
        .client_with(|c| c.client_id = "tenant-a:2".into())
        .err()
        .expect("a fenced client cannot connect");
    assert_eq!(e.status(), Some(Status::Fenced));
    // Other clients are unaffected.
    b.null().unwrap();
    assert!(counter(&sock, "fenced_refusals") >= 2);
    assert_eq!(admin(&sock, &["fenced"])[0], "tenant-a:*");
    // Unfence: a new session works.
    admin(&sock, &["unfence", "tenant-a:*"]);
    let mut a2 = srv.client_with(|c| c.client_id = "tenant-a:3".into()).unwrap();
    a2.null().unwrap();
    assert_eq!(
        a.reestablish().map(|_| ()).err().map(|e| e.to_string()),
        None,
        "re-establish after unfence"
    );
    // Unknown commands and sessions are clear errors (exit 1).
    let out = Command::new(dafs_bin())
        .args(["admin", "--socket", sock.to_str().unwrap(), "kill", "1234"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such session"));
}

#[test]
fn server_directed_slot_target() {
    let base = tempfile::tempdir().unwrap();
    let sock = base.path().join("admin.sock");
    let srv = TestServer::start(&["--admin-socket", sock.to_str().unwrap(), "--slots", "8"]);
    let mut c = srv
        .client_with(|c| {
            c.slots = 8;
            c.provider = Provider::Tcp;
        })
        .unwrap();
    std::fs::write(srv.dir().join("f"), vec![1u8; 4096]).unwrap();
    let f = c.open("f", OpenOptions::read()).unwrap();
    let id = format!("{:016x}", c.session_id());
    assert_eq!(admin(&sock, &["slots", &id, "2"])["target_highest"], 1);
    c.null().unwrap(); // the next reply carries the new target
    let cg = c.create_cg().unwrap();
    // Submitting never polls for replies while a slot is free, so the number in flight
    // shows how many slots the client allows itself.
    let mut max_in_flight = 0;
    for _ in 0..50 {
        match c.submit_read(&f, 0, IoBuf::Vec(vec![0; 512]), cg, 0) {
            Ok(_) | Err(Error::WouldBlock) => {}
            Err(e) => panic!("{e}"),
        }
        max_in_flight = max_in_flight.max(c.outstanding(cg));
    }
    assert!(
        max_in_flight <= 2,
        "the client follows the server's target: {max_in_flight} in flight"
    );
    c.wait_all(cg).unwrap();
    // Grow back.
    admin(&sock, &["slots", &id, "8"]);
    c.null().unwrap();
    let mut max_in_flight = 0;
    for _ in 0..8 {
        c.submit_read(&f, 0, IoBuf::Vec(vec![0; 512]), cg, 0).unwrap();
        max_in_flight = max_in_flight.max(c.outstanding(cg));
    }
    assert_eq!(max_in_flight, 8, "grown again");
    c.wait_all(cg).unwrap();
}

#[test]
fn limits_are_enforced_with_clear_statuses() {
    let base = tempfile::tempdir().unwrap();
    let sock = base.path().join("admin.sock");
    let srv = TestServer::start(&[
        "--admin-socket",
        sock.to_str().unwrap(),
        "--max-connections-per-client",
        "2",
        "--max-open-files",
        "3",
        "--slots",
        "4",
    ]);
    // Connections (sessions) per client id.
    let c1 = srv.client_with(|c| c.client_id = "same:1".into()).unwrap();
    let c2 = srv.client_with(|c| c.client_id = "same:1".into()).unwrap();
    let e =
        srv.client_with(|c| c.client_id = "same:1".into()).err().expect("third connection refused");
    assert_eq!(e.status(), Some(Status::Limit));
    drop((c1, c2));
    // Open files per session.
    let mut c = srv.client();
    let mut files = vec![];
    for i in 0..3 {
        files.push(c.open(&format!("o{i}"), OpenOptions::read_write().create(true)).unwrap());
    }
    assert_eq!(
        c.open("o3", OpenOptions::read_write().create(true)).unwrap_err().status(),
        Some(Status::Limit)
    );
    // Slots: the grant is capped by the server.
    let c4 = srv.client_with(|c| c.slots = 64).unwrap();
    assert_eq!(c4.slots(), 4);
    // The reply cache stays within slots x per-slot bound.
    for f in files {
        c.close(f).unwrap();
    }
    for s in admin(&sock, &["sessions"]).as_array().unwrap() {
        assert!(s["reply_cache_bytes"].as_u64().unwrap() <= 4 * 4096, "{s}");
    }
    assert!(counter(&sock, "limit_refusals") >= 2);
    // Configuration errors are clear.
    let err = TestServer::try_start(&["--reply-cache-slot-bytes", "10"], None, None).err().unwrap();
    assert!(err.contains("reply_cache_slot_bytes"), "{err}");
}

#[test]
fn export_client_rules() {
    let srv = TestServer::start(&["--allow-client", "trusted-*"]);
    let e = srv.client_with(|c| c.client_id = "stranger:1".into()).err().expect("refused");
    assert_eq!(e.status(), Some(Status::Access));
    let mut ok = srv.client_with(|c| c.client_id = "trusted-1:1".into()).unwrap();
    ok.null().unwrap();
}

#[test]
fn asserted_credentials_are_enforced_by_the_kernel() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (dafsd switches file-system ids per request)");
        return;
    }
    let srv = TestServer::start(&["--identity", "asserted"]);
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::fs::set_permissions(srv.dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(srv.dir().join("root-only"), b"secret").unwrap();
    std::fs::set_permissions(srv.dir().join("root-only"), std::fs::Permissions::from_mode(0o600))
        .unwrap();
    let mut c = srv.client();
    c.set_cred(1000, 1000, &[]).unwrap();
    assert_eq!(
        c.open("root-only", OpenOptions::read()).unwrap_err().status(),
        Some(Status::Access)
    );
    let f = c.create("mine").unwrap();
    c.close(f).unwrap();
    let md = std::fs::metadata(srv.dir().join("mine")).unwrap();
    assert_eq!((md.uid(), md.gid()), (1000, 1000), "created as the asserted user");
    assert!(c.remove("root-only").is_ok(), "the directory is 0777: removing is allowed");
    // uid 0 is squashed to nobody by default.
    std::fs::write(srv.dir().join("root-only2"), b"secret").unwrap();
    std::fs::set_permissions(srv.dir().join("root-only2"), std::fs::Permissions::from_mode(0o600))
        .unwrap();
    c.set_cred(0, 0, &[]).unwrap();
    assert_eq!(
        c.open("root-only2", OpenOptions::read()).unwrap_err().status(),
        Some(Status::Access)
    );
    // A server in the default mode refuses SET_CRED.
    let plain = TestServer::start(&[]);
    let mut p = plain.client();
    assert_eq!(p.set_cred(1000, 1000, &[]).unwrap_err().status(), Some(Status::NotSupp));
}

#[test]
fn prometheus_endpoint() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let srv = TestServer::start(&["--metrics-listen", &addr]);
    let mut c = srv.client();
    c.null().unwrap();
    let get = |path: &str| -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let body = get("/metrics");
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    for name in [
        "dafs_replays_total",
        "dafs_binds_total",
        "dafs_fenced_refusals_total",
        "dafs_limit_refusals_total",
        "dafs_sessions_live 1",
        "# TYPE dafs_requests_total counter",
    ] {
        assert!(body.contains(name), "{name} missing:\n{body}");
    }
    assert!(get("/other").starts_with("HTTP/1.1 404"));
}

#[test]
fn reconnect_off_fails_fast() {
    let srv = TestServer::start(&[]);
    let mut cfg = srv.config();
    cfg.reconnect = false;
    let (mut c, ctl) = faulty_client(&srv, Provider::Tcp, FaultPlan::default(), 3, cfg);
    ctl.cut();
    assert!(c.null().is_err());
    assert_eq!(c.stats().reconnects, 0);
}

#[test]
fn a_dead_server_fails_fast_even_with_reconnect_on() {
    let mut srv = TestServer::start(&[]);
    let mut c = srv.client_tcp();
    srv.kill();
    let t = Instant::now();
    assert!(c.null().is_err());
    assert!(t.elapsed() < Duration::from_secs(3), "gave up in {:?}", t.elapsed());
}

#[test]
fn limits_and_rules_from_the_toml_config() {
    let base = tempfile::tempdir().unwrap();
    let guarded = base.path().join("guarded");
    std::fs::create_dir(&guarded).unwrap();
    let cfg = base.path().join("dafsd.toml");
    std::fs::write(
        &cfg,
        format!(
            "lease_secs = 0\nmax_connections_per_client = 1\nreply_cache_slot_bytes = 2048\nmax_client_memory = 16777216\n\
             [[exports]]\nname = \"guarded\"\npath = \"{}\"\nclients = [\"ops-*\"]\n",
            guarded.display()
        ),
    )
    .unwrap();
    let srv = TestServer::start(&["--config", cfg.to_str().unwrap()]);
    // One connection per client: the automatic switch to shared memory still works (the
    // TCP session ends before the shared-memory one starts).
    let c1 = srv.client_with(|c| c.client_id = "ops-1:1".into()).unwrap();
    assert_eq!(c1.provider(), "shm");
    assert_eq!(
        srv.client_with(|c| c.client_id = "ops-1:1".into()).err().unwrap().status(),
        Some(Status::Limit)
    );
    drop(c1);
    // The default export admits anyone; the guarded one only ops-*.
    let mut g = srv
        .client_with(|c| {
            c.client_id = "ops-2:1".into();
            c.export = "guarded".into();
        })
        .unwrap();
    g.null().unwrap();
    let e = srv
        .client_with(|c| {
            c.client_id = "dev-1:1".into();
            c.export = "guarded".into();
        })
        .err()
        .unwrap();
    assert_eq!(e.status(), Some(Status::Access));
    // Unknown keys are refused with a clear message.
    std::fs::write(&cfg, "lease_second = 5\n").unwrap();
    let err =
        TestServer::try_start(&["--config", cfg.to_str().unwrap()], None, None).err().unwrap();
    assert!(err.contains("lease_second"), "{err}");
}

#[test]
fn connections_beyond_the_limit_are_closed_at_accept() {
    use std::io::Read;
    let srv = TestServer::start(&["--max-connections", "2"]);
    // One connection each: a trunked session's every connection counts against the limit.
    let one = |c: &mut ClientConfig| {
        c.provider = Provider::Tcp;
        c.connections = 1;
    };
    let mut a = srv.client_with(one).unwrap();
    let mut b = srv.client_with(one).unwrap();
    let mut third = std::net::TcpStream::connect(srv.addr()).unwrap();
    third.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(third.read(&mut buf).unwrap_or(0), 0, "closed without a byte");
    a.null().unwrap();
    b.null().unwrap();
    drop(a);
    // A slot frees up once a connection ends.
    let t = Instant::now();
    loop {
        match srv.client_with(|c| c.provider = Provider::Tcp) {
            Ok(mut c) => {
                c.null().unwrap();
                break;
            }
            Err(e) => assert!(t.elapsed() < Duration::from_secs(5), "{e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 17, item 1 (library half): records written and fsynced (COMMIT) into several
/// files while the server is killed with SIGKILL and restarted 20 times at random
/// moments. The application does what the adapters do: after a lost session it
/// re-establishes and re-opens a file when a call on it fails. Every record whose write
/// and fsync both succeeded must be on the export byte for byte; in particular a file
/// opened in a lost session must never write into whatever the new session opened under
/// the same open id.
fn fsynced_records_survive_server_restarts(provider: Provider) {
    use common::restart::RestartableServer;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const FILES: usize = 4;
    const RESTARTS: u32 = 20;
    let mut srv = RestartableServer::start(&[]);
    let addr = srv.addr_for(provider);
    let dir = srv.dir();
    // Connected before the first kill (a connect that races it fails, as it should).
    let cfg =
        ClientConfig { provider, connect_timeout: Duration::from_secs(5), ..Default::default() };
    let mut c = Client::connect(&addr, cfg).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let killer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
            for _ in 0..RESTARTS {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                std::thread::sleep(Duration::from_millis(30 + rng % 400));
                srv.restart();
            }
            stop.store(true, Ordering::SeqCst);
            srv
        })
    };
    let threshold = c.inline_threshold();
    let name = |k: usize| format!("log{k}");
    let open = |c: &mut Client, k: usize| c.open(&name(k), OpenOptions::read_write().create(true));
    // Opened in the loop, which survives a restart at any moment: the first may come
    // before the initial opens are done (sooner over a provider slower to connect).
    let mut files: Vec<Option<dafs_client::File>> = (0..FILES).map(|_| None).collect();
    // Record r of file k: every 16th goes direct (above the inline threshold).
    let slot_bytes = (threshold + 4096) as u64;
    let record = |k: usize, r: u64| {
        let len = if r % 16 == 15 { threshold + 4096 } else { 1000 };
        pattern(r * slot_bytes, len, k as u8 * 16 + 1)
    };
    let mut next_rec = [0u64; FILES];
    let mut committed = 0u64;
    let mut failures = 0u64;
    let mut rng: u64 = 0x1234_5678;
    let t0 = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        assert!(t0.elapsed() < Duration::from_secs(90), "restarts took too long");
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let k = (rng % FILES as u64) as usize;
        let r = next_rec[k];
        let data = record(k, r);
        let res = match &files[k] {
            Some(f) => c.pwrite(f, &data, r * slot_bytes).and_then(|_| c.fsync(f)),
            None => open(&mut c, k).map(|f| files[k] = Some(f)).and(Err(Error::WouldBlock)),
        };
        match res {
            Ok(()) => {
                next_rec[k] += 1;
                committed += 1;
            }
            // Reopening succeeded: write the record on the next round.
            Err(Error::WouldBlock) => {}
            Err(_) => {
                failures += 1;
                if c.session_lost().is_some() || c.null().is_err() {
                    if c.reestablish().is_err() {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                } else {
                    // The session works but this file failed: open it again.
                    files[k] = None;
                }
            }
        }
    }
    let srv = killer.join().unwrap();
    assert_eq!(srv.restarts(), RESTARTS);
    assert!(committed > 40 && failures > 0, "committed {committed}, failures {failures}");
    for (k, &records) in next_rec.iter().enumerate() {
        let got = std::fs::read(dir.join(name(k))).unwrap();
        for r in 0..records {
            let want = record(k, r);
            let at = (r * slot_bytes) as usize;
            assert!(
                got.len() >= at + want.len() && got[at..at + want.len()] == want[..],
                "file {k} record {r} (of {records}) fsynced but not on the export"
            );
        }
    }
}
