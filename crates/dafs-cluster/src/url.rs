//! Cluster URLs: how a client names a federated dafs.
//!
//! - `dafs://h1:7420,h2:7420,h3/PATH` (or `dafs+tls://…`): contact points of a cluster
//!   with static membership. The client learns the placement map (ids, epoch) from
//!   any of them, so the list need not be complete nor in any order.
//! - `dafs+etcd://e1:2379,e2:2379/NAME/PATH`: the cluster registered in etcd under
//!   `NAME` (the `name` of its cluster.toml).
//!
//! Hosts without a port get dafsd's default (7420) or etcd's (2379), as
//! `dafs_client::config::parse_url` does for a single server; `PATH` defaults to `/`.

/// The port a `dafs://` host without one names (dafsd's default, as in dafs-client).
pub const DAFS_PORT_DEFAULT: u16 = 7420;
/// The port a `dafs+etcd://` host without one names (etcd's client port).
pub const ETCD_PORT_DEFAULT: u16 = 2379;
/// Most hosts one URL may list.
pub const URL_HOSTS_MAX: usize = 64;

/// Why a cluster URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("cluster URL must start with dafs://, dafs+tls:// or dafs+etcd://")]
    Scheme,
    #[error("cluster URL has an empty host (check the commas)")]
    EmptyHost,
    #[error("invalid host {0:?} (expected HOST, HOST:PORT or [IPv6]:PORT)")]
    BadHost(String),
    #[error("cluster URL lists {0} twice")]
    DuplicateHost(String),
    #[error("cluster URL lists more than {URL_HOSTS_MAX} hosts")]
    TooManyHosts,
    #[error("dafs+etcd:// URL names no cluster (expected dafs+etcd://HOST:PORT/NAME/)")]
    NoClusterName,
    #[error("invalid cluster name {0:?}: 1 to 64 letters, digits, '.', '_' or '-'")]
    BadClusterName(String),
}

/// A parsed cluster URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterUrl {
    /// Static membership: contact points (`host:port`), TLS or not, path inside.
    Static { tls: bool, hosts: Vec<String>, path: String },
    /// Membership in etcd: its endpoints (`host:port`), the cluster name, path inside.
    Etcd { endpoints: Vec<String>, name: String, path: String },
}

impl ClusterUrl {
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        if let Some(rest) = url.strip_prefix("dafs+etcd://") {
            let (hosts, path) = split_hosts(rest, ETCD_PORT_DEFAULT)?;
            let path = path.trim_start_matches('/');
            let (name, inner) = match path.find('/') {
                Some(i) => (&path[..i], &path[i..]),
                None => (path, "/"),
            };
            if name.is_empty() {
                return Err(UrlError::NoClusterName);
            }
            let name = valid_cluster_name(name)?;
            return Ok(ClusterUrl::Etcd { endpoints: hosts, name, path: inner.to_string() });
        }
        let (tls, rest) = match url.strip_prefix("dafs+tls://") {
            Some(r) => (true, r),
            None => (false, url.strip_prefix("dafs://").ok_or(UrlError::Scheme)?),
        };
        let (hosts, path) = split_hosts(rest, DAFS_PORT_DEFAULT)?;
        Ok(ClusterUrl::Static { tls, hosts, path: path.to_string() })
    }

    /// The path inside the cluster's namespace.
    pub fn path(&self) -> &str {
        match self {
            ClusterUrl::Static { path, .. } | ClusterUrl::Etcd { path, .. } => path,
        }
    }
}

/// A cluster name (also an etcd key component): 1 to 64 of `[A-Za-z0-9._-]`.
pub fn valid_cluster_name(name: &str) -> Result<String, UrlError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if name.is_empty() || name.len() > 64 || !name.chars().all(ok) || name == "." || name == ".." {
        return Err(UrlError::BadClusterName(name.to_string()));
    }
    Ok(name.to_string())
}

