//! Every client operation against a real `dafsd`, with its error paths, checked against
//! the exported directory on disk.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::{pattern, raw_status, status, Provider, TestServer};
use dafs_client::dafs_proto::types::access_mask;
use dafs_client::dafs_proto::{self, FileType, Request, Status};
use dafs_client::{Error, OpenOptions};

#[test]
fn open_create_exclusive_truncate() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();

    assert_eq!(status(c.open("missing", OpenOptions::read())), Status::NoEnt);
    assert_eq!(status(c.open("nodir/x", OpenOptions::read_write().create(true))), Status::NoEnt);

    // create
    let f = c.open("new.txt", OpenOptions::read_write().create(true).mode(0o640)).unwrap();
    assert_eq!(f.attr.ftype, FileType::Regular);
    assert_eq!(f.attr.size, 0);
    let md = std::fs::metadata(d.join("new.txt")).unwrap();
    assert!(md.is_file());
    assert_eq!(f.attr.fileid, md.ino());
    assert_eq!(md.mode() & 0o777, 0o640 & !umask_bits());
    c.pwrite(&f, b"hello world", 0).unwrap();
    c.close(f).unwrap();
    assert_eq!(std::fs::read(d.join("new.txt")).unwrap(), b"hello world");

    // create on an existing file without exclusive/truncate keeps the data
    let f = c.open("new.txt", OpenOptions::read_write().create(true)).unwrap();
    assert_eq!(f.attr.size, 11);
    c.close(f).unwrap();

    // exclusive
    assert_eq!(status(c.open("new.txt", OpenOptions::read_write().exclusive(true))), Status::Exist);
    assert_eq!(
        std::fs::read(d.join("new.txt")).unwrap(),
        b"hello world",
        "failed exclusive create must not touch the file"
    );
    let f = c.open("excl.txt", OpenOptions::write_only().exclusive(true)).unwrap();
    c.close(f).unwrap();
    assert!(d.join("excl.txt").is_file());
    assert_eq!(status(c.create_file("excl.txt", 0o644, true)), Status::Exist);
    let (fh, attr) = c.create_file("excl.txt", 0o644, false).unwrap();
    assert_eq!(attr.fileid, std::fs::metadata(d.join("excl.txt")).unwrap().ino());
    assert_eq!(c.getattr(fh).unwrap().fileid, attr.fileid);
    c.create_file("cf.txt", 0o600, true).unwrap();
    assert!(d.join("cf.txt").is_file());

    // truncate on open
    std::fs::write(d.join("trunc.txt"), vec![9u8; 5000]).unwrap();
    let f = c.open("trunc.txt", OpenOptions::read_write().truncate(true)).unwrap();
    assert_eq!(f.attr.size, 0);
    assert_eq!(std::fs::metadata(d.join("trunc.txt")).unwrap().len(), 0);
    c.close(f).unwrap();
    // truncate without write access is refused and leaves the file alone
    std::fs::write(d.join("trunc.txt"), b"keep").unwrap();
    assert!(c.open("trunc.txt", OpenOptions::read().truncate(true)).is_err());
    assert_eq!(std::fs::read(d.join("trunc.txt")).unwrap(), b"keep");
    // Client::create truncates
    let f = c.create("trunc.txt").unwrap();
    assert_eq!(f.attr.size, 0);
    c.close(f).unwrap();
    assert_eq!(std::fs::metadata(d.join("trunc.txt")).unwrap().len(), 0);

    // directories cannot be opened as files; paths through a file are NotDir
    std::fs::create_dir(d.join("dir")).unwrap();
    assert_eq!(status(c.open("dir", OpenOptions::read())), Status::IsDir);
    assert_eq!(status(c.open("new.txt/x", OpenOptions::read_write().create(true))), Status::NotDir);
    assert_eq!(status(c.open("new.txt/x", OpenOptions::read())), Status::NotDir);

    // opening a file in a subdirectory
    let f = c.open("dir/inner", OpenOptions::read_write().create(true)).unwrap();
    c.close(f).unwrap();
    assert!(d.join("dir/inner").is_file());
}

