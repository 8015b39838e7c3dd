//! The Markdown report (targets.rs evaluates the targets it lists).

use std::fmt::Write;

use crate::backends::META_PHASES;
use crate::util::{fmt_size, ratio};
use crate::{DataRow, Results};

fn x(r: Option<f64>) -> String {
    match r {
        Some(v) => format!("{v:.2}x"),
        None => "-".into(),
    }
}

fn mbps(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn f3(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "-".into()
    }
}
fn f2(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "-".into()
    }
}
fn f1(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}
fn f0(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.0}")
    } else {
        "-".into()
    }
}
fn o3(v: Option<f64>) -> String {
    v.map(f3).unwrap_or_else(|| "-".into())
}
fn o1(v: Option<f64>) -> String {
    v.map(f1).unwrap_or_else(|| "-".into())
}

/// " (p50 X, p99 Y)" where the row has latency percentiles (QD1), else "".
fn pct(r: &DataRow) -> String {
    match (r.lat_p50_us, r.lat_p99_us) {
        (Some(a), Some(b)) => format!(" (p50 {a:.2}, p99 {b:.2})"),
        _ => String::new(),
    }
}

fn data_table(out: &mut String, res: &Results, op: &str, pat: &str, qd: usize, have_nfs: bool) {
    let rows: Vec<&DataRow> =
        res.data.iter().filter(|r| r.op == op && r.pattern == pat && r.qd == qd).collect();
    if rows.is_empty() {
        return;
    }
    let title = match (op, pat) {
        ("read", "rand") => format!("Random reads, QD {qd} (no read-ahead)"),
        ("read", "seq") if qd == 1 => "Sequential reads, QD 1 (synchronous)".to_string(),
        ("read", "seq") => {
            format!("Sequential reads, QD {qd} (asynchronous: {qd} in flight; local: {qd} threads)")
        }
        ("write", "rand") => format!("Random writes, QD {qd}"),
        _ => format!("Sequential writes, QD {qd} (asynchronous; local: {qd} threads)"),
    };
    let _ = writeln!(out, "\n### {title}\n");
    let mut hdr = "| block | backend | MB/s | IOPS | mean us/op (p50/p99) | client CPU s/GB | server CPU s/GB | other load (cores) | MB/s vs local | CPU/GB vs local |".to_string();
    let mut sep = "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|".to_string();
    if have_nfs {
        hdr.push_str(" MB/s vs nfs | CPU/GB vs nfs |");
        sep.push_str("---:|---:|");
    }
    let _ = writeln!(out, "{hdr}\n{sep}");
    for r in rows {
        if let Some(e) = &r.error {
            if r.runs.is_empty() {
                let _ = writeln!(
                    out,
                    "| {} | {} | ERROR: {} |",
                    fmt_size(r.bs as u64),
                    r.backend,
                    e.replace('|', "/")
                );
                continue;
            }
        }
        let l = res.row(op, pat, qd, r.bs, "local");
        let n = res.row(op, pat, qd, r.bs, "nfs");
        let rel = |o: Option<&DataRow>, f: &dyn Fn(&DataRow) -> f64| {
            if o.map(|o| o.backend == r.backend).unwrap_or(true) {
                "-".to_string()
            } else {
                x(ratio(f(r), f(o.unwrap())))
            }
        };
        let _ = write!(
            out,
            "| {} | {} | {} | {} | {}{} | {} | {} | {} | {} | {} |",
            fmt_size(r.bs as u64),
            r.backend,
            mbps(r.mbps),
            f0(r.iops),
            f2(r.lat_us),
            pct(r),
            f3(r.cpu_s_per_gb),
            o3(r.srv_cpu_s_per_gb),
            r.other_cores.map(f2).unwrap_or_else(|| "-".into()),
            rel(l, &|d| d.mbps),
            rel(l, &|d| d.cpu_s_per_gb),
        );
        if have_nfs {
            let _ = write!(out, " {} | {} |", rel(n, &|d| d.mbps), rel(n, &|d| d.cpu_s_per_gb));
        }
        if r.error.is_some() {
            let _ = write!(out, " (error in a later run)");
        }
        out.push('\n');
    }
}

