//! The grace period after a restart (docs/protocol.md §9.5).
//!
//! With a state directory, dafsd keeps there (`clients`, written durably: temporary
//! file, fsync, rename, fsync of the directory) the client ids whose sessions hold
//! state — an open or a lock. A client id is added before the first OPEN or LOCK
//! granted to it is answered, and removed when its last such session ends (destroyed or
//! lease expired), so the file names exactly the clients that may lose state in a
//! crash. At start, if the file names any, a grace period of `grace_secs` runs: those
//! clients may reclaim, and every non-reclaim OPEN or LOCK (and REMOVE, RENAME) is
//! answered GRACE. It ends early once each of them sent RECLAIM_COMPLETE or created a
//! session without the RECLAIM flag (it has nothing to reclaim).
//!
//! The sets are bounded by the server's session limit: a client id enters `holders`
//! only through a live session, and `pending` is what the previous boot's `holders`
//! were (at most `CLIENT_RECORDS_MAX` are read back).

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::{info, warn};

const CLIENTS_FILE: &str = "clients";

/// Most client records read back at start: far above any `sessions_max`, so a corrupt
/// or hostile file cannot make the server hold unbounded memory.
const CLIENT_RECORDS_MAX: usize = 1 << 20;

pub struct Grace {
    /// The record file (`None` without a state directory: no grace, ever).
    path: Option<PathBuf>,
    inner: Mutex<Inner>,
    /// When the grace period ends at the latest.
    end: Instant,
    /// Set once the grace period is over (or never began): the fast path.
    over: AtomicBool,
}

#[derive(Default)]
struct Inner {
    /// Client ids of this boot holding state, with how many of their sessions do.
    holders: HashMap<String, u32>,
    /// Client ids the previous boot recorded that may still reclaim.
    pending: BTreeSet<String>,
    /// What the record file holds now.
    written: BTreeSet<String>,
}

impl Grace {
    /// Read the previous boot's records and start the grace period if there are any
    /// and `grace_secs > 0`.
    pub fn start(state_dir: Option<&Path>, grace_secs: u64) -> std::io::Result<Grace> {
        let path = state_dir.map(|d| d.join(CLIENTS_FILE));
        let pending = match &path {
            Some(p) => read_records(p)?,
            None => BTreeSet::new(),
        };
        let over = pending.is_empty() || grace_secs == 0;
        if !over {
            info!(clients = pending.len(), grace_secs, "grace period: clients may reclaim");
        }
        let g = Grace {
            path,
            inner: Mutex::new(Inner { written: pending.clone(), pending, ..Default::default() }),
            end: Instant::now() + Duration::from_secs(grace_secs),
            over: AtomicBool::new(over),
        };
        if over {
            // Nothing to wait for: the records of the previous boot are void now.
            g.rewrite(&mut g.inner.lock().unwrap());
        }
        Ok(g)
    }

    /// Is the grace period running? (Ends it, once, when its time is up.)
    pub fn in_grace(&self) -> bool {
        if self.over.load(Relaxed) {
            return false;
        }
        if Instant::now() >= self.end {
            let mut g = self.inner.lock().unwrap();
            g.pending.clear();
            self.finish(&mut g);
            return false;
        }
        true
    }

    /// Milliseconds left of the grace period (0 outside it).
    pub fn ms_left(&self) -> u32 {
        if !self.in_grace() {
            return 0;
        }
        let left = self.end.saturating_duration_since(Instant::now());
        u32::try_from(left.as_millis()).unwrap_or(u32::MAX).max(1)
    }

    /// May `client` reclaim now: in grace, recorded by the previous boot, not done yet.
    pub fn may_reclaim(&self, client: &str) -> bool {
        self.in_grace() && self.inner.lock().unwrap().pending.contains(client)
    }

