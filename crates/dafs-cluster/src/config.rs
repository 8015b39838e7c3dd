//! `cluster.toml`: how a `dafsd` finds the rest of its cluster.
//!
//! ```toml
//! [cluster]
//! # Static membership: the whole map, nothing else to run. A plain string is a member
//! # whose id is its address; give an id to be able to move a node to another address
//! # without moving its files.
//! members = ["127.0.0.1:7420", { id = "n2", addr = "127.0.0.1:7421" }]
//! epoch = 1                  # bump it by hand when you edit members
//! placement = "matched"      # or "round-robin" (`policy` is the older spelling)
//! block_cache_bytes = 67108864  # round-robin: LRU of remote blocks on a forwarding
//!                               # node (default: from the memory budget; 0 = off)
//! hash = "rendezvous"        # the only one: hrw-fnv1a64-fmix64
//!
//! # …or membership kept in etcd (then no `members`):
//! # etcd = "http://127.0.0.1:2379"      # or a list
//! # name = "dafs"                       # key prefix /dafs/clusters/NAME/
//! # lease_ttl_s = 10                    # a silent node leaves after this
//! # etcd_timeout_ms = 2000              # every etcd request
//! # epoch_poll_interval_ms = 500        # how often epoch changes are looked for
//! ```
//!
//! Unknown keys are refused (a typo must not silently fall back to a default).

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::hash::HASH_NAME;
use crate::placement::{Member, NodeId, PlacementError, PlacementMap, Policy};
use crate::url::{valid_cluster_name, with_port, ETCD_PORT_DEFAULT};

/// Default cluster name (etcd key prefix).
pub const NAME_DEFAULT: &str = "dafs";
/// Default lease of a node's registration in etcd: a node silent this long leaves.
pub const LEASE_TTL_S_DEFAULT: u64 = 10;
/// Accepted lease range: etcd's minimum lease is a few seconds anyway, and a lease
/// above an hour would keep a dead node's names unreachable for that long.
pub const LEASE_TTL_S_RANGE: (u64, u64) = (1, 3600);
/// Default timeout of one etcd request (connect + send + reply).
pub const ETCD_TIMEOUT_MS_DEFAULT: u64 = 2000;
pub const ETCD_TIMEOUT_MS_RANGE: (u64, u64) = (50, 60_000);
/// Default interval between two looks at the epoch in etcd.
pub const EPOCH_POLL_INTERVAL_MS_DEFAULT: u64 = 500;
pub const EPOCH_POLL_INTERVAL_MS_RANGE: (u64, u64) = (10, 60_000);
/// Longest cluster.toml read, in bytes: a placement map of `MEMBERS_MAX` members fits.
pub const CONFIG_BYTES_MAX: u64 = 1 << 20;

