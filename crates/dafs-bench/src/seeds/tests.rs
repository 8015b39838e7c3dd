//! Tests of the seeds report: the paper table, the series a `dafs bench` run yields, the
//! report built from canned results (real result structs), and the child runner.

use super::measure::{self, Measured};
use super::paper::{self, Paper};
use super::report::{self, ExperimentRun, SeedsInfo};
use super::runner;
use crate::backends::Sample;
use crate::{LatFit, LatencyResults, OverlapRow, Results};

fn sample(mbps: f64, bs: usize, cpu_s_per_gb: f64) -> Sample {
    let secs = 1.0;
    let bytes = (mbps * 1e6) as u64;
    Sample {
        secs,
        bytes,
        ops: bytes / bs as u64,
        cpu_s: cpu_s_per_gb * bytes as f64 / 1e9,
        srv_cpu_s: None,
        other_cores: None,
        lat_p50_us: None,
        lat_p99_us: None,
    }
}

/// A small but complete `dafs bench` result: every backend, test and block size the
/// paper table refers to, with throughput chosen so the ratios are known.
fn canned() -> Results {
    let mut r = Results::default();
    let backends = [("local", 4.0), ("dafs-shm", 2.0), ("dafs-tcp", 1.5), ("nfs", 0.8)];
    let tests = [
        ("read", "rand", 1),
        ("read", "seq", 1),
        ("read", "seq", 8),
        ("write", "rand", 1),
        ("write", "seq", 8),
    ];
    for (op, pat, qd) in tests {
        for bs in [4096usize, 1 << 20] {
            for (b, speed) in backends {
                // Bandwidth grows with the block; the backends keep their order.
                let mbps = speed * 100.0 * if bs == 4096 { 1.0 } else { 10.0 };
                let runs = vec![sample(mbps, bs, 1.0 / speed)];
                r.data.push(crate::summarize(op, pat, qd, bs, b, runs, None));
            }
        }
    }
    let fit = |t: &str, m: &str, a: f64, s: f64| LatFit {
        transport: t.into(),
        mode: m.into(),
        intercept_us: a,
        slope_ns_per_byte: s,
        r2: 0.99,
    };
    r.latency = Some(LatencyResults {
        null_us: vec![("dafs-shm".into(), 4.0), ("dafs-tcp".into(), 20.0)],
        fits: vec![
            fit("shm", "inline", 5.0, 0.1),
            fit("shm", "direct", 7.0, 0.1),
            fit("tcp", "inline", 21.0, 0.5),
            fit("tcp", "direct", 30.0, 0.25),
        ],
        ..Default::default()
    });
    for (b, hidden) in [("dafs-shm", 0.95), ("dafs-tcp", 0.9), ("local", 0.8)] {
        r.overlap.push(OverlapRow {
            backend: b.into(),
            bs: 65536,
            blocks: 10,
            depth: 8,
            compute_us: 10.0,
            t_io: 1.0,
            t_compute: 1.0,
            t_sync: 2.0,
            t_async: 1.05,
            hidden,
            error: None,
        });
    }
    r
}

fn ran(name: &str) -> ExperimentRun {
    ExperimentRun {
        name: name.into(),
        command: format!("{name} --quick"),
        status: "ran".into(),
        secs: 1.0,
        out_dir: None,
        series: 1,
        notes: vec![],
    }
}

fn skipped(name: &str, why: &str) -> ExperimentRun {
    ExperimentRun { status: format!("not available: {why}"), ..ran(name) }
}

#[test]
fn paper_table_parses_and_is_complete() {
    let p = paper::paper().expect("paper.json parses and passes its checks");
    assert_eq!(p.seeds.len(), 5);
    for s in ["000", "001", "002", "003", "004"] {
        assert!(p.figures.iter().filter(|f| f.seed == s).count() >= 2, "seed {s} has figures");
    }
    for f in &p.figures {
        assert!(!f.units.is_empty() && !f.not_reproduced.is_empty(), "{}", f.id);
        assert!(f.values.iter().all(|v| v.quote.len() >= 8), "{} quotes", f.id);
        assert!(f.ratios.iter().all(|r| r.quote.len() >= 8), "{} ratio quotes", f.id);
    }
    // Values the text states, spot-checked against the papers.
    let fig = |id: &str| p.figures.iter().find(|f| f.id == id).unwrap();
    assert_eq!(fig("000-fig5").ratios[0].max, Some(1.4));
    assert_eq!(fig("002-table1").values[0].value, Some(47.4));
    assert_eq!(fig("004-fig6").values[4].value, Some(310.0));
    assert_eq!(fig("003-fig6").values[1].value, Some(4.5));
}

