//! What the application experiments (merge, gzip) share: a temporary directory holding
//! the dafsd export, the dafsd child serving it, sessions to it over TCP and shared
//! memory, the systems' names and the Markdown table writer.

use std::path::{Path, PathBuf};

use dafs_client::{Client, ClientConfig, Provider};

use crate::server::{self, Dafsd};

/// The systems an application experiment runs on, in report order.
pub const SYSTEMS: [&str; 4] = ["local", "dafs-tcp", "dafs-shm", "nfs"];

/// `--backends` values: "tcp"/"shm" abbreviations accepted; every name checked.
pub fn parse_systems(list: &[String], known: &[&str]) -> Result<Vec<String>, String> {
    if list.is_empty() {
        return Ok(known.iter().map(|s| s.to_string()).collect());
    }
    let mut out = Vec::new();
    for s in list {
        let s = match s.trim().to_ascii_lowercase().as_str() {
            "tcp" => "dafs-tcp".to_string(),
            "shm" => "dafs-shm".to_string(),
            x => x.to_string(),
        };
        if !known.contains(&s.as_str()) {
            return Err(format!("unknown backend {s:?} (known: {})", known.join(", ")));
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

/// A temporary directory with `export/` served by a dafsd child (when asked for).
pub struct Rig {
    pub export: PathBuf,
    pub srv: Option<Dafsd>,
    /// Removed last: the server goes first.
    tmp: tempfile::TempDir,
}

impl Rig {
    pub fn start(
        tmpdir: Option<&Path>,
        dafsd: Option<&Path>,
        spin_us: u64,
        serve: bool,
    ) -> Result<Rig, String> {
        let parent = tmpdir.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
        let tmp = tempfile::Builder::new()
            .prefix("dafs-bench-")
            .tempdir_in(&parent)
            .map_err(|e| format!("temporary directory in {}: {e}", parent.display()))?;
        let export = tmp.path().join("export");
        std::fs::create_dir_all(&export).map_err(|e| format!("{}: {e}", export.display()))?;
        let srv = if serve {
            let bin = server::find_dafsd(dafsd)?;
            Some(Dafsd::start(
                &bin,
                &export,
                spin_us,
                None,
                &tmp.path().join("dafsd.sock"),
                &tmp.path().join("dafsd.log"),
            )?)
        } else {
            None
        };
        Ok(Rig { export, srv, tmp })
    }

    /// The temporary directory (beside the export).
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// The URL a session of `system` ("dafs-tcp" or "dafs-shm") connects to, and how.
    pub fn target(&self, system: &str) -> Result<(String, Provider), String> {
        let srv = self.srv.as_ref().ok_or("no dafsd running")?;
        match system {
            "dafs-tcp" => Ok((srv.addr.clone(), Provider::Tcp)),
            "dafs-shm" => match &srv.shm_url {
                Some(u) => Ok((u.clone(), Provider::Auto)),
                None => Err("dafsd offered no shared-memory socket".into()),
            },
            _ => Err(format!("{system} is not a DAFS system")),
        }
    }

    /// A session of `system` asking for `slots` request slots (None: the default).
    pub fn connect(&self, system: &str, slots: Option<u32>) -> Result<Client, String> {
        let (url, provider) = self.target(system)?;
        connect(&url, provider, slots)
    }

    pub fn server_pid(&self) -> Option<u32> {
        self.srv.as_ref().map(|s| s.pid)
    }
}

pub fn connect(url: &str, provider: Provider, slots: Option<u32>) -> Result<Client, String> {
    let mut cfg = ClientConfig { provider, ..Default::default() };
    if let Some(s) = slots {
        cfg.slots = s;
    }
    let c = Client::connect(url, cfg).map_err(|e| format!("connect {url}: {e}"))?;
    if let Some(s) = slots {
        if c.slots() < s {
            return Err(format!(
                "the server granted {} request slots, {s} are needed (lower --qd, or raise dafsd --slots)",
                c.slots()
            ));
        }
    }
    Ok(c)
}

/// A Markdown table.
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for r in rows {
        s += &format!("| {} |\n", r.join(" | "));
    }
    s
}

/// The end of an application experiment's report: its targets (name, status, and what was
/// measured, under `measured_head`), then the runs that failed (`errors`, list lines) and
/// the notes, when there are any.
pub fn targets_and_errors(
    targets: &[crate::Target],
    measured_head: &str,
    errors: Vec<String>,
    notes: &[String],
) -> String {
    let mut md = String::from("\n## Targets\n\n");
    let t: Vec<Vec<String>> =
        targets.iter().map(|t| vec![t.name.clone(), t.status.clone(), t.detail.clone()]).collect();
    md += &table(&["target", "status", measured_head], &t);
    let lines: Vec<String> =
        errors.into_iter().chain(notes.iter().map(|n| format!("- {n}"))).collect();
    if !lines.is_empty() {
        md += &format!("\n## Not measured / errors\n\n{}\n", lines.join("\n"));
    }
    md
}

/// "1.23x" or "-".
pub fn fmt_ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.2}x")).unwrap_or_else(|| "-".into())
}

/// Write `report.md` and `results.json` into `out`.
pub fn write_outputs(out: &Path, md: &str, json: &impl serde::Serialize) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let p = out.join("report.md");
    std::fs::write(&p, md).map_err(|e| format!("{}: {e}", p.display()))?;
    let p = out.join("results.json");
    let j = serde_json::to_string_pretty(json).map_err(|e| e.to_string())?;
    std::fs::write(&p, j).map_err(|e| format!("{}: {e}", p.display()))
}
