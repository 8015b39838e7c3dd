//! The systems measured: local files, DAFS over TCP and over shared memory.
//! (The NFS baseline lives in nfs.rs: it runs the peer's nfsbench binary.)

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use dafs_client::{
    CgId, Client, ClientConfig, ClientStats, File as DFile, IoBuf, OpenOptions, Provider, RegionId,
};
use serde::Serialize;

use crate::util::{self, cpu_self, proc_cpu, Burner, Rng};

/// Longest wait for one completion before the harness calls it a hang.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// One timed run of a data test.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Sample {
    pub secs: f64,
    pub bytes: u64,
    pub ops: u64,
    /// Client (this process) user+sys CPU seconds.
    pub cpu_s: f64,
    /// Server user+sys CPU seconds, when known.
    pub srv_cpu_s: Option<f64>,
    /// CPU used meanwhile by everything else on the machine, in cores (busy time from
    /// /proc/stat less client and server CPU, over the elapsed time): anything well
    /// above 0 means the measurement shared the machine.
    pub other_cores: Option<f64>,
    /// Median and 99th percentile of the per-request latency, in us: measured at QD1
    /// (local and DAFS), where one request's time is the call's; None otherwise.
    pub lat_p50_us: Option<f64>,
    pub lat_p99_us: Option<f64>,
}

/// Most latencies one run keeps (4 bytes each): a quick 4 KiB run makes a few hundred
/// thousand; past this, later requests are not sampled (the first ones still are).
const LAT_SAMPLES_MAX: usize = 1 << 22;

/// Per-request latencies of one QD1 run.
#[derive(Default)]
pub(crate) struct LatRecorder {
    ns: Vec<u32>,
}

impl LatRecorder {
    pub(crate) fn record(&mut self, d: Duration) {
        if self.ns.len() < LAT_SAMPLES_MAX {
            self.ns.push(d.as_nanos().min(u32::MAX as u128) as u32);
        }
    }

    /// The (p50, p99) in us, if anything was recorded.
    pub(crate) fn percentiles(mut self) -> (Option<f64>, Option<f64>) {
        if self.ns.is_empty() {
            return (None, None);
        }
        let mut at = |q: f64| {
            let i = ((self.ns.len() - 1) as f64 * q).round() as usize;
            *self.ns.select_nth_unstable(i).1 as f64 / 1e3
        };
        (Some(at(0.50)), Some(at(0.99)))
    }
}

#[derive(Debug, Clone, Copy)]
pub struct DataSpec {
    pub write: bool,
    pub rand: bool,
    pub qd: usize,
    pub bs: usize,
    pub secs: f64,
    pub seed: u64,
}

/// One run of the metadata mix: per phase (create+write+close, open+read+close, unlink).
#[derive(Debug, Clone, Serialize, Default)]
pub struct MetaSample {
    pub secs: [f64; 3],
    pub cpu_s: [f64; 3],
    pub srv_cpu_s: [Option<f64>; 3],
}

pub const META_PHASES: [&str; 3] = ["create+write 4 KiB+close", "open+read 4 KiB+close", "unlink"];

pub trait Backend {
    fn name(&self) -> &'static str;
    /// Run a data test for `s.secs` seconds.
    fn data(&mut self, s: &DataSpec) -> Result<Sample, String>;
    /// The metadata mix over `n` files.
    fn meta(&mut self, n: usize) -> Result<MetaSample, String>;
    /// Read `n` blocks of `bs` sequentially from the start of the file, computing
    /// `compute_us` per block. `depth` 0: synchronous (read, then compute); otherwise
    /// asynchronous, up to `depth` reads in flight ahead of the computation. Returns
    /// the elapsed seconds.
    fn overlap(
        &mut self,
        bs: usize,
        n: usize,
        depth: usize,
        compute_us: f64,
        burner: &Burner,
    ) -> Result<f64, String>;
    /// Mean latency of a zero-byte request, when the backend has one.
    fn null_us(&mut self, _secs: f64) -> Result<Option<f64>, String> {
        Ok(None)
    }
    /// Path counters, for the report.
    fn stats(&self) -> Option<ClientStats> {
        None
    }
}

