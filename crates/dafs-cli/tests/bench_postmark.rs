//! `dafs bench postmark`'s native engine against a real dafsd, over TCP and shared
//! memory: the pool left in the export directory equals the engine's model (names,
//! sizes, every byte), and the run equals the same seed on local files.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::TestServer;
use dafs_bench::postmark::engine::{self, expected_contents, DafsFs, LocalFs, PmParams, PmRun};
use dafs_client::Provider;

fn params() -> PmParams {
    PmParams {
        files: 40,
        transactions: 300,
        size_min_bytes: 200,
        // Above the inline threshold, so both inline and direct transfers happen.
        size_max_bytes: 40_000,
        read_block_bytes: 4096,
        write_block_bytes: 3000,
        bias_read: 5,
        bias_create: 5,
        seed: 11,
        keep_files: true,
    }
}

fn on_disk(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

fn check(run: &PmRun, p: &PmParams, dir: &Path) {
    let c = &run.counts;
    assert_eq!(c.created_mixed + c.deleted_mixed, p.transactions as u64);
    assert_eq!(c.read + c.appended, p.transactions as u64);
    assert!(c.read > 0 && c.appended > 0 && c.created_mixed > 0 && c.deleted_mixed > 0, "{c:?}");
    let final_count = c.created_alone + c.created_mixed - c.deleted_mixed;
    assert_eq!(run.final_files.len() as u64, final_count);
    let disk = on_disk(dir);
    let mut want: Vec<&String> = run.final_files.iter().map(|f| &f.name).collect();
    want.sort();
    assert_eq!(disk.keys().collect::<Vec<_>>(), want, "the export holds the model's files");
    for f in &run.final_files {
        assert_eq!(disk[&f.name], expected_contents(f.id, f.size_bytes), "contents of {}", f.name);
    }
}

fn run_on(srv: &TestServer, provider: Provider, dir: &str) -> PmRun {
    let mut c = srv.client_on(provider);
    let p = params();
    let run = engine::run(&mut DafsFs::new(&mut c, ""), dir, &p).unwrap();
    check(&run, &p, &srv.dir().join(dir));
    // The deletion phase empties the pool and removes the directory.
    let p2 = PmParams { keep_files: false, transactions: 50, ..params() };
    engine::run(&mut DafsFs::new(&mut c, ""), &format!("{dir}-gone"), &p2).unwrap();
    assert!(!srv.dir().join(format!("{dir}-gone")).exists());
    run
}

#[test]
fn native_postmark_over_tcp_and_shm_leaves_the_model_and_matches_local_files() {
    let srv = TestServer::start(&[]);
    let tcp = run_on(&srv, Provider::Tcp, "pm-tcp");
    let shm = run_on(&srv, Provider::Auto, "pm-shm");
    let tmp = tempfile::tempdir().unwrap();
    let local = engine::run(&mut LocalFs { root: tmp.path().into() }, "pm", &params()).unwrap();
    check(&local, &params(), &tmp.path().join("pm"));
    for r in [&tcp, &shm] {
        assert_eq!(r.counts, local.counts);
        assert_eq!(r.final_files, local.final_files);
    }
}
