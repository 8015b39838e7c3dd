//! PNG plots with plotters (bitmap backend; text through ab_glyph with a TTF loaded at
//! run time, so no system font library is needed).

use std::path::Path;

use plotters::prelude::*;

use crate::Results;

const FONT_PATHS: [&str; 2] =
    ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/TTF/DejaVuSans.ttf"];

/// Register a sans-serif font; false if none could be loaded (plots are then drawn
/// without text).
pub(crate) fn load_font() -> bool {
    for p in FONT_PATHS {
        if let Ok(bytes) = std::fs::read(p) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return true;
            }
        }
    }
    false
}

fn color(name: &str) -> RGBColor {
    match name {
        "local" | "native-local" => RGBColor(0, 0, 0),
        "dafs-tcp" | "tcp inline" | "native-tcp" => RGBColor(31, 119, 180),
        "dafs-shm" | "shm inline" | "native-shm" => RGBColor(214, 39, 40),
        "postmark-local" => RGBColor(140, 86, 75),
        "postmark-preload" => RGBColor(255, 127, 14),
        "postmark-fuse" => RGBColor(148, 103, 189),
        "nfs" => RGBColor(44, 160, 44),
        "tcp direct" => RGBColor(23, 190, 207),
        "shm direct" => RGBColor(227, 119, 194),
        // Other names (the seeds report's labels): a fixed palette picked by the name, so
        // the lines of one plot differ and a name keeps its colour across plots.
        _ => {
            const PALETTE: [RGBColor; 6] = [
                RGBColor(148, 103, 189),
                RGBColor(255, 127, 14),
                RGBColor(140, 86, 75),
                RGBColor(188, 189, 34),
                RGBColor(23, 190, 207),
                RGBColor(127, 127, 127),
            ];
            let h = name.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            PALETTE[h % PALETTE.len()]
        }
    }
}

pub(crate) type Series = Vec<(String, Vec<(f64, f64)>)>;