#[test]
fn the_check_rejects_an_incomplete_table() {
    let good = paper::paper().unwrap();
    let broken = |f: &dyn Fn(&mut Paper)| {
        let mut p = good.clone();
        f(&mut p);
        paper::check(&p)
    };
    assert!(broken(&|p| p.figures[0].values[0].quote.clear()).is_err());
    assert!(broken(&|p| p.figures[0].units.clear()).is_err());
    assert!(broken(&|p| p.figures[0].values[0].source = "plot".into()).is_err());
    assert!(broken(&|p| p.figures[1].id = p.figures[0].id.clone()).is_err());
    assert!(broken(&|p| p.figures[0].seed = "009".into()).is_err());
    assert!(broken(&|p| {
        let f = &mut p.figures[0];
        f.ours.clear();
        f.ratios.clear();
        f.values.iter_mut().for_each(|v| v.ours = None);
        f.not_reproduced = "no NIC".into();
    })
    .is_err());
    assert!(broken(&|p| {
        let r = &mut p.figures.iter_mut().find(|f| !f.ratios.is_empty()).unwrap().ratios[0];
        r.min = Some(3.0);
        r.max = Some(2.0);
    })
    .is_err());
}

/// Every `dafs bench` series the paper table names is one `from_bench` produces: a
/// renamed key on either side would silently empty a figure.
#[test]
fn every_bench_series_in_the_table_exists() {
    let m = measure::from_bench(&canned());
    let p = paper::paper().unwrap();
    let mut names = Vec::new();
    for f in &p.figures {
        names.extend(f.ours.iter().map(|o| o.series.clone()));
        names.extend(f.values.iter().filter_map(|v| v.ours.as_ref().map(|o| o.series.clone())));
        for r in &f.ratios {
            names.extend([&r.num, &r.den].into_iter().flatten().map(|o| o.series.clone()));
        }
    }
    let bench: Vec<&String> =
        names.iter().filter(|n| report::experiment_of(n) == "bench").collect();
    assert!(bench.len() > 40);
    for n in bench {
        assert!(m.get(n).is_some(), "{n} is not produced by from_bench");
    }
}

#[test]
fn series_and_ratios_from_bench() {
    let m = measure::from_bench(&canned());
    // dafs-shm 2.0 vs nfs 0.8 at every block: 2.5x.
    let r = m.ratios(
        "bw.read.rand.qd1.dafs-shm",
        Some(&"min".into()),
        "bw.read.rand.qd1.nfs",
        Some(&"min".into()),
    );
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].0, 4096.0);
    assert!((r[0].1 - 2.5).abs() < 1e-9);
    let all = m.ratios(
        "bw.read.seq.qdN.dafs-shm",
        Some(&"all".into()),
        "bw.read.seq.qdN.local",
        Some(&"all".into()),
    );
    assert_eq!(all.len(), 2);
    // Same series, largest over smallest block: 10x.
    let d = m.ratios(
        "bw.read.seq.qdN.dafs-shm",
        Some(&"max".into()),
        "bw.read.seq.qdN.dafs-shm",
        Some(&"min".into()),
    );
    assert!((d[0].1 - 10.0).abs() < 1e-9);
    // 0.1 ns/byte = 10 GB/s; direct - inline intercept = 2 us.
    assert!((m.at("fit.rate.shm.inline", None).unwrap().1 - 10_000.0).abs() < 1e-6);
    assert!((m.at("fit.extra.shm", None).unwrap().1 - 2.0).abs() < 1e-9);
    assert!((m.at("overlap.hidden.dafs-shm", Some(&65536.into())).unwrap().1 - 95.0).abs() < 1e-9);
    // CPU %: 1/2 s per GB at 200 MB/s = 10% of a core.
    assert!(
        (m.at("cpupct.read.rand.qd1.dafs-shm", Some(&"min".into())).unwrap().1 - 10.0).abs() < 1e-6
    );
}

