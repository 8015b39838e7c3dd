//! How to connect: the client's configuration and `dafs://` URLs.

use std::time::Duration;

use dafs_proto::limits;

use crate::{Error, Result, TlsClientOptions};

/// Slots a client asks for by default: enough to keep a pipelined blocking transfer and
/// a few asynchronous requests in flight without holding much of the server's reply
/// cache (the server may grant fewer).
const SLOTS_DEFAULT: u32 = 32;

/// How long a connect (and each reconnect attempt) may take by default.
const CONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);

/// How long to keep trying to recover a broken connection by default: well below the
/// server's default lease (90 s), so the session is still there to re-bind.
const RECONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// How long one request may take by default, from its first send to its reply,
/// reconnects and resends included: far beyond any single transfer or COMMIT on a
/// working server, so only a server or link that never lets it finish reaches it.
const REQUEST_DEADLINE_DEFAULT: Duration = Duration::from_secs(120);

/// Reconnects one request may go through by default before it fails: a link that breaks
/// during every attempt at a large transfer would otherwise redo it for ever, while one
/// that merely flaps loses a request to a few cuts at most.
const RECONNECTS_PER_REQUEST_MAX_DEFAULT: u32 = 64;

/// Environment variable that sets [`ClientConfig::request_deadline`] (milliseconds) for
/// every client built from [`ClientConfig::default`], so adapters (the preload library,
/// the FUSE mount, C and Python programs) take it without an option of their own.
pub const REQUEST_DEADLINE_ENV: &str = "DAFS_REQUEST_DEADLINE_MS";

/// Connections a TCP session uses by default: one. Trunking (3 is the suggested value:
/// the first for metadata and small requests plus two for data) is opt-in until the
/// exactly-once test under 1,000 random cuts passes with it (it ends with AUTH_FAILED
/// binds after a few hundred cuts; see docs/architecture.md, "Session trunking").
pub const CONNECTIONS_DEFAULT: u32 = 1;

/// Environment variable that sets [`ClientConfig::connections`] for every client built
/// from [`ClientConfig::default`] (the `connections=N` URL option overrides it).
pub const CONNECTIONS_ENV: &str = "DAFS_CONNECTIONS";

/// The port a `dafs://` or `dafs+tls://` URL without one names (dafsd's default).
const PORT_DEFAULT: u16 = 7420;

/// How to connect.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Identity presented to the server (default: `hostname:pid`).
    pub client_id: String,
    /// Shared secret for HMAC authentication; when set, the client refuses servers that
    /// cannot prove they hold it.
    pub secret: Option<Vec<u8>>,
    /// Slots (outstanding requests) to ask for; the server may grant fewer.
    pub slots: u32,
    /// Maximum message size to ask for; the server may lower it.
    pub msg_size_bytes_max: u32,
    /// Export name ("" = the server's default export).
    pub export: String,
    pub connect_timeout: Duration,
    /// Which provider to use for `host:port` targets (see [`Provider`]).
    pub provider: Provider,
    /// When the connection breaks, reconnect by itself, re-bind the session and resend
    /// what was in flight (exactly-once through the server's reply cache). Off: the
    /// first transport error fails every request and the client.
    pub reconnect: bool,
    /// How long to keep trying to reconnect before giving up (should stay below the
    /// server's lease, 90 s by default).
    pub reconnect_timeout: Duration,
    /// Longest time a request may take, from its first send to its reply (reconnects and
    /// resends included). Past it the request fails with [`Error::TimedOut`] (ETIMEDOUT)
    /// and, since its slot cannot be reused safely, so does the session: the client
    /// fails every call until [`Client::reestablish`](crate::Client::reestablish).
    /// Default 120 s, or [`REQUEST_DEADLINE_ENV`].
    pub request_deadline: Duration,
    /// Most reconnects one request may go through (each resends it) before it fails
    /// like one past its deadline. Default 64.
    pub reconnects_per_request_max: u32,
    /// TLS for TCP connections. `Some`: every TCP connection is TLS, or the connect
    /// fails (a `dafs+tls://` target selects TLS too, with default options if `None`).
    /// With [`Provider::Auto`] a same-host client may still switch to shared memory
    /// after the TLS session (the offer arrived over the verified TLS channel; shared
    /// memory never leaves the host). [`Provider::Tcp`] stays on TLS.
    pub tls: Option<TlsClientOptions>,
    /// TCP connections the session uses (session trunking, 1..=`SESSION_CONNECTIONS_MAX`;
    /// 1 turns trunking off): READ/WRITE requests are spread over them, every other
    /// request goes on the first. Default [`CONNECTIONS_DEFAULT`], or
    /// [`CONNECTIONS_ENV`], or `?connections=N` on a URL. Other providers use one.
    pub connections: u32,
}

