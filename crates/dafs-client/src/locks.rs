//! Byte-range locks: advisory, owned by the session.

use std::time::{Duration, Instant};

use dafs_proto::{FileHandle, Opcode, Reply, Request, Status};

use crate::error::unexpected_reply;
use crate::{Client, Error, File, Result};

/// A lock held by another session (from [`Client::test_lock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockInfo {
    pub exclusive: bool,
    /// The owning session's id.
    pub owner: u64,
    pub offset: u64,
    /// 0 means "to the end of the 64-bit range".
    pub len: u64,
}

/// First pause of [`Client::lock_wait`] between attempts: about a round trip, so a lock
/// released at once is taken at once.
const LOCK_WAIT_BACKOFF_START: Duration = Duration::from_micros(100);

/// Longest pause of [`Client::lock_wait`]: a lock released after a long hold is taken
/// within 10 ms, at no more than 100 LOCK requests a second.
const LOCK_WAIT_BACKOFF_MAX: Duration = Duration::from_millis(10);

impl Client {
    /// Take a byte-range lock without waiting: `Err(Status(Denied))` on conflict.
    /// `len == 0` locks to the end of the 64-bit range. Locks are advisory and belong to
    /// this session: they are released by [`Client::unlock`] or when the session ends.
    pub fn lock(&mut self, f: &File, offset: u64, len: u64, exclusive: bool) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.lock(f, offset, len, exclusive));
        }
        self.lock_handle(f.wire_fh(), offset, len, exclusive)
    }

    /// [`lock`](Self::lock) by file handle: a lock needs no open in this session (a
    /// forwarding node locks for its clients on sessions of their own). Not on a
    /// cluster client (a handle names no node).
    pub fn lock_handle(
        &mut self,
        fh: FileHandle,
        offset: u64,
        len: u64,
        exclusive: bool,
    ) -> Result<()> {
        let ltype = if exclusive {
            dafs_proto::types::lock_type::EXCLUSIVE
        } else {
            dafs_proto::types::lock_type::SHARED
        };
        let m = self.call(&Request::Lock { fh, offset, len, ltype, flags: 0 })?;
        self.decode(&m)?;
        self.held.locked(fh, offset, len, ltype);
        Ok(())
    }

    /// Take a lock, waiting up to `timeout` by bounded polling: retries with exponential
    /// backoff from 100 µs to 10 ms while the range is held by another session.
    pub fn lock_wait(
        &mut self,
        f: &File,
        offset: u64,
        len: u64,
        exclusive: bool,
        timeout: Duration,
    ) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.lock_wait(f, offset, len, exclusive, timeout));
        }
        let deadline = Instant::now() + timeout;
        let mut backoff = LOCK_WAIT_BACKOFF_START;
        loop {
            match self.lock(f, offset, len, exclusive) {
                Err(Error::Status(Status::Denied)) if Instant::now() < deadline => {
                    std::thread::sleep(
                        backoff.min(deadline.saturating_duration_since(Instant::now())),
                    );
                    backoff = (backoff * 2).min(LOCK_WAIT_BACKOFF_MAX);
                }
                Err(Error::Status(Status::Denied)) => return Err(Error::TimedOut),
                r => return r,
            }
        }
    }

    /// A lock of another session that would conflict, if any.
    pub fn test_lock(
        &mut self,
        f: &File,
        offset: u64,
        len: u64,
        exclusive: bool,
    ) -> Result<Option<LockInfo>> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.test_lock(f, offset, len, exclusive));
        }
        self.test_lock_handle(f.wire_fh(), offset, len, exclusive)
    }

    /// [`test_lock`](Self::test_lock) by file handle.
    pub fn test_lock_handle(
        &mut self,
        fh: FileHandle,
        offset: u64,
        len: u64,
        exclusive: bool,
    ) -> Result<Option<LockInfo>> {
        let ltype = if exclusive {
            dafs_proto::types::lock_type::EXCLUSIVE
        } else {
            dafs_proto::types::lock_type::SHARED
        };
        let m = self.call(&Request::LockTest { fh, offset, len, ltype })?;
        match self.decode(&m)?.1 {
            Reply::LockTest { conflict: false, .. } => Ok(None),
            Reply::LockTest { ltype, owner, offset, len, .. } => Ok(Some(LockInfo {
                exclusive: ltype == dafs_proto::types::lock_type::EXCLUSIVE,
                owner,
                offset,
                len,
            })),
            _ => Err(unexpected_reply(Opcode::LockTest)),
        }
    }

    /// Release this session's locks over a range (may split locks it partly covers).
    pub fn unlock(&mut self, f: &File, offset: u64, len: u64) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.unlock(f, offset, len));
        }
        self.unlock_handle(f.wire_fh(), offset, len)
    }

    /// [`unlock`](Self::unlock) by file handle.
    pub fn unlock_handle(&mut self, fh: FileHandle, offset: u64, len: u64) -> Result<()> {
        let m = self.call(&Request::Unlock { fh, offset, len })?;
        self.decode(&m)?;
        self.held.unlocked(fh, offset, len);
        Ok(())
    }
}
