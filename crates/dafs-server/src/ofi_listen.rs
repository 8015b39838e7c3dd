//! The libfabric listeners (`ofi_listen`, `--listen ofi+NAME://HOST:PORT`): bound at
//! start (an unusable provider is a start error), accepted by the acceptor thread
//! beside the TCP and shared-memory listeners.

use dafs_ofi::OfiListener;
use dafs_transport::{ServerConn, ServerListener};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use tracing::warn;

use crate::StartError;

/// Tokens of the libfabric listeners start here (0 and 1 are TCP and shared memory).
const OFI_TOKEN_BASE: usize = 16;

/// Bind every configured libfabric listener.
pub(crate) fn bind_all(urls: &[String]) -> Result<Vec<OfiListener>, StartError> {
    urls.iter()
        .map(|u| {
            OfiListener::bind(u)
                .map_err(|e| StartError::Listen { addr: u.clone(), source: e.into() })
        })
        .collect()
}

/// Watch them on the acceptor's event loop.
pub(crate) fn watch(ls: &[OfiListener], reg: &Registry) -> Result<(), StartError> {
    for (i, l) in ls.iter().enumerate() {
        let fd = l.raw_fd();
        reg.register(&mut SourceFd(&fd), Token(OFI_TOKEN_BASE + i), Interest::READABLE)
            .map_err(StartError::io("cannot watch a libfabric listener"))?;
    }
    Ok(())
}

/// Accept what is pending on each listener into `got`.
pub(crate) fn accept_all(ls: &mut [OfiListener], got: &mut Vec<Box<dyn ServerConn>>) {
    for l in ls {
        match l.accept() {
            Ok(Some(c)) => got.push(Box::new(c)),
            Ok(None) => {}
            Err(e) => warn!("libfabric accept on {} failed: {e}", l.url()),
        }
    }
}
