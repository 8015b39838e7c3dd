//! `dafs` — command line client (and `dafs serve`).
//!
//! Exit codes: 0 success; 1 the operation failed (the message names the path and the
//! reason); 2 usage or configuration error; 3 cannot connect or authenticate.

use std::io::{Read, Write};
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use dafs_client::{Client, ClientConfig, Error, Provider};
use dafs_proto::FileType;

mod admin;
mod mount;
mod serve;
mod transfer;

/// `--provider`: how a `dafs://host:port` URL is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProviderArg {
    /// Shared memory when the server runs on this host and offers it, else TCP.
    Auto,
    /// Always TCP.
    Tcp,
}

/// Pipelining of get, put and cat.
#[derive(clap::Args, Debug, Clone)]
struct PipelineArgs {
    /// Requests in flight (each one block of registered memory).
    #[arg(long, default_value_t = transfer::QUEUE_DEPTH_DEFAULT, value_name = "N")]
    queue_depth: usize,
    /// Bytes per request (suffixes k, m; lowered to the server's max I/O size).
    #[arg(long, default_value_t = transfer::BLOCK_BYTES_DEFAULT, value_parser = transfer::parse_size, value_name = "SIZE")]
    block_size: usize,
    /// Make the copy durable before exiting: get fsyncs the local file, put COMMITs on
    /// the server. Without it, as with cp, the data reaches disk when the system writes
    /// it back.
    #[arg(long)]
    sync: bool,
}

impl PipelineArgs {
    fn pipeline(&self) -> Result<transfer::Pipeline, Fail> {
        let p = transfer::Pipeline {
            queue_depth: self.queue_depth,
            block_bytes: self.block_size,
            sync: self.sync,
        };
        p.check()?;
        Ok(p)
    }
}

#[derive(Parser, Debug)]
#[command(name = "dafs", version, about = "DAFS: Direct Access File System client and server")]
struct Cli {
    /// File holding the shared secret for servers that require authentication.
    #[arg(long, global = true, env = "DAFS_SECRET_FILE")]
    secret_file: Option<PathBuf>,
    /// Export name on the server (default: the server's first export).
    #[arg(long = "export-name", global = true, default_value = "", value_name = "NAME")]
    export: String,
    /// No progress bar.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Use TLS on TCP (also implied by a dafs+tls:// URL or any other --tls-* option).
    #[arg(long, global = true)]
    tls: bool,
    /// CA certificates (PEM) the server's certificate must chain to (default: the
    /// system bundle). Selects TLS.
    #[arg(long, global = true, value_name = "FILE", env = "DAFS_TLS_CA")]
    tls_ca: Option<PathBuf>,
    /// Client certificate chain (PEM) for servers requiring mutual TLS. Needs --tls-key.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Check the server certificate against this name instead of the URL's host.
    #[arg(long, global = true, value_name = "NAME")]
    tls_server_name: Option<String>,
    /// Transport for dafs:// URLs: auto (shared memory on the server's host) or tcp.
    #[arg(long, global = true, value_enum, default_value_t = ProviderArg::Auto)]
    provider: ProviderArg,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Serve a directory (same as the dafsd binary).
    Serve(Box<serve::ServeArgs>),
    /// List a directory.
    Ls {
        url: String,
        /// Long format: type, mode, size, name.
        #[arg(short, long)]
        long: bool,
    },
    /// Show attributes of a path.
    Stat { url: String },
    /// Write files to standard output.
    Cat {
        urls: Vec<String>,
        #[command(flatten)]
        pipe: PipelineArgs,
    },
    /// Copy a remote file to a local path ("-" for standard output).
    Get {
        url: String,
        local: PathBuf,
        #[command(flatten)]
        pipe: PipelineArgs,
    },
    /// Copy a local file ("-" for standard input) to a remote path (created, or
    /// truncated if it exists).
    Put {
        local: PathBuf,
        url: String,
        #[command(flatten)]
        pipe: PipelineArgs,
    },
    /// Remove files.
    Rm { urls: Vec<String> },
    /// Create directories.
    Mkdir {
        urls: Vec<String>,
        /// Create parents as needed; no error if it exists.
        #[arg(short, long)]
        parents: bool,
    },
    /// Remove empty directories.
    Rmdir { urls: Vec<String> },
    /// Rename (both URLs on the same server).
    Mv { from: String, to: String },
    /// Round-trip a NULL request and print the negotiated session parameters.
    Ping { url: String },
    /// Performance harness: local files, DAFS over TCP and shared memory, NFS (see docs/benchmarks.md).
    Bench(Box<dafs_bench::BenchArgs>),
    /// Administer a running dafsd (sessions, fencing, counters) through its admin socket.
    Admin(admin::AdminArgs),
    /// Mount an export as a local directory (FUSE); serves until unmounted.
    #[command(after_help = mount::WHO_MAY_USE_IT)]
    Mount(mount::MountArgs),
    /// Unmount a `dafs mount`.
    Umount(mount::UmountArgs),
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DAFS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let code = match run(&cli) {
        Ok(()) => 0,
        Err(Fail(code, msg)) => {
            eprintln!("dafs: {msg}");
            code
        }
    };
    std::process::exit(code);
}

