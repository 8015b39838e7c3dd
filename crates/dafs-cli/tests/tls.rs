//! TLS on the TCP provider against a real `dafsd`: every kind of I/O over TLS, the
//! refusals (wrong CA, wrong name, plaintext peer on either side, mutual TLS without or
//! with a foreign client certificate), the `[tls]` configuration table, and the `dafs`
//! command line over `dafs+tls://`. Certificates are generated per run (common::tls).

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::tls::{strs, Pki, TlsClientOptions};
use common::{dafs_bin, pattern, Client, ClientConfig, Provider, TestServer};
use dafs_client::{BatchCompletion, BatchIoDesc, Error, IoBuf, OpenOptions};
use dafs_transport::TransportError;

fn tls_server(pki: &Pki) -> TestServer {
    TestServer::start(&strs(&pki.server_args()))
}

fn cfg_with(srv: &TestServer, tls: TlsClientOptions) -> ClientConfig {
    ClientConfig { provider: Provider::Tcp, tls: Some(tls), ..srv.config() }
}

fn tls_client(srv: &TestServer, tls: TlsClientOptions) -> Client {
    let c = srv.connect(cfg_with(srv, tls)).unwrap_or_else(|e| {
        panic!("TLS connect to {}: {e}\nstderr:\n{}", srv.addr(), srv.stderr_log())
    });
    assert_eq!(c.provider(), "tcp+tls");
    c
}

/// The error of a connect that must fail.
fn connect_err(srv: &TestServer, cfg: ClientConfig) -> Error {
    match srv.connect(cfg) {
        Ok(c) => panic!("connect succeeded over {}", c.provider()),
        Err(e) => e,
    }
}

fn is_tls_err(e: &Error) -> bool {
    matches!(e, Error::Transport(TransportError::Tls(_)))
}

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

