//! Federation on the client: one namespace over the nodes of a cluster.
//!
//! [`Client::connect`] given a cluster URL (`dafs://h1:p,h2:p/`, `dafs+tls://...` with
//! two or more hosts, or `dafs+etcd://HOST:PORT/NAME/`) returns a *front* client whose
//! calls this module routes: each path goes to the node the placement map's hash
//! names (its manager), over one session per node opened on first use. A node that
//! answers `WRONG_NODE` has another map: the client fetches the newest map it can
//! (CLUSTER_MAP from that node, or etcd) and sends the request again, transparently,
//! for up to [`WRONG_NODE_RETRY_TIME_MAX`]. Directories are virtual: mkdir/rmdir act
//! on every node, readdir merges the nodes' listings (`vdir`). Open files remember
//! their node. Calls by handle go through a front-side handle table (`handles`,
//! `at`); asynchronous I/O, batches and registered memory span the node sessions
//! (`aio`). The front client itself holds no session: what none of these route (a
//! raw chain or request) is refused.

mod aio;
mod at;
mod handles;
mod ops;
mod sys;
mod vdir;

pub use aio::CLUSTER_REGIONS_MAX;
pub use handles::{CLUSTER_HANDLES_MAX, CLUSTER_HANDLE_PATH_BYTES_MAX};

use std::time::{Duration, Instant};

use dafs_cluster::membership::Membership;
use dafs_cluster::{ClusterPath, ClusterUrl, NodeId, PlacementMap};
use dafs_proto::{Opcode, Reply, Request, Status};

use crate::{Client, ClientConfig, Error, Result};

/// How long a request keeps being re-sent after `WRONG_NODE` while the nodes' maps
/// converge (a node learns a new epoch at its next heartbeat: a third of the lease).
pub const WRONG_NODE_RETRY_TIME_MAX: Duration = Duration::from_secs(10);
const WRONG_NODE_BACKOFF_START: Duration = Duration::from_millis(10);
const WRONG_NODE_BACKOFF_MAX: Duration = Duration::from_millis(250);
/// Node slots ever created (a slot is kept per node id for the client's life, so open
/// files keep naming their node across map changes): members plus churn.
pub const NODE_SLOTS_MAX: usize = 2 * dafs_cluster::placement::MEMBERS_MAX;

/// One node the client knows (by id; the address follows the newest map).
struct NodeSlot {
    id: NodeId,
    addr: String,
    client: Option<Client>,
    /// Requests routed to this node (see [`Client::cluster_nodes`]).
    requests: u64,
}

/// The routing state of a front client.
pub(crate) struct Cluster {
    url: String,
    cfg: ClientConfig,
    tls: bool,
    map: PlacementMap,
    /// Slot of each map member, indexed like `map.members()`.
    member_slot: Vec<usize>,
    slots: Vec<NodeSlot>,
    etcd: Option<Membership>,
    contacts: Vec<String>,
    pub(crate) map_refreshes: u64,
    /// Round-robin placement: the next landing node (index into `member_slot`).
    rr_cursor: usize,
    /// Completion groups and registered regions spanning the node sessions.
    aio: aio::Aio,
    /// Counters of node sessions dropped since (see [`Client::stats`]).
    retired_stats: crate::ClientStats,
    /// Front handles: what each handle this client gave out names (see `handles`).
    handles: handles::HandleTable,
    /// The credentials last set ([`Client::set_cred`]): every node session acts
    /// under them, also one opened later.
    cred: Option<(u32, u32, Vec<u32>)>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The node sessions first: each waits for its I/O in flight, which may name a
        // front region's memory, freed with `aio` after.
        for s in &mut self.slots {
            s.client = None;
        }
    }
}

/// What [`Client::cluster_nodes`] reports of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNodeInfo {
    pub id: String,
    pub addr: String,
    pub connected: bool,
    pub requests: u64,
}

