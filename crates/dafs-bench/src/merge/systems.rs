//! The systems the merge runs on: their input files, one timed merge each, and the
//! check of its output.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::dafs_io::DafsStreams;
use super::libnfs::{LibNfs, NfsSession};
use super::records::{Checksum, Generator, Verifier};
use super::threaded::{BlockIo, LocalIo, Threaded};
use super::{engine, MergeConfig, MergeSample};
use crate::apps::Rig;
use crate::nfs as nfs_baseline;
use crate::util::{self, cpu_self, proc_cpu};

const NFS_PREFIX: &str = "dafs-bench-merge";

struct NfsTarget {
    lib: Arc<LibNfs>,
    url: String,
    pid: Option<u32>,
}

pub struct Systems {
    /// The systems that can run, in report order.
    pub names: Vec<String>,
    rig: Rig,
    nfs: Option<NfsTarget>,
}

fn in_name(i: usize) -> String {
    format!("merge-in-{i}.dat")
}

fn out_name(system: &str) -> String {
    format!("merge-out-{system}.dat")
}

/// The NFS baseline, or why not.
fn detect_nfs(cfg: &MergeConfig) -> Result<NfsTarget, String> {
    let url = match &cfg.nfs_url {
        Some(u) => u.clone(),
        None if nfs_baseline::listening("127.0.0.1:2049") => nfs_baseline::DEFAULT_URL.into(),
        None => return Err(format!("not running ({})", nfs_baseline::HOW_TO_START)),
    };
    let lib = LibNfs::load()?;
    NfsSession::mount(&lib, &url)?;
    Ok(NfsTarget { lib, url, pid: util::find_process("ganesha.nfsd") })
}

impl Systems {
    pub fn start(cfg: &MergeConfig, notes: &mut Vec<String>) -> Result<Systems, String> {
        let want = |s: &str| cfg.systems.iter().any(|x| x == s);
        let serve = want("dafs-tcp") || want("dafs-shm");
        let rig =
            Rig::start(cfg.tmpdir.as_deref(), cfg.dafsd.as_deref(), cfg.server_spin_us, serve)?;
        let mut names = Vec::new();
        let mut nfs = None;
        for s in &cfg.systems {
            let ok = match s.as_str() {
                "dafs-tcp" | "dafs-shm" => rig.target(s).map(|_| ()),
                "nfs" => detect_nfs(cfg).map(|n| nfs = Some(n)),
                _ => Ok(()),
            };
            match ok {
                Ok(()) => names.push(s.clone()),
                Err(e) if cfg.systems_explicit => return Err(format!("{s}: {e}")),
                Err(e) => notes.push(format!("{s}: not measured: {e}")),
            }
        }
        Ok(Systems { names, rig, nfs })
    }

    /// Write the inputs of `rec`-byte records (the export holds local and DAFS inputs,
    /// the NFS export its own copy); returns their checksum.
    pub fn generate(&mut self, cfg: &MergeConfig, rec: usize) -> Result<Checksum, String> {
        let local = self.names.iter().any(|s| s != "nfs");
        let mut ios: Vec<(Box<dyn BlockIo>, Vec<usize>)> = Vec::new();
        if local {
            let files = (0..cfg.inputs)
                .map(|i| {
                    let p = self.rig.export.join(in_name(i));
                    std::fs::File::create(&p).map_err(|e| format!("{}: {e}", p.display()))
                })
                .collect::<Result<Vec<_>, _>>()?;
            ios.push((Box::new(LocalIo(files)), (0..cfg.inputs).collect()));
        }
        if let Some(n) = &self.nfs {
            let mut s = NfsSession::mount(&n.lib, &n.url)?;
            let idx = (0..cfg.inputs)
                .map(|i| s.open(&format!("{NFS_PREFIX}-{}", in_name(i)), true))
                .collect::<Result<Vec<_>, _>>()?;
            ios.push((Box::new(s), idx));
        }
        let bs = cfg.block_bytes;
        let mut sum = Checksum::default();
        let mut block = vec![0u8; bs];
        for i in 0..cfg.inputs {
            let mut g = Generator::new(i, rec, rec as u64);
            for b in 0..cfg.blocks_per_input() {
                g.fill(&mut block);
                for (io, idx) in ios.iter_mut() {
                    io.write_at(idx[i], &block, b * bs as u64)?;
                }
            }
            sum.merge(&g.sum);
        }
        // Dropping the NFS session closes (commits) its files.
        Ok(sum)
    }

