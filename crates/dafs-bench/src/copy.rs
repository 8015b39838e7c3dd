//! `dafs bench copy`: the copy tools against local files in the same run.
//!
//! One large file (created at run time in the temporary directory) is copied
//! - by `cp` between two local directories (the baseline);
//! - by `dafs put` and `dafs get` over shared memory and over TCP;
//! - by `cp` and `dd bs=1M` through the preload library, in and out;
//!
//! and a tree of small files (also generated here) is unpacked by `tar` locally and
//! through the preload library, counting the requests the server received per file
//! (from its admin socket). Every figure is the median of `--runs`; the page cache is
//! warm for every tool alike (the source is read once before timing).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::apps::Rig;
use crate::util::{self, fmt_size, median};

/// `dafs bench copy` options.
#[derive(clap::Args, Debug, Clone)]
pub struct CopyArgs {
    /// Size of the file copied (suffixes k, m, g).
    #[arg(long, default_value = "1g", value_parser = util::parse_size)]
    pub size: u64,
    /// Runs of every copy; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Small files in the tar tree (4 KiB each, 50 per directory).
    #[arg(long, default_value_t = 500)]
    pub tar_files: usize,
    /// The preload library (default: libdafs_preload.so next to this executable; the
    /// preload rows are skipped without it).
    #[arg(long)]
    pub preload: Option<PathBuf>,
    /// dafsd binary (default: next to this executable).
    #[arg(long)]
    pub dafsd: Option<PathBuf>,
    /// Parent directory of the temporary export and local copies (default: $TMPDIR).
    #[arg(long)]
    pub tmpdir: Option<PathBuf>,
    /// Server busy-poll budget, passed to dafsd --spin-us.
    #[arg(long, default_value_t = 50)]
    pub server_spin_us: u64,
}

/// Bytes of each file in the tar tree, and files per directory.
const TAR_FILE_BYTES: usize = 4096;
const TAR_FILES_PER_DIR: usize = 50;
/// Largest file and tree accepted (the copies are made in the temporary directory).
const COPY_SIZE_MAX: u64 = 64 << 30;
const TAR_FILES_MAX: usize = 1_000_000;

struct Row {
    what: String,
    secs: f64,
    baseline_secs: f64,
    note: String,
}

