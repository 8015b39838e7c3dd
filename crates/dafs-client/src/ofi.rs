//! Provider selection for libfabric targets (`dafs+ofi://`, `dafs+ofi+NAME://`, or a
//! `host:port` target with [`Provider::Ofi`]).

use dafs_ofi::OfiClient;
use dafs_transport::ClientTransport;

use crate::{ClientConfig, Provider, Result};

/// The libfabric transport for `target`, or `None` when it is not a libfabric target.
pub(crate) fn connect(
    target: &str,
    cfg: &ClientConfig,
) -> Result<Option<Box<dyn ClientTransport>>> {
    let (want, addr) = match (dafs_ofi::parse_client_target(target), cfg.provider) {
        (Some((want, addr)), _) => (want, addr),
        (None, Provider::Ofi(name)) if !target.contains("://") => {
            (Some(dafs_ofi::provider_for(name)), target.to_string())
        }
        _ => return Ok(None),
    };
    let t = OfiClient::connect(&addr, want.as_deref(), cfg.connect_timeout)?;
    Ok(Some(Box::new(t)))
}
