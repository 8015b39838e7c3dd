//! The process's identity on the server. On a server whose identity mode is `asserted`
//! each request runs as the credential the session last stated (SET_CRED); the library
//! states the process's effective uid, gid and supplementary groups — the ones the kernel
//! would check a local access against — before the first request of a session and again
//! whenever they changed (after `setuid`, `setgid`, `setgroups` and their kin). Reading
//! them costs three system calls, small beside the request's round trip, and needs no
//! interposition of the set*id family.

use dafs_client::Error;
use dafs_proto::{limits, Status};

use super::session::MountState;

/// What this mount's session was last told.
#[derive(Debug, Default)]
pub struct CredState {
    /// The session generation whose server answered NOTSUPP (identity mode `server` or
    /// `squash`: it takes no credentials).
    unsupported_gen: Option<u64>,
    sent: Option<(u64, Cred)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Cred {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

fn current() -> Cred {
    // SAFETY: geteuid and getegid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut buf = [0 as libc::gid_t; limits::CRED_GROUPS_MAX * 4];
    // SAFETY: `buf` holds `buf.len()` gid_t and its length is passed.
    let n = unsafe { libc::getgroups(buf.len() as i32, buf.as_mut_ptr()) };
    let groups = buf[..n.max(0) as usize]
        .iter()
        .copied()
        .filter(|&g| g != gid)
        .take(limits::CRED_GROUPS_MAX)
        .collect();
    Cred { uid, gid, groups }
}

impl MountState {
    /// State the process's credential on this mount's session if it was not stated yet
    /// or changed. A failure is left to the request (the server's answer tells).
    pub(super) fn state_cred(&mut self) {
        let gen = self.gen;
        if self.cred.unsupported_gen == Some(gen) {
            return;
        }
        let Some(c) = self.client.as_mut() else { return };
        let cred = current();
        if self.cred.sent.as_ref().is_some_and(|(g, s)| *g == gen && *s == cred) {
            return;
        }
        match c.set_cred(cred.uid, cred.gid, &cred.groups) {
            Ok(()) => self.cred.sent = Some((gen, cred)),
            Err(Error::Status(Status::NotSupp)) => self.cred.unsupported_gen = Some(gen),
            Err(e) => debug!("SET_CRED for uid {} failed: {e}", cred.uid),
        }
    }
}