fn umask_bits() -> u32 {
    // The server creates files with the process umask applied; dafsd inherits ours.
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("Umask:")).expect("Umask in /proc/self/status");
    u32::from_str_radix(line[6..].trim(), 8).unwrap()
}

fn data_path_blocking(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let d = srv.dir();
    let thr = c.inline_threshold();

    let f = c.open("data", OpenOptions::read_write().create(true)).unwrap();
    // inline-sized and direct-sized pwrite
    let small = pattern(0, 100, 1);
    let big = pattern(1000, thr * 3 + 17, 2);
    assert_eq!(c.pwrite(&f, &small, 0).unwrap(), small.len());
    assert_eq!(c.pwrite(&f, &big, 1000).unwrap(), big.len());
    let disk = std::fs::read(d.join("data")).unwrap();
    assert_eq!(disk.len(), 1000 + big.len());
    assert_eq!(&disk[..100], &small[..]);
    assert!(disk[100..1000].iter().all(|&b| b == 0), "gap must read as zeros");
    assert_eq!(&disk[1000..], &big[..]);

    // pread of both sizes
    let mut buf = vec![0u8; 100];
    assert_eq!(c.pread(&f, &mut buf, 0).unwrap(), 100);
    assert_eq!(buf, small);
    let mut buf = vec![0u8; big.len()];
    assert_eq!(c.pread(&f, &mut buf, 1000).unwrap(), big.len());
    assert_eq!(buf, big);
    // short read at end of file, zero past it
    let mut buf = vec![0xAAu8; 64];
    assert_eq!(c.pread(&f, &mut buf, disk.len() as u64 - 10).unwrap(), 10);
    assert_eq!(&buf[..10], &disk[disk.len() - 10..]);
    assert_eq!(c.pread(&f, &mut buf, disk.len() as u64 + 100).unwrap(), 0);
    let mut bigbuf = vec![0u8; thr * 4];
    assert_eq!(c.pread(&f, &mut bigbuf, disk.len() as u64 - 5).unwrap(), 5);
    assert_eq!(c.pread(&f, &mut [], 0).unwrap(), 0);

    // data written on disk is visible through the client
    std::fs::write(d.join("ondisk"), pattern(0, 70_000, 3)).unwrap();
    let g = c.open("ondisk", OpenOptions::read()).unwrap();
    assert_eq!(g.attr.size, 70_000);
    let mut buf = vec![0u8; 70_000];
    assert_eq!(c.pread(&g, &mut buf, 0).unwrap(), 70_000);
    assert_eq!(buf, pattern(0, 70_000, 3));
    c.close(g).unwrap();

    // read/write advance the position
    let mut h = c.open("seq", OpenOptions::read_write().create(true)).unwrap();
    assert_eq!(c.write(&mut h, b"abc").unwrap(), 3);
    assert_eq!(h.pos, 3);
    assert_eq!(c.write(&mut h, b"defg").unwrap(), 4);
    assert_eq!(h.pos, 7);
    assert_eq!(std::fs::read(d.join("seq")).unwrap(), b"abcdefg");
    h.pos = 0;
    let mut b3 = [0u8; 3];
    assert_eq!(c.read(&mut h, &mut b3).unwrap(), 3);
    assert_eq!(&b3, b"abc");
    assert_eq!(h.pos, 3);
    let mut b10 = [0u8; 10];
    assert_eq!(c.read(&mut h, &mut b10).unwrap(), 4);
    assert_eq!(&b10[..4], b"defg");
    assert_eq!(h.pos, 7);
    assert_eq!(c.read(&mut h, &mut b10).unwrap(), 0);
    assert_eq!(h.pos, 7);
    c.close(h).unwrap();
    c.close(f).unwrap();
}