/// `h1,h2:9/rest` -> (["h1:DEFAULT", "h2:9"], "/rest").
fn split_hosts(rest: &str, port_default: u16) -> Result<(Vec<String>, &str), UrlError> {
    let (list, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut hosts: Vec<String> = Vec::new();
    for h in list.split(',') {
        if h.is_empty() {
            return Err(UrlError::EmptyHost);
        }
        if hosts.len() == URL_HOSTS_MAX {
            return Err(UrlError::TooManyHosts);
        }
        let h = with_port(h, port_default)?;
        if hosts.contains(&h) {
            return Err(UrlError::DuplicateHost(h));
        }
        hosts.push(h);
    }
    Ok((hosts, path))
}

/// Append the default port unless one is given (`[v6]` alone has none), and check
/// the result is `HOST:PORT` with a host and a port in 1..=65535.
pub(crate) fn with_port(host: &str, port_default: u16) -> Result<String, UrlError> {
    let full = if host.contains(':') && !host.ends_with(']') {
        host.to_string()
    } else {
        format!("{host}:{port_default}")
    };
    let (h, port) = full.rsplit_once(':').expect("a port was ensured above");
    let host_ok = !h.is_empty() && !h.chars().any(|c| c.is_whitespace() || c == '/' || c == ',');
    let port_ok = port.parse::<u16>().is_ok_and(|p| p > 0);
    let brackets_ok = !h.contains(':') || (h.starts_with('[') && h.ends_with(']'));
    if !(host_ok && port_ok && brackets_ok) {
        return Err(UrlError::BadHost(host.to_string()));
    }
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(tls: bool, hosts: &[&str], path: &str) -> ClusterUrl {
        ClusterUrl::Static {
            tls,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            path: path.into(),
        }
    }

    #[test]
    fn static_urls() {
        assert_eq!(
            ClusterUrl::parse("dafs://h1:7420,h2:7421,h3/").unwrap(),
            stat(false, &["h1:7420", "h2:7421", "h3:7420"], "/")
        );
        assert_eq!(ClusterUrl::parse("dafs://h1").unwrap(), stat(false, &["h1:7420"], "/"));
        assert_eq!(
            ClusterUrl::parse("dafs+tls://[::1],[::1]:9/a/b").unwrap(),
            stat(true, &["[::1]:7420", "[::1]:9"], "/a/b")
        );
        assert_eq!(ClusterUrl::parse("dafs://h1,h2/x").unwrap().path(), "/x");
    }

    #[test]
    fn etcd_urls() {
        assert_eq!(
            ClusterUrl::parse("dafs+etcd://127.0.0.1:2379/prod/").unwrap(),
            ClusterUrl::Etcd {
                endpoints: vec!["127.0.0.1:2379".into()],
                name: "prod".into(),
                path: "/".into()
            }
        );
        assert_eq!(
            ClusterUrl::parse("dafs+etcd://e1,e2:9/prod/a/b").unwrap(),
            ClusterUrl::Etcd {
                endpoints: vec!["e1:2379".into(), "e2:9".into()],
                name: "prod".into(),
                path: "/a/b".into()
            }
        );
        assert_eq!(ClusterUrl::parse("dafs+etcd://e1/prod").unwrap().path(), "/");
    }

    proptest::proptest! {
        /// Garbage never panics, and what parses keeps only non-empty hosts with ports.
        #[test]
        fn any_input_parses_or_fails_cleanly(s in "(dafs|dafs\\+tls|dafs\\+etcd)://[a-z0-9:,/\\[\\]. ]{0,30}") {
            if let Ok(u) = ClusterUrl::parse(&s) {
                let hosts = match &u {
                    ClusterUrl::Static { hosts, .. } => hosts,
                    ClusterUrl::Etcd { endpoints, .. } => endpoints,
                };
                proptest::prop_assert!(!hosts.is_empty());
                proptest::prop_assert!(hosts.iter().all(|h| h.contains(':') && !h.starts_with(':')));
                proptest::prop_assert!(u.path().starts_with('/'));
            }
        }
    }

    #[test]
    fn bad_urls_say_why() {
        assert_eq!(ClusterUrl::parse("http://h/"), Err(UrlError::Scheme));
        assert_eq!(ClusterUrl::parse("dafs+shm:///tmp/d.sock/"), Err(UrlError::Scheme));
        assert_eq!(ClusterUrl::parse("dafs:///x"), Err(UrlError::EmptyHost));
        assert_eq!(ClusterUrl::parse("dafs://h1,,h2/"), Err(UrlError::EmptyHost));
        assert_eq!(ClusterUrl::parse("dafs://h1,/"), Err(UrlError::EmptyHost));
        assert_eq!(
            ClusterUrl::parse("dafs://h1,h1:7420/"),
            Err(UrlError::DuplicateHost("h1:7420".into()))
        );
        assert_eq!(ClusterUrl::parse("dafs+etcd://e1/"), Err(UrlError::NoClusterName));
        for bad in [":", ":9", "h:", "h:0", "h:70000", "h:x", "a b", "::1", "[::1"] {
            let url = format!("dafs://{bad}/");
            assert_eq!(ClusterUrl::parse(&url), Err(UrlError::BadHost(bad.into())), "{url}");
        }
        assert_eq!(ClusterUrl::parse("dafs+etcd://e1"), Err(UrlError::NoClusterName));
        assert_eq!(
            ClusterUrl::parse("dafs+etcd://e1/a b/"),
            Err(UrlError::BadClusterName("a b".into()))
        );
        let many = (0..=URL_HOSTS_MAX).map(|i| format!("h{i}")).collect::<Vec<_>>().join(",");
        assert_eq!(ClusterUrl::parse(&format!("dafs://{many}/")), Err(UrlError::TooManyHosts));
    }
}
