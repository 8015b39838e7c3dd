//! Cluster membership and the placement epoch, kept in etcd.
//!
//! Keys, under `/dafs/clusters/NAME/`:
//!
//! - `members/ID` — one per live node, value the [`Member`] as JSON, attached to the
//!   node's **lease**: a node that stops renewing it (crash, partition) disappears
//!   when the lease expires, with no action from anyone;
//! - `map` — the current [`PlacementMap`] as JSON (epoch, hash, policy, members).
//!
//! The map is what clients and servers route by. It changes only through
//! [`Membership::reconcile`]: read the live members and the map (in one range, so at
//! one etcd revision); if they differ, write
//! the map again with the epoch + 1 and the live members, **only if** `map` still has
//! the `mod_revision` just read (an etcd transaction). Every node reconciles after
//! it joins and on every heartbeat, so a join, a leave or an expired lease bumps the
//! epoch exactly once, whoever sees it first; the losers of the race re-read and find
//! nothing left to do. No consensus of our own: etcd's transaction is the only
//! arbiter.
//!
//! A member's `incarnation` is its lease id, so a node back under a new lease is a
//! changed member even if no one saw it gone. The policy is fixed by the first map
//! written; later epochs keep it whatever the writer's own configuration says, so
//! nodes configured differently cannot flip it back and forth.

use std::thread;
use std::time::{Duration, Instant};

use crate::config::{self, ClusterConfig};
use crate::etcd::{EtcdClient, EtcdError, LeaseId};
use crate::placement::{MapDecodeError, Member, NodeId, PlacementError, PlacementMap, Policy};
use crate::url::ClusterUrl;

/// How many times a compare-and-swap of the map is retried before giving up: each
/// failure means another node wrote the map in between, so a handful suffices unless
/// members churn faster than etcd commits.
pub const CAS_ATTEMPTS_MAX: u32 = 32;

