//! `dafs mount URL MOUNTPOINT` and `dafs umount MOUNTPOINT`: the FUSE mount (crate
//! dafs-fuse) behind the CLI's conventions (exit 1 failure, 2 usage, 3 connection).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use clap::Args;
use dafs_client::{Client, ClientConfig};

use crate::Fail;

/// Set in the child that `--background` starts: it mounts in the foreground, reports
/// the mount on its standard output (a pipe the parent reads), then detaches.
const DAEMON_ENV: &str = "DAFS_MOUNT_DAEMON_CHILD";

#[derive(Args, Debug)]
pub struct MountArgs {
    /// Server and export root: dafs://HOST:PORT/ or dafs+shm:///PATH.sock/
    pub url: String,
    /// Directory to mount on (what it holds stays hidden while mounted).
    pub mountpoint: PathBuf,
    /// Mount options, comma-separated: ro, rw, allow_other, allow_root, attr_ttl_ms=N
    /// (kernel attribute and name cache lifetime; default 1000, 0 = always ask the server),
    /// cache=cto (default: file pages kept across opens while the file is unchanged on
    /// the server) or cache=strict (no data caching, attr_ttl_ms=0), writeback_cache (the
    /// kernel buffers writes until fsync/close; others see them only then).
    #[arg(short = 'o', value_name = "OPTIONS")]
    pub options: Vec<String>,
    /// Return once the mount is up and keep serving it in the background.
    #[arg(short = 'd', long)]
    pub background: bool,
}

/// Shown under `dafs mount --help`: FUSE's default surprises everyone once.
pub const WHO_MAY_USE_IT: &str = "\
Who may use the mount: by default ONLY THE USER WHO MOUNTED IT. That is FUSE's rule:
every other user, root included, gets EACCES (Permission denied) for everything in it.
  -o allow_other   every local user may use it (a non-root mounter needs
                   user_allow_other in /etc/fuse.conf); the kernel checks each file's
                   permissions for them, and with `dafsd --identity asserted` the server
                   also acts as the calling user (new files belong to that user)
  -o allow_root    the mounting user and root";

#[derive(Args, Debug)]
pub struct UmountArgs {
    /// Mount point of a `dafs mount`.
    pub mountpoint: PathBuf,
    /// Detach now even if programs still use the mount (they keep their open files).
    #[arg(short = 'l', long)]
    pub lazy: bool,
}

pub fn umount(a: &UmountArgs) -> Result<(), Fail> {
    dafs_fuse::unmount(&a.mountpoint, a.lazy).map_err(|e| Fail(1, e.to_string()))
}

pub fn mount(
    a: &MountArgs,
    secret_file: Option<&std::path::Path>,
    export: &str,
) -> Result<(), Fail> {
    let mut opts = dafs_fuse::MountOptions::default();
    for o in &a.options {
        opts.parse_list(o).map_err(|e| Fail(2, e.to_string()))?;
    }
    let (target, path) =
        dafs_client::parse_url(&a.url).map_err(|e| Fail(2, format!("{}: {e}", a.url)))?;
    if !path.trim_matches('/').is_empty() {
        return Err(Fail(2, format!("{}: mounting a subdirectory is not supported; give the export root (use --export-name for other exports)", a.url)));
    }
    if a.background && std::env::var_os(DAEMON_ENV).is_none() {
        return spawn_background();
    }
    let secret = secret_file
        .map(|p| crate::serve::read_secret(&p.to_path_buf()))
        .transpose()
        .map_err(|e| Fail(2, e))?;
    let cfg = ClientConfig { export: export.to_string(), secret, ..Default::default() };
    let c = Client::connect(&target, cfg)
        .map_err(|e| Fail(3, format!("cannot connect to {target}: {e}")))?;
    opts.fsname = format!("dafs:{target}");
    opts.export = export.to_string();
    let shown = a.mountpoint.display().to_string();
    let url = a.url.clone();
    let only_owner = if opts.allow_other || opts.allow_root {
        String::new()
    } else {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        format!("dafs: only uid {uid} may use this mount (FUSE's default); -o allow_other lets every user in")
    };
    dafs_fuse::mount(c, &a.mountpoint, &opts, || {
        // Not println!: a closed standard output must not panic a running mount.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "dafs: mounted {url} on {shown} (pid {})", std::process::id());
        if !only_owner.is_empty() {
            let _ = writeln!(out, "{only_owner}");
        }
        let _ = out.flush();
        drop(out);
        if std::env::var_os(DAEMON_ENV).is_some() {
            detach_stdio();
        }
    })
    .map_err(|e| Fail(1, e.to_string()))
}

/// Start this same command again without a terminal, wait for it to report the mount
/// (or fail), and return: so `dafs mount -d ... && ls MOUNTPOINT` never races the mount.
fn spawn_background() -> Result<(), Fail> {
    let exe =
        std::env::current_exe().map_err(|e| Fail(1, format!("cannot find own executable: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.args(std::env::args_os().skip(1))
        .env(DAEMON_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // SAFETY: setsid is async-signal-safe; a new session leaves the terminal's
    // process group, so ^C in the shell that ran `dafs mount -d` does not unmount.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child =
        cmd.spawn().map_err(|e| Fail(1, format!("cannot start the mount process: {e}")))?;
    let out = child.stdout.take().expect("piped");
    let mut line = String::new();
    let _ = BufReader::new(out).read_line(&mut line);
    if line.starts_with("dafs: mounted") {
        print!("{line}");
        return Ok(());
    }
    // The child failed before mounting; it has said why on the shared stderr.
    let status = child.wait().map_err(|e| Fail(1, format!("mount process: {e}")))?;
    Err(Fail(status.code().filter(|c| *c != 0).unwrap_or(1), "mount failed".into()))
}

/// Point standard input, output and error at /dev/null: the parent stops reading the
/// pipe, and a closed terminal must not kill the mount with SIGPIPE or EIO.
fn detach_stdio() {
    // SAFETY: plain descriptor operations on this process's own standard descriptors.
    unsafe {
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if fd >= 0 {
            for t in 0..3 {
                libc::dup2(fd, t);
            }
            if fd > 2 {
                libc::close(fd);
            }
        }
    }
}