pub(crate) struct Fail(i32, String);

pub(crate) fn op_err(what: &str, e: Error) -> Fail {
    match e {
        Error::Transport(_) | Error::Disconnected | Error::Protocol(_) => {
            Fail(3, format!("{what}: {e}"))
        }
        _ => Fail(1, format!("{what}: {e}")),
    }
}

fn connect(cli: &Cli, url: &str) -> Result<(Client, String), Fail> {
    let (addr, path) = dafs_client::parse_url(url).map_err(|e| Fail(2, format!("{url}: {e}")))?;
    let provider = match cli.provider {
        ProviderArg::Auto => Provider::Auto,
        ProviderArg::Tcp => Provider::Tcp,
    };
    let mut cfg = ClientConfig { export: cli.export.clone(), provider, ..Default::default() };
    if let Some(p) = &cli.secret_file {
        cfg.secret = Some(serve::read_secret(p).map_err(|e| Fail(2, e))?);
    }
    if cli.tls
        || cli.tls_ca.is_some()
        || cli.tls_cert.is_some()
        || cli.tls_server_name.is_some()
        || addr.starts_with("dafs+tls://")
    {
        cfg.tls = Some(dafs_client::TlsClientOptions {
            ca_file: cli.tls_ca.clone(),
            server_name: cli.tls_server_name.clone(),
            cert_file: cli.tls_cert.clone(),
            key_file: cli.tls_key.clone(),
        });
    }
    let c = Client::connect(&addr, cfg)
        .map_err(|e| Fail(3, format!("cannot connect to {addr}: {e}")))?;
    Ok((c, path))
}

fn same_server(a: &str, b: &str) -> Result<bool, Fail> {
    let (x, _) = dafs_client::parse_url(a).map_err(|e| Fail(2, format!("{a}: {e}")))?;
    let (y, _) = dafs_client::parse_url(b).map_err(|e| Fail(2, format!("{b}: {e}")))?;
    Ok(x == y)
}

fn progress(cli: &Cli, total: u64) -> indicatif::ProgressBar {
    if cli.quiet || total < 8 * 1024 * 1024 {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{bytes}/{total_bytes} [{bar:30}] {bytes_per_sec} eta {eta}",
        )
        .unwrap()
        .progress_chars("=> "),
    );
    pb
}

fn type_char(t: FileType) -> char {
    match t {
        FileType::Directory => 'd',
        FileType::Symlink => 'l',
        FileType::Regular => '-',
        FileType::CharDevice => 'c',
        FileType::BlockDevice => 'b',
        FileType::Fifo => 'p',
        FileType::Socket => 's',
    }
}

