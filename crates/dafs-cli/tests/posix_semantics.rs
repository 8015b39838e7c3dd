//! POSIX semantics every adapter relies on (issue 19): the permission bits of new
//! objects are the ones the client asked for (the client — or the kernel above the FUSE
//! mount, or the preloaded process — has applied its umask already, and the server must
//! not apply its own on top); a symlink's own owner and times; paths longer than one
//! LOOKUP carries.

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

/// A symlink's own owner and times change through its own handle (lchown, lutimes,
/// utimensat/fchownat with AT_SYMLINK_NOFOLLOW in the adapters); its target's stay.
#[test]
fn symlink_own_owner_and_times() {
    use dafs_client::dafs_proto::{types::setattr_mask, SetAttrs};
    use std::os::unix::fs::MetadataExt;
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::write(d.join("target"), b"x").unwrap();
    c.symlink("target", "lnk").unwrap();
    let target_before = std::fs::metadata(d.join("target")).unwrap();
    let (fh, a) = c.lookup_nofollow("lnk").unwrap();
    assert_eq!(a.ftype, FileType::Symlink);
    let mtime_ns = 1_000_000_000i64 * 1_234_567;
    let set = SetAttrs {
        mask: setattr_mask::MTIME | setattr_mask::ATIME,
        mtime_ns,
        atime_ns: mtime_ns,
        ..Default::default()
    };
    c.setattr(fh, set).unwrap();
    let link = std::fs::symlink_metadata(d.join("lnk")).unwrap();
    assert_eq!(link.mtime(), 1_234_567);
    let target = std::fs::metadata(d.join("target")).unwrap();
    assert_eq!(target.mtime(), target_before.mtime(), "the target's times stay");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let set = SetAttrs { mask: setattr_mask::UID, uid: 4242, ..Default::default() };
        c.setattr(fh, set).unwrap();
        assert_eq!(std::fs::symlink_metadata(d.join("lnk")).unwrap().uid(), 4242);
        assert_eq!(std::fs::metadata(d.join("target")).unwrap().uid(), target_before.uid());
    }
}

/// A path longer than one LOOKUP carries (4,096 bytes) is walked in pieces: the preload
/// library puts its virtual working directory in front of paths of up to PATH_MAX - 1
/// bytes. Past the client's bound: NAMETOOLONG.
#[test]
fn paths_longer_than_one_lookup() {
    use dafs_client::dafs_proto::Status;
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let comp = "d".repeat(250);
    let mut dir = String::new();
    for _ in 0..24 {
        // 24 x 251 bytes: 6,024
        dir = if dir.is_empty() { comp.clone() } else { format!("{dir}/{comp}") };
        c.mkdir(&dir, 0o755).unwrap();
    }
    assert!(dir.len() > 6000);
    let file = format!("{dir}/leaf");
    c.create_file(&file, 0o644, true).unwrap();
    assert_eq!(c.stat(&file).unwrap().ftype, FileType::Regular);
    c.symlink("leaf", &format!("{dir}/lnk")).unwrap();
    assert_eq!(c.readlink(&format!("{dir}/lnk")).unwrap(), b"leaf");
    assert_eq!(c.lookup_nofollow(&format!("{dir}/lnk")).unwrap().1.ftype, FileType::Symlink);
    c.remove(&file).unwrap();
    let far = format!("{dir}/{}", "x/".repeat(dafs_client::PATH_WALK_BYTES_MAX / 2));
    match c.stat(&far) {
        Err(e) => assert_eq!(e.status(), Some(Status::NameTooLong)),
        Ok(a) => panic!("a path past the bound resolved: {a:?}"),
    }
}

/// The umask the server does without is its workers' own: a program that embeds the
/// server keeps its process umask (files it makes itself are not suddenly 0666/0777),
/// while objects clients make still get exactly the bits they asked for.
#[test]
fn embedding_the_server_leaves_the_process_umask_alone() {
    let export = tempfile::tempdir().unwrap();
    // SAFETY: umask has no preconditions (and this test file starts no other server in
    // this process that could race with it on the umask).
    let before = unsafe { libc::umask(0o027) };
    let mut cfg = dafs_server::ServerConfig::new(export.path());
    cfg.listen = "127.0.0.1:0".into();
    cfg.shm_socket = None;
    cfg.admin_socket = None;
    let srv = dafs_server::start(cfg).unwrap();
    // SAFETY: as above.
    let after = unsafe { libc::umask(before) };
    assert_eq!(after, 0o027, "dafs_server::start changed the process umask");
    let mut c = dafs_client::Client::connect(srv.local_addr(), Default::default()).unwrap();
    c.create_file("f", 0o666, true).unwrap();
    assert_eq!(mode_of(&export.path().join("f")), 0o666);
}

/// O_TRUNC and truncate-to-0 of a file that is already empty still mark its
/// modification and change times (the server sets them instead of calling ftruncate(0),
/// which ext4 takes as replace-and-flush-on-close), and a non-empty file is still cut.
#[test]
fn truncating_an_empty_file_marks_its_times() {
    use std::os::unix::fs::MetadataExt;
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let p = srv.dir().join("empty");
    std::fs::write(&p, b"").unwrap();
    let old_ns = 1_000_000_000i64; // 1970, far behind "now"
    let set_old = |c: &mut dafs_client::Client| {
        c.set_times("empty", old_ns, old_ns).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.mtime(), 1);
        m.ctime_nsec() + m.ctime() * 1_000_000_000
    };
    let marked = |ctime_before: i64| {
        let m = std::fs::metadata(&p).unwrap();
        assert!(m.mtime() > 1, "mtime not marked: {}", m.mtime());
        let ctime = m.ctime_nsec() + m.ctime() * 1_000_000_000;
        assert!(ctime >= ctime_before, "ctime went back");
        assert_eq!(m.len(), 0);
    };
    // OPEN with TRUNCATE
    let ct = set_old(&mut c);
    let f = c.open("empty", OpenOptions::write_only().truncate(true)).unwrap();
    assert!(f.attr.mtime_ns > old_ns, "the open's attributes show the new mtime");
    c.close(f).unwrap();
    marked(ct);
    // OPEN with CREATE and TRUNCATE of the existing empty file
    let ct = set_old(&mut c);
    let f = c.open("empty", OpenOptions::write_only().create(true).truncate(true)).unwrap();
    c.close(f).unwrap();
    marked(ct);
    // SETATTR size 0
    let ct = set_old(&mut c);
    let a = c.truncate("empty", 0).unwrap();
    assert!(a.mtime_ns > old_ns);
    marked(ct);
    // A non-empty file is cut, by both.
    std::fs::write(&p, b"data").unwrap();
    let f = c.open("empty", OpenOptions::write_only().truncate(true)).unwrap();
    assert_eq!(f.attr.size, 0);
    c.close(f).unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 0);
    std::fs::write(&p, b"data").unwrap();
    assert_eq!(c.truncate("empty", 0).unwrap().size, 0);
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 0);
}
