//! `dafs bench postmark` (being built).

/// `dafs bench postmark` options.
#[derive(clap::Args, Debug, Clone)]
pub struct PostmarkArgs {}

/// `dafs bench postmark`.
pub fn run(_a: &PostmarkArgs) -> Result<(), String> {
    Err("dafs bench postmark: not built yet".into())
}