fn run(cli: &Cli) -> Result<(), Fail> {
    match &cli.cmd {
        Cmd::Serve(a) => serve::run(a).map_err(|e| Fail(2, e)),
        Cmd::Bench(a) => dafs_bench::run(a).map_err(|e| Fail(1, e)),
        Cmd::Admin(a) => admin::run(a).map_err(|(code, msg)| Fail(code, msg)),
        Cmd::Mount(a) => mount::mount(a, cli.secret_file.as_deref(), &cli.export),
        Cmd::Umount(a) => mount::umount(a),
        Cmd::Ls { url, long } => {
            let (mut c, path) = connect(cli, url)?;
            let attr = c.stat(&path).map_err(|e| op_err(&path, e))?;
            let mut out = std::io::stdout().lock();
            if !attr.is_dir() {
                let _ = writeln!(out, "{path}");
                return Ok(());
            }
            let mut entries = c.readdir(&path).map_err(|e| op_err(&path, e))?;
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            for e in entries {
                if *long {
                    let child = format!("{}/{}", path.trim_end_matches('/'), e.name_lossy());
                    match c.lstat(&child) {
                        Ok(a) => {
                            let _ = writeln!(
                                out,
                                "{}{:04o} {:>12} {}",
                                type_char(a.ftype),
                                a.mode,
                                a.size,
                                e.name_lossy()
                            );
                        }
                        Err(err) => eprintln!("dafs: {child}: {err}"),
                    }
                } else {
                    let _ = writeln!(out, "{}", e.name_lossy());
                }
            }
            Ok(())
        }
        Cmd::Stat { url } => {
            let (mut c, path) = connect(cli, url)?;
            let a = c.lstat(&path).map_err(|e| op_err(&path, e))?;
            println!("path:   {path}");
            println!("type:   {:?}", a.ftype);
            println!("size:   {}", a.size);
            println!("mode:   {:04o}", a.mode);
            println!("links:  {}", a.nlink);
            println!("uid:    {}", a.uid);
            println!("gid:    {}", a.gid);
            println!("fileid: {}", a.fileid);
            println!(
                "mtime:  {}.{:09}",
                a.mtime_ns.div_euclid(1_000_000_000),
                a.mtime_ns.rem_euclid(1_000_000_000)
            );
            Ok(())
        }
        Cmd::Cat { urls, pipe } => {
            let p = pipe.pipeline()?;
            let mut out = std::io::stdout().lock();
            for url in urls {
                let (mut c, path) = connect(cli, url)?;
                copy_out(cli, &mut c, &path, &mut out, &p)?;
            }
            Ok(())
        }
        Cmd::Get { url, local, pipe } => {
            let p = pipe.pipeline()?;
            let (mut c, path) = connect(cli, url)?;
            if local.as_os_str() == "-" {
                return copy_out(cli, &mut c, &path, &mut std::io::stdout().lock(), &p);
            }
            let mut f = std::fs::File::create(local)
                .map_err(|e| Fail(1, format!("{}: {e}", local.display())))?;
            copy_out(cli, &mut c, &path, &mut f, &p)?;
            if p.sync {
                f.sync_all().map_err(|e| Fail(1, format!("{}: {e}", local.display())))?;
            }
            Ok(())
        }
        Cmd::Put { local, url, pipe } => {
            let p = pipe.pipeline()?;
            let (mut c, path) = connect(cli, url)?;
            let (mut input, size): (Box<dyn Read>, u64) = if local.as_os_str() == "-" {
                (Box::new(std::io::stdin().lock()), 0)
            } else {
                let f = std::fs::File::open(local)
                    .map_err(|e| Fail(1, format!("{}: {e}", local.display())))?;
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                (Box::new(f), size)
            };
            let pb = progress(cli, size);
            let name = local.display().to_string();
            transfer::copy_in(&mut c, &path, &mut input, &name, &p, &mut |n| pb.set_position(n))?;
            pb.finish_and_clear();
            Ok(())
        }
        Cmd::Rm { urls } => each(cli, urls, |c, p| c.remove(p)),
        Cmd::Rmdir { urls } => each(cli, urls, |c, p| c.rmdir(p)),
        Cmd::Mkdir { urls, parents } => each(cli, urls, |c, p| {
            if !*parents {
                return c.mkdir(p, 0o755).map(|_| ());
            }
            let mut acc = String::new();
            for comp in p.split('/').filter(|s| !s.is_empty()) {
                acc.push('/');
                acc.push_str(comp);
                match c.mkdir(&acc, 0o755) {
                    Ok(_) => {}
                    Err(Error::Status(dafs_proto::Status::Exist)) => {
                        if !c.stat(&acc)?.is_dir() {
                            return Err(Error::Status(dafs_proto::Status::NotDir));
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }),
        Cmd::Mv { from, to } => {
            if !same_server(from, to)? {
                return Err(Fail(2, "mv: both URLs must name the same server".into()));
            }
            let (mut c, fp) = connect(cli, from)?;
            let (_, tp) = dafs_client::parse_url(to).map_err(|e| Fail(2, e.to_string()))?;
            c.rename(&fp, &tp).map_err(|e| op_err(&format!("{fp} -> {tp}"), e))
        }
        Cmd::Ping { url } => {
            let (mut c, _) = connect(cli, url)?;
            let t = std::time::Instant::now();
            c.null().map_err(|e| op_err("ping", e))?;
            let rtt = t.elapsed();
            println!("session {:016x} over {}: rtt {:.1} us, {} slots, max message {} B, inline threshold {} B, max I/O {} B",
                c.session_id(), c.provider(), rtt.as_secs_f64() * 1e6, c.slots(), c.msg_size_bytes_max(), c.inline_threshold(), c.io_bytes_max());
            Ok(())
        }
    }
}

fn each(
    cli: &Cli,
    urls: &[String],
    mut f: impl FnMut(&mut Client, &str) -> Result<(), Error>,
) -> Result<(), Fail> {
    if urls.is_empty() {
        return Err(Fail(2, "no URL given".into()));
    }
    let mut failed = None;
    for url in urls {
        let (mut c, path) = connect(cli, url)?;
        if let Err(e) = f(&mut c, &path) {
            let fail = op_err(&path, e);
            eprintln!("dafs: {}", fail.1);
            failed = Some(fail.0);
        }
    }
    match failed {
        None => Ok(()),
        Some(code) => Err(Fail(code, "some operations failed".into())),
    }
}

fn copy_out(
    cli: &Cli,
    c: &mut Client,
    path: &str,
    out: &mut dyn Write,
    p: &transfer::Pipeline,
) -> Result<(), Fail> {
    // Sized once the file is open (the bar shows only for large files).
    let pb = std::cell::RefCell::new(indicatif::ProgressBar::hidden());
    let r = transfer::copy_out(
        c,
        path,
        out,
        p,
        &mut |size| *pb.borrow_mut() = progress(cli, size),
        &mut |n| pb.borrow().set_position(n),
    );
    pb.borrow().finish_and_clear();
    r.map(|_| ())
}
