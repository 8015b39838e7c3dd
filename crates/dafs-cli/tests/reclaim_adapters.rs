//! The adapters across a server restart (docs/protocol.md §9.5): a long-running
//! preloaded process, and a C program on libdafs, keep writing through a descriptor
//! (file) opened before dafsd was killed with SIGKILL and started again with its state
//! directory. The client library reclaims the open (and ends the grace period early),
//! so the program sees a pause.
//!
//! Needs `target/<profile>/libdafs_preload.so` and `libdafs.so` built from this tree
//! (`cargo build -p dafs-preload -p dafs-capi`, as scripts/test-preload.sh and
//! scripts/test-c.sh do) and a C compiler: the tests fail without them.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::dafsd_bin;
use common::restart::RestartableServer;

fn built_lib(name: &str) -> PathBuf {
    let lib = dafsd_bin().parent().unwrap().join(name);
    assert!(
        lib.exists(),
        "{} missing: run `cargo build -p dafs-preload -p dafs-capi`",
        lib.display()
    );
    lib
}

fn preload_lib() -> PathBuf {
    built_lib("libdafs_preload.so")
}

/// A restartable dafsd with a state directory and a 5 s grace period; the directory
/// also holds the test's flag files.
fn server() -> (RestartableServer, tempfile::TempDir) {
    let state = tempfile::Builder::new().prefix("dafs-state-").tempdir().unwrap();
    let state_dir = state.path().join("state");
    let srv = RestartableServer::start(&[
        "--state-dir",
        state_dir.to_str().unwrap(),
        "--grace-secs",
        "5",
    ]);
    (srv, state)
}

/// Wait for `child` (at most 20 s); how long that took.
fn wait_exit(child: &mut std::process::Child) -> (std::process::ExitStatus, Duration) {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s, t.elapsed());
        }
        assert!(t.elapsed() < Duration::from_secs(20), "the program hangs");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until `path` on the export holds `want` (the program's first write arrived).
fn wait_contents(path: &std::path::Path, want: &[u8]) {
    let t = Instant::now();
    while std::fs::read(path).unwrap_or_default() != want {
        assert!(t.elapsed() < Duration::from_secs(10), "the first write did not arrive");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_preloaded_process_keeps_writing_through_a_restart() {
    let (mut srv, state) = server();
    let flag = state.path().join("restarted");
    let prefix = format!("/dafs-reclaim-{}", std::process::id());
    // Open once, write, wait for the restart, write again through the same descriptor.
    let script = format!(
        "exec 3<>{prefix}/log && printf before >&3 && \
         while [ ! -e {flag} ]; do sleep 0.05; done && printf '+after' >&3",
        flag = flag.display()
    );
    let mut child = Command::new("/bin/sh")
        .args(["-c", &script])
        .env("LD_PRELOAD", preload_lib())
        .env("DAFS_MOUNT", format!("{prefix}=dafs://{}/", srv.addr()))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let log = srv.dir().join("log");
    wait_contents(&log, b"before");
    srv.restart();
    std::fs::write(&flag, b"").unwrap();
    let (status, took) = wait_exit(&mut child);
    assert!(status.success(), "the write after the restart failed: {status}");
    // Within the grace period: the open was reclaimed, not waited for and opened anew.
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(std::fs::read(&log).unwrap(), b"before+after");
}

/// The C program: connect, open, write, wait for the flag file, write and fsync again
/// through the same `dafs_file_t`; exit 0 only if every call succeeded.
const C_PROGRAM: &str = r#"
#include <dafs.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    dafs_client_t *c; dafs_file_t *f;
    if (dafs_connect(argv[1], NULL, &c) != 0) return 2;
    if (dafs_open(c, "capi", DAFS_O_RDWR | DAFS_O_CREAT, 0644, &f) != 0) return 3;
    if (dafs_pwrite(c, f, "before", 6, 0) != 6) return 4;
    while (access(argv[2], F_OK) != 0) usleep(20000);
    ssize_t n = dafs_pwrite(c, f, "+after", 6, 6);
    if (n != 6) { fprintf(stderr, "pwrite after the restart: %zd\n", n); return 5; }
    if (dafs_fsync(c, f) != 0) return 6;
    if (dafs_close(c, f) != 0) return 7;
    return dafs_disconnect(c) == 0 ? 0 : 8;
}
"#;

#[test]
fn a_c_program_keeps_writing_through_a_restart() {
    let lib = built_lib("libdafs.so");
    let (mut srv, state) = server();
    let src = state.path().join("capi.c");
    let exe = state.path().join("capi");
    std::fs::write(&src, C_PROGRAM).unwrap();
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include");
    let libdir = lib.parent().unwrap();
    let cc = Command::new("cc")
        .arg("-I")
        .arg(include)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(libdir)
        .arg("-ldafs")
        .status()
        .expect("a C compiler (cc)");
    assert!(cc.success(), "the C test program did not build");
    // The program needs the library under its soname.
    let rundir = state.path().join("lib");
    std::fs::create_dir(&rundir).unwrap();
    std::os::unix::fs::symlink(&lib, rundir.join("libdafs.so.1")).unwrap();
    let flag = state.path().join("restarted");
    let mut child = Command::new(&exe)
        .arg(srv.addr())
        .arg(&flag)
        .env("LD_LIBRARY_PATH", &rundir)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let file = srv.dir().join("capi");
    wait_contents(&file, b"before");
    srv.restart();
    std::fs::write(&flag, b"").unwrap();
    let (status, took) = wait_exit(&mut child);
    assert!(status.success(), "a call after the restart failed: {status}");
    assert!(took < Duration::from_secs(4), "reclaimed, not waited out: {took:?}");
    assert_eq!(std::fs::read(&file).unwrap(), b"before+after");
}
