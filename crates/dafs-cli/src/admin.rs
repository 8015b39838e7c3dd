//! `dafs admin`: talk to a running dafsd's admin socket (see dafs-server's `admin.rs`
//! for the line protocol). Exit codes: 0 ok, 1 the server refused, 2 usage, 3 cannot
//! reach the socket.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct AdminArgs {
    /// The server's admin socket (dafsd prints it at start). Default: the only live
    /// dafsd-*.admin.sock in dafsd's runtime directories ($XDG_RUNTIME_DIR/dafsd,
    /// /run/dafsd as root, $TMPDIR/dafsd-UID).
    #[arg(long, env = "DAFS_ADMIN_SOCKET", value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Print the server's JSON answer as is.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    cmd: AdminCmd,
}

#[derive(clap::Subcommand, Debug)]
enum AdminCmd {
    /// List sessions: client, state (bound / parked with lease left), slots, open files.
    Sessions,
    /// Counters (replays, reconnects, fenced requests, limit refusals, ...) and gauges.
    Stats,
    /// Cut a client off: its sessions end and it cannot create or re-bind sessions.
    /// CLIENT_ID may end in '*' to match a prefix.
    Fence { client_id: String },
    /// Lift a fence.
    Unfence { client_id: String },
    /// List fenced client ids.
    Fenced,
    /// Set how many slots a session may use (server-directed flow control).
    Slots { session: String, slots: u32 },
    /// End one session now (its open files and locks are released).
    Kill { session: String },
    /// A federated node's view of its cluster: members, epoch, and this node's request
    /// counters (names it manages, holds, refused with WRONG_NODE).
    Cluster,
}

fn find_socket() -> Result<PathBuf, (i32, String)> {
    // The first directory holding a live one, in dafsd's order of default runtime
    // directories (the user's own first), then the places of older servers.
    let legacy = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).into_iter();
    let dirs = dafs_transport::shm::runtime_dir_candidates()
        .into_iter()
        .chain(legacy)
        .chain([PathBuf::from("/tmp")]);
    let mut found = Vec::new();
    for d in dirs {
        found = live_admin_sockets(&[d]);
        if !found.is_empty() {
            break;
        }
    }
    match found.len() {
        1 => Ok(found.pop().unwrap()),
        0 => Err((3, "no running dafsd admin socket found; pass --socket PATH".into())),
        _ => Err((
            2,
            format!(
                "several dafsd admin sockets found ({}); pass --socket PATH",
                found.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// The `dafsd-*.admin.sock` in `dirs` that a server answers on.
fn live_admin_sockets(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(d) else { continue };
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("dafsd-")
                && n.ends_with(".admin.sock")
                && UnixStream::connect(e.path()).is_ok()
            {
                found.push(e.path());
            }
        }
    }
    found
}

pub fn request(socket: &PathBuf, line: &str) -> Result<Value, (i32, String)> {
    let mut s = UnixStream::connect(socket)
        .map_err(|e| (3, format!("cannot connect to {}: {e}", socket.display())))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| (3, format!("{}: {e}", socket.display())))?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| (3, format!("{}: {e}", socket.display())))?;
    serde_json::from_str(&out).map_err(|e| (3, format!("bad answer from the server: {e}")))
}

