use std::io::Write;
use std::os::fd::AsFd;

use super::*;

/// A file of `len` bytes whose every 8-byte word holds its own offset (a misplaced chunk
/// shows as a wrong word).
fn patterned(len: usize) -> std::fs::File {
    let mut f = tempfile::tempfile().unwrap();
    let words: Vec<u8> = (0..len.div_ceil(8) as u64).flat_map(|w| (w * 8).to_le_bytes()).collect();
    f.write_all(&words[..len]).unwrap();
    f
}

fn expect_pattern(buf: &[u8], offset: u64) {
    let mut want = Vec::with_capacity(buf.len() + 16);
    let first = offset / 8;
    for w in first..=(offset + buf.len() as u64) / 8 {
        want.extend_from_slice(&(w * 8).to_le_bytes());
    }
    let skip = (offset - first * 8) as usize;
    let bad = buf.iter().zip(&want[skip..]).position(|(a, b)| a != b);
    assert_eq!(bad, None, "first wrong byte");
}

#[test]
fn split_reads_place_every_chunk_where_a_single_pread_would() {
    let file_len = 9 * 1024 * 1024 + 5;
    let f = patterned(file_len);
    for threads in [0, 1, 3] {
        let e = CopyEngines::start(threads).unwrap();
        assert_eq!(e.threads(), threads);
        for (len, offset) in [
            (PARALLEL_MIN_BYTES - 1, 3u64),
            (PARALLEL_MIN_BYTES, 0),
            (PARALLEL_MIN_BYTES + 1, 4096),
            (1024 * 1024, 12345),
            (8 * 1024 * 1024, 7),
        ] {
            let mut buf = vec![0u8; len];
            let n = e.pread(&mut PlacementDst::from_slice(&mut buf), f.as_fd(), offset).unwrap();
            assert_eq!(n, len, "{threads} engines, {len} bytes at {offset}");
            expect_pattern(&buf, offset);
        }
    }
}

#[test]
fn a_read_past_the_end_counts_only_the_bytes_the_file_has() {
    let file_len = 300 * 1024 + 17;
    let f = patterned(file_len);
    let e = CopyEngines::start(2).unwrap();
    for offset in [0u64, 100 * 1024, 290 * 1024, file_len as u64, file_len as u64 + 1] {
        let mut buf = vec![0xAAu8; 1024 * 1024];
        let n = e.pread(&mut PlacementDst::from_slice(&mut buf), f.as_fd(), offset).unwrap();
        assert_eq!(n, file_len.saturating_sub(offset as usize), "at {offset}");
        expect_pattern(&buf[..n], offset);
    }
}

#[test]
fn the_count_is_the_gap_free_prefix_of_the_chunks() {
    let chunk = 64 * 1024;
    let len = 4 * chunk - 100;
    let err = || Err(io::Error::from_raw_os_error(libc::EIO));
    let count = |mut r: Vec<io::Result<usize>>| prefix_count(&mut r, len, chunk);
    assert_eq!(count(vec![Ok(chunk), Ok(chunk), Ok(chunk), Ok(chunk - 100)]).unwrap(), len);
    // A short chunk is the end of the file: later chunks (which read nothing) add nothing.
    assert_eq!(count(vec![Ok(chunk), Ok(10), Ok(0), Ok(0)]).unwrap(), chunk + 10);
    // An error after some chunks truncates to them, even when a later chunk succeeded.
    assert_eq!(count(vec![Ok(chunk), err(), Ok(chunk), Ok(chunk - 100)]).unwrap(), chunk);
    assert_eq!(count(vec![Ok(chunk), Ok(chunk), Ok(chunk), err()]).unwrap(), 3 * chunk);
    // An error in the first chunk is the read's error.
    let e = count(vec![err(), Ok(chunk), Ok(chunk), Ok(chunk - 100)]).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO));
}

#[test]
fn a_bad_descriptor_fails_the_read_and_leaves_the_job_reusable() {
    let e = CopyEngines::start(1).unwrap();
    let f = patterned(1024 * 1024);
    let w = tempfile::NamedTempFile::new().unwrap();
    let wo = std::fs::OpenOptions::new().write(true).open(w.path()).unwrap();
    let mut buf = vec![0u8; 512 * 1024];
    let r = e.pread(&mut PlacementDst::from_slice(&mut buf), wo.as_fd(), 0);
    assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EBADF), "write-only descriptor");
    let n = e.pread(&mut PlacementDst::from_slice(&mut buf), f.as_fd(), 64).unwrap();
    assert_eq!(n, buf.len());
    expect_pattern(&buf, 64);
}

#[test]
fn chunks_are_page_aligned_and_within_the_table() {
    for participants in [1, 2, 4, 17] {
        for len in [PARALLEL_MIN_BYTES, 1 << 20, (1 << 20) + 1, 8 << 20, 64 << 20] {
            let c = chunk_bytes(len, participants);
            assert_eq!(c % PAGE_BYTES, 0);
            assert!(c >= CHUNK_BYTES_MIN);
            let n = len.div_ceil(c);
            assert!((2..=CHUNKS_MAX).contains(&n), "{len} bytes, {participants}: {n} chunks");
        }
    }
}

#[test]
fn workers_sharing_the_engines_each_get_their_own_bytes() {
    let f = std::sync::Arc::new(patterned(4 * 1024 * 1024));
    let e = std::sync::Arc::new(CopyEngines::start(2).unwrap());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (f, e) = (f.clone(), e.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 768 * 1024];
                for i in 0..50u64 {
                    let offset = (t * 4096 + i * 8192) % (3 * 1024 * 1024);
                    buf.fill(0);
                    let n = e.pread(&mut PlacementDst::from_slice(&mut buf), f.as_fd(), offset);
                    assert_eq!(n.unwrap(), buf.len());
                    expect_pattern(&buf, offset);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
