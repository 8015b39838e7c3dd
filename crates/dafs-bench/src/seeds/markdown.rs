//! seeds.md: the report rendered as Markdown, one section per seed and one
//! subsection per figure.

use std::fmt::Write;

use super::report::{FigureReport, RatioRow, SeedsReport};

/// A number with about three significant digits.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "-".into()
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// An x value: bytes as sizes when the axis is in bytes.
fn xval(x: f64, bytes: bool) -> String {
    if !bytes || x <= 0.0 {
        return num(x);
    }
    crate::util::fmt_size(x as u64)
}

fn claimed(r: &RatioRow) -> String {
    match (r.min, r.max) {
        (Some(a), Some(b)) if a == b => format!("{}x", num(a)),
        (Some(a), Some(b)) => format!("{}x .. {}x", num(a), num(b)),
        (Some(a), None) => format!(">= {}x", num(a)),
        (None, Some(b)) => format!("<= {}x", num(b)),
        (None, None) => "-".into(),
    }
}

fn measured(r: &RatioRow, bytes: bool) -> String {
    if r.measured.is_empty() {
        return "-".into();
    }
    r.measured
        .iter()
        .map(|(x, v)| {
            if *x > 0.0 {
                format!("{}x @{}", num(*v), xval(*x, bytes))
            } else {
                format!("{}x", num(*v))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Escape a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn values_table(out: &mut String, f: &FigureReport, bytes: bool) {
    let _ = writeln!(
        out,
        "| paper series | paper x | paper value ({}) | source | ours | quote |",
        f.units
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for v in &f.values {
        let ours = match (&v.ours, &v.ours_missing) {
            (Some((x, y)), _) if *x > 0.0 => {
                format!(
                    "{} @{} ({})",
                    num(*y),
                    xval(*x, bytes),
                    v.ours_series.as_deref().unwrap_or("")
                )
            }
            (Some((_, y)), _) => {
                format!("{} ({})", num(*y), v.ours_series.as_deref().unwrap_or(""))
            }
            (None, Some(why)) => format!("not measured: {why}"),
            (None, None) => "no equivalent".into(),
        };
        let paper = match v.paper_value {
            Some(p) => format!("{} ({})", num(p), v.paper_text),
            None => v.paper_text.clone(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | \"{}\" |",
            cell(&v.series),
            cell(v.x.as_deref().unwrap_or("-")),
            cell(&paper),
            v.source,
            cell(&ours),
            cell(&v.quote)
        );
    }
}

fn ours_table(out: &mut String, f: &FigureReport, bytes: bool) {
    if f.ours.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nOurs ({}, {}):\n", f.metric, f.units);
    let mut xs: Vec<f64> = f.ours.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let head: Vec<String> = f.ours.iter().map(|s| cell(&s.label)).collect();
    let xname = f.x_axis.as_deref().unwrap_or("");
    let _ =
        writeln!(out, "| {} | {} |", if xname.is_empty() { "-" } else { xname }, head.join(" | "));
    let _ = writeln!(out, "|---|{}|", vec!["---"; head.len()].join("|"));
    for x in xs {
        let row: Vec<String> = f
            .ours
            .iter()
            .map(|s| s.points.iter().find(|p| p.0 == x).map(|p| num(p.1)).unwrap_or("-".into()))
            .collect();
        let xs = if f.x_axis.is_some() { xval(x, bytes) } else { "-".into() };
        let _ = writeln!(out, "| {xs} | {} |", row.join(" | "));
    }
}

fn ratios_table(out: &mut String, f: &FigureReport, bytes: bool) {
    if f.ratios.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n| ratio | claimed by | claimed | measured | verdict | source |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for r in &f.ratios {
        let src = match &r.derived {
            Some(d) => format!("{d}; \"{}\"", r.quote),
            None => format!("\"{}\"", r.quote),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&r.what),
            r.by,
            claimed(r),
            measured(r, bytes),
            cell(&r.verdict),
            cell(&src)
        );
    }
}

fn figure(out: &mut String, f: &FigureReport) {
    let bytes = f.x_axis.as_deref().is_some_and(|x| x.contains("bytes"));
    let _ = writeln!(out, "\n### {} {}: {}\n", f.seed, f.figure, f.title);
    let _ = writeln!(
        out,
        "Metric: {} ({}). Measured by: {}. **Status: {}.**\n",
        f.metric, f.units, f.experiment, f.status
    );
    values_table(out, f, bytes);
    ours_table(out, f, bytes);
    ratios_table(out, f, bytes);
    if let Some(p) = &f.plot {
        let _ = writeln!(out, "\n![{} {}]({p})", f.seed, f.figure);
    }
    let _ = writeln!(out, "\nWhat we could not reproduce, and why: {}", f.not_reproduced);
    if !f.missing.is_empty() {
        let _ = writeln!(out, "\nMissing in this run: {}.", f.missing.join("; "));
    }
}

fn header(out: &mut String, r: &SeedsReport) {
    let i = &r.info;
    let _ = writeln!(out, "# Seed experiments: the papers' figures beside ours\n");
    let _ = writeln!(
        out,
        "{} — `{}` — {}{} — {:.0} s\n",
        i.date,
        i.command,
        i.host,
        if i.quick { " — QUICK run (small sizes, one run each: indicative only)" } else { "" },
        i.elapsed_s
    );
    let _ = writeln!(out, "The papers ran on 2001-2003 hardware with RDMA NICs; we run on one machine over loopback TCP and shared memory. Absolute values do not compare; the ratios (DAFS/NFS, DAFS/local, 2 processes/1) do, and each table says which ratio the paper claimed.\n");
    let _ = writeln!(out, "## Experiments\n\n| experiment | command | status | time (s) | series |\n|---|---|---|---|---|");
    for e in &r.experiments {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {:.0} | {} |",
            e.name,
            cell(&e.command),
            cell(&e.status),
            e.secs,
            e.series
        );
    }
    for e in r.experiments.iter().filter(|e| !e.notes.is_empty()) {
        let _ = writeln!(
            out,
            "\n{} notes: {}",
            e.name,
            e.notes.iter().map(|n| cell(n)).collect::<Vec<_>>().join("; ")
        );
    }
}

fn summary(out: &mut String, r: &SeedsReport) {
    let _ = writeln!(out, "\n## Summary\n\n| figure | status | ratios within claim | outside | not measured |\n|---|---|---|---|---|");
    for f in &r.figures {
        let n = |p: &dyn Fn(&str) -> bool| f.ratios.iter().filter(|x| p(&x.verdict)).count();
        let _ = writeln!(
            out,
            "| {} {} | {} | {} | {} | {} |",
            f.seed,
            f.figure,
            f.status,
            n(&|v| v == "within"),
            n(&|v| ["above", "below", "mixed"].contains(&v)),
            n(&|v| v.starts_with("not measured"))
        );
    }
}

/// The whole report.
pub fn markdown(r: &SeedsReport) -> String {
    let mut out = String::new();
    header(&mut out, r);
    summary(&mut out, r);
    for s in &r.seeds {
        let _ = writeln!(out, "\n## Seed {}: {}\n\nTheir hardware: {}.", s.id, s.title, s.hardware);
        for f in r.figures.iter().filter(|f| f.seed == s.id) {
            figure(&mut out, f);
        }
    }
    out
}
