//! Completion groups: requests name one at submit; their completions are reaped from it.

use std::time::{Duration, Instant};

use dafs_transport::Wait;

use crate::completions::{Cg, INTERNAL_CG};
use crate::{Client, Error, ReqId, Result};

/// A completion group: requests name one at submit; completions are reaped from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CgId(pub u32);

/// A finished request.
#[derive(Debug)]
pub struct Completion {
    pub id: ReqId,
    pub user_data: u64,
    /// Bytes transferred.
    pub result: Result<usize>,
    /// For reads: the read reached end of file.
    pub eof: bool,
    /// The request's `IoBuf::Vec`, handed back.
    pub buf: Option<Vec<u8>>,
}

impl Client {
    /// Create a completion group; at most [`COMPLETION_GROUPS_MAX`](crate::limits::COMPLETION_GROUPS_MAX) exist at once
    /// ([`Error::TooManyCompletionGroups`] beyond: destroy one first).
    pub fn create_cg(&mut self) -> Result<CgId> {
        self.cgs.create()
    }

    /// Destroy an empty completion group (no I/O in flight, nothing unreaped).
    pub fn destroy_cg(&mut self, cg: CgId) -> Result<()> {
        if let Some(c) = self.cluster.as_deref_mut() {
            self.cgs.get(cg).ok_or(Error::InvalidArgument("unknown completion group"))?;
            c.destroy_cg(cg)?;
        }
        self.cgs.destroy(cg)
    }

    /// Requests of `cg` still in flight.
    pub fn outstanding(&self, cg: CgId) -> usize {
        if let Some(c) = self.cluster.as_deref() {
            return c.outstanding(cg);
        }
        self.cgs.get(cg).map(Cg::outstanding).unwrap_or(0)
    }

    /// Make progress without blocking and return up to `max` completions of `cg`.
    pub fn poll(&mut self, cg: CgId, max: usize) -> Result<Vec<Completion>> {
        self.check_cg(cg)?;
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.poll(cg, max);
        }
        while !self.dead && self.progress(Wait::NoWait)? {}
        Ok(self.cgs.get_mut(cg).unwrap().take(max))
    }

    /// Wait for one completion of `cg` (None: timed out, or nothing in flight).
    pub fn wait_one(&mut self, cg: CgId, timeout: Option<Duration>) -> Result<Option<Completion>> {
        Ok(self.wait_n(cg, 1, timeout)?.pop())
    }

    /// Wait until `n` completions of `cg` are available (or everything in flight has
    /// completed, or the timeout passes), and return them.
    pub fn wait_n(
        &mut self,
        cg: CgId,
        n: usize,
        timeout: Option<Duration>,
    ) -> Result<Vec<Completion>> {
        self.check_cg(cg)?;
        let deadline = timeout.map(|t| Instant::now() + t);
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.wait_n(cg, n, deadline);
        }
        loop {
            let g = self.cgs.get(cg).unwrap();
            if g.queued() >= n || g.outstanding() == 0 || self.dead {
                break;
            }
            let wait = match deadline {
                None => Wait::Forever,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        // Out of time, but still look at what has arrived (a zero timeout
                        // means "poll").
                        while !self.dead && self.progress(Wait::NoWait)? {}
                        break;
                    }
                    Wait::Timeout(d - now)
                }
            };
            self.progress(wait)?;
        }
        Ok(self.cgs.get_mut(cg).unwrap().take(n))
    }

    /// Wait for everything in flight on `cg` and return all its completions.
    pub fn wait_all(&mut self, cg: CgId) -> Result<Vec<Completion>> {
        self.check_cg(cg)?;
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.wait_n(cg, usize::MAX, None);
        }
        while self.cgs.get(cg).unwrap().outstanding() > 0 && !self.dead {
            self.progress(Wait::Forever)?;
        }
        Ok(self.cgs.get_mut(cg).unwrap().take(usize::MAX))
    }

    /// Completion groups the application may submit to (not the internal one).
    pub(crate) fn check_user_cg(&self, cg: CgId) -> Result<()> {
        if cg == INTERNAL_CG {
            return Err(Error::InvalidArgument("completion group 0 is internal to the library"));
        }
        self.check_cg(cg)
    }

    pub(crate) fn check_cg(&self, cg: CgId) -> Result<()> {
        if self.cgs.get(cg).is_some() {
            Ok(())
        } else {
            Err(Error::InvalidArgument("unknown completion group"))
        }
    }

    /// Refuse a request that may deliver `n` completions to `cg` when its queue has no
    /// room left for them (see [`Client::completions_queued_max`]).
    pub(crate) fn check_queue_room(&self, cg: CgId, n: u32) -> Result<()> {
        let g = self.cgs.get(cg).ok_or(Error::InvalidArgument("unknown completion group"))?;
        if g.has_room(n, self.completions_queued_max()) {
            Ok(())
        } else {
            Err(Error::CompletionQueueFull)
        }
    }
}
