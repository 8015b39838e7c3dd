//! Keep include/dafs.h and the exports in sync (names and version), and check the C
//! tests call every declared function.
use std::collections::BTreeSet;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn exported() -> BTreeSet<String> {
    // Every source file of the crate (the exports live in lib.rs and its modules).
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let src: String = files.iter().map(|p| std::fs::read_to_string(p).unwrap() + "\n").collect();
    let mut names = BTreeSet::new();
    let mut no_mangle = false;
    for line in src.lines() {
        let l = line.trim();
        if l == "#[no_mangle]" {
            no_mangle = true;
            continue;
        }
        if let Some(i) = l.find("extern \"C\" fn dafs_") {
            assert!(l.starts_with("pub "), "exported function is not pub: {l}");
            assert!(no_mangle, "extern \"C\" fn without #[no_mangle]: {l}");
            let rest = &l[i + "extern \"C\" fn ".len()..];
            let name: String =
                rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            names.insert(name);
        }
        no_mangle = false;
    }
    names
}

/// Every `DAFS_API <type> dafs_xxx(` declaration of the header (declarations may
/// span lines: the name is the first `dafs_` identifier followed by `(`).
fn declared() -> BTreeSet<String> {
    let h = std::fs::read_to_string(root().join("include/dafs.h")).unwrap();
    let mut names = BTreeSet::new();
    // Declarations start a line with `DAFS_API ` (the #define lines do not).
    for (i, _) in h.match_indices("\nDAFS_API ") {
        let decl = &h[i + "\nDAFS_API ".len()..];
        let decl = &decl[..decl.find(';').expect("declaration ends with ;")];
        let open = decl.find('(').expect("function declaration");
        let head = &decl[..open];
        let name: String =
            head.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap().to_string();
        assert!(name.starts_with("dafs_"), "declaration without a dafs_ name: {decl}");
        names.insert(name);
    }
    names
}

#[test]
fn header_matches_exports() {
    let e = exported();
    let d = declared();
    assert!(e.len() >= 30, "found only {} exports", e.len());
    let missing_in_header: Vec<_> = e.difference(&d).collect();
    let missing_in_lib: Vec<_> = d.difference(&e).collect();
    assert!(
        missing_in_header.is_empty(),
        "exported but not declared in include/dafs.h: {missing_in_header:?}"
    );
    assert!(
        missing_in_lib.is_empty(),
        "declared in include/dafs.h but not exported: {missing_in_lib:?}"
    );
}

#[test]
fn c_tests_call_every_function() {
    // Every C file of tests/c: test_capi.c and the tests by area it links
    // (capi_*.c), and the programs of later sections (test_open_ext.c for the open
    // modes). Read from the directory, so a new file is never left out.
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/c"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "found only {files:?} in tests/c");
    let t: String = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    let uncalled: Vec<_> =
        declared().into_iter().filter(|n| !t.contains(&format!("{n}("))).collect();
    assert!(uncalled.is_empty(), "the C tests (tests/c/*.c) never call: {uncalled:?}");
}

#[test]
fn header_version_matches_crate() {
    let h = std::fs::read_to_string(root().join("include/dafs.h")).unwrap();
    let v = env!("CARGO_PKG_VERSION");
    assert!(
        h.contains(&format!("#define DAFS_VERSION \"{v}\"")),
        "DAFS_VERSION in include/dafs.h is not {v}"
    );
    let mut parts = v.split('.');
    for (m, p) in ["MAJOR", "MINOR", "PATCH"].iter().zip(&mut parts) {
        assert!(
            h.contains(&format!("#define DAFS_VERSION_{m} {p}\n")),
            "DAFS_VERSION_{m} is not {p}"
        );
    }
    assert!(
        h.contains("#define DAFS_API_VERSION 1\n"),
        "DAFS_API_VERSION changed: update the soname in build.rs"
    );
    let pc = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("dafs.pc.in"))
        .unwrap();
    assert!(pc.contains("@VERSION@"), "dafs.pc.in takes its version from the build");
}

