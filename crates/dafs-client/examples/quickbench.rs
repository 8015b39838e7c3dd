//! Quick measurement of the TCP data path against a running dafsd, next to local pread
//! of the same file (the full side-by-side harness is `dafs bench`, planned).
//!
//! ```text
//! cargo run --release -p dafs-client --example quickbench -- 127.0.0.1:7420 EXPORT_DIR
//! ```
//! Writes a 256 MiB file `quickbench.dat` through dafs, then measures: NULL round trip,
//! 4 KiB random reads at queue depth 1 (inline), 1 MiB sequential reads with a
//! registered buffer (direct) at QD1 and QD4, and local pread of the same file.
//! Reports the median of 3 runs and client CPU seconds per GB (getrusage).

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use dafs_client::{Client, ClientConfig, IoBuf, OpenOptions};

const FILE_SIZE: u64 = 256 << 20;
const RUNS: usize = 3;

fn cpu_secs() -> f64 {
    // SAFETY: getrusage fills the zero-initialised struct we own.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut r);
        r
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(r.ru_utime) + t(r.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: quickbench ADDR EXPORT_DIR [tcp|auto]");
        std::process::exit(2);
    }
    let (addr, export) = (&args[1], std::path::PathBuf::from(&args[2]));
    let provider = if args.get(3).map(String::as_str) == Some("tcp") {
        dafs_client::Provider::Tcp
    } else {
        dafs_client::Provider::Auto
    };
    let mut c = Client::connect(addr, ClientConfig { provider, ..ClientConfig::default() })?;
    println!(
        "provider {} | slots {} | inline threshold {} B | max I/O {} B",
        c.provider(),
        c.slots(),
        c.inline_threshold(),
        c.io_bytes_max()
    );

    // Data set.
    let f = c.open("quickbench.dat", OpenOptions::read_write().create(true).truncate(true))?;
    let region = c.alloc_registered(4 << 20)?;
    for (i, b) in c.region_mut(region)?.iter_mut().enumerate() {
        *b = (i * 31 % 251) as u8;
    }
    let cg = c.create_cg()?;
    let mut off = 0;
    while off < FILE_SIZE {
        c.submit_write(&f, off, IoBuf::Region { region, offset: 0, len: 4 << 20 }, cg, 0)?;
        c.wait_all(cg)?.into_iter().try_for_each(|d| d.result.map(|_| ()))?;
        off += 4 << 20;
    }
    let local = std::fs::File::open(export.join("quickbench.dat"))?;
    let mut warm = vec![0u8; 1 << 20];
    for i in 0..(FILE_SIZE >> 20) {
        local.read_at(&mut warm, i << 20)?;
    }

    // NULL round trip.
    let null_us = median(
        (0..RUNS)
            .map(|_| {
                let n = 20_000;
                let t = Instant::now();
                for _ in 0..n {
                    c.null().unwrap();
                }
                t.elapsed().as_secs_f64() * 1e6 / n as f64
            })
            .collect(),
    );

    // 4 KiB random reads, QD1.
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let mut buf4k = vec![0u8; 4096];
    let blocks = FILE_SIZE / 4096;
    let mut rr = |dafs: bool| -> (f64, f64) {
        let n = 20_000;
        let cpu0 = cpu_secs();
        let t = Instant::now();
        for _ in 0..n {
            let o = (rng.next() % blocks) * 4096;
            if dafs {
                c.pread(&f, &mut buf4k, o).unwrap();
            } else {
                local.read_at(&mut buf4k, o).unwrap();
            }
        }
        let el = t.elapsed().as_secs_f64();
        (el * 1e6 / n as f64, (cpu_secs() - cpu0) / (n as f64 * 4096.0 / 1e9))
    };
    let d4: Vec<(f64, f64)> = (0..RUNS).map(|_| rr(true)).collect();
    let l4: Vec<(f64, f64)> = (0..RUNS).map(|_| rr(false)).collect();

    // 1 MiB sequential reads into a registered buffer, QD1 and QD4.
    let big = c.alloc_registered(4 << 20)?;
    let mut seq = |qd: usize| -> (f64, f64) {
        let cpu0 = cpu_secs();
        let t = Instant::now();
        let mut off = 0u64;
        while off < FILE_SIZE {
            for k in 0..qd {
                c.submit_read(
                    &f,
                    off + (k as u64) * (1 << 20),
                    IoBuf::Region { region: big, offset: k << 20, len: 1 << 20 },
                    cg,
                    0,
                )
                .unwrap();
            }
            for d in c.wait_all(cg).unwrap() {
                d.result.unwrap();
            }
            off += (qd as u64) << 20;
        }
        let el = t.elapsed().as_secs_f64();
        (FILE_SIZE as f64 / el / 1e9, (cpu_secs() - cpu0) / (FILE_SIZE as f64 / 1e9))
    };
    let s1: Vec<(f64, f64)> = (0..RUNS).map(|_| seq(1)).collect();
    let s4: Vec<(f64, f64)> = (0..RUNS).map(|_| seq(4)).collect();
    let mut lbuf = vec![0u8; 1 << 20];
    let ls: Vec<(f64, f64)> = (0..RUNS)
        .map(|_| {
            let cpu0 = cpu_secs();
            let t = Instant::now();
            for i in 0..(FILE_SIZE >> 20) {
                local.read_at(&mut lbuf, i << 20).unwrap();
            }
            let el = t.elapsed().as_secs_f64();
            (FILE_SIZE as f64 / el / 1e9, (cpu_secs() - cpu0) / (FILE_SIZE as f64 / 1e9))
        })
        .collect();

    let m = |v: &Vec<(f64, f64)>, i: usize| {
        median(v.iter().map(|x| if i == 0 { x.0 } else { x.1 }).collect())
    };
    println!();
    println!("| workload (median of {RUNS}) | local pread | dafs | ratio |");
    println!("|---|---|---|---|");
    println!("| NULL round trip, us | - | {:.1} | - |", null_us);
    println!(
        "| 4 KiB random read QD1, mean latency us | {:.2} | {:.1} | {:.1}x |",
        m(&l4, 0),
        m(&d4, 0),
        m(&d4, 0) / m(&l4, 0)
    );
    println!(
        "| 4 KiB random read QD1, client CPU s/GB | {:.2} | {:.2} | {:.1}x |",
        m(&l4, 1),
        m(&d4, 1),
        m(&d4, 1) / m(&l4, 1)
    );
    println!(
        "| 1 MiB sequential read QD1, GB/s | {:.2} | {:.2} | {:.2}x |",
        m(&ls, 0),
        m(&s1, 0),
        m(&s1, 0) / m(&ls, 0)
    );
    println!(
        "| 1 MiB sequential read QD4, GB/s | {:.2} | {:.2} | {:.2}x |",
        m(&ls, 0),
        m(&s4, 0),
        m(&s4, 0) / m(&ls, 0)
    );
    println!(
        "| 1 MiB sequential read QD1, client CPU s/GB | {:.3} | {:.3} | {:.1}x |",
        m(&ls, 1),
        m(&s1, 1),
        m(&s1, 1) / m(&ls, 1)
    );
    println!(
        "| 1 MiB sequential read QD4, client CPU s/GB | {:.3} | {:.3} | {:.1}x |",
        m(&ls, 1),
        m(&s4, 1),
        m(&s4, 1) / m(&ls, 1)
    );
    let st = c.stats();
    println!();
    println!("client stats: requests {} inline_reads {} direct_reads {} off_direct_path {} waits spun/slept {}/{}", st.requests, st.inline_reads, st.direct_reads, st.off_direct_path, st.transport.waits_spun, st.transport.waits_slept);
    c.close(f)?;
    c.remove("quickbench.dat")?;
    let _ = Duration::ZERO;
    Ok(())
}
