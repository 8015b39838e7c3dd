//! # dafs-cluster — the building blocks of a federated dafs
//!
//! A federated dafs turns N stand-alone `dafsd` servers into one file system (the seed
//! "Federated DAFS"). This crate holds the parts every node and every client must agree
//! on; only the etcd client (and the heartbeat thread over it) does I/O:
//!
//! - [`path`]: the normalized cluster path, the one byte string that is hashed;
//! - [`hash`]: the stable, documented hash of paths and node ids;
//! - [`placement`]: the [`PlacementMap`] (members + epoch), rendezvous (HRW) hashing
//!   to name each path's manager, and the `matched` / `round-robin` home policies;
//! - [`config`]: `cluster.toml`, parsed and validated;
//! - [`url`]: cluster URLs for clients (`dafs://h1,h2/`, `dafs+etcd://host:2379/NAME/`);
//! - [`etcd`]: a small blocking client for etcd's v3 JSON gateway over `std::net`;
//! - [`membership`]: nodes registered under a lease, the placement epoch kept in etcd
//!   and bumped by compare-and-swap when the member set changes;
//! - [`heartbeat`]: a node's thread that keeps its lease, reconciles and rejoins;
//! - [`trace`]: the seed's PostMark pathname set (Table I).
//!
//! Used by `dafsd --cluster` (dafs-server's `cluster`) and by cluster URLs in the
//! client library (dafs-client's `cluster`); see docs/architecture.md, "Federation".

pub mod config;
pub mod etcd;
pub mod hash;
pub mod heartbeat;
pub mod membership;
pub mod path;
pub mod placement;
pub mod trace;
pub mod url;

pub use config::{ClusterConfig, ConfigError};
pub use path::{ClusterPath, PathError};
pub use placement::{Member, NodeId, PlacementError, PlacementMap, Policy, RoundRobin};
pub use url::{ClusterUrl, UrlError};

/// Each node's directory (at the root of its export) where files arrive during a
/// cross-node rename before they take their new name. Node-local: not placed by the
/// map, and left out of the cluster's merged root listing.
pub const XRENAME_STAGING_DIR: &str = ".dafs-xrename";
