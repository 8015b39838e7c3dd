//! Scale against a real `dafsd`: sparse files past 1 GiB (and past 4 GiB, where 32-bit
//! truncation would show), single I/Os larger than `io_bytes_max()`, and a directory
//! with over ten thousand entries.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::{FileExt, MetadataExt};

use common::{pattern, Provider, TestServer};
use dafs_client::{Client, IoBuf, OpenOptions};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Read `len` bytes at `off` from the file on disk (short at end of file).
fn disk_read(path: &std::path::Path, off: u64, len: usize) -> Vec<u8> {
    let f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = f.read_at(&mut buf[got..], off + got as u64).unwrap();
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    buf
}

/// Read back `blocks` (offset, seed) of 1 MiB with blocking pread and with registered
/// regions; `holes` must read as zeros.
fn check_blocks(c: &mut Client, f: &dafs_client::File, blocks: &[(u64, u8)], holes: &[u64]) {
    let mut buf = vec![0u8; MIB as usize];
    for &(off, seed) in blocks {
        buf.fill(0xAA);
        assert_eq!(c.pread(f, &mut buf, off).unwrap(), MIB as usize, "pread at {off}");
        assert!(buf == pattern(off, MIB as usize, seed), "pread at {off}: wrong data");
    }
    for &off in holes {
        buf.fill(0xAA);
        assert_eq!(c.pread(f, &mut buf, off).unwrap(), MIB as usize, "hole at {off}");
        assert!(buf.iter().all(|&b| b == 0), "hole at {off} is not zeros");
    }
    // registered regions, all in flight at once
    let cg = c.create_cg().unwrap();
    let regions: Vec<_> =
        blocks.iter().map(|_| c.alloc_registered(MIB as usize).unwrap()).collect();
    for (i, (&(off, _), r)) in blocks.iter().zip(&regions).enumerate() {
        c.region_mut(*r).unwrap().fill(0xAA);
        c.submit_read(
            f,
            off,
            IoBuf::Region { region: *r, offset: 0, len: MIB as usize },
            cg,
            i as u64,
        )
        .unwrap();
    }
    let done = c.wait_all(cg).unwrap();
    assert_eq!(done.len(), blocks.len());
    for d in done {
        let (off, seed) = blocks[d.user_data as usize];
        assert_eq!(*d.result.as_ref().unwrap(), MIB as usize, "region read at {off}");
        assert!(
            c.region(regions[d.user_data as usize]).unwrap()
                == &pattern(off, MIB as usize, seed)[..],
            "region read at {off}: wrong data"
        );
    }
    for r in regions {
        c.unregister(r).unwrap();
    }
    c.destroy_cg(cg).unwrap();
}

fn sparse_file_past_1gib(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let path = srv.dir().join("sparse");
    let size = GIB + GIB / 2;
    let blocks: Vec<(u64, u8)> = vec![
        (0, 1),
        (2 * MIB - 7, 2), // unaligned, overlaps nothing else
        (700 * MIB + 123, 3),
        (GIB - MIB / 2, 4),        // straddles 1 GiB
        (GIB + 4 * MIB + 4096, 5), // just past 1 GiB
        (size - 4 * MIB + 1, 6),   // near the very end
    ];
    let holes = [300 * MIB, GIB - 2 * MIB, GIB + 2 * MIB, size - 2 * MIB];
    let mut spans: Vec<u64> = blocks.iter().map(|b| b.0).chain([size - MIB]).chain(holes).collect();
    spans.sort();
    assert!(spans.windows(2).all(|w| w[1] >= w[0] + MIB), "test blocks and holes must not overlap");
    let f = c.open("sparse", OpenOptions::read_write().create(true)).unwrap();
    for &(off, seed) in &blocks {
        assert_eq!(c.pwrite(&f, &pattern(off, MIB as usize, seed), off).unwrap(), MIB as usize);
    }
    // the size is set by truncate (grows the file past the last block)
    let a = c.truncate("sparse", size).unwrap();
    assert_eq!(a.size, size);
    // ... and a final block right at the end, written through a registered region
    let last = (size - MIB, 7u8);
    let r = c.alloc_registered(MIB as usize).unwrap();
    c.region_mut(r).unwrap().copy_from_slice(&pattern(last.0, MIB as usize, last.1));
    let cg = c.create_cg().unwrap();
    c.submit_write(&f, last.0, IoBuf::Region { region: r, offset: 0, len: MIB as usize }, cg, 0)
        .unwrap();
    assert_eq!(*c.wait_one(cg, None).unwrap().unwrap().result.as_ref().unwrap(), MIB as usize);
    c.unregister(r).unwrap();
    c.fsync(&f).unwrap();

    let md = std::fs::metadata(&path).unwrap();
    assert_eq!(md.len(), size);
    assert!(
        md.blocks() * 512 < 256 * MIB,
        "the file must stay sparse ({} bytes allocated)",
        md.blocks() * 512
    );
    let st = c.fstat(&f).unwrap();
    assert_eq!(st.size, size);
    assert!(st.used < 256 * MIB);

    let mut all = blocks.clone();
    all.push(last);
    // the disk agrees with what was written
    for &(off, seed) in &all {
        assert!(
            disk_read(&path, off, MIB as usize) == pattern(off, MIB as usize, seed),
            "disk content at {off}"
        );
    }
    check_blocks(&mut c, &f, &all, &holes);

    // reads at and past the end
    let mut buf = vec![0u8; MIB as usize];
    assert_eq!(c.pread(&f, &mut buf, size).unwrap(), 0);
    assert_eq!(c.pread(&f, &mut buf, size - 100).unwrap(), 100);
    assert_eq!(&buf[..100], &pattern(size - 100, 100, 7)[..]);
    c.close(f).unwrap();

    // shrinking keeps the data below the new size
    let b5 = GIB + 4 * MIB + 4096;
    let a = c.truncate("sparse", b5 + 1000).unwrap();
    assert_eq!(a.size, b5 + 1000);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), b5 + 1000);
    let f = c.open("sparse", OpenOptions::read()).unwrap();
    assert_eq!(c.pread(&f, &mut buf, b5).unwrap(), 1000);
    assert_eq!(&buf[..1000], &pattern(b5, 1000, 5)[..]);
    c.close(f).unwrap();
}

