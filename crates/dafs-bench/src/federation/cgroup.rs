//! A fixed CPU budget per `dafsd`: one cgroup per node with a CFS bandwidth quota, so
//! that N nodes on one host stand for N machines of equal speed (the speedup measures
//! the design, not the host's spare cores).
//!
//! cgroup v2 (`cpu.max = "QUOTA PERIOD"`) where the unified hierarchy offers the `cpu`
//! controller (at `/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid host);
//! otherwise the v1 `cpu` controller (`cpu.cfs_quota_us` / `cpu.cfs_period_us`, the
//! same kernel mechanism). Groups are created under `dafs-bench-PID/` and removed on
//! drop (after their processes have exited).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// CFS period of every group.
pub const PERIOD_US: u64 = 100_000;
/// How long removal waits for a group's processes to be gone.
const RMDIR_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V2,
    V1,
}

/// The parent directory of this run's groups.
pub struct CpuGroups {
    version: Version,
    base: PathBuf,
    quota_us: u64,
    made: Vec<PathBuf>,
}

fn controllers_have_cpu(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.controllers"))
        .is_ok_and(|s| s.split_whitespace().any(|c| c == "cpu"))
}

impl CpuGroups {
    /// Groups of `cpus` CPUs each (0.2: 20 ms of every 100 ms).
    pub fn new(cpus: f64) -> Result<CpuGroups, String> {
        if !(cpus > 0.0 && cpus <= 64.0) {
            return Err(format!("--node-cpus {cpus}: need 0 < CPUs <= 64"));
        }
        let quota_us = ((cpus * PERIOD_US as f64).round() as u64).max(1000);
        let name = format!("dafs-bench-{}", std::process::id());
        let mut tried = Vec::new();
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let root = Path::new(root);
            if !controllers_have_cpu(root) {
                tried.push(format!("{}: no cgroup v2 cpu controller", root.display()));
                continue;
            }
            let base = root.join(&name);
            match Self::make_v2(root, &base) {
                Ok(()) => {
                    return Ok(CpuGroups { version: Version::V2, base, quota_us, made: Vec::new() })
                }
                Err(e) => tried.push(e),
            }
        }
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        if v1.join("cpu.cfs_quota_us").exists() {
            let base = v1.join(&name);
            match std::fs::create_dir(&base) {
                Ok(()) => {
                    return Ok(CpuGroups { version: Version::V1, base, quota_us, made: Vec::new() })
                }
                Err(e) => tried.push(format!("{}: {e}", base.display())),
            }
        } else {
            tried.push(format!("{}: no cgroup v1 cpu controller", v1.display()));
        }
        Err(format!(
            "cannot give each dafsd a CPU quota: no writable cgroup cpu controller ({}); \
             run as root on a host with cgroup v2 (or the v1 cpu controller) mounted, \
             or pass --node-cpus 0 to run without quotas",
            tried.join("; ")
        ))
    }

    fn make_v2(root: &Path, base: &Path) -> Result<(), String> {
        let w = |p: PathBuf, v: &str| {
            std::fs::write(&p, v).map_err(|e| format!("{}: {e}", p.display()))
        };
        // The cpu controller must be enabled for the children of root and of base.
        w(root.join("cgroup.subtree_control"), "+cpu")?;
        std::fs::create_dir(base).map_err(|e| format!("{}: {e}", base.display()))?;
        if let Err(e) = w(base.join("cgroup.subtree_control"), "+cpu") {
            let _ = std::fs::remove_dir(base);
            return Err(e);
        }
        Ok(())
    }

    /// A group for node `i` with the quota, holding process `pid` (all its threads).
    pub fn add(&mut self, i: usize, pid: u32) -> Result<(), String> {
        let g = self.base.join(format!("node{i}"));
        let w = |p: PathBuf, v: String| {
            std::fs::write(&p, v).map_err(|e| format!("{}: {e}", p.display()))
        };
        if !g.exists() {
            std::fs::create_dir(&g).map_err(|e| format!("{}: {e}", g.display()))?;
            self.made.push(g.clone());
        }
        match self.version {
            Version::V2 => w(g.join("cpu.max"), format!("{} {PERIOD_US}", self.quota_us))?,
            Version::V1 => {
                w(g.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
                w(g.join("cpu.cfs_quota_us"), self.quota_us.to_string())?;
            }
        }
        w(g.join("cgroup.procs"), pid.to_string())
    }

    /// "cgroup v2 cpu.max 20000 100000" or the v1 equivalent.
    pub fn describe(&self) -> String {
        match self.version {
            Version::V2 => format!("cgroup v2 cpu.max \"{} {PERIOD_US}\"", self.quota_us),
            Version::V1 => format!(
                "cgroup v1 cpu.cfs_quota_us {} / cpu.cfs_period_us {PERIOD_US}",
                self.quota_us
            ),
        }
    }
}

impl Drop for CpuGroups {
    fn drop(&mut self) {
        for g in self.made.iter().rev().chain(std::iter::once(&self.base)) {
            let end = Instant::now() + RMDIR_WAIT;
            while let Err(e) = std::fs::remove_dir(g) {
                if Instant::now() > end || e.kind() == std::io::ErrorKind::NotFound {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        eprintln!("[dafs bench federation] cannot remove {}: {e}", g.display());
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
