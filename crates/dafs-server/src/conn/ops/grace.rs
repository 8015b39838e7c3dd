//! The grace period's rules for the ops it touches (docs/protocol.md §9.5): reclaims
//! (OPEN or LOCK with RECLAIM) only in grace and only by a client the previous boot
//! recorded; everything else that could conflict with state not reclaimed yet (OPEN,
//! LOCK, REMOVE, RENAME) waits with GRACE. A granted open or lock records the session's
//! client as holding state (`crate::grace`).

use std::sync::atomic::Ordering::Relaxed;

use dafs_proto::{FileHandle, Reply, Status};

use super::lock;
use crate::conn::Conn;
use crate::Shared;

impl Conn {
    /// OPEN, reclaiming or not.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open_in_grace(
        &mut self,
        sh: &Shared,
        reclaim: bool,
        fh: FileHandle,
        flags: u32,
        mode: u32,
        name: &[u8],
        key: &[u8],
    ) -> Result<Reply<'static>, Status> {
        self.admit_in_grace(sh, reclaim)?;
        let r =
            self.open(sh, fh, flags, mode, name, key).map_err(|st| reclaim_bad(sh, reclaim, st))?;
        if reclaim {
            sh.stats.opens_reclaimed.fetch_add(1, Relaxed);
        }
        self.holds_state(sh);
        Ok(r)
    }

    /// LOCK, reclaiming or not.
    pub(super) fn lock_in_grace(
        &mut self,
        sh: &Shared,
        reclaim: bool,
        fh: &FileHandle,
        offset: u64,
        len: u64,
        ltype: u32,
    ) -> Result<Reply<'static>, Status> {
        self.admit_in_grace(sh, reclaim)?;
        let owner = self.session().id;
        let r = lock::lock(sh, owner, fh, offset, len, ltype)
            .map_err(|st| reclaim_bad(sh, reclaim, st))?;
        if reclaim {
            sh.stats.locks_reclaimed.fetch_add(1, Relaxed);
        }
        self.holds_state(sh);
        Ok(r)
    }

    /// A reclaim needs the grace period and a client the previous boot recorded
    /// (`NO_GRACE` otherwise); anything else waits for the grace period to end.
    pub(super) fn admit_in_grace(&self, sh: &Shared, reclaim: bool) -> Result<(), Status> {
        if reclaim {
            if !sh.grace.may_reclaim(&self.session().info.client_id) {
                sh.stats.reclaims_refused.fetch_add(1, Relaxed);
                return Err(Status::NoGrace);
            }
            return Ok(());
        }
        refuse_in_grace(sh)
    }

    /// RECLAIM_COMPLETE: this client reclaimed all it will.
    pub(super) fn reclaim_complete(&self, sh: &Shared) -> Reply<'static> {
        sh.grace.client_done(&self.session().info.client_id);
        Reply::Empty
    }

    /// Record (once per session) that this session's client holds state.
    fn holds_state(&mut self, sh: &Shared) {
        let s = self.session_mut();
        if !s.holds_state {
            s.holds_state = true;
            sh.grace.holder_added(&s.info.client_id);
        }
    }
}

/// `GRACE` while the grace period runs (REMOVE and RENAME too: they could remove the
/// name a delete-on-close open, not reclaimed yet, is to remove).
pub(super) fn refuse_in_grace(sh: &Shared) -> Result<(), Status> {
    if sh.grace.in_grace() {
        sh.stats.grace_refusals.fetch_add(1, Relaxed);
        return Err(Status::Grace);
    }
    Ok(())
}

/// A reclaim that conflicts with state reclaimed already (share reservation, key,
/// lock, an open id in use) is `RECLAIM_BAD`, not an ordinary refusal.
fn reclaim_bad(sh: &Shared, reclaim: bool, st: Status) -> Status {
    match st {
        Status::ShareDenied | Status::BadKey | Status::Denied | Status::ReclaimBad if reclaim => {
            sh.stats.reclaims_refused.fetch_add(1, Relaxed);
            Status::ReclaimBad
        }
        st => st,
    }
}
