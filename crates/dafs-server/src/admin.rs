//! Administration and observability: the admin socket behind `dafs admin`, and the
//! Prometheus text endpoint.
//!
//! The admin socket is a unix socket created owner-only (0600) and additionally checks
//! the peer's uid (SO_PEERCRED: root or dafsd's own user). One command per connection,
//! one line in, one JSON document out:
//!
//! ```text
//! sessions                 -> [{"id":..,"client":..,"state":"bound"|"parked",..}, ..]
//! stats                    -> {"counters":{..},"sessions_live":..,"connections_live":..,"grace_ms_left":..}
//! fence CLIENT_ID          -> {"ok":true,"sessions":N}   (CLIENT_ID may end in '*')
//! unfence CLIENT_ID        -> {"ok":true|false}
//! fenced                   -> ["pattern", ..]
//! cluster                  -> {"node":..,"epoch":..,"members":[..],"counters":{..}}
//! slots SESSION_ID N       -> {"ok":true,"target_highest":N-1}
//! kill SESSION_ID          -> {"ok":true}
//! ```
//!
//! Both loops run on their own thread and serve one request at a time with short
//! timeouts and bounded request sizes: neither can be used to stall the data path.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tracing::{info, warn};

use crate::{conn, Shared};

/// Largest admin command or HTTP request head read.
const REQUEST_BYTES_MAX: u64 = 8 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// The admin and metrics listeners are polled (non-blocking accept) at this interval:
/// an idle server costs next to nothing, a command waits at most this long, and
/// shutdown is noticed within it.
const ACCEPT_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Back-off after a failed accept (e.g. out of descriptors), so a persistent failure
/// does not spin or flood the log.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(200);

/// Bind the admin socket at `path`: only in a directory other users cannot write (they
/// could replace the socket), never following or removing what is not our own stale
/// socket (the same rules as the shared-memory socket).
pub fn bind_admin_socket(path: &Path) -> std::io::Result<UnixListener> {
    dafs_transport::shm::check_socket_dir(path)?;
    dafs_transport::shm::clear_stale_socket(path)?;
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

pub fn admin_loop(sh: Arc<Shared>, l: UnixListener, path: PathBuf) {
    l.set_nonblocking(true).ok();
    while !sh.shutdown.load(Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                if let Err(e) = serve_admin(&sh, s) {
                    warn!("admin request failed: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(ACCEPT_POLL_INTERVAL)
            }
            Err(e) => {
                warn!("admin accept failed: {e}");
                std::thread::sleep(ACCEPT_ERROR_BACKOFF);
            }
        }
    }
    let _ = std::fs::remove_file(path);
}

fn serve_admin(sh: &Shared, s: UnixStream) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let cred = rustix::net::sockopt::get_socket_peercred(&s).map_err(std::io::Error::from)?;
    let me = rustix::process::geteuid();
    if !(cred.uid.is_root() || cred.uid == me) {
        warn!(uid = cred.uid.as_raw(), "admin request from a foreign user refused");
        return (&s).write_all(b"{\"error\":\"permission denied\"}\n");
    }
    let mut line = String::new();
    BufReader::new((&s).take(REQUEST_BYTES_MAX)).read_line(&mut line)?;
    let out = command(sh, line.trim());
    let mut w = &s;
    w.write_all(serde_json::to_string_pretty(&out).unwrap_or_default().as_bytes())?;
    w.write_all(b"\n")
}

/// Run one admin command; the answer is a JSON value (with "error" on failure).
pub fn command(sh: &Shared, line: &str) -> Value {
    let words: Vec<&str> = line.split_whitespace().collect();
    let err = |m: &str| json!({ "error": m });
    match words.as_slice() {
        ["sessions"] => sessions_json(sh),
        ["stats"] => stats_json(sh),
        ["cluster"] => match &sh.cfg.cluster {
            Some(node) => node.admin_json(),
            None => err("this server is not part of a cluster (dafsd --cluster)"),
        },
        ["fence", pattern] => {
            let n = fence(sh, pattern);
            json!({ "ok": true, "sessions": n })
        }
        ["unfence", pattern] => {
            let ok = sh.sessions.unfence(pattern);
            info!(client = pattern, existed = ok, "client unfenced");
            json!({ "ok": ok })
        }
        ["fenced"] => json!(sh.sessions.fenced_list()),
        ["slots", id, n] => {
            let (Some(id), Ok(n)) = (parse_id(id), n.parse::<u32>()) else { return err("usage: slots SESSION_ID N") };
            if n == 0 {
                return err("N must be at least 1");
            }
            match sh.sessions.set_target(id, n - 1) {
                Some(t) => json!({ "ok": true, "target_highest": t }),
                None => err("no such session"),
            }
        }
        ["kill", id] => {
            let Some(id) = parse_id(id) else { return err("usage: kill SESSION_ID") };
            if !sh.sessions.list().iter().any(|(i, _)| i.id == id) {
                return err("no such session");
            }
            if let Some(s) = sh.sessions.kill(id) {
                conn::release_session(sh, *s, "session killed by the administrator");
            }
            sh.wake_workers();
            json!({ "ok": true })
        }
        _ => err("unknown command (sessions | stats | fence ID | unfence ID | fenced | slots SESSION N | kill SESSION)"),
    }
}

/// Session ids are printed in hex (as in the logs); decimal is accepted too.
fn parse_id(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok().or_else(|| u64::from_str_radix(s, 16).ok()),
    }
}