    /// One timed merge on `system`, its output checked against `sum`, then removed.
    pub fn merge_once(
        &mut self,
        cfg: &MergeConfig,
        system: &str,
        rec: usize,
        sum: &Checksum,
    ) -> Result<MergeSample, String> {
        let blocks = vec![cfg.blocks_per_input(); cfg.inputs];
        let (bs, qd) = (cfg.block_bytes, cfg.qd);
        let srv_pid = if system == "nfs" {
            self.nfs.as_ref().and_then(|n| n.pid)
        } else {
            self.rig.server_pid()
        };
        let out = out_name(system);
        let mut s = MergeSample { bytes: cfg.bytes_moved(), ..Default::default() };
        let measure = |s: &mut MergeSample, f: &mut dyn FnMut() -> Result<u64, String>| {
            let srv0 = srv_pid.and_then(proc_cpu);
            let cpu0 = cpu_self();
            let t0 = Instant::now();
            let written = f()?;
            s.secs = t0.elapsed().as_secs_f64();
            s.cpu_s = cpu_self() - cpu0;
            s.srv_cpu_s = match (srv0, srv_pid.and_then(proc_cpu)) {
                (Some(a), Some(b)) if system != "local" => Some(b - a),
                _ => None,
            };
            if 2 * written != s.bytes {
                return Err(format!("wrote {written} bytes of {}", s.bytes / 2));
            }
            Ok(())
        };
        match system {
            "local" => {
                let dir = &self.rig.export;
                measure(&mut s, &mut || {
                    let (r, w) = local_files(dir, cfg.inputs, &out)?;
                    let mut t = Threaded::start(Box::new(r), Box::new(w), blocks.clone(), bs, qd);
                    engine::run(&mut t, cfg.inputs, rec)
                })?;
            }
            "nfs" => {
                let n = self.nfs.as_ref().expect("nfs detected");
                let names: Vec<String> =
                    (0..cfg.inputs).map(|i| format!("{NFS_PREFIX}-{}", in_name(i))).collect();
                let nfs_out = format!("{NFS_PREFIX}-{out}");
                let mut spent = None;
                measure(&mut s, &mut || {
                    let mut r = NfsSession::mount(&n.lib, &n.url)?;
                    for nm in &names {
                        r.open(nm, false)?;
                    }
                    let mut w = NfsSession::mount(&n.lib, &n.url)?;
                    w.open(&nfs_out, true)?;
                    let mut t = Threaded::start(Box::new(r), Box::new(w), blocks.clone(), bs, qd);
                    let w = engine::run(&mut t, cfg.inputs, rec);
                    spent = t.spent_writer.take();
                    w
                })?;
                // Close (COMMIT) the output untimed: local and DAFS outputs are not
                // synced either, and the seed's servers used memory file systems.
                drop(spent);
                let mut v = NfsSession::mount(&n.lib, &n.url)?;
                let f = v.open(&nfs_out, false)?;
                verify(rec, sum, s.bytes / 2, bs, &mut |buf, off| v.read_at(f, buf, off))?;
                v.unlink(&nfs_out)?;
                return Ok(s);
            }
            dafs => {
                // Every stream's blocks in flight at once: n·QD reads and the write-behind.
                let slots = (cfg.inputs * qd + qd.max(2)) as u32;
                let mut c = self.rig.connect(dafs, Some(slots))?;
                let inputs: Vec<(String, u64)> =
                    (0..cfg.inputs).map(|i| (in_name(i), blocks[i])).collect();
                measure(&mut s, &mut || {
                    let mut st = DafsStreams::start(&mut c, &inputs, &out, bs, qd)?;
                    let w = engine::run(&mut st, cfg.inputs, rec);
                    st.close()?;
                    w
                })?;
            }
        }
        let p = self.rig.export.join(&out);
        let f = std::fs::File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let flen = f.metadata().map_err(|e| format!("{}: {e}", p.display()))?.len();
        if flen != s.bytes / 2 {
            return Err(format!("output check: {flen} bytes, the inputs hold {}", s.bytes / 2));
        }
        let mut io = LocalIo(vec![f]);
        verify(rec, sum, s.bytes / 2, bs, &mut |buf, off| io.read_at(0, buf, off))?;
        std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(s)
    }

    /// Remove the NFS inputs (the local ones go with the temporary directory).
    pub fn cleanup(&mut self) {
        if let Some(n) = &self.nfs {
            if let Ok(mut s) = NfsSession::mount(&n.lib, &n.url) {
                for i in 0.. {
                    if s.unlink(&format!("{NFS_PREFIX}-{}", in_name(i))).is_err() {
                        break;
                    }
                }
            }
        }
    }
}

fn local_files(dir: &Path, n: usize, out: &str) -> Result<(LocalIo, LocalIo), String> {
    let open = |p: &Path, w: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(w)
            .create(w)
            .truncate(w)
            .open(p)
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let ins = (0..n).map(|i| open(&dir.join(in_name(i)), false)).collect::<Result<_, _>>()?;
    Ok((LocalIo(ins), LocalIo(vec![open(&dir.join(out), true)?])))
}

/// Reads `buf.len()` bytes of the output at an offset.
type ReadFn<'a> = dyn FnMut(&mut [u8], u64) -> Result<(), String> + 'a;

/// Read back an output of `len` bytes and check it: sorted, the inputs' checksum.
fn verify(
    rec: usize,
    sum: &Checksum,
    len: u64,
    bs: usize,
    read: &mut ReadFn,
) -> Result<(), String> {
    let mut v = Verifier::new(rec);
    let mut buf = vec![0u8; bs];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(bs as u64) as usize;
        read(&mut buf[..n], off)?;
        v.feed(&buf[..n]).map_err(|e| format!("output check: {e}"))?;
        off += n as u64;
    }
    v.finish(sum).map_err(|e| format!("output check: {e}"))
}
