//! Federation on the server: this node's place in a cluster (`dafsd --cluster`).
//!
//! The node holds the placement map in force — fixed (static members in cluster.toml)
//! or kept current by a [`Heartbeat`] in etcd — and checks every request that names a
//! path against it: a name this node neither *manages* (the map's hash names another
//! member) nor *holds* (it does not exist here) is answered `WRONG_NODE` with the node's
//! epoch, so a client with an older map refreshes it (CLUSTER_MAP) and goes to the node
//! the map names. Directories are virtual (the same directory on every node), so
//! creating or removing a directory and looking up one that exists pass everywhere; a
//! file that stays on this node after the map moved its name elsewhere is still held
//! and served. Requests by open id or handle carry no name and are not checked.
//!
//! Under round-robin placement a name that would be answered `WRONG_NODE` is forwarded
//! to its home instead, when the request is one `forward` carries (LOOKUP, OPEN by
//! name, CREATE of a regular file, REMOVE); the others (RENAME, LINK, SYMLINK, MKNOD)
//! still answer `WRONG_NODE`.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use dafs_cluster::heartbeat::Heartbeat;
use dafs_cluster::membership::{Membership, MembershipError};
use dafs_cluster::{ClusterPath, Member, NodeId, PlacementMap, Policy};
use dafs_proto::types::FileType;
use dafs_proto::{FileHandle, Reply, Request, Status};
use serde_json::{json, Value};

use crate::forward::Forwarder;
use crate::{fsops, Shared};

/// How long a restarted node keeps trying to register while its previous lease (same
/// id) has not expired yet: a little over the lease's TTL.
const ID_TAKEN_RETRY_INTERVAL: Duration = Duration::from_millis(250);

/// Where the map comes from.
enum Source {
    Static(Arc<PlacementMap>),
    Etcd(Heartbeat),
}

/// What this node counts of the cluster's traffic (see `dafs admin cluster`).
#[derive(Debug, Default)]
pub struct ClusterCounters {
    /// Requests naming a path that were checked against the map.
    pub names_checked: AtomicU64,
    /// ... of which this node manages the name under its map.
    pub names_managed: AtomicU64,
    /// ... of which another node manages the name but it exists here (a directory, or
    /// a file created here under an earlier map).
    pub names_held: AtomicU64,
    /// ... answered WRONG_NODE.
    pub wrong_node: AtomicU64,
    /// CLUSTER_MAP requests answered.
    pub map_requests: AtomicU64,
    /// Requests of clients this node executed while in a cluster (names or not; not
    /// counting those other nodes forwarded here: `peer_requests`).
    pub requests: AtomicU64,
    /// ... of which were for a file whose home is another node (forwarded, or I/O on an
    /// open made there): the remote accesses of round-robin placement.
    pub remote_requests: AtomicU64,
    /// Requests forwarded here by other nodes.
    pub peer_requests: AtomicU64,
}

/// Count an executed request: from a forwarding node (`peer`), or a client's (`remote`:
/// for a file whose home is another node).
pub(crate) fn count_request(sh: &Shared, peer: bool, remote: bool) {
    let Some(node) = sh.cfg.cluster.as_ref() else { return };
    let c = &node.counters;
    if peer {
        c.peer_requests.fetch_add(1, Relaxed);
        return;
    }
    c.requests.fetch_add(1, Relaxed);
    if remote {
        c.remote_requests.fetch_add(1, Relaxed);
    }
}

/// A name to carry out at its home (round-robin placement): the home and the path.
#[derive(Debug)]
pub(crate) struct Forward {
    pub home: Member,
    pub path: ClusterPath,
}

/// This node's membership of a cluster (see the module documentation).
pub struct ClusterNode {
    me: NodeId,
    source: RwLock<Option<Source>>,
    pub counters: ClusterCounters,
    /// Sessions to the other nodes and the block cache (round-robin placement).
    pub forwarder: Option<Forwarder>,
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("me", &self.me)
            .field("epoch", &self.map().map(|m| m.epoch()))
            .finish()
    }
}

