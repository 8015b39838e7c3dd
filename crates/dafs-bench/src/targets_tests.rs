//! Unit tests of the target evaluation: a run meeting every target passes each, and each
//! target misses when one number of one pair falls short.

use super::evaluate;
use crate::{DataRow, MetaRow, Results, Target};

const K: usize = 1024;
const SIZES: [usize; 5] = [4 * K, 16 * K, 64 * K, 256 * K, 1024 * K];
const TESTS: [(&str, &str, usize); 5] = [
    ("read", "rand", 1),
    ("read", "seq", 1),
    ("read", "seq", 8),
    ("write", "rand", 1),
    ("write", "seq", 8),
];

fn row(
    op: &'static str,
    pattern: &'static str,
    qd: usize,
    bs: usize,
    backend: &str,
    mbps: f64,
    cpu: f64,
) -> DataRow {
    let iops = mbps * 1e6 / bs as f64;
    DataRow {
        op,
        pattern,
        qd,
        bs,
        backend: backend.into(),
        runs: Vec::new(),
        error: None,
        mbps,
        iops,
        lat_us: qd as f64 * 1e6 / iops,
        lat_p50_us: (qd == 1).then_some(1.0),
        lat_p99_us: (qd == 1).then_some(1.5),
        other_cores: None,
        cpu_s_per_gb: cpu,
        srv_cpu_s_per_gb: None,
    }
}

fn meta(backend: &str, mix: f64) -> MetaRow {
    MetaRow {
        backend: backend.into(),
        files: 100,
        runs: Vec::new(),
        error: None,
        ops_s: [mix; 3],
        cpu_us_per_op: [1.0; 3],
        srv_cpu_us_per_op: [None; 3],
        mix_ops_s: mix,
    }
}

/// A run in which every target passes: local at 1000 MB/s (QD1) or 3000 MB/s (QD8) and
/// 0.5 s/GB, NFS at 100 MB/s and 1 s/GB; dafs-shm at 0.95x local and 0.02 s/GB; dafs-tcp
/// at 5x NFS (QD8 twice QD1) and 0.3 s/GB; the libfabric backends at 0.9x native.
fn good() -> Results {
    let mut res = Results::default();
    for (op, pat, qd) in TESTS {
        for bs in SIZES {
            let local = if qd == 1 { 1000.0 } else { 3000.0 };
            let tcp = if qd == 1 { 500.0 } else { 1000.0 };
            res.data.push(row(op, pat, qd, bs, "local", local, 0.5));
            res.data.push(row(op, pat, qd, bs, "nfs", 100.0, 1.0));
            res.data.push(row(op, pat, qd, bs, "dafs-shm", local * 0.95, 0.02));
            res.data.push(row(op, pat, qd, bs, "dafs-tcp", tcp, 0.3));
            res.data.push(row(op, pat, qd, bs, "dafs-ofi-shm", local * 0.95 * 0.9, 0.03));
            res.data.push(row(op, pat, qd, bs, "dafs-ofi-tcp", tcp * 0.9, 0.4));
        }
    }
    for (b, mix) in
        [("local", 10_000.0), ("dafs-shm", 9_000.0), ("dafs-tcp", 5_000.0), ("nfs", 400.0)]
    {
        res.metadata.push(meta(b, mix));
    }
    res.info.backends = ["local", "dafs-tcp", "dafs-shm", "dafs-ofi-tcp", "dafs-ofi-shm", "nfs"]
        .map(String::from)
        .to_vec();
    res
}

fn find<'a>(t: &'a [Target], prefix: &str) -> &'a Target {
    t.iter()
        .find(|t| t.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("no target {prefix}: {t:?}"))
}

/// Set one field of one row.
fn set(
    res: &mut Results,
    op: &str,
    pat: &str,
    qd: usize,
    bs: usize,
    backend: &str,
    f: impl Fn(&mut DataRow),
) {
    let r = res
        .data
        .iter_mut()
        .find(|r| {
            r.op == op && r.pattern == pat && r.qd == qd && r.bs == bs && r.backend == backend
        })
        .expect("row");
    f(r);
}

/// (name prefix, status) of every target.
fn statuses(res: &Results, have_nfs: bool) -> Vec<(String, String)> {
    evaluate(res, 8, have_nfs).into_iter().map(|t| (t.name, t.status)).collect()
}

#[test]
fn a_run_meeting_every_target_passes_all_eleven() {
    let t = evaluate(&good(), 8, true);
    assert_eq!(t.len(), 11, "{t:?}");
    for t in &t {
        assert_eq!(t.status, "PASS", "{t:?}");
        assert!(!t.detail.is_empty(), "{t:?}");
    }
    // Numbers on both sides.
    let s = find(&t, "dafs-shm 64 KiB-1 MiB reads QD8");
    assert!(
        s.detail.contains("dafs-shm 2850.0 MB/s") && s.detail.contains("local 3000.0 MB/s"),
        "{s:?}"
    );
    assert!(s.detail.contains("3 pairs, 0 missed"), "{s:?}");
}