/// The connect target for a cluster URL, if `url` is one (two or more hosts, or etcd):
/// `(target, path)` as [`parse_url`](crate::parse_url) returns them.
pub(crate) fn split_url(url: &str) -> Result<Option<(String, String)>> {
    if !is_cluster_target(url) {
        return Ok(None);
    }
    let parsed = ClusterUrl::parse(url).map_err(|e| Error::Cluster(e.to_string()))?;
    let path = parsed.path().to_string();
    let target = match &parsed {
        ClusterUrl::Etcd { endpoints, name, .. } => {
            format!("dafs+etcd://{}/{name}", endpoints.join(","))
        }
        ClusterUrl::Static { tls, hosts, .. } => {
            format!("{}{}", if *tls { "dafs+tls://" } else { "dafs://" }, hosts.join(","))
        }
    };
    Ok(Some((target, path)))
}

fn is_cluster_target(t: &str) -> bool {
    if t.starts_with("dafs+etcd://") {
        return true;
    }
    let hosts = t.strip_prefix("dafs://").or_else(|| t.strip_prefix("dafs+tls://"));
    hosts.is_some_and(|h| h.split('/').next().unwrap_or("").contains(','))
}

/// Connect to a cluster if `target` names one (else None: an ordinary server).
pub(crate) fn connect(target: &str, cfg: &ClientConfig) -> Result<Option<Client>> {
    let Some((target, _)) = split_url(target)? else { return Ok(None) };
    let url = ClusterUrl::parse(&target).map_err(|e| Error::Cluster(e.to_string()))?;
    let (etcd, contacts, tls) = match &url {
        ClusterUrl::Etcd { .. } => {
            (Membership::from_url(&url, cfg.connect_timeout), Vec::new(), false)
        }
        ClusterUrl::Static { tls, hosts, .. } => (None, hosts.clone(), *tls),
    };
    let mut c = Cluster {
        url: target.clone(),
        cfg: cfg.clone(),
        tls,
        map: PlacementMap::new(
            0,
            Default::default(),
            vec![dafs_cluster::Member::new(NodeId::new("-").expect("valid id"), "-")],
        )
        .expect("a one-member map"),
        member_slot: Vec::new(),
        slots: Vec::new(),
        etcd,
        contacts,
        map_refreshes: 0,
        // Clients start at different nodes, so that together they spread evenly.
        rr_cursor: std::process::id() as usize
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() as usize),
        aio: aio::Aio::default(),
        retired_stats: Default::default(),
        handles: handles::HandleTable::new(handle_nonce()),
        cred: None,
    };
    // The front client: the first contact's negotiated values (sizes, slots), with its
    // session ended — calls it cannot route fail instead of reaching one node.
    let (front_addr, map) = c.first_map()?;
    c.install(map)?;
    let mut front = Client::connect(&c.node_target(&front_addr), cfg.clone())?;
    front.call(&Request::SessionDestroy).and_then(|m| front.decode(&m).map(|_| ()))?;
    front.dead = true;
    front.t = Box::new(crate::connect::NoTransport);
    front.cluster = Some(Box::new(c));
    Ok(Some(front))
}

impl Cluster {
    fn node_target(&self, addr: &str) -> String {
        if self.tls {
            format!("dafs+tls://{addr}")
        } else {
            addr.to_string()
        }
    }

    /// The map to start with: etcd's, or the first contact that answers CLUSTER_MAP.
    /// Returns the address of a live node with it.
    fn first_map(&mut self) -> Result<(String, PlacementMap)> {
        if let Some(m) = &self.etcd {
            let (map, _) = m
                .current_map()
                .map_err(|e| Error::Cluster(format!("{}: {e}", self.url)))?
                .ok_or_else(|| Error::Cluster(format!("{}: no cluster map in etcd", self.url)))?;
            let addr = map.members()[0].addr.clone();
            return Ok((addr, map));
        }
        let mut last = None;
        for host in self.contacts.clone() {
            match Client::connect(&self.node_target(&host), self.cfg.clone())
                .and_then(|mut n| fetch_map(&mut n))
            {
                Ok((_, map)) => return Ok((host, map)),
                Err(e) => last = Some(format!("{host}: {e}")),
            }
        }
        Err(Error::Cluster(format!(
            "{}: no contact point answered with a cluster map ({})",
            self.url,
            last.unwrap_or_default()
        )))
    }