fn open_mode_is_enforced(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let thr = c.inline_threshold();
    std::fs::write(srv.dir().join("f"), b"original").unwrap();

    let ro = c.open("f", OpenOptions::read()).unwrap();
    assert_eq!(status(c.pwrite(&ro, b"x", 0)), Status::OpenMode);
    assert_eq!(status(c.pwrite(&ro, &vec![1u8; thr + 1], 0)), Status::OpenMode);
    let mut buf = [0u8; 8];
    assert_eq!(c.pread(&ro, &mut buf, 0).unwrap(), 8);
    c.close(ro).unwrap();

    let wo = c.open("f", OpenOptions::write_only()).unwrap();
    assert_eq!(status(c.pread(&wo, &mut buf, 0)), Status::OpenMode);
    assert_eq!(status(c.pread(&wo, &mut vec![0u8; thr + 1], 0)), Status::OpenMode);
    c.pwrite(&wo, b"CHANGED!", 0).unwrap();
    c.close(wo).unwrap();
    assert_eq!(std::fs::read(srv.dir().join("f")).unwrap(), b"CHANGED!");
}

fn closed_open_id_is_bad(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let f = c.open("f", OpenOptions::read_write().create(true)).unwrap();
    c.pwrite(&f, b"data", 0).unwrap();
    let id = f.open_id();
    c.close(f).unwrap();
    // `close` consumes the File, so use the stale open id through raw requests.
    let m = c.raw_call(&Request::ReadInline { open_id: id, offset: 0, len: 4 }).unwrap();
    assert_eq!(raw_status(&c, &m), Status::BadOpenId);
    let m = c
        .raw_call(&Request::WriteInline { open_id: id, offset: 0, stable: false, data: b"zz" })
        .unwrap();
    assert_eq!(raw_status(&c, &m), Status::BadOpenId);
    let m = c.raw_call(&Request::Close { open_id: id }).unwrap();
    assert_eq!(raw_status(&c, &m), Status::BadOpenId);
    let m = c.raw_call(&Request::Commit { open_id: id, offset: 0, len: 0 }).unwrap();
    assert_eq!(raw_status(&c, &m), Status::BadOpenId);
    // never-issued open id
    let m = c.raw_call(&Request::ReadInline { open_id: 987_654, offset: 0, len: 4 }).unwrap();
    assert_eq!(raw_status(&c, &m), Status::BadOpenId);
    assert_eq!(std::fs::read(srv.dir().join("f")).unwrap(), b"data");
    // the session is still fine
    c.null().unwrap();
    // an open id belongs to its session: another client cannot use it
    let g = c.open("f", OpenOptions::read()).unwrap();
    let mut c2 = srv.client_on(p);
    let m = c2.raw_call(&Request::ReadInline { open_id: g.open_id(), offset: 0, len: 4 }).unwrap();
    assert_eq!(raw_status(&c2, &m), Status::BadOpenId);
    c.close(g).unwrap();
}

