//! The latency workload: NULL round trip, read latency vs size forcing inline and forcing
//! direct transfers, a fitted per-op + per-byte model for each, and their crossover.

use std::path::Path;

use dafs_client::Provider;

use crate::backends::{Backend, Dafs, DataSpec};
use crate::server::Dafsd;
use crate::util::{self, heartbeat, median};
use crate::{Cfg, Crossover, LatFit, LatPoint, LatencyResults, DATA_FILE};

/// Least-squares line through (x, y): (intercept, slope, r^2).
pub(crate) fn fit_line(pts: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = pts.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let b = sxy / sxx;
    let a = my - b * mx;
    let r2 = if syy > 0.0 { (sxy * sxy) / (sxx * syy) } else { 1.0 };
    Some((a, b, r2))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn latency_model(
    cfg: &Cfg,
    bin: &Path,
    export: &Path,
    spin: u64,
    tmp: &Path,
    want: &dyn Fn(&str) -> bool,
    lr: &mut LatencyResults,
    errors: &mut Vec<String>,
) -> Result<(), String> {
    // Forced-inline server: every measured size fits its threshold; forced-direct: threshold 0.
    let max_size = *cfg.lat_sizes.iter().max().unwrap();
    let inline_t = (max_size as u32 * 2).max(131072);
    let s_in = Dafsd::start(
        bin,
        export,
        spin,
        Some(inline_t),
        &tmp.join("inline.sock"),
        &tmp.join("dafsd-inline.log"),
    )?;
    let s_di = Dafsd::start(
        bin,
        export,
        spin,
        Some(0),
        &tmp.join("direct.sock"),
        &tmp.join("dafsd-direct.log"),
    )?;
    let mut clients: Vec<(String, String, Dafs)> = Vec::new();
    for (mode, s) in [("inline", &s_in), ("direct", &s_di)] {
        if want("dafs-tcp") {
            clients.push((
                "tcp".into(),
                mode.into(),
                Dafs::new("dafs-tcp", s.addr.clone(), Provider::Tcp, s.pid, cfg.size, DATA_FILE),
            ));
        }
        for (name, url) in crate::ofi::targets(s).into_iter().filter(|(n, _)| want(n)) {
            let short = name.trim_start_matches("dafs-").to_string();
            clients.push((
                short,
                mode.into(),
                Dafs::new(name, url, Provider::Auto, s.pid, cfg.size, DATA_FILE),
            ));
        }
        if want("dafs-shm") {
            if let Some(u) = &s.shm_url {
                clients.push((
                    "shm".into(),
                    mode.into(),
                    Dafs::new("dafs-shm", u.clone(), Provider::Auto, s.pid, cfg.size, DATA_FILE),
                ));
            }
        }
    }
    for (t, m, d) in clients.iter_mut() {
        let desc = d.describe()?;
        let thr = d.client()?.inline_threshold();
        if (m == "inline" && thr < max_size) || (m == "direct" && thr != 0) {
            errors.push(format!("latency model: {t} {m} server negotiated inline threshold {thr}"));
        }
        lr.servers.push((format!("{t} {m}"), desc));
    }
    let data_path = export.join(DATA_FILE);
    let mut pts: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); cfg.lat_sizes.len()]; clients.len()];
    for run in 0..cfg.runs {
        let _ = util::warm(&data_path);
        for (si, &size) in cfg.lat_sizes.iter().enumerate() {
            for (ci, (t, m, d)) in clients.iter_mut().enumerate() {
                heartbeat(&format!("latency {t} {m} {size}"));
                let spec = DataSpec {
                    write: false,
                    rand: true,
                    qd: 1,
                    bs: size,
                    secs: cfg.lat_secs,
                    seed: 7 + run as u64,
                };
                match d.data(&spec) {
                    Ok(s) => pts[ci][si].push(s.secs * 1e6 / s.ops.max(1) as f64),
                    Err(e) => errors.push(format!("latency {t} {m} {size} B: {e}")),
                }
            }
        }
    }
    for (ci, (t, m, d)) in clients.iter().enumerate() {
        let mut line = Vec::new();
        for (si, &size) in cfg.lat_sizes.iter().enumerate() {
            if pts[ci][si].is_empty() {
                continue;
            }
            let mean = median(&pts[ci][si]);
            line.push((size as f64, mean));
            lr.points.push(LatPoint {
                transport: t.clone(),
                mode: m.clone(),
                size,
                mean_us: mean,
                runs_us: pts[ci][si].clone(),
            });
        }
        if let Some((a, b, r2)) = fit_line(&line) {
            lr.fits.push(LatFit {
                transport: t.clone(),
                mode: m.clone(),
                intercept_us: a,
                slope_ns_per_byte: b * 1e3,
                r2,
            });
        }
        if let Some(s) = d.stats() {
            let (inl, dir) = (s.inline_reads, s.direct_reads);
            if (m == "inline" && dir > 0) || (m == "direct" && inl > 0) {
                errors.push(format!("latency model: {t} {m}: {inl} inline and {dir} direct reads (expected only {m})"));
            }
        }
    }
    for t in ["tcp", "shm"] {
        let fi = lr.fits.iter().find(|f| f.transport == t && f.mode == "inline");
        let fd = lr.fits.iter().find(|f| f.transport == t && f.mode == "direct");
        let (Some(fi), Some(fd)) = (fi, fd) else { continue };
        // inline: a_i + b_i x ; direct: a_d + b_d x ; equal at x = (a_d - a_i) / (b_i - b_d)
        let db = (fi.slope_ns_per_byte - fd.slope_ns_per_byte) / 1e3;
        let model = if db > 0.0 { Some((fd.intercept_us - fi.intercept_us) / db) } else { None };
        let get = |mode: &str, size: usize| {
            lr.points
                .iter()
                .find(|p| p.transport == t && p.mode == mode && p.size == size)
                .map(|p| p.mean_us)
        };
        let mut empirical = None;
        for &size in cfg.lat_sizes.iter().rev() {
            match (get("inline", size), get("direct", size)) {
                (Some(i), Some(d)) if d < i => empirical = Some(size),
                _ => break,
            }
        }
        let recommended = match (model, empirical) {
            (Some(x), _) if x <= 0.0 => "0 (direct is cheaper at every size)".to_string(),
            (Some(x), _) => {
                let p = 2f64.powf(x.log2().round());
                format!(
                    "{} (crossover of the fitted lines at {:.0} B, rounded to a power of two)",
                    util::fmt_size(p as u64),
                    x
                )
            }
            (None, _) => format!(
                "above {} (inline is cheaper at every size: its per-byte cost is not higher)",
                util::fmt_size(max_size as u64)
            ),
        };
        lr.crossovers.push(Crossover {
            transport: t.into(),
            model_bytes: model,
            empirical_bytes: empirical,
            recommended,
        });
    }
    drop(clients);
    drop(s_in);
    drop(s_di);
    Ok(())
}
