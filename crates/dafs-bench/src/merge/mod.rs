//! `dafs bench merge`: the TPIE-style n-way merge of seed 000 (Fig. 5). n sorted input
//! files of y-byte records (8-byte integer key first) are merged into one sorted output
//! in 32 KiB blocks, with QD blocks of read-ahead per input and QD blocks of
//! write-behind, on local files (a read-ahead and a write-behind thread over
//! pread/pwrite), DAFS over TCP and shared memory (asynchronous submit/wait into
//! registered blocks, no helper thread) and the NFS baseline (libnfs in the same two
//! threads as local). Every output is checked: keys in order and a checksum over all
//! records equal to the inputs'. Reported: throughput 2·n·x·y / t (the seed's metric:
//! bytes read plus bytes written per second) and client CPU seconds per GB moved, per
//! record size, with the ratios the seed claims (DAFS vs NFS) and the target vs local.

mod dafs_io;
mod engine;
mod libnfs;
pub mod records;
mod report;
mod systems;
mod threaded;

use std::path::PathBuf;

use serde::Serialize;

use crate::apps;
use crate::util;

pub use report::markdown;

/// `dafs bench merge` options.
#[derive(clap::Args, Debug, Clone)]
pub struct MergeArgs {
    /// Short run (well under a minute): 16 MiB of input, record sizes 16, 256 and
    /// 4096 B, one run.
    #[arg(long)]
    pub quick: bool,
    /// Total input size, all inputs together (suffixes k, m, g). Default 256m (16m with --quick).
    #[arg(long, value_parser = util::parse_size)]
    pub size: Option<u64>,
    /// Record sizes in bytes, comma separated: multiples of 8 from 16 that divide the
    /// block size. Default 16,64,256,1024,4096.
    #[arg(long, value_delimiter = ',', value_parser = util::parse_size)]
    pub record_sizes: Vec<u64>,
    /// Merge order n: the number of input files.
    #[arg(long, default_value_t = 8)]
    pub inputs: usize,
    /// I/O block size (TPIE's request size in the seed: 32 KiB).
    #[arg(long, default_value = "32k", value_parser = util::parse_size)]
    pub block_size: u64,
    /// Blocks of read-ahead per input, and of write-behind.
    #[arg(long, default_value_t = 4)]
    pub qd: usize,
    /// Runs per system and record size; the median is reported. Default 3 (1 with --quick).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Systems, comma separated: local, dafs-tcp, dafs-shm, nfs. Default: all (nfs when
    /// its server answers).
    #[arg(long, value_delimiter = ',')]
    pub backends: Vec<String>,
    /// NFS URL (default: the loopback baseline, when something listens on 127.0.0.1:2049).
    #[arg(long)]
    pub nfs_url: Option<String>,
    /// dafsd binary (default: next to this executable).
    #[arg(long)]
    pub dafsd: Option<PathBuf>,
    /// Output directory (report.md, results.json).
    #[arg(long, default_value = "bench-out/merge")]
    pub out: PathBuf,
    /// Parent directory of the temporary export (default: $TMPDIR or /tmp).
    #[arg(long)]
    pub tmpdir: Option<PathBuf>,
    /// Server busy-poll budget, passed to dafsd --spin-us.
    #[arg(long, default_value_t = 50)]
    pub server_spin_us: u64,
}

/// One merge experiment, resolved (what `dafs bench seeds` passes to [`run_merge`]).
#[derive(Debug, Clone, Serialize)]
pub struct MergeConfig {
    pub quick: bool,
    pub systems: Vec<String>,
    /// Systems named explicitly: one that cannot run is an error, not a note.
    pub systems_explicit: bool,
    pub inputs: usize,
    pub record_sizes: Vec<usize>,
    pub total_input_bytes: u64,
    pub block_bytes: usize,
    pub qd: usize,
    pub runs: usize,
    pub nfs_url: Option<String>,
    pub dafsd: Option<PathBuf>,
    pub tmpdir: Option<PathBuf>,
    pub server_spin_us: u64,
}

/// Largest merge order (one read-ahead queue per input).
pub const INPUTS_MAX: usize = 64;
/// Largest read-ahead / write-behind depth. DAFS sessions ask for n·QD + QD request
/// slots (dafsd grants up to 64 by default, `dafsd --slots` raises it).
pub const QD_MAX: usize = 32;