#[test]
fn stat_lstat_fstat_getattr() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::write(d.join("file"), vec![1u8; 1234]).unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::os::unix::fs::symlink("file", d.join("lnk")).unwrap();

    let md = std::fs::metadata(d.join("file")).unwrap();
    let a = c.stat("file").unwrap();
    assert_eq!(a.ftype, FileType::Regular);
    assert_eq!(a.size, 1234);
    assert_eq!(a.fileid, md.ino());
    assert_eq!(a.fsid, md.dev());
    assert_eq!(a.mode, md.mode() & 0o7777);
    assert_eq!(a.nlink, 1);
    assert_eq!(a.uid, md.uid());
    assert_eq!(a.gid, md.gid());
    assert_eq!(a.mtime_ns, md.mtime() * 1_000_000_000 + md.mtime_nsec());
    assert_eq!(c.stat("/file").unwrap(), a, "leading '/' is relative to the export");
    assert_eq!(c.stat("./sub/../file").unwrap().fileid, a.fileid, "'..' that stays inside is fine");

    let s = c.stat("sub").unwrap();
    assert!(s.is_dir());
    assert_eq!(s.fileid, std::fs::metadata(d.join("sub")).unwrap().ino());
    let root = c.stat("").unwrap();
    assert!(root.is_dir());
    assert_eq!(root.fileid, std::fs::metadata(d).unwrap().ino());
    assert_eq!(c.stat("/").unwrap().fileid, root.fileid);

    // symlink: stat follows, lstat does not
    let l = c.lstat("lnk").unwrap();
    assert_eq!(l.ftype, FileType::Symlink);
    assert_eq!(l.fileid, std::fs::symlink_metadata(d.join("lnk")).unwrap().ino());
    assert_eq!(c.stat("lnk").unwrap().fileid, a.fileid);
    assert_eq!(c.lstat("file").unwrap().fileid, a.fileid);

    assert_eq!(status(c.stat("nope")), Status::NoEnt);
    assert_eq!(status(c.lstat("nope")), Status::NoEnt);
    assert_eq!(status(c.stat("file/x")), Status::NotDir);

    // fstat / getattr see changes made on disk
    let f = c.open("file", OpenOptions::read()).unwrap();
    assert_eq!(f.attr.fileid, a.fileid);
    std::io::Write::write_all(
        &mut std::fs::OpenOptions::new().append(true).open(d.join("file")).unwrap(),
        b"more",
    )
    .unwrap();
    assert_eq!(c.fstat(&f).unwrap().size, 1238);
    let (fh, la) = c.lookup("file").unwrap();
    assert_eq!(la.fileid, a.fileid);
    assert_eq!(c.getattr(fh).unwrap().size, 1238);
    assert_eq!(fh, f.fh, "one object, one handle");
    c.close(f).unwrap();
    let (rh, _) = c.lookup("").unwrap();
    assert_eq!(rh, c.root_handle());
}

