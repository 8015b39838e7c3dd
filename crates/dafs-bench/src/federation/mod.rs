//! `dafs bench federation`: experiments of the seed "Federated DAFS" on N dafsd nodes
//! on loopback (127.0.0.1, 127.0.0.2, ...), one figure selectable at a time.
//!
//! - Fig. 7 (`forwarding`): remote accesses per node under round-robin vs matched
//!   placement;
//! - Fig. 8 (`forwarding`): a read-only workload under round-robin placement with the
//!   forwarding nodes' block cache off and on.

pub mod forwarding;

use std::path::PathBuf;

/// `dafs bench federation` options.
#[derive(clap::Args, Debug, Clone)]
pub struct FederationArgs {
    /// Figures to produce, comma separated (7, 8). Default: all.
    #[arg(long, value_delimiter = ',')]
    pub figures: Vec<u32>,
    /// Short run (well under a minute): fewer files and 1 s per measurement.
    #[arg(long)]
    pub quick: bool,
    /// Cluster sizes of Fig. 7, comma separated. Default 2,4,8.
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<usize>,
    /// Cluster size of Fig. 8.
    #[arg(long, default_value_t = 4)]
    pub cache_nodes: usize,
    /// Seconds per measurement of Fig. 8. Default 3 (1 with --quick).
    #[arg(long)]
    pub secs: Option<f64>,
    /// Runs of each Fig. 8 measurement (cache off and on alternate); the median is
    /// reported. Default 3 (1 with --quick).
    #[arg(long)]
    pub runs: Option<usize>,
    /// dafsd binary (default: next to this executable).
    #[arg(long)]
    pub dafsd: Option<PathBuf>,
}

/// `dafs bench federation`.
pub fn run(a: &FederationArgs) -> Result<(), String> {
    let figures = if a.figures.is_empty() { vec![7, 8] } else { a.figures.clone() };
    if let Some(f) = figures.iter().find(|f| !matches!(f, 7 | 8)) {
        return Err(format!("--figures: no figure {f} here (7 and 8; Table I and Fig. 6 are the placement and speedup experiments)"));
    }
    let bin = crate::server::find_dafsd(a.dafsd.as_deref())?;
    if figures.contains(&7) {
        forwarding::fig7(&bin, a)?;
    }
    if figures.contains(&8) {
        forwarding::fig8(&bin, a)?;
    }
    Ok(())
}
