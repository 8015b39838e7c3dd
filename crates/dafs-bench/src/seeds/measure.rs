//! Our measurements as named series of (x, value) points, the currency between the
//! experiments and the report.
//!
//! Keys (x is the block, record or file size in bytes; no x means a single value, stored
//! at x = 0):
//! - from `dafs bench` (`from_bench`): `bw.{op}.{rand|seq}.qd{1|N}.{backend}` MB/s,
//!   `cpupct.*` client CPU % of one core, `cpugb.*` client CPU s/GB, `cpuop.*` client CPU
//!   us per request, `lat.*` us per request (all with the same middle part; `qdN` is the
//!   asynchronous depth), `null.{backend}` us, `fit.intercept.{tcp|shm}.{inline|direct}`
//!   us, `fit.rate.*` MB/s (1 / slope), `fit.extra.{tcp|shm}` us (direct minus inline
//!   intercept), `overlap.hidden.{backend}` % of I/O time hidden;
//! - from the other experiments (`from_json`): any JSON they write may hold a top-level
//!   `"seed_points": [{"series": KEY, "x": number or null, "value": number}]`; the keys
//!   paper.json expects are `merge.mbps.{backend}`, `postmark.tps.{variant}`,
//!   `gzip.mbps.{variant}.p{1|2}`, `bdb.tps.{fs}`, `odm.bw.{seqread|randread|seqwrite|
//!   randwrite|mix}.{fs}`, `mpiio.{bw|lat|overlap}.{kind}.{fs}` (docs/benchmarks.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Results;

/// Series name -> points sorted by x.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Measured {
    pub series: BTreeMap<String, Vec<(f64, f64)>>,
}

/// One point as the experiments write it in their JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeedPoint {
    pub series: String,
    pub x: Option<f64>,
    pub value: f64,
}

impl Measured {
    /// Add a point (a finite value only: a failed run adds nothing rather than a NaN).
    pub fn add(&mut self, series: &str, x: f64, value: f64) {
        if !value.is_finite() || !x.is_finite() {
            return;
        }
        let v = self.series.entry(series.to_string()).or_default();
        v.retain(|p| p.0 != x);
        v.push((x, value));
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }

    pub fn get(&self, series: &str) -> Option<&Vec<(f64, f64)>> {
        self.series.get(series).filter(|v| !v.is_empty())
    }

    /// Value at a pick: "min"/"max" x, "peak" value, a number x, or the single value.
    pub fn at(&self, series: &str, at: Option<&serde_json::Value>) -> Option<(f64, f64)> {
        let v = self.get(series)?;
        match at {
            None => v.first().copied(),
            Some(serde_json::Value::String(s)) => match s.as_str() {
                "min" => v.first().copied(),
                "max" => v.last().copied(),
                "peak" => v.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)),
                _ => None,
            },
            Some(serde_json::Value::Number(n)) => {
                let x = n.as_f64()?;
                v.iter().copied().find(|p| p.0 == x)
            }
            Some(_) => None,
        }
    }

    /// Ratios num / den. "all": one per x both series have; "min"/"max": at the smallest /
    /// largest x both have (so the two sides are read at the same x); otherwise each
    /// side at its own pick.
    pub fn ratios(
        &self,
        num: &str,
        num_at: Option<&serde_json::Value>,
        den: &str,
        den_at: Option<&serde_json::Value>,
    ) -> Vec<(f64, f64)> {
        let same = |a: Option<&serde_json::Value>| a.and_then(|v| v.as_str()).map(str::to_string);
        let common = |mode: &str| -> Vec<(f64, f64)> {
            let (Some(a), Some(b)) = (self.get(num), self.get(den)) else { return vec![] };
            let xs: Vec<(f64, f64)> = a
                .iter()
                .filter_map(|p| {
                    let q = b.iter().find(|q| q.0 == p.0)?;
                    (q.1 > 0.0).then_some((p.0, p.1 / q.1))
                })
                .collect();
            match mode {
                "min" => xs.first().copied().into_iter().collect(),
                "max" => xs.last().copied().into_iter().collect(),
                _ => xs,
            }
        };
        match (same(num_at), same(den_at)) {
            (Some(m), Some(n)) if m == n && ["all", "min", "max"].contains(&m.as_str()) => {
                // Same-series picks at different x ("max" over "min") fall to the next arm.
                common(&m)
            }
            _ => match (self.at(num, num_at), self.at(den, den_at)) {
                (Some(a), Some(b)) if b.1 > 0.0 => vec![(a.0, a.1 / b.1)],
                _ => vec![],
            },
        }
    }

    /// Every series of `other` replaces ours of the same name.
    pub fn merge(&mut self, other: Measured) {
        for (k, v) in other.series {
            self.series.insert(k, v);
        }
    }
}

/// The series of a `dafs bench` run.
pub fn from_bench(res: &Results) -> Measured {
    let mut m = Measured::default();
    for r in res.data.iter().filter(|r| r.error.is_none() && !r.runs.is_empty()) {
        let q = if r.qd == 1 { "qd1".to_string() } else { "qdN".to_string() };
        let mid = format!("{}.{}.{q}.{}", r.op, r.pattern, r.backend);
        let x = r.bs as f64;
        m.add(&format!("bw.{mid}"), x, r.mbps);
        m.add(&format!("cpugb.{mid}"), x, r.cpu_s_per_gb);
        // CPU share of one core = CPU seconds per byte * bytes per second.
        m.add(&format!("cpupct.{mid}"), x, r.cpu_s_per_gb * r.mbps / 1e3 * 100.0);
        m.add(&format!("cpuop.{mid}"), x, r.cpu_s_per_gb * r.bs as f64 / 1e9 * 1e6);
        m.add(&format!("lat.{mid}"), x, r.lat_us);
    }
    if let Some(l) = &res.latency {
        for (b, us) in &l.null_us {
            m.add(&format!("null.{b}"), 0.0, *us);
        }
        for f in &l.fits {
            m.add(&format!("fit.intercept.{}.{}", f.transport, f.mode), 0.0, f.intercept_us);
            if f.slope_ns_per_byte > 0.0 {
                // ns per byte -> MB/s: 1 byte/ns = 1000 MB/s.
                m.add(
                    &format!("fit.rate.{}.{}", f.transport, f.mode),
                    0.0,
                    1e3 / f.slope_ns_per_byte,
                );
            }
        }
        for t in ["tcp", "shm"] {
            let i = l.fits.iter().find(|f| f.transport == t && f.mode == "inline");
            let d = l.fits.iter().find(|f| f.transport == t && f.mode == "direct");
            if let (Some(i), Some(d)) = (i, d) {
                m.add(&format!("fit.extra.{t}"), 0.0, d.intercept_us - i.intercept_us);
            }
        }
    }
    for o in res.overlap.iter().filter(|o| o.error.is_none()) {
        m.add(&format!("overlap.hidden.{}", o.backend), o.bs as f64, o.hidden * 100.0);
    }
    m
}

/// The `seed_points` of one experiment's JSON document (none if it has no such key).
pub fn from_json(doc: &serde_json::Value) -> Result<Measured, String> {
    let mut m = Measured::default();
    let Some(pts) = doc.get("seed_points") else { return Ok(m) };
    let pts: Vec<SeedPoint> =
        serde_json::from_value(pts.clone()).map_err(|e| format!("seed_points: {e}"))?;
    for p in pts {
        m.add(&p.series, p.x.unwrap_or(0.0), p.value);
    }
    Ok(m)
}