/// Provider choice for TCP targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Use shared memory when the server offers it and runs on this host, else TCP.
    Auto,
    /// Always TCP.
    Tcp,
    /// libfabric with this provider (URL name: "tcp" = `tcp;ofi_rxm`, "shm", "verbs",
    /// ...): a `host:port` target is then the server's libfabric listener, as with a
    /// `dafs+ofi+NAME://host:port` URL.
    Ofi(&'static str),
}

impl Default for ClientConfig {
    fn default() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        ClientConfig {
            client_id: format!("{}:{}", host.trim(), std::process::id()),
            secret: None,
            slots: SLOTS_DEFAULT,
            msg_size_bytes_max: limits::MSG_SIZE_BYTES_DEFAULT,
            export: String::new(),
            connect_timeout: CONNECT_TIMEOUT_DEFAULT,
            provider: Provider::Auto,
            reconnect: true,
            reconnect_timeout: RECONNECT_TIMEOUT_DEFAULT,
            request_deadline: request_deadline_from_env(),
            reconnects_per_request_max: RECONNECTS_PER_REQUEST_MAX_DEFAULT,
            tls: None,
            connections: connections_of(std::env::var(CONNECTIONS_ENV).ok().as_deref()),
        }
    }
}

/// The connections a value of [`CONNECTIONS_ENV`] (or the URL option) asks for.
pub(crate) fn connections_of(value: Option<&str>) -> u32 {
    let Some(v) = value else { return CONNECTIONS_DEFAULT };
    match v.trim().parse::<u32>() {
        Ok(n) if (1..=limits::SESSION_CONNECTIONS_MAX).contains(&n) => n,
        _ => {
            tracing::warn!(
                "connections={v:?} is not 1..={}; using {CONNECTIONS_DEFAULT}",
                limits::SESSION_CONNECTIONS_MAX
            );
            CONNECTIONS_DEFAULT
        }
    }
}

/// A URL's options (`?connections=N`) split off: the URL without them, and the
/// connections asked for.
pub(crate) fn split_url_options(url: &str) -> Result<(&str, Option<u32>)> {
    let Some((base, query)) = url.split_once('?') else { return Ok((url, None)) };
    let mut connections = None;
    for opt in query.split('&').filter(|o| !o.is_empty()) {
        match opt.split_once('=') {
            Some(("connections", v)) => match v.parse::<u32>() {
                Ok(n) if (1..=limits::SESSION_CONNECTIONS_MAX).contains(&n) => {
                    connections = Some(n)
                }
                _ => return Err(Error::InvalidArgument("URL option connections must be 1..=8")),
            },
            _ => return Err(Error::InvalidArgument("unknown URL option (known: connections=N)")),
        }
    }
    Ok((base, connections))
}

/// [`REQUEST_DEADLINE_ENV`] if set to a positive number of milliseconds, else the
/// default (a value that is not one is reported and ignored).
fn request_deadline_from_env() -> Duration {
    request_deadline_of(std::env::var(REQUEST_DEADLINE_ENV).ok().as_deref())
}

/// The deadline a value of [`REQUEST_DEADLINE_ENV`] asks for (None: unset).
fn request_deadline_of(value: Option<&str>) -> Duration {
    let Some(v) = value else { return REQUEST_DEADLINE_DEFAULT };
    match v.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Duration::from_millis(ms),
        _ => {
            tracing::warn!("{REQUEST_DEADLINE_ENV}={v:?} is not a positive number of milliseconds; using {REQUEST_DEADLINE_DEFAULT:?}");
            REQUEST_DEADLINE_DEFAULT
        }
    }
}

/// `dafs+ofi://` or `dafs+ofi+NAME://` (libfabric; see `dafs_ofi`) and the rest.
fn ofi_scheme(url: &str) -> Result<(&str, &str)> {
    let bad = || {
        Error::InvalidArgument(
            "libfabric URLs are dafs+ofi://HOST:PORT or dafs+ofi+PROVIDER://HOST:PORT",
        )
    };
    let i = url.find("://").ok_or_else(bad)?;
    let name = &url["dafs+ofi".len()..i];
    if !(name.is_empty() || name.len() > 1 && name.starts_with('+') && !name.contains('/')) {
        return Err(bad());
    }
    Ok(url.split_at(i + 3))
}