fn offsets_past_4gib(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let path = srv.dir().join("huge");
    let four = 4 * GIB;
    let blocks = [(four - MIB / 2, 8u8), (5 * GIB + 3, 9), (u32::MAX as u64 + 1 + 2 * MIB, 10)];
    let f = c.open("huge", OpenOptions::read_write().create(true)).unwrap();
    for &(off, seed) in &blocks {
        assert_eq!(c.pwrite(&f, &pattern(off, MIB as usize, seed), off).unwrap(), MIB as usize);
        // an inline-sized write too
        assert_eq!(c.pwrite(&f, b"tiny", off + MIB + 10).unwrap(), 4);
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 5 * GIB + 3 + MIB + 14);
    for &(off, seed) in &blocks {
        assert!(
            disk_read(&path, off, MIB as usize) == pattern(off, MIB as usize, seed),
            "disk at {off}"
        );
        assert_eq!(disk_read(&path, off + MIB + 10, 4), b"tiny");
        let mut small = [0u8; 4];
        assert_eq!(c.pread(&f, &mut small, off + MIB + 10).unwrap(), 4);
        assert_eq!(&small, b"tiny");
    }
    // nothing landed at the offsets modulo 4 GiB
    assert!(disk_read(&path, 3, MIB as usize).iter().all(|&b| b == 0));
    assert!(disk_read(&path, GIB + 3, MIB as usize).iter().all(|&b| b == 0));
    check_blocks(&mut c, &f, &blocks, &[3, GIB + 3, 2 * MIB]);
    assert!(std::fs::metadata(&path).unwrap().blocks() * 512 < 256 * MIB);
    c.close(f).unwrap();
}

fn io_larger_than_max_io_size(p: Provider) {
    let srv = TestServer::start(&[]);
    let mut c = srv.client_on(p);
    let len = 20 * MIB as usize;
    assert!(len > c.io_bytes_max(), "the test needs an I/O that must be split");
    let data = pattern(3, len, 11);
    let f = c.open("big", OpenOptions::read_write().create(true)).unwrap();
    let s0 = c.stats();
    assert_eq!(c.pwrite(&f, &data, 3).unwrap(), len);
    let s1 = c.stats();
    let chunks = len.div_ceil(c.io_bytes_max()) as u64;
    assert_eq!(s1.direct_writes - s0.direct_writes, chunks, "split into io_bytes_max pieces");
    let disk = std::fs::read(srv.dir().join("big")).unwrap();
    assert_eq!(disk.len(), len + 3);
    assert_eq!(&disk[..3], &[0, 0, 0]);
    assert!(disk[3..] == data[..], "disk content differs");

    let mut back = vec![0u8; len];
    assert_eq!(c.pread(&f, &mut back, 3).unwrap(), len);
    assert!(back == data, "20 MiB read differs");
    assert_eq!(c.stats().direct_reads - s1.direct_reads, chunks);

    // a large read that runs into end of file: short count, all of what exists
    back.fill(0xAA);
    assert_eq!(c.pread(&f, &mut back, 5 * MIB).unwrap(), len + 3 - 5 * MIB as usize);
    assert!(back[..len + 3 - 5 * MIB as usize] == disk[5 * MIB as usize..]);
    // overwrite the middle with another large unaligned buffer
    let mid = pattern(7 * MIB + 1, 9 * MIB as usize + 5, 12);
    assert_eq!(c.pwrite(&f, &mid, 7 * MIB + 1).unwrap(), mid.len());
    let disk = std::fs::read(srv.dir().join("big")).unwrap();
    assert!(disk[(7 * MIB + 1) as usize..(7 * MIB + 1) as usize + mid.len()] == mid[..]);
    assert!(disk[3..(7 * MIB + 1) as usize] == data[..(7 * MIB - 2) as usize]);
    c.close(f).unwrap();
}

