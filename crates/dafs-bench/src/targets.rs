//! The Targets of `dafs bench` (issue 15; the libfabric ones of issue 16). Every ratio
//! compares two rows of the same run at the same operation, access pattern, block size and
//! queue depth (never dafs at QD N against local at QD 1). A target spanning several rows
//! (every block size, every queue depth) passes only if each pair does; its line names the
//! worst pair with the numbers on both sides and lists the pairs that missed.

use crate::util::fmt_size;
use crate::{DataRow, MetaRow, Results, Target};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// What one pair of rows must satisfy: `a` >= `tput_min` x `b` in MB/s (at equal block
/// size that is the ops/s ratio too) and, when set, `a`'s client CPU per GB <=
/// `cpu_max` x `b`'s.
#[derive(Clone, Copy)]
struct Rule {
    tput_min: f64,
    cpu_max: Option<f64>,
}

/// Two rows to compare: `a` against `b`.
struct Pair<'a> {
    a: &'a DataRow,
    b: &'a DataRow,
}

impl Pair<'_> {
    fn tput(&self) -> f64 {
        self.a.mbps / self.b.mbps
    }
    fn cpu(&self) -> f64 {
        self.a.cpu_s_per_gb / self.b.cpu_s_per_gb
    }
    /// How far the pair is from its limits: >= 1 passes; the smaller, the worse.
    fn margin(&self, r: Rule) -> f64 {
        let t = self.tput() / r.tput_min;
        let m = match r.cpu_max {
            Some(c) => t.min(c / self.cpu()),
            None => t,
        };
        if m.is_nan() {
            0.0
        } else {
            m
        }
    }
    fn what(&self) -> String {
        let r = self.a;
        format!("{} {} QD{} {}", r.op, r.pattern, r.qd, fmt_size(r.bs as u64))
    }
    /// One side's numbers; `qd` names its queue depth (when the two sides differ in it).
    fn side(r: &DataRow, cpu: bool, qd: bool) -> String {
        let ops = if r.bs <= 16 * KIB {
            format!(", {:.0} ops/s, {:.2} us", r.iops, r.lat_us)
        } else {
            String::new()
        };
        let cpu = if cpu { format!(", {:.3} s/GB", r.cpu_s_per_gb) } else { String::new() };
        let qd = if qd { format!(" QD{}", r.qd) } else { String::new() };
        format!("{}{qd} {:.1} MB/s{ops}{cpu}", r.backend, r.mbps)
    }
    fn detail(&self, r: Rule) -> String {
        let cpu = r.cpu_max.is_some();
        let qd = self.a.qd != self.b.qd;
        let mut s = format!(
            "{}: {} vs {}: {:.2}x",
            self.what(),
            Self::side(self.a, cpu, qd),
            Self::side(self.b, cpu, qd),
            self.tput()
        );
        if cpu {
            s.push_str(&format!(", {:.2}x CPU/GB", self.cpu()));
        }
        s
    }
}

/// Status and detail of a target over `pairs` (n/a with `na` when there are none).
fn judge(name: String, pairs: &[Pair], r: Rule, na: &str) -> Target {
    if pairs.is_empty() {
        return Target { name, status: format!("n/a ({na})"), detail: String::new() };
    }
    let worst = pairs
        .iter()
        .min_by(|x, y| x.margin(r).total_cmp(&y.margin(r)))
        .expect("pairs is not empty");
    let missed: Vec<&Pair> = pairs.iter().filter(|p| p.margin(r) < 1.0).collect();
    let mut detail = if pairs.len() == 1 {
        worst.detail(r)
    } else {
        format!("{} pairs, {} missed; worst {}", pairs.len(), missed.len(), worst.detail(r))
    };
    if missed.len() > 1 {
        let list: Vec<String> =
            missed.iter().map(|p| format!("{} {:.2}x", p.what(), p.tput())).collect();
        detail.push_str(&format!("; missed: {}", list.join(", ")));
    }
    let status = if missed.is_empty() { "PASS" } else { "MISS" };
    Target { name, status: status.into(), detail }
}