/// Offsets for a test: random (aligned to the block size) or sequential with wrap-around.
struct Offsets {
    rand: bool,
    rng: Rng,
    next: u64,
    stride: u64,
    nblocks: u64,
    bs: u64,
}

impl Offsets {
    fn new(rand: bool, seed: u64, first: u64, stride: u64, nblocks: u64, bs: u64) -> Offsets {
        Offsets {
            rand,
            rng: Rng::new(seed),
            next: first % nblocks.max(1),
            stride,
            nblocks: nblocks.max(1),
            bs,
        }
    }
    fn next(&mut self) -> u64 {
        let b = if self.rand {
            self.rng.next() % self.nblocks
        } else {
            let b = self.next;
            self.next = (self.next + self.stride) % self.nblocks;
            b
        };
        b * self.bs
    }
}

/// Touch one word per page of a block (the "application" looks at its data).
fn touch(buf: &[u8]) -> u64 {
    let mut s = 0u64;
    let mut i = 0;
    while i < buf.len() {
        s = s.wrapping_add(buf[i] as u64);
        i += 4096;
    }
    s
}

// ------------------------------------------------------------------ local files

/// pread/pwrite on the same data file, from this process (the ideal: no server, no
/// network, one kernel copy). Queue depths above 1 use that many threads.
pub struct Local {
    pub path: PathBuf,
    pub meta_dir: PathBuf,
    pub size: u64,
}

impl Local {
    fn worker(
        f: &std::fs::File,
        s: &DataSpec,
        k: usize,
        nblocks: u64,
        deadline: Instant,
        lat: &mut LatRecorder,
    ) -> std::io::Result<u64> {
        let mut buf = vec![0u8; s.bs];
        util::fill(&mut buf, s.seed);
        let mut offs = Offsets::new(
            s.rand,
            s.seed.wrapping_add(k as u64 * 7919),
            k as u64,
            s.qd.max(1) as u64,
            nblocks,
            s.bs as u64,
        );
        let mut ops = 0u64;
        let every = if s.bs >= 65536 { 1 } else { 8 };
        loop {
            let off = offs.next();
            let t = Instant::now();
            if s.write {
                f.write_all_at(&buf, off)?;
            } else {
                f.read_exact_at(&mut buf, off)?;
            }
            lat.record(t.elapsed());
            ops += 1;
            if ops % every == 0 && Instant::now() >= deadline {
                break;
            }
        }
        std::hint::black_box(&buf);
        Ok(ops)
    }
}