#[test]
fn every_kind_of_io_over_tls() {
    let pki = Pki::generate();
    let srv = tls_server(&pki);
    let mut c = tls_client(&srv, pki.client_options());
    let thr = c.inline_threshold();

    // Inline write and read.
    let small = pattern(0, 1000, 1);
    let f = c.open("small", OpenOptions::read_write().create(true)).unwrap();
    assert_eq!(c.pwrite(&f, &small, 0).unwrap(), small.len());
    let mut back = vec![0u8; small.len()];
    assert_eq!(c.pread(&f, &mut back, 0).unwrap(), small.len());
    assert_eq!(back, small);
    c.close(f).unwrap();
    assert_eq!(std::fs::read(srv.dir().join("small")).unwrap(), small);

    // Direct write and read of 4 MiB through registered memory, checksummed.
    const BIG: usize = 4 << 20;
    assert!(BIG > thr);
    let data = pattern(0, BIG, 7);
    let f = c.open("big", OpenOptions::read_write().create(true)).unwrap();
    let w = c.alloc_registered(BIG).unwrap();
    c.region_mut(w).unwrap().copy_from_slice(&data);
    let cg = c.create_cg().unwrap();
    c.submit_write(&f, 0, IoBuf::Region { region: w, offset: 0, len: BIG }, cg, 1).unwrap();
    let done = c.wait_one(cg, Some(Duration::from_secs(30))).unwrap().expect("write completes");
    assert_eq!(done.result.unwrap(), BIG);
    let on_disk = std::fs::read(srv.dir().join("big")).unwrap();
    assert_eq!(fnv(&on_disk), fnv(&data), "direct write content");
    let r = c.alloc_registered(BIG).unwrap();
    c.submit_read(&f, 0, IoBuf::Region { region: r, offset: 0, len: BIG }, cg, 2).unwrap();
    let done = c.wait_one(cg, Some(Duration::from_secs(30))).unwrap().expect("read completes");
    assert_eq!(done.result.unwrap(), BIG);
    assert_eq!(fnv(c.region(r).unwrap()), fnv(&data), "direct read content");
    let st = c.stats();
    assert!(st.direct_reads >= 1 && st.direct_writes >= 1, "{st:?}");
    assert!(
        st.transport.placed_bytes >= BIG as u64 && st.transport.pulled_bytes >= BIG as u64,
        "{:?}",
        st.transport
    );

    // Many large transfers in flight at once: the server's TLS output backlog and
    // flushing under backpressure (reads), and pulls interleaved with replies (writes).
    let regions: Vec<_> = (0..6).map(|_| c.alloc_registered(BIG).unwrap()).collect();
    for (i, reg) in regions.iter().enumerate() {
        c.submit_read(
            &f,
            0,
            IoBuf::Region { region: *reg, offset: 0, len: BIG },
            cg,
            100 + i as u64,
        )
        .unwrap();
    }
    let done = c.wait_all(cg).unwrap();
    assert_eq!(done.len(), regions.len());
    for d in &done {
        assert_eq!(*d.result.as_ref().unwrap(), BIG);
    }
    for reg in &regions {
        assert_eq!(fnv(c.region(*reg).unwrap()), fnv(&data));
    }
    for (i, reg) in regions.iter().enumerate() {
        c.submit_write(
            &f,
            (i * BIG) as u64,
            IoBuf::Region { region: *reg, offset: 0, len: BIG },
            cg,
            200 + i as u64,
        )
        .unwrap();
    }
    let done = c.wait_all(cg).unwrap();
    assert!(done.iter().all(|d| *d.result.as_ref().unwrap() == BIG));
    let on_disk = std::fs::read(srv.dir().join("big")).unwrap();
    assert_eq!(on_disk.len(), regions.len() * BIG);
    for i in 0..regions.len() {
        assert_eq!(fnv(&on_disk[i * BIG..(i + 1) * BIG]), fnv(&data), "chunk {i}");
    }

    // A batch: gather reads and a scattered write.
    let b = c.alloc_registered(256 * 1024).unwrap();
    let ios = vec![
        BatchIoDesc {
            write: false,
            file: vec![(0, 4096), (1_000_000, 60_000)],
            mem: vec![(b, 0, 64_096)],
            user_data: 1,
        },
        BatchIoDesc {
            write: false,
            file: vec![(3_000_000, 100_000)],
            mem: vec![(b, 100_000, 100_000)],
            user_data: 2,
        },
    ];
    c.submit_batch(&f, ios, cg, 0, BatchCompletion::PerIo).unwrap();
    let mut done = c.wait_all(cg).unwrap();
    done.sort_by_key(|d| d.user_data);
    assert_eq!(
        done.iter().map(|d| *d.result.as_ref().unwrap()).collect::<Vec<_>>(),
        vec![64_096, 100_000]
    );
    let m = c.region(b).unwrap().to_vec();
    assert_eq!(&m[..4096], &data[..4096]);
    assert_eq!(&m[4096..64_096], &data[1_000_000..1_060_000]);
    assert_eq!(&m[100_000..200_000], &data[3_000_000..3_100_000]);
    c.close(f).unwrap();

    // Metadata: mkdir, readdir, rename, stat, remove.
    c.mkdir("d", 0o755).unwrap();
    for i in 0..50 {
        c.create_and_write(&format!("d/f{i:02}"), &pattern(i, 10, 3), 0o644).unwrap();
    }
    let mut names: Vec<String> = c
        .readdir("d")
        .unwrap()
        .iter()
        .map(|e| e.name_lossy())
        .filter(|n| n != "." && n != "..")
        .collect();
    names.sort();
    assert_eq!(names.len(), 50);
    assert_eq!(names[0], "f00");
    c.rename("d/f00", "d/g00").unwrap();
    assert_eq!(c.stat("d/g00").unwrap().size, 10);
    c.remove("d/g00").unwrap();
    assert!(c.stat("d/g00").is_err());
}

#[test]
fn wrong_ca_is_a_handshake_error() {
    let pki = Pki::generate();
    let srv = tls_server(&pki);
    let e = connect_err(
        &srv,
        cfg_with(&srv, TlsClientOptions { ca_file: Some(pki.other_ca()), ..Default::default() }),
    );
    assert!(is_tls_err(&e), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("handshake") && msg.contains("certificate"), "{msg}");
    // The server is unharmed.
    tls_client(&srv, pki.client_options()).statfs().unwrap();
}