/// Every data row of backend `a` that `keep` selects, with the row of backend `b` at the
/// same operation, pattern, queue depth and block size (rows without a partner are left out).
fn pairs<'a>(res: &'a Results, a: &str, b: &str, keep: impl Fn(&DataRow) -> bool) -> Vec<Pair<'a>> {
    res.data
        .iter()
        .filter(|r| r.backend == a && r.error.is_none() && keep(r))
        .filter_map(|r| Some(Pair { a: r, b: res.row(r.op, r.pattern, r.qd, r.bs, b)? }))
        .collect()
}

fn meta<'a>(res: &'a Results, backend: &str) -> Option<&'a MetaRow> {
    res.metadata
        .iter()
        .find(|r| r.backend == backend && r.error.is_none() && r.mix_ops_s.is_finite())
}

fn meta_target(res: &Results, a: &str, b: &str, min: f64, na: &str) -> Target {
    let name = format!("metadata mix over {a} >= {min}x {b} ops/s");
    match (meta(res, a), meta(res, b)) {
        (Some(x), Some(y)) => {
            let r = x.mix_ops_s / y.mix_ops_s;
            Target {
                name,
                status: if r >= min { "PASS" } else { "MISS" }.into(),
                detail: format!(
                    "{a} {:.0} ops/s vs {b} {:.0} ops/s: {r:.2}x",
                    x.mix_ops_s, y.mix_ops_s
                ),
            }
        }
        _ => Target { name, status: format!("n/a ({na})"), detail: String::new() },
    }
}