#[test]
fn rename_flags_match_the_protocol_and_the_header() {
    use super::{DAFS_RENAME_EXCHANGE, DAFS_RENAME_NOREPLACE};
    use dafs_proto::rename_flags;
    assert_eq!(DAFS_RENAME_NOREPLACE, rename_flags::NOREPLACE);
    assert_eq!(DAFS_RENAME_EXCHANGE, rename_flags::EXCHANGE);
    let h = std::fs::read_to_string(root().join("include/dafs.h")).unwrap();
    for (name, v) in [("NOREPLACE", DAFS_RENAME_NOREPLACE), ("EXCHANGE", DAFS_RENAME_EXCHANGE)] {
        assert!(
            h.contains(&format!("#define DAFS_RENAME_{name} {v}u")),
            "DAFS_RENAME_{name} in include/dafs.h is not {v}u"
        );
    }
}

#[test]
fn struct_layouts_match_the_header() {
    // The same sizes are asserted on the C side (tests/c/test_capi.c).
    use std::mem::size_of;
    assert_eq!(size_of::<super::dafs_options_t>(), 72);
    assert_eq!(size_of::<super::dafs_attr_t>(), 88);
    assert_eq!(size_of::<super::dafs_completion_t>(), 24);
    assert_eq!(size_of::<super::dafs_stats_t>(), 208);
    assert_eq!(size_of::<super::dafs_file_seg_t>(), 16);
    assert_eq!(size_of::<super::dafs_mem_seg_t>(), 24);
    assert_eq!(size_of::<super::dafs_batch_io_t>(), 48);
    assert_eq!(size_of::<super::dafs_lock_info_t>(), 32);
}

#[test]
fn strerror_and_version() {
    let s = unsafe { std::ffi::CStr::from_ptr(super::dafs_strerror(-libc::ENOENT)) };
    assert_eq!(s.to_str().unwrap(), "No such file or directory");
    let s = unsafe { std::ffi::CStr::from_ptr(super::dafs_strerror(100000)) };
    assert_eq!(s.to_str().unwrap(), "unknown error");
    let v = unsafe { std::ffi::CStr::from_ptr(super::dafs_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn null_pointers_are_refused() {
    use super::*;
    use crate::io::open_options;
    unsafe {
        assert_eq!(
            dafs_connect(std::ptr::null(), std::ptr::null(), std::ptr::null_mut()),
            -libc::EINVAL
        );
        let mut c: *mut dafs_client_t = std::ptr::dangling_mut();
        assert_eq!(dafs_connect(std::ptr::null(), std::ptr::null(), &mut c), -libc::EINVAL);
        assert!(c.is_null());
        assert_eq!(
            dafs_pread(std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), 1, 0),
            -(libc::EINVAL as isize)
        );
        assert_eq!(dafs_disconnect(std::ptr::null_mut()), 0);
        assert_eq!(dafs_inline_threshold(std::ptr::null()), 0);
        assert_eq!(dafs_inline_threshold_unregistered(std::ptr::null()), 0);
        assert_eq!(dafs_cg_poll(std::ptr::null_mut(), 1, std::ptr::null_mut(), 1), -libc::EINVAL);
    }
    assert!(open_options(DAFS_O_ACCMODE, 0).is_err());
    assert!(open_options(0x4000_0000, 0).is_err());
    assert!(open_options(DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_EXCL | DAFS_O_TRUNC, 0o600).is_ok());
    assert!(open_options(DAFS_O_WRONLY | DAFS_O_APPEND, 0).is_ok());
    unsafe {
        assert_eq!(
            dafs_batch_submit(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                1,
                std::ptr::null(),
                0,
                0,
                0
            ),
            -libc::EINVAL
        );
        assert_eq!(
            dafs_append(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null(),
                0,
                std::ptr::null_mut()
            ),
            -(libc::EINVAL as isize)
        );
    }
    assert_eq!(dafs_batch_max(std::ptr::null()), 0);
    assert_eq!(check_cg(0).err(), Some(libc::EINVAL));
}