#[test]
fn wrong_server_name_is_refused() {
    let pki = Pki::generate();
    let srv = tls_server(&pki);
    let opts = TlsClientOptions {
        server_name: Some("not-this-server.example".into()),
        ..pki.client_options()
    };
    let e = connect_err(&srv, cfg_with(&srv, opts));
    assert!(is_tls_err(&e), "{e:?}");
    assert!(e.to_string().contains("certificate"), "{e}");
    // The certificate names localhost too: overriding with it works.
    let opts = TlsClientOptions { server_name: Some("localhost".into()), ..pki.client_options() };
    tls_client(&srv, opts).statfs().unwrap();
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn plaintext_client_is_refused_and_the_server_keeps_serving() {
    let pki = Pki::generate();
    let srv = tls_server(&pki);
    let pid = srv.pid().unwrap();
    // Warm up (the first TLS client), then count descriptors.
    tls_client(&srv, pki.client_options()).statfs().unwrap();
    let before = open_fds(pid);
    for _ in 0..20 {
        let e = connect_err(&srv, ClientConfig { provider: Provider::Tcp, ..srv.config() });
        assert!(matches!(e, Error::Transport(_)), "{e:?}");
        assert!(e.to_string().contains("TLS"), "the error says the server wants TLS: {e}");
    }
    // Also with Provider::Auto: the plaintext session never starts, so there is no
    // shared-memory offer to switch to.
    let e = connect_err(&srv, srv.config());
    assert!(e.to_string().contains("TLS"), "{e}");
    // Every refused connection was closed by the server.
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_fds(pid) > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        open_fds(pid) <= before,
        "server descriptors: {} before, {} after",
        before,
        open_fds(pid)
    );
    let mut c = tls_client(&srv, pki.client_options());
    c.create_and_write("after", b"still serving", 0o644).unwrap();
    assert_eq!(std::fs::read(srv.dir().join("after")).unwrap(), b"still serving");
    assert!(!srv.stderr_log().contains("panicked"), "{}", srv.stderr_log());
}

#[test]
fn tls_client_to_plaintext_server_fails_cleanly() {
    let pki = Pki::generate();
    let srv = TestServer::start(&[]);
    let e = connect_err(&srv, cfg_with(&srv, pki.client_options()));
    assert!(is_tls_err(&e), "{e:?}");
    assert!(e.to_string().contains("TLS"), "{e}");
    // Plaintext clients still work.
    srv.client_tcp().statfs().unwrap();
}

#[test]
fn mutual_tls() {
    let pki = Pki::generate();
    let srv = TestServer::start(&strs(&pki.server_args_mtls()));
    assert!(srv.shm_socket().is_none());
    // No client certificate: refused (TLS 1.3 reports it after the client's side of the
    // handshake, so it may surface on the first request).
    let e = connect_err(&srv, cfg_with(&srv, pki.client_options()));
    assert!(is_tls_err(&e), "{e:?}");
    assert!(e.to_string().contains("requires a client certificate"), "{e}");
    // A certificate from a CA the server does not trust: refused.
    let stranger = TlsClientOptions {
        cert_file: Some(pki.path("other-client.pem")),
        key_file: Some(pki.path("other-client.key")),
        ..pki.client_options()
    };
    let e = connect_err(&srv, cfg_with(&srv, stranger));
    assert!(is_tls_err(&e), "{e:?}");
    assert!(e.to_string().contains("refused our certificate"), "{e}");
    // The right certificate: works, and Provider::Auto stays on TLS (no shm offered).
    let mut c = tls_client(&srv, pki.client_options_mtls());
    c.create_and_write("m", b"mutual", 0o644).unwrap();
    let c2 = srv
        .connect(ClientConfig {
            provider: Provider::Auto,
            tls: Some(pki.client_options_mtls()),
            ..srv.config()
        })
        .unwrap();
    assert_eq!(c2.provider(), "tcp+tls");
}

#[test]
fn mutual_tls_refuses_an_explicit_shm_socket() {
    let pki = Pki::generate();
    let mut args = pki.server_args();
    args.extend(["--tls-client-ca".into(), pki.ca().display().to_string()]);
    // The harness adds --shm-socket: an explicit shared-memory socket would bypass
    // client certificates, so dafsd refuses to start.
    let e = TestServer::try_start(&strs(&args), None, None).err().expect("dafsd must refuse");
    assert!(e.contains("shared-memory"), "{e}");
}

#[test]
fn auto_provider_may_switch_to_shm_after_tls_on_the_same_host() {
    let pki = Pki::generate();
    let srv = tls_server(&pki);
    let c = srv
        .connect(ClientConfig {
            provider: Provider::Auto,
            tls: Some(pki.client_options()),
            ..srv.config()
        })
        .unwrap();
    assert_eq!(c.provider(), "shm");
    // URL form selects TLS with the options given.
    let cfg =
        ClientConfig { provider: Provider::Tcp, tls: Some(pki.client_options()), ..srv.config() };
    let mut c = Client::connect_url(&format!("dafs+tls://{}/x", srv.addr()), cfg).unwrap();
    assert_eq!(c.provider(), "tcp+tls");
    c.statfs().unwrap();
}