#[test]
fn verdicts() {
    assert_eq!(report::verdict(Some(2.0), Some(3.0), &[(0.0, 2.5)]), "within");
    assert_eq!(report::verdict(Some(2.0), None, &[(0.0, 1.5)]), "below");
    assert_eq!(report::verdict(None, Some(1.4), &[(0.0, 1.6)]), "above");
    assert_eq!(report::verdict(Some(1.2), None, &[(16.0, 1.3), (4096.0, 1.1)]), "mixed");
    assert_eq!(report::verdict(Some(1.0), None, &[]), "not measured");
}

fn canned_report() -> report::SeedsReport {
    let p = paper::paper().unwrap();
    let mut m = measure::from_bench(&canned());
    let gz = serde_json::json!({"seed_points": [
        {"series": "gzip.mbps.dafs-shm.p1", "x": null, "value": 100.0},
        {"series": "gzip.mbps.dafs-shm.p2", "x": null, "value": 190.0}
    ]});
    m.merge(measure::from_json(&gz).unwrap());
    let exps = vec![ran("bench"), skipped("merge", "dafs bench merge: not built yet"), ran("gzip")];
    report::build(SeedsInfo { quick: true, ..Default::default() }, &p, m, exps)
}

#[test]
fn report_from_canned_results() {
    let rep = canned_report();
    let fig = |id: &str| rep.figures.iter().find(|f| f.id == id).unwrap();
    let f3 = fig("000-fig3-left");
    assert_eq!(f3.status, "measured");
    assert!((f3.ratios[0].measured[0].1 - 2.5).abs() < 1e-9);
    assert_eq!(f3.ratios[0].verdict, "within");
    // Project target >= 1.8x and the paper's 2x: 1.9x is within one and below the other.
    let gz = fig("001-gzip");
    assert_eq!(gz.status, "partly measured");
    assert_eq!(gz.ratios[0].verdict, "below");
    assert_eq!(gz.ratios[1].verdict, "within");
    // A figure whose experiment did not run says why.
    let f5 = fig("000-fig5");
    assert_eq!(f5.status, "not measured");
    assert!(f5.missing[0].contains("not built yet"), "{:?}", f5.missing);
    assert!(f5.ratios[0]
        .verdict
        .starts_with("not measured: merge.mbps.dafs-shm: merge not available"));
    assert_eq!(fig("003-fig8").status, "not reproduced");
    // A paper value read from an experiment that did not run says which one.
    let f6 = fig("004-fig6");
    assert!(f6.values[5].ours.is_none());
    assert!(
        f6.values[5].ours_missing.as_deref().unwrap().contains("mpiio was not run"),
        "{:?}",
        f6.values[5]
    );
    let stand_in = f6.ours.iter().find(|s| s.series == "lat.read.rand.qd1.dafs-shm").unwrap();
    assert_eq!(
        stand_in.points[0],
        (4096.0, canned().row("read", "rand", 1, 4096, "dafs-shm").unwrap().lat_us)
    );
}

#[test]
fn markdown_has_every_section() {
    let rep = canned_report();
    let md = super::markdown::markdown(&rep);
    for s in ["000", "001", "002", "003", "004"] {
        assert!(md.contains(&format!("\n## Seed {s}: ")), "seed {s}");
    }
    for f in &rep.figures {
        assert!(md.contains(&format!("### {} {}: ", f.seed, f.figure)), "{}", f.id);
    }
    assert!(md.contains("## Experiments") && md.contains("## Summary"));
    assert!(md.contains("| DAFS / NFS at small blocks (dafs-shm / nfs) | paper | 2.00x .. 3.00x | 2.50x @4 KiB | within |"), "{md}");
    assert!(md.contains("\"DAFS outperforms NFS-nocopy by as much as 40%\""));
    assert!(md.contains("What we could not reproduce, and why: not reproduced: federation"));
    assert!(md.contains("QUICK run"));
}

