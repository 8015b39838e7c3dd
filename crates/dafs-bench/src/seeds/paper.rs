//! The seeds' published values: every figure and table of the five papers that
//! `dafs bench seeds` sets beside our measurements (paper.json, compiled in).
//!
//! Each value and each claimed ratio carries a short quote from the paper's text; where a
//! paper gives only a plot, the value says "not stated" (we never read numbers off a
//! plot). A figure names the measured series (see measure.rs for the key scheme) that
//! give "ours"; a figure nothing in the tree measures says so in `not_reproduced`.

use serde::{Deserialize, Serialize};

/// The data file, compiled into the binary so a report never depends on the checkout.
const PAPER_JSON: &str = include_str!("paper.json");

/// Sources a published value may come from.
pub const SOURCES: [&str; 3] = ["table", "read from text", "not stated"];
/// Who claims a ratio.
pub const CLAIMED_BY: [&str; 3] = ["paper", "project target", "ours only"];

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Paper {
    pub seeds: Vec<Seed>,
    pub figures: Vec<Figure>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Seed {
    pub id: String,
    /// File name under shared/seeds/.
    pub file: String,
    pub title: String,
    pub hardware: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Figure {
    /// Unique, e.g. "000-fig3-left".
    pub id: String,
    pub seed: String,
    /// As the paper names it, e.g. "Fig. 3 (left)".
    pub figure: String,
    pub title: String,
    pub metric: String,
    pub units: String,
    /// None for a figure of single values.
    pub x_axis: Option<String>,
    /// The command or script that measures it here ("none" if nothing does).
    pub experiment: String,
    /// Our measured series shown for this figure, in its units.
    pub ours: Vec<OurSeries>,
    pub values: Vec<PaperValue>,
    pub ratios: Vec<Ratio>,
    /// What we cannot reproduce and why.
    pub not_reproduced: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OurSeries {
    pub label: String,
    pub series: String,
}

/// Where on a measured series to read a value: `at` is "min" / "max" (smallest / largest
/// x), "peak" (highest value), "all" (every x, ratios only), a number (that x), or
/// absent for a single-valued series.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pick {
    pub series: String,
    pub at: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PaperValue {
    /// The paper's configuration, e.g. "NFS-nocopy".
    pub series: String,
    /// The paper's x (free text), if any.
    pub x: Option<String>,
    /// The number, when the paper states one (in the figure's units).
    pub value: Option<f64>,
    /// The value as the paper words it.
    pub text: String,
    /// One of SOURCES.
    pub source: String,
    pub quote: String,
    /// Our value in the same metric, if measured.
    pub ours: Option<Pick>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ratio {
    pub what: String,
    /// One of CLAIMED_BY.
    pub by: String,
    /// The claimed range; one bound may be open ("more than 2x": min 2).
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// How the number follows from the text, when it is not printed as such.
    pub derived: Option<String>,
    pub quote: String,
    /// Our ratio num / den; None when we cannot measure it.
    pub num: Option<Pick>,
    pub den: Option<Pick>,
}

/// The compiled-in table, parsed and checked.
pub fn paper() -> Result<Paper, String> {
    let p: Paper = serde_json::from_str(PAPER_JSON).map_err(|e| format!("paper.json: {e}"))?;
    check(&p)?;
    Ok(p)
}

fn check_pick(fig: &str, p: &Pick, ratio: bool) -> Result<(), String> {
    if p.series.is_empty() {
        return Err(format!("{fig}: empty series"));
    }
    match &p.at {
        None => Ok(()),
        Some(serde_json::Value::Number(_)) => Ok(()),
        Some(serde_json::Value::String(s))
            if ["min", "max", "peak"].contains(&s.as_str()) || (ratio && s == "all") =>
        {
            Ok(())
        }
        Some(v) => Err(format!("{fig}: bad 'at' {v} for {}", p.series)),
    }
}

/// Completeness: every figure has units, a metric, a seed that exists, a reason line,
/// and every value and ratio a quote; the enums hold known words; ids are unique.
pub fn check(p: &Paper) -> Result<(), String> {
    let mut ids = std::collections::BTreeSet::new();
    for f in &p.figures {
        let id = &f.id;
        if !ids.insert(id.clone()) {
            return Err(format!("figure id {id} twice"));
        }
        if !p.seeds.iter().any(|s| s.id == f.seed) {
            return Err(format!("{id}: unknown seed {}", f.seed));
        }
        for (what, v) in [
            ("units", &f.units),
            ("metric", &f.metric),
            ("title", &f.title),
            ("figure", &f.figure),
            ("experiment", &f.experiment),
            ("not_reproduced", &f.not_reproduced),
        ] {
            if v.trim().is_empty() {
                return Err(format!("{id}: no {what}"));
            }
        }
        if f.values.is_empty() {
            return Err(format!("{id}: no published value (write one saying 'not stated')"));
        }
        for v in &f.values {
            if v.quote.trim().len() < 8 || v.text.trim().is_empty() {
                return Err(format!("{id}: value {:?} without quote or text", v.series));
            }
            if !SOURCES.contains(&v.source.as_str()) {
                return Err(format!("{id}: source {:?} not one of {SOURCES:?}", v.source));
            }
            if v.source == "not stated" && v.value.is_some() {
                return Err(format!("{id}: {:?} says 'not stated' but has a value", v.series));
            }
            if let Some(o) = &v.ours {
                check_pick(id, o, false)?;
            }
        }
        for r in &f.ratios {
            if r.quote.trim().len() < 8 {
                return Err(format!("{id}: ratio {:?} without quote", r.what));
            }
            if !CLAIMED_BY.contains(&r.by.as_str()) {
                return Err(format!("{id}: ratio by {:?} not one of {CLAIMED_BY:?}", r.by));
            }
            if r.num.is_some() != r.den.is_some() {
                return Err(format!("{id}: ratio {:?} needs both num and den", r.what));
            }
            if let (Some(a), Some(b)) = (r.min, r.max) {
                if a > b {
                    return Err(format!("{id}: ratio {:?} min {a} > max {b}", r.what));
                }
            }
            for p in [&r.num, &r.den].into_iter().flatten() {
                check_pick(id, p, true)?;
            }
        }
        let measured = !f.ours.is_empty() || f.ratios.iter().any(|r| r.num.is_some());
        if !measured && !f.not_reproduced.starts_with("not reproduced:") {
            return Err(format!(
                "{id}: nothing measures it, so its line must start 'not reproduced:'"
            ));
        }
    }
    Ok(())
}
