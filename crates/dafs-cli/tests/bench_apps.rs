//! The application experiments of `dafs bench` (merge, gzip) on small sizes: every
//! system's output must be correct (the merge sorted with the inputs' checksum; the
//! gzip stream valid and decompressing to the input), through the same entry points
//! `dafs bench merge|gzip` and `dafs bench seeds` use.

use std::path::PathBuf;

use dafs_bench::gzip::{run_gzip, GzipConfig};
use dafs_bench::merge::{run_merge, MergeConfig};

fn merge_cfg(systems: &[&str], record_sizes: Vec<usize>) -> MergeConfig {
    MergeConfig {
        quick: true,
        systems: systems.iter().map(|s| s.to_string()).collect(),
        systems_explicit: true,
        inputs: 8,
        record_sizes,
        // Uneven in time: 8 blocks per input, QD 4 deep, so read-ahead wraps twice.
        total_input_bytes: 2 << 20,
        block_bytes: 32 << 10,
        qd: 4,
        runs: 1,
        nfs_url: None,
        dafsd: Some(PathBuf::from(env!("CARGO_BIN_EXE_dafsd"))),
        tmpdir: None,
        server_spin_us: 50,
    }
}

#[test]
fn merge_output_is_sorted_and_checksummed_on_local_tcp_and_shm() {
    let cfg = merge_cfg(&["local", "dafs-tcp", "dafs-shm"], vec![16, 4096]);
    let res = run_merge(&cfg).unwrap();
    assert!(res.notes.is_empty(), "{:?}", res.notes);
    assert_eq!(res.rows.len(), 6);
    for r in &res.rows {
        assert_eq!(r.error, None, "{} at {} B", r.system, r.record_bytes);
        assert!(r.verified);
        assert_eq!(r.runs.len(), 1);
        assert_eq!(r.runs[0].bytes, 2 * (2 << 20));
        assert!(r.mbps > 0.0 && r.cpu_s_per_gb > 0.0);
    }
    // Both record sizes had their own inputs.
    assert_eq!(res.input_checksums.len(), 2);
    assert_eq!(res.input_checksums[0].1.records, (2 << 20) / 16);
    assert_eq!(res.input_checksums[1].1.records, (2 << 20) / 4096);
    let md = dafs_bench::merge::markdown(&res, "test");
    assert!(md.contains("| 16 B |") && md.contains("dafs-shm / local"));
}

#[test]
fn merge_with_shallow_queues_and_many_records_per_block() {
    // QD 1 (no read-ahead beyond the current block) and the smallest records: the
    // most completions per byte and the most drained-input events.
    let mut cfg = merge_cfg(&["local", "dafs-shm"], vec![24]);
    cfg.block_bytes = 4096 * 3;
    cfg.qd = 1;
    cfg.total_input_bytes = 8 * 5 * 4096 * 3;
    let res = run_merge(&cfg).unwrap();
    for r in &res.rows {
        assert_eq!(r.error, None, "{}", r.system);
    }
}

#[test]
fn merge_refuses_bad_configurations() {
    let mut c = merge_cfg(&["local"], vec![48]); // 48 does not divide 32 KiB
    assert!(run_merge(&c).unwrap_err().contains("record size 48"));
    c.record_sizes = vec![16];
    c.qd = 0;
    assert!(run_merge(&c).unwrap_err().contains("--qd"));
    c.qd = 4;
    c.total_input_bytes = 1000;
    assert!(run_merge(&c).unwrap_err().contains("too small"));
}

fn gzip_cfg(ways: &[&str], size: u64) -> GzipConfig {
    GzipConfig {
        quick: true,
        input_bytes: size,
        block_bytes: 16 << 10,
        processes: vec![1, 2, 3],
        level: 6,
        ways: ways.iter().map(|s| s.to_string()).collect(),
        ways_explicit: true,
        runs: 1,
        dafsd: Some(PathBuf::from(env!("CARGO_BIN_EXE_dafsd"))),
        dafs: PathBuf::from(env!("CARGO_BIN_EXE_dafs")),
        preload: None,
        tmpdir: None,
        server_spin_us: 50,
    }
}