/// Why a cluster configuration is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{0} is larger than {CONFIG_BYTES_MAX} bytes")]
    TooLarge(String),
    #[error("cluster.toml: {0}")]
    Toml(String),
    #[error("cluster.toml: no [cluster] table")]
    NoClusterTable,
    #[error(
        "cluster.toml: give either members = [\"host:port\", ...] or etcd = \"http://host:port\""
    )]
    NoMembership,
    #[error(
        "cluster.toml: members and etcd exclude each other (with etcd, nodes register themselves)"
    )]
    BothMemberships,
    #[error("cluster.toml: {0}")]
    Placement(#[from] PlacementError),
    #[error("cluster.toml: etcd endpoint {0:?}: {1}")]
    BadEtcdEndpoint(String, &'static str),
    #[error("cluster.toml: {0}")]
    BadName(#[from] crate::url::UrlError),
    #[error("cluster.toml: epoch is kept in etcd when etcd is set; remove it")]
    EpochWithEtcd,
    #[error("cluster.toml: etcd_timeout_ms = {timeout_ms} is more than a third of lease_ttl_s = {lease_ttl_s}: a node could not renew its lease in time (lower the timeout or raise the lease)")]
    TimeoutVsLease { timeout_ms: u64, lease_ttl_s: u64 },
    #[error("cluster.toml: placement and policy name the same setting; give one")]
    PlacementTwice,
    #[error("cluster.toml: {field} = {value} is out of range {min}..={max}")]
    OutOfRange { field: &'static str, value: u64, min: u64, max: u64 },
}

/// Where the member list comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Membership {
    /// Written in cluster.toml, with the epoch it is valid under.
    Static { members: Vec<Member>, epoch: u64 },
    /// Kept in etcd at these endpoints (`host:port`).
    Etcd { endpoints: Vec<String> },
}

/// A validated cluster.toml.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    pub name: String,
    pub policy: Policy,
    pub membership: Membership,
    pub lease_ttl_s: u64,
    pub etcd_timeout: Duration,
    pub epoch_poll_interval: Duration,
    /// `block_cache_bytes`: the forwarding node's cache of remote blocks under
    /// round-robin placement (None: the server sizes it from its memory budget).
    pub block_cache_bytes: Option<u64>,
}

/// Largest `block_cache_bytes` accepted (a typo must not reserve the machine).
pub const BLOCK_CACHE_BYTES_MAX: u64 = 1 << 40;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    cluster: Option<Raw>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    members: Option<Vec<RawMember>>,
    epoch: Option<u64>,
    policy: Option<String>,
    placement: Option<String>,
    block_cache_bytes: Option<u64>,
    hash: Option<String>,
    etcd: Option<OneOrMany>,
    name: Option<String>,
    lease_ttl_s: Option<u64>,
    etcd_timeout_ms: Option<u64>,
    epoch_poll_interval_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawMember {
    Addr(String),
    Full { id: String, addr: String },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl ClusterConfig {
    /// Read and validate a cluster.toml file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let io = |source| ConfigError::Io { path: path.display().to_string(), source };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > CONFIG_BYTES_MAX {
            return Err(ConfigError::TooLarge(path.display().to_string()));
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Self::parse(&text)
    }

    /// Parse and validate cluster.toml text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let file: File = toml::from_str(text).map_err(|e| ConfigError::Toml(e.to_string()))?;
        let raw = file.cluster.ok_or(ConfigError::NoClusterTable)?;
        if let Some(h) = &raw.hash {
            if h != "rendezvous" && h != HASH_NAME {
                return Err(PlacementError::UnknownHash(h.clone()).into());
            }
        }
        let policy = match (raw.placement.as_deref(), raw.policy.as_deref()) {
            (Some(_), Some(_)) => return Err(ConfigError::PlacementTwice),
            (p, q) => p.or(q).unwrap_or("matched").parse()?,
        };
        let membership = match (raw.members, raw.etcd) {
            (Some(_), Some(_)) => return Err(ConfigError::BothMemberships),
            (None, None) => return Err(ConfigError::NoMembership),
            (Some(list), None) => {
                let members = list.into_iter().map(member).collect::<Result<Vec<_>, _>>()?;
                let epoch = raw.epoch.unwrap_or(1);
                // Validate now: a bad list must fail at start, not at first use.
                PlacementMap::new(epoch, policy, members.clone())?;
                Membership::Static { members, epoch }
            }
            (None, Some(e)) => {
                if raw.epoch.is_some() {
                    return Err(ConfigError::EpochWithEtcd);
                }
                let list = match e {
                    OneOrMany::One(s) => vec![s],
                    OneOrMany::Many(v) => v,
                };
                if list.is_empty() {
                    return Err(ConfigError::NoMembership);
                }
                let endpoints = list.iter().map(|s| etcd_endpoint(s)).collect::<Result<_, _>>()?;
                Membership::Etcd { endpoints }
            }
        };
        let name = valid_cluster_name(raw.name.as_deref().unwrap_or(NAME_DEFAULT))?;
        let config = ClusterConfig {
            name,
            policy,
            membership,
            lease_ttl_s: in_range(
                "lease_ttl_s",
                raw.lease_ttl_s,
                LEASE_TTL_S_DEFAULT,
                LEASE_TTL_S_RANGE,
            )?,
            etcd_timeout: Duration::from_millis(in_range(
                "etcd_timeout_ms",
                raw.etcd_timeout_ms,
                ETCD_TIMEOUT_MS_DEFAULT,
                ETCD_TIMEOUT_MS_RANGE,
            )?),
            epoch_poll_interval: Duration::from_millis(in_range(
                "epoch_poll_interval_ms",
                raw.epoch_poll_interval_ms,
                EPOCH_POLL_INTERVAL_MS_DEFAULT,
                EPOCH_POLL_INTERVAL_MS_RANGE,
            )?),
            block_cache_bytes: match raw.block_cache_bytes {
                None => None,
                Some(v) => {
                    Some(in_range("block_cache_bytes", Some(v), 0, (0, BLOCK_CACHE_BYTES_MAX))?)
                }
            },
        };
        config.check_lease_timing()?;
        Ok(config)
    }

    /// With etcd, a heartbeat renews the lease every third of its TTL and each etcd
    /// call may take up to the timeout: a timeout above TTL/3 could let a live node's
    /// lease expire while it waits for a slow etcd.
    fn check_lease_timing(&self) -> Result<(), ConfigError> {
        let timeout_ms = self.etcd_timeout.as_millis() as u64;
        if matches!(self.membership, Membership::Etcd { .. })
            && timeout_ms * 3 > self.lease_ttl_s * 1000
        {
            return Err(ConfigError::TimeoutVsLease { timeout_ms, lease_ttl_s: self.lease_ttl_s });
        }
        Ok(())
    }

    /// The placement map of a static cluster (`None` with etcd: ask etcd).
    pub fn static_map(&self) -> Option<PlacementMap> {
        match &self.membership {
            Membership::Static { members, epoch } => Some(
                PlacementMap::new(*epoch, self.policy, members.clone())
                    .expect("validated by parse"),
            ),
            Membership::Etcd { .. } => None,
        }
    }
}

fn member(raw: RawMember) -> Result<Member, PlacementError> {
    let (id, addr) = match raw {
        RawMember::Addr(a) => (a.clone(), a),
        RawMember::Full { id, addr } => (id, addr),
    };
    Ok(Member::new(NodeId::new(id)?, addr))
}

/// `http://host[:port]` -> `host:port`.
fn etcd_endpoint(s: &str) -> Result<String, ConfigError> {
    let bad = |why| ConfigError::BadEtcdEndpoint(s.to_string(), why);
    if s.starts_with("https://") {
        return Err(bad("https is not supported (the etcd client speaks plain HTTP on loopback or a trusted network)"));
    }
    let rest = s.strip_prefix("http://").ok_or(bad("expected http://host:port"))?;
    let host = rest.strip_suffix('/').unwrap_or(rest);
    if host.is_empty() || host.contains('/') {
        return Err(bad("expected http://host:port with no path"));
    }
    with_port(host, ETCD_PORT_DEFAULT).map_err(|_| bad("expected http://host:port"))
}

fn in_range(
    field: &'static str,
    v: Option<u64>,
    default: u64,
    (min, max): (u64, u64),
) -> Result<u64, ConfigError> {
    let value = v.unwrap_or(default);
    if value < min || value > max {
        return Err(ConfigError::OutOfRange { field, value, min, max });
    }
    Ok(value)
}

#[cfg(test)]
mod tests;