#[test]
fn tls_from_the_config_file() {
    let pki = Pki::generate();
    let conf = pki.path("dafsd.toml");
    std::fs::write(
        &conf,
        format!("[tls]\ncert = {:?}\nkey = {:?}\n", pki.path("server.pem"), pki.path("server.key")),
    )
    .unwrap();
    let srv = TestServer::start(&["--config", conf.to_str().unwrap()]);
    tls_client(&srv, pki.client_options()).statfs().unwrap();
    let e = connect_err(&srv, ClientConfig { provider: Provider::Tcp, ..srv.config() });
    assert!(e.to_string().contains("TLS"), "{e}");
}

fn dafs(args: &[&str]) -> Output {
    Command::new(dafs_bin())
        .args(args)
        .env_remove("DAFS_SECRET_FILE")
        .env_remove("DAFS_TLS_CA")
        .env_remove("DAFS_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn cli_put_get_over_tls() {
    let pki = Pki::generate();
    let srv = tls_server(&pki);
    let ca = pki.ca().display().to_string();
    let local = pki.path("in.bin");
    let data = pattern(0, 9 << 20, 5); // past the 4 MiB transfer chunk: direct placement
    std::fs::write(&local, &data).unwrap();
    let url = format!("dafs+tls://{}/cli.bin", srv.addr());
    let o = dafs(&["--tls-ca", &ca, "-q", "put", local.to_str().unwrap(), &url]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(fnv(&std::fs::read(srv.dir().join("cli.bin")).unwrap()), fnv(&data));
    let out = pki.path("out.bin");
    let o = dafs(&["--tls-ca", &ca, "-q", "get", &url, out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(fnv(&std::fs::read(&out).unwrap()), fnv(&data));
    let o = dafs(&["--tls-ca", &ca, "ls", &format!("dafs+tls://{}/", srv.addr())]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("cli.bin"));

    // Wrong CA, and a plaintext URL to the TLS server: connection errors (exit 3).
    let other = pki.other_ca().display().to_string();
    let o = dafs(&["--tls-ca", &other, "ls", &format!("dafs+tls://{}/", srv.addr())]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("certificate"), "{}", show(&o));
    let o = dafs(&["ls", &format!("dafs://{}/", srv.addr())]);
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("TLS"), "{}", show(&o));
}

#[test]
fn cli_mutual_tls() {
    let pki = Pki::generate();
    let srv = TestServer::start(&strs(&pki.server_args_mtls()));
    let ca = pki.ca().display().to_string();
    let url = format!("dafs+tls://{}/", srv.addr());
    let o = dafs(&["--tls-ca", &ca, "ls", &url]);
    assert_eq!(o.status.code(), Some(3), "no client certificate: {}", show(&o));
    let (cert, key) = (
        pki.path("client.pem").display().to_string(),
        pki.path("client.key").display().to_string(),
    );
    let o = dafs(&["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key, "ls", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
}

/// A TLS session survives a cut connection: the client connects again over TLS (a new
/// handshake with the same configuration), binds it to the session and the open file
/// keeps working.
#[test]
fn tls_session_recovers_after_a_cut_connection() {
    use dafs_transport::fault::{FaultPlan, FaultyTransport};
    let pki = Pki::generate();
    let srv = tls_server(&pki);
    let opts = pki.client_options();
    let inner =
        dafs_transport::tcp::TcpClient::connect_tls(&srv.addr(), Duration::from_secs(5), &opts)
            .unwrap();
    let t = FaultyTransport::new(Box::new(inner), FaultPlan::default(), 9);
    let ctl = t.control();
    let mut cfg = cfg_with(&srv, opts);
    cfg.connections = 3;
    let mut c = Client::with_transport(Box::new(t), cfg).unwrap();
    let data = pattern(0, 3 << 20, 4);
    let f = c.open("kept", OpenOptions::read_write().create(true)).unwrap();
    c.pwrite(&f, &data, 0).unwrap();
    ctl.cut();
    let mut back = vec![0u8; data.len()];
    assert_eq!(c.pread(&f, &mut back, 0).unwrap(), data.len());
    assert!(back == data);
    c.close(f).unwrap();
    // Trunked over TLS too: the cut connection (noticed by the next request sent on it
    // at the latest, CLOSE) was dropped alone and replaced.
    let st = c.stats();
    assert_eq!(st.reconnects + st.connections_lost, 1, "{st:?}");
    assert_eq!(c.connections(), 3);
}
