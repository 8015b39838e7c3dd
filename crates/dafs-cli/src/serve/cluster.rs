//! `dafsd --cluster cluster.toml`: this server as a node of a federated cluster.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dafs_cluster::config::Membership as Kind;
use dafs_cluster::membership::Membership;
use dafs_cluster::{ClusterConfig, NodeId};
use dafs_server::cluster::ClusterNode;
use dafs_server::forward;

/// The node for `--cluster FILE` (static: with its map; etcd: not joined yet, see
/// [`join`]). `listen` is the address as configured: the default node id. Every node
/// can forward (round-robin placement, decided by the map in force):
/// `memory_bytes_max` sizes the default block cache; `security` is how its sessions
/// to the other nodes authenticate ([`forward::PeerSecurity::of_node`]).
pub fn node(
    file: &Path,
    node_id: Option<&str>,
    listen: &str,
    memory_bytes_max: usize,
    security: forward::PeerSecurity,
) -> Result<Arc<ClusterNode>, String> {
    let cfg = ClusterConfig::load(file).map_err(|e| e.to_string())?;
    let id = NodeId::new(node_id.unwrap_or(listen)).map_err(|e| format!("--node-id: {e}"))?;
    let me = id.clone();
    let node = match cfg.static_map() {
        Some(map) => ClusterNode::with_static(id, map)?,
        None => ClusterNode::pending(id),
    };
    let cache_bytes = match cfg.block_cache_bytes {
        Some(b) => usize::try_from(b).map_err(|_| "block_cache_bytes too large".to_string())?,
        None => forward::block_cache_bytes_default(memory_bytes_max),
    };
    let threads = forward::pool::forward_threads_default();
    let f = forward::Forwarder::new(&me, cache_bytes, threads, security)
        .map_err(|e| format!("starting the forwarding threads: {e}"))?;
    Ok(Arc::new(node.with_forwarder(f)))
}

/// With etcd membership: register `addr` (the address the server listens on) and start
/// the heartbeat. A restarted node waits out its previous lease (at most its TTL).
pub fn join(file: &Path, node: &ClusterNode, addr: &str) -> Result<Option<u64>, String> {
    let cfg = ClusterConfig::load(file).map_err(|e| e.to_string())?;
    if !matches!(cfg.membership, Kind::Etcd { .. }) {
        return Ok(None);
    }
    let m = Membership::from_config(&cfg).expect("etcd membership");
    let id_wait = Duration::from_secs(cfg.lease_ttl_s) + Duration::from_secs(1);
    let epoch = node
        .join_etcd(&m, addr, cfg.lease_ttl_s, id_wait)
        .map_err(|e| format!("joining cluster {}: {e}", cfg.name))?;
    Ok(Some(epoch))
}