for_each_provider!(sparse_file_past_1gib, offsets_past_4gib, io_larger_than_max_io_size);

#[test]
fn directory_with_ten_thousand_entries() {
    let srv = TestServer::start(&[]);
    let mut c = srv.client();
    let dir = srv.dir().join("big");
    std::fs::create_dir(&dir).unwrap();
    let mut want = BTreeSet::new();
    // most on disk, for speed; names of varied length
    for i in 0..10_000usize {
        let name = format!("e{i:05}-{}", "n".repeat(i % 60));
        std::fs::File::create(dir.join(&name)).unwrap();
        want.insert(name);
    }
    // some through the client: files, directories and symlinks
    for i in 0..50usize {
        let name = format!("client-{i}");
        match i % 3 {
            0 => drop(c.create_file(&format!("big/{name}"), 0o644, true).unwrap()),
            1 => drop(c.mkdir(&format!("big/{name}"), 0o755).unwrap()),
            _ => drop(c.symlink("e00000-", &format!("big/{name}")).unwrap()),
        }
        want.insert(name);
    }
    assert_eq!(want.len(), 10_050);

    // the whole listing
    let all = c.readdir("big").unwrap();
    assert_eq!(all.len(), 10_050, "no duplicates, nothing missing");
    let got: BTreeSet<String> = all.iter().map(|e| e.name_lossy()).collect();
    assert_eq!(got.len(), 10_050);
    assert!(
        got == want,
        "names differ: {} missing, {} extra",
        want.difference(&got).count(),
        got.difference(&want).count()
    );
    for e in all.iter().filter(|e| e.name.starts_with(b"client-") || e.name.ends_with(b"0-")) {
        let md = std::fs::symlink_metadata(dir.join(e.name_lossy())).unwrap();
        assert_eq!(e.fileid, md.ino(), "{}", e.name_lossy());
    }

    // pages of a few entries, continued with cookies
    let (dh, _) = c.lookup("big").unwrap();
    for max in [7u32, 1000, 100_000] {
        let mut seen = BTreeSet::new();
        let mut cookie = 0;
        let mut pages = 0;
        loop {
            let (page, next, eof) = c.readdir_page(dh, cookie, max).unwrap();
            pages += 1;
            assert!(page.len() <= max as usize, "page larger than asked ({} > {max})", page.len());
            assert!(page.len() <= dafs_client::dafs_proto::limits::READDIR_ENTRIES_MAX as usize);
            for e in page {
                let n = e.name_lossy();
                assert!(seen.insert(n.clone()), "{n} listed twice (max_entries {max})");
            }
            if eof {
                break;
            }
            assert_ne!(next, cookie, "cookie did not advance");
            cookie = next;
            assert!(pages < 20_000, "READDIR does not terminate");
        }
        assert!(
            seen == want,
            "max_entries {max}: {} missing, {} extra",
            want.difference(&seen).count(),
            seen.difference(&want).count()
        );
        if max == 7 {
            assert!(pages >= 10_050 / 7, "pages honour max_entries");
        }
    }

    // a second listing agrees, and entries removed on disk disappear from it
    for i in 0..100usize {
        let name = format!("e{i:05}-{}", "n".repeat(i % 60));
        std::fs::remove_file(dir.join(&name)).unwrap();
        want.remove(&name);
    }
    let again: BTreeSet<String> =
        c.readdir("big").unwrap().iter().map(|e| e.name_lossy()).collect();
    assert!(again == want);
    assert_eq!(again.len(), 9_950);
}
