//! The overlap workload: how much I/O time asynchronous reads hide behind computation.

use std::path::Path;
use std::time::Instant;

use crate::backends::Backend;
use crate::util::{self, heartbeat, median, Burner};
use crate::OverlapRow;

#[allow(clippy::too_many_arguments)]
pub(crate) fn overlap_one(
    b: &mut dyn Backend,
    data_path: &Path,
    bs: usize,
    n: usize,
    depth: usize,
    compute_us: Option<f64>,
    burner: &Burner,
    runs: usize,
    min_secs: f64,
) -> Result<OverlapRow, String> {
    let _ = util::warm(data_path);
    // Pure I/O time per block sets the computation (unless given): equal compute and
    // I/O is where hiding matters most, and the ideal async time is then t_compute.
    let n0 = n;
    // One untimed pass (connections, page cache, regions), then the calibration pass.
    b.overlap(bs, n0, 0, 0.0, burner)?;
    let t0 = b.overlap(bs, n0, 0, 0.0, burner)?;
    // Long enough to measure: stretch (wrapping around the file) to about `min_secs` of I/O.
    let n = if t0 < min_secs {
        ((n0 as f64 * min_secs / t0.max(1e-6)).ceil() as usize).min(n0 * 32)
    } else {
        n0
    };
    let cu = compute_us.unwrap_or(t0 * 1e6 / n0 as f64);
    let (mut tio, mut tc, mut ts, mut ta, mut hid) = (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let _ = util::warm(data_path);
        heartbeat(&format!("overlap {} on {}", bs, b.name()));
        let t_io = b.overlap(bs, n, 0, 0.0, burner)?;
        let c0 = Instant::now();
        let mut sink = 0u64;
        for _ in 0..n {
            sink = sink.wrapping_add(burner.burn_us(cu));
        }
        std::hint::black_box(sink);
        let t_c = c0.elapsed().as_secs_f64();
        let t_s = b.overlap(bs, n, 0, cu, burner)?;
        let t_a = b.overlap(bs, n, depth, cu, burner)?;
        tio.push(t_io);
        tc.push(t_c);
        ts.push(t_s);
        ta.push(t_a);
        hid.push((t_s - t_a) / t_io);
    }
    Ok(OverlapRow {
        backend: b.name().into(),
        bs,
        blocks: n,
        depth,
        compute_us: cu,
        t_io: median(&tio),
        t_compute: median(&tc),
        t_sync: median(&ts),
        t_async: median(&ta),
        hidden: median(&hid),
        error: None,
    })
}
