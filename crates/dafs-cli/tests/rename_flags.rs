//! RENAME with Linux `renameat2` flags through the client library, on TCP and on shared
//! memory: NOREPLACE refuses an existing target and changes nothing, EXCHANGE swaps two
//! names (files, or a file and a directory) atomically, and flags the protocol does not
//! define are refused by the client before anything is sent. Every outcome is checked
//! on the exported directory itself, not only through the library.

mod common;

use std::fs;

use common::{Client, TestServer};
use dafs_client::{Chain, Error};
use dafs_proto::{rename_flags, Request, Status};

const NOREPLACE: u32 = rename_flags::NOREPLACE;
const EXCHANGE: u32 = rename_flags::EXCHANGE;

fn expect_status(what: &str, r: Result<(), Error>, want: Status) {
    match r {
        Err(e) if e.status() == Some(want) => {}
        other => panic!("{what}: expected {want:?}, got {other:?}"),
    }
}

/// NOREPLACE: onto an existing name EXIST and both files unchanged; onto a free name a
/// plain rename.
fn noreplace(srv: &TestServer, c: &mut Client, tag: &str) {
    let dir = srv.dir();
    let (a, b, free) = (format!("{tag}-a"), format!("{tag}-b"), format!("{tag}-free"));
    fs::write(dir.join(&a), b"source").unwrap();
    fs::write(dir.join(&b), b"target").unwrap();

    expect_status(
        "NOREPLACE onto an existing file",
        c.rename_with_flags(&a, &b, NOREPLACE),
        Status::Exist,
    );
    assert_eq!(fs::read(dir.join(&a)).unwrap(), b"source", "the source changed");
    assert_eq!(fs::read(dir.join(&b)).unwrap(), b"target", "the existing target was replaced");

    c.rename_with_flags(&a, &free, NOREPLACE).unwrap();
    assert!(!dir.join(&a).exists(), "the old name survived the rename");
    assert_eq!(fs::read(dir.join(&free)).unwrap(), b"source");
}

/// EXCHANGE of two files, then of a file and a directory: the names swap, contents
/// follow them. A missing side is NOENT and changes nothing.
fn exchange(srv: &TestServer, c: &mut Client, tag: &str) {
    let dir = srv.dir();
    let (f, g, d) = (format!("{tag}-f"), format!("{tag}-g"), format!("{tag}-d"));
    fs::write(dir.join(&f), b"eff").unwrap();
    fs::write(dir.join(&g), b"gee").unwrap();
    fs::create_dir(dir.join(&d)).unwrap();
    fs::write(dir.join(&d).join("inside"), b"in d").unwrap();

    c.rename_with_flags(&f, &g, EXCHANGE).unwrap();
    assert_eq!(fs::read(dir.join(&f)).unwrap(), b"gee");
    assert_eq!(fs::read(dir.join(&g)).unwrap(), b"eff");

    c.rename_with_flags(&f, &d, EXCHANGE).unwrap();
    assert!(dir.join(&f).is_dir(), "{f} is not the directory after the exchange");
    assert_eq!(fs::read(dir.join(&f).join("inside")).unwrap(), b"in d");
    assert_eq!(fs::read(dir.join(&d)).unwrap(), b"gee", "{d} is not the file after the exchange");

    let missing = format!("{tag}-missing");
    expect_status(
        "EXCHANGE with a missing target",
        c.rename_with_flags(&g, &missing, EXCHANGE),
        Status::NoEnt,
    );
    expect_status(
        "EXCHANGE with a missing source",
        c.rename_with_flags(&missing, &g, EXCHANGE),
        Status::NoEnt,
    );
    assert_eq!(fs::read(dir.join(&g)).unwrap(), b"eff", "a failed EXCHANGE changed {g}");
    assert!(!dir.join(&missing).exists());
}