#[test]
fn shm_is_compared_with_local_at_the_same_queue_depth() {
    // dafs-shm at QD8 beats local at QD1 (1000 MB/s) but not local at QD8 (3000 MB/s):
    // the old target compared across queue depths and passed this.
    let mut res = good();
    set(&mut res, "read", "seq", 8, 1024 * K, "dafs-shm", |r| r.mbps = 2000.0);
    let t = evaluate(&res, 8, true);
    let s = find(&t, "dafs-shm 64 KiB-1 MiB reads QD8");
    assert_eq!(s.status, "MISS", "{s:?}");
    assert!(s.detail.contains("worst read seq QD8 1 MiB") && s.detail.contains("0.67x"), "{s:?}");
    assert_eq!(find(&t, "dafs-shm 64 KiB-1 MiB reads QD1").status, "PASS");
}

#[test]
fn shm_misses_on_throughput_or_cpu_at_any_size_in_range() {
    let mut res = good();
    set(&mut res, "read", "rand", 1, 64 * K, "dafs-shm", |r| r.mbps = 850.0);
    assert_eq!(find(&evaluate(&res, 8, true), "dafs-shm 64 KiB-1 MiB reads QD1").status, "MISS");
    let mut res = good();
    set(&mut res, "read", "seq", 1, 256 * K, "dafs-shm", |r| r.cpu_s_per_gb = 0.06);
    let t = evaluate(&res, 8, true);
    let s = find(&t, "dafs-shm 64 KiB-1 MiB reads QD1");
    assert_eq!(s.status, "MISS", "{s:?}");
    assert!(s.detail.contains("0.12x CPU/GB"), "{s:?}");
    // Outside the range (16 KiB) and writes do not count.
    let mut res = good();
    set(&mut res, "read", "seq", 1, 16 * K, "dafs-shm", |r| r.mbps = 10.0);
    set(&mut res, "write", "seq", 8, 1024 * K, "dafs-shm", |r| r.mbps = 10.0);
    let t = evaluate(&res, 8, true);
    assert_eq!(find(&t, "dafs-shm 64 KiB-1 MiB reads QD1").status, "PASS");
    assert_eq!(find(&t, "dafs-shm 64 KiB-1 MiB reads QD8").status, "PASS");
}

#[test]
fn shm_latency_needs_p50_and_p99_at_most_2_us() {
    let mut res = good();
    set(&mut res, "read", "rand", 1, 4 * K, "dafs-shm", |r| r.lat_p99_us = Some(2.5));
    let t = evaluate(&res, 8, true);
    let s = find(&t, "dafs-shm 4 KiB random reads QD1");
    assert_eq!(s.status, "MISS");
    assert!(
        s.detail.contains("p99 2.50 us") && s.detail.contains("local pread: p50 1.00 us"),
        "{s:?}"
    );
    set(&mut res, "read", "rand", 1, 4 * K, "dafs-shm", |r| {
        r.lat_p99_us = Some(1.9);
        r.lat_p50_us = Some(2.1)
    });
    assert_eq!(find(&evaluate(&res, 8, true), "dafs-shm 4 KiB random reads QD1").status, "MISS");
}

#[test]
fn tcp_against_nfs_misses_on_any_single_pair() {
    let mut res = good();
    set(&mut res, "write", "rand", 1, 16 * K, "dafs-tcp", |r| r.mbps = 140.0);
    let t = evaluate(&res, 8, true);
    let s = find(&t, "dafs-tcp >= 1.5x NFS");
    assert_eq!(s.status, "MISS", "{s:?}");
    assert!(s.detail.starts_with("25 pairs, 1 missed; worst write rand QD1 16 KiB"), "{s:?}");
    assert!(s.detail.contains("nfs 100.0 MB/s"), "{s:?}");
}

#[test]
fn tcp_queue_depth_scaling_is_checked_at_64_to_256_kib() {
    let mut res = good();
    set(&mut res, "read", "seq", 8, 256 * K, "dafs-tcp", |r| r.mbps = 700.0);
    let t = evaluate(&res, 8, true);
    let s = find(&t, "dafs-tcp sequential reads QD8 >= 1.5x QD1");
    assert_eq!(s.status, "MISS", "{s:?}");
    assert!(
        s.detail.contains("dafs-tcp QD8 700.0 MB/s vs dafs-tcp QD1 500.0 MB/s: 1.40x"),
        "{s:?}"
    );
    // 1 MiB is outside the range.
    let mut res = good();
    set(&mut res, "read", "seq", 8, 1024 * K, "dafs-tcp", |r| r.mbps = 500.0);
    let t = evaluate(&res, 8, true);
    assert_eq!(find(&t, "dafs-tcp sequential reads QD8").status, "PASS");
    // --qd 1: nothing to compare.
    let t = evaluate(&good(), 1, true);
    assert!(find(&t, "dafs-tcp sequential reads QD1 >= 1.5x QD1")
        .status
        .starts_with("n/a (--qd 1"));
}