#[test]
fn gzip_round_trips_on_dafs_with_one_two_and_three_processes() {
    // Not a whole number of blocks, and not divisible by the process counts.
    let size = (1 << 20) + 12_345;
    let res = run_gzip(&gzip_cfg(&["dafs-shm", "dafs-tcp", "local"], size)).unwrap();
    assert_eq!(res.rows.len(), 7);
    for r in &res.rows {
        assert_eq!(r.error, None, "{} with {} processes", r.way, r.processes);
        assert!(r.verified);
        // Text-like input: compressible, not trivially.
        assert!(r.ratio > 2.0 && r.ratio < 10.0, "ratio {}", r.ratio);
    }
    let md = dafs_bench::gzip::markdown(&res, "test");
    assert!(md.contains("DAFS gzip, dafs-shm | 2 |"));
}

#[test]
fn gzip_of_a_file_smaller_than_a_block_split_among_more_processes() {
    // The second process gets an empty share: an empty gzip member is still valid.
    let mut cfg = gzip_cfg(&["dafs-shm"], 100);
    cfg.processes = vec![2];
    let res = run_gzip(&cfg).unwrap();
    assert_eq!(res.rows[0].error, None);
}

#[test]
fn gzip_refuses_bad_configurations_and_has_usable_defaults() {
    let mut c = gzip_cfg(&["dafs-shm"], 1000);
    c.processes = vec![0];
    assert!(run_gzip(&c).unwrap_err().contains("--processes"));
    c.processes = vec![1];
    c.level = 10;
    assert!(run_gzip(&c).unwrap_err().contains("--level"));
    // What `dafs bench seeds` starts from.
    let m = MergeConfig::defaults(true).unwrap();
    assert_eq!((m.inputs, m.block_bytes, m.record_sizes.len()), (8, 32 << 10, 3));
    let m = MergeConfig::defaults(false).unwrap();
    assert_eq!(m.record_sizes, vec![16, 64, 256, 1024, 4096]);
    let g = GzipConfig::defaults(false).unwrap();
    assert_eq!(
        (g.input_bytes, g.block_bytes, g.processes.clone()),
        (550 << 20, 16 << 10, vec![1, 2])
    );
}

/// The commands as a user types them: exit status, the report, the JSON, the plots.
#[test]
fn the_commands_write_their_reports() {
    let out = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_dafs"))
            .args(args)
            .args(["--dafsd", env!("CARGO_BIN_EXE_dafsd")])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        stdout
    };
    let m = out.path().join("merge");
    let md = run(&[
        "bench",
        "merge",
        "--size",
        "1m",
        "--record-sizes",
        "16,512",
        "--backends",
        "local,shm",
        "--runs",
        "1",
        "--out",
        m.to_str().unwrap(),
    ]);
    assert!(md.contains("| 512 B |"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(m.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 4);
    assert!(json["rows"].as_array().unwrap().iter().all(|r| r["verified"] == true));
    assert!(m.join("report.md").is_file() && m.join("merge_mbps.png").is_file());
    let g = out.path().join("gzip");
    let md = run(&[
        "bench",
        "gzip",
        "--size",
        "100k",
        "--ways",
        "dafs-shm",
        "--out",
        g.to_str().unwrap(),
    ]);
    assert!(md.contains("DAFS gzip, dafs-shm | 2 |"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(g.join("results.json")).unwrap()).unwrap();
    assert!(json["rows"].as_array().unwrap().iter().all(|r| r["verified"] == true));
    // A bad option is refused with the reason.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dafs"))
        .args(["bench", "merge", "--record-sizes", "20", "--backends", "local"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("record size 20"));
}
