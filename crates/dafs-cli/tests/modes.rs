//! Permission bits of new objects are the ones the client asked for: the client (or the
//! kernel above the FUSE mount, or the preloaded process) has applied its umask already,
//! and the server must not apply its own on top (issue 19).

mod common;

use std::os::unix::fs::PermissionsExt;

use common::TestServer;
use dafs_client::dafs_proto::FileType;
use dafs_client::OpenOptions;

fn mode_of(p: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn server_umask_is_not_applied() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    let f = c.open("f", OpenOptions::read_write().create(true).mode(0o777)).unwrap();
    c.close(f).unwrap();
    assert_eq!(mode_of(&d.join("f")), 0o777);
    c.create_file("g", 0o666, true).unwrap();
    assert_eq!(mode_of(&d.join("g")), 0o666);
    c.mkdir("dir", 0o1777).unwrap();
    assert_eq!(mode_of(&d.join("dir")), 0o1777);
    c.mknod("fifo", FileType::Fifo, 0o662, 0).unwrap();
    assert_eq!(mode_of(&d.join("fifo")), 0o662);
}
