//! A file system of its own for every node's export.
//!
//! N nodes on one host that export directories of one file system share its journal,
//! its inode allocator and its block cache, which N machines do not: ext4's cost of a
//! create grows with the recently deleted inodes of the whole file system (its
//! `recently_deleted` scan), so PostMark on 8 nodes' exports in one ext4 makes every
//! node pay for the other seven, and on one quota'd node the throughput fell from 578
//! to 150 ops/s going from 1 to 4 clients, where on tmpfs it held at ~470. Each node
//! therefore gets its own file system, as a machine would:
//!
//! - `ext4` (the default): a sparse image file per node, `mkfs.ext4`, loop-mounted;
//! - `tmpfs`: a tmpfs instance per node (no journal: where loop devices are missing);
//! - `shared`: plain directories in `--tmpdir` (the host's file system, shared).
//!
//! Mounts need root; they are unmounted and the images removed on drop.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Size of one node's ext4 image or tmpfs (sparse: only what is written is stored).
pub const NODE_FS_BYTES: u64 = 256 << 20;
/// How long unmounting retries while a killed server's descriptors close.
const UMOUNT_WAIT: Duration = Duration::from_secs(5);

/// What `--node-fs` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeFsKind {
    Ext4,
    Tmpfs,
    Shared,
}

impl NodeFsKind {
    pub fn describe(self) -> &'static str {
        match self {
            NodeFsKind::Ext4 => "one loop-mounted ext4 per node",
            NodeFsKind::Tmpfs => "one tmpfs per node",
            NodeFsKind::Shared => "directories of one shared file system",
        }
    }
}

/// The nodes' exports of one run.
pub struct NodeFs {
    mounts: Vec<PathBuf>,
    images: Vec<PathBuf>,
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| format!("{shown}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{shown}: {} {}", out.status, String::from_utf8_lossy(&out.stderr).trim()))
    }
}

impl NodeFs {
    /// `n` exports `dir/export0..`, each on a file system of `kind` (made before any
    /// server starts, so a host that cannot mount fails at once, with the hint).
    pub fn make(kind: NodeFsKind, dir: &Path, n: usize) -> Result<(NodeFs, Vec<PathBuf>), String> {
        Self::make_all(kind, dir, n).map_err(|e| {
            format!(
                "--node-fs {kind:?}: {e} (give each node its own file system as root with \
                 loop devices (ext4) or tmpfs, or pass --node-fs shared)"
            )
        })
    }

    fn make_all(kind: NodeFsKind, dir: &Path, n: usize) -> Result<(NodeFs, Vec<PathBuf>), String> {
        let mut fs = NodeFs { mounts: Vec::new(), images: Vec::new() };
        let mut exports = Vec::with_capacity(n);
        for i in 0..n {
            let export = dir.join(format!("export{i}"));
            std::fs::create_dir(&export).map_err(|e| format!("{}: {e}", export.display()))?;
            match kind {
                NodeFsKind::Shared => {}
                NodeFsKind::Tmpfs => {
                    let opts = format!("size={NODE_FS_BYTES},mode=0755");
                    run(Command::new("mount")
                        .args(["-t", "tmpfs", "-o", &opts, "dafs-bench"])
                        .arg(&export))?;
                    fs.mounts.push(export.clone());
                }
                NodeFsKind::Ext4 => {
                    let img = dir.join(format!("node{i}.ext4"));
                    let f = std::fs::File::create(&img)
                        .map_err(|e| format!("{}: {e}", img.display()))?;
                    f.set_len(NODE_FS_BYTES).map_err(|e| format!("{}: {e}", img.display()))?;
                    fs.images.push(img.clone());
                    // No lazy init: mkfs writes the (small) inode tables and journal
                    // now, so no kernel thread zeroes them while the nodes are measured.
                    run(Command::new("mkfs.ext4")
                        .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
                        .arg(&img))?;
                    run(Command::new("mount").args(["-o", "loop"]).arg(&img).arg(&export))?;
                    fs.mounts.push(export.clone());
                }
            }
            exports.push(export);
        }
        Ok((fs, exports))
    }
}

impl Drop for NodeFs {
    fn drop(&mut self) {
        for m in self.mounts.iter().rev() {
            let end = Instant::now() + UMOUNT_WAIT;
            while let Err(e) = run(Command::new("umount").arg(m)) {
                if Instant::now() > end {
                    eprintln!("[dafs bench federation] cannot unmount {}: {e}", m.display());
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        for img in &self.images {
            let _ = std::fs::remove_file(img);
        }
    }
}