    /// Make `map` the one in force, keeping the sessions of nodes still at the same
    /// address.
    fn install(&mut self, map: PlacementMap) -> Result<()> {
        let mut member_slot = Vec::with_capacity(map.members().len());
        for m in map.members() {
            let slot = match self.slots.iter().position(|s| s.id == m.id) {
                Some(i) => {
                    if self.slots[i].addr != m.addr {
                        self.slots[i].addr = m.addr.clone();
                        self.drop_node(i);
                    }
                    i
                }
                None => {
                    if self.slots.len() == NODE_SLOTS_MAX {
                        return Err(Error::Cluster(format!(
                            "more than {NODE_SLOTS_MAX} node ids seen in this client's life"
                        )));
                    }
                    self.slots.push(NodeSlot {
                        id: m.id.clone(),
                        addr: m.addr.clone(),
                        client: None,
                        requests: 0,
                    });
                    self.slots.len() - 1
                }
            };
            member_slot.push(slot);
        }
        self.map = map;
        self.member_slot = member_slot;
        Ok(())
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.map.epoch()
    }

    /// Under round-robin placement: the node the next request lands on (it forwards to
    /// the home); None under matched placement.
    fn landing_slot(&mut self) -> Option<usize> {
        if self.map.policy() != dafs_cluster::Policy::RoundRobin {
            return None;
        }
        let i = self.rr_cursor % self.member_slot.len();
        self.rr_cursor = self.rr_cursor.wrapping_add(1);
        Some(self.member_slot[i])
    }

    /// Whether requests land round-robin (round-robin placement).
    fn landing_slot_peek(&self) -> bool {
        self.map.policy() == dafs_cluster::Policy::RoundRobin
    }

    /// The slot of the node managing `path`.
    fn manager_slot(&self, path: &ClusterPath) -> usize {
        self.member_slot[self.map.manager_index(path)]
    }

    /// The session to node `slot`, opened if need be. A node that cannot be reached is
    /// reported by id and address.
    fn node(&mut self, slot: usize) -> Result<&mut Client> {
        self.slots[slot].requests += 1;
        if self.slots[slot].client.is_none() {
            let target = self.node_target(&self.slots[slot].addr);
            let mut c = Client::connect(&target, self.cfg.clone())
                .map_err(|e| self.unavailable(slot, e))?;
            if let Some((uid, gid, groups)) = &self.cred {
                c.set_cred(*uid, *gid, groups).map_err(|e| self.unavailable(slot, e))?;
            }
            self.slots[slot].client = Some(c);
        }
        Ok(self.slots[slot].client.as_mut().expect("connected above"))
    }

    /// Run `op` on node `slot`; a failure of the node itself (not an answer) drops its
    /// session, so the next call reconnects (the node may have restarted).
    fn on<T>(&mut self, slot: usize, op: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        let r = op(self.node(slot)?);
        match r {
            Err(e) if node_failed(&e) => {
                self.drop_node(slot);
                Err(self.unavailable(slot, e))
            }
            r => r,
        }
    }

    /// Drop node `slot`'s session (it failed, or the node moved): the next call
    /// connects again. What it owes the front's completion groups is delivered first.
    fn drop_node(&mut self, slot: usize) {
        if let Some(mut c) = self.slots[slot].client.take() {
            self.aio.forget_node(slot, &mut c);
            self.retired_stats.accumulate(&c.stats());
        }
    }

    /// The sum of every node session's counters, live and dropped.
    pub(crate) fn stats(&self) -> crate::ClientStats {
        let mut s = self.retired_stats;
        for c in self.slots.iter().filter_map(|n| n.client.as_ref()) {
            s.accumulate(&c.stats());
        }
        s
    }

