//! The two system-level pieces of asynchronous I/O on a cluster: memory the front
//! client owns (registered with each node's session on first use), and one sleep on
//! the connections of several nodes at once (the library has no thread per node).

use std::alloc::Layout;
use std::os::fd::RawFd;
use std::time::Duration;

use dafs_transport::MemPtr;

use crate::{Client, RegionId, Result};

/// Alignment of memory from [`Client::alloc_registered`](crate::Client::alloc_registered)
/// on a cluster: a page, as the transports' own allocations are.
const ALIGN_BYTES: usize = 4096;

/// Zeroed, page-aligned memory owned by a front client's region table.
pub(super) struct AlignedBuf {
    mem: MemPtr,
    layout: Layout,
}

impl AlignedBuf {
    pub(super) fn zeroed(len: usize) -> Option<AlignedBuf> {
        let layout = Layout::from_size_align(len, ALIGN_BYTES).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: the layout has a non-zero size (checked above).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        Some(AlignedBuf { mem: MemPtr::new(ptr, len)?, layout })
    }

    pub(super) fn mem(&self) -> MemPtr {
        self.mem
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout and freed once, here; the
        // region table drops it only after every node session has let it go.
        unsafe { std::alloc::dealloc(self.mem.as_ptr(), self.layout) }
    }
}

/// Sleep until one of `fds` is readable (or writable, where its flag says the
/// connection has output queued), or `timeout` passes (None: no limit). EINTR counts
/// as a wake-up: the caller looks again.
pub(super) fn sleep_on_fds(
    fds: &[(RawFd, bool)],
    timeout: Option<Duration>,
) -> std::io::Result<()> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, want_write)| libc::pollfd {
            fd,
            events: libc::POLLIN | if want_write { libc::POLLOUT } else { 0 },
            revents: 0,
        })
        .collect();
    let timeout_ms = match timeout {
        None => -1,
        // Rounded up: a sub-millisecond remainder must not become a busy loop.
        Some(t) => t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32,
    };
    // SAFETY: `pfds` is a live, exclusively borrowed array of `pfds.len()` pollfds.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    Ok(())
}

/// Register a front region's memory with one node's session.
pub(super) fn register_with(c: &mut Client, mem: MemPtr) -> Result<RegionId> {
    // SAFETY: a front region's memory stays valid until `Cluster::unregister`, which
    // first unregisters it from every node session holding it (a session dropped
    // before that has failed and forgotten its I/O: `Aio::forget_node`); the
    // application reaches it only through `region`/`region_mut` (refused while any node
    // has I/O on it in flight) or, for raw memory, under `register_raw`'s contract.
    unsafe { c.register_raw(mem.as_ptr(), mem.len()) }
}
