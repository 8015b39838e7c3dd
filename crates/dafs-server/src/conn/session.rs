//! The session a connection holds (slots, reply cache, authentication state, open
//! files), and its release when it ends for good.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use dafs_proto::ops::NONCE_LEN;
use dafs_proto::session::{ReplyCache, ServerSlots};
use dafs_proto::Status;
use tracing::info;

use crate::cred;
use crate::sessions::SessionInfo;
use crate::Shared;

pub(super) struct OpenFile {
    /// Shared with WRITE_DIRECTs waiting for their data, so that a CLOSE executed
    /// meanwhile does not fail a write the client issued before it.
    pub(super) fd: Arc<OwnedFd>,
    /// A regular file: only these take data I/O (a FIFO, device or socket could block
    /// the worker or has no meaningful offsets).
    pub(super) regular: bool,
    pub(super) read: bool,
    pub(super) write: bool,
    /// (dev, ino): the key of the server-wide open and lock tables.
    pub(super) file: (u64, u64),
    /// Append mode: every write goes to the end of file, serialised by this lock.
    pub(super) append: Option<Arc<Mutex<()>>>,
    /// Create-unlinked: where PUBLISH gives the file its name (directory, name, export).
    pub(super) unlinked: Option<(Arc<OwnedFd>, Vec<u8>, u32)>,
    /// Its place in the open-file budget, given back when the open ends.
    pub(super) _claim: crate::fd_budget::OpenFileClaim,
}

pub(crate) struct Session {
    pub(super) id: u64,
    /// What other threads may see of this session (admin listings, revocation).
    pub(super) info: Arc<SessionInfo>,
    /// Exactly-once: the reply of every slot's last non-idempotent request.
    pub(super) cache: ReplyCache,
    /// Digest of the request executing on each slot (stored with its reply).
    pub(super) exec_digest: Vec<u64>,
    /// Negotiated message size (re-applied to a new connection on bind).
    pub(super) msg_size_bytes_max: u32,
    /// Credential the session's requests run with (SET_CRED), if any.
    pub(super) cred: Option<cred::Cred>,
    /// Exactly the bytes the client presented (the HMAC transcript covers these).
    pub(super) client_id: Vec<u8>,
    pub(super) slots: ServerSlots,
    pub(super) auth_required: bool,
    pub(super) authenticated: bool,
    pub(super) server_nonce: [u8; NONCE_LEN],
    pub(super) opens: HashMap<u64, OpenFile>,
    /// Opens made at their home node for this session (round-robin placement, see
    /// `crate::forward`); numbered with `opens` from `next_open_id`.
    pub(super) proxied: HashMap<u64, Arc<crate::forward::ProxyFile>>,
    pub(super) next_open_id: u64,
    /// Some open or lock was granted to this session: its client id is recorded in the
    /// state directory (it may reclaim after a crash) until the session ends.
    pub(super) holds_state: bool,
    /// Created with the RECLAIM flag (the client has state to reclaim).
    pub(super) reclaim: bool,
}

impl Session {
    /// The open file `open_id`, opened with the access an I/O needs: `BAD_OPENID` for an
    /// unknown id, `OPEN_MODE` for one opened without that access, `NXIO` for a file that
    /// is not a regular file (FIFO, device, socket: I/O on them is not served).
    pub(super) fn open_file(&self, open_id: u64, for_read: bool) -> Result<&OpenFile, Status> {
        let of = self.opens.get(&open_id).ok_or(Status::BadOpenId)?;
        if !of.regular {
            return Err(Status::NxIo);
        }
        if (for_read && !of.read) || (!for_read && !of.write) {
            return Err(Status::OpenMode);
        }
        Ok(of)
    }
}

/// Release everything a session held: its open files (share reservations, delete-on-
/// close), its locks, its place among the live sessions.
pub(crate) fn release_session(sh: &Shared, s: Session, why: &str) {
    let locks = sh.locks.release_owner(s.id);
    info!(session = s.id, client = %s.info.client_id, opens = s.opens.len(), locks, "{why}");
    for (open_id, of) in s.opens {
        sh.open_table.release(of.file, s.id, open_id);
        // A create-unlinked file never published vanishes with its descriptor.
    }
    // Proxied opens are closed at their homes, and locks taken there through them
    // released (their lock sessions end), by the forwarding threads: never waited for
    // here (this may be a worker).
    for (_, p) in s.proxied {
        super::forwarding::close_detached(sh, p);
    }
    super::forwarding::release_locks_detached(sh, s.id);
    if s.holds_state {
        sh.grace.holder_gone(&s.info.client_id);
    }
    s.info.connected.store(false, Relaxed);
    sh.sessions_live.release();
}