#[test]
fn setattr_chmod_truncate_times() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::write(d.join("f"), pattern(0, 10_000, 4)).unwrap();

    // chmod
    let a = c.chmod("f", 0o600).unwrap();
    assert_eq!(a.mode, 0o600);
    assert_eq!(std::fs::metadata(d.join("f")).unwrap().permissions().mode() & 0o7777, 0o600);
    let a = c.chmod("f", 0o4755).unwrap();
    assert_eq!(a.mode & 0o777, 0o755);
    assert_eq!(c.stat("f").unwrap().mode & 0o777, 0o755);

    // truncate shrink, then grow (the grown part reads as zeros)
    let a = c.truncate("f", 100).unwrap();
    assert_eq!(a.size, 100);
    assert_eq!(std::fs::read(d.join("f")).unwrap(), pattern(0, 100, 4));
    let a = c.truncate("f", 5000).unwrap();
    assert_eq!(a.size, 5000);
    let disk = std::fs::read(d.join("f")).unwrap();
    assert_eq!(disk.len(), 5000);
    assert_eq!(&disk[..100], &pattern(0, 100, 4)[..]);
    assert!(disk[100..].iter().all(|&b| b == 0));
    let f = c.open("f", OpenOptions::read()).unwrap();
    let mut buf = vec![0xFFu8; 5000];
    assert_eq!(c.pread(&f, &mut buf, 0).unwrap(), 5000);
    assert_eq!(buf, disk);
    c.close(f).unwrap();

    // set_times
    let at: i64 = 1_000_000_000 * 1_000_000_000 + 123_456_789; // 2001-09-09, with ns
    let mt: i64 = 1_500_000_000 * 1_000_000_000 + 987_654_321;
    let a = c.set_times("f", at, mt).unwrap();
    assert_eq!((a.atime_ns, a.mtime_ns), (at, mt));
    let s = c.stat("f").unwrap();
    assert_eq!((s.atime_ns, s.mtime_ns), (at, mt));
    let md = std::fs::metadata(d.join("f")).unwrap();
    assert_eq!(md.mtime() * 1_000_000_000 + md.mtime_nsec(), mt);
    assert_eq!(md.atime() * 1_000_000_000 + md.atime_nsec(), at);
    // times before the epoch
    let a = c.set_times("f", -1_500_000_000, 0).unwrap();
    assert_eq!(a.atime_ns, -1_500_000_000);
    assert_eq!(a.mtime_ns, 0);

    // setattr through a handle, several fields at once
    use dafs_client::dafs_proto::types::setattr_mask as m;
    let (fh, _) = c.lookup("f").unwrap();
    let a = c
        .setattr(
            fh,
            dafs_proto::SetAttrs {
                mask: m::MODE | m::SIZE | m::MTIME,
                mode: 0o640,
                size: 7,
                mtime_ns: mt,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!((a.mode, a.size, a.mtime_ns), (0o640, 7, mt));
    assert_eq!(std::fs::metadata(d.join("f")).unwrap().len(), 7);

    // directories: chmod works, truncate does not
    std::fs::create_dir(d.join("dir")).unwrap();
    assert_eq!(c.chmod("dir", 0o700).unwrap().mode, 0o700);
    assert_eq!(status(c.truncate("dir", 0)), Status::IsDir);
    assert_eq!(status(c.chmod("missing", 0o600)), Status::NoEnt);
}

#[test]
fn access_bits() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::write(d.join("plain"), b"x").unwrap();
    std::fs::set_permissions(d.join("plain"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(d.join("exe"), b"x").unwrap();
    std::fs::set_permissions(d.join("exe"), std::fs::Permissions::from_mode(0o755)).unwrap();

    let rw = access_mask::READ | access_mask::WRITE;
    assert_eq!(c.access("plain", rw).unwrap() & rw, rw);
    assert_eq!(c.access("exe", access_mask::ALL).unwrap(), access_mask::ALL);
    // no x bit at all: not executable, even for root
    assert_eq!(c.access("plain", access_mask::EXECUTE).unwrap(), 0);
    // only asked-for bits are granted
    assert_eq!(c.access("exe", access_mask::READ).unwrap(), access_mask::READ);
    assert_eq!(status(c.access("missing", access_mask::READ)), Status::NoEnt);
    assert_eq!(c.access("", access_mask::ALL).unwrap() & access_mask::READ, access_mask::READ);
}

#[test]
fn mkdir_rmdir_remove() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();

    let a = c.mkdir("d1", 0o755).unwrap();
    assert!(a.is_dir());
    assert!(d.join("d1").is_dir());
    assert_eq!(a.fileid, std::fs::metadata(d.join("d1")).unwrap().ino());
    assert_eq!(status(c.mkdir("d1", 0o755)), Status::Exist);
    c.mkdir("d1/d2", 0o700).unwrap();
    assert!(d.join("d1/d2").is_dir());
    assert_eq!(status(c.mkdir("nope/d", 0o755)), Status::NoEnt);
    std::fs::write(d.join("file"), b"x").unwrap();
    assert_eq!(status(c.mkdir("file", 0o755)), Status::Exist);
    assert_eq!(status(c.mkdir("file/d", 0o755)), Status::NotDir);
    // name length limits
    let long = "n".repeat(255);
    c.mkdir(&long, 0o755).unwrap();
    assert!(d.join(&long).is_dir());
    c.rmdir(&long).unwrap();
    assert_eq!(status(c.mkdir(&"n".repeat(256), 0o755)), Status::NameTooLong);
    assert_eq!(
        status(c.open(&"n".repeat(256), OpenOptions::read_write().create(true))),
        Status::NameTooLong
    );

    // rmdir
    assert_eq!(status(c.rmdir("d1")), Status::NotEmpty);
    assert!(d.join("d1/d2").is_dir());
    assert_eq!(status(c.rmdir("file")), Status::NotDir);
    assert!(d.join("file").is_file());
    assert_eq!(status(c.rmdir("missing")), Status::NoEnt);
    c.rmdir("d1/d2").unwrap();
    assert!(!d.join("d1/d2").exists());
    c.rmdir("d1").unwrap();
    assert!(!d.join("d1").exists());
    assert_eq!(status(c.stat("d1")), Status::NoEnt);

    // remove
    std::fs::create_dir(d.join("adir")).unwrap();
    assert_eq!(status(c.remove("adir")), Status::IsDir);
    assert!(d.join("adir").is_dir());
    assert_eq!(status(c.remove("missing")), Status::NoEnt);
    c.remove("file").unwrap();
    assert!(!d.join("file").exists());
    assert_eq!(status(c.remove("file")), Status::NoEnt);
    // removing a symlink removes the link, not its target
    std::fs::write(d.join("target"), b"t").unwrap();
    std::os::unix::fs::symlink("target", d.join("sl")).unwrap();
    c.remove("sl").unwrap();
    assert!(std::fs::symlink_metadata(d.join("sl")).is_err());
    assert!(d.join("target").is_file());
    // a symlink to a directory is removed with remove, not rmdir
    std::os::unix::fs::symlink("adir", d.join("dl")).unwrap();
    assert_eq!(status(c.rmdir("dl")), Status::NotDir);
    c.remove("dl").unwrap();
    assert!(d.join("adir").is_dir());
    // the root cannot be named
    assert!(matches!(c.rmdir("/"), Err(Error::InvalidArgument(_))));
    assert!(matches!(c.remove(""), Err(Error::InvalidArgument(_))));
}

#[test]
fn rename_cases() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::write(d.join("a"), b"A").unwrap();
    std::fs::write(d.join("b"), b"B").unwrap();
    std::fs::create_dir(d.join("dir1")).unwrap();
    std::fs::create_dir(d.join("dir2")).unwrap();
    std::fs::write(d.join("dir1/inside"), b"I").unwrap();
    let a_ino = std::fs::metadata(d.join("a")).unwrap().ino();

    // simple file rename
    c.rename("a", "a2").unwrap();
    assert!(!d.join("a").exists());
    assert_eq!(std::fs::read(d.join("a2")).unwrap(), b"A");
    assert_eq!(c.stat("a2").unwrap().fileid, a_ino);
    // into another directory
    c.rename("a2", "dir2/a3").unwrap();
    assert_eq!(std::fs::read(d.join("dir2/a3")).unwrap(), b"A");
    // over an existing file: replaces it
    c.rename("dir2/a3", "b").unwrap();
    assert_eq!(std::fs::read(d.join("b")).unwrap(), b"A");
    assert!(!d.join("dir2/a3").exists());
    // a directory, with contents
    c.rename("dir1", "dir2/moved").unwrap();
    assert!(!d.join("dir1").exists());
    assert_eq!(std::fs::read(d.join("dir2/moved/inside")).unwrap(), b"I");
    // a handle survives the rename of its object
    let (fh, _) = c.lookup("dir2/moved/inside").unwrap();
    c.rename("dir2/moved", "top").unwrap();
    assert_eq!(c.getattr(fh).unwrap().size, 1);

    // errors
    assert_eq!(status(c.rename("missing", "x")), Status::NoEnt);
    assert_eq!(status(c.rename("b", "nodir/x")), Status::NoEnt);
    std::fs::create_dir(d.join("full")).unwrap();
    std::fs::write(d.join("full/f"), b"").unwrap();
    assert_eq!(status(c.rename("b", "full")), Status::IsDir);
    assert_eq!(status(c.rename("top", "full")), Status::NotEmpty);
    assert_eq!(status(c.rename("top", "b")), Status::NotDir);
    // cannot move a directory beneath itself
    assert!(c.rename("top", "top/sub").is_err());
    assert!(d.join("top").is_dir());

    // renames that would leave the export are rejected, and nothing moves
    let e = c.rename("b", "../x").unwrap_err();
    assert_eq!(e.status(), Some(Status::Escape), "{e:?}");
    let e = c.rename("b", "top/../../x").unwrap_err();
    assert_eq!(e.status(), Some(Status::Escape), "{e:?}");
    assert!(matches!(c.rename("b", ".."), Err(Error::InvalidArgument(_))));
    assert!(matches!(c.rename("b", "top/.."), Err(Error::InvalidArgument(_))));
    assert_eq!(status(c.rename("../etc/passwd", "stolen")), Status::Escape);
    assert!(d.join("b").is_file());
    assert!(!d.parent().unwrap().join("x").exists());
    assert!(!d.join("stolen").exists());
}