/// Split a URL into (connect target, path inside the export):
/// `dafs://host:port/path` -> ("host:port", "/path");
/// `dafs+tls://host:port/path` -> ("dafs+tls://host:port", "/path");
/// `dafs+shm:///run/dafsd.sock/path` -> ("dafs+shm:///run/dafsd.sock", "/path"): the
/// socket path ends at the first component ending in `.sock`;
/// `dafs+ofi[+NAME]://host:port/path` -> ("dafs+ofi[+NAME]://host:port", "/path").
pub fn parse_url(url: &str) -> Result<(String, String)> {
    // Cluster URLs (two or more hosts, or etcd): the target is the cluster's URL.
    if let Some(split) = crate::cluster::split_url(url)? {
        return Ok(split);
    }
    if let Some(rest) = url.strip_prefix("dafs+shm://") {
        if !rest.starts_with('/') {
            return Err(Error::InvalidArgument("dafs+shm:// URLs name an absolute socket path"));
        }
        let mut end = None;
        let mut pos = 0;
        for comp in rest.split('/') {
            pos += comp.len() + 1;
            if comp.ends_with(".sock") {
                end = Some(pos - 1);
                break;
            }
        }
        let end =
            end.ok_or(Error::InvalidArgument("dafs+shm:// URL: no path component ends in .sock"))?;
        let path = &rest[end..];
        return Ok((
            format!("dafs+shm://{}", &rest[..end]),
            if path.is_empty() { "/".into() } else { path.into() },
        ));
    }
    let (scheme, rest) = match url.strip_prefix("dafs+tls://") {
        Some(r) => ("dafs+tls://", r),
        None if url.starts_with("dafs+ofi") => ofi_scheme(url)?,
        None => (
            "",
            url.strip_prefix("dafs://").ok_or(Error::InvalidArgument(
                "URL must start with dafs://, dafs+tls:// or dafs+shm://",
            ))?,
        ),
    };
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if hostport.is_empty() {
        return Err(Error::InvalidArgument("URL has no host"));
    }
    // "host:port" (a bracketed IPv6 address ends in ']' when it has no port).
    if let Some(i) = hostport.rfind(':').filter(|_| !hostport.ends_with(']')) {
        if hostport[..i].is_empty() {
            return Err(Error::InvalidArgument("URL has no host"));
        }
        if hostport[i + 1..].parse::<u16>().is_err() {
            return Err(Error::InvalidArgument("URL port must be a number 0..=65535"));
        }
    }
    let hostport = if hostport.contains(':') && !hostport.ends_with(']') {
        hostport.to_string()
    } else {
        format!("{hostport}:{PORT_DEFAULT}")
    };
    Ok((format!("{scheme}{hostport}"), path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_deadline_from_the_environment() {
        assert_eq!(request_deadline_of(None), REQUEST_DEADLINE_DEFAULT);
        assert_eq!(request_deadline_of(Some("2500")), Duration::from_millis(2500));
        assert_eq!(request_deadline_of(Some(" 7 ")), Duration::from_millis(7));
        for bad in ["0", "-1", "", "2s", "1e3"] {
            assert_eq!(request_deadline_of(Some(bad)), REQUEST_DEADLINE_DEFAULT, "{bad:?}");
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("dafs://127.0.0.1:9/a/b").unwrap(),
            ("127.0.0.1:9".into(), "/a/b".into())
        );
        assert_eq!(parse_url("dafs://localhost").unwrap(), ("localhost:7420".into(), "/".into()));
        assert!(parse_url("http://x").is_err());
        assert!(parse_url("dafs:///x").is_err());
        assert_eq!(
            parse_url("dafs+shm:///tmp/d.sock/a/b").unwrap(),
            ("dafs+shm:///tmp/d.sock".into(), "/a/b".into())
        );
        assert_eq!(
            parse_url("dafs+shm:///tmp/d.sock").unwrap(),
            ("dafs+shm:///tmp/d.sock".into(), "/".into())
        );
        assert!(parse_url("dafs+shm:///tmp/nosock/a").is_err());
        assert_eq!(parse_url("dafs+tls://h:9/a").unwrap(), ("dafs+tls://h:9".into(), "/a".into()));
        assert_eq!(parse_url("dafs+tls://h").unwrap(), ("dafs+tls://h:7420".into(), "/".into()));
        assert!(parse_url("dafs+tls:///a").is_err());
        // A port without a host, or a port that is not one, is refused up front.
        for bad in ["dafs://:9", "dafs://:9/a", "dafs://h:", "dafs://h:x/a", "dafs://h:70000"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_url("dafs://[::1]:9/a").unwrap(), ("[::1]:9".into(), "/a".into()));
        assert_eq!(parse_url("dafs://[::1]").unwrap(), ("[::1]:7420".into(), "/".into()));
    }
}
