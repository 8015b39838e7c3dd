//! Rate-limited warnings per peer: malformed or hostile traffic must not turn into an
//! unbounded stream of log lines (disk, and the operator's attention). Each source
//! address has a token bucket; a warning beyond it is counted
//! (`warnings_suppressed`) instead of written, and the next warning written for that
//! peer is preceded by one line "N similar warnings suppressed".

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Peers tracked at once. Beyond it, buckets idle long enough to be full again are
/// dropped (they would allow a full burst anyway); if none is, all further peers share
/// one bucket — the log stays bounded either way.
pub const WARN_PEERS_MAX: usize = 4096;

struct Bucket {
    tokens: f64,
    at: Instant,
    suppressed: u64,
}

pub struct WarnLimiter {
    buckets: Mutex<HashMap<String, Bucket>>,
    /// Warnings a peer may cause in a burst (`peer_warn_burst`).
    burst: f64,
    /// Warnings per second a peer may cause after its burst (`peer_warn_per_min` / 60).
    per_sec: f64,
}

/// The key of a peer: its address without the port (a new connection gets a new port),
/// or the whole peer string for peers without an address.
fn peer_key(peer: &str) -> String {
    match crate::admission::peer_ip(peer) {
        Some(ip) => ip.to_string(),
        None => peer.to_string(),
    }
}

impl WarnLimiter {
    pub fn new(burst: u32, per_min: u32) -> Self {
        assert!(burst >= 1, "a burst of at least one warning (validated)");
        WarnLimiter {
            buckets: Mutex::new(HashMap::new()),
            burst: burst.into(),
            per_sec: f64::from(per_min) / 60.0,
        }
    }

    /// May a warning about `peer` be written now? `Some(n)`: yes, after a line saying `n`
    /// warnings were suppressed since the last one written (if `n > 0`); `None`: no (it
    /// was counted as suppressed).
    pub fn admit(&self, peer: &str, now: Instant) -> Option<u64> {
        let mut m = self.buckets.lock().unwrap();
        let mut key = peer_key(peer);
        if !m.contains_key(&key) && m.len() >= WARN_PEERS_MAX {
            m.retain(|_, b| b.suppressed > 0 || self.refill(b, now) < self.burst);
            if m.len() >= WARN_PEERS_MAX {
                key = "*".into();
            }
        }
        let b = m.entry(key).or_insert(Bucket { tokens: self.burst, at: now, suppressed: 0 });
        b.tokens = self.refill(b, now);
        b.at = now;
        if b.tokens < 1.0 {
            b.suppressed += 1;
            return None;
        }
        b.tokens -= 1.0;
        Some(std::mem::take(&mut b.suppressed))
    }

    fn refill(&self, b: &Bucket, now: Instant) -> f64 {
        let secs = now.saturating_duration_since(b.at).as_secs_f64();
        (b.tokens + secs * self.per_sec).min(self.burst)
    }
}

/// `tracing::warn!` about `$peer`, rate-limited per peer by `$sh.warn_limiter`:
/// `peer_warn!(sh, peer_string, field = value, "message")`.
macro_rules! peer_warn {
    ($sh:expr, $peer:expr, $($arg:tt)+) => {{
        let peer: &str = &$peer;
        match $sh.warn_limiter.admit(peer, std::time::Instant::now()) {
            Some(suppressed) => {
                if suppressed > 0 {
                    tracing::warn!(peer, suppressed, "{suppressed} similar warnings suppressed");
                }
                tracing::warn!(peer, $($arg)+);
            }
            None => {
                $sh.stats.warnings_suppressed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const BURST: u32 = 20;

    #[test]
    fn burst_then_rate_per_address_and_summary() {
        let l = WarnLimiter::new(BURST, 60);
        let t0 = Instant::now();
        for i in 0..BURST {
            assert_eq!(l.admit(&format!("127.0.0.2:{i}"), t0), Some(0), "the burst passes");
        }
        assert_eq!(l.admit("127.0.0.2:99", t0), None, "any port of the same address");
        assert_eq!(l.admit("127.0.0.2:99", t0), None);
        assert_eq!(l.admit("127.0.0.3:1", t0), Some(0), "another address has its own bucket");
        let later = t0 + Duration::from_millis(1100);
        assert_eq!(l.admit("127.0.0.2:5", later), Some(2), "one token back, with the summary");
        assert_eq!(l.admit("127.0.0.2:5", later), None);
    }

    #[test]
    fn peers_beyond_the_table_share_one_bucket() {
        let l = WarnLimiter::new(BURST, 60);
        let t0 = Instant::now();
        for i in 0..WARN_PEERS_MAX {
            let peer = format!("10.{}.{}.{}:1", i >> 16, (i >> 8) & 255, i & 255);
            for _ in 0..BURST {
                l.admit(&peer, t0);
            }
            assert_eq!(l.admit(&peer, t0), None);
        }
        let passed = (0..100).filter(|i| l.admit(&format!("11.0.0.{i}:1"), t0).is_some()).count();
        assert_eq!(passed, BURST as usize, "new peers share one bucket when full");
    }
}