#[test]
fn hard_links() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::write(d.join("orig"), b"payload").unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();

    let a = c.link("orig", "sub/alias").unwrap();
    assert_eq!(a.nlink, 2);
    let o = c.stat("orig").unwrap();
    let l = c.stat("sub/alias").unwrap();
    assert_eq!(o.fileid, l.fileid);
    assert_eq!(o.nlink, 2);
    assert_eq!(std::fs::metadata(d.join("orig")).unwrap().nlink(), 2);
    assert_eq!(std::fs::metadata(d.join("sub/alias")).unwrap().ino(), o.fileid);
    // writes through one name show through the other
    let f = c.open("sub/alias", OpenOptions::read_write()).unwrap();
    c.pwrite(&f, b"PAY", 0).unwrap();
    c.close(f).unwrap();
    assert_eq!(std::fs::read(d.join("orig")).unwrap(), b"PAYload");
    // removing one name keeps the other (and its handle) alive
    let (fh, _) = c.lookup("orig").unwrap();
    c.remove("sub/alias").unwrap();
    assert_eq!(c.stat("orig").unwrap().nlink, 1);
    assert_eq!(c.getattr(fh).unwrap().nlink, 1);

    assert_eq!(status(c.link("orig", "orig")), Status::Exist);
    assert_eq!(status(c.link("missing", "x")), Status::NoEnt);
    assert_eq!(status(c.link("orig", "nodir/x")), Status::NoEnt);
    assert_eq!(status(c.link("sub", "subalias")), Status::Perm);
    assert!(!d.join("subalias").exists());
}

