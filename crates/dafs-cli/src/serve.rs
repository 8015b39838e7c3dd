//! `dafsd` / `dafs serve`: configuration from flags and an optional TOML file.

use std::path::PathBuf;

use dafs_server::{Export, ServerConfig, TlsServerOptions};

mod cluster;

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Directory to export (the default export). More with --export NAME=DIR.
    pub dir: Option<PathBuf>,
    /// Listen address (port 0 picks a free port; the chosen address is printed).
    /// `ofi+PROVIDER://HOST:PORT` listens with libfabric instead (like --ofi-listen;
    /// TCP then takes the config file's `listen` or an ephemeral loopback port).
    #[arg(long, default_value = "127.0.0.1:7420")]
    pub listen: String,
    /// A libfabric listener, `ofi+PROVIDER://HOST:PORT` (PROVIDER: tcp = tcp;ofi_rxm,
    /// shm, verbs = verbs;ofi_rxm, or a libfabric provider string); repeatable.
    /// Clients connect with `dafs+ofi://HOST:PORT`.
    #[arg(long = "ofi-listen", value_name = "ofi+PROVIDER://HOST:PORT")]
    pub ofi_listen: Vec<String>,
    /// Additional exports, NAME=DIR (append ":ro" for read-only).
    #[arg(long = "export", value_name = "NAME=DIR[:ro]")]
    pub exports: Vec<String>,
    /// Export the default directory read-only.
    #[arg(long)]
    pub read_only: bool,
    /// File holding the shared secret; clients must then authenticate (HMAC-SHA256).
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
    /// TOML configuration file (flags given on the command line win).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Event-loop worker threads.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Slots (outstanding requests) granted per session.
    #[arg(long)]
    pub slots: Option<u32>,
    /// Inline/direct threshold in bytes, for every provider (see the per-provider ones).
    #[arg(long)]
    pub inline_threshold: Option<u32>,
    /// Inline/direct threshold of shared-memory sessions (wins over --inline-threshold;
    /// default 2 KiB, the measured crossover for registered memory; clients keep
    /// unregistered memory inline up to 16 KiB regardless).
    #[arg(long)]
    pub inline_threshold_shm: Option<u32>,
    /// Inline/direct threshold of network (TCP/TLS) sessions (wins over --inline-threshold;
    /// default 16 KiB).
    #[arg(long)]
    pub inline_threshold_tcp: Option<u32>,
    /// Copy engines: threads that help place large direct reads (0 disables them).
    /// Default: one fewer than the cores, at most 16.
    #[arg(long)]
    pub copy_threads: Option<usize>,
    /// I/O threads: run one session's independent reads and writes in parallel (0: one
    /// request at a time per connection). Default: one fewer than the cores, at least 1.
    #[arg(long)]
    pub io_threads: Option<usize>,
    /// Maximum message size in bytes.
    #[arg(long)]
    pub max_msg_size: Option<u32>,
    /// Most sessions at once.
    #[arg(long)]
    pub max_sessions: Option<usize>,
    /// Most open files per session. Default: a quarter of the open-file share of the
    /// descriptor budget (from RLIMIT_NOFILE), at most 4096.
    #[arg(long)]
    pub max_open_files: Option<usize>,
    /// Descriptors cached behind file handles. Default: a quarter of RLIMIT_NOFILE
    /// (after a fixed reserve).
    #[arg(long)]
    pub handles_max: Option<usize>,
    /// Most files open in all sessions together. Default: half of RLIMIT_NOFILE (after
    /// a fixed reserve).
    #[arg(long)]
    pub open_files_total_max: Option<usize>,
    /// Directory for state that outlives a restart (the handle secret, 0600). With it
    /// (and CAP_DAC_READ_SEARCH), file handles stay valid across restarts.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Never use kernel file handles: handles are valid while cached, until a restart
    /// (STALE after eviction); an object moved out of an export is not reachable
    /// through an old handle.
    #[arg(long)]
    pub volatile_handles: bool,
    /// Busy-poll this many microseconds before sleeping when idle.
    #[arg(long)]
    pub spin_us: Option<u64>,
    /// Unix socket for same-host clients (shared-memory provider). Default:
    /// dafsd-PID.sock in a 0700 directory of dafsd's user: $XDG_RUNTIME_DIR/dafsd/,
    /// /run/dafsd/ as root, else /tmp/dafsd-UID/. An explicit PATH must be in a
    /// directory other users cannot write (or that is sticky).
    #[arg(long, value_name = "PATH")]
    pub shm_socket: Option<PathBuf>,
    /// Disable the shared-memory provider.
    #[arg(long)]
    pub no_shm: bool,
    /// Also let processes of this uid use the shared-memory provider (dafsd's own uid
    /// and root always may); repeatable. They must be able to reach the socket too.
    #[arg(long = "shm-allow-uid", value_name = "UID")]
    pub shm_allow_uid: Vec<u32>,
    /// Seconds a session outlives a broken connection (its client may reconnect and
    /// resume); 0 ends sessions with their connection. Default 90.
    #[arg(long)]
    pub lease_secs: Option<u64>,
    /// Seconds after a restart in which clients that held opens or locks reclaim them
    /// (needs --state-dir; 0 disables); other opens and locks wait. Default 90.
    #[arg(long)]
    pub grace_secs: Option<u64>,
    /// Largest reply kept per slot in the reply cache (bytes). Default 4096.
    #[arg(long)]
    pub reply_cache_slot_bytes: Option<usize>,
    /// Most sessions one client id may have connected at once. Default 16.
    #[arg(long)]
    pub max_connections_per_client: Option<usize>,
    /// Most connections open at once. Default 1024.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// A connection whose queued replies and pulls exceed this many bytes is not read
    /// until it drains (memory per client connection). Default 32 MiB.
    #[arg(long)]
    pub max_client_memory: Option<usize>,
    /// Milliseconds a connection may take to authenticate (SESSION_CREATE, plus
    /// SESSION_AUTH with a secret); slower or idle ones are closed. Default 10000.
    #[arg(long)]
    pub handshake_timeout_ms: Option<u64>,
    /// Most connections not yet authenticated; the rest of --max-connections is kept for
    /// authenticated clients. Default: a quarter of --max-connections.
    #[arg(long)]
    pub max_unauth_connections: Option<usize>,
    /// Most connections from one source address. Default 256.
    #[arg(long)]
    pub max_connections_per_addr: Option<usize>,
    /// Bytes all connections together may hold in queued replies and pulls in flight;
    /// beyond it connections with output pending are not read until it drains. Default:
    /// a quarter of the machine's memory.
    #[arg(long)]
    pub memory_max: Option<usize>,
    /// Warnings one peer address may cause in a burst before they are rate-limited
    /// (counted, not logged). Default 20.
    #[arg(long)]
    pub peer_warn_burst: Option<u32>,
    /// Warnings per minute one peer address may cause after its burst. Default 60.
    #[arg(long)]
    pub peer_warn_per_min: Option<u32>,
    /// Client ids (or prefixes ending in '*') allowed to attach to the default export;
    /// repeat for more. Default: all.
    #[arg(long = "allow-client", value_name = "CLIENT_ID")]
    pub allow_clients: Vec<String>,
    /// Whose identity requests run with: server (dafsd's own), asserted (the client's
    /// SET_CRED, root only), squash (always the anonymous ids). Default server.
    #[arg(long, value_name = "MODE")]
    pub identity: Option<String>,
    /// Anonymous uid for squashed requests. Default 65534.
    #[arg(long)]
    pub anon_uid: Option<u32>,
    /// Anonymous gid for squashed requests. Default 65534.
    #[arg(long)]
    pub anon_gid: Option<u32>,
    /// With --identity asserted: let uid 0 stay root (default: squash it to anon).
    #[arg(long)]
    pub no_root_squash: bool,
    /// Unix socket for `dafs admin`. Default: dafsd-PID.admin.sock in dafsd's private
    /// runtime directory (0700), next to the shared-memory socket. An explicit path must
    /// be in a directory other users cannot write.
    #[arg(long, value_name = "PATH")]
    pub admin_socket: Option<PathBuf>,
    /// Disable the admin socket.
    #[arg(long)]
    pub no_admin: bool,
    /// Serve Prometheus metrics (GET /metrics) on this address, e.g. 127.0.0.1:9420.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Serve TCP over TLS with this certificate chain (PEM, leaf first). Plaintext TCP
    /// clients are then refused. Needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates issued by a CA in this PEM file (mutual TLS). Turns
    /// the shared-memory provider off (it has no client certificates).
    #[arg(long, value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,
    /// Be a node of the federated cluster this cluster.toml describes (static
    /// `members`, or membership in etcd).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// This node's id in the cluster (default: the --listen address as written, which
    /// is the id of a member given as "host:port" in cluster.toml).
    #[arg(long, value_name = "ID", requires = "cluster")]
    pub node_id: Option<String>,
}

