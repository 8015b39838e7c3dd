//! Per-request credentials: the identity the file system checks a request against.
//!
//! The model (`identity` in the server configuration, documented in
//! `docs/architecture.md#access-control`):
//! - `server` (default): every request runs as dafsd's own user; SET_CRED is refused
//!   (NOTSUPP). Access control is per export (read-only, allowed client ids).
//! - `asserted`: dafsd runs as root; a session states its caller's uid, gid and groups
//!   with SET_CRED (authenticated by the session's shared secret, like NFS AUTH_SYS on a
//!   trusted network), and each request runs with exactly that identity: the worker
//!   thread switches its *file-system* ids (setfsuid/setfsgid and the thread's
//!   supplementary groups) before executing, so the kernel enforces mode bits, ACLs and
//!   ownership of new files. uid 0 is squashed to `anon_uid/anon_gid` unless
//!   `root_squash = false`; a session that never sent SET_CRED runs as anon.
//! - `squash`: every request runs as `anon_uid/anon_gid`, whatever the client says.
//!
//! Switching costs three system calls and happens only when the credential differs from
//! the one the thread already has (the common case, one user per server, never switches).

use std::cell::RefCell;

use dafs_proto::Status;

use crate::Shared;

/// Most supplementary groups carried (as NFS AUTH_SYS).
pub const GROUPS_MAX: usize = dafs_proto::limits::CRED_GROUPS_MAX;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    Server,
    Asserted { root_squash: bool, anon_uid: u32, anon_gid: u32 },
    Squash { anon_uid: u32, anon_gid: u32 },
}

impl Identity {
    pub fn accepts_set_cred(self) -> bool {
        !matches!(self, Identity::Server)
    }
}

thread_local! {
    /// The credential this worker thread runs with now (None: the process's own).
    static CURRENT: RefCell<Option<Cred>> = const { RefCell::new(None) };
}

/// The identity (uid, gid, groups) a request of a session with credential `c` runs
/// as; None: the process's own (nothing to switch).
pub fn target(identity: Identity, c: Option<&Cred>) -> Option<(u32, u32, &[u32])> {
    match identity {
        Identity::Server => None,
        Identity::Squash { anon_uid, anon_gid } => Some((anon_uid, anon_gid, &[])),
        Identity::Asserted { root_squash, anon_uid, anon_gid } => Some(match c {
            Some(c) if !(root_squash && c.uid == 0) => (c.uid, c.gid, &c.groups),
            _ => (anon_uid, anon_gid, &[]),
        }),
    }
}

/// [`target`] as an owned credential.
pub fn effective(identity: Identity, c: Option<&Cred>) -> Option<Cred> {
    target(identity, c).map(|(uid, gid, groups)| Cred { uid, gid, groups: groups.to_vec() })
}

/// Make this thread's file-system identity the one a request of a session with
/// credential `c` must run with. Allocation-free unless the identity changes.
pub fn apply(sh: &Shared, c: Option<&Cred>) -> Result<(), Status> {
    // The common case (identity "server"): nothing to switch, ever.
    let Some((uid, gid, groups)) = target(sh.cfg.identity, c) else { return Ok(()) };
    CURRENT.with(|cur| {
        let mut cur = cur.borrow_mut();
        if cur.as_ref().is_some_and(|k| k.uid == uid && k.gid == gid && k.groups == groups) {
            return Ok(());
        }
        switch_thread(uid, gid, groups).map_err(|e| {
            tracing::error!("cannot switch the worker's file-system identity to {uid}:{gid}: {e}");
            Status::ServerFault
        })?;
        *cur = Some(Cred { uid, gid, groups: groups.to_vec() });
        Ok(())
    })
}

/// Set the calling thread's fsuid, fsgid and supplementary groups.
fn switch_thread(uid: u32, gid: u32, groups: &[u32]) -> std::io::Result<()> {
    assert!(groups.len() <= GROUPS_MAX);
    // Groups and gid first: once fsuid is no longer 0, the thread loses the capability
    // to change them.
    // SAFETY: the raw setgroups system call (not glibc's wrapper, which would change every
    // thread of the process) reads `groups.len()` u32 gids from a valid slice.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // setfsgid/setfsuid return the previous id and report no error; calling again with
    // the same value returns the current one, which tells whether the change took.
    // SAFETY: plain system calls on the calling thread's credentials.
    let now_gid = unsafe {
        libc::setfsgid(gid);
        libc::setfsgid(gid)
    };
    // SAFETY: as above.
    let now_uid = unsafe {
        libc::setfsuid(uid);
        libc::setfsuid(uid)
    };
    if now_gid as u32 != gid || now_uid as u32 != uid {
        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
    }
    Ok(())
}

/// Parse SET_CRED's packed group list.
pub fn parse_groups(packed: &[u8]) -> Vec<u32> {
    packed.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Give the calling worker thread a umask of its own, 0. Clients send the permission
/// bits a new object gets with their own umask applied already (the FUSE kernel's, the
/// preloaded process's, the application's): the server's must not take bits away a
/// second time. Only the worker threads, which make the export's objects: the process's
/// umask stays as it was for everything else (an application embedding the server, its
/// sockets), since `unshare(CLONE_FS)` gives this thread its own umask (and working
/// directory, which the workers never use: every path is relative to a descriptor).
pub fn worker_umask_zero() {
    // SAFETY: unshare(CLONE_FS) affects only the calling thread's fs attributes.
    let r = unsafe { libc::unshare(libc::CLONE_FS) };
    if r != 0 {
        tracing::warn!(
            "unshare(CLONE_FS) failed ({}): new objects get the process umask on top of the client's mode",
            std::io::Error::last_os_error()
        );
        return;
    }
    rustix::process::umask(rustix::fs::Mode::empty());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_identity_rules() {
        let user = Cred { uid: 1000, gid: 100, groups: vec![5] };
        let root = Cred { uid: 0, gid: 0, groups: vec![] };
        assert_eq!(effective(Identity::Server, Some(&user)), None);
        let a = Identity::Asserted { root_squash: true, anon_uid: 65534, anon_gid: 65534 };
        assert_eq!(effective(a, Some(&user)), Some(user.clone()));
        assert_eq!(effective(a, Some(&root)).unwrap().uid, 65534, "root squashed");
        assert_eq!(effective(a, None).unwrap().uid, 65534, "no SET_CRED: anon");
        let a2 = Identity::Asserted { root_squash: false, anon_uid: 65534, anon_gid: 65534 };
        assert_eq!(effective(a2, Some(&root)).unwrap().uid, 0);
        let sq = Identity::Squash { anon_uid: 7, anon_gid: 8 };
        assert_eq!(effective(sq, Some(&user)), Some(Cred { uid: 7, gid: 8, groups: vec![] }));
        assert_eq!(parse_groups(&[1, 0, 0, 0, 2, 1, 0, 0]), vec![1, 258]);
    }
}
