//! `dafs bench gzip` (being built).

/// `dafs bench gzip` options.
#[derive(clap::Args, Debug, Clone)]
pub struct GzipArgs {}

/// `dafs bench gzip`.
pub fn run(_a: &GzipArgs) -> Result<(), String> {
    Err("dafs bench gzip: not built yet".into())
}
