//! A fixed CPU budget per `dafsd`: one cgroup per node with a CFS bandwidth quota, so
//! that N nodes on one host stand for N machines of equal speed (the speedup measures
//! the design, not the host's spare cores).
//!
//! cgroup v2 (`cpu.max = "QUOTA PERIOD"`) where the unified hierarchy offers the `cpu`
//! controller (at `/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid host);
//! otherwise the v1 `cpu` controller (`cpu.cfs_quota_us` / `cpu.cfs_period_us`, the
//! same kernel mechanism). Groups are created under `dafs-bench-PID/` and removed on
//! drop (after their processes have exited).
//!
//! A quota is a ceiling, not a floor: a busy host (a compiler on both cores) would
//! take CPU from the nodes and from the clients, and the figure would measure the
//! host's other load. Every node group and the clients' group (this process, moved
//! there for the run) therefore also get a high CPU weight, so each node gets its
//! budget and the clients what they need whatever else runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// CFS period of every group.
pub const PERIOD_US: u64 = 100_000;
/// CPU weight of the node and client groups (cgroup v2 `cpu.weight`, 1..10000,
/// default 100; v1 `cpu.shares` is the same ratio of 1024).
pub const WEIGHT: u64 = 10_000;
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
    /// Where this process was before [`CpuGroups::adopt_self`] moved it (restored on
    /// drop).
    self_home: Option<PathBuf>,
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
                    return Ok(CpuGroups {
                        version: Version::V2,
                        base,
                        quota_us,
                        made: Vec::new(),
                        self_home: None,
                    })
                }
                Err(e) => tried.push(e),
            }
        }
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        if v1.join("cpu.cfs_quota_us").exists() {
            let base = v1.join(&name);
            match std::fs::create_dir(&base) {
                Ok(()) => {
                    return Ok(CpuGroups {
                        version: Version::V1,
                        base,
                        quota_us,
                        made: Vec::new(),
                        self_home: None,
                    })
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
        // The cpu controller must be enabled for the children of root and of base.
        write(root.join("cgroup.subtree_control"), "+cpu")?;
        std::fs::create_dir(base).map_err(|e| format!("{}: {e}", base.display()))?;
        if let Err(e) = write(base.join("cgroup.subtree_control"), "+cpu") {
            let _ = std::fs::remove_dir(base);
            return Err(e);
        }
        Ok(())
    }

    /// The group `name` under the base, made if missing, with the high weight.
    fn group(&mut self, name: &str) -> Result<PathBuf, String> {
        let g = self.base.join(name);
        if !g.exists() {
            std::fs::create_dir(&g).map_err(|e| format!("{}: {e}", g.display()))?;
            self.made.push(g.clone());
        }
        match self.version {
            Version::V2 => write(g.join("cpu.weight"), &WEIGHT.to_string())?,
            Version::V1 => write(g.join("cpu.shares"), &(WEIGHT * 1024 / 100).to_string())?,
        }
        Ok(g)
    }

    /// Move this process (the clients' threads) into a group of its own with the
    /// high weight and no quota, until drop.
    pub fn adopt_self(&mut self) -> Result<(), String> {
        let home = self.own_group()?;
        let g = self.group("clients")?;
        write(g.join("cgroup.procs"), &std::process::id().to_string())?;
        self.self_home = Some(home);
        Ok(())
    }

    /// This process's group directory in the hierarchy the groups are made in.
    fn own_group(&self) -> Result<PathBuf, String> {
        let text = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let rel = own_group_in(&text, self.version)
            .ok_or("/proc/self/cgroup: no line for the cpu controller")?;
        let root = self.base.parent().expect("the base is made under a cgroup root");
        Ok(root.join(rel))
    }

    /// A group for node `i` with the quota, holding process `pid` (all its threads).
    pub fn add(&mut self, i: usize, pid: u32) -> Result<(), String> {
        let g = self.group(&format!("node{i}"))?;
        match self.version {
            Version::V2 => write(g.join("cpu.max"), &format!("{} {PERIOD_US}", self.quota_us))?,
            Version::V1 => {
                write(g.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                write(g.join("cpu.cfs_quota_us"), &self.quota_us.to_string())?;
            }
        }
        write(g.join("cgroup.procs"), &pid.to_string())
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

/// The group path (relative to the hierarchy's root) of the `cpu` controller in a
/// /proc/PID/cgroup text: v2's `0::/PATH`, v1's `N:cpu,cpuacct:/PATH`.
fn own_group_in(text: &str, version: Version) -> Option<String> {
    let want = |ctl: &str| match version {
        Version::V2 => ctl.is_empty(),
        Version::V1 => ctl.split(',').any(|c| c == "cpu"),
    };
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            Some((f.nth(1)?, f.next()?))
        })
        .find(|(ctl, _)| want(ctl))
        .map(|(_, path)| path.trim_start_matches('/').to_string())
}

fn write(p: PathBuf, v: &str) -> Result<(), String> {
    std::fs::write(&p, v).map_err(|e| format!("{}: {e}", p.display()))
}

impl Drop for CpuGroups {
    fn drop(&mut self) {
        if let Some(home) = self.self_home.take() {
            if let Err(e) = write(home.join("cgroup.procs"), &std::process::id().to_string()) {
                eprintln!("[dafs bench federation] cannot move back to {}: {e}", home.display());
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_group_is_read_for_either_hierarchy() {
        let hybrid = "12:cpuset:/\n4:cpu,cpuacct:/user.slice/a b\n0::/user.slice/u.scope\n";
        assert_eq!(own_group_in(hybrid, Version::V1).as_deref(), Some("user.slice/a b"));
        assert_eq!(own_group_in(hybrid, Version::V2).as_deref(), Some("user.slice/u.scope"));
        assert_eq!(own_group_in("0::/\n", Version::V2).as_deref(), Some(""));
        // cpuacct alone is not the cpu controller.
        assert_eq!(own_group_in("3:cpuacct:/x\n", Version::V1), None);
    }
}