#[test]
fn symlinks_and_readlink() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::write(d.join("target"), b"0123456789").unwrap();
    std::fs::create_dir(d.join("dir")).unwrap();

    let a = c.symlink("target", "lnk").unwrap();
    assert_eq!(a.ftype, FileType::Symlink);
    assert_eq!(std::fs::read_link(d.join("lnk")).unwrap().to_str().unwrap(), "target");
    assert_eq!(c.readlink("lnk").unwrap(), b"target");
    assert_eq!(c.lstat("lnk").unwrap().ftype, FileType::Symlink);
    assert_eq!(c.lstat("lnk").unwrap().size, 6);
    let s = c.stat("lnk").unwrap();
    assert_eq!(s.ftype, FileType::Regular);
    assert_eq!(s.size, 10);
    // open and read through the link
    let f = c.open("lnk", OpenOptions::read()).unwrap();
    let mut b = [0u8; 10];
    assert_eq!(c.pread(&f, &mut b, 0).unwrap(), 10);
    assert_eq!(&b, b"0123456789");
    c.close(f).unwrap();

    // relative link in a subdirectory, and a directory link used as a path component
    c.symlink("../target", "dir/up").unwrap();
    assert_eq!(c.stat("dir/up").unwrap().size, 10);
    c.symlink("dir", "dl").unwrap();
    assert_eq!(c.stat("dl/up").unwrap().size, 10);
    assert!(c.stat("dl").unwrap().is_dir());

    // dangling link: lstat works, stat does not
    c.symlink("nowhere", "dangling").unwrap();
    assert_eq!(c.lstat("dangling").unwrap().ftype, FileType::Symlink);
    assert_eq!(status(c.stat("dangling")), Status::NoEnt);
    assert_eq!(c.readlink("dangling").unwrap(), b"nowhere");

    // errors
    assert_eq!(status(c.symlink("x", "lnk")), Status::Exist);
    assert_eq!(status(c.symlink("x", "nodir/l")), Status::NoEnt);
    assert_eq!(status(c.readlink("target")), Status::Inval);
    assert_eq!(status(c.readlink("missing")), Status::NoEnt);

    // a link may name anything, but following it must stay in the export
    c.symlink("/etc", "abs").unwrap();
    assert_eq!(c.readlink("abs").unwrap(), b"/etc");
    assert_eq!(status(c.stat("abs/passwd")), Status::Escape);
}

