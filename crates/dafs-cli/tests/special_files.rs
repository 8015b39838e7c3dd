//! MKNOD: FIFOs, sockets and device nodes are made on the server as the real objects,
//! reported with their types in attributes and directory listings, and can be renamed,
//! linked, chmod-ed and removed like any other name (issue 19).

mod common;

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

use common::{status, TestServer};
use dafs_client::dafs_proto::{FileType, Status};
use dafs_client::Error;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn fifo_and_socket_are_real_objects() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::create_dir(d.join("sub")).unwrap();

    let a = c.mknod("p", FileType::Fifo, 0o640, 0).unwrap();
    assert_eq!(a.ftype, FileType::Fifo);
    assert_eq!(a.mode & 0o7777, 0o640);
    assert!(std::fs::symlink_metadata(d.join("p")).unwrap().file_type().is_fifo());
    // a device number given for a FIFO is ignored, as mknod(2) ignores it
    let a = c.mknod("sub/s", FileType::Socket, 0o600, 0x0105).unwrap();
    assert_eq!(a.ftype, FileType::Socket);
    assert_eq!(a.rdev, 0);
    assert!(std::fs::symlink_metadata(d.join("sub/s")).unwrap().file_type().is_socket());

    // types in stat and in directory listings
    assert_eq!(c.lstat("p").unwrap().ftype, FileType::Fifo);
    let names: Vec<_> =
        c.readdir("").unwrap().into_iter().map(|e| (e.name_lossy(), e.ftype)).collect();
    assert!(names.contains(&("p".to_string(), FileType::Fifo)), "{names:?}");

    // the name is taken: EEXIST, whatever the new type
    assert_eq!(status(c.mknod("p", FileType::Socket, 0o600, 0)), Status::Exist);
    assert_eq!(status(c.mknod("sub/s/x", FileType::Fifo, 0o600, 0)), Status::NotDir);
    assert_eq!(status(c.mknod("nodir/x", FileType::Fifo, 0o600, 0)), Status::NoEnt);
    // only special types
    assert!(matches!(c.mknod("r", FileType::Regular, 0o600, 0), Err(Error::InvalidArgument(_))));

    // rename, link, chmod, remove
    c.rename("p", "sub/p2").unwrap();
    assert!(std::fs::symlink_metadata(d.join("sub/p2")).unwrap().file_type().is_fifo());
    c.link("sub/p2", "p3").unwrap();
    assert_eq!(std::fs::symlink_metadata(d.join("p3")).unwrap().nlink(), 2);
    let a = c.chmod("p3", 0o604).unwrap();
    assert_eq!(a.mode & 0o7777, 0o604);
    assert_eq!(
        std::fs::symlink_metadata(d.join("sub/p2")).unwrap().permissions().mode() & 0o7777,
        0o604
    );
    c.remove("p3").unwrap();
    c.remove("sub/p2").unwrap();
    c.remove("sub/s").unwrap();
    assert_eq!(std::fs::read_dir(d.join("sub")).unwrap().count(), 0);
}

#[test]
fn device_nodes_keep_their_numbers() {
    if !is_root() {
        eprintln!("skipped: device nodes need root on the server");
        return;
    }
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    let dev = libc::makedev(4, 5);
    let a = c.mknod("tty5", FileType::CharDevice, 0o620, dev).unwrap();
    assert_eq!((a.ftype, a.rdev), (FileType::CharDevice, dev));
    let m = std::fs::symlink_metadata(d.join("tty5")).unwrap();
    assert!(m.file_type().is_char_device());
    assert_eq!(m.rdev(), dev);
    // numbers past the old 8-bit/16-bit encodings survive the round trip
    let big = libc::makedev(300, 70_000);
    let a = c.mknod("blk", FileType::BlockDevice, 0o600, big).unwrap();
    assert_eq!((a.ftype, a.rdev), (FileType::BlockDevice, big));
    assert_eq!(c.lstat("blk").unwrap().rdev, big);
    assert!(std::fs::symlink_metadata(d.join("blk")).unwrap().file_type().is_block_device());
}

#[test]
fn read_only_export_refuses_mknod() {
    let ro_dir = tempfile::tempdir().unwrap();
    let spec = format!("ro={}:ro", ro_dir.path().display());
    let srv = TestServer::start(&["--export", &spec]);
    let mut c = srv.client_with(|cfg| cfg.export = "ro".into()).unwrap();
    assert_eq!(status(c.mknod("p", FileType::Fifo, 0o600, 0)), Status::RoFs);
    assert_eq!(std::fs::read_dir(ro_dir.path()).unwrap().count(), 0);
}

/// Truncating a FIFO is EINVAL (a directory EISDIR), and must not open the FIFO: a
/// worker blocked in that open would hang every client it serves.
#[test]
fn truncate_of_a_fifo_is_einval_and_never_blocks() {
    let srv = TestServer::start(&["--workers", "1"]);
    let mut c = srv.client();
    std::fs::create_dir(srv.dir().join("d")).unwrap();
    c.mknod("p", FileType::Fifo, 0o644, 0).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut c2 = srv.client();
    std::thread::spawn(move || {
        let r = c2.truncate("p", 0).map(|_| ());
        let d = c2.truncate("d", 0).map(|_| ());
        tx.send((r.map_err(|e| e.status()), d.map_err(|e| e.status()))).unwrap();
    });
    let (r, d) = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("truncate of a FIFO blocked the server");
    assert_eq!(r, Err(Some(Status::Inval)));
    assert_eq!(d, Err(Some(Status::IsDir)));
    // the (only) worker still answers
    assert_eq!(c.stat("p").unwrap().ftype, FileType::Fifo);
}