impl Backend for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn data(&mut self, s: &DataSpec) -> Result<Sample, String> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        let nblocks = self.size / s.bs as u64;
        let cpu0 = cpu_self();
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs_f64(s.secs);
        let mut lat = LatRecorder::default();
        let ops = if s.qd <= 1 {
            Self::worker(&f, s, 0, nblocks, deadline, &mut lat).map_err(|e| e.to_string())?
        } else {
            std::thread::scope(|sc| {
                let hs: Vec<_> = (0..s.qd)
                    .map(|k| {
                        let f = &f;
                        sc.spawn(move || {
                            Self::worker(f, s, k, nblocks, deadline, &mut LatRecorder::default())
                        })
                    })
                    .collect();
                let mut total = 0;
                for h in hs {
                    total += h
                        .join()
                        .map_err(|_| "worker panicked".to_string())?
                        .map_err(|e| e.to_string())?;
                }
                Ok::<u64, String>(total)
            })?
        };
        let secs = t0.elapsed().as_secs_f64();
        let cpu_s = cpu_self() - cpu0;
        let (lat_p50_us, lat_p99_us) = lat.percentiles();
        Ok(Sample {
            secs,
            bytes: ops * s.bs as u64,
            ops,
            cpu_s,
            srv_cpu_s: None,
            other_cores: None,
            lat_p50_us,
            lat_p99_us,
        })
    }

    fn meta(&mut self, n: usize) -> Result<MetaSample, String> {
        let dir = &self.meta_dir;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut buf = vec![0u8; 4096];
        util::fill(&mut buf, 3);
        let mut out = MetaSample::default();
        for phase in 0..3 {
            util::heartbeat(&format!("metadata local phase {phase}"));
            let c0 = cpu_self();
            let t0 = Instant::now();
            for i in 0..n {
                let p = dir.join(format!("f{i:06}"));
                let err = |e: std::io::Error| format!("{}: {e}", p.display());
                match phase {
                    0 => {
                        let f = std::fs::OpenOptions::new()
                            .write(true)
                            .create(true)
                            .truncate(true)
                            .open(&p)
                            .map_err(err)?;
                        f.write_all_at(&buf, 0).map_err(err)?;
                    }
                    1 => {
                        let f = std::fs::File::open(&p).map_err(err)?;
                        f.read_exact_at(&mut buf, 0).map_err(err)?;
                    }
                    _ => std::fs::remove_file(&p).map_err(err)?,
                }
            }
            out.secs[phase] = t0.elapsed().as_secs_f64();
            out.cpu_s[phase] = cpu_self() - c0;
        }
        let _ = std::fs::remove_dir(dir);
        Ok(out)
    }

    fn overlap(
        &mut self,
        bs: usize,
        n: usize,
        depth: usize,
        compute_us: f64,
        burner: &Burner,
    ) -> Result<f64, String> {
        let f =
            std::fs::File::open(&self.path).map_err(|e| format!("{}: {e}", self.path.display()))?;
        let fblocks = (self.size / bs as u64).max(1) as usize;
        let at = move |i: usize| ((i % fblocks) * bs) as u64;
        let mut sink = 0u64;
        let t0 = Instant::now();
        if depth == 0 {
            let mut buf = vec![0u8; bs];
            for i in 0..n {
                f.read_exact_at(&mut buf, at(i)).map_err(|e| e.to_string())?;
                sink = sink.wrapping_add(touch(&buf));
                if compute_us > 0.0 {
                    sink = sink.wrapping_add(burner.burn_us(compute_us));
                }
            }
        } else {
            // A read-ahead thread (what an asynchronous local API does underneath),
            // `depth` buffers circulating between it and the application.
            let (free_tx, free_rx) = mpsc::sync_channel::<Vec<u8>>(depth);
            let (full_tx, full_rx) = mpsc::sync_channel::<std::io::Result<Vec<u8>>>(depth);
            for _ in 0..depth {
                free_tx.send(vec![0u8; bs]).unwrap();
            }
            std::thread::scope(|sc| {
                let f = &f;
                sc.spawn(move || {
                    for i in 0..n {
                        let Ok(mut buf) = free_rx.recv() else { return };
                        let r = f.read_exact_at(&mut buf, at(i)).map(|_| buf);
                        if full_tx.send(r).is_err() {
                            return;
                        }
                    }
                });
                for _ in 0..n {
                    let buf = full_rx
                        .recv()
                        .map_err(|_| "read-ahead thread died".to_string())?
                        .map_err(|e| e.to_string())?;
                    sink = sink.wrapping_add(touch(&buf));
                    if compute_us > 0.0 {
                        sink = sink.wrapping_add(burner.burn_us(compute_us));
                    }
                    let _ = free_tx.send(buf);
                }
                Ok::<(), String>(())
            })?;
        }
        std::hint::black_box(sink);
        Ok(t0.elapsed().as_secs_f64())
    }
}

// ------------------------------------------------------------------ DAFS

/// A dafs client session on the harness's dafsd: over TCP (`Provider::Tcp`) or shared
/// memory (`dafs+shm://`). Reconnects after a failed test.
pub struct Dafs {
    pub label: &'static str,
    pub target: String,
    pub provider: Provider,
    pub srv_pid: u32,
    pub size: u64,
    pub file: String,
    c: Option<Client>,
    f: Option<DFile>,
    /// Counters accumulated over sessions that were dropped after an error.
    last_stats: Option<ClientStats>,
    pub reconnects: u32,
}

