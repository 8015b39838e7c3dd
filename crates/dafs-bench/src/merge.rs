//! `dafs bench merge` (being built).

/// `dafs bench merge` options.
#[derive(clap::Args, Debug, Clone)]
pub struct MergeArgs {}

/// `dafs bench merge`.
pub fn run(_a: &MergeArgs) -> Result<(), String> {
    Err("dafs bench merge: not built yet".into())
}