/// Unknown bits and NOREPLACE|EXCHANGE: InvalidArgument (EINVAL) from the client, by
/// path and by handle, and nothing renamed.
fn bad_flags(srv: &TestServer, c: &mut Client, tag: &str) {
    let dir = srv.dir();
    let (a, b) = (format!("{tag}-bad-a"), format!("{tag}-bad-b"));
    fs::write(dir.join(&a), b"stay").unwrap();
    let (root, _) = c.lookup("/").unwrap();
    for flags in [NOREPLACE | EXCHANGE, 4, 1 << 31, u32::MAX] {
        match c.rename_with_flags(&a, &b, flags) {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("rename flags {flags:#x}: expected InvalidArgument, got {other:?}"),
        }
        match c.rename_at_with_flags(root, a.as_bytes(), root, b.as_bytes(), flags) {
            Err(e @ Error::InvalidArgument(_)) => assert_eq!(e.errno(), libc::EINVAL),
            other => panic!("rename_at flags {flags:#x}: expected InvalidArgument, got {other:?}"),
        }
    }
    assert_eq!(fs::read(dir.join(&a)).unwrap(), b"stay");
    assert!(!dir.join(&b).exists(), "a refused rename happened");
    // The connection is still usable after the refusals.
    c.rename_with_flags(&a, &b, 0).unwrap();
    assert_eq!(fs::read(dir.join(&b)).unwrap(), b"stay");
}

fn all_cases(srv: &TestServer, c: &mut Client, tag: &str) {
    noreplace(srv, c, tag);
    exchange(srv, c, tag);
    bad_flags(srv, c, tag);
}

#[test]
fn rename_flags_over_tcp() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_tcp();
    all_cases(&srv, &mut c, "tcp");
}

#[test]
fn rename_flags_over_shared_memory() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_shm();
    all_cases(&srv, &mut c, "shm");
}

/// Plain `rename` still replaces an existing target (flags 0 is rename(2)).
#[test]
fn plain_rename_still_replaces() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    fs::write(srv.dir().join("a"), b"new").unwrap();
    fs::write(srv.dir().join("b"), b"old").unwrap();
    c.rename("a", "b").unwrap();
    assert_eq!(fs::read(srv.dir().join("b")).unwrap(), b"new");
    assert!(!srv.dir().join("a").exists());
}

/// A chain element carries the flags: a NOREPLACE element onto an existing name fails
/// the chain with EXIST; an EXCHANGE element swaps.
#[test]
fn chain_elements_carry_rename_flags() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    fs::write(srv.dir().join("x"), b"ex").unwrap();
    fs::write(srv.dir().join("y"), b"why").unwrap();
    let (root, _) = c.lookup("/").unwrap();
    let rename = |flags| Request::Rename {
        from_dir: root,
        from_name: b"x",
        to_dir: root,
        to_name: b"y",
        flags,
    };

    let out = c.run_chain(&Chain::new().push(&rename(NOREPLACE))).unwrap();
    match out.failed {
        Some((0, e)) if e.status() == Some(Status::Exist) => {}
        other => panic!("NOREPLACE chain element: expected EXIST at 0, got {other:?}"),
    }
    assert_eq!(fs::read(srv.dir().join("y")).unwrap(), b"why");

    let out = c.run_chain(&Chain::new().push(&rename(EXCHANGE))).unwrap();
    assert!(out.failed.is_none(), "EXCHANGE chain element failed: {:?}", out.failed);
    assert_eq!(fs::read(srv.dir().join("x")).unwrap(), b"why");
    assert_eq!(fs::read(srv.dir().join("y")).unwrap(), b"ex");
}

/// A read-only export answers ROFS to every flag, and nothing moves.
#[test]
fn read_only_export_refuses_rename_with_flags() {
    let srv = TestServer::start(&["--read-only"]);
    fs::write(srv.dir().join("a"), b"a").unwrap();
    fs::write(srv.dir().join("b"), b"b").unwrap();
    let mut c = srv.client();
    for flags in [0, NOREPLACE, EXCHANGE] {
        expect_status(
            &format!("flags {flags}"),
            c.rename_with_flags("a", "b", flags),
            Status::RoFs,
        );
        expect_status(
            &format!("flags {flags}, free"),
            c.rename_with_flags("a", "c", flags),
            Status::RoFs,
        );
    }
    assert_eq!(fs::read(srv.dir().join("a")).unwrap(), b"a");
    assert_eq!(fs::read(srv.dir().join("b")).unwrap(), b"b");
    assert!(!srv.dir().join("c").exists());
}