#[allow(clippy::too_many_arguments)]
fn submit(
    c: &mut Client,
    f: &DFile,
    write: bool,
    off: u64,
    region: RegionId,
    len: usize,
    cg: CgId,
    ud: u64,
) -> Result<(), String> {
    let buf = IoBuf::Region { region, offset: 0, len };
    let r = if write {
        c.submit_write(f, off, buf, cg, ud)
    } else {
        c.submit_read(f, off, buf, cg, ud)
    };
    r.map(|_| ()).map_err(|e| {
        format!("submit_{} at offset {off}: {e}", if write { "write" } else { "read" })
    })
}

fn wait1(c: &mut Client, cg: CgId, bs: usize, what: &str) -> Result<u64, String> {
    let d = c.wait_one(cg, Some(WAIT_TIMEOUT)).map_err(|e| format!("wait_one: {e}"))?.ok_or_else(
        || {
            format!(
                "no completion within {} s ({} in flight)",
                WAIT_TIMEOUT.as_secs(),
                c.outstanding(cg)
            )
        },
    )?;
    let n = d.result.map_err(|e| format!("{what} failed: {e}"))?;
    if n != bs {
        return Err(format!("short {what}: {n} of {bs} bytes"));
    }
    Ok(d.user_data)
}

impl Dafs {
    pub fn new(
        label: &'static str,
        target: String,
        provider: Provider,
        srv_pid: u32,
        size: u64,
        file: &str,
    ) -> Dafs {
        Dafs {
            label,
            target,
            provider,
            srv_pid,
            size,
            file: file.into(),
            c: None,
            f: None,
            last_stats: None,
            reconnects: 0,
        }
    }

    pub fn connect(&mut self) -> Result<(), String> {
        if self.c.is_some() {
            return Ok(());
        }
        let cfg = ClientConfig { provider: self.provider, ..Default::default() };
        let mut c = Client::connect(&self.target, cfg)
            .map_err(|e| format!("connect {}: {e}", self.target))?;
        let f = c
            .open(&self.file, OpenOptions::read_write())
            .map_err(|e| format!("open {}: {e}", self.file))?;
        self.c = Some(c);
        self.f = Some(f);
        Ok(())
    }

    /// Drop the session after an error (a later test reconnects).
    fn reset(&mut self) {
        if let Some(c) = self.c.take() {
            self.last_stats = Some(c.stats());
            self.reconnects += 1;
        }
        self.f = None;
    }

    pub fn client(&mut self) -> Result<&mut Client, String> {
        self.connect()?;
        Ok(self.c.as_mut().unwrap())
    }

    fn guard<T>(&mut self, r: Result<T, String>) -> Result<T, String> {
        if r.is_err() {
            self.reset();
        }
        r
    }

