//! A FUSE mount of a test server for the integration tests: `dafs mount URL DIR [-o OPTS]`
//! run in the foreground as a child, unmounted on drop. Needs root and /dev/fuse (the
//! tests that use it fail, never skip, without them).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::dafs_bin;

/// `dafs mount URL DIR` in the foreground, as a child; unmounted on drop.
pub struct Mount {
    pub dir: tempfile::TempDir,
    child: Child,
}

impl Mount {
    pub fn new(url: &str) -> Mount {
        Mount::with_options(url, &[])
    }

    /// Mounted with extra `dafs mount` arguments (e.g. `["-o", "attr_ttl_ms=60000"]`).
    pub fn with_options(url: &str, args: &[&str]) -> Mount {
        assert!(std::path::Path::new("/dev/fuse").exists(), "needs /dev/fuse");
        let dir = tempfile::Builder::new().prefix("dafs-fuse-mnt-").tempdir().unwrap();
        let child = Command::new(dafs_bin())
            .args(["mount", url])
            .arg(dir.path())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let m = Mount { dir, child };
        let t = Instant::now();
        while !m.mounted() {
            assert!(t.elapsed() < Duration::from_secs(10), "mount did not come up (root?)");
            std::thread::sleep(Duration::from_millis(20));
        }
        m
    }

    pub fn mounted(&self) -> bool {
        let me = format!(" {} ", self.dir.path().display());
        std::fs::read_to_string("/proc/mounts").unwrap().lines().any(|l| l.contains(&me))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new(dafs_bin()).arg("umount").arg(self.dir.path()).status();
        if self.mounted() {
            let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Mount {
    /// The mount point.
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}
