//! The libfabric backends: dafs over `ofi:tcp` (`tcp;ofi_rxm`) and `ofi:shm`, beside
//! the native TCP and shared-memory providers, on the same dafsd (which listens on
//! both libfabric providers too).

use crate::server::Dafsd;

/// Backend names, in report order.
pub const BACKENDS: [&str; 2] = ["dafs-ofi-tcp", "dafs-ofi-shm"];

/// The provider (URL name) of each backend.
const NAMES: [&str; 2] = ["tcp", "shm"];

/// `--backends` spellings: `ofi:tcp`, `ofi-tcp`, `ofi:shm`, `ofi-shm`.
pub fn backend_alias(s: &str) -> Option<&'static str> {
    let name = s.strip_prefix("ofi:").or_else(|| s.strip_prefix("ofi-"))?;
    NAMES.iter().position(|n| *n == name).map(|i| BACKENDS[i])
}

/// dafsd arguments for the libfabric listeners (ephemeral loopback ports).
pub fn listen_args() -> Vec<String> {
    NAMES
        .iter()
        .flat_map(|n| ["--ofi-listen".to_string(), format!("ofi+{n}://127.0.0.1:0")])
        .collect()
}

/// (backend, client URL) for each libfabric listener the server reported.
pub fn targets(srv: &Dafsd) -> Vec<(&'static str, String)> {
    NAMES
        .iter()
        .zip(BACKENDS)
        .filter_map(|(n, b)| {
            let prefix = format!("ofi+{n}://");
            let u = srv.ofi_urls.iter().find(|u| u.starts_with(&prefix))?;
            Some((b, format!("dafs+{u}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn aliases_name_backends() {
        assert_eq!(super::backend_alias("ofi:tcp"), Some("dafs-ofi-tcp"));
        assert_eq!(super::backend_alias("ofi-shm"), Some("dafs-ofi-shm"));
        assert_eq!(super::backend_alias("ofi:verbs"), None);
        assert_eq!(super::backend_alias("tcp"), None);
    }
}