    fn data_inner(&mut self, s: &DataSpec) -> Result<Sample, String> {
        self.connect()?;
        let (pid, size) = (self.srv_pid, self.size);
        let c = self.c.as_mut().unwrap();
        let f = self.f.as_ref().unwrap();
        if s.bs > c.io_bytes_max() {
            return Err(format!(
                "block size {} above the server's max I/O size {}",
                s.bs,
                c.io_bytes_max()
            ));
        }
        let mut regions = Vec::with_capacity(s.qd);
        for _ in 0..s.qd {
            let r = c.alloc_registered(s.bs).map_err(|e| format!("alloc_registered: {e}"))?;
            if s.write {
                util::fill(c.region_mut(r).map_err(|e| e.to_string())?, s.seed);
            }
            regions.push(r);
        }
        let cg = c.create_cg().map_err(|e| format!("create_cg: {e}"))?;
        let mut offs = Offsets::new(s.rand, s.seed, 0, 1, size / s.bs as u64, s.bs as u64);
        let what = if s.write { "write" } else { "read" };
        let srv0 = proc_cpu(pid);
        let cpu0 = cpu_self();
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs_f64(s.secs);
        let mut lat = LatRecorder::default();
        let mut sent = Instant::now();
        for (k, r) in regions.iter().enumerate() {
            submit(c, f, s.write, offs.next(), *r, s.bs, cg, k as u64)?;
        }
        let mut ops = 0u64;
        let mut stopping = false;
        while c.outstanding(cg) > 0 {
            let slot = wait1(c, cg, s.bs, what)?;
            if s.qd == 1 {
                let now = Instant::now();
                lat.record(now - sent);
                sent = now;
            }
            ops += 1;
            if !stopping && Instant::now() >= deadline {
                stopping = true;
            }
            if !stopping {
                submit(c, f, s.write, offs.next(), regions[slot as usize], s.bs, cg, slot)?;
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        let cpu = cpu_self() - cpu0;
        let srv = match (srv0, proc_cpu(pid)) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        c.destroy_cg(cg).map_err(|e| e.to_string())?;
        for r in regions {
            c.unregister(r).map_err(|e| e.to_string())?;
        }
        let (lat_p50_us, lat_p99_us) = lat.percentiles();
        Ok(Sample {
            secs,
            bytes: ops * s.bs as u64,
            ops,
            cpu_s: cpu,
            srv_cpu_s: srv,
            other_cores: None,
            lat_p50_us,
            lat_p99_us,
        })
    }

    fn meta_inner(&mut self, n: usize) -> Result<MetaSample, String> {
        let pid = self.srv_pid;
        let label = self.label;
        let c = self.client()?;
        let dir = format!("meta-{label}");
        match c.mkdir(&dir, 0o755) {
            Ok(_) | Err(dafs_client::Error::Status(dafs_client::dafs_proto::Status::Exist)) => {}
            Err(e) => return Err(format!("mkdir {dir}: {e}")),
        }
        let mut buf = vec![0u8; 4096];
        util::fill(&mut buf, 3);
        let mut rbuf = vec![0u8; 4096];
        let mut out = MetaSample::default();
        for phase in 0..3 {
            util::heartbeat(&format!("metadata {label} phase {phase}"));
            let s0 = proc_cpu(pid);
            let c0 = cpu_self();
            let t0 = Instant::now();
            for i in 0..n {
                let p = format!("{dir}/f{i:06}");
                let err = |op: &str, e: dafs_client::Error| format!("{op} {p}: {e}");
                match phase {
                    0 => {
                        let f = c
                            .open(&p, OpenOptions::read_write().create(true).truncate(true))
                            .map_err(|e| err("open(create)", e))?;
                        let w = c.pwrite(&f, &buf, 0).map_err(|e| err("pwrite", e))?;
                        if w != 4096 {
                            return Err(format!("pwrite {p}: short write {w}"));
                        }
                        c.close(f).map_err(|e| err("close", e))?;
                    }
                    1 => {
                        let f = c.open(&p, OpenOptions::read()).map_err(|e| err("open", e))?;
                        let r = c.pread(&f, &mut rbuf, 0).map_err(|e| err("pread", e))?;
                        if r != 4096 || rbuf != buf {
                            return Err(format!(
                                "pread {p}: got {r} bytes{}",
                                if r == 4096 { " with wrong contents" } else { "" }
                            ));
                        }
                        c.close(f).map_err(|e| err("close", e))?;
                    }
                    _ => c.remove(&p).map_err(|e| err("remove", e))?,
                }
            }
            out.secs[phase] = t0.elapsed().as_secs_f64();
            out.cpu_s[phase] = cpu_self() - c0;
            out.srv_cpu_s[phase] = match (s0, proc_cpu(pid)) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            };
        }
        c.rmdir(&dir).map_err(|e| format!("rmdir {dir}: {e}"))?;
        Ok(out)
    }

    fn overlap_inner(
        &mut self,
        bs: usize,
        n: usize,
        depth: usize,
        compute_us: f64,
        burner: &Burner,
    ) -> Result<f64, String> {
        self.connect()?;
        let fblocks = (self.size / bs as u64).max(1) as usize;
        let at = move |i: usize| ((i % fblocks) * bs) as u64;
        let c = self.c.as_mut().unwrap();
        let f = self.f.as_ref().unwrap();
        let slots = depth.max(1);
        let mut regions = Vec::with_capacity(slots);
        for _ in 0..slots {
            regions.push(c.alloc_registered(bs).map_err(|e| format!("alloc_registered: {e}"))?);
        }
        let cg = c.create_cg().map_err(|e| format!("create_cg: {e}"))?;
        let mut sink = 0u64;
        let t0 = Instant::now();
        if depth == 0 {
            for i in 0..n {
                submit(c, f, false, at(i), regions[0], bs, cg, i as u64)?;
                wait1(c, cg, bs, "read")?;
                sink = sink.wrapping_add(touch(c.region(regions[0]).map_err(|e| e.to_string())?));
                if compute_us > 0.0 {
                    sink = sink.wrapping_add(burner.burn_us(compute_us));
                }
            }
        } else {
            let mut done = vec![false; n];
            for (i, r) in regions.iter().enumerate().take(n) {
                submit(c, f, false, at(i), *r, bs, cg, i as u64)?;
            }
            for i in 0..n {
                while !done[i] {
                    let j = wait1(c, cg, bs, "read")?;
                    done[j as usize] = true;
                }
                let slot = i % depth;
                sink =
                    sink.wrapping_add(touch(c.region(regions[slot]).map_err(|e| e.to_string())?));
                if compute_us > 0.0 {
                    sink = sink.wrapping_add(burner.burn_us(compute_us));
                }
                if i + depth < n {
                    submit(c, f, false, at(i + depth), regions[slot], bs, cg, (i + depth) as u64)?;
                }
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        std::hint::black_box(sink);
        c.destroy_cg(cg).map_err(|e| e.to_string())?;
        for r in regions {
            c.unregister(r).map_err(|e| e.to_string())?;
        }
        Ok(secs)
    }

    fn null_inner(&mut self, secs: f64) -> Result<f64, String> {
        let c = self.client()?;
        for _ in 0..100 {
            c.null().map_err(|e| format!("null: {e}"))?;
        }
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs_f64(secs);
        let mut n = 0u64;
        while Instant::now() < deadline {
            c.null().map_err(|e| format!("null: {e}"))?;
            n += 1;
        }
        Ok(t0.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64)
    }

    /// Negotiated parameters, for the report.
    pub fn describe(&mut self) -> Result<String, String> {
        let c = self.client()?;
        Ok(format!(
            "provider {}, {} slots, inline threshold {} B, max I/O {} B, max message {} B",
            c.provider(),
            c.slots(),
            c.inline_threshold(),
            c.io_bytes_max(),
            c.msg_size_bytes_max()
        ))
    }
}

impl Backend for Dafs {
    fn name(&self) -> &'static str {
        self.label
    }

    fn data(&mut self, s: &DataSpec) -> Result<Sample, String> {
        let r = self.data_inner(s);
        self.guard(r)
    }

    fn meta(&mut self, n: usize) -> Result<MetaSample, String> {
        let r = self.meta_inner(n);
        self.guard(r)
    }

    fn overlap(
        &mut self,
        bs: usize,
        n: usize,
        depth: usize,
        compute_us: f64,
        burner: &Burner,
    ) -> Result<f64, String> {
        let r = self.overlap_inner(bs, n, depth, compute_us, burner);
        self.guard(r)
    }

    fn null_us(&mut self, secs: f64) -> Result<Option<f64>, String> {
        let r = self.null_inner(secs).map(Some);
        self.guard(r)
    }

    fn stats(&self) -> Option<ClientStats> {
        self.c.as_ref().map(|c| c.stats()).or(self.last_stats)
    }
}
