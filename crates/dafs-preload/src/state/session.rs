//! Sessions: per mount a lazily connected client; failures mapped to errno, a lost
//! connection dropped (the next call reconnects and re-opens files by path).

use std::collections::HashSet;
use std::ffi::c_int;

use dafs_client::{Client, ClientConfig, Error};

use super::fdmap::mark_internal;
use super::fds::real_close;
use super::ofd::{open_options, Kind, Ofd};
use super::{config, Fail, State, FR};

/// One mount's session.
#[derive(Default)]
pub struct MountState {
    pub client: Option<Client>,
    /// Bumped at every new session.
    pub gen: u64,
    /// Descriptors the client opened (closed, not used, in a forked child).
    conn_fds: Vec<c_int>,
    warned: bool,
    /// fileids this process holds POSIX locks on (closing any descriptor of the file
    /// releases them, as POSIX specifies).
    pub locked: HashSet<u64>,
    /// The credential last stated to the server (identity mode `asserted`).
    pub(super) cred: super::cred::CredState,
}

/// The process's open descriptors (to tell which ones a new connection opened).
fn list_fds() -> Vec<c_int> {
    match std::fs::read_dir("/proc/self/fd") {
        Ok(d) => d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect(),
        Err(_) => Vec::new(),
    }
}

impl State {
    /// Connect mount `m` if it has no session (lazily: at its first use).
    pub fn connect(&mut self, m: usize) -> Result<(), c_int> {
        if self.mounts[m].client.is_some() {
            return Ok(());
        }
        let mc = &config().mounts[m];
        let secret = match &config().secret {
            None => None,
            Some(Ok(s)) => Some(s.clone()),
            Some(Err(e)) => {
                if !self.mounts[m].warned {
                    eprintln!("dafs-preload: {e}");
                    self.mounts[m].warned = true;
                }
                return Err(libc::EACCES);
            }
        };
        let before = list_fds();
        match Client::connect(&mc.target, ClientConfig { secret, ..Default::default() }) {
            Ok(c) => {
                let ms = &mut self.mounts[m];
                ms.conn_fds = list_fds().into_iter().filter(|fd| !before.contains(fd)).collect();
                for &fd in &ms.conn_fds {
                    mark_internal(fd, true);
                }
                debug!(
                    "connected {} -> {} ({}, session {})",
                    mc.prefix,
                    mc.url,
                    c.provider(),
                    c.session_id()
                );
                ms.client = Some(c);
                ms.gen += 1;
                ms.warned = false;
                Ok(())
            }
            Err(e) => {
                let ms = &mut self.mounts[m];
                if !ms.warned {
                    eprintln!("dafs-preload: cannot connect to {} for {}: {e}", mc.url, mc.prefix);
                    ms.warned = true;
                }
                Err(match e.errno() {
                    0 => libc::EIO,
                    n => n,
                })
            }
        }
    }

    /// Map a failure to errno; a lost connection drops the session (the next call
    /// reconnects, and open files are re-opened by path).
    pub fn fail(&mut self, m: usize, f: Fail) -> c_int {
        match f {
            Fail::Errno(e) => e,
            Fail::Client(e) => {
                // The client library recovers broken connections by itself (re-binding the
                // session); what reaches here is a connection it could not recover, or a
                // session the server no longer knows (restarted, lease expired, fenced).
                if matches!(
                    e,
                    Error::Transport(_)
                        | Error::Disconnected
                        | Error::Protocol(_)
                        | Error::Status(
                            dafs_proto::Status::BadSession | dafs_proto::Status::Fenced
                        )
                ) {
                    eprintln!("dafs-preload: connection to {} lost: {e}", config().mounts[m].url);
                    let ms = &mut self.mounts[m];
                    for fd in ms.conn_fds.drain(..) {
                        mark_internal(fd, false);
                    }
                    if let Some(c) = ms.client.take() {
                        drop(c);
                    }
                    ms.locked.clear();
                }
                match e.errno() {
                    0 => libc::EIO,
                    n => n,
                }
            }
        }
    }

