//! The NFS baseline (NFS-Ganesha + libnfs, shared/peers/nfs): runs its `nfsbench`
//! binary with the parameters of each test and parses its `RESULT key=value` lines.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::backends::{Backend, DataSpec, MetaSample, Sample};
use crate::server::die_with_parent;
use crate::util::{self, Burner};

pub const DEFAULT_URL: &str = "nfs://127.0.0.1/export?version=3&nfsport=2049&mountport=20048";
pub const DEFAULT_NFSBENCH: &str = "/tmp/nfsbaseline/nfsbench";
/// Where run_baseline.sh's Ganesha exports from (ganesha.conf Path).
const DEFAULT_EXPORT_DIR: &str = "/tmp/nfsexport";
pub const HOW_TO_START: &str = "start with sudo SERVE_ONLY=1 ../shared/peers/nfs/run_baseline.sh";

pub struct Nfs {
    pub bin: PathBuf,
    pub url: String,
    /// ganesha.nfsd, for server CPU.
    pub pid: Option<u32>,
    pub size: u64,
    pub file: String,
    /// The data file seen locally (loopback server with the default export), warmed
    /// locally before each test; otherwise nfsbench warms it over NFS (-W).
    pub local_copy: Option<PathBuf>,
}

type Kv = HashMap<String, String>;

pub(crate) fn listening(addr: &str) -> bool {
    addr.parse::<SocketAddr>()
        .map(|a| TcpStream::connect_timeout(&a, Duration::from_millis(300)).is_ok())
        .unwrap_or(false)
}

impl Nfs {
    /// Ok(Nfs) when a server and the nfsbench binary are available; Err(why not).
    pub fn detect(url: Option<&str>, bin: Option<&Path>, size: u64) -> Result<Nfs, String> {
        let url = match url {
            Some(u) => u.to_string(),
            None => {
                if !listening("127.0.0.1:2049") {
                    return Err(format!("not running ({HOW_TO_START})"));
                }
                DEFAULT_URL.to_string()
            }
        };
        let bin = match bin {
            Some(b) if b.is_file() => b.to_path_buf(),
            Some(b) => return Err(format!("--nfsbench {}: no such file", b.display())),
            None if Path::new(DEFAULT_NFSBENCH).is_file() => PathBuf::from(DEFAULT_NFSBENCH),
            None => {
                return Err(format!(
                    "server at {url} but no nfsbench binary (build it: gcc -O2 -o {DEFAULT_NFSBENCH} ../shared/peers/nfs/nfsbench.c -lnfs, or pass --nfsbench PATH)"
                ))
            }
        };
        let pid = util::find_process("ganesha.nfsd");
        Ok(Nfs { bin, url, pid, size, file: "dafs-bench.dat".into(), local_copy: None })
    }

    fn exec(&self, args: &[String]) -> Result<Vec<Kv>, String> {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-u").arg(&self.url).arg("-f").arg(&self.file).args(args);
        die_with_parent(&mut cmd);
        let out = cmd.output().map_err(|e| format!("{}: {e}", self.bin.display()))?;
        if !out.status.success() {
            return Err(format!(
                "nfsbench {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(parse_results(&String::from_utf8_lossy(&out.stdout)))
    }

    fn pid_args(&self) -> Vec<String> {
        match self.pid {
            Some(p) => vec!["-P".into(), p.to_string()],
            None => vec![],
        }
    }

    /// Create the data file over NFS.
    pub fn prepare(&mut self) -> Result<(), String> {
        self.exec(&["-C".into(), "-s".into(), self.size.to_string()])?;
        if self.url.starts_with("nfs://127.0.0.1/export?") {
            let p = Path::new(DEFAULT_EXPORT_DIR).join(&self.file);
            if p.is_file() {
                self.local_copy = Some(p);
            }
        }
        Ok(())
    }
}

/// nfsbench's `RESULT key=value ...` lines.
pub(crate) fn parse_results(text: &str) -> Vec<Kv> {
    text.lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn num(kv: &Kv, k: &str) -> Result<f64, String> {
    kv.get(k)
        .ok_or_else(|| format!("nfsbench RESULT has no {k}"))?
        .parse()
        .map_err(|_| format!("nfsbench RESULT {k} is not a number"))
}

impl Backend for Nfs {
    fn name(&self) -> &'static str {
        "nfs"
    }

    fn data(&mut self, s: &DataSpec) -> Result<Sample, String> {
        let mut a: Vec<String> = vec![
            "-b".into(),
            s.bs.to_string(),
            "-p".into(),
            (if s.rand { "rand" } else { "seq" }).into(),
            "-m".into(),
            (if s.write { "write" } else { "read" }).into(),
            "-t".into(),
            format!("{:.3}", s.secs),
            "-q".into(),
            s.qd.to_string(),
            "-s".into(),
            self.size.to_string(),
            "-r".into(),
            s.seed.to_string(),
        ];
        if s.qd > 1 {
            a.push("-a".into());
        }
        if !s.write {
            match &self.local_copy {
                Some(p) => util::warm(p).map_err(|e| format!("warm {}: {e}", p.display()))?,
                None => a.push("-W".into()),
            }
        }
        a.extend(self.pid_args());
        let r = self.exec(&a)?;
        let kv = r.last().ok_or("nfsbench printed no RESULT line")?;
        let bytes = num(kv, "bytes")?;
        let srv = if self.pid.is_some() {
            Some(num(kv, "srv_cpu_s_per_GB")? * bytes / 1e9)
        } else {
            None
        };
        Ok(Sample {
            secs: num(kv, "secs")?,
            bytes: bytes as u64,
            ops: num(kv, "ops")? as u64,
            cpu_s: num(kv, "cpu_s")?,
            srv_cpu_s: srv,
            other_cores: None,
            lat_p50_us: None,
            lat_p99_us: None,
        })
    }

    fn meta(&mut self, n: usize) -> Result<MetaSample, String> {
        let mut a = vec!["-M".to_string(), n.to_string()];
        a.extend(self.pid_args());
        let r = self.exec(&a)?;
        let names = ["create_write4k_close", "open_read4k_close", "unlink"];
        let mut out = MetaSample::default();
        for (i, name) in names.iter().enumerate() {
            let kv = r
                .iter()
                .find(|kv| kv.get("meta").map(|m| m == name).unwrap_or(false))
                .ok_or_else(|| format!("nfsbench printed no {name} result"))?;
            out.secs[i] = num(kv, "secs")?;
            out.cpu_s[i] = num(kv, "cpu_us_per_op")? * n as f64 / 1e6;
            out.srv_cpu_s[i] = if self.pid.is_some() {
                Some(num(kv, "srv_cpu_us_per_op")? * n as f64 / 1e6)
            } else {
                None
            };
        }
        Ok(out)
    }

    fn overlap(
        &mut self,
        _bs: usize,
        _n: usize,
        _depth: usize,
        _compute_us: f64,
        _burner: &Burner,
    ) -> Result<f64, String> {
        Err("the overlap test is not run on nfs".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_result_lines() {
        let out = "connecting\nRESULT label=- backend=nfs api=sync qd=1 mode=read pat=rand bs=4096 file_size=1073741824 secs=1.000 bytes=409600 ops=100 MBps=0.4 iops=100 lat_mean_us=10.00 cpu_s=0.010 cpu_s_per_GB=24.414 srv_cpu_s_per_GB=50.000\n";
        let r = parse_results(out);
        assert_eq!(r.len(), 1);
        assert_eq!(num(&r[0], "ops").unwrap(), 100.0);
        assert_eq!(r[0]["mode"], "read");
        assert!(num(&r[0], "nope").is_err());
    }
}
