//! The engine on local files: the final pool on disk equals the model, byte for byte,
//! and a file system that loses or corrupts data is caught.

use std::collections::BTreeMap;

use super::*;

fn small() -> PmParams {
    PmParams {
        files: 30,
        transactions: 400,
        size_min_bytes: 100,
        size_max_bytes: 3000,
        read_block_bytes: 512,
        write_block_bytes: 700,
        bias_read: 5,
        bias_create: 5,
        seed: 7,
        keep_files: true,
    }
}

/// What is on disk in `dir`: name -> contents.
fn on_disk(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// The checks every backend's run must pass (also used by the dafs tests).
fn check_against_model(run: &PmRun, p: &PmParams, disk: &BTreeMap<String, Vec<u8>>) {
    let c = &run.counts;
    assert_eq!(c.created_alone, p.files as u64);
    assert_eq!(c.created_mixed + c.deleted_mixed, p.transactions as u64, "{c:?}");
    assert_eq!(c.read + c.appended, p.transactions as u64, "{c:?}");
    assert_eq!(
        run.final_files.len() as u64,
        c.created_alone + c.created_mixed - c.deleted_mixed,
        "pool size = created - deleted"
    );
    let names: Vec<&String> = disk.keys().collect();
    let mut want: Vec<&String> = run.final_files.iter().map(|f| &f.name).collect();
    want.sort();
    assert_eq!(names, want, "the files on disk are the model's");
    for f in &run.final_files {
        let d = &disk[&f.name];
        assert_eq!(d.len() as u64, f.size_bytes, "size of {}", f.name);
        assert_eq!(d, &expected_contents(f.id, f.size_bytes), "contents of {}", f.name);
        assert_eq!(fnv64(d), f.fnv64);
        assert!(f.size_bytes >= p.size_min_bytes && f.size_bytes <= p.size_max_bytes);
    }
    assert!(c.appended > 0 && c.read > 0 && c.deleted_mixed > 0, "every operation ran: {c:?}");
}

#[test]
fn pattern_is_addressable_by_offset() {
    let whole = expected_contents(9, 100);
    for off in [0usize, 1, 7, 8, 13, 64] {
        let mut part = vec![0u8; 100 - off];
        pattern(9, off as u64, &mut part);
        assert_eq!(&part[..], &whole[off..], "offset {off}");
    }
    assert_ne!(expected_contents(10, 100), whole, "files differ");
}

#[test]
fn local_run_leaves_exactly_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    let p = small();
    let run = run(&mut LocalFs { root: tmp.path().into() }, "pm", &p).unwrap();
    check_against_model(&run, &p, &on_disk(&tmp.path().join("pm")));
    // Same seed: same pool.
    let tmp2 = tempfile::tempdir().unwrap();
    let run2 = super::run(&mut LocalFs { root: tmp2.path().into() }, "pm", &p).unwrap();
    assert_eq!(run.final_files, run2.final_files);
    assert_eq!(run.counts, run2.counts);
}

#[test]
fn without_keep_files_everything_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let p = PmParams { keep_files: false, ..small() };
    let run = run(&mut LocalFs { root: tmp.path().into() }, "pm", &p).unwrap();
    let c = &run.counts;
    assert_eq!(c.deleted_alone, c.created_alone + c.created_mixed - c.deleted_mixed);
    assert!(!tmp.path().join("pm").exists());
}

#[test]
fn biases_select_operations() {
    let tmp = tempfile::tempdir().unwrap();
    let p = PmParams { bias_read: 10, bias_create: -1, ..small() };
    let run = run(&mut LocalFs { root: tmp.path().into() }, "pm", &p).unwrap();
    let c = &run.counts;
    assert_eq!((c.read, c.appended, c.created_mixed, c.deleted_mixed), (400, 0, 0, 0));
    assert_eq!(run.final_files.len(), 30, "no creates or deletes: the pool stays");
    assert!(c.bytes_read >= 400 * p.size_min_bytes && c.bytes_read <= 400 * p.size_max_bytes);
    assert_eq!(c.bytes_written, run.final_files.iter().map(|f| f.size_bytes).sum::<u64>());
}

/// Local files, but an append writes one byte wrong (or a delete does nothing).
struct Faulty {
    inner: LocalFs,
    corrupt_append: bool,
}

impl PmFs for Faulty {
    fn mkdir(&mut self, d: &str) -> Result<(), String> {
        self.inner.mkdir(d)
    }
    fn rmdir(&mut self, d: &str) -> Result<(), String> {
        self.inner.rmdir(d)
    }
    fn create(&mut self, p: &str, data: &[u8], b: usize) -> Result<(), String> {
        self.inner.create(p, data, b)
    }
    fn append(&mut self, p: &str, data: &[u8], b: usize) -> Result<(), String> {
        let mut d = data.to_vec();
        if self.corrupt_append && !d.is_empty() {
            d[0] ^= 1;
        }
        self.inner.append(p, &d, b)
    }
    fn read_all(&mut self, p: &str, b: usize, out: &mut Vec<u8>) -> Result<(), String> {
        self.inner.read_all(p, b, out)
    }
    fn delete(&mut self, p: &str) -> Result<(), String> {
        if self.corrupt_append {
            self.inner.delete(p)
        } else {
            Ok(())
        }
    }
}

#[test]
fn a_corrupting_file_system_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let mut fs = Faulty { inner: LocalFs { root: tmp.path().into() }, corrupt_append: true };
    let e = run(&mut fs, "pm", &small()).unwrap_err();
    assert!(e.contains("wrong contents"), "{e}");
}

#[test]
#[should_panic(expected = "the files on disk are the model's")]
fn a_file_system_that_loses_deletes_is_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let mut fs = Faulty { inner: LocalFs { root: tmp.path().into() }, corrupt_append: false };
    let p = PmParams { bias_read: 10, ..small() };
    let run = run(&mut fs, "pm", &p).unwrap();
    check_against_model(&run, &p, &on_disk(&tmp.path().join("pm")));
}

#[test]
fn bad_parameters_are_refused() {
    let mut fs = LocalFs { root: std::env::temp_dir() };
    for p in [
        PmParams { size_min_bytes: 10, size_max_bytes: 5, ..small() },
        PmParams { read_block_bytes: 0, ..small() },
        PmParams { bias_read: 11, ..small() },
        PmParams { files: 0, ..small() },
        PmParams { size_max_bytes: FILE_BYTES_MAX + 1, ..small() },
    ] {
        assert!(run(&mut fs, "never-created", &p).is_err(), "{p:?}");
    }
    assert!(!std::env::temp_dir().join("never-created").exists());
}