/// Fence `pattern` (see [`crate::sessions::SessionTable::fence`]); returns the number
/// of sessions ended.
pub fn fence(sh: &Shared, pattern: &str) -> usize {
    let (parked, bound) = sh.sessions.fence(pattern);
    let n = parked.len() + bound;
    for (s, _) in parked {
        conn::release_session(sh, *s, "session released: client fenced");
    }
    sh.wake_workers();
    info!(client = pattern, sessions = n, "client fenced");
    n
}

fn sessions_json(sh: &Shared) -> Value {
    let now = Instant::now();
    let list: Vec<Value> = sh
        .sessions
        .list()
        .into_iter()
        .map(|(i, lease_end)| {
            json!({
                "id": format!("{:016x}", i.id),
                "client": i.client_id,
                "state": if lease_end.is_some() { "parked" } else { "bound" },
                "lease_left_secs": lease_end.map(|d| d.saturating_duration_since(now).as_secs()),
                "peer": *i.peer.lock().unwrap(),
                "slots": i.slots_granted,
                "target_highest": i.target_highest.load(Relaxed),
                "slots_in_use": i.slots_busy.load(Relaxed),
                "open_files": i.opens.load(Relaxed),
                "requests": i.requests.load(Relaxed),
                "binds": i.binds.load(Relaxed),
                "reply_cache_bytes": i.cache_bytes.load(Relaxed),
                "age_secs": i.created.elapsed().map(|d| d.as_secs()).unwrap_or(0),
            })
        })
        .collect();
    Value::Array(list)
}

fn stats_json(sh: &Shared) -> Value {
    let snap = sh.stats.snapshot();
    let counters: serde_json::Map<String, Value> =
        snap.fields().into_iter().map(|(n, _, v)| (n.to_string(), json!(v))).collect();
    json!({
        "counters": counters,
        "sessions_live": sh.sessions_live.get(),
        "connections_live": sh.connections_live.get(),
        "connections_unauth": sh.admission.unauth.get(),
        "memory_bytes_used": sh.memory.used(),
        "handles_cached": sh.handles.len(),
        "open_files_live": sh.open_files_live.get(),
        "grace_ms_left": sh.grace.ms_left(),
        "fd_budget": {
            "nofile": sh.fd_budget.nofile,
            "reserved_fds": sh.fd_budget.reserved_fds,
            "handles_max": sh.fd_budget.handles_max,
            "open_files_total_max": sh.fd_budget.open_files_total_max,
            "open_files_per_session_max": sh.fd_budget.open_files_per_session_max,
        },
        "fenced": sh.sessions.fenced_list(),
    })
}

/// The Prometheus text exposition of every counter and gauge.
pub fn metrics_text(sh: &Shared) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(4096);
    for (name, help, v) in sh.stats.snapshot().fields() {
        let _ = writeln!(out, "# HELP dafs_{name}_total {help}\n# TYPE dafs_{name}_total counter\ndafs_{name}_total {v}");
    }
    let gauges = [
        (
            "sessions_live",
            "Sessions holding state (bound or parked).",
            sh.sessions_live.get() as u64,
        ),
        ("connections_live", "Connections open now.", sh.connections_live.get() as u64),
        (
            "connections_unauth",
            "Connections whose session has not authenticated yet.",
            sh.admission.unauth.get() as u64,
        ),
        (
            "memory_bytes_used",
            "Bytes of queued output and pulls in flight, all connections.",
            sh.memory.used() as u64,
        ),
        (
            "sessions_parked",
            "Sessions waiting for their client to reconnect.",
            sh.sessions.list().iter().filter(|(_, p)| p.is_some()).count() as u64,
        ),
        ("fenced_clients", "Fenced client id patterns.", sh.sessions.fenced_list().len() as u64),
        (
            "handles_cached",
            "Descriptors in the handle cache (at most handles_max).",
            sh.handles.len() as u64,
        ),
        (
            "open_files_live",
            "Files open by clients, all sessions (at most open_files_total_max).",
            sh.open_files_live.get() as u64,
        ),
    ];
    for (name, help, v) in gauges {
        let _ =
            writeln!(out, "# HELP dafs_{name} {help}\n# TYPE dafs_{name} gauge\ndafs_{name} {v}");
    }
    out
}

pub fn metrics_loop(sh: Arc<Shared>, l: std::net::TcpListener) {
    l.set_nonblocking(true).ok();
    while !sh.shutdown.load(Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                let _ = serve_metrics(&sh, s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(ACCEPT_POLL_INTERVAL)
            }
            Err(_) => std::thread::sleep(ACCEPT_ERROR_BACKOFF),
        }
    }
}

fn serve_metrics(sh: &Shared, s: std::net::TcpStream) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut line = String::new();
    let mut r = BufReader::new((&s).take(REQUEST_BYTES_MAX));
    r.read_line(&mut line)?;
    // Drain the rest of the request head (bounded by `take`), up to the empty line
    // that ends it ("\r\n", or "\n" alone).
    let mut h = String::new();
    while r.read_line(&mut h)? > "\r\n".len() {
        h.clear();
    }
    let mut w = &s;
    let path = line.split_whitespace().nth(1).unwrap_or("");
    if line.starts_with("GET ") && (path == "/metrics" || path.starts_with("/metrics?")) {
        let body = metrics_text(sh);
        write!(w, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
    } else {
        let body = "only GET /metrics is served here\n";
        write!(w, "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
    }
}