impl MergeConfig {
    /// The defaults of `dafs bench merge` (`--quick` when `quick`).
    pub fn defaults(quick: bool) -> Result<MergeConfig, String> {
        #[derive(clap::Parser)]
        struct P {
            #[command(flatten)]
            a: MergeArgs,
        }
        let args: &[&str] = if quick { &["merge", "--quick"] } else { &["merge"] };
        let p = <P as clap::Parser>::try_parse_from(args).map_err(|e| e.to_string())?;
        MergeConfig::from_args(&p.a)
    }

    pub fn from_args(a: &MergeArgs) -> Result<MergeConfig, String> {
        let record_sizes: Vec<usize> = if a.record_sizes.is_empty() {
            if a.quick {
                vec![16, 256, 4096]
            } else {
                vec![16, 64, 256, 1024, 4096]
            }
        } else {
            a.record_sizes.iter().map(|r| *r as usize).collect()
        };
        let c = MergeConfig {
            quick: a.quick,
            systems: apps::parse_systems(&a.backends, &apps::SYSTEMS)?,
            systems_explicit: !a.backends.is_empty(),
            inputs: a.inputs,
            record_sizes,
            total_input_bytes: a.size.unwrap_or(if a.quick { 16 << 20 } else { 256 << 20 }),
            block_bytes: a.block_size as usize,
            qd: a.qd,
            runs: a.runs.unwrap_or(if a.quick { 1 } else { 3 }),
            nfs_url: a.nfs_url.clone(),
            dafsd: a.dafsd.clone(),
            tmpdir: a.tmpdir.clone(),
            server_spin_us: a.server_spin_us,
        };
        c.check()?;
        Ok(c)
    }

    pub fn check(&self) -> Result<(), String> {
        if self.inputs < 2 || self.inputs > INPUTS_MAX {
            return Err(format!("--inputs must be 2..={INPUTS_MAX}"));
        }
        if self.qd == 0 || self.qd > QD_MAX {
            return Err(format!("--qd must be 1..={QD_MAX}"));
        }
        if self.runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        let bs = self.block_bytes;
        if !(4096..=(1 << 20)).contains(&bs) || bs % 8 != 0 {
            return Err(format!("--block-size {bs}: must be 4 KiB..1 MiB, a multiple of 8"));
        }
        for &r in &self.record_sizes {
            if r < 16 || r % 8 != 0 || bs % r != 0 {
                return Err(format!(
                    "record size {r}: must be a multiple of 8, at least 16, dividing the block size {bs}"
                ));
            }
        }
        if self.blocks_per_input() == 0 {
            return Err(format!(
                "--size {}: too small for {} inputs of at least one {bs}-byte block",
                self.total_input_bytes, self.inputs
            ));
        }
        Ok(())
    }

    pub fn blocks_per_input(&self) -> u64 {
        self.total_input_bytes / self.inputs as u64 / self.block_bytes as u64
    }

    /// Bytes moved by one merge: every input byte read once and written once.
    pub fn bytes_moved(&self) -> u64 {
        2 * self.blocks_per_input() * self.inputs as u64 * self.block_bytes as u64
    }
}

/// One timed merge.
#[derive(Debug, Clone, Serialize, Default)]
pub struct MergeSample {
    pub secs: f64,
    /// 2·n·x·y: bytes read plus bytes written.
    pub bytes: u64,
    /// Client (this process, all threads) user+sys CPU seconds.
    pub cpu_s: f64,
    /// Server CPU seconds (dafsd, or ganesha.nfsd when found).
    pub srv_cpu_s: Option<f64>,
}