    fn unavailable(&self, slot: usize, e: Error) -> Error {
        if matches!(e, Error::NodeUnavailable { .. }) {
            return e;
        }
        let s = &self.slots[slot];
        Error::NodeUnavailable { node: format!("{} ({})", s.id, s.addr), source: Box::new(e) }
    }

    /// Run `op` on the manager of `path`, following the map through `WRONG_NODE`.
    fn routed<T>(
        &mut self,
        path: &ClusterPath,
        mut op: impl FnMut(&mut Client) -> Result<T>,
    ) -> Result<T> {
        let give_up = Instant::now() + WRONG_NODE_RETRY_TIME_MAX;
        let mut backoff = WRONG_NODE_BACKOFF_START;
        loop {
            let slot = self.manager_slot(path);
            match self.on(slot, &mut op) {
                Err(Error::Status(Status::WrongNode)) if Instant::now() < give_up => {
                    if !self.refresh(slot)? {
                        // The node's map is not newer than ours: it has not caught up
                        // with the epoch yet. Give it time.
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(WRONG_NODE_BACKOFF_MAX);
                    }
                }
                r => return r,
            }
        }
    }

    /// Fetch a newer map (from node `slot`, else etcd, else any node); true if the map
    /// in force changed.
    pub(super) fn refresh(&mut self, slot: usize) -> Result<bool> {
        let mut best: Option<PlacementMap> = None;
        if let Ok((_, m)) = self.on(slot, fetch_map) {
            best = Some(m);
        }
        if let Some(e) = &self.etcd {
            if let Ok(Some((m, _))) = e.current_map() {
                if best.as_ref().is_none_or(|b| m.epoch() > b.epoch()) {
                    best = Some(m);
                }
            }
        }
        match best {
            Some(m) if m.epoch() > self.map.epoch() => {
                self.map_refreshes += 1;
                self.install(m)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Act as `uid`/`gid`/`groups` on every node session, now and opened later.
    pub(crate) fn set_cred(&mut self, uid: u32, gid: u32, groups: &[u32]) -> Result<()> {
        // The nodes share a configuration: the first node's answer (NOTSUPP where
        // the identity mode is not `asserted`) is the cluster's, and credentials that
        // were refused are not applied to sessions opened later.
        let first = self.member_slot[0];
        self.cred = None;
        self.on(first, |c| c.set_cred(uid, gid, groups))?;
        for slot in 0..self.slots.len() {
            if slot != first && self.slots[slot].client.is_some() {
                self.on(slot, |c| c.set_cred(uid, gid, groups))?;
            }
        }
        self.cred = Some((uid, gid, groups.to_vec()));
        Ok(())
    }

    pub(crate) fn nodes(&self) -> Vec<ClusterNodeInfo> {
        self.member_slot
            .iter()
            .map(|&i| {
                let s = &self.slots[i];
                ClusterNodeInfo {
                    id: s.id.to_string(),
                    addr: s.addr.clone(),
                    connected: s.client.is_some(),
                    requests: s.requests,
                }
            })
            .collect()
    }

    /// The node id the map names for `path` (for tests and tools).
    pub(crate) fn node_for(&self, path: &str) -> Result<String> {
        Ok(self.map.manager(&cluster_path(path)?).id.to_string())
    }
}

/// A value telling this client's front handles from any other's.
fn handle_nonce() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::getrandom(&mut b).is_err() {
        // No randomness: the clock and pid still differ between clients.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        b = (t.map_or(0, |d| d.as_nanos() as u64) ^ u64::from(std::process::id())).to_le_bytes();
    }
    u64::from_le_bytes(b)
}

/// CLUSTER_MAP on one node: its id and its map.
fn fetch_map(c: &mut Client) -> Result<(String, PlacementMap)> {
    let m = c.call(&Request::ClusterMap)?;
    match c.decode(&m)?.1 {
        Reply::ClusterMap { node_id, map, .. } => {
            let map = PlacementMap::from_json(map).map_err(|e| Error::Cluster(e.to_string()))?;
            Ok((String::from_utf8_lossy(node_id).into_owned(), map))
        }
        _ => Err(crate::error::unexpected_reply(Opcode::ClusterMap)),
    }
}

/// Errors that say the node (not the file) is the problem.
pub(super) fn node_failed(e: &Error) -> bool {
    match e {
        // A refused registration (limit, memory) leaves the connection as it was.
        Error::Transport(t) => t.is_fatal(),
        Error::Disconnected
        | Error::TimedOut
        | Error::NodeUnavailable { .. }
        | Error::Status(Status::BadSession) => true,
        _ => false,
    }
}

/// The cluster path of a client path (relative to the export root or absolute).
pub(crate) fn cluster_path(path: &str) -> Result<ClusterPath> {
    let p = crate::namespace::clean_path(path)?;
    ClusterPath::new(format!("/{p}")).map_err(|e| Error::Cluster(e.to_string()))
}

impl Client {
    /// The cluster's nodes as this client sees them (None: not a cluster client).
    pub fn cluster_nodes(&self) -> Option<Vec<ClusterNodeInfo>> {
        self.cluster.as_ref().map(|c| c.nodes())
    }

    /// The epoch of the placement map this client routes with (None: not a cluster).
    pub fn cluster_epoch(&self) -> Option<u64> {
        self.cluster.as_ref().map(|c| c.epoch())
    }

    /// The id of the node the map names for `path` (None: not a cluster client).
    pub fn cluster_node_for(&self, path: &str) -> Option<Result<String>> {
        self.cluster.as_ref().map(|c| c.node_for(path))
    }

    /// Maps fetched after WRONG_NODE answers (None: not a cluster client).
    pub fn cluster_map_refreshes(&self) -> Option<u64> {
        self.cluster.as_ref().map(|c| c.map_refreshes)
    }

    /// The refusal of a call the front client of a cluster cannot route.
    pub(crate) fn cluster_refuses(&self) -> Result<()> {
        match self.cluster {
            Some(_) => Err(Error::Cluster(
                "this call cannot be routed on a cluster URL (a raw request or chain names \
                 one node's handles): use the path- or handle-relative calls"
                    .into(),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_are_told_from_server_urls() {
        assert_eq!(split_url("dafs://h1:7420/a").unwrap(), None);
        assert_eq!(split_url("dafs+shm:///x.sock/a").unwrap(), None);
        assert_eq!(
            split_url("dafs://h1,h2:9/a/b").unwrap(),
            Some(("dafs://h1:7420,h2:9".into(), "/a/b".into()))
        );
        assert_eq!(
            split_url("dafs+tls://h1,h2/").unwrap(),
            Some(("dafs+tls://h1:7420,h2:7420".into(), "/".into()))
        );
        assert_eq!(
            split_url("dafs+etcd://127.0.0.1:2379/prod/x").unwrap(),
            Some(("dafs+etcd://127.0.0.1:2379/prod".into(), "/x".into()))
        );
        // The target splits again to itself: Client::connect takes either form.
        let (t, _) = split_url("dafs://h1,h2:9/a/b").unwrap().unwrap();
        assert_eq!(split_url(&t).unwrap().unwrap().0, t);
        assert!(matches!(split_url("dafs://h1,,h2/"), Err(Error::Cluster(_))));
        assert!(matches!(split_url("dafs+etcd://e1/"), Err(Error::Cluster(_))));
    }

    #[test]
    fn client_paths_hash_as_the_server_names_them() {
        assert_eq!(cluster_path("a//b/./c").unwrap().to_string(), "/a/b/c");
        assert_eq!(cluster_path("/a/b").unwrap(), cluster_path("a/b/").unwrap());
        assert_eq!(cluster_path("").unwrap().to_string(), "/");
    }
}
