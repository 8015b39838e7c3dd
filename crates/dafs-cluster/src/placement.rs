//! Which node manages and holds each path: the placement map and its policies.
//!
//! Following the seed (Federated DAFS, §III-A), every path has a **manager** named by a
//! fixed hash of its full normalized pathname. Directories are *virtual*: the same
//! directory exists on every node and the manager of a directory's path keeps the
//! merged listing; the manager of a file's path records the file's **home**, the node
//! whose local file system holds it. The policy decides the home at create time:
//!
//! - [`Policy::Matched`] (the seed's default): home = manager. A client that applies
//!   the same hash sends each request straight to the node holding the file; no
//!   server-to-server hop.
//! - [`Policy::RoundRobin`]: the node that receives a create picks the home in turn
//!   ([`RoundRobin`]); the manager records it. About (N−1)/N of the requests then land
//!   on a node that must forward them (the seed's Fig. 7).
//!
//! The manager is chosen by rendezvous (highest-random-weight) hashing over the member
//! ids: each member scores the path, the highest score wins. Adding a member to N moves
//! only the names it now wins, about 1/(N+1) of them, and removing *any* member moves
//! only that member's names. Jump consistent hashing moves as little but can only
//! remove the *last* bucket, so a node that fails in the middle of the list would
//! reshuffle everyone after it; the O(N) cost of HRW per lookup is nothing at cluster
//! sizes (tens of nodes) next to a network round trip.
//!
//! Members are identified by a stable [`NodeId`], never by their address: a node moved
//! to another address keeps its files. The map carries an **epoch**, bumped whenever
//! the member set changes, so a node and a client can tell which map a decision was
//! made under.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::hash::{self, HASH_NAME};
use crate::path::ClusterPath;

/// Most members a placement map may hold: placement scores every member for every
/// path, and the epoch record in etcd holds them all in one value.
pub const MEMBERS_MAX: usize = 1024;

/// Longest node id, in bytes.
pub const NODE_ID_BYTES_MAX: usize = 128;

/// Why a placement map or node id is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("a cluster needs at least one member")]
    NoMembers,
    #[error("too many members ({0}; at most {MEMBERS_MAX})")]
    TooManyMembers(usize),
    #[error("member id {0:?} appears twice")]
    DuplicateId(String),
    #[error("member address {0:?} appears twice")]
    DuplicateAddr(String),
    #[error(
        "invalid node id {0:?}: 1 to {NODE_ID_BYTES_MAX} bytes of letters, digits and . _ - : [ ]"
    )]
    BadNodeId(String),
    #[error("member {0:?} has an empty address")]
    EmptyAddr(String),
    #[error("unknown placement policy {0:?} (expected \"matched\" or \"round-robin\")")]
    UnknownPolicy(String),
    #[error("unknown hash {0:?} (this build knows only \"{HASH_NAME}\")")]
    UnknownHash(String),
}

/// A member's stable identity (also a key component in etcd, hence no `/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeId(String);

impl NodeId {
    pub fn new(id: impl Into<String>) -> Result<Self, PlacementError> {
        let id = id.into();
        let ok_char = |c: char| c.is_ascii_alphanumeric() || "._-:[]".contains(c);
        if id.is_empty() || id.len() > NODE_ID_BYTES_MAX || !id.chars().all(ok_char) {
            return Err(PlacementError::BadNodeId(id));
        }
        Ok(NodeId(id))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for NodeId {
    type Error = PlacementError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        NodeId::new(s)
    }
}

impl From<NodeId> for String {
    fn from(id: NodeId) -> String {
        id.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One server of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub id: NodeId,
    /// Where clients and peers reach it (`host:port`).
    pub addr: String,
    /// Which life of the node this is (with etcd: the lease it joined under; 0 with
    /// static membership). A node that restarts or rejoins after losing its lease is a
    /// changed member, so the epoch moves even if nobody saw it gone: its open files,
    /// locks and sessions did not survive.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub incarnation: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Member {
    /// A member with no incarnation (static membership).
    pub fn new(id: NodeId, addr: impl Into<String>) -> Self {
        Member { id, addr: addr.into(), incarnation: 0 }
    }
}

/// How a new file's home is chosen (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    #[default]
    Matched,
    RoundRobin,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Matched => "matched",
            Policy::RoundRobin => "round-robin",
        }
    }
}

