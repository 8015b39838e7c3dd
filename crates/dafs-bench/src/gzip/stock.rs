//! Stock GNU gzip beside the DAFS gzip: on local files, through the LD_PRELOAD library
//! and through the FUSE mount; the input file; the check of every output (`gzip -t`,
//! then decompress and compare byte for byte).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::server::die_with_parent;
use crate::util::Rng;

/// Words of the generated input: text-like data that deflate shrinks about 3x, not a
/// repeated pattern it would shrink 100x.
const WORDS: [&str; 32] = [
    "the",
    "of",
    "file",
    "server",
    "client",
    "direct",
    "access",
    "memory",
    "transfer",
    "block",
    "request",
    "response",
    "asynchronous",
    "registered",
    "buffer",
    "network",
    "latency",
    "bandwidth",
    "storage",
    "record",
    "merge",
    "compress",
    "page",
    "cache",
    "kernel",
    "user",
    "level",
    "protocol",
    "session",
    "completion",
    "queue",
    "data",
];

/// Write `size` bytes of generated text to `path`.
pub fn make_input(path: &Path, size: u64, seed: u64) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    let mut rng = Rng::new(seed);
    let mut left = size;
    let mut line = String::new();
    while left > 0 {
        line.clear();
        let words = 4 + rng.next() % 12;
        for w in 0..words {
            let r = rng.next();
            if w > 0 {
                line.push(' ');
            }
            if r % 7 == 0 {
                line += &format!("{}", (r >> 8) % 100_000);
            } else {
                line += WORDS[(r >> 8) as usize % WORDS.len()];
            }
        }
        line.push('\n');
        let n = (line.len() as u64).min(left) as usize;
        f.write_all(&line.as_bytes()[..n]).map_err(err)?;
        left -= n as u64;
    }
    f.flush().map_err(err)
}

/// `gzip -t` on the concatenation of `parts`, then decompress it and compare with
/// `input`.
pub fn verify(parts: &[PathBuf], input: &Path) -> Result<(), String> {
    let cat = |cmd: &mut Command| -> Result<std::process::Child, String> {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        die_with_parent(cmd);
        let mut child = cmd.spawn().map_err(|e| format!("gzip: {e}"))?;
        let mut stdin = child.stdin.take().expect("piped");
        let parts = parts.to_vec();
        std::thread::spawn(move || {
            for p in parts {
                let Ok(mut f) = std::fs::File::open(&p) else { return };
                if std::io::copy(&mut f, &mut stdin).is_err() {
                    return;
                }
            }
        });
        Ok(child)
    };
    let t = cat(Command::new("gzip").arg("-t"))?.wait_with_output().map_err(|e| e.to_string())?;
    if !t.status.success() {
        return Err(format!("gzip -t: {}", String::from_utf8_lossy(&t.stderr).trim()));
    }
    let mut d = cat(Command::new("gzip").arg("-dc"))?;
    let mut out = d.stdout.take().expect("piped");
    let mut orig = std::fs::File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let (mut a, mut b) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    let mut off = 0u64;
    loop {
        let n = read_full(&mut out, &mut a).map_err(|e| format!("gzip -dc: {e}"))?;
        let m = read_full(&mut orig, &mut b[..n.max(1)]).map_err(|e| e.to_string())?;
        if n == 0 && m == 0 {
            break;
        }
        if n != m || a[..n] != b[..m] {
            let _ = d.kill();
            return Err(format!(
                "decompressed output differs from the input at or after byte {off}"
            ));
        }
        off += n as u64;
    }
    let st = d.wait().map_err(|e| e.to_string())?;
    if !st.success() {
        return Err(format!("gzip -dc failed ({st})"));
    }
    Ok(())
}

fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Stock gzip compressing `input` into `output` (`gzip -c -LEVEL IN > OUT` in bash),
/// with `env` added (LD_PRELOAD and DAFS_MOUNT for the preload run). Returns the
/// elapsed seconds and the CPU seconds of bash and gzip.
pub fn run_gzip(
    input: &str,
    output: &str,
    level: u32,
    env: &[(String, String)],
) -> Result<(f64, f64), String> {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("exec gzip -c -{level} \"$0\" > \"$1\""))
        .arg(input)
        .arg(output)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    die_with_parent(&mut cmd);
    let c0 = children_cpu();
    let t0 = std::time::Instant::now();
    let out = cmd.output().map_err(|e| format!("bash: {e}"))?;
    let secs = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "gzip {input} > {output} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok((secs, children_cpu() - c0))
}

/// user+sys CPU seconds of this process's waited-for children.
pub fn children_cpu() -> f64 {
    // SAFETY: getrusage fills the zero-initialised struct we own.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut r);
        r
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(r.ru_utime) + t(r.ru_stime)
}

/// A FUSE mount of a dafs URL (`dafs mount URL DIR -d`), unmounted on drop.
pub struct Mount {
    dafs: PathBuf,
    pub dir: PathBuf,
}

impl Mount {
    pub fn start(dafs: &Path, url: &str, dir: &Path) -> Result<Mount, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let out = Command::new(dafs)
            .arg("mount")
            .arg(url)
            .arg(dir)
            .arg("-d")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", dafs.display()))?;
        if !out.status.success() {
            return Err(format!(
                "dafs mount {url} {} failed: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount { dafs: dafs.to_path_buf(), dir: dir.to_path_buf() })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new(&self.dafs)
            .arg("umount")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            let _ = Command::new(&self.dafs).args(["umount", "--lazy"]).arg(&self.dir).status();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check passes a good stream of two members and fails (without hanging) on a
    /// corrupted, a truncated or a wrong one.
    #[test]
    fn verify_accepts_members_and_rejects_damage() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in");
        make_input(&input, 300_000, 3).unwrap();
        let data = std::fs::read(&input).unwrap();
        assert_eq!(data.len(), 300_000);
        let gz = |part: &[u8], name: &str| -> PathBuf {
            let src = d.path().join(format!("{name}.src"));
            std::fs::write(&src, part).unwrap();
            let out = d.path().join(name);
            run_gzip(src.to_str().unwrap(), out.to_str().unwrap(), 6, &[]).unwrap();
            out
        };
        let (a, b) = (gz(&data[..100_000], "a.gz"), gz(&data[100_000..], "b.gz"));
        verify(&[a.clone(), b.clone()], &input).unwrap();
        // Members out of order: valid gzip, wrong bytes.
        let e = verify(&[b.clone(), a.clone()], &input).unwrap_err();
        assert!(e.contains("differs"), "{e}");
        // A member missing: the output is short.
        assert!(verify(std::slice::from_ref(&a), &input).unwrap_err().contains("differs"));
        // A corrupted byte in the middle: gzip -t fails.
        let mut bytes = std::fs::read(&b).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x55;
        let bad = d.path().join("bad.gz");
        std::fs::write(&bad, &bytes).unwrap();
        assert!(verify(&[a.clone(), bad], &input).unwrap_err().contains("gzip -t"));
        // Truncated.
        let bytes = std::fs::read(&b).unwrap();
        std::fs::write(d.path().join("cut.gz"), &bytes[..bytes.len() - 10]).unwrap();
        assert!(verify(&[a, d.path().join("cut.gz")], &input).unwrap_err().contains("gzip -t"));
    }
}
