//! The seeds report: per figure, the paper's values beside ours, the claimed ratios
//! against the measured ones, and what we could not reproduce. `build` makes the
//! serializable report (seeds.json), `markdown` renders it (seeds.md).

use serde::Serialize;

use super::measure::Measured;
use super::paper::{Figure, Paper, Pick, Ratio, Seed};

/// One experiment of the run and what became of it.
#[derive(Debug, Clone, Serialize)]
pub struct ExperimentRun {
    /// "bench", "merge", "postmark", "gzip", "mpiio", "bdb", "odm", "sqlite".
    pub name: String,
    pub command: String,
    /// "ran", "failed: why" or "not available: why".
    pub status: String,
    pub secs: f64,
    pub out_dir: Option<String>,
    /// Series it contributed.
    pub series: usize,
    /// Facts a reader needs (e.g. why the NFS baseline is absent).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ValueRow {
    pub series: String,
    pub x: Option<String>,
    pub paper_value: Option<f64>,
    pub paper_text: String,
    pub source: String,
    pub quote: String,
    pub ours_series: Option<String>,
    /// (x, value) read from our series, if measured.
    pub ours: Option<(f64, f64)>,
    pub ours_missing: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesRow {
    pub label: String,
    pub series: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RatioRow {
    pub what: String,
    pub by: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub derived: Option<String>,
    pub quote: String,
    /// (x, ratio) pairs measured.
    pub measured: Vec<(f64, f64)>,
    /// "within", "above", "below", "mixed" or "not measured: why".
    pub verdict: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct FigureReport {
    pub id: String,
    pub seed: String,
    pub figure: String,
    pub title: String,
    pub metric: String,
    pub units: String,
    pub x_axis: Option<String>,
    pub experiment: String,
    /// "measured", "partly measured", "not measured" or "not reproduced".
    pub status: String,
    pub values: Vec<ValueRow>,
    pub ours: Vec<SeriesRow>,
    pub ratios: Vec<RatioRow>,
    pub not_reproduced: String,
    /// Why the series we expected are missing in this run.
    pub missing: Vec<String>,
    pub plot: Option<String>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct SeedsInfo {
    pub date: String,
    pub command: String,
    pub host: String,
    pub quick: bool,
    pub elapsed_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeedsReport {
    pub info: SeedsInfo,
    pub seeds: Vec<Seed>,
    pub experiments: Vec<ExperimentRun>,
    pub figures: Vec<FigureReport>,
    /// Every measured series, whether or not a figure shows it.
    pub measured: Measured,
}

/// The experiment whose output a series name comes from.
pub fn experiment_of(series: &str) -> &'static str {
    match series.split('.').next().unwrap_or("") {
        "merge" => "merge",
        "postmark" => "postmark",
        "gzip" => "gzip",
        "bdb" => "bdb",
        "odm" | "odmlat" => "odm",
        "mpiio" => "mpiio",
        _ => "bench",
    }
}

/// Why a series has no points in this run.
fn why_missing(series: &str, exps: &[ExperimentRun]) -> String {
    let name = experiment_of(series);
    match exps.iter().find(|e| e.name == name) {
        None => format!("{series}: {name} was not run"),
        Some(e) if e.status != "ran" => format!("{series}: {name} {}", e.status),
        Some(e) => {
            let hint = if series.ends_with(".nfs") {
                e.notes.iter().find(|n| n.starts_with("nfs")).cloned()
            } else {
                None
            };
            match hint {
                Some(h) => format!("{series}: not in {name}'s output ({h})"),
                None => format!("{series}: not in {name}'s output"),
            }
        }
    }
}

fn value_row(v: &super::paper::PaperValue, m: &Measured, exps: &[ExperimentRun]) -> ValueRow {
    let ours = v.ours.as_ref().and_then(|p: &Pick| m.at(&p.series, p.at.as_ref()));
    let ours_missing = match (&v.ours, ours) {
        (Some(p), None) => Some(why_missing(&p.series, exps)),
        _ => None,
    };
    ValueRow {
        series: v.series.clone(),
        x: v.x.clone(),
        paper_value: v.value,
        paper_text: v.text.clone(),
        source: v.source.clone(),
        quote: v.quote.clone(),
        ours_series: v.ours.as_ref().map(|p| p.series.clone()),
        ours,
        ours_missing,
    }
}

/// Where the measured ratios fall against the claimed range.
pub fn verdict(min: Option<f64>, max: Option<f64>, measured: &[(f64, f64)]) -> String {
    if measured.is_empty() {
        return "not measured".into();
    }
    if min.is_none() && max.is_none() {
        return "no claim".into();
    }
    let one = |r: f64| {
        if min.is_some_and(|a| r < a * 0.995) {
            "below"
        } else if max.is_some_and(|b| r > b * 1.005) {
            "above"
        } else {
            "within"
        }
    };
    let first = one(measured[0].1);
    if measured.iter().all(|p| one(p.1) == first) {
        first.into()
    } else {
        "mixed".into()
    }
}

fn ratio_row(r: &Ratio, m: &Measured, exps: &[ExperimentRun]) -> RatioRow {
    let measured = match (&r.num, &r.den) {
        (Some(n), Some(d)) => m.ratios(&n.series, n.at.as_ref(), &d.series, d.at.as_ref()),
        _ => vec![],
    };
    let verdict = match (&r.num, &r.den) {
        (Some(n), Some(d)) if measured.is_empty() => {
            let gone = if m.get(&n.series).is_none() { &n.series } else { &d.series };
            format!("not measured: {}", why_missing(gone, exps))
        }
        (None, _) => "not measured: no equivalent measurement here".into(),
        _ => verdict(r.min, r.max, &measured),
    };
    RatioRow {
        what: r.what.clone(),
        by: r.by.clone(),
        min: r.min,
        max: r.max,
        derived: r.derived.clone(),
        quote: r.quote.clone(),
        measured,
        verdict,
    }
}

fn figure_report(f: &Figure, m: &Measured, exps: &[ExperimentRun]) -> FigureReport {
    let ours: Vec<SeriesRow> = f
        .ours
        .iter()
        .filter_map(|o| {
            m.get(&o.series).map(|p| SeriesRow {
                label: o.label.clone(),
                series: o.series.clone(),
                points: p.clone(),
            })
        })
        .collect();
    let missing: Vec<String> = f
        .ours
        .iter()
        .filter(|o| m.get(&o.series).is_none())
        .map(|o| why_missing(&o.series, exps))
        .collect();
    let status = if f.ours.is_empty() && f.ratios.iter().all(|r| r.num.is_none()) {
        "not reproduced"
    } else if ours.is_empty() {
        "not measured"
    } else if missing.is_empty() {
        "measured"
    } else {
        "partly measured"
    };
    FigureReport {
        id: f.id.clone(),
        seed: f.seed.clone(),
        figure: f.figure.clone(),
        title: f.title.clone(),
        metric: f.metric.clone(),
        units: f.units.clone(),
        x_axis: f.x_axis.clone(),
        experiment: f.experiment.clone(),
        status: status.into(),
        values: f.values.iter().map(|v| value_row(v, m, exps)).collect(),
        ours,
        ratios: f.ratios.iter().map(|r| ratio_row(r, m, exps)).collect(),
        not_reproduced: f.not_reproduced.clone(),
        missing,
        plot: None,
    }
}

/// The whole report from the paper table, our series and the experiments' fates.
pub fn build(
    info: SeedsInfo,
    paper: &Paper,
    measured: Measured,
    experiments: Vec<ExperimentRun>,
) -> SeedsReport {
    let figures = paper.figures.iter().map(|f| figure_report(f, &measured, &experiments)).collect();
    SeedsReport { info, seeds: paper.seeds.clone(), experiments, figures, measured }
}
