//! Completion groups: requests name one at submit; their completions are reaped from it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use dafs_proto::limits;
use dafs_transport::Wait;

use crate::counters::InFlightCount;
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

pub(crate) struct Cg {
    pub(crate) done: VecDeque<Completion>,
    /// Requests in flight on this group; each holds a slot.
    pub(crate) outstanding: InFlightCount,
}

impl Cg {
    pub(crate) fn new() -> Self {
        Cg {
            done: VecDeque::new(),
            outstanding: InFlightCount::new(
                "requests in flight on a completion group",
                limits::SLOTS_MAX,
            ),
        }
    }
}

impl Client {
    /// Create a completion group.
    pub fn create_cg(&mut self) -> CgId {
        // Never 0 (the blocking calls' own group) and never an id still in use, even
        // after 2^32 creations.
        let mut id = self.next_cg;
        while id == self.internal_cg.0 || self.cgs.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next_cg = id.wrapping_add(1);
        self.cgs.insert(id, Cg::new());
        CgId(id)
    }

    /// Destroy an empty completion group (no I/O in flight, nothing unreaped).
    pub fn destroy_cg(&mut self, cg: CgId) -> Result<()> {
        match self.cgs.get(&cg.0) {
            Some(g) if g.outstanding.is_zero() && g.done.is_empty() && cg != self.internal_cg => {
                self.cgs.remove(&cg.0);
                Ok(())
            }
            Some(_) => {
                Err(Error::InvalidArgument("completion group has requests in flight or unreaped"))
            }
            None => Err(Error::InvalidArgument("unknown completion group")),
        }
    }

    /// Requests of `cg` still in flight.
    pub fn outstanding(&self, cg: CgId) -> usize {
        self.cgs.get(&cg.0).map(|g| g.outstanding.get() as usize).unwrap_or(0)
    }

    /// Make progress without blocking and return up to `max` completions of `cg`.
    pub fn poll(&mut self, cg: CgId, max: usize) -> Result<Vec<Completion>> {
        self.check_cg(cg)?;
        while !self.dead && self.progress(Wait::NoWait)? {}
        let g = self.cgs.get_mut(&cg.0).unwrap();
        let n = g.done.len().min(max);
        Ok(g.done.drain(..n).collect())
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
        loop {
            let g = &self.cgs[&cg.0];
            if g.done.len() >= n || g.outstanding.is_zero() || self.dead {
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
        let g = self.cgs.get_mut(&cg.0).unwrap();
        let k = g.done.len().min(n);
        Ok(g.done.drain(..k).collect())
    }

    /// Wait for everything in flight on `cg` and return all its completions.
    pub fn wait_all(&mut self, cg: CgId) -> Result<Vec<Completion>> {
        self.check_cg(cg)?;
        while !self.cgs[&cg.0].outstanding.is_zero() && !self.dead {
            self.progress(Wait::Forever)?;
        }
        Ok(self.cgs.get_mut(&cg.0).unwrap().done.drain(..).collect())
    }

    /// Completion groups the application may submit to (not the internal one).
    pub(crate) fn check_user_cg(&self, cg: CgId) -> Result<()> {
        if cg == self.internal_cg {
            return Err(Error::InvalidArgument("completion group 0 is internal to the library"));
        }
        self.check_cg(cg)
    }

    pub(crate) fn check_cg(&self, cg: CgId) -> Result<()> {
        if self.cgs.contains_key(&cg.0) {
            Ok(())
        } else {
            Err(Error::InvalidArgument("unknown completion group"))
        }
    }
}
