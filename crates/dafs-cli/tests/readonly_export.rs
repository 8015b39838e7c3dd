//! A read-only export cannot be changed through any request (open flags with side
//! effects, share reservations, attributes, named attributes, the namespace, chain
//! elements), and special files in an export (a FIFO) cannot hang the server.

mod common;

use std::time::{Duration, Instant};

use common::TestServer;
use dafs_client::{Chain, Client, Error, OpenOptions};
use dafs_proto::types::open_flags;
use dafs_proto::{Request, Status};

const CONTENT: &[u8] = b"must survive";

fn ro_server() -> TestServer {
    let srv = TestServer::start(&["--read-only"]);
    std::fs::write(srv.dir().join("f"), CONTENT).unwrap();
    std::fs::create_dir(srv.dir().join("d")).unwrap();
    srv
}

fn assert_rofs<T: std::fmt::Debug>(what: &str, r: Result<T, Error>) {
    match r {
        Err(e) if e.status() == Some(Status::RoFs) => {}
        other => panic!("{what} on a read-only export: expected ROFS, got {other:?}"),
    }
}

fn assert_untouched(srv: &TestServer, what: &str) {
    let data = std::fs::read(srv.dir().join("f"))
        .unwrap_or_else(|e| panic!("after {what}: f is gone ({e})"));
    assert_eq!(data, CONTENT, "after {what}: f changed");
    let names: Vec<_> =
        std::fs::read_dir(srv.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "after {what}: the export's entries changed: {names:?}");
}

/// Run OPEN of "f" with raw `flags` as a chain element, then CLOSE of it.
fn open_close(c: &mut Client, flags: u32) -> Result<(), Error> {
    open_close_keyed(c, flags, b"")
}

fn open_close_keyed(c: &mut Client, flags: u32, key: &[u8]) -> Result<(), Error> {
    let (root, _) = c.lookup("/").unwrap();
    let open = Request::Open { fh: root, flags, mode: 0o644, name: b"f", key };
    let chain = Chain::new().push(&open).close(Chain::CURRENT_OPEN);
    match c.run_chain(&chain)?.failed {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

#[test]
fn read_only_export_refuses_open_flags_with_side_effects() {
    let srv = ro_server();
    let mut c = srv.client();
    let r = open_flags::READ;
    let cases = [
        ("read + delete-on-close", r | open_flags::DELETE_ON_CLOSE),
        ("read + deny-read", r | open_flags::DENY_READ),
        ("create-unlinked", r | open_flags::WRITE | open_flags::CREATE | open_flags::UNLINKED),
        ("read + exclusive", r | open_flags::EXCLUSIVE),
        ("read + create", r | open_flags::CREATE),
        ("read-write + truncate", r | open_flags::WRITE | open_flags::TRUNCATE),
        ("write", open_flags::WRITE),
    ];
    for (what, flags) in cases {
        assert_rofs(what, open_close(&mut c, flags));
        assert_untouched(&srv, what);
    }
    // An open key would lock every reader without it out.
    assert_rofs("read + open key", open_close_keyed(&mut c, r, b"k"));
    // Plain reading and a deny-write reservation (nobody can write anyway) still work.
    open_close(&mut c, r).unwrap();
    open_close(&mut c, r | open_flags::DENY_WRITE).unwrap();
    let f = c.open("f", OpenOptions::read()).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(c.pread(&f, &mut buf, 0).unwrap(), CONTENT.len());
    c.close(f).unwrap();
    assert_untouched(&srv, "reads");
}

#[test]
fn read_only_export_refuses_every_change() {
    let srv = ro_server();
    let mut c = srv.client();
    assert_rofs("truncate", c.truncate("f", 0));
    assert_rofs("chmod", c.chmod("f", 0o600));
    assert_rofs("set times", c.set_times("f", 0, 0));
    assert_rofs("set named attribute", c.set_nattr("f", "user.x", b"v", 0));
    assert_rofs("remove named attribute", c.remove_nattr("f", "user.x"));
    assert_rofs("link", c.link("f", "g"));
    assert_rofs("rename", c.rename("f", "g"));
    assert_rofs("remove", c.remove("f"));
    assert_rofs("rmdir", c.rmdir("d"));
    assert_rofs("mkdir", c.mkdir("e", 0o755));
    assert_rofs("symlink", c.symlink("f", "s"));
    assert_rofs("create", c.create("n"));
    assert_rofs("unlinked open", c.open("d/u", OpenOptions::read().unlinked(true)));
    assert_rofs("create+write chain", c.create_and_write("w", b"x", 0o644));
    assert_untouched(&srv, "every change");
}

/// A FIFO in the export: opening and reading it through the client must not block a
/// worker; the server keeps answering other clients, and I/O on it is refused (NXIO).
#[test]
fn fifo_in_export_cannot_hang_the_server() {
    let srv = TestServer::start(&["--workers", "1"]);
    let path = srv.dir().join("fifo");
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0, "mkfifo");
    let mut bystander = srv.client();
    let t = std::thread::spawn({
        let mut c = srv.client();
        move || {
            let f = c.open("fifo", OpenOptions::read());
            let f = match f {
                Ok(f) => f,
                Err(e) => return Err(e),
            };
            let mut buf = [0u8; 16];
            let r = c.pread(&f, &mut buf, 0).map(|_| ());
            c.close(f).unwrap();
            r
        }
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while !t.is_finished() {
        assert!(Instant::now() < deadline, "OPEN/READ of a FIFO hangs the server");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = t.join().unwrap();
    assert_eq!(r.unwrap_err().status(), Some(Status::NxIo), "I/O on a FIFO is refused");
    // Writers are refused too (no reader: the nonblocking open answers NXIO itself).
    let mut w = srv.client();
    let e = w.open("fifo", OpenOptions::write_only()).unwrap_err();
    assert_eq!(e.status(), Some(Status::NxIo));
    assert!(bystander.stat("/").unwrap().is_dir(), "the server still answers");
}