impl FromStr for Policy {
    type Err = PlacementError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "matched" => Ok(Policy::Matched),
            "round-robin" => Ok(Policy::RoundRobin),
            other => Err(PlacementError::UnknownPolicy(other.to_string())),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The members of the cluster under one epoch, and the placement they imply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementMap {
    epoch: u64,
    policy: Policy,
    /// Sorted by id, so two maps with the same members compare equal and round-robin
    /// order does not depend on how the list was written.
    members: Vec<Member>,
    /// `hash::key` of each member's id, in `members` order (computed once).
    node_keys: Vec<u64>,
}

impl PlacementMap {
    /// A map of `members` under `epoch`. Ids and addresses must be unique.
    pub fn new(
        epoch: u64,
        policy: Policy,
        mut members: Vec<Member>,
    ) -> Result<Self, PlacementError> {
        if members.is_empty() {
            return Err(PlacementError::NoMembers);
        }
        if members.len() > MEMBERS_MAX {
            return Err(PlacementError::TooManyMembers(members.len()));
        }
        members.sort_by(|a, b| a.id.cmp(&b.id));
        for w in members.windows(2) {
            if w[0].id == w[1].id {
                return Err(PlacementError::DuplicateId(w[0].id.to_string()));
            }
        }
        let mut addrs: Vec<&str> = members.iter().map(|m| m.addr.as_str()).collect();
        addrs.sort_unstable();
        if let Some(w) = addrs.windows(2).find(|w| w[0] == w[1]) {
            return Err(PlacementError::DuplicateAddr(w[0].to_string()));
        }
        if let Some(m) = members.iter().find(|m| m.addr.trim().is_empty()) {
            return Err(PlacementError::EmptyAddr(m.id.to_string()));
        }
        let node_keys = members.iter().map(|m| hash::key(m.id.as_str().as_bytes())).collect();
        Ok(PlacementMap { epoch, policy, members, node_keys })
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Members, sorted by id.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    pub fn member(&self, id: &NodeId) -> Option<&Member> {
        self.index_of(id).map(|i| &self.members[i])
    }

    /// Position of `id` in [`members`](Self::members).
    pub fn index_of(&self, id: &NodeId) -> Option<usize> {
        self.members.binary_search_by(|m| m.id.cmp(id)).ok()
    }

    /// Index of the member that manages `path` (rendezvous hashing).
    pub fn manager_index(&self, path: &ClusterPath) -> usize {
        let path_key = hash::key(path.as_bytes());
        let mut best = 0;
        let mut best_score = hash::score(path_key, self.node_keys[0]);
        for (i, &nk) in self.node_keys.iter().enumerate().skip(1) {
            let s = hash::score(path_key, nk);
            // Members are sorted by id, so a strict `>` gives ties to the smaller id.
            if s > best_score {
                best = i;
                best_score = s;
            }
        }
        best
    }

    /// The member that manages `path`: for a file, it records the home; for a
    /// directory, it keeps the merged (virtual) listing.
    pub fn manager(&self, path: &ClusterPath) -> &Member {
        &self.members[self.manager_index(path)]
    }

    /// The home of a file about to be created at `path` by the node holding `rr`:
    /// the manager under `matched`, the next member in turn under `round-robin`.
    pub fn home_for_create(&self, path: &ClusterPath, rr: &mut RoundRobin) -> &Member {
        match self.policy {
            Policy::Matched => self.manager(path),
            Policy::RoundRobin => &self.members[rr.next_index(self.members.len())],
        }
    }

    /// The same members under another epoch (what a bump writes).
    pub fn with_epoch(&self, epoch: u64) -> PlacementMap {
        PlacementMap { epoch, ..self.clone() }
    }

    /// Whether `other` has the same members (ids, addresses, incarnations) as `self`.
    pub fn same_members(&self, other: &[Member]) -> bool {
        let mut o: Vec<&Member> = other.iter().collect();
        o.sort_by(|a, b| a.id.cmp(&b.id));
        self.members.len() == o.len() && self.members.iter().zip(o).all(|(a, b)| a == b)
    }

    /// How many of `paths` each member manages, in [`members`](Self::members) order.
    pub fn spread<'a>(&self, paths: impl IntoIterator<Item = &'a ClusterPath>) -> Vec<usize> {
        let mut counts = vec![0; self.members.len()];
        for p in paths {
            counts[self.manager_index(p)] += 1;
        }
        counts
    }

    /// The JSON form stored in etcd and sent to clients.
    pub fn to_json(&self) -> String {
        let rec = MapRecord {
            epoch: self.epoch,
            hash: HASH_NAME.to_string(),
            policy: self.policy.as_str().to_string(),
            members: self.members.clone(),
        };
        serde_json::to_string(&rec).expect("a map record always serializes")
    }

    /// Parse [`to_json`](Self::to_json)'s form, validating it like [`new`](Self::new).
    pub fn from_json(text: &[u8]) -> Result<Self, MapDecodeError> {
        let rec: MapRecord =
            serde_json::from_slice(text).map_err(|e| MapDecodeError::Json(e.to_string()))?;
        if rec.hash != HASH_NAME {
            return Err(PlacementError::UnknownHash(rec.hash).into());
        }
        let policy = rec.policy.parse()?;
        Ok(PlacementMap::new(rec.epoch, policy, rec.members)?)
    }
}

/// Why a stored placement map could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapDecodeError {
    #[error("placement map is not valid JSON: {0}")]
    Json(String),
    #[error("placement map: {0}")]
    Invalid(#[from] PlacementError),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MapRecord {
    epoch: u64,
    hash: String,
    policy: String,
    members: Vec<Member>,
}

/// The round-robin cursor of one node: the next home it gives a new file.
///
/// Each node starts at its own position so that N nodes receiving creates at the same
/// time do not all send their first file to the same home.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    next: usize,
}

impl RoundRobin {
    /// A cursor for the node at `start` in the map's member order.
    pub fn starting_at(start: usize) -> Self {
        RoundRobin { next: start }
    }

    /// The next index among `members_len` members (the map may have changed size).
    pub fn next_index(&mut self, members_len: usize) -> usize {
        assert!(members_len > 0, "a placement map always has a member");
        let i = self.next % members_len;
        self.next = i + 1;
        i
    }
}

#[cfg(test)]
mod tests;
