//! Calls by handle through a cluster URL, over real dafsd nodes: a directory handle
//! stands for a virtual directory (names relative to it are routed by the full
//! path's hash), a file's handle reaches the node holding it, listings merge every
//! node's in pages, renames across nodes leave the old handle STALE, and handles that
//! are not this client's answer BADHANDLE (as a single server answers).

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;

use common::cluster::{Cluster, Options};
use dafs_client::dafs_proto::types::{setattr_mask, SetAttrs};
use dafs_client::dafs_proto::{FileHandle, FileType, Status};
use dafs_client::{Error, OpenOptions};

fn leaf(path: &str) -> &[u8] {
    path.rsplit('/').next().unwrap().as_bytes()
}

#[test]
fn handles_route_names_by_their_full_path_across_nodes() {
    // State directories: a cross-node rename keeps its intent there.
    let cl = Cluster::start_with(3, Options { state_dirs: true, ..Default::default() });
    let mut c = cl.client();
    let root = c.root_handle();
    assert_eq!(c.getattr(root).unwrap().ftype, FileType::Directory);
    let (d, attr) = c.create_at(root, b"d", FileType::Directory, 0o755, true).unwrap();
    assert_eq!(attr.ftype, FileType::Directory);
    assert_eq!(cl.holders("d"), vec![0, 1, 2], "a directory exists on every node");
    // One file per node, created and written by handle.
    let paths: Vec<String> = (0..3).map(|i| cl.name_on(&c, "d/f", i)).collect();
    for (i, p) in paths.iter().enumerate() {
        let (fh, _) = c.create_at(d, leaf(p), FileType::Regular, 0o644, true).unwrap();
        let f = c.open_handle(fh, OpenOptions::read_write()).unwrap();
        c.pwrite(&f, p.as_bytes(), 0).unwrap();
        c.close(f).unwrap();
        assert_eq!(cl.holders(p), vec![i], "{p}");
        // Looked up again: the same handle, with the node's attributes.
        let (again, a) = c.lookup_at(d, leaf(p), false).unwrap();
        assert_eq!(again, fh);
        assert_eq!(a.size, p.len() as u64);
        assert_eq!(c.getattr(fh).unwrap().size, p.len() as u64);
        // open_at by name reaches the same file.
        let f = c.open_at(d, leaf(p), OpenOptions::read()).unwrap();
        let mut buf = [0u8; 32];
        let n = c.pread(&f, &mut buf, 0).unwrap();
        assert_eq!(&buf[..n], p.as_bytes());
        c.close(f).unwrap();
    }
    // The merged listing, two entries a page.
    let mut names = BTreeSet::new();
    let mut cookie = 0;
    loop {
        let (page, eof) = c.readdir_at(d, cookie, 2).unwrap();
        assert!(page.len() <= 2);
        for e in &page {
            assert!(names.insert(e.entry.name_lossy()), "listed once");
            cookie = e.cookie;
        }
        if eof {
            break;
        }
    }
    let want: BTreeSet<String> =
        paths.iter().map(|p| String::from_utf8(leaf(p).to_vec()).unwrap()).collect();
    assert_eq!(names, want);
    // A directory's mode is set on every node.
    let set = SetAttrs { mask: setattr_mask::MODE, mode: 0o711, ..Default::default() };
    assert_eq!(c.setattr(d, set).unwrap().mode & 0o7777, 0o711);
    for n in &cl.nodes {
        let m = std::fs::metadata(n.export_dir().join("d")).unwrap().permissions().mode();
        assert_eq!(m & 0o7777, 0o711);
    }
    // Rename across nodes: the file moves to the new name's node; the old handle is
    // STALE, the new name looked up afresh.
    let (old_fh, _) = c.lookup_at(d, leaf(&paths[0]), false).unwrap();
    let to = cl.name_on(&c, "d/moved", 1);
    c.rename_at(d, leaf(&paths[0]), d, leaf(&to)).unwrap();
    assert_eq!(cl.holders(&to), vec![1]);
    assert!(cl.holders(&paths[0]).is_empty());
    assert!(matches!(c.getattr(old_fh), Err(Error::Status(Status::Stale))));
    let (new_fh, a) = c.lookup_at(d, leaf(&to), false).unwrap();
    assert_eq!(a.size, paths[0].len() as u64);
    assert_eq!(c.getattr(new_fh).unwrap().size, paths[0].len() as u64);
    // rmdir refuses a directory non-empty on any node, then removes it everywhere.
    assert!(matches!(c.rmdir_at(root, b"d"), Err(Error::Status(Status::NotEmpty))));
    for p in [&paths[1], &paths[2], &to] {
        c.remove_at(d, leaf(p)).unwrap();
    }
    assert!(matches!(c.lookup_at(d, leaf(&to), false), Err(Error::Status(Status::NoEnt))));
    c.rmdir_at(root, b"d").unwrap();
    assert!(cl.holders("d").is_empty());
    assert!(matches!(c.getattr(d), Err(Error::Status(Status::Stale))));
}

#[test]
fn handles_that_are_not_this_clients_answer_badhandle() {
    let cl = Cluster::start(2);
    let mut c = cl.client();
    let mut other = cl.client();
    let root = c.root_handle();
    let (fh, _) = c.create_at(root, b"x", FileType::Regular, 0o644, false).unwrap();
    // Bytes that are no front handle, and another client's handles.
    for bad in [FileHandle([0; FileHandle::LEN]), FileHandle([0xab; FileHandle::LEN])] {
        assert!(matches!(c.getattr(bad), Err(Error::Status(Status::BadHandle))));
    }
    assert!(matches!(other.getattr(fh), Err(Error::Status(Status::BadHandle))));
    assert!(matches!(other.lookup_at(root, b"x", false), Err(Error::Status(Status::BadHandle))));
    // A file's handle is no directory; names are one component.
    assert!(matches!(c.lookup_at(fh, b"y", false), Err(Error::Status(Status::NotDir))));
    assert!(matches!(c.lookup_at(root, b"a/b", false), Err(Error::InvalidArgument(_))));
    // The other client's own root works for it.
    let oroot = other.root_handle();
    assert_eq!(other.lookup_at(oroot, b"x", false).unwrap().1.ftype, FileType::Regular);
}
