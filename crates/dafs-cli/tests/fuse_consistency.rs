//! What clients of one export see of each other through FUSE mounts (issue 19): appends
//! with O_APPEND from two mounts and a preloaded process at once stay whole records (one
//! append per write(2), whatever the kernel would split), and an open sees what another
//! mount wrote and closed before it even within the attribute lifetime (close-to-open).
//! Needs root and /dev/fuse, like scripts/test-fuse.sh.

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;

use common::mount::Mount;
use common::{dafs_bin, TestServer};

/// An odd size, so that records straddle page boundaries in the file.
const RECORD_BYTES: usize = 317;
const RECORDS_PER_WRITER: usize = 1500;

fn record(writer: usize, seq: usize) -> Vec<u8> {
    let mut r = format!("w{writer:02} s{seq:06} ").into_bytes();
    r.resize(RECORD_BYTES - 1, b'a' + (writer as u8 % 26));
    r.push(b'\n');
    r
}

fn append_records(path: &Path, writer: usize) {
    let mut f =
        std::fs::OpenOptions::new().append(true).custom_flags(libc::O_CLOEXEC).open(path).unwrap();
    for seq in 0..RECORDS_PER_WRITER {
        // One write(2) per record.
        f.write_all(&record(writer, seq)).unwrap();
    }
}

#[test]
fn appends_from_two_mounts_and_the_preload_library_stay_whole() {
    let srv = TestServer::start(&[]);
    let url = format!("dafs://{}/", srv.addr());
    let (a, b) = (Mount::new(&url), Mount::new(&url));
    std::fs::write(srv.dir().join("log"), b"").unwrap();
    let preload = dafs_bin().with_file_name("libdafs_preload.so");
    assert!(preload.exists(), "build dafs-preload first ({})", preload.display());
    // The preloaded writer: python's os.write on an O_APPEND descriptor, one record a call.
    let script = format!(
        "import os\nfd = os.open('/dafsp/log', os.O_WRONLY | os.O_APPEND)\n\
         for s in range({RECORDS_PER_WRITER}):\n    \
         r = ('w04 s%06d ' % s).encode()\n    \
         r = r + b'e' * ({RECORD_BYTES} - 1 - len(r)) + b'\\n'\n    \
         assert os.write(fd, r) == len(r)\n"
    );
    let mut py = Command::new("python3")
        .args(["-c", &script])
        .env("LD_PRELOAD", &preload)
        .env("DAFS_MOUNT", format!("/dafsp={url}"))
        .spawn()
        .expect("python3");
    std::thread::scope(|s| {
        for (w, m) in [(0, &a), (1, &a), (2, &b), (3, &b)] {
            let p = m.path().join("log");
            s.spawn(move || append_records(&p, w));
        }
    });
    assert!(py.wait().unwrap().success(), "the preloaded writer failed");
    let data = std::fs::read(srv.dir().join("log")).unwrap();
    assert_eq!(data.len(), 5 * RECORDS_PER_WRITER * RECORD_BYTES, "every byte appended once");
    let mut seen = HashSet::new();
    for (i, r) in data.chunks(RECORD_BYTES).enumerate() {
        let text = String::from_utf8_lossy(r);
        let w: usize = text[1..3].parse().unwrap_or_else(|_| panic!("record {i} torn: {text:?}"));
        let seq: usize =
            text[5..11].parse().unwrap_or_else(|_| panic!("record {i} torn: {text:?}"));
        let want = if w == 4 {
            let mut r = format!("w04 s{seq:06} ").into_bytes();
            r.resize(RECORD_BYTES - 1, b'e');
            r.push(b'\n');
            r
        } else {
            record(w, seq)
        };
        assert_eq!(r, &want[..], "record {i} torn or mixed");
        assert!(seen.insert((w, seq)), "record {w}/{seq} twice");
    }
}

#[test]
fn an_open_sees_what_another_mount_wrote_and_closed() {
    let srv = TestServer::start(&[]);
    let url = format!("dafs://{}/", srv.addr());
    // A long attribute lifetime: only close-to-open revalidation can show the growth.
    let opts = ["-o", "attr_ttl_ms=60000"];
    let (a, b) = (Mount::with_options(&url, &opts), Mount::with_options(&url, &opts));
    std::fs::write(a.path().join("f"), b"0123456789").unwrap();
    let read_b = || {
        let mut s = String::new();
        std::fs::File::open(b.path().join("f")).unwrap().read_to_string(&mut s).unwrap();
        s
    };
    assert_eq!(read_b(), "0123456789");
    for round in 0..3 {
        let mut f = std::fs::OpenOptions::new().append(true).open(a.path().join("f")).unwrap();
        f.write_all(b"abcdefghij").unwrap();
        drop(f); // close: what it wrote is on the server
        let got = read_b();
        assert_eq!(got.len(), 10 * (round + 2), "round {round}: the open saw {got:?}");
        // the size the kernel reports is the new one too
        assert_eq!(std::fs::metadata(b.path().join("f")).unwrap().len() as usize, got.len());
    }
}