#[test]
fn write_report_writes_markdown_json_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let mut rep = canned_report();
    super::write_report(dir.path(), &mut rep).unwrap();
    let md = std::fs::read_to_string(dir.path().join("seeds.md")).unwrap();
    assert!(md.starts_with("# Seed experiments"));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("seeds.json")).unwrap())
            .unwrap();
    assert_eq!(j["figures"].as_array().unwrap().len(), rep.figures.len());
    let f3 = rep.figures.iter().find(|f| f.id == "000-fig3-left").unwrap();
    assert_eq!(f3.plot.as_deref(), Some("seeds-000-fig3-left.png"));
    assert!(dir.path().join("seeds-000-fig3-left.png").metadata().unwrap().len() > 1000);
    assert!(md.contains("![000 Fig. 3 (left)](seeds-000-fig3-left.png)"));
}

fn script(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("bench.sh");
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn child(dir: &std::path::Path, body: &str, budget_s: u64) -> runner::Child {
    let out_dir = dir.join("out");
    runner::Child {
        name: "odm".into(),
        program: script(dir, body),
        args: vec!["--out".into(), out_dir.display().to_string()],
        out_dir,
        budget: std::time::Duration::from_secs(budget_s),
        cwd: None,
        env: vec![("SEEDS_TEST_VAR".into(), "x1".into())],
    }
}

#[test]
fn runner_collects_points_and_reports_skips_failures_and_timeouts() {
    let d = tempfile::tempdir().unwrap();
    let ok = r#"[ "$SEEDS_TEST_VAR" = x1 ] || exit 9
echo '{"seed_points":[{"series":"mpiio.bw.read.dafs","x":4096,"value":12.5}]}' > "$2/r.json""#;
    let (run, m) = runner::run_child(&child(d.path(), ok, 20));
    assert_eq!(run.status, "ran");
    assert_eq!(m.at("mpiio.bw.read.dafs", Some(&"min".into())), Some((4096.0, 12.5)));

    let (run, _) =
        runner::run_child(&child(d.path(), "echo 'libfoo-dev missing' >&2; exit 77", 20));
    assert_eq!(run.status, "not available: libfoo-dev missing");
    let (run, _) = runner::run_child(&child(d.path(), "echo boom >&2; exit 3", 20));
    assert_eq!(run.status, "failed (exit 3): boom");
    // A subcommand that does not take --quick yet: clap's error line, not its last line.
    let clap = "printf \"error: unexpected argument '--quick' found\\n\\nFor more information, try '--help'.\\n\" >&2; exit 2";
    let (run, _) = runner::run_child(&child(d.path(), clap, 20));
    assert_eq!(run.status, "not available: error: unexpected argument '--quick' found");
    let t0 = std::time::Instant::now();
    let (run, _) = runner::run_child(&child(d.path(), "sleep 30", 1));
    assert!(run.status.starts_with("failed: over its budget"), "{}", run.status);
    assert!(t0.elapsed().as_secs() < 10);

    let mut c = child(d.path(), "true", 5);
    c.program = d.path().join("absent.sh");
    assert!(runner::run_child(&c).0.status.starts_with("not available: "));
}

#[test]
fn bad_seed_points_are_an_error_not_a_silent_zero() {
    assert!(measure::from_json(&serde_json::json!({"seed_points": [{"series": "x"}]})).is_err());
    let m = measure::from_json(&serde_json::json!({"other": 1})).unwrap();
    assert!(m.series.is_empty());
    let mut m = Measured::default();
    m.add("a", 1.0, f64::NAN);
    assert!(m.get("a").is_none());
}

#[test]
fn unknown_experiment_is_refused() {
    let a = super::SeedsArgs {
        quick: true,
        out: "x".into(),
        only: vec!["tpc".into()],
        budget_s: None,
        bench_args: None,
        repo: None,
    };
    assert!(super::selected(&a).unwrap_err().contains("unknown experiment"));
}

/// The adapters' own JSON rows (as odmblast and bdb/bench.sh print them) become series;
/// a row of another shape adds nothing.
#[test]
fn adapter_json_rows_become_series() {
    let odm = serde_json::json!([
        {"setup": "dafs-shm", "backend": "dafs", "provider": "shm", "test": "seqread", "block_bytes": 16384, "mb_per_s": 812.5, "ios": 10, "file_bytes": 1, "outstanding": 32},
        {"setup": "local", "backend": "local", "provider": "none", "test": "seqread", "block_bytes": 16384, "mb_per_s": 1600.0, "ios": 10, "file_bytes": 1, "outstanding": 32},
        {"setup": "local", "test": "mix", "block_bytes": 4096, "mb_per_s": -1.0}
    ]);
    let m = super::convert::from_doc(&odm);
    assert_eq!(m.at("odm.bw.seqread.dafs-shm", None), Some((16384.0, 812.5)));
    assert!(m.get("odm.bw.mix.local").is_none());
    let bdb = serde_json::json!([
        {"mode": "local", "db_target_mib": 16, "db_file_mib": 16.5, "seconds": 1.0, "reads_per_s": 90000, "cache_hits": 1, "cache_misses": 2},
        {"mode": "shm", "db_target_mib": 16, "db_file_mib": 16.5, "seconds": 1.0, "reads_per_s": 60000, "cache_hits": 1, "cache_misses": 2}
    ]);
    let m = super::convert::from_doc(&bdb);
    assert_eq!(m.at("bdb.tps.shm", None), Some((17301504.0, 60000.0)));
    assert!(super::convert::from_doc(&serde_json::json!([{"mode": "x"}])).series.is_empty());
    let lat = serde_json::json!({"setup": "dafs-shm", "backend": "dafs", "provider": "shm",
        "inline_threshold_bytes": 16384, "iters": 200,
        "points": [{"size_bytes": 2048, "path": "inline", "read_us": 30.0, "write_us": 31.0}],
        "treq_us": 20.0,
        "fit": {"inline": {"read": [25.0, 900.0], "write": [26.0, 0.0]},
                "direct": {"read": [29.0, 950.0], "write": [30.0, 800.0]}}});
    let m = super::convert::from_doc(&lat);
    assert_eq!(m.at("odmlat.treq.dafs-shm", None), Some((0.0, 20.0)));
    assert_eq!(m.at("odmlat.tdisk.read.dafs-shm", None), Some((0.0, 5.0)));
    assert_eq!(m.at("odmlat.trdma.write.dafs-shm", None), Some((0.0, 4.0)));
    assert_eq!(m.at("odmlat.rate.direct.read.dafs-shm", None), Some((0.0, 950.0)));
    assert!(m.get("odmlat.rate.inline.write.dafs-shm").is_none(), "a zero rate is no rate");
    assert_eq!(m.at("odmlat.lat.write.dafs-shm", None), Some((2048.0, 31.0)));
}

/// What `dafs bench merge` and `dafs bench postmark` return becomes the paper table's
/// series (unverified merges and failed targets are left out).
#[test]
fn merge_and_postmark_results_become_series() {
    use crate::merge::{MergeArgs, MergeConfig, MergeResults, MergeRow, MergeSample};
    use crate::postmark::{
        PostmarkArgs, PostmarkConfig, PostmarkResults, SweepPoint, TargetResult,
    };
    #[derive(clap::Parser)]
    struct M {
        #[command(flatten)]
        a: MergeArgs,
    }
    #[derive(clap::Parser)]
    struct P {
        #[command(flatten)]
        a: PostmarkArgs,
    }
    use clap::Parser;
    let row = |system: &str, rec: usize, mbps: f64, verified: bool| MergeRow {
        system: system.into(),
        record_bytes: rec,
        runs: vec![MergeSample { secs: 1.0, bytes: 1, cpu_s: 0.1, srv_cpu_s: None }],
        verified,
        error: None,
        mbps,
        cpu_s_per_gb: 0.5,
        srv_cpu_s_per_gb: None,
    };
    let mr = MergeResults {
        date: String::new(),
        host_load_avg_at_start: String::new(),
        config: MergeConfig::from_args(&M::parse_from(["x", "--quick"]).a).unwrap(),
        input_checksums: vec![],
        rows: vec![
            row("dafs-shm", 16, 300.0, true),
            row("nfs", 16, 200.0, true),
            row("nfs", 4096, 9.0, false),
        ],
        targets: vec![],
        notes: vec![],
        elapsed_s: 1.0,
    };
    let m = super::inproc::from_merge(&mr);
    assert_eq!(m.at("merge.mbps.dafs-shm", Some(&16.into())), Some((16.0, 300.0)));
    assert!(m.at("merge.mbps.nfs", Some(&4096.into())).is_none(), "unverified output counted");
    let t = |target: &str, tps: Option<f64>, error: Option<&str>| TargetResult {
        target: target.into(),
        tx_per_s_wall: tps,
        error: error.map(String::from),
        ..Default::default()
    };
    let pr = PostmarkResults {
        date: String::new(),
        command: String::new(),
        config: PostmarkConfig::from_args(&P::parse_from(["x", "--quick"]).a).unwrap(),
        local_fs: "ext4".into(),
        main: vec![],
        sweep: vec![SweepPoint {
            mean_size_bytes: 4096,
            size_min_bytes: 2048,
            size_max_bytes: 6144,
            results: vec![
                t("postmark-preload", Some(500.0), None),
                t("postmark-local", Some(800.0), None),
                t("native-shm", Some(900.0), Some("boom")),
            ],
        }],
        checks: vec![],
        notes: vec![],
        elapsed_s: 1.0,
    };
    let m = super::inproc::from_postmark(&pr);
    assert_eq!(m.at("postmark.tps.preload", None), Some((4096.0, 500.0)));
    assert_eq!(m.at("postmark.tps.local", None), Some((4096.0, 800.0)));
    assert!(m.get("postmark.tps.dafs-shm").is_none(), "a failed target counted");
}

/// End to end, in a few seconds: `dafs bench seeds` with the microbenchmarks on local
/// files only and a stand-in ODM script in a scratch repository; the report holds the
/// measured figures, the ODM rows, and a line for the experiments left out.
#[test]
fn seeds_run_end_to_end_on_a_tiny_config() {
    let out = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join("adapters/odm")).unwrap();
    let rows = r#"[{"setup":"dafs-shm","test":"seqread","block_bytes":16384,"mb_per_s":500},{"setup":"local","test":"seqread","block_bytes":16384,"mb_per_s":1000}]"#;
    script(&repo.path().join("adapters/odm"), &format!("echo '{rows}' > \"$2/odmblast-x.json\""));
    let a = super::SeedsArgs {
        quick: false,
        out: out.path().to_path_buf(),
        only: vec!["bench".into(), "odm".into(), "bdb".into()],
        budget_s: Some(20),
        bench_args: Some(
            "--backends local --size 1m --block-sizes 4k,64k --secs 0.02 --runs 1 --workloads bandwidth".into(),
        ),
        repo: Some(repo.path().to_path_buf()),
    };
    super::run(&a).unwrap();
    let md = std::fs::read_to_string(out.path().join("seeds.md")).unwrap();
    assert!(md.contains("| bench | "), "{md}");
    assert!(md.contains("| odm | "));
    assert!(md.contains("| bdb | ") && md.contains("bench.sh is not in this tree"));
    // Fig. 3 (left) has our local series; Fig. 2's ratio comes from the ODM rows.
    assert!(md.contains("| DAFS / local sequential reads (odmblast) | paper | <= 0.500x | 0.500x @16 KiB | within |"), "{md}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("seeds.json")).unwrap())
            .unwrap();
    assert!(j["measured"]["series"]["bw.read.rand.qd1.local"].as_array().unwrap().len() == 2);
    assert!(out.path().join("bench/results.json").is_file());
    assert!(out.path().join("seeds-000-fig3-left.png").is_file());
}