    /// Run `f` with mount `m`'s client.
    pub fn call<T>(&mut self, m: usize, f: impl FnOnce(&mut Client) -> FR<T>) -> Result<T, c_int> {
        self.connect(m)?;
        self.mounts[m].state_cred();
        let c = self.mounts[m].client.as_mut().ok_or(libc::ENOTCONN)?;
        f(c).map_err(|e| self.fail(m, e))
    }

    /// In a forked child: the inherited session belongs to the parent. Forget it
    /// without sending anything on it (the parent keeps using it), close the child's
    /// copies of its descriptors, and let the next call open a new session and re-open
    /// the inherited files by path.
    pub(super) fn forget_sessions(&mut self) {
        for ms in &mut self.mounts {
            if let Some(c) = ms.client.take() {
                // Dropping would end the parent's session (SESSION_DESTROY): forget it.
                std::mem::forget(c);
            }
            for fd in ms.conn_fds.drain(..) {
                mark_internal(fd, false);
                real_close(fd);
            }
            // POSIX locks are not inherited by a child.
            ms.locked.clear();
        }
    }

    /// End every session (dropping a client drains its I/O and sends SESSION_DESTROY);
    /// a later call connects again, and open files are re-opened by path.
    pub(super) fn end_sessions(&mut self) {
        for (m, ms) in self.mounts.iter_mut().enumerate() {
            if let Some(c) = ms.client.take() {
                debug!("ending session {} of {}", c.session_id(), config().mounts[m].prefix);
                drop(c);
            }
            for fd in ms.conn_fds.drain(..) {
                mark_internal(fd, false);
            }
            ms.locked.clear();
        }
    }

    /// Make the open file description usable in the current session (re-open by path
    /// after fork, exec or a reconnect).
    pub fn ensure(&mut self, id: u64) -> Result<(), c_int> {
        let m = self.ofds.get(&id).ok_or(libc::EBADF)?.mount;
        self.connect(m)?;
        let gen = self.mounts[m].gen;
        let o = self.ofds.get(&id).ok_or(libc::EBADF)?;
        if o.gen == gen {
            return Ok(());
        }
        let (rel, kind, flags) = (o.rel.clone(), o.kind, o.flags);
        debug!("re-opening {} in the new session", o.vpath);
        let r = self.call(m, |c| match kind {
            Kind::File => {
                let f = c.open(&rel, open_options(flags, 0, false))?;
                Ok((f.fh, Some(f)))
            }
            _ => Ok((c.lookup(&rel)?.0, None)),
        });
        let (fh, file) = r?;
        let o = self.ofds.get_mut(&id).ok_or(libc::EBADF)?;
        o.fh = fh;
        o.file = file;
        o.gen = gen;
        Ok(())
    }

    /// Run `f` on the client and open file description of dafs descriptor `fd`.
    pub fn with_ofd<T>(
        &mut self,
        fd: c_int,
        f: impl FnOnce(&mut Client, &mut Ofd) -> FR<T>,
    ) -> Result<T, c_int> {
        let id = self.ofd_id(fd)?;
        self.ensure(id)?;
        let o = self.ofds.get_mut(&id).ok_or(libc::EBADF)?;
        let m = o.mount;
        self.mounts[m].state_cred();
        let c = self.mounts[m].client.as_mut().ok_or(libc::ENOTCONN)?;
        f(c, o).map_err(|e| self.fail(m, e))
    }

    /// Run `f` on the client and open file description `id`, as it is (no re-open).
    pub(super) fn with_ofd_id<T>(
        &mut self,
        id: u64,
        f: impl FnOnce(&mut Client, &mut Ofd) -> FR<T>,
    ) -> Result<T, c_int> {
        let o = self.ofds.get_mut(&id).ok_or(libc::EBADF)?;
        let m = o.mount;
        let c = self.mounts[m].client.as_mut().ok_or(libc::ENOTCONN)?;
        f(c, o).map_err(|e| self.fail(m, e))
    }
}
