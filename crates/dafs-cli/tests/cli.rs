//! The `dafs` command line tool against a real `dafsd`: every subcommand, byte-exact
//! transfers around the inline threshold and the transfer chunk, and the exit codes
//! (0 success, 1 operation failed, 2 usage, 3 cannot connect or authenticate).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{dafs_bin, pattern, TestServer};

fn dafs_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(dafs_bin());
    c.args(args).env_remove("DAFS_SECRET_FILE").env_remove("DAFS_LOG").stdin(Stdio::null());
    c
}

fn run(args: &[&str]) -> Output {
    dafs_cmd(args).output().expect("run dafs")
}

fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = dafs_cmd(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dafs");
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

fn show(args: &[&str], o: &Output) -> String {
    format!(
        "dafs {}\nexit: {:?}\nstdout: {}\nstderr: {}",
        args.join(" "),
        o.status.code(),
        String::from_utf8_lossy(&o.stdout[..o.stdout.len().min(2000)]),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Run and require exit code `code`; returns the output.
fn expect(code: i32, args: &[&str]) -> Output {
    let o = run(args);
    assert_eq!(o.status.code(), Some(code), "{}", show(args, &o));
    o
}

fn ok(args: &[&str]) -> Output {
    expect(0, args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A port nothing listens on (bound, then released).
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn ping_reports_the_session() {
    let srv = TestServer::start(&["--slots", "8"]);
    let o = ok(&["ping", &srv.url("/")]);
    let out = stdout(&o);
    assert!(out.starts_with("session "), "{out}");
    assert!(out.contains("over tcp") || out.contains("over shm"), "{out}");
    assert!(out.contains("8 slots"), "{out}");
    // The URL without a path works too.
    ok(&["ping", &format!("dafs://{}", srv.addr())]);
}

#[test]
fn transfers_are_byte_exact_over_tcp() {
    let srv = TestServer::start(&["--no-shm"]);
    let o = ok(&["ping", &srv.url("/")]);
    assert!(stdout(&o).contains("over tcp"), "{}", stdout(&o));
    transfers(&srv);
}

/// Default provider choice: a same-host client may switch to shared memory.
#[test]
fn transfers_are_byte_exact_default_provider() {
    let srv = TestServer::start(&[]);
    transfers(&srv);
}

fn transfers(srv: &TestServer) {
    let scratch = srv.base_dir().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let sizes = [0usize, 1, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 4 << 20, (5 << 20) + 3];
    for (i, &size) in sizes.iter().enumerate() {
        let data = pattern(0, size, i as u8 + 1);
        let src = scratch.join(format!("src-{size}"));
        std::fs::write(&src, &data).unwrap();
        let name = format!("file-{size}");

        // put FILE -> exactly the bytes on the server's disk
        ok(&["put", p(&src), &srv.url(&name)]);
        let on_disk = std::fs::read(srv.dir().join(&name)).unwrap();
        assert!(
            on_disk == data,
            "put of {size} bytes: the server's copy differs ({} bytes)",
            on_disk.len()
        );

        // get -> FILE
        let dst = scratch.join(format!("dst-{size}"));
        ok(&["get", &srv.url(&name), p(&dst)]);
        let got = std::fs::read(&dst).unwrap();
        assert!(got == data, "get of {size} bytes: differs ({} bytes back)", got.len());

        // get -> stdout, cat -> stdout
        let o = ok(&["get", &srv.url(&name), "-"]);
        assert!(o.stdout == data, "get - of {size} bytes: differs ({} bytes back)", o.stdout.len());
        let o = ok(&["cat", &srv.url(&name)]);
        assert!(o.stdout == data, "cat of {size} bytes: differs ({} bytes back)", o.stdout.len());

        // put - (stdin), overwriting a longer file: the result is exactly the input
        let name2 = format!("stdin-{size}");
        std::fs::write(srv.dir().join(&name2), vec![0xee; size + 4097]).unwrap();
        let o = run_stdin(&["put", "-", &srv.url(&name2)], &data);
        assert_eq!(o.status.code(), Some(0), "{}", show(&["put", "-", &name2], &o));
        let on_disk = std::fs::read(srv.dir().join(&name2)).unwrap();
        assert!(
            on_disk == data,
            "put - of {size} bytes: the server's copy differs ({} bytes)",
            on_disk.len()
        );
    }
    // cat of several files concatenates them in order.
    let o = ok(&[
        "cat",
        &srv.url("file-1"),
        &srv.url("file-16383"),
        &srv.url("file-0"),
        &srv.url("file-1"),
    ]);
    let mut want = pattern(0, 1, 2);
    want.extend(pattern(0, 16 * 1024 - 1, 3));
    want.extend(pattern(0, 1, 2));
    assert!(o.stdout == want, "concatenated cat differs");
    // Into a subdirectory, and get into an existing local file (truncated).
    ok(&["mkdir", &srv.url("sub")]);
    let small = scratch.join("src-1");
    ok(&["put", p(&small), &srv.url("sub/one")]);
    let dst = scratch.join("dst-16385"); // longer file from above
    ok(&["get", &srv.url("sub/one"), p(&dst)]);
    assert_eq!(std::fs::read(&dst).unwrap(), pattern(0, 1, 2));
}

#[test]
fn namespace_commands() {
    let srv = TestServer::start(&[]);
    let d = srv.dir();

    // mkdir, mkdir -p
    ok(&["mkdir", &srv.url("a")]);
    assert!(d.join("a").is_dir());
    ok(&["mkdir", "-p", &srv.url("x/y/z")]);
    assert!(d.join("x/y/z").is_dir());
    ok(&["mkdir", "-p", &srv.url("x/y/z")]); // exists: fine with -p
    ok(&["mkdir", "--parents", &srv.url("a/b")]);
    ok(&["mkdir", &srv.url("m1"), &srv.url("m2")]);
    assert!(d.join("m1").is_dir() && d.join("m2").is_dir());

    // ls, ls -l
    std::fs::write(d.join("a/f1"), b"hello").unwrap();
    std::fs::write(d.join("a/f2"), vec![0u8; 12345]).unwrap();
    let o = ok(&["ls", &srv.url("a")]);
    assert_eq!(stdout(&o).lines().collect::<Vec<_>>(), ["b", "f1", "f2"], "{}", stdout(&o));
    let o = ok(&["ls", "-l", &srv.url("a")]);
    let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with('d') && lines[0].ends_with(" b"), "{lines:?}");
    assert!(lines[1].starts_with("-0644") || lines[1].starts_with('-'), "{lines:?}");
    assert!(lines[1].contains(" 5 ") && lines[1].ends_with(" f1"), "{lines:?}");
    assert!(lines[2].contains(" 12345 ") && lines[2].ends_with(" f2"), "{lines:?}");
    let o = ok(&["ls", &srv.url("/")]);
    for name in ["a", "m1", "m2", "x"] {
        assert!(stdout(&o).lines().any(|l| l == name), "ls / lacks {name}: {}", stdout(&o));
    }
    let o = ok(&["ls", &srv.url("a/f1")]);
    assert_eq!(stdout(&o).trim(), "/a/f1", "ls of a file prints its path");
    let o = ok(&["ls", &srv.url("m1")]);
    assert_eq!(stdout(&o), "", "empty directory");

    // stat
    let o = ok(&["stat", &srv.url("a/f2")]);
    let out = stdout(&o);
    assert!(out.contains("size:   12345"), "{out}");
    assert!(out.contains("type:   Regular"), "{out}");
    let o = ok(&["stat", &srv.url("a")]);
    assert!(stdout(&o).contains("type:   Directory"), "{}", stdout(&o));

    // mv
    ok(&["mv", &srv.url("a/f1"), &srv.url("x/moved")]);
    assert!(!d.join("a/f1").exists());
    assert_eq!(std::fs::read(d.join("x/moved")).unwrap(), b"hello");
    ok(&["mv", &srv.url("m2"), &srv.url("x/y/m2")]);
    assert!(d.join("x/y/m2").is_dir());

    // rm
    ok(&["rm", &srv.url("x/moved"), &srv.url("a/f2")]);
    assert!(!d.join("x/moved").exists() && !d.join("a/f2").exists());

    // rmdir
    ok(&["rmdir", &srv.url("x/y/m2"), &srv.url("m1")]);
    assert!(!d.join("x/y/m2").exists() && !d.join("m1").exists());
}

#[test]
fn operation_failures_exit_1_naming_path_and_reason() {
    let srv = TestServer::start(&[]);
    std::fs::create_dir(srv.dir().join("full")).unwrap();
    std::fs::write(srv.dir().join("full/f"), b"x").unwrap();
    let cases: &[(&[&str], &str, &str)] = &[
        (&["stat", "missing"], "/missing", "no such file or directory"),
        (&["cat", "missing"], "/missing", "no such file or directory"),
        (&["get", "nope/deeper", "-"], "/nope/deeper", "no such file or directory"),
        (&["ls", "missing-dir"], "/missing-dir", "no such file or directory"),
        (&["rm", "missing"], "/missing", "no such file or directory"),
        (&["rm", "full"], "/full", "is a directory"),
        (&["rmdir", "full"], "/full", "directory not empty"),
        (&["rmdir", "full/f"], "/full/f", "not a directory"),
        (&["mkdir", "full"], "/full", "file exists"),
        (&["mkdir", "no/such/parent"], "/no/such/parent", "no such file or directory"),
        (&["mkdir", "-p", "full/f/sub"], "/full/f", "not a directory"),
        (&["mv", "missing", "other"], "/missing", "no such file or directory"),
        (&["cat", "full"], "/full", "is a directory"),
    ];
    for (args, path, reason) in cases {
        let mut full: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        // URL-ify every argument that is not an option or "-" (the mv target is the last).
        for a in full.iter_mut().skip(1) {
            if !a.starts_with('-') {
                *a = srv.url(a);
            }
        }
        let argv: Vec<&str> = full.iter().map(String::as_str).collect();
        let o = expect(1, &argv);
        let err = stderr(&o);
        assert!(
            err.contains(path) && err.contains(reason),
            "stderr should name {path} and {reason:?}\n{}",
            show(&argv, &o)
        );
    }
    // A local file that cannot be read: put fails with 1 and names it.
    let missing_local = srv.base_dir().join("no-such-local-file");
    let o = expect(1, &["put", p(&missing_local), &srv.url("x")]);
    assert!(stderr(&o).contains("no-such-local-file"), "{}", stderr(&o));
    // Several operands: the good ones happen, the exit code reports the failure.
    let o = expect(1, &["mkdir", &srv.url("good1"), &srv.url("full"), &srv.url("good2")]);
    assert!(srv.dir().join("good1").is_dir() && srv.dir().join("good2").is_dir(), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_2() {
    let srv = TestServer::start(&[]);
    for args in [
        &["ls", "http://x"][..],
        &["stat", "http://x/y"],
        &["ping", "dafs:///nohost"],
        &["cat", "/just/a/path"],
        &["put", "/etc/hostname", "ftp://x/y"],
        &["rm"],         // no URL
        &["frobnicate"], // no such subcommand (clap)
        &["ls"],         // missing argument (clap)
        &["ls", "--bogus-flag", "dafs://x"],
    ] {
        let o = expect(2, args);
        assert!(!stderr(&o).is_empty(), "{}", show(args, &o));
    }
    let o = expect(2, &["ls", "http://x"]);
    assert!(stderr(&o).contains("http://x"), "{}", stderr(&o));
    // mv across servers is a usage error.
    let o = expect(2, &["mv", &srv.url("a"), "dafs://127.0.0.1:1/b"]);
    assert!(stderr(&o).contains("same server"), "{}", stderr(&o));
    // A secret file that is missing or too short.
    let short = srv.base_dir().join("short-secret");
    std::fs::write(&short, b"abc").unwrap();
    expect(2, &["--secret-file", p(&short), "ping", &srv.url("/")]);
    expect(2, &["--secret-file", "/nonexistent/secret", "ping", &srv.url("/")]);
    // --help and --version are not errors.
    assert!(stdout(&ok(&["--help"])).contains("Usage"));
    ok(&["--version"]);
}

#[test]
fn connect_failures_exit_3() {
    let port = dead_port();
    let url = format!("dafs://127.0.0.1:{port}/x");
    for args in [
        &["ping", url.as_str()][..],
        &["ls", &url],
        &["cat", &url],
        &["mkdir", &url],
        &["get", &url, "-"],
    ] {
        let o = expect(3, args);
        assert!(stderr(&o).contains("cannot connect"), "{}", show(args, &o));
    }
    // A server that dies: the next command cannot connect.
    let mut srv = TestServer::start(&[]);
    ok(&["ping", &srv.url("/")]);
    let url = srv.url("/");
    srv.kill();
    expect(3, &["ping", &url]);
}

#[test]
fn authenticating_server() {
    let secret = b"sekrit-for-cli-tests";
    let srv = TestServer::start_with_secret(secret, &[]);
    let sf = srv.secret_path().unwrap();
    // The secret file as written by an editor (trailing newline) works too.
    let sf_nl = srv.base_dir().join("secret-nl");
    std::fs::write(&sf_nl, [&secret[..], b"\n"].concat()).unwrap();

    let o = ok(&["--secret-file", p(&sf), "ping", &srv.url("/")]);
    assert!(stdout(&o).starts_with("session "));
    ok(&["ping", "--secret-file", p(&sf_nl), &srv.url("/")]);
    // Through the environment variable.
    let o = dafs_cmd(&["ping", &srv.url("/")]).env("DAFS_SECRET_FILE", &sf).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&["ping (DAFS_SECRET_FILE)"], &o));
    // Real work with the secret.
    let src = srv.base_dir().join("authsrc");
    let data = pattern(0, 100_000, 9);
    std::fs::write(&src, &data).unwrap();
    ok(&["--secret-file", p(&sf), "put", p(&src), &srv.url("f")]);
    let o = ok(&["--secret-file", p(&sf), "cat", &srv.url("f")]);
    assert!(o.stdout == data);

    // Without the secret: exit 3 with an authentication message.
    for args in [&["ping", &srv.url("/")][..], &["ls", &srv.url("/")], &["cat", &srv.url("f")]] {
        let o = expect(3, args);
        let err = stderr(&o).to_lowercase();
        assert!(err.contains("auth") || err.contains("secret"), "{}", show(args, &o));
    }
    // With the wrong secret: also 3.
    let wrong = srv.base_dir().join("wrong");
    std::fs::write(&wrong, b"not-the-secret").unwrap();
    let o = expect(3, &["--secret-file", p(&wrong), "ping", &srv.url("/")]);
    assert!(stderr(&o).to_lowercase().contains("auth"), "{}", stderr(&o));
    // A secret against a server without one: refused too (the server cannot prove it).
    let open = TestServer::start(&[]);
    let o = expect(3, &["--secret-file", p(&sf), "ping", &open.url("/")]);
    assert!(stderr(&o).to_lowercase().contains("auth"), "{}", stderr(&o));
}

// Regression: the client's global export option used to be `--export`, clashing with
// serve's `--export NAME=DIR` (clap panics on it in debug builds); it is `--export-name`.
#[test]
fn serve_subcommand_starts_a_server() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("exp");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("served"), b"from dafs serve").unwrap();
    let mut child = Command::new(dafs_bin())
        .args(["serve", p(&dir), "--listen", "127.0.0.1:0"])
        .env_remove("DAFS_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let Some(addr) = line.trim().strip_prefix("dafsd listening on ").map(str::to_string) else {
        let _ = child.kill();
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
        let _ = child.wait();
        panic!("dafs serve did not start; first stdout line {line:?}; stderr:\n{err}");
    };
    assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "{addr}");
    let o = ok(&["cat", &format!("dafs://{addr}/served")]);
    assert_eq!(o.stdout, b"from dafs serve");
    // SIGTERM: it shuts down cleanly.
    // SAFETY: kill(2) on our own, not yet reaped child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("dafs serve did not exit on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "dafs serve exit: {status:?}");
    expect(3, &["ping", &format!("dafs://{addr}/")]);

    // Configuration errors are usage errors (2), before anything listens.
    let o = run(&["serve", p(&base.path().join("does-not-exist")), "--listen", "127.0.0.1:0"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&["serve", "missing dir"], &o));
    let o = run(&["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&["serve", "no dir"], &o));
}

/// `dafs mount` / `dafs umount` errors that need no FUSE (the mounting itself is
/// tested by scripts/test-fuse.sh against real programs).
#[test]
fn mount_and_umount_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = p(dir.path());
    // Not mounted: clear error, exit 1, nothing touched.
    let o = expect(1, &["umount", d]);
    assert!(stderr(&o).contains("not a dafs mount point"), "{}", stderr(&o));
    expect(1, &["umount", "--lazy", "/no/such/dir"]);
    // Usage errors (exit 2) come before any connection or mount attempt.
    let port = dead_port();
    let url = format!("dafs://127.0.0.1:{port}/");
    let o = expect(2, &["mount", &url, d, "-o", "ro,frobnicate"]);
    assert!(stderr(&o).contains("frobnicate"), "{}", stderr(&o));
    expect(2, &["mount", &url, d, "-o", "attr_ttl_ms=soon"]);
    expect(2, &["mount", &url, d, "-o", "allow_other,allow_root"]);
    expect(2, &["mount", "http://x/", d]);
    let o = expect(2, &["mount", &format!("dafs://127.0.0.1:{port}/sub/dir"), d]);
    assert!(stderr(&o).contains("subdirectory"), "{}", stderr(&o));
    expect(2, &["mount", &url]);
    // Nothing listening: exit 3, also with --background (the child reports it).
    let o = expect(3, &["mount", &url, d]);
    assert!(stderr(&o).contains("cannot connect"), "{}", stderr(&o));
    expect(3, &["mount", "--background", &url, d]);
    assert!(!std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(d));
}

/// FUSE's default — only the mounting user may use a mount, root included — is said
/// where users look first (issue 19).
#[test]
fn mount_help_says_who_may_use_the_mount() {
    let out = run(&["mount", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ONLY THE USER WHO MOUNTED IT"), "{text}");
    assert!(text.contains("-o allow_other"), "{text}");
}

/// get, put and cat with their pipelining options: the queue depth and block size change
/// how the bytes travel, never which; --sync; --provider tcp; a put creates a new file
/// (mode 0644) and truncates an existing longer one; bad values are usage errors.
#[test]
fn copy_options() {
    use std::os::unix::fs::PermissionsExt;
    let srv = TestServer::start(&[]);
    let scratch = srv.base_dir().join("scratch-opts");
    std::fs::create_dir(&scratch).unwrap();
    let data = pattern(0, 300_001, 7);
    let src = scratch.join("src");
    std::fs::write(&src, &data).unwrap();
    for qd in ["1", "2", "5"] {
        for bs in ["4k", "64k", "1m"] {
            let opts = ["--queue-depth", qd, "--block-size", bs];
            let name = format!("q{qd}-b{bs}");
            ok(&[&["put"][..], &opts, &[p(&src), &srv.url(&name)]].concat());
            let on_disk = std::fs::read(srv.dir().join(&name)).unwrap();
            assert!(on_disk == data, "put {opts:?}: the server's copy differs");
            let dst = scratch.join(&name);
            ok(&[&["get"][..], &opts, &[&srv.url(&name), p(&dst)]].concat());
            assert!(std::fs::read(&dst).unwrap() == data, "get {opts:?}: differs");
            let o = ok(&[&["cat"][..], &opts, &[&srv.url(&name)]].concat());
            assert!(o.stdout == data, "cat {opts:?}: differs");
        }
    }
    // A new file: created with mode 0644 and exactly the input.
    ok(&["put", "--sync", p(&src), &srv.url("new")]);
    let new = srv.dir().join("new");
    assert_eq!(std::fs::metadata(&new).unwrap().permissions().mode() & 0o777, 0o644);
    assert!(std::fs::read(&new).unwrap() == data);
    // An existing longer file: truncated to the input (file and stdin sources).
    std::fs::write(srv.dir().join("long"), vec![0xee; 1_000_000]).unwrap();
    ok(&["put", "--queue-depth", "3", p(&src), &srv.url("long")]);
    assert!(std::fs::read(srv.dir().join("long")).unwrap() == data, "put onto a longer file");
    // An existing empty file is reused.
    std::fs::write(srv.dir().join("empty"), b"").unwrap();
    ok(&["put", p(&src), &srv.url("empty")]);
    assert!(std::fs::read(srv.dir().join("empty")).unwrap() == data);
    // get --sync into an existing longer local file.
    let dst = scratch.join("synced");
    std::fs::write(&dst, vec![1u8; 2_000_000]).unwrap();
    ok(&["get", "--sync", &srv.url("new"), p(&dst)]);
    assert!(std::fs::read(&dst).unwrap() == data);
    // --provider tcp stays on TCP for a same-host server.
    let o = ok(&["--provider", "tcp", "ping", &srv.url("/")]);
    assert!(stdout(&o).contains("over tcp"), "{}", stdout(&o));
    ok(&["--provider", "tcp", "get", &srv.url("new"), p(&dst)]);
    assert!(std::fs::read(&dst).unwrap() == data);
    for bad in [
        &["get", "--queue-depth", "0", &srv.url("new"), p(&dst)][..],
        &["get", "--queue-depth", "33", &srv.url("new"), p(&dst)],
        &["put", "--block-size", "0", p(&src), &srv.url("x")],
        &["put", "--block-size", "lots", p(&src), &srv.url("x")],
        &["cat", "--block-size", "1g", &srv.url("new")],
        &["--provider", "udp", "cat", &srv.url("new")],
    ] {
        let o = expect(2, bad);
        assert!(!stderr(&o).is_empty(), "{}", show(bad, &o));
    }
    assert!(!srv.dir().join("x").exists(), "a refused put created its target");
}
