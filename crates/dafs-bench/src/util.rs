//! Small helpers: CPU accounting, medians, sizes, a PRNG, the calibrated busy loop,
//! page-cache warming, the watchdog.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// user+sys CPU seconds of this process (all threads), from getrusage(RUSAGE_SELF).
pub fn cpu_self() -> f64 {
    // SAFETY: getrusage fills the zero-initialised struct we own.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut r);
        r
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(r.ru_utime) + t(r.ru_stime)
}

pub fn clk_tck() -> f64 {
    // SAFETY: plain sysconf query.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime+stime of another process in seconds, from /proc/PID/stat (clock ticks).
pub fn proc_cpu(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    let ut: f64 = f.get(11)?.parse().ok()?;
    let st: f64 = f.get(12)?.parse().ok()?;
    Some((ut + st) / clk_tck())
}

/// PID of the first process whose comm is `name`.
pub fn find_process(name: &str) -> Option<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter().find(|p| {
        std::fs::read_to_string(format!("/proc/{p}/comm"))
            .map(|c| c.trim() == name)
            .unwrap_or(false)
    })
}

pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn median_opt(v: &[Option<f64>]) -> Option<f64> {
    let x: Vec<f64> = v.iter().filter_map(|x| *x).collect();
    if x.is_empty() {
        None
    } else {
        Some(median(&x))
    }
}

/// xorshift64
pub struct Rng(pub u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// "64m", "1g", "4k", "4KiB", "1048576" -> bytes (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix("ib").or_else(|| t.strip_suffix('b')).unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('t') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad size {s:?} (examples: 4096, 64k, 256m, 1g)"))?;
    if v.is_nan() || v < 0.0 {
        return Err(format!("bad size {s:?}"));
    }
    Ok((v * mult as f64).round() as u64)
}

/// 4096 -> "4 KiB", 1048576 -> "1 MiB", 1536 -> "1536 B".
pub fn fmt_size(b: u64) -> String {
    if b >= 1 << 30 && b % (1 << 30) == 0 {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b % (1 << 10) == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// A busy loop calibrated to microseconds. It counts iterations rather than watching
/// the clock, so when the CPU is taken away the "computation" really takes longer.
#[derive(Debug, Clone, Copy)]
pub struct Burner {
    pub iters_per_us: f64,
}

#[inline(never)]
pub fn burn_iters(iters: u64) -> u64 {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in 0..iters {
        x = std::hint::black_box(x).wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

impl Burner {
    pub fn calibrate() -> Burner {
        let n = 2_000_000u64;
        burn_iters(n / 4);
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            burn_iters(n);
            best = best.min(t.elapsed().as_secs_f64());
        }
        Burner { iters_per_us: n as f64 / (best * 1e6) }
    }
    pub fn burn_us(&self, us: f64) -> u64 {
        burn_iters((us * self.iters_per_us) as u64)
    }
}

/// Read a file once (untimed) so it is in the page cache.
pub fn warm(path: &Path) -> std::io::Result<()> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf)? > 0 {}
    Ok(())
}

/// Fill a buffer with a deterministic, non-zero pattern.
pub fn fill(buf: &mut [u8], seed: u64) {
    let mut r = Rng::new(seed + 1);
    for c in buf.chunks_mut(8) {
        let v = r.next().to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
}

/// "2025-01-31 12:34:56 UTC" from the system clock (no time-zone database needed).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // civil_from_days (H. Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

// ------------------------------------------------------------------ watchdog

static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
static HEARTBEAT_MS: AtomicU64 = AtomicU64::new(0);
static CURRENT: Mutex<String> = Mutex::new(String::new());
/// Child processes to kill if the watchdog fires (it exits without running destructors).
pub static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn now_ms() -> u64 {
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Say what is being measured now, and that the harness is making progress.
pub fn heartbeat(what: &str) {
    HEARTBEAT_MS.store(now_ms(), Ordering::Relaxed);
    if let Ok(mut c) = CURRENT.lock() {
        c.clear();
        c.push_str(what);
    }
}

static WATCHDOG_ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static WATCHDOG_LIMIT_MS: AtomicU64 = AtomicU64::new(0);

/// The run is over: the watchdog thread ends.
pub fn stop_watchdog() {
    WATCHDOG_ARMED.store(false, Ordering::SeqCst);
}

/// Abort the run (killing our dafsd children) when no heartbeat came for `limit`:
/// a hang in the data path must not hang the harness.
pub fn start_watchdog(limit: Duration) {
    heartbeat("start");
    WATCHDOG_LIMIT_MS.store(limit.as_millis() as u64, Ordering::Relaxed);
    if WATCHDOG_ARMED.swap(true, Ordering::SeqCst) {
        return; // already running (several runs in one process)
    }
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(500));
        if !WATCHDOG_ARMED.load(Ordering::SeqCst) {
            return;
        }
        let limit = Duration::from_millis(WATCHDOG_LIMIT_MS.load(Ordering::Relaxed));
        let idle = now_ms().saturating_sub(HEARTBEAT_MS.load(Ordering::Relaxed));
        if idle > limit.as_millis() as u64 {
            let what = CURRENT.lock().map(|c| c.clone()).unwrap_or_default();
            eprintln!("dafs bench: no progress for {:.0} s while running {what:?}: the data path looks hung; aborting", idle as f64 / 1e3);
            if let Ok(kids) = CHILDREN.lock() {
                for &pid in kids.iter() {
                    // SAFETY: signalling processes this harness started.
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                }
            }
            std::process::exit(4);
        }
    });
}

/// Compute overlap summary helpers.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        Some(a / b)
    } else {
        None
    }
}

/// Busy CPU seconds of the whole machine so far (all CPUs), from /proc/stat.
pub fn machine_busy() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let l = s.lines().next()?;
    let v: Vec<f64> = l.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user)
    if v.len() < 8 {
        return None;
    }
    Some((v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / clk_tck())
}