pub fn run(a: &CopyArgs) -> Result<(), String> {
    if a.runs == 0 || a.size == 0 || a.size > COPY_SIZE_MAX {
        return Err(format!("--runs must be >= 1 and --size 1..={}", fmt_size(COPY_SIZE_MAX)));
    }
    if a.tar_files == 0 || a.tar_files > TAR_FILES_MAX {
        return Err(format!("--tar-files must be 1..={TAR_FILES_MAX}"));
    }
    let rig = Rig::start(a.tmpdir.as_deref(), a.dafsd.as_deref(), a.server_spin_us, true)?;
    let srv = rig.srv.as_ref().ok_or("no dafsd")?;
    let base = rig.export.parent().ok_or("export has no parent")?.to_path_buf();
    let local = base.join("local");
    std::fs::create_dir_all(&local).map_err(|e| format!("{}: {e}", local.display()))?;
    let src = local.join("src.dat");
    eprintln!("[dafs bench copy] creating {} of {}", src.display(), fmt_size(a.size));
    crate::create_data_file(&src, a.size)?;
    util::warm(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
    let url = |p: &str| format!("dafs://{}/{p}", srv.addr);
    let preload = find_preload(a.preload.as_deref());
    let prefix = format!("/dafs-bench-copy-{}", std::process::id());
    let mount = format!("{prefix}=dafs://{}/", srv.addr);

    let time =
        |what: &str, cmd: &mut dyn FnMut() -> Command, after: &dyn Fn()| -> Result<f64, String> {
            let mut secs = Vec::new();
            for _ in 0..a.runs {
                let mut c = cmd();
                util::heartbeat(what);
                let t0 = Instant::now();
                let out = c.output().map_err(|e| format!("{what}: {e}"))?;
                secs.push(t0.elapsed().as_secs_f64());
                if !out.status.success() {
                    return Err(format!(
                        "{what}: {}: {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                after();
            }
            Ok(median(&secs))
        };
    let rm = |p: PathBuf| {
        move || {
            let _ = std::fs::remove_file(&p);
        }
    };
    let same_size = |p: &Path| -> Result<(), String> {
        let n = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?.len();
        if n != a.size {
            return Err(format!("{}: {n} bytes after the copy, want {}", p.display(), a.size));
        }
        Ok(())
    };

    // Baselines: cp and dd between two local directories.
    let dst = local.join("dst.dat");
    let cp_local = time("cp local", &mut || cmd("cp", &[&src, &dst]), &rm(dst.clone()))?;
    let dd_args = |i: &Path, o: &Path| {
        vec![format!("if={}", i.display()), format!("of={}", o.display()), "bs=1M".into()]
    };
    let dd_local = time(
        "dd local",
        &mut || {
            let mut c = Command::new("dd");
            c.args(dd_args(&src, &dst));
            c
        },
        &rm(dst.clone()),
    )?;

    let mut rows = Vec::new();
    let remote = rig.export.join("f.dat");
    for (label, provider) in [("shm", "auto"), ("tcp", "tcp")] {
        let put = time(
            &format!("dafs put over {label}"),
            &mut || {
                dafs(
                    &exe,
                    provider,
                    &[OsStr::new("put"), src.as_os_str(), OsStr::new(&url("f.dat"))],
                )
            },
            &|| {},
        )?;
        same_size(&remote)?;
        rows.push(Row {
            what: format!("dafs put over {label}"),
            secs: put,
            baseline_secs: cp_local,
            note: "vs local cp".into(),
        });
        let get = time(
            &format!("dafs get over {label}"),
            &mut || {
                dafs(
                    &exe,
                    provider,
                    &[OsStr::new("get"), OsStr::new(&url("f.dat")), dst.as_os_str()],
                )
            },
            &|| {},
        )?;
        same_size(&dst)?;
        let _ = std::fs::remove_file(&dst);
        rows.push(Row {
            what: format!("dafs get over {label}"),
            secs: get,
            baseline_secs: cp_local,
            note: "vs local cp".into(),
        });
    }

    let mut tar_note = String::from("preload library not found: cp/dd/tar through it not measured");
    if let Some(lib) = &preload {
        let pre = |prog: &str, args: &[String]| {
            let mut c = Command::new(prog);
            c.args(args).env("LD_PRELOAD", lib).env("DAFS_MOUNT", &mount);
            c
        };
        let rpath = format!("{prefix}/p.dat");
        let s = |p: &Path| p.display().to_string();
        let t =
            time("cp into dafs (preload)", &mut || pre("cp", &[s(&src), rpath.clone()]), &|| {})?;
        rows.push(Row {
            what: "cp local -> dafs (preload)".into(),
            secs: t,
            baseline_secs: cp_local,
            note: "vs local cp".into(),
        });
        let t =
            time("cp out of dafs (preload)", &mut || pre("cp", &[rpath.clone(), s(&dst)]), &|| {})?;
        same_size(&rig.export.join("p.dat"))?;
        same_size(&dst)?;
        let _ = std::fs::remove_file(&dst);
        rows.push(Row {
            what: "cp dafs -> local (preload)".into(),
            secs: t,
            baseline_secs: cp_local,
            note: "vs local cp".into(),
        });
        let rp = PathBuf::from(&rpath);
        let t = time("dd into dafs (preload)", &mut || pre("dd", &dd_args(&src, &rp)), &|| {})?;
        rows.push(Row {
            what: "dd bs=1M local -> dafs (preload)".into(),
            secs: t,
            baseline_secs: dd_local,
            note: "vs local dd".into(),
        });
        let t = time("dd out of dafs (preload)", &mut || pre("dd", &dd_args(&rp, &dst)), &|| {})?;
        same_size(&rig.export.join("p.dat"))?;
        same_size(&dst)?;
        let _ = std::fs::remove_file(&dst);
        rows.push(Row {
            what: "dd bs=1M dafs -> local (preload)".into(),
            secs: t,
            baseline_secs: dd_local,
            note: "vs local dd".into(),
        });

        // tar: unpack a generated tree of small files.
        let tarball = base.join("tree.tar");
        make_tree_tar(&base.join("tree"), &tarball, a.tar_files)?;
        let lx = local.join("x");
        let tar_local = time(
            "tar -x local",
            &mut || {
                let _ = std::fs::remove_dir_all(&lx);
                let _ = std::fs::create_dir(&lx);
                cmd("tar", &[Path::new("-xf"), &tarball, Path::new("-C"), &lx])
            },
            &|| {},
        )?;
        let admin = srv.admin.clone();
        let mut per_file = Vec::new();
        let t = time(
            "tar -x into dafs (preload)",
            &mut || {
                let _ = std::fs::remove_dir_all(rig.export.join("x"));
                let _ = std::fs::create_dir(rig.export.join("x"));
                per_file.push(admin.as_deref().and_then(requests));
                pre("tar", &["-xf".into(), s(&tarball), "-C".into(), format!("{prefix}/x")])
            },
            &|| {},
        )?;
        let after = admin.as_deref().and_then(requests);
        // Requests of the last run: from its start to the end.
        tar_note = match (per_file.last().copied().flatten(), after) {
            (Some(b), Some(e)) => format!(
                "{:.1} requests per file (server's request counter over the last run, {} files)",
                (e - b) as f64 / a.tar_files as f64,
                a.tar_files
            ),
            _ => "requests not counted (no admin socket)".into(),
        };
        rows.push(Row {
            what: format!("tar -x of {} files into dafs (preload)", a.tar_files),
            secs: t,
            baseline_secs: tar_local,
            note: "vs local tar".into(),
        });
    }

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("# dafs bench copy: {} file, median of {} runs", fmt_size(a.size), a.runs);
    println!(
        "\nload average at the end: {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "local cp: {:.3} s ({:.0} MiB/s); local dd bs=1M: {:.3} s\n",
        cp_local,
        mib_s(a.size, cp_local),
        dd_local
    );
    println!("| copy | seconds | MiB/s | speed vs baseline | baseline |");
    println!("|---|---:|---:|---:|---|");
    for r in &rows {
        let rate = if r.what.starts_with("tar") {
            "-".to_string()
        } else {
            format!("{:.0}", mib_s(a.size, r.secs))
        };
        println!(
            "| {} | {:.3} | {rate} | {:.2}x | {} |",
            r.what,
            r.secs,
            r.baseline_secs / r.secs,
            r.note
        );
    }
    println!("\ntar: {tar_note}");
    Ok(())
}

fn mib_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / 1048576.0 / secs.max(1e-9)
}

fn cmd(prog: &str, args: &[&Path]) -> Command {
    let mut c = Command::new(prog);
    c.args(args);
    c
}

fn dafs(exe: &Path, provider: &str, args: &[&OsStr]) -> Command {
    let mut c = Command::new(exe);
    c.args(["--quiet", "--provider", provider]).args(args);
    c
}

/// The preload library: `explicit`, else next to the running executable.
fn find_preload(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.to_path_buf());
    }
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join("libdafs_preload.so");
    p.is_file().then_some(p)
}

/// A tree of `n` files of TAR_FILE_BYTES in directories of TAR_FILES_PER_DIR, packed
/// into `tarball` (made here, at run time; removed with the temporary directory).
fn make_tree_tar(tree: &Path, tarball: &Path, n: usize) -> Result<(), String> {
    let mut buf = vec![0u8; TAR_FILE_BYTES];
    for i in 0..n {
        let d = tree.join(format!("d{:04}", i / TAR_FILES_PER_DIR));
        if i % TAR_FILES_PER_DIR == 0 {
            std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        util::fill(&mut buf, i as u64);
        let f = d.join(format!("f{i:06}"));
        std::fs::write(&f, &buf).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    let out = cmd("tar", &[Path::new("-cf"), tarball, Path::new("-C"), tree, Path::new(".")])
        .output()
        .map_err(|e| format!("tar: {e}"))?;
    if !out.status.success() {
        return Err(format!("tar -c: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(())
}

/// The server's request counter, from its admin socket.
fn requests(admin: &Path) -> Option<u64> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(admin).ok()?;
    s.write_all(b"stats\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    v.get("counters")?.get("requests")?.as_u64()
}