#[test]
fn tcp_1_mib_needs_twice_nfs_at_half_its_cpu() {
    let mut res = good();
    set(&mut res, "read", "seq", 1, 1024 * K, "dafs-tcp", |r| r.cpu_s_per_gb = 0.6);
    let t = evaluate(&res, 8, true);
    let s = find(&t, "dafs-tcp 1 MiB sequential reads");
    assert_eq!(s.status, "MISS", "{s:?}");
    assert!(
        s.detail.contains("0.60x CPU/GB") && s.detail.contains("nfs 100.0 MB/s, 1.000 s/GB"),
        "{s:?}"
    );
    let mut res = good();
    set(&mut res, "read", "seq", 8, 1024 * K, "dafs-tcp", |r| r.mbps = 190.0);
    assert_eq!(find(&evaluate(&res, 8, true), "dafs-tcp 1 MiB sequential reads").status, "MISS");
}

#[test]
fn tcp_4_kib_needs_four_times_nfs() {
    let mut res = good();
    set(&mut res, "read", "rand", 1, 4 * K, "dafs-tcp", |r| {
        r.mbps = 390.0;
        r.iops = 390.0e6 / 4096.0
    });
    let t = evaluate(&res, 8, true);
    let s = find(&t, "dafs-tcp 4 KiB random reads QD1");
    assert_eq!(s.status, "MISS", "{s:?}");
    assert!(s.detail.contains("3.90x") && s.detail.contains("ops/s"), "{s:?}");
}

#[test]
fn metadata_targets_compare_shm_with_local_and_tcp_with_nfs() {
    let mut res = good();
    res.metadata[1].mix_ops_s = 7_900.0; // dafs-shm 0.79x local
    res.metadata[2].mix_ops_s = 3_900.0; // dafs-tcp 9.75x NFS
    let t = evaluate(&res, 8, true);
    let s = find(&t, "metadata mix over dafs-shm >= 0.8x local");
    assert_eq!(s.status, "MISS");
    assert_eq!(s.detail, "dafs-shm 7900 ops/s vs local 10000 ops/s: 0.79x");
    assert_eq!(find(&t, "metadata mix over dafs-tcp >= 10x nfs").status, "MISS");
}

#[test]
fn ofi_targets_compare_with_the_native_providers() {
    let mut res = good();
    // ofi:shm only counts at 1 MiB; ofi:tcp at every size.
    set(&mut res, "read", "seq", 1, 4 * K, "dafs-ofi-shm", |r| r.mbps = 1.0);
    let t = evaluate(&res, 8, true);
    assert_eq!(find(&t, "dafs-ofi-shm").status, "PASS");
    set(&mut res, "write", "seq", 8, 1024 * K, "dafs-ofi-shm", |r| r.mbps = 2000.0);
    set(&mut res, "read", "rand", 1, 4 * K, "dafs-ofi-tcp", |r| r.mbps = 390.0);
    let t = evaluate(&res, 8, true);
    assert_eq!(find(&t, "dafs-ofi-shm").status, "MISS");
    assert_eq!(find(&t, "dafs-ofi-tcp").status, "MISS");
}

#[test]
fn missing_backends_are_not_applicable_never_passed() {
    let mut res = good();
    res.data.retain(|r| r.backend != "nfs" && !r.backend.starts_with("dafs-ofi"));
    res.metadata.retain(|r| r.backend != "nfs");
    res.info.backends.retain(|b| b != "nfs" && !b.starts_with("dafs-ofi"));
    let s = statuses(&res, false);
    let na: Vec<&(String, String)> = s.iter().filter(|(_, st)| st.starts_with("n/a")).collect();
    assert_eq!(na.len(), 6, "{s:?}");
    for (n, st) in &na {
        let want = if n.contains("ofi") { "did not run)" } else { "(no NFS baseline)" };
        assert!(st.ends_with(want), "{n}: {st}");
    }
    // A data row with an error does not count as measured.
    let mut res = good();
    for r in res.data.iter_mut().filter(|r| r.backend == "dafs-shm" && r.bs == 4 * K) {
        r.error = Some("boom".into());
    }
    let t = evaluate(&res, 8, true);
    assert!(find(&t, "dafs-shm 4 KiB random reads QD1").status.starts_with("n/a (not measured"));
}
