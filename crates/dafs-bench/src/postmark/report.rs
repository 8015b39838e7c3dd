//! The PostMark report: Markdown tables (main run, I/O-boundedness sweep, the issue's
//! targets) and the target checks.

use std::fmt::Write;
use std::path::Path;

use super::{PostmarkResults, TargetCheck, TargetResult, NFS_WHY_NOT};
use crate::util::{fmt_size, ratio};

/// "ext4", "tmpfs", ... of the file system holding `p` (statfs magic).
pub fn fs_type(p: &Path) -> String {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: statfs fills the zeroed struct we own from a NUL-terminated path.
    let (rc, magic) = unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        let rc = libc::statfs(c.as_ptr(), &mut s);
        (rc, s.f_type as u64)
    };
    if rc != 0 {
        return "unknown".into();
    }
    match magic {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        m => format!("fs magic {m:#x}"),
    }
}

fn get<'a>(rs: &'a [TargetResult], t: &str) -> Option<&'a TargetResult> {
    rs.iter().find(|r| r.target == t && r.error.is_none())
}

fn tps(rs: &[TargetResult], t: &str) -> Option<f64> {
    get(rs, t).and_then(|r| r.tx_per_s_wall)
}

/// The baseline a target is compared with: the same program on local files.
fn baseline(t: &str) -> &'static str {
    if t.starts_with("native-") {
        "native-local"
    } else {
        "postmark-local"
    }
}

fn ratio_to_local(rs: &[TargetResult], t: &str) -> Option<f64> {
    ratio(tps(rs, t)?, tps(rs, baseline(t))?)
}

/// The targets, from this run's ratios.
pub fn checks(res: &PostmarkResults) -> Vec<TargetCheck> {
    let m = ratio_to_local(&res.main, "postmark-preload");
    vec![
        TargetCheck {
            what: "stock PostMark through LD_PRELOAD vs local ext4, tx/s".into(),
            wanted: 0.5,
            measured: m,
            met: m.map(|v| v >= 0.5),
            note: format!("local directory on {}", res.local_fs),
        },
        TargetCheck {
            what: "stock PostMark through LD_PRELOAD vs NFS, tx/s".into(),
            wanted: 5.0,
            measured: None,
            met: None,
            note: format!("not measurable: {NFS_WHY_NOT}"),
        },
    ]
}

fn o0(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.0}")).unwrap_or_else(|| "-".into())
}

fn ox(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".into())
}

fn main_table(out: &mut String, res: &PostmarkResults) {
    let p = &res.config.params;
    let _ = writeln!(
        out,
        "## PostMark: {} files of {}..{} B, {} transactions, read/write blocks {}/{} B, bias read {} create {}, seed {}\n",
        p.files, p.size_min_bytes, p.size_max_bytes, p.transactions, p.read_block_bytes,
        p.write_block_bytes, p.bias_read, p.bias_create, p.seed
    );
    out.push_str("| target | via | tx/s, wall clock (median) | vs the same program on local files | tx/s, transaction phase | client CPU us/tx | created / read / appended / deleted (mixed) |\n|---|---|---|---|---|---|---|\n");
    for r in &res.main {
        if let Some(e) = &r.error {
            let _ = writeln!(
                out,
                "| {} | {} | FAILED: {} | | | | |",
                r.target,
                r.via,
                e.replace('|', "/")
            );
            continue;
        }
        let c = r.counts.clone().unwrap_or_default();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} / {} / {} / {} |",
            r.target,
            r.via,
            o0(r.tx_per_s_wall),
            if r.target == baseline(&r.target) {
                "1.00x".into()
            } else {
                ox(ratio_to_local(&res.main, &r.target))
            },
            o0(r.tx_per_s_phase),
            r.client_cpu_us_per_tx.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
            c.created_mixed,
            c.read,
            c.appended,
            c.deleted_mixed
        );
    }
    let _ = writeln!(out, "| nfs | NFS-Ganesha + libnfs | n/a | | | | |\n");
    out.push_str("Wall clock: transactions over the whole run (pool creation and deletion included), the same measure for the native engine and the stock program (PostMark itself only counts whole seconds; its own figure is the transaction-phase column for the postmark-* rows). The native engine checks every byte it reads.\n\n");
}

fn sweep_table(out: &mut String, res: &PostmarkResults) {
    if res.sweep.is_empty() {
        return;
    }
    let targets: Vec<String> = res.sweep[0].results.iter().map(|r| r.target.clone()).collect();
    let _ = writeln!(
        out,
        "## I/O-boundedness (seed 000 Fig. 6): {} files, {} transactions of create/delete + whole-file read, blocks of {}, tx/s (wall clock)\n",
        res.config.sweep_files, res.config.sweep_transactions, fmt_size(res.config.sweep_block_bytes as u64)
    );
    let _ = write!(out, "| mean file size |");
    for t in &targets {
        let _ = write!(out, " {t} |");
    }
    out.push_str(" preload / local | shm / local (native) |\n|---|");
    out.push_str(&"---|".repeat(targets.len() + 2));
    out.push('\n');
    for pt in &res.sweep {
        let _ = write!(
            out,
            "| {} ({}..{} B) |",
            fmt_size(pt.mean_size_bytes),
            pt.size_min_bytes,
            pt.size_max_bytes
        );
        for t in &targets {
            let cell = match pt.results.iter().find(|r| &r.target == t) {
                Some(r) if r.error.is_some() => "FAILED".to_string(),
                Some(r) => o0(r.tx_per_s_wall),
                None => "-".into(),
            };
            let _ = write!(out, " {cell} |");
        }
        let _ = writeln!(
            out,
            " {} | {} |",
            ox(ratio_to_local(&pt.results, "postmark-preload")),
            ox(ratio_to_local(&pt.results, "native-shm"))
        );
    }
    out.push('\n');
}

pub fn markdown(res: &PostmarkResults) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# dafs bench postmark\n\n{} — `{}`; {} run(s) per measurement (median); local directory and export on {}.\n", res.date, res.command, res.config.runs, res.local_fs);
    main_table(&mut out, res);
    sweep_table(&mut out, res);
    out.push_str("## Targets (ratios measured in this run)\n\n| target | wanted | measured | met |\n|---|---|---|---|\n");
    for c in &res.checks {
        let met = match c.met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "not measured",
        };
        let _ = writeln!(
            out,
            "| {} | >= {:.1}x | {} | {} ({}) |",
            c.what,
            c.wanted,
            ox(c.measured),
            met,
            c.note
        );
    }
    if !res.notes.is_empty() {
        out.push_str("\nNotes:\n\n");
        for n in &res.notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    let _ = writeln!(out, "\nElapsed: {:.0} s.", res.elapsed_s);
    out
}

/// The sweep as a PNG (tx/s vs mean file size, one line per target); the file name.
pub fn sweep_plot(res: &PostmarkResults, out: &Path) -> Result<Option<String>, String> {
    let Some(first) = res.sweep.first() else { return Ok(None) };
    let series: crate::plot::Series = first
        .results
        .iter()
        .map(|r| {
            let pts = res
                .sweep
                .iter()
                .filter_map(|pt| Some((pt.mean_size_bytes as f64, tps(&pt.results, &r.target)?)))
                .collect();
            (r.target.clone(), pts)
        })
        .collect();
    let name = "postmark_sweep.png";
    let text = crate::plot::load_font();
    crate::plot::line_plot(
        &out.join(name),
        "PostMark: effect of I/O-boundedness (seed 000 Fig. 6)",
        "mean file size",
        "transactions/s",
        &series,
        text,
    )?;
    Ok(Some(name.to_string()))
}