pub fn run(a: &AdminArgs) -> Result<(), (i32, String)> {
    let socket = match &a.socket {
        Some(p) => p.clone(),
        None => find_socket()?,
    };
    let line = match &a.cmd {
        AdminCmd::Sessions => "sessions".to_string(),
        AdminCmd::Stats => "stats".to_string(),
        AdminCmd::Fence { client_id } => format!("fence {client_id}"),
        AdminCmd::Unfence { client_id } => format!("unfence {client_id}"),
        AdminCmd::Fenced => "fenced".to_string(),
        AdminCmd::Slots { session, slots } => format!("slots {session} {slots}"),
        AdminCmd::Kill { session } => format!("kill {session}"),
        AdminCmd::Cluster => "cluster".to_string(),
    };
    if line.split_whitespace().count() != line.split(' ').count() || line.contains('\n') {
        return Err((2, "arguments must not contain spaces or newlines".into()));
    }
    let v = request(&socket, &line)?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err((1, e.to_string()));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    match &a.cmd {
        AdminCmd::Sessions => {
            println!(
                "{:<16}  {:<24}  {:<14}  {:>9}  {:>5}  {:>8}  {:>5}  peer",
                "session", "client", "state", "slots", "busy", "requests", "opens"
            );
            for s in v.as_array().into_iter().flatten() {
                let state = match s["state"].as_str() {
                    Some("parked") => {
                        format!("parked {}s", s["lease_left_secs"].as_u64().unwrap_or(0))
                    }
                    Some(x) => x.to_string(),
                    None => "?".into(),
                };
                println!(
                    "{:<16}  {:<24}  {:<14}  {:>4}/{:<4}  {:>5}  {:>8}  {:>5}  {}",
                    s["id"].as_str().unwrap_or("?"),
                    s["client"].as_str().unwrap_or("?"),
                    state,
                    s["target_highest"].as_u64().unwrap_or(0) + 1,
                    s["slots"].as_u64().unwrap_or(0),
                    s["slots_in_use"].as_u64().unwrap_or(0),
                    s["requests"].as_u64().unwrap_or(0),
                    s["open_files"].as_u64().unwrap_or(0),
                    s["peer"].as_str().unwrap_or(""),
                );
            }
        }
        AdminCmd::Stats => {
            if let Some(c) = v["counters"].as_object() {
                for (k, val) in c {
                    println!("{k:<24} {val}");
                }
            }
            // Round-robin placement: names sent on to their home, and the block cache.
            if let Some(c) = v["forwarding"].as_object() {
                for (k, val) in c {
                    println!("{:<24} {val}", format!("forwarding.{k}"));
                }
            }
            println!("{:<24} {}", "sessions_live", v["sessions_live"]);
            println!("{:<24} {}", "connections_live", v["connections_live"]);
            println!("{:<24} {}", "connections_unauth", v["connections_unauth"]);
            println!("{:<24} {}", "memory_bytes_used", v["memory_bytes_used"]);
            println!("{:<24} {}", "handles_cached", v["handles_cached"]);
            println!("{:<24} {}", "open_files_live", v["open_files_live"]);
            println!("{:<24} {}", "grace_ms_left", v["grace_ms_left"]);
            if let Some(b) = v["fd_budget"].as_object() {
                for (k, val) in b {
                    println!("{k:<24} {val}");
                }
            }
        }
        AdminCmd::Fence { client_id } => {
            println!("fenced {client_id}: {} session(s) ended", v["sessions"])
        }
        AdminCmd::Unfence { client_id } => {
            if v["ok"].as_bool() != Some(true) {
                return Err((1, format!("{client_id} was not fenced")));
            }
            println!("unfenced {client_id}");
        }
        AdminCmd::Fenced => {
            for p in v.as_array().into_iter().flatten() {
                println!("{}", p.as_str().unwrap_or(""));
            }
        }
        AdminCmd::Slots { session, .. } => {
            println!("session {session}: target highest slot {}", v["target_highest"])
        }
        AdminCmd::Kill { session } => println!("session {session} ended"),
        AdminCmd::Cluster => {
            println!("node {}  epoch {}  policy {}", v["node"], v["epoch"], v["policy"]);
            println!("{:<4} {:<28} {:<24} INCARNATION", "", "ID", "ADDRESS");
            for m in v["members"].as_array().into_iter().flatten() {
                println!(
                    "{:<4} {:<28} {:<24} {}",
                    if m["self"].as_bool() == Some(true) { "*" } else { "" },
                    m["id"].as_str().unwrap_or(""),
                    m["addr"].as_str().unwrap_or(""),
                    m["incarnation"],
                );
            }
            if let Some(c) = v["counters"].as_object() {
                for (k, val) in c {
                    println!("{k:<24} {val}");
                }
            }
            // Round-robin placement: names sent on to their home, and the block cache.
            if let Some(c) = v["forwarding"].as_object() {
                for (k, val) in c {
                    println!("{:<24} {val}", format!("forwarding.{k}"));
                }
            }
            if let Some(e) = v["membership_error"].as_str() {
                println!("membership error: {e}");
            }
        }
    }
    Ok(())
}