#[derive(serde::Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    #[serde(default)]
    ofi_listen: Vec<String>,
    workers: Option<usize>,
    secret_file: Option<PathBuf>,
    slots: Option<u32>,
    inline_threshold: Option<u32>,
    inline_threshold_shm: Option<u32>,
    inline_threshold_tcp: Option<u32>,
    copy_threads: Option<usize>,
    io_threads: Option<usize>,
    max_msg_size: Option<u32>,
    direct_max: Option<u32>,
    max_sessions: Option<usize>,
    max_open_files: Option<usize>,
    handles_max: Option<usize>,
    open_files_total_max: Option<usize>,
    state_dir: Option<PathBuf>,
    #[serde(default)]
    volatile_handles: bool,
    backlog_bytes_max: Option<usize>,
    spin_us: Option<u64>,
    shm_socket: Option<PathBuf>,
    #[serde(default)]
    no_shm: bool,
    #[serde(default)]
    shm_allow_uids: Vec<u32>,
    lease_secs: Option<u64>,
    grace_secs: Option<u64>,
    reply_cache_slot_bytes: Option<usize>,
    max_connections_per_client: Option<usize>,
    max_connections: Option<usize>,
    max_client_memory: Option<usize>,
    handshake_timeout_ms: Option<u64>,
    max_unauth_connections: Option<usize>,
    max_connections_per_addr: Option<usize>,
    memory_bytes_max: Option<usize>,
    peer_warn_burst: Option<u32>,
    peer_warn_per_min: Option<u32>,
    identity: Option<String>,
    anon_uid: Option<u32>,
    anon_gid: Option<u32>,
    #[serde(default)]
    no_root_squash: bool,
    admin_socket: Option<PathBuf>,
    #[serde(default)]
    no_admin: bool,
    metrics_listen: Option<String>,
    #[serde(default)]
    exports: Vec<FileExport>,
    tls: Option<FileTls>,
}