/// Every way a membership operation fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    #[error("node id {0} is already registered by a live node")]
    IdTaken(NodeId),
    #[error("member record {key} in etcd is invalid: {why}")]
    BadMember { key: String, why: String },
    #[error("placement map in etcd: {0}")]
    BadMap(#[from] MapDecodeError),
    #[error("no live member in etcd: the cluster has no placement map to write")]
    NoLiveMembers,
    #[error("{0}")]
    Placement(#[from] PlacementError),
    #[error("the placement map changed under {0} attempts in a row; giving up")]
    Contended(u32),
    #[error("the epoch did not move past {epoch} within {timeout_ms} ms")]
    EpochWaitTimeout { epoch: u64, timeout_ms: u64 },
}

/// One cluster's membership in etcd, seen by one node or client.
#[derive(Debug, Clone)]
pub struct Membership {
    etcd: EtcdClient,
    prefix: String,
    policy: Policy,
}

/// Live members and the map at one etcd revision.
struct Snapshot {
    live: Vec<Member>,
    map: Option<(PlacementMap, i64)>,
}

/// A node's registration: its lease and member record.
#[derive(Debug)]
pub struct Registration {
    pub member: Member,
    pub lease: LeaseId,
}

impl Membership {
    /// The cluster `name` (validated by the config or URL parser) in `etcd`; `policy`
    /// is written into the maps this handle creates.
    pub fn new(etcd: EtcdClient, name: &str, policy: Policy) -> Self {
        assert!(!name.is_empty() && !name.contains('/'), "cluster names are validated before use");
        Membership { etcd, prefix: format!("/dafs/clusters/{name}/"), policy }
    }

    /// The membership a cluster.toml with `etcd` names (`None`: static membership).
    pub fn from_config(config: &ClusterConfig) -> Option<Membership> {
        match &config.membership {
            config::Membership::Etcd { endpoints } => {
                let etcd = EtcdClient::new(endpoints.clone(), config.etcd_timeout);
                Some(Membership::new(etcd, &config.name, config.policy))
            }
            config::Membership::Static { .. } => None,
        }
    }

    /// The membership a `dafs+etcd://` URL names, for a client that reads the map
    /// (`None` for other URLs). The policy is the one written in the map.
    pub fn from_url(url: &ClusterUrl, timeout: Duration) -> Option<Membership> {
        match url {
            ClusterUrl::Etcd { endpoints, name, .. } => {
                let etcd = EtcdClient::new(endpoints.clone(), timeout);
                Some(Membership::new(etcd, name, Policy::default()))
            }
            ClusterUrl::Static { .. } => None,
        }
    }

    fn member_key(&self, id: &NodeId) -> Vec<u8> {
        format!("{}members/{id}", self.prefix).into_bytes()
    }

    fn map_key(&self) -> Vec<u8> {
        format!("{}map", self.prefix).into_bytes()
    }

    /// Join: grant a lease of `ttl_s`, write the member record under it (refused if a
    /// live node holds the id), then reconcile so the epoch records the join.
    ///
    /// The member's `incarnation` is set to the lease id, so a node that joins again
    /// (after a restart or a lost lease) always makes a new epoch, even if no other
    /// node saw it gone. A node restarted within its old lease's TTL finds its id still
    /// held ([`MembershipError::IdTaken`]) until that lease expires.
    pub fn join(
        &self,
        member: Member,
        ttl_s: u64,
    ) -> Result<(Registration, PlacementMap), MembershipError> {
        let lease = self.etcd.grant(ttl_s)?;
        assert!(lease > 0, "etcd grants positive lease ids");
        let member = Member { incarnation: lease as u64, ..member };
        let value = serde_json::to_vec(&member).expect("a member always serializes");
        let created =
            self.etcd.put_if_mod_revision(&self.member_key(&member.id), &value, 0, Some(lease));
        match created {
            Ok(true) => {}
            Ok(false) => {
                let _ = self.etcd.revoke(lease);
                return Err(MembershipError::IdTaken(member.id));
            }
            Err(e) => {
                let _ = self.etcd.revoke(lease);
                return Err(e.into());
            }
        }
        let map = self.reconcile()?;
        Ok((Registration { member, lease }, map))
    }

    /// Renew the lease and reconcile: what a node does every heartbeat (well within
    /// the lease TTL, e.g. a third of it). [`EtcdError::LeaseExpired`] means the node
    /// has been dropped from the cluster and must join again.
    pub fn heartbeat(&self, reg: &Registration) -> Result<PlacementMap, MembershipError> {
        self.etcd.keep_alive(reg.lease)?;
        self.reconcile()
    }

    /// Leave cleanly: revoke the lease (the record goes at once) and reconcile.
    /// Returns the new map, or `None` if this was the last member.
    pub fn leave(&self, reg: Registration) -> Result<Option<PlacementMap>, MembershipError> {
        self.etcd.revoke(reg.lease)?;
        match self.reconcile() {
            Ok(m) => Ok(Some(m)),
            Err(MembershipError::NoLiveMembers) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The members whose lease is live, sorted by id.
    pub fn live_members(&self) -> Result<Vec<Member>, MembershipError> {
        Ok(self.snapshot()?.live)
    }

    /// The placement map in etcd, with its mod_revision (`None`: never written).
    pub fn current_map(&self) -> Result<Option<(PlacementMap, i64)>, MembershipError> {
        match self.etcd.get(&self.map_key())? {
            None => Ok(None),
            Some(kv) => Ok(Some((PlacementMap::from_json(&kv.value)?, kv.mod_revision))),
        }
    }

    /// The live members and the map, read in **one** range so both are from the same
    /// etcd revision. Two separate reads would let a writer pair an old member list
    /// with a newer map and write a map that drops a node which had already joined.
    fn snapshot(&self) -> Result<Snapshot, MembershipError> {
        let members_prefix = format!("{}members/", self.prefix).into_bytes();
        let mut snap = Snapshot { live: Vec::new(), map: None };
        for kv in self.etcd.get_prefix(self.prefix.as_bytes())? {
            if kv.key == self.map_key() {
                snap.map = Some((PlacementMap::from_json(&kv.value)?, kv.mod_revision));
            } else if kv.key.starts_with(&members_prefix) {
                snap.live.push(self.member_of(&kv.key, &kv.value)?);
            }
        }
        Ok(snap)
    }

    fn member_of(&self, key: &[u8], value: &[u8]) -> Result<Member, MembershipError> {
        let key_text = String::from_utf8_lossy(key).into_owned();
        let m: Member = serde_json::from_slice(value).map_err(|e| MembershipError::BadMember {
            key: key_text.clone(),
            why: e.to_string(),
        })?;
        if key != self.member_key(&m.id) {
            return Err(MembershipError::BadMember {
                key: key_text,
                why: format!("holds member {}", m.id),
            });
        }
        Ok(m)
    }

    /// Make the map match the live members, bumping the epoch by one if they differ.
    /// Returns the map in force afterwards.
    pub fn reconcile(&self) -> Result<PlacementMap, MembershipError> {
        for _ in 0..CAS_ATTEMPTS_MAX {
            let Snapshot { live, map } = self.snapshot()?;
            if let Some((current, _)) = &map {
                if current.same_members(&live) {
                    return Ok(current.clone());
                }
            }
            if live.is_empty() {
                return Err(MembershipError::NoLiveMembers);
            }
            if let Some(next) = self.write_next(map.as_ref(), live)? {
                return Ok(next);
            }
        }
        Err(MembershipError::Contended(CAS_ATTEMPTS_MAX))
    }

    /// Write the live members under the next epoch whether or not they changed (to
    /// force a new epoch, e.g. after a policy change). Returns the new map.
    pub fn bump_epoch(&self) -> Result<PlacementMap, MembershipError> {
        for _ in 0..CAS_ATTEMPTS_MAX {
            let Snapshot { live, map } = self.snapshot()?;
            if live.is_empty() {
                return Err(MembershipError::NoLiveMembers);
            }
            if let Some(next) = self.write_next(map.as_ref(), live)? {
                return Ok(next);
            }
        }
        Err(MembershipError::Contended(CAS_ATTEMPTS_MAX))
    }

    /// Compare-and-swap: the map with epoch + 1 if `current` is still the stored map.
    fn write_next(
        &self,
        current: Option<&(PlacementMap, i64)>,
        members: Vec<Member>,
    ) -> Result<Option<PlacementMap>, MembershipError> {
        let (epoch, rev, policy) =
            current.map_or((0, 0, self.policy), |(m, rev)| (m.epoch(), *rev, m.policy()));
        let next = PlacementMap::new(epoch + 1, policy, members)?;
        let written =
            self.etcd.put_if_mod_revision(&self.map_key(), next.to_json().as_bytes(), rev, None)?;
        Ok(written.then_some(next))
    }

    /// Poll until the map's epoch is above `epoch`, every `poll_interval`, for at most
    /// `timeout`. (etcd's watch would answer sooner; over the gateway it is a streamed
    /// reply, and an epoch change is rare enough that polling costs nothing.)
    pub fn wait_for_epoch_after(
        &self,
        epoch: u64,
        poll_interval: Duration,
        timeout: Duration,
    ) -> Result<PlacementMap, MembershipError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((map, _)) = self.current_map()? {
                if map.epoch() > epoch {
                    return Ok(map);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(MembershipError::EpochWaitTimeout {
                    epoch,
                    timeout_ms: timeout.as_millis() as u64,
                });
            }
            thread::sleep(poll_interval.min(left));
        }
    }
}
