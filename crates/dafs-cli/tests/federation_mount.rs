//! `dafs mount` of a cluster URL (three real dafsd nodes): the mounted tree is the
//! union namespace — files of every node, each on the disk of the node the hash
//! names — with renames across nodes and rmdir refusing a directory that is
//! non-empty on another node. Needs root and /dev/fuse (fails, never skips, without).

#[macro_use]
mod common;

use common::cluster::{Cluster, Options};
use common::mount::Mount;

#[test]
fn a_mounted_cluster_shows_one_namespace_over_every_node() {
    let cl = Cluster::start_with(3, Options { state_dirs: true, ..Default::default() });
    let c = cl.client();
    let m = Mount::new(&cl.url());
    let root = m.path();
    std::fs::create_dir(root.join("d")).unwrap();
    assert_eq!(cl.holders("d"), vec![0, 1, 2]);
    let paths: Vec<String> = (0..3).map(|i| cl.name_on(&c, "d/f", i)).collect();
    for (i, p) in paths.iter().enumerate() {
        std::fs::write(root.join(p), p.as_bytes()).unwrap();
        assert_eq!(cl.holders(p), vec![i], "{p} on the node the hash names");
        assert_eq!(std::fs::read(root.join(p)).unwrap(), p.as_bytes());
        assert_eq!(std::fs::metadata(root.join(p)).unwrap().len(), p.len() as u64);
    }
    let mut listed: Vec<String> = std::fs::read_dir(root.join("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    listed.sort();
    let mut want: Vec<String> = paths.iter().map(|p| p[2..].to_string()).collect();
    want.sort();
    assert_eq!(listed, want, "the merged listing");
    // Rename to a name another node holds: the file moves there.
    let to = cl.name_on(&c, "d/moved", 2);
    assert_ne!(cl.holders(&paths[0]), vec![2]);
    std::fs::rename(root.join(&paths[0]), root.join(&to)).unwrap();
    assert_eq!(cl.holders(&to), vec![2]);
    assert!(cl.holders(&paths[0]).is_empty());
    assert_eq!(std::fs::read(root.join(&to)).unwrap(), paths[0].as_bytes());
    assert!(!root.join(&paths[0]).exists());
    // rmdir of a directory non-empty on some node: ENOTEMPTY; empty: gone everywhere.
    let e = std::fs::remove_dir(root.join("d")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY));
    for p in [&paths[1], &paths[2], &to] {
        std::fs::remove_file(root.join(p)).unwrap();
    }
    std::fs::remove_dir(root.join("d")).unwrap();
    assert!(cl.holders("d").is_empty());
    assert!(!root.join("d").exists());
}
