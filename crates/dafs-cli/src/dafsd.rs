//! dafsd — the DAFS server daemon. `dafsd DIR [--listen ADDR] ...`; see `--help`.

use clap::Parser;

mod serve;

#[derive(Parser, Debug)]
#[command(
    name = "dafsd",
    version,
    about = "DAFS file server: exports a directory over the DAFS protocol"
)]
struct Args {
    #[command(flatten)]
    serve: serve::ServeArgs,
}

fn main() {
    init_logging();
    let args = Args::parse();
    if let Err(e) = serve::run(&args.serve) {
        eprintln!("dafsd: {e}");
        std::process::exit(2);
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DAFS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}
