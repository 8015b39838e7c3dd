//! The caller's identity on the server. One mount serves every user of the machine over
//! one session; on a server whose identity mode is `asserted`, each request runs as the
//! credential the session last stated (SET_CRED). So before a request that the server
//! checks permissions for, or that makes an object (whose owner is the caller's), the
//! mount states the kernel's caller — uid, gid and supplementary groups — when it differs
//! from the one stated last, and before writes too: a write by someone other than the
//! owner must clear the set-user-ID and set-group-ID bits, which the server's kernel does
//! only when the write runs as that someone. Reads need no credential (checked at OPEN).

use fuser::Request;

use dafs_client::dafs_proto::{limits, Status};
use dafs_client::Error;

use super::DafsFs;

/// What was last stated, and on which session (a new session starts with none).
#[derive(Debug, Default)]
pub(super) struct CredState {
    /// Set once the server answered NOTSUPP (its identity mode takes no credentials):
    /// stating one is then pointless for this session.
    unsupported_session: Option<u64>,
    sent: Option<(u64, Cred)>,
    /// (session, pid, uid, gid) of the request that `sent` was last confirmed for.
    last_caller: Option<(u64, u32, u32, u32)>,
}

/// A caller as stated to the server (SET_CRED).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cred {
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) groups: Vec<u32>,
}

impl DafsFs {
    /// State `req`'s caller to the server if it is not the one stated last. Failures are
    /// left to the request itself (it runs as the previous or the anonymous credential,
    /// and the server's answer tells).
    pub(super) fn act_as(&mut self, req: &Request<'_>) {
        let session = self.c().session_id();
        if self.cred.unsupported_session == Some(session) {
            return;
        }
        let caller = (session, req.pid(), req.uid(), req.gid());
        // The same process again (a write after a write): its credential was stated
        // already, and /proc need not be read. setgroups() within one process between
        // two requests is the one change this misses until another caller intervenes.
        if self.cred.last_caller == Some(caller) {
            return;
        }
        let cred = Cred { uid: req.uid(), gid: req.gid(), groups: groups_of(req.pid(), req.gid()) };
        if self.cred.sent.as_ref().is_some_and(|(s, c)| *s == session && *c == cred) {
            self.cred.last_caller = Some(caller);
            return;
        }
        self.cred.last_caller = None;
        let r = self.c().set_cred(cred.uid, cred.gid, &cred.groups);
        match r {
            Ok(()) => {
                self.cred.sent = Some((session, cred));
                self.cred.last_caller = Some(caller);
            }
            Err(Error::Status(Status::NotSupp)) => self.cred.unsupported_session = Some(session),
            Err(e) => tracing::debug!("SET_CRED for uid {} failed: {e}", cred.uid),
        }
    }
}

impl DafsFs {
    /// Does the server run this session's requests as the stated caller (identity mode
    /// `asserted`)? Then its own kernel applies the caller-dependent rules, such as
    /// clearing set-ID bits when someone other than the owner writes or truncates.
    pub(super) fn server_acts_as_caller(&self) -> bool {
        self.stated_cred().is_some()
    }

    /// The caller stated last on the main session (after `act_as`: the request's), for
    /// an I/O worker to state on its own session; None when the server takes none.
    pub(super) fn stated_cred(&self) -> Option<Cred> {
        let session = self.c().session_id();
        self.cred.sent.as_ref().filter(|(s, _)| *s == session).map(|(_, c)| c.clone())
    }
}

/// The supplementary groups of process `pid` (from /proc; the kernel does not pass them
/// in FUSE requests), without `gid` itself, at most `limits::CRED_GROUPS_MAX`. A process
/// already gone (or a kernel-internal request, pid 0) has none.
fn groups_of(pid: u32, gid: u32) -> Vec<u32> {
    if pid == 0 {
        return Vec::new();
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:")).unwrap_or("");
    line.split_whitespace()
        .filter_map(|g| g.parse().ok())
        .filter(|&g| g != gid)
        .take(limits::CRED_GROUPS_MAX)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_of_this_process_match_getgroups() {
        let mut want = vec![0 as libc::gid_t; 64];
        // SAFETY: the buffer holds 64 gid_t and its length is passed.
        let n = unsafe { libc::getgroups(64, want.as_mut_ptr()) };
        assert!(n >= 0);
        want.truncate(n as usize);
        // SAFETY: getgid has no preconditions.
        let gid = unsafe { libc::getgid() };
        want.retain(|&g| g != gid);
        want.truncate(limits::CRED_GROUPS_MAX);
        assert_eq!(groups_of(std::process::id(), gid), want);
        assert!(groups_of(0, gid).is_empty());
    }
}