#[test]
fn lookup_parent_chain() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    std::fs::create_dir_all(d.join("a/b")).unwrap();
    std::fs::write(d.join("a/file"), b"").unwrap();

    let (b, _) = c.lookup("a/b").unwrap();
    let (a, aattr) = c.lookup_parent(b).unwrap();
    assert_eq!(aattr.fileid, std::fs::metadata(d.join("a")).unwrap().ino());
    assert_eq!(a, c.lookup("a").unwrap().0);
    let (r, rattr) = c.lookup_parent(a).unwrap();
    assert_eq!(rattr.fileid, std::fs::metadata(d).unwrap().ino());
    assert_eq!(r, c.root_handle());
    // the export root has no parent
    assert_eq!(status(c.lookup_parent(r)), Status::NoEnt);
    assert_eq!(status(c.lookup_parent(c.root_handle())), Status::NoEnt);
    // parents of non-directories are not defined
    let (f, _) = c.lookup("a/file").unwrap();
    assert_eq!(status(c.lookup_parent(f)), Status::NotDir);
}

#[test]
fn readdir_statfs_fsync_null() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let d = srv.dir();
    assert!(c.readdir("").unwrap().is_empty(), "fresh export is empty");
    for i in 0..50 {
        std::fs::write(d.join(format!("f{i:02}")), b"").unwrap();
    }
    std::fs::create_dir(d.join("sub")).unwrap();
    std::os::unix::fs::symlink("f00", d.join("sl")).unwrap();
    std::fs::write(d.join("sub/inner"), b"").unwrap();

    let ents = c.readdir("").unwrap();
    let names: BTreeSet<String> = ents.iter().map(|e| e.name_lossy()).collect();
    let disk: BTreeSet<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, disk);
    assert_eq!(ents.len(), 52, "no duplicates, no '.'/'..'");
    for e in &ents {
        let md = std::fs::symlink_metadata(d.join(e.name_lossy())).unwrap();
        assert_eq!(e.fileid, md.ino(), "{}", e.name_lossy());
        let want = if md.is_dir() {
            FileType::Directory
        } else if md.file_type().is_symlink() {
            FileType::Symlink
        } else {
            FileType::Regular
        };
        assert_eq!(e.ftype, want, "{}", e.name_lossy());
    }
    let sub = c.readdir("sub").unwrap();
    assert_eq!(sub.len(), 1);
    assert_eq!(sub[0].name, b"inner");
    assert_eq!(status(c.readdir("f00")), Status::NotDir);
    assert_eq!(status(c.readdir("missing")), Status::NoEnt);

    // statfs agrees with the kernel's view of the export's file system
    let s = c.statfs().unwrap();
    assert!(
        s.total_bytes > 0 && s.free_bytes <= s.total_bytes && s.avail_bytes <= s.free_bytes,
        "{s:?}"
    );
    assert!(s.block_size > 0);
    assert_eq!(s.name_max, 255);
    // SAFETY: statvfs on a NUL-terminated path into a zeroed struct.
    let kv = unsafe {
        let p = std::ffi::CString::new(d.to_str().unwrap()).unwrap();
        let mut v: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(p.as_ptr(), &mut v), 0);
        v
    };
    assert_eq!(s.total_bytes, kv.f_blocks * kv.f_frsize);

    // COMMIT
    let f = c.open("f01", OpenOptions::read_write()).unwrap();
    c.pwrite(&f, b"durable", 0).unwrap();
    c.fsync(&f).unwrap();
    assert_eq!(std::fs::read(d.join("f01")).unwrap(), b"durable");
    c.close(f).unwrap();
    // fsync on a read-only open works too
    let f = c.open("f01", OpenOptions::read()).unwrap();
    c.fsync(&f).unwrap();
    c.close(f).unwrap();

    // NULL
    for _ in 0..10 {
        c.null().unwrap();
    }
    let st = c.stats();
    assert!(st.requests > 10);
    assert_eq!(st.errors, 0, "blocking namespace errors are not I/O errors");
}

for_each_provider!(data_path_blocking, open_mode_is_enforced, closed_open_id_is_bad);