impl ClusterNode {
    /// A node of a static cluster: `me` must be one of the map's members.
    pub fn with_static(me: NodeId, map: PlacementMap) -> Result<ClusterNode, String> {
        if map.member(&me).is_none() {
            let ids: Vec<&str> = map.members().iter().map(|m| m.id.as_str()).collect();
            return Err(format!(
                "node id {me} is not a member of the cluster ({}); give --node-id",
                ids.join(", ")
            ));
        }
        Ok(ClusterNode {
            me,
            source: RwLock::new(Some(Source::Static(Arc::new(map)))),
            counters: ClusterCounters::default(),
            forwarder: None,
        })
    }

    /// Forward names this node does not hold when the map's policy is round-robin.
    pub fn with_forwarder(mut self, f: Forwarder) -> Self {
        self.forwarder = Some(f);
        self
    }

    /// A node of an etcd cluster, before it has joined ([`join_etcd`](Self::join_etcd)):
    /// until then it has no map and checks nothing (no client can know of it yet).
    pub fn pending(me: NodeId) -> ClusterNode {
        ClusterNode {
            me,
            source: RwLock::new(None),
            counters: ClusterCounters::default(),
            forwarder: None,
        }
    }

    /// Register in etcd under `addr` and keep the lease alive. A node restarted within
    /// its previous lease finds its id taken: it retries until `id_wait` has passed.
    pub fn join_etcd(
        &self,
        membership: &Membership,
        addr: &str,
        ttl_s: u64,
        id_wait: Duration,
    ) -> Result<u64, MembershipError> {
        let member = Member::new(self.me.clone(), addr);
        let deadline = Instant::now() + id_wait;
        let hb = loop {
            match Heartbeat::start(membership.clone(), member.clone(), ttl_s) {
                Err(MembershipError::IdTaken(_)) if Instant::now() < deadline => {
                    std::thread::sleep(ID_TAKEN_RETRY_INTERVAL)
                }
                r => break r?,
            }
        };
        let epoch = hb.map().epoch();
        *self.source.write().expect("cluster source lock") = Some(Source::Etcd(hb));
        Ok(epoch)
    }

    /// Leave the cluster cleanly (etcd: revoke the lease, so the epoch moves at once).
    pub fn leave(&self) {
        let src = self.source.write().expect("cluster source lock").take();
        if let Some(Source::Etcd(hb)) = src {
            if let Err(e) = hb.leave() {
                tracing::warn!("leaving the cluster: {e}");
            }
        }
    }

    pub fn me(&self) -> &NodeId {
        &self.me
    }

    /// The map in force (None: an etcd node that has not joined yet).
    pub fn map(&self) -> Option<Arc<PlacementMap>> {
        match self.source.read().expect("cluster source lock").as_ref()? {
            Source::Static(m) => Some(m.clone()),
            Source::Etcd(hb) => Some(hb.map_shared()),
        }
    }

