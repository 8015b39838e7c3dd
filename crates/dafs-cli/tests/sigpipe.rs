//! A program that embeds the client library and does not ignore SIGPIPE (C programs,
//! by default) must get an error, not die, when it writes to a server that went away.
//! Own test binary: it restores SIGPIPE's default action for the whole process.

mod common;

use common::TestServer;
use dafs_client::{CgId, Error, IoBuf, OpenOptions, Provider};

#[test]
fn writes_to_a_dead_server_are_errors_not_sigpipe() {
    // SAFETY: setting a signal disposition to its default; this binary has one test.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let mut srv = TestServer::start(&["--no-shm"]);
    let mut c = srv.client_on(Provider::Tcp);
    let f = c.open("x", OpenOptions::read_write().create(true)).unwrap();
    c.pwrite(&f, b"before", 0).unwrap();
    // Internal completion group 0 is not for applications.
    assert!(matches!(
        c.submit_write(&f, 0, IoBuf::Vec(vec![1]), CgId(0), 0),
        Err(Error::InvalidArgument(_))
    ));
    let pid = srv.pid().unwrap() as i32;
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    srv.kill();
    // Several writes: the first may still be accepted by the kernel, later ones hit the
    // reset connection (EPIPE), which must surface as an error.
    let big = vec![7u8; 1 << 20];
    let mut failed = false;
    for i in 0..20 {
        if c.pwrite(&f, &big, i << 20).is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "writes to a dead server fail");
    assert!(c.null().is_err());
}
