//! `dafs bench seeds` (being built).

/// `dafs bench seeds` options.
#[derive(clap::Args, Debug, Clone)]
pub struct SeedsArgs {}

/// `dafs bench seeds`.
pub fn run(_a: &SeedsArgs) -> Result<(), String> {
    Err("dafs bench seeds: not built yet".into())
}