pub(crate) fn markdown(res: &Results) -> String {
    let i = &res.info;
    let have_nfs = res.info.backends.iter().any(|b| b == "nfs");
    let mut o = String::new();
    let _ = writeln!(o, "# dafs bench report\n");
    let _ = writeln!(o, "- date: {}", i.date);
    let _ = writeln!(o, "- command: `{}`", i.command);
    let _ = writeln!(o, "- host: {}; load average at start: {}", i.host, i.load_avg_at_start);
    let _ = writeln!(
        o,
        "- data file: {} on the export {}; {} run(s) per measurement, median reported; {:.2} s per run of each data test; queue depth {}{}",
        fmt_size(i.file_size),
        i.export_dir,
        i.runs,
        i.secs_per_run,
        i.qd,
        if i.quick { " (--quick)" } else { "" }
    );
    let _ =
        writeln!(o, "- backends: {}; workloads: {}", i.backends.join(", "), i.workloads.join(", "));
    let _ = writeln!(o, "- client spin budget: {} us before sleeping in poll(2); server spin: dafsd --spin-us {} (spinning is paid in CPU: it is inside the client and server CPU/GB columns)", i.client_spin_us, i.server_spin_us);
    if !i.dafsd.is_empty() {
        let _ = writeln!(o, "- dafsd: {}", i.dafsd);
    }
    for (b, s) in &i.sessions {
        let _ = writeln!(o, "- {b} session: {s}");
    }
    let _ = writeln!(o, "- nfs: {}", i.nfs);
    let _ = writeln!(
        o,
        "- total time: {:.0} s; load average at end: {}",
        i.elapsed_s, i.load_avg_at_end
    );
    if let Some(c) = i.other_load_cores {
        let _ = writeln!(
            o,
            "- CPU used by other processes during the data tests (median): {c:.2} cores"
        );
    }
    let _ = writeln!(o, "\nUnits: MB = 1e6 B, GB = 1e9 B. CPU s/GB = user+sys CPU seconds per 1e9 bytes moved (client: this process, getrusage; server: dafsd or ganesha.nfsd, /proc/PID/stat). The local backend has no server: its kernel work is in its client CPU.");

    let _ = writeln!(o, "\n## Targets\n");
    for t in &res.targets {
        let status = if t.status == "PASS" || t.status == "MISS" {
            format!("**{}**", t.status)
        } else {
            t.status.clone()
        };
        if t.detail.is_empty() {
            let _ = writeln!(o, "- {status} {}", t.name);
        } else {
            let _ = writeln!(o, "- {status} {}: {}", t.name, t.detail);
        }
    }

    if !res.data.is_empty() {
        let _ = writeln!(o, "\n## 1. Bandwidth and CPU vs block size\n");
        let _ = writeln!(o, "Every data test reads or writes the same warm {} file for the run time; DAFS uses asynchronous submission into pre-registered memory (completion groups), local uses pread/pwrite.", fmt_size(i.file_size));
        let mut qds: Vec<usize> = res.data.iter().map(|r| r.qd).collect();
        qds.sort_unstable();
        qds.dedup();
        for (op, pat) in [("read", "rand"), ("read", "seq"), ("write", "rand"), ("write", "seq")] {
            for &qd in &qds {
                data_table(&mut o, res, op, pat, qd, have_nfs);
            }
        }
    }

    if let Some(l) = &res.latency {
        let _ = writeln!(o, "\n## 2. Latency model: per-op and per-byte cost, inline vs direct\n");
        for (b, us) in &l.null_us {
            let _ = writeln!(o, "- NULL round trip (zero-byte request) over {b}: {us:.2} us");
        }
        for (k, s) in &l.servers {
            let _ = writeln!(o, "- {k} server: {s}");
        }
        if !l.points.is_empty() {
            let mut cols: Vec<(String, String)> =
                l.points.iter().map(|p| (p.transport.clone(), p.mode.clone())).collect();
            cols.dedup();
            cols.sort();
            cols.dedup();
            let _ = writeln!(
                o,
                "\nMean latency of one random read at QD1 into registered memory (us):\n"
            );
            let _ = write!(o, "| size |");
            for (t, m) in &cols {
                let _ = write!(o, " {t} {m} |");
            }
            let _ = write!(o, "\n|---|");
            for _ in &cols {
                let _ = write!(o, "---:|");
            }
            o.push('\n');
            let mut sizes: Vec<usize> = l.points.iter().map(|p| p.size).collect();
            sizes.sort_unstable();
            sizes.dedup();
            for s in sizes {
                let _ = write!(o, "| {} |", fmt_size(s as u64));
                for (t, m) in &cols {
                    let v = l
                        .points
                        .iter()
                        .find(|p| p.size == s && &p.transport == t && &p.mode == m)
                        .map(|p| f2(p.mean_us))
                        .unwrap_or_else(|| "-".into());
                    let _ = write!(o, " {v} |");
                }
                o.push('\n');
            }
            let _ = writeln!(o, "\nLeast-squares fit latency = per-op + per-byte x size:\n");
            let _ = writeln!(o, "| transport | mode | per-op cost (us) | per-byte cost (ns/B) | i.e. GB/s | r^2 |\n|---|---|---:|---:|---:|---:|");
            for f in &l.fits {
                let gbs = if f.slope_ns_per_byte > 0.0 {
                    f2(1.0 / f.slope_ns_per_byte)
                } else {
                    "-".into()
                };
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {:.4} | {} | {:.3} |",
                    f.transport,
                    f.mode,
                    f2(f.intercept_us),
                    f.slope_ns_per_byte,
                    gbs,
                    f.r2
                );
            }
            let _ = writeln!(o, "\n| transport | fitted crossover | measured: direct faster from | recommended inline threshold |\n|---|---:|---:|---|");
            for c in &l.crossovers {
                let m = c.model_bytes.map(|b| format!("{b:.0} B")).unwrap_or_else(|| "none".into());
                let e = c
                    .empirical_bytes
                    .map(|b| fmt_size(b as u64))
                    .unwrap_or_else(|| "never (in range)".into());
                let _ = writeln!(o, "| {} | {} | {} | {} |", c.transport, m, e, c.recommended);
            }
            // Each provider has its own default (dafs-server INLINE_THRESHOLD_DEFAULT for
            // TCP, INLINE_THRESHOLD_SHM_DEFAULT for shared memory): report what the main
            // server gave each backend's session.
            let given: Vec<String> = res
                .info
                .sessions
                .iter()
                .filter_map(|(name, desc)| {
                    let t: u64 =
                        desc.split("inline threshold ").nth(1)?.split(' ').next()?.parse().ok()?;
                    Some(format!("{name} {}", fmt_size(t)))
                })
                .collect();
            if !given.is_empty() {
                let _ = writeln!(o, "\nThe main server's inline thresholds (per provider; dafs-server INLINE_THRESHOLD_DEFAULT, INLINE_THRESHOLD_SHM_DEFAULT): {}.", given.join(", "));
            } else if let Some(t) = l.default_threshold {
                let _ = writeln!(o, "\nThe server's inline threshold is {}.", fmt_size(t as u64));
            }
        }
    }

    if !res.metadata.is_empty() {
        let _ = writeln!(o, "\n## 3. Small-file metadata mix (PostMark-like)\n");
        let files = res.metadata[0].files;
        let _ = writeln!(o, "{files} files in a fresh directory: phase 1 creates each and writes 4 KiB and closes it, phase 2 opens, reads 4 KiB and closes each, phase 3 unlinks them. No fsync (NFS sends a COMMIT at close of a written file: that is libnfs's behaviour). Mix = 3 x files / total time.\n");
        let mut hdr = String::from("| backend |");
        for p in META_PHASES {
            let _ = write!(hdr, " {p} ops/s |");
        }
        hdr.push_str(" mix ops/s | client CPU us/op (per phase) | server CPU us/op (per phase) | mix vs local |");
        let mut sep = String::from("|---|---:|---:|---:|---:|---|---|---:|");
        if have_nfs {
            hdr.push_str(" mix vs nfs |");
            sep.push_str("---:|");
        }
        let _ = writeln!(o, "{hdr}\n{sep}");
        let get = |b: &str| {
            res.metadata.iter().find(|r| r.backend == b && r.error.is_none()).map(|r| r.mix_ops_s)
        };
        for r in &res.metadata {
            if r.runs.is_empty() {
                let _ = writeln!(
                    o,
                    "| {} | ERROR: {} |",
                    r.backend,
                    r.error.as_deref().unwrap_or("").replace('|', "/")
                );
                continue;
            }
            let vs = |b: &str| {
                if r.backend == b {
                    "-".into()
                } else {
                    x(get(b).and_then(|v| ratio(r.mix_ops_s, v)))
                }
            };
            let _ = write!(
                o,
                "| {} | {} | {} | {} | {} | {} / {} / {} | {} / {} / {} | {} |",
                r.backend,
                f0(r.ops_s[0]),
                f0(r.ops_s[1]),
                f0(r.ops_s[2]),
                f0(r.mix_ops_s),
                f1(r.cpu_us_per_op[0]),
                f1(r.cpu_us_per_op[1]),
                f1(r.cpu_us_per_op[2]),
                o1(r.srv_cpu_us_per_op[0]),
                o1(r.srv_cpu_us_per_op[1]),
                o1(r.srv_cpu_us_per_op[2]),
                vs("local")
            );
            if have_nfs {
                let _ = write!(o, " {} |", vs("nfs"));
            }
            o.push('\n');
        }
    }

    if !res.overlap.is_empty() {
        let _ = writeln!(o, "\n## 4. Overlap of computation and I/O\n");
        let _ = writeln!(o, "An application reads blocks sequentially and computes on each (a calibrated busy loop, {} iterations/us; by default as long as the pure I/O time per block). t_io: reads alone; t_compute: computation alone; t_sync: read then compute; t_async: reads issued `depth` blocks ahead (DAFS: submit_read on a completion group; local: a read-ahead thread). Hidden = (t_sync - t_async) / t_io: 1 means all I/O time is hidden behind computation.\n", f1(i.burner_iters_per_us));
        let _ = writeln!(o, "| backend | block | blocks | depth | compute us/block | t_io s | t_compute s | t_sync s | t_async s | I/O hidden |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &res.overlap {
            if let Some(e) = &r.error {
                let _ = writeln!(
                    o,
                    "| {} | {} | ERROR: {} |",
                    r.backend,
                    fmt_size(r.bs as u64),
                    e.replace('|', "/")
                );
                continue;
            }
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0}% |",
                r.backend,
                fmt_size(r.bs as u64),
                r.blocks,
                r.depth,
                f1(r.compute_us),
                f3(r.t_io),
                f3(r.t_compute),
                f3(r.t_sync),
                f3(r.t_async),
                r.hidden * 100.0
            );
        }
    }

    if !res.client_stats.is_empty() {
        let _ = writeln!(o, "\n## Client path counters (main sessions, whole run)\n");
        for (b, s) in &res.client_stats {
            let _ = writeln!(o, "- {b}: {s}");
        }
    }
    if !res.plots.is_empty() {
        let _ = writeln!(o, "\n## Plots\n");
        for p in &res.plots {
            let _ = writeln!(o, "- [{p}]({p})");
        }
    }
    if !res.notes.is_empty() {
        let _ = writeln!(o, "\n## Notes\n");
        for n in &res.notes {
            let _ = writeln!(o, "- {n}");
        }
    }
    let _ = writeln!(o, "\n## Errors and anomalies\n");
    if res.errors.is_empty() {
        let _ = writeln!(o, "none");
    } else {
        for e in &res.errors {
            let _ = writeln!(o, "- {e}");
        }
    }
    o
}
