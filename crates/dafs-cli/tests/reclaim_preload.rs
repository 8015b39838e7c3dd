//! The preload library across a server restart (docs/protocol.md §9.5): a long-running
//! preloaded process keeps writing through a descriptor it opened before dafsd was
//! killed with SIGKILL and started again with its state directory. The client library
//! reclaims the open (and ends the grace period early), so the process sees a pause.
//!
//! Needs `target/<profile>/libdafs_preload.so` built from this tree (`cargo build -p
//! dafs-preload`, as scripts/test-preload.sh does): the test fails without it.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::dafsd_bin;
use common::restart::RestartableServer;

fn preload_lib() -> PathBuf {
    let lib = dafsd_bin().parent().unwrap().join("libdafs_preload.so");
    assert!(lib.exists(), "{} missing: run `cargo build -p dafs-preload`", lib.display());
    lib
}

#[test]
fn a_preloaded_process_keeps_writing_through_a_restart() {
    let state = tempfile::Builder::new().prefix("dafs-state-").tempdir().unwrap();
    let state_dir = state.path().join("state");
    let mut srv = RestartableServer::start(&[
        "--state-dir",
        state_dir.to_str().unwrap(),
        "--grace-secs",
        "5",
    ]);
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
    let t = Instant::now();
    while std::fs::read(&log).unwrap_or_default() != b"before" {
        assert!(t.elapsed() < Duration::from_secs(10), "the first write did not arrive");
        std::thread::sleep(Duration::from_millis(20));
    }
    srv.restart();
    std::fs::write(&flag, b"").unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "the preloaded process hangs");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "the write after the restart failed: {status}");
    // Within the grace period: the open was reclaimed, not waited for and opened anew.
    assert!(t.elapsed() < Duration::from_secs(4), "took {:?}", t.elapsed());
    assert_eq!(std::fs::read(&log).unwrap(), b"before+after");
}
