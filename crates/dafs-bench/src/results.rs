//! What `dafs bench` measures and reports: the result types, serialized to results.json.

use serde::Serialize;

use crate::backends::{MetaSample, Sample};
use crate::util::{median, median_opt};

#[derive(Debug, Serialize, Default)]
pub struct RunInfo {
    pub date: String,
    pub command: String,
    pub host: String,
    pub load_avg_at_start: String,
    pub quick: bool,
    pub runs: usize,
    pub file_size: u64,
    pub secs_per_run: f64,
    pub qd: usize,
    pub block_sizes: Vec<usize>,
    pub backends: Vec<String>,
    pub workloads: Vec<String>,
    pub client_spin_us: String,
    pub server_spin_us: u64,
    pub dafsd: String,
    pub export_dir: String,
    pub nfs: String,
    pub sessions: Vec<(String, String)>,
    pub burner_iters_per_us: f64,
    pub meta_files: usize,
    pub elapsed_s: f64,
    /// Median CPU (in cores) used by other processes during the data tests.
    pub other_load_cores: Option<f64>,
    pub load_avg_at_end: String,
}

#[derive(Debug, Serialize, Clone)]
pub struct DataRow {
    pub op: &'static str,
    pub pattern: &'static str,
    pub qd: usize,
    pub bs: usize,
    pub backend: String,
    pub runs: Vec<Sample>,
    pub error: Option<String>,
    pub mbps: f64,
    pub iops: f64,
    /// Mean latency per request (Little's law at QD > 1).
    pub lat_us: f64,
    /// Medians over the runs of each run's latency percentiles (QD1 only).
    pub lat_p50_us: Option<f64>,
    pub lat_p99_us: Option<f64>,
    /// Median CPU used by other processes during the runs, in cores.
    pub other_cores: Option<f64>,
    pub cpu_s_per_gb: f64,
    pub srv_cpu_s_per_gb: Option<f64>,
}

#[derive(Debug, Serialize, Clone)]
pub struct LatPoint {
    pub transport: String,
    pub mode: String,
    pub size: usize,
    pub mean_us: f64,
    pub runs_us: Vec<f64>,
}

#[derive(Debug, Serialize, Clone)]
pub struct LatFit {
    pub transport: String,
    pub mode: String,
    pub intercept_us: f64,
    pub slope_ns_per_byte: f64,
    pub r2: f64,
}

#[derive(Debug, Serialize, Clone)]
pub struct Crossover {
    pub transport: String,
    /// Size where the two fitted lines cross.
    pub model_bytes: Option<f64>,
    /// Smallest measured size from which direct is faster at every larger measured size.
    pub empirical_bytes: Option<usize>,
    pub recommended: String,
}

#[derive(Debug, Serialize, Default)]
pub struct LatencyResults {
    pub null_us: Vec<(String, f64)>,
    pub servers: Vec<(String, String)>,
    pub points: Vec<LatPoint>,
    pub fits: Vec<LatFit>,
    pub crossovers: Vec<Crossover>,
    pub default_threshold: Option<usize>,
}

#[derive(Debug, Serialize, Clone)]
pub struct MetaRow {
    pub backend: String,
    pub files: usize,
    pub runs: Vec<MetaSample>,
    pub error: Option<String>,
    pub ops_s: [f64; 3],
    pub cpu_us_per_op: [f64; 3],
    pub srv_cpu_us_per_op: [Option<f64>; 3],
    /// All three phases: 3 * files / total time.
    pub mix_ops_s: f64,
}

#[derive(Debug, Serialize, Clone)]
pub struct OverlapRow {
    pub backend: String,
    pub bs: usize,
    pub blocks: usize,
    pub depth: usize,
    pub compute_us: f64,
    pub t_io: f64,
    pub t_compute: f64,
    pub t_sync: f64,
    pub t_async: f64,
    /// (t_sync - t_async) / t_io, median over runs.
    pub hidden: f64,
    pub error: Option<String>,
}

#[derive(Debug, Serialize, Clone)]
pub struct Target {
    pub name: String,
    pub status: String,
    pub detail: String,
}

#[derive(Debug, Serialize, Default)]
pub struct Results {
    pub info: RunInfo,
    pub data: Vec<DataRow>,
    pub latency: Option<LatencyResults>,
    pub metadata: Vec<MetaRow>,
    pub overlap: Vec<OverlapRow>,
    pub targets: Vec<Target>,
    pub client_stats: Vec<(String, String)>,
    pub notes: Vec<String>,
    pub errors: Vec<String>,
    pub plots: Vec<String>,
}

impl Results {
    pub fn row(
        &self,
        op: &str,
        pattern: &str,
        qd: usize,
        bs: usize,
        backend: &str,
    ) -> Option<&DataRow> {
        self.data.iter().find(|r| {
            r.op == op
                && r.pattern == pattern
                && r.qd == qd
                && r.bs == bs
                && r.backend == backend
                && r.error.is_none()
        })
    }
}

pub(crate) fn summarize(
    op: &'static str,
    pattern: &'static str,
    qd: usize,
    bs: usize,
    backend: &str,
    runs: Vec<Sample>,
    error: Option<String>,
) -> DataRow {
    let f = |g: &dyn Fn(&Sample) -> f64| median(&runs.iter().map(g).collect::<Vec<_>>());
    let gb = |s: &Sample| s.bytes as f64 / 1e9;
    DataRow {
        op,
        pattern,
        qd,
        bs,
        backend: backend.into(),
        mbps: f(&|s| s.bytes as f64 / s.secs / 1e6),
        iops: f(&|s| s.ops as f64 / s.secs),
        lat_us: f(&|s| s.secs * 1e6 * qd as f64 / s.ops.max(1) as f64),
        lat_p50_us: median_opt(&runs.iter().map(|s| s.lat_p50_us).collect::<Vec<_>>()),
        lat_p99_us: median_opt(&runs.iter().map(|s| s.lat_p99_us).collect::<Vec<_>>()),
        cpu_s_per_gb: f(&|s| s.cpu_s / gb(s)),
        srv_cpu_s_per_gb: median_opt(
            &runs.iter().map(|s| s.srv_cpu_s.map(|c| c / gb(s))).collect::<Vec<_>>(),
        ),
        other_cores: median_opt(&runs.iter().map(|s| s.other_cores).collect::<Vec<_>>()),
        runs,
        error,
    }
}
