//! # dafs-ofi — the libfabric provider
//!
//! DAFS over any libfabric fabric: `tcp;ofi_rxm` (runs anywhere), `shm` (same host),
//! `verbs;ofi_rxm` (InfiniBand / RoCE), `efa`, `cxi`, ... It implements the transport
//! traits of `dafs-transport` with libfabric's reliable-datagram endpoints:
//!
//! - **Messages** are `fi_send`s into [`RX_DEPTH`] pre-posted receive buffers of
//!   [`MSG_BYTES_MAX`] bytes; the session's credits (slots) bound what is outstanding.
//! - **READ_DIRECT** is the server's `fi_write` into the client's registered region and
//!   **WRITE_DIRECT** the server's `fi_read` from it: the server initiates every transfer.
//! - **Registration** is `fi_mr_reg` on the client; the client announces `{handle, key,
//!   address, length, access}` to the server in the ordered message stream, so the
//!   server checks every `{handle, offset, len}` against the announced bounds before any
//!   RMA, and forms the remote address (virtual for `FI_MR_VIRT_ADDR` providers, an
//!   offset otherwise). Deregistration withdraws the announcement and closes the MR: a
//!   stale key fails at both ends.
//! - **Progress** is manual where the provider's is (`tcp;ofi_rxm`, `shm`): the client
//!   progresses only while the application is inside the library (no hidden thread).
//!   Sleeping waits on the completion queue's wait fd where the provider has one, and on
//!   doorbells over the session's side channel where it has none (`shm`).
//! - **The side channel** is one TCP connection per session (`ADDR` of the URL): it
//!   carries the fabric addresses and doorbells, and its end tells either side at once
//!   that the other is gone.
//!
//! URLs: server `ofi+NAME://HOST:PORT`, client `dafs+ofi://HOST:PORT` (whatever the
//! listener offers) or `dafs+ofi+NAME://HOST:PORT` (insists on `NAME`). `NAME` is `tcp`
//! (= `tcp;ofi_rxm`), `shm`, `verbs` (= `verbs;ofi_rxm`), `sockets`, or any libfabric
//! provider string.

pub mod boot;
mod client;
mod ffi;
mod filemap;
mod link;
mod server;

pub use client::OfiClient;
pub use server::{OfiListener, OfiServerConn};

/// Largest message (also each pre-posted receive buffer): the protocol's default
/// message size, so sessions negotiate it unchanged.
pub const MSG_BYTES_MAX: usize = dafs_proto::limits::MSG_SIZE_BYTES_DEFAULT as usize;
/// Receive buffers pre-posted per endpoint (16 x 256 KiB = 4 MiB per connection end).
/// More messages in flight than this wait in the provider's unexpected-message queue.
pub const RX_DEPTH: usize = 16;
/// Sends posted or queued per endpoint; beyond it the peer is not progressing.
pub const SENDS_INFLIGHT_MAX: usize = 1024;
/// Message buffers kept for reuse per endpoint.
pub const POOL_MAX: usize = 32;
/// Registrations per client (the server refuses announcements beyond it).
pub const REGIONS_MAX: usize = 4096;

/// libfabric's provider string for a URL name: `tcp` is `tcp;ofi_rxm` and `verbs` is
/// `verbs;ofi_rxm` (reliable datagrams over a connected provider); others as given.
pub fn provider_for(name: &str) -> String {
    match name {
        "tcp" => "tcp;ofi_rxm".into(),
        "verbs" => "verbs;ofi_rxm".into(),
        other => other.into(),
    }
}

/// The short name a client reports for a libfabric provider string.
pub fn short_name(prov: &str) -> &'static str {
    match prov {
        "tcp;ofi_rxm" => "ofi+tcp",
        "shm" => "ofi+shm",
        "verbs;ofi_rxm" => "ofi+verbs",
        "sockets" => "ofi+sockets",
        _ => "ofi",
    }
}

/// Split a listen URL `ofi+NAME://HOST:PORT` into (libfabric provider, `HOST:PORT`).
pub fn parse_listen_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("ofi+")?;
    let (name, addr) = rest.split_once("://")?;
    if name.is_empty() || addr.is_empty() || addr.contains('/') {
        return None;
    }
    Some((provider_for(name), addr.to_string()))
}

/// Split a client target `dafs+ofi://HOST:PORT` or `dafs+ofi+NAME://HOST:PORT` into
/// (required libfabric provider if named, `HOST:PORT`).
pub fn parse_client_target(target: &str) -> Option<(Option<String>, String)> {
    let rest = target.strip_prefix("dafs+ofi")?;
    let (name, addr) = rest.split_once("://")?;
    let name = match name {
        "" => None,
        n => Some(provider_for(n.strip_prefix('+')?)),
    };
    (!addr.is_empty()).then(|| (name, addr.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_providers() {
        assert_eq!(
            parse_listen_url("ofi+tcp://127.0.0.1:7430"),
            Some(("tcp;ofi_rxm".into(), "127.0.0.1:7430".into()))
        );
        assert_eq!(parse_listen_url("ofi+shm://h:1"), Some(("shm".into(), "h:1".into())));
        assert_eq!(parse_listen_url("ofi+://h:1"), None);
        assert_eq!(parse_listen_url("tcp://h:1"), None);
        assert_eq!(parse_client_target("dafs+ofi://h:1"), Some((None, "h:1".into())));
        assert_eq!(
            parse_client_target("dafs+ofi+verbs://h:1"),
            Some((Some("verbs;ofi_rxm".into()), "h:1".into()))
        );
        assert_eq!(parse_client_target("dafs+ofix://h:1"), None);
        assert_eq!(parse_client_target("dafs+ofi://"), None);
    }
}