/// `[tls]` table: `cert`, `key`, optional `client_ca`.
#[derive(serde::Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileTls {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

#[derive(serde::Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileExport {
    name: String,
    path: PathBuf,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    clients: Vec<String>,
}

pub fn read_secret(path: &PathBuf) -> Result<Vec<u8>, String> {
    let s = std::fs::read(path)
        .map_err(|e| format!("cannot read secret file {}: {e}", path.display()))?;
    let trimmed: Vec<u8> = s.strip_suffix(b"\n").unwrap_or(&s).to_vec();
    if trimmed.len() < 8 {
        return Err(format!("secret in {} is shorter than 8 bytes", path.display()));
    }
    Ok(trimmed)
}

pub fn build_config(a: &ServeArgs) -> Result<ServerConfig, String> {
    let fc: FileConfig = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            toml::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?
        }
        None => FileConfig::default(),
    };
    let mut exports = Vec::new();
    if let Some(d) = &a.dir {
        let mut e = Export::new("export", d.clone(), a.read_only);
        e.clients = a.allow_clients.clone();
        exports.push(e);
    }
    for e in &fc.exports {
        let mut x = Export::new(e.name.clone(), e.path.clone(), e.read_only);
        x.clients = e.clients.clone();
        exports.push(x);
    }
    for spec in &a.exports {
        let (name, rest) =
            spec.split_once('=').ok_or_else(|| format!("--export {spec}: expected NAME=DIR"))?;
        let (path, ro) = match rest.strip_suffix(":ro") {
            Some(p) => (p, true),
            None => (rest, false),
        };
        exports.push(Export::new(name, path, ro));
    }
    if exports.is_empty() {
        return Err(
            "nothing to export: give a DIR (or --export NAME=DIR, or exports in --config)".into()
        );
    }
    let mut cfg = ServerConfig::new(".");
    cfg.exports = exports;
    cfg.ofi_listen =
        if a.ofi_listen.is_empty() { fc.ofi_listen.clone() } else { a.ofi_listen.clone() };
    cfg.listen = if a.listen.starts_with("ofi+") {
        cfg.ofi_listen.insert(0, a.listen.clone());
        fc.listen.clone().unwrap_or_else(|| "127.0.0.1:0".into())
    } else if a.listen != "127.0.0.1:7420" {
        a.listen.clone()
    } else {
        fc.listen.clone().unwrap_or_else(|| a.listen.clone())
    };
    macro_rules! pick {
        ($field:ident, $flag:expr, $file:expr) => {
            if let Some(v) = $flag.or($file) {
                cfg.$field = v;
            }
        };
    }
    pick!(workers, a.workers, fc.workers);
    pick!(slots_max, a.slots, fc.slots);
    // Per provider: its own flag, the common flag, its own key, the common key (flags win
    // over the file; the specific setting over the common one).
    let shm = a.inline_threshold_shm.or(a.inline_threshold);
    pick!(inline_threshold_shm, shm, fc.inline_threshold_shm.or(fc.inline_threshold));
    let tcp = a.inline_threshold_tcp.or(a.inline_threshold);
    pick!(inline_threshold, tcp, fc.inline_threshold_tcp.or(fc.inline_threshold));
    pick!(copy_threads, a.copy_threads, fc.copy_threads);
    pick!(io_threads, a.io_threads, fc.io_threads);
    pick!(msg_size_bytes_max, a.max_msg_size, fc.max_msg_size);
    pick!(sessions_max, a.max_sessions, fc.max_sessions);
    cfg.open_files_max = a.max_open_files.or(fc.max_open_files);
    pick!(spin_us, a.spin_us, fc.spin_us);
    pick!(direct_bytes_max, None, fc.direct_max);
    cfg.handles_max = a.handles_max.or(fc.handles_max);
    cfg.open_files_total_max = a.open_files_total_max.or(fc.open_files_total_max);
    cfg.state_dir = a.state_dir.clone().or(fc.state_dir.clone());
    cfg.volatile_handles = a.volatile_handles || fc.volatile_handles;
    pick!(backlog_bytes_max, a.max_client_memory, fc.max_client_memory.or(fc.backlog_bytes_max));
    pick!(lease_secs, a.lease_secs, fc.lease_secs);
    pick!(grace_secs, a.grace_secs, fc.grace_secs);
    pick!(reply_cache_slot_bytes, a.reply_cache_slot_bytes, fc.reply_cache_slot_bytes);
    pick!(connections_per_client_max, a.max_connections_per_client, fc.max_connections_per_client);
    pick!(connections_max, a.max_connections, fc.max_connections);
    pick!(handshake_timeout_ms, a.handshake_timeout_ms, fc.handshake_timeout_ms);
    if let Some(n) = a.max_unauth_connections.or(fc.max_unauth_connections) {
        cfg.connections_unauth_max = Some(n);
    }
    pick!(connections_per_addr_max, a.max_connections_per_addr, fc.max_connections_per_addr);
    pick!(memory_bytes_max, a.memory_max, fc.memory_bytes_max);
    pick!(peer_warn_burst, a.peer_warn_burst, fc.peer_warn_burst);
    pick!(peer_warn_per_min, a.peer_warn_per_min, fc.peer_warn_per_min);
    let anon_uid = a.anon_uid.or(fc.anon_uid).unwrap_or(65534);
    let anon_gid = a.anon_gid.or(fc.anon_gid).unwrap_or(65534);
    cfg.identity = match a.identity.as_deref().or(fc.identity.as_deref()).unwrap_or("server") {
        "server" => dafs_server::cred::Identity::Server,
        "asserted" => dafs_server::cred::Identity::Asserted {
            root_squash: !(a.no_root_squash || fc.no_root_squash),
            anon_uid,
            anon_gid,
        },
        "squash" => dafs_server::cred::Identity::Squash { anon_uid, anon_gid },
        other => return Err(format!("identity {other:?}: expected server, asserted or squash")),
    };
    cfg.metrics_listen = a.metrics_listen.clone().or(fc.metrics_listen.clone());
    cfg.shm_socket = if a.no_shm || fc.no_shm {
        None
    } else {
        match a.shm_socket.clone().or(fc.shm_socket.clone()) {
            Some(p) => Some(p),
            None => Some(
                dafs_transport::shm::default_socket_path()
                    .map_err(|e| format!("shm socket directory: {e}"))?,
            ),
        }
    };
    cfg.shm_allow_uids = a.shm_allow_uid.iter().chain(&fc.shm_allow_uids).copied().collect();
    cfg.admin_socket = if a.no_admin || fc.no_admin {
        None
    } else {
        match a.admin_socket.clone().or(fc.admin_socket.clone()) {
            Some(p) => Some(p),
            // Beside the shared-memory socket, in dafsd's private 0700 directory: never
            // a guessable name in a directory others can write.
            None => Some(
                dafs_transport::shm::private_runtime_dir()
                    .map_err(|e| format!("admin socket directory: {e}"))?
                    .join(format!("dafsd-{}.admin.sock", std::process::id())),
            ),
        }
    };
    if let Some(p) = a.secret_file.as_ref().or(fc.secret_file.as_ref()) {
        cfg.secret = Some(read_secret(p)?);
    }
    cfg.tls = match (&a.tls_cert, &a.tls_key, &fc.tls) {
        (Some(cert), Some(key), _) => Some(TlsServerOptions {
            cert_file: cert.clone(),
            key_file: key.clone(),
            client_ca_file: a
                .tls_client_ca
                .clone()
                .or_else(|| fc.tls.as_ref().and_then(|t| t.client_ca.clone())),
        }),
        (None, None, Some(t)) => Some(TlsServerOptions {
            cert_file: t.cert.clone(),
            key_file: t.key.clone(),
            client_ca_file: a.tls_client_ca.clone().or(t.client_ca.clone()),
        }),
        (None, None, None) if a.tls_client_ca.is_some() => {
            return Err("--tls-client-ca needs --tls-cert and --tls-key".into())
        }
        _ => None,
    };
    if cfg.tls.as_ref().is_some_and(|t| t.client_ca_file.is_some())
        && a.shm_socket.is_none()
        && fc.shm_socket.is_none()
    {
        // Mutual TLS: same-host clients must not get around client certificates through
        // the shared-memory provider. An explicitly configured shm socket is an error
        // (reported by validate).
        cfg.shm_socket = None;
    }
    if let Some(file) = &a.cluster {
        let security = forward_security(&cfg);
        let (id, memory) = (a.node_id.as_deref(), cfg.memory_bytes_max);
        cfg.cluster = Some(cluster::node(file, id, &cfg.listen, memory, security)?);
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// How the node's sessions to the other nodes authenticate (forwarding).
fn forward_security(cfg: &ServerConfig) -> dafs_server::forward::PeerSecurity {
    dafs_server::forward::PeerSecurity::of_node(cfg.secret.as_deref(), cfg.tls.as_ref())
}

/// Run the server until SIGINT/SIGTERM. Prints `dafsd listening on ADDR` first.
pub fn run(a: &ServeArgs) -> Result<(), String> {
    let cfg = build_config(a)?;
    let admin = cfg.admin_socket.clone();
    let tls = cfg.tls.clone();
    let exports: Vec<String> = cfg
        .exports
        .iter()
        .map(|e| {
            format!("{}={}{}", e.name, e.path.display(), if e.read_only { " (ro)" } else { "" })
        })
        .collect();
    let node = cfg.cluster.clone();
    let handle = dafs_server::start(cfg).map_err(|e| e.to_string())?;
    println!("dafsd listening on {}", handle.local_addr());
    if let (Some(file), Some(node)) = (&a.cluster, &node) {
        match cluster::join(file, node, handle.local_addr()) {
            Ok(Some(epoch)) => println!("cluster: joined as {} at epoch {epoch}", node.me()),
            Ok(None) => {
                let epoch = node.map().map_or(0, |m| m.epoch());
                println!("cluster: node {} of a static cluster, epoch {epoch}", node.me())
            }
            Err(e) => {
                handle.shutdown();
                return Err(e);
            }
        }
    }
    for u in handle.ofi_urls() {
        println!("libfabric: {u} (clients: dafs+{u})");
    }
    if let Some(t) = &tls {
        println!(
            "tls: required on {} ({})",
            handle.local_addr(),
            if t.client_ca_file.is_some() {
                "client certificates required"
            } else {
                "no client certificates"
            }
        );
    }
    if let Some(p) = handle.shm_path() {
        println!("shared memory: dafs+shm://{p}");
    }
    if let Some(p) = admin {
        println!("admin: {}", p.display());
    }
    if let Some(m) = handle.metrics_addr() {
        println!("metrics: http://{m}/metrics");
    }
    println!("exports: {}", exports.join(", "));
    use std::io::Write;
    let _ = std::io::stdout().flush();
    wait_for_signal();
    eprintln!("dafsd: shutting down");
    if let Some(node) = &node {
        node.leave();
    }
    handle.shutdown();
    Ok(())
}

fn wait_for_signal() {
    // Block SIGINT/SIGTERM in this thread and wait for one synchronously: no async
    // signal handler, no self-pipe.
    // SAFETY: plain libc signal-set manipulation on local, initialised sigset_t values.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        let mut sig: libc::c_int = 0;
        libc::sigwait(&set, &mut sig);
    }
}