/// The targets of one run; `qd` is the run's deeper queue depth (`--qd`).
pub(crate) fn evaluate(res: &Results, qd: usize, have_nfs: bool) -> Vec<Target> {
    let mut t = Vec::new();
    let no_nfs = "no NFS baseline";
    let nfs_na = |what: &str| if have_nfs { what.to_string() } else { no_nfs.to_string() };
    let reads = |r: &DataRow| r.op == "read";
    let big = |r: &DataRow| (64 * KIB..=MIB).contains(&r.bs);

    // Shared memory at the limit: local pread speed, at a tenth of its CPU.
    let shm = Rule { tput_min: 0.9, cpu_max: Some(0.1) };
    let mut depths = vec![1];
    if qd > 1 {
        depths.push(qd);
    }
    for d in depths {
        let p = pairs(res, "dafs-shm", "local", |r| reads(r) && big(r) && r.qd == d);
        t.push(judge(
            format!(
                "dafs-shm 64 KiB-1 MiB reads QD{d} >= 0.9x local with client CPU/GB <= 0.1x local"
            ),
            &p,
            shm,
            "not measured: needs 64 KiB-1 MiB reads on dafs-shm and local",
        ));
    }

    // shm 4 KiB QD1 latency percentiles.
    let name = "dafs-shm 4 KiB random reads QD1: p50 and p99 <= 2 us".to_string();
    t.push(match res.row("read", "rand", 1, 4 * KIB, "dafs-shm") {
        Some(s) => match (s.lat_p50_us, s.lat_p99_us) {
            (Some(p50), Some(p99)) => {
                let local = res
                    .row("read", "rand", 1, 4 * KIB, "local")
                    .and_then(|l| Some((l.lat_p50_us?, l.lat_p99_us?)))
                    .map(|(a, b)| format!(" (local pread: p50 {a:.2} us, p99 {b:.2} us)"))
                    .unwrap_or_default();
                Target {
                    name,
                    status: if p50 <= 2.0 && p99 <= 2.0 { "PASS" } else { "MISS" }.into(),
                    detail: format!(
                        "dafs-shm p50 {p50:.2} us, p99 {p99:.2} us (mean {:.2} us){local}",
                        s.lat_us
                    ),
                }
            }
            _ => Target {
                name,
                status: "n/a (no latency percentiles recorded)".into(),
                detail: String::new(),
            },
        },
        None => Target {
            name,
            status: "n/a (not measured: needs 4 KiB random reads on dafs-shm)".into(),
            detail: String::new(),
        },
    });

    // TCP against NFS everywhere, and its own scaling with the queue depth.
    let p = pairs(res, "dafs-tcp", "nfs", |_| true);
    t.push(judge(
        "dafs-tcp >= 1.5x NFS at every block size and queue depth".into(),
        &p,
        Rule { tput_min: 1.5, cpu_max: None },
        &nfs_na("not measured: needs the bandwidth workload on dafs-tcp and nfs"),
    ));
    let name = format!("dafs-tcp sequential reads QD{qd} >= 1.5x QD1 at 64-256 KiB");
    let p: Vec<Pair> = if qd > 1 {
        res.data
            .iter()
            .filter(|r| {
                r.backend == "dafs-tcp"
                    && r.error.is_none()
                    && r.op == "read"
                    && r.pattern == "seq"
                    && r.qd == qd
                    && (64 * KIB..=256 * KIB).contains(&r.bs)
            })
            .filter_map(|r| Some(Pair { a: r, b: res.row("read", "seq", 1, r.bs, "dafs-tcp")? }))
            .collect()
    } else {
        Vec::new()
    };
    let na = if qd > 1 {
        "not measured: needs 64-256 KiB sequential reads on dafs-tcp"
    } else {
        "--qd 1: no deeper queue measured"
    };
    t.push(judge(name, &p, Rule { tput_min: 1.5, cpu_max: None }, na));
    let p = pairs(res, "dafs-tcp", "nfs", |r| reads(r) && r.pattern == "seq" && r.bs == MIB);
    t.push(judge(
        "dafs-tcp 1 MiB sequential reads >= 2x NFS at <= 0.5x its client CPU/GB".into(),
        &p,
        Rule { tput_min: 2.0, cpu_max: Some(0.5) },
        &nfs_na("not measured: needs 1 MiB sequential reads on dafs-tcp and nfs"),
    ));
    let p = pairs(res, "dafs-tcp", "nfs", |r| {
        reads(r) && r.pattern == "rand" && r.qd == 1 && r.bs == 4 * KIB
    });
    t.push(judge(
        "dafs-tcp 4 KiB random reads QD1 >= 4x NFS ops/s".into(),
        &p,
        Rule { tput_min: 4.0, cpu_max: None },
        &nfs_na("not measured: needs 4 KiB random reads on dafs-tcp and nfs"),
    ));

    // Metadata without round trips.
    t.push(meta_target(
        res,
        "dafs-shm",
        "local",
        0.8,
        "not measured: needs the metadata workload on dafs-shm and local",
    ));
    t.push(meta_target(
        res,
        "dafs-tcp",
        "nfs",
        10.0,
        &nfs_na("not measured: needs the metadata workload on dafs-tcp and nfs"),
    ));

    // libfabric against the native providers (issue 16), when those backends ran.
    let ofi_na = |b: &str| {
        if res.info.backends.iter().any(|x| x == b) {
            format!("not measured: needs the bandwidth workload on {b} and its native provider")
        } else {
            format!("{b} did not run")
        }
    };
    let p = pairs(res, "dafs-ofi-shm", "dafs-shm", |r| r.bs == MIB);
    t.push(judge(
        "dafs-ofi-shm >= 0.8x dafs-shm at 1 MiB".into(),
        &p,
        Rule { tput_min: 0.8, cpu_max: None },
        &ofi_na("dafs-ofi-shm"),
    ));
    let p = pairs(res, "dafs-ofi-tcp", "dafs-tcp", |_| true);
    t.push(judge(
        "dafs-ofi-tcp >= 0.8x dafs-tcp at every block size and queue depth".into(),
        &p,
        Rule { tput_min: 0.8, cpu_max: None },
        &ofi_na("dafs-ofi-tcp"),
    ));
    t
}

#[cfg(test)]
#[path = "targets_tests.rs"]
mod tests;