    /// `dafs admin cluster`: this node, its map and its counters.
    pub fn admin_json(&self) -> Value {
        let c = &self.counters;
        let map = self.map();
        let members: Vec<Value> = map
            .as_ref()
            .map(|m| {
                m.members()
                    .iter()
                    .map(|x| {
                        json!({"id": x.id.as_str(), "addr": x.addr, "incarnation": x.incarnation,
                               "self": x.id == self.me})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let last_error = match self.source.read().expect("cluster source lock").as_ref() {
            Some(Source::Etcd(hb)) => hb.last_error().map(|e| e.to_string()),
            _ => None,
        };
        json!({
            "node": self.me.as_str(),
            "epoch": map.as_ref().map(|m| m.epoch()),
            "policy": map.as_ref().map(|m| m.policy().as_str()),
            "members": members,
            "membership_error": last_error,
            "counters": {
                "names_checked": c.names_checked.load(Relaxed),
                "names_managed": c.names_managed.load(Relaxed),
                "names_held": c.names_held.load(Relaxed),
                "wrong_node": c.wrong_node.load(Relaxed),
                "map_requests": c.map_requests.load(Relaxed),
                "requests": c.requests.load(Relaxed),
                "remote_requests": c.remote_requests.load(Relaxed),
                "peer_requests": c.peer_requests.load(Relaxed),
            },
            "forwarding": self.forwarder.as_ref().map(|f| {
                let fc = &f.counters;
                json!({
                    "forwarded": fc.forwarded.load(Relaxed),
                    "forwarded_io": fc.forwarded_io.load(Relaxed),
                    "cache_hits": fc.cache_hits.load(Relaxed),
                    "cache_misses": fc.cache_misses.load(Relaxed),
                    "forward_failures": fc.forward_failures.load(Relaxed),
                    "forward_refusals": fc.forward_refusals.load(Relaxed),
                    "forwards_inflight": f.pool.inflight(),
                    "forwards_inflight_max": f.pool.inflight_max(),
                    "lock_sessions": f.lock_sessions(),
                    "cache_bytes": f.cache.cached_bytes(),
                    "cache_capacity_bytes": f.cache.capacity_bytes(),
                })
            }),
        })
    }
}

/// The reply for a refused request: `WRONG_NODE` carries this node's epoch.
pub(crate) fn error_reply(sh: &Shared, st: Status) -> Reply<'static> {
    if st != Status::WrongNode {
        return Reply::Error(st);
    }
    let epoch = sh.cfg.cluster.as_ref().and_then(|n| n.map()).map_or(0, |m| m.epoch());
    Reply::WrongNode { epoch }
}

/// CLUSTER_MAP: this node's id, epoch and map (`NOTSUPP` on a server outside a cluster,
/// `DELAY` on an etcd node that has not joined yet).
pub(crate) fn map_reply<'a>(sh: &Shared, held: &'a mut Vec<u8>) -> Result<Reply<'a>, Status> {
    let node = sh.cfg.cluster.as_ref().ok_or(Status::NotSupp)?;
    let map = node.map().ok_or(Status::Delay)?;
    node.counters.map_requests.fetch_add(1, Relaxed);
    held.clear();
    held.extend_from_slice(node.me.as_str().as_bytes());
    let id_len = held.len();
    held.extend_from_slice(map.to_json().as_bytes());
    let (node_id, map_json) = held.split_at(id_len);
    Ok(Reply::ClusterMap { epoch: map.epoch(), node_id, map: map_json })
}

/// Check a request's names against the map (see the module documentation): `Ok(None)`
/// to serve it here, `Ok(Some(..))` to forward it to the name's home.
pub(crate) fn check_request(sh: &Shared, req: &Request) -> Result<Option<Forward>, Status> {
    let Some(node) = sh.cfg.cluster.as_ref() else { return Ok(None) };
    let Some(map) = node.map() else { return Ok(None) };
    let check = |dir: &FileHandle, name: &[u8]| check_name(sh, node, &map, dir, name);
    // Two names may have two homes: not forwarded (the client goes to the home).
    let local = |r: Result<Option<Forward>, Status>| match r? {
        None => Ok(None),
        Some(_) => {
            node.counters.wrong_node.fetch_add(1, Relaxed);
            Err(Status::WrongNode)
        }
    };
    use Request as R;
    match req {
        R::Lookup { dir, path, .. } => check(dir, path),
        R::Create { dir, ftype: FileType::Regular, name, .. } => check(dir, name),
        R::Create { dir, ftype, name, .. } if *ftype != FileType::Directory => {
            local(check(dir, name))
        }
        R::Open { fh, name, .. } if !name.is_empty() => check(fh, name),
        R::Remove { dir, name } => check(dir, name),
        R::Rename { from_dir, from_name, to_dir, to_name, .. } => {
            local(check(from_dir, from_name))?;
            local(check(to_dir, to_name))
        }
        // The new name is the target node's to check (it receives the file).
        R::ClusterRename { from_dir, from_name, .. } => local(check(from_dir, from_name)),
        R::Link { dir, name, .. } | R::Symlink { dir, name, .. } | R::Mknod { dir, name, .. } => {
            local(check(dir, name))
        }
        _ => Ok(None),
    }
}

fn check_name(
    sh: &Shared,
    node: &ClusterNode,
    map: &PlacementMap,
    dir: &FileHandle,
    name: &[u8],
) -> Result<Option<Forward>, Status> {
    let c = &node.counters;
    c.names_checked.fetch_add(1, Relaxed);
    let d = sh.handles.resolve(dir)?;
    let path = cluster_path(sh.roots[d.export as usize].as_fd(), d.fd.as_fd(), name)?;
    let manager = map.manager(&path);
    // The staging directory of cross-node renames is every node's own.
    if manager.id == node.me || crate::xrename::in_staging(&path) {
        c.names_managed.fetch_add(1, Relaxed);
        return Ok(None);
    }
    // Held here: a (virtual) directory, or a file whose home this node stayed.
    if fsops::lookup(d.fd.as_fd(), name, false).is_ok() {
        c.names_held.fetch_add(1, Relaxed);
        return Ok(None);
    }
    if map.policy() == Policy::RoundRobin && node.forwarder.is_some() {
        return Ok(Some(Forward { home: manager.clone(), path }));
    }
    c.wrong_node.fetch_add(1, Relaxed);
    Err(Status::WrongNode)
}

/// The cluster path of `name` in directory `dir`: the directory's path beneath the
/// export root (from the kernel's record of the descriptor), then the name, normalized
/// as the client normalizes it before hashing.
pub(crate) fn cluster_path(
    root: BorrowedFd,
    dir: BorrowedFd,
    name: &[u8],
) -> Result<ClusterPath, Status> {
    let root_path = proc_link(root)?;
    let dir_path = proc_link(dir)?;
    let rel = dir_path.strip_prefix(root_path.as_slice()).ok_or(Status::Stale)?;
    if !(rel.is_empty() || rel.starts_with(b"/")) {
        return Err(Status::Stale); // a sibling of the root sharing its prefix
    }
    let mut full = Vec::with_capacity(rel.len() + name.len() + 2);
    full.push(b'/');
    full.extend_from_slice(rel);
    full.push(b'/');
    full.extend_from_slice(name);
    ClusterPath::new(full).map_err(|_| Status::NameTooLong)
}

fn proc_link(fd: BorrowedFd) -> Result<Vec<u8>, Status> {
    let link = rustix::fs::readlink(fsops::proc_path(fd).as_c_str(), Vec::new())
        .map_err(|_| Status::Stale)?;
    let mut bytes = link.into_bytes();
    if bytes == b"/" {
        bytes.clear();
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    fn open_path(p: &std::path::Path) -> OwnedFd {
        rustix::fs::open(p, rustix::fs::OFlags::PATH, rustix::fs::Mode::empty()).unwrap()
    }

    #[test]
    fn cluster_paths_are_relative_to_the_export_root() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("exp/a/b")).unwrap();
        std::fs::create_dir_all(t.path().join("exp2")).unwrap();
        let root = open_path(&t.path().join("exp"));
        let ab = open_path(&t.path().join("exp/a/b"));
        let p = cluster_path(root.as_fd(), ab.as_fd(), b"f").unwrap();
        assert_eq!(p.to_string(), "/a/b/f");
        let p = cluster_path(root.as_fd(), root.as_fd(), b"x/./y").unwrap();
        assert_eq!(p.to_string(), "/x/y");
        // A directory outside the root that shares its name as a prefix is refused.
        let sibling = open_path(&t.path().join("exp2"));
        assert_eq!(cluster_path(root.as_fd(), sibling.as_fd(), b"f"), Err(Status::Stale));
    }

    #[test]
    fn a_static_node_must_be_a_member() {
        let m = |id: &str| Member::new(NodeId::new(id).unwrap(), id);
        let map = PlacementMap::new(3, Default::default(), vec![m("a:1"), m("b:1")]).unwrap();
        assert!(ClusterNode::with_static(NodeId::new("c:1").unwrap(), map.clone()).is_err());
        let n = ClusterNode::with_static(NodeId::new("b:1").unwrap(), map).unwrap();
        assert_eq!(n.map().unwrap().epoch(), 3);
        assert_eq!(n.admin_json()["members"].as_array().unwrap().len(), 2);
    }
}