/// A line plot, one line per series: x (bytes) on a log2 axis labelled with sizes,
/// y on a log10 axis.
pub(crate) fn line_plot(
    path: &Path,
    title: &str,
    xdesc: &str,
    ydesc: &str,
    series: &Series,
    text: bool,
) -> Result<(), String> {
    let keep = |p: &(f64, f64)| p.0 > 0.0 && p.1 > 0.0 && p.1.is_finite();
    let pts: Vec<(f64, f64)> =
        series.iter().flat_map(|s| s.1.iter().copied()).filter(keep).collect();
    if pts.is_empty() {
        return Err("no data".into());
    }
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    let (mut y0, mut y1) = (f64::MAX, f64::MIN);
    for (x, y) in &pts {
        x0 = x0.min(x.log2());
        x1 = x1.max(x.log2());
        y0 = y0.min(*y);
        y1 = y1.max(*y);
    }
    let (x0, x1) = (x0.floor() - 0.3, x1.ceil() + 0.3);
    let (y0, y1) = (y0 / 1.6, y1 * 1.6);
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let root = BitMapBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut b = ChartBuilder::on(&root);
    b.margin(16);
    if text {
        b.caption(title, ("sans-serif", 24)).x_label_area_size(50).y_label_area_size(80);
    }
    let mut chart = b.build_cartesian_2d(x0..x1, (y0..y1).log_scale()).map_err(|x| e(&x))?;
    if text {
        let steps = (x1 - x0).round() as usize + 1;
        chart
            .configure_mesh()
            .x_desc(xdesc)
            .y_desc(ydesc)
            .x_labels(steps)
            .x_label_formatter(&|v| {
                let r = v.round();
                if (v - r).abs() > 0.05 {
                    return String::new();
                }
                let b = 2f64.powf(r);
                if b >= 1048576.0 {
                    format!("{:.0}M", b / 1048576.0)
                } else if b >= 1024.0 {
                    format!("{:.0}K", b / 1024.0)
                } else {
                    format!("{b:.0}")
                }
            })
            .y_label_formatter(&|v| {
                if *v >= 10.0 {
                    format!("{v:.0}")
                } else if *v >= 1.0 {
                    format!("{v:.1}")
                } else {
                    format!("{v:.3}")
                }
            })
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(|x| e(&x))?;
    }
    for (name, pts) in series {
        let c = color(name);
        let pts: Vec<(f64, f64)> =
            pts.iter().copied().filter(keep).map(|(x, y)| (x.log2(), y)).collect();
        if pts.is_empty() {
            continue;
        }
        let s = chart
            .draw_series(LineSeries::new(pts, c.stroke_width(3)).point_size(4))
            .map_err(|x| e(&x))?;
        if text {
            s.label(name.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3))
            });
        }
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 16))
            .draw()
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Write the plots; returns the file names and an optional note.
pub(crate) fn plots(res: &Results, out: &Path) -> Result<(Vec<String>, Option<String>), String> {
    let text = load_font();
    let note = if text {
        None
    } else {
        Some(format!(
            "plots drawn without text (no font at {}; install fonts-dejavu-core): colours: local black, dafs-tcp blue, dafs-shm red, nfs green",
            FONT_PATHS[0]
        ))
    };
    let mut files = Vec::new();
    let backends = &res.info.backends;
    let mut qds: Vec<usize> =
        res.data.iter().filter(|r| r.op == "read" && r.pattern == "seq").map(|r| r.qd).collect();
    qds.sort_unstable();
    qds.dedup();
    let mut cases: Vec<(&str, usize, String, String)> =
        vec![("rand", 1, "rand_read_qd1".into(), "random reads, QD 1".into())];
    for q in qds {
        cases.push(("seq", q, format!("seq_read_qd{q}"), format!("sequential reads, QD {q}")));
    }
    for (pat, qd, tag, desc) in &cases {
        for (kind, ydesc, f) in [
            ("bw", "MB/s", (|r: &crate::DataRow| r.mbps) as fn(&crate::DataRow) -> f64),
            ("cpu", "client CPU s/GB", |r: &crate::DataRow| r.cpu_s_per_gb),
        ] {
            let series: Series = backends
                .iter()
                .map(|b| {
                    let pts = res
                        .data
                        .iter()
                        .filter(|r| {
                            r.op == "read"
                                && r.pattern == *pat
                                && r.qd == *qd
                                && &r.backend == b
                                && !r.runs.is_empty()
                        })
                        .map(|r| (r.bs as f64, f(r)))
                        .collect();
                    (b.clone(), pts)
                })
                .collect();
            if series.iter().all(|s| s.1.is_empty()) {
                continue;
            }
            let name = format!("{kind}_{tag}.png");
            let title = if kind == "bw" {
                format!("Bandwidth vs block size: {desc}")
            } else {
                format!("Client CPU per GB vs block size: {desc}")
            };
            line_plot(&out.join(&name), &title, "block size (bytes)", ydesc, &series, text)?;
            files.push(name);
        }
    }
    if let Some(l) = &res.latency {
        let mut keys: Vec<String> =
            l.points.iter().map(|p| format!("{} {}", p.transport, p.mode)).collect();
        keys.sort();
        keys.dedup();
        let series: Series = keys
            .iter()
            .map(|k| {
                (
                    k.clone(),
                    l.points
                        .iter()
                        .filter(|p| &format!("{} {}", p.transport, p.mode) == k)
                        .map(|p| (p.size as f64, p.mean_us))
                        .collect(),
                )
            })
            .collect();
        if !series.is_empty() {
            let name = "latency_inline_vs_direct.png".to_string();
            line_plot(
                &out.join(&name),
                "Read latency vs size: inline vs direct (QD 1)",
                "read size (bytes)",
                "mean latency (us)",
                &series,
                text,
            )?;
            files.push(name);
        }
    }
    Ok((files, note))
}