    /// `client` has reclaimed all it will (RECLAIM_COMPLETE, or a session created
    /// without RECLAIM): once nobody is left, the grace period ends.
    pub fn client_done(&self, client: &str) {
        if self.over.load(Relaxed) {
            return;
        }
        let mut g = self.inner.lock().unwrap();
        if g.pending.remove(client) && g.pending.is_empty() {
            info!("every client reclaimed: grace period over");
            self.finish(&mut g);
        }
    }

    /// A session of `client` holds state now (first granted OPEN or LOCK): recorded
    /// durably before the grant is answered. An error leaves the client unrecorded
    /// (it could not reclaim after a crash), and is logged.
    pub fn holder_added(&self, client: &str) {
        let mut g = self.inner.lock().unwrap();
        *g.holders.entry(client.to_string()).or_insert(0) += 1;
        self.rewrite(&mut g);
    }

    /// A session that held state ended (destroyed, lease expired).
    pub fn holder_gone(&self, client: &str) {
        let mut g = self.inner.lock().unwrap();
        let Some(n) = g.holders.get_mut(client) else { return };
        *n -= 1;
        if *n == 0 {
            g.holders.remove(client);
            self.rewrite(&mut g);
        }
    }

    fn finish(&self, g: &mut Inner) {
        self.over.store(true, Relaxed);
        self.rewrite(g);
    }

    /// Write the records (holders, and the clients that may still reclaim) if they
    /// changed.
    fn rewrite(&self, g: &mut Inner) {
        let Some(path) = &self.path else { return };
        let want: BTreeSet<String> = g.holders.keys().chain(g.pending.iter()).cloned().collect();
        if want == g.written {
            return;
        }
        match write_records(path, &want) {
            Ok(()) => g.written = want,
            Err(e) => warn!("cannot record clients holding state in {}: {e}", path.display()),
        }
    }
}

/// One client id per line, hex-encoded (ids are any bytes).
fn read_records(path: &Path) -> std::io::Result<BTreeSet<String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(e) => return Err(e),
    };
    let mut out = BTreeSet::new();
    for line in text.lines().filter(|l| !l.is_empty()).take(CLIENT_RECORDS_MAX) {
        let bytes = hex_decode(line).ok_or_else(|| {
            std::io::Error::other(format!("{}: not a client record: {line:?}", path.display()))
        })?;
        out.insert(String::from_utf8_lossy(&bytes).into_owned());
    }
    Ok(out)
}

fn write_records(path: &Path, ids: &BTreeSet<String>) -> std::io::Result<()> {
    let dir = path.parent().expect("the record file is in the state directory");
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    for id in ids {
        writeln!(f, "{}", hex_encode(id.as_bytes()))?;
    }
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

fn hex_encode(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_a_restart_and_grace_ends_when_all_are_done() {
        let d = tempfile::tempdir().unwrap();
        let g = Grace::start(Some(d.path()), 5).unwrap();
        assert!(!g.in_grace(), "nothing recorded: no grace");
        g.holder_added("a\nb");
        g.holder_added("c");
        g.holder_added("c");
        g.holder_gone("c");
        drop(g);
        let g = Grace::start(Some(d.path()), 5).unwrap();
        assert!(g.in_grace());
        assert!(g.ms_left() > 0 && g.ms_left() <= 5000);
        assert!(g.may_reclaim("a\nb") && g.may_reclaim("c") && !g.may_reclaim("x"));
        g.client_done("a\nb");
        assert!(g.in_grace(), "c has not reclaimed yet");
        g.client_done("c");
        assert!(!g.in_grace() && g.ms_left() == 0 && !g.may_reclaim("c"));
        // Nobody holds state in this boot: the next start has no grace.
        drop(g);
        assert!(!Grace::start(Some(d.path()), 5).unwrap().in_grace());
    }

    #[test]
    fn no_state_dir_or_zero_seconds_means_no_grace() {
        let d = tempfile::tempdir().unwrap();
        Grace::start(Some(d.path()), 5).unwrap().holder_added("a");
        assert!(!Grace::start(Some(d.path()), 0).unwrap().in_grace());
        assert!(!Grace::start(None, 5).unwrap().in_grace());
    }
}