/// A system at one record size: the runs, their medians, the check of every output.
#[derive(Debug, Clone, Serialize)]
pub struct MergeRow {
    pub system: String,
    pub record_bytes: usize,
    pub runs: Vec<MergeSample>,
    /// Every run's output was sorted with the inputs' checksum.
    pub verified: bool,
    pub error: Option<String>,
    /// Median throughput, 2·n·x·y / t, in MB/s.
    pub mbps: f64,
    /// Median client CPU seconds per GB moved.
    pub cpu_s_per_gb: f64,
    pub srv_cpu_s_per_gb: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MergeResults {
    pub date: String,
    pub host_load_avg_at_start: String,
    pub config: MergeConfig,
    pub input_checksums: Vec<(usize, records::Checksum)>,
    pub rows: Vec<MergeRow>,
    pub targets: Vec<crate::Target>,
    /// Systems not measured and why.
    pub notes: Vec<String>,
    pub elapsed_s: f64,
}

impl MergeResults {
    pub fn row(&self, system: &str, rec: usize) -> Option<&MergeRow> {
        self.rows.iter().find(|r| r.system == system && r.record_bytes == rec && r.error.is_none())
    }
}

/// Run the merge experiment: every system at every record size.
pub fn run_merge(cfg: &MergeConfig) -> Result<MergeResults, String> {
    cfg.check()?;
    let t0 = std::time::Instant::now();
    let mut res = MergeResults {
        date: util::utc_now(),
        host_load_avg_at_start: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .into(),
        config: cfg.clone(),
        input_checksums: Vec::new(),
        rows: Vec::new(),
        targets: Vec::new(),
        notes: Vec::new(),
        elapsed_s: 0.0,
    };
    let mut sys = systems::Systems::start(cfg, &mut res.notes)?;
    for &rec in &cfg.record_sizes {
        util::heartbeat(&format!("merge: inputs of {rec}-byte records"));
        let sum = sys.generate(cfg, rec)?;
        res.input_checksums.push((rec, sum));
        let mut runs: Vec<Vec<MergeSample>> = vec![Vec::new(); sys.names.len()];
        let mut errors: Vec<Option<String>> = vec![None; sys.names.len()];
        // Runs interleave the systems, so a slow phase of the machine hits all of them.
        for _ in 0..cfg.runs {
            for (k, name) in sys.names.clone().iter().enumerate() {
                if errors[k].is_some() {
                    continue;
                }
                util::heartbeat(&format!("merge: {name}, {rec}-byte records"));
                match sys.merge_once(cfg, name, rec, &sum) {
                    Ok(s) => runs[k].push(s),
                    Err(e) => errors[k] = Some(e),
                }
            }
        }
        for (k, name) in sys.names.iter().enumerate() {
            res.rows.push(summarize(name, rec, std::mem::take(&mut runs[k]), errors[k].take()));
        }
    }
    sys.cleanup();
    res.targets = report::targets(&res);
    res.elapsed_s = t0.elapsed().as_secs_f64();
    Ok(res)
}

fn summarize(system: &str, rec: usize, runs: Vec<MergeSample>, error: Option<String>) -> MergeRow {
    let med =
        |f: &dyn Fn(&MergeSample) -> f64| util::median(&runs.iter().map(f).collect::<Vec<_>>());
    let gb = |s: &MergeSample| s.bytes as f64 / 1e9;
    MergeRow {
        system: system.into(),
        record_bytes: rec,
        verified: error.is_none() && !runs.is_empty(),
        mbps: med(&|s| s.bytes as f64 / s.secs / 1e6),
        cpu_s_per_gb: med(&|s| s.cpu_s / gb(s)),
        srv_cpu_s_per_gb: util::median_opt(
            &runs.iter().map(|s| s.srv_cpu_s.map(|c| c / gb(s))).collect::<Vec<_>>(),
        ),
        runs,
        error,
    }
}

/// `dafs bench merge`.
pub fn run(a: &MergeArgs) -> Result<(), String> {
    let cfg = MergeConfig::from_args(a)?;
    // No heartbeat during one merge or one input generation: allow 10 MB/s for them.
    let limit_s = 120 + cfg.total_input_bytes / 10_000_000;
    util::start_watchdog(std::time::Duration::from_secs(limit_s));
    let res = run_merge(&cfg);
    util::stop_watchdog();
    let res = res?;
    let md = markdown(&res, &std::env::args().collect::<Vec<_>>().join(" "));
    apps::write_outputs(&a.out, &md, &res)?;
    println!("{md}");
    let plots = report::plots(&res, &a.out).unwrap_or_else(|e| {
        eprintln!("dafs bench merge: no plots: {e}");
        vec![]
    });
    eprintln!(
        "dafs bench merge: wrote {}/report.md, results.json {}",
        a.out.display(),
        plots.join(" ")
    );
    let failed: Vec<String> = res
        .rows
        .iter()
        .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.system)))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("some merges failed: {}", failed.join("; ")))
    }
}
