//! Parallel execution of one session's independent data requests.
//!
//! The worker stays the only thread that touches the session: it decodes every request,
//! runs the slot checks, and answers. Only the storage I/O of a plain READ or WRITE
//! (inline or direct, on a non-APPEND open) may go to the I/O pool (`io_pool`) as a job
//! that owns what it needs (the file's descriptor, a lease on the client's memory or a
//! buffer). The job's result comes back through the connection's [`DoneBox`]; the worker
//! reaps it (`reap`), sends the reply and completes the slot — replies leave in
//! completion order. Until then the slot stays busy, so a retransmission of a request
//! still in flight is dropped as a duplicate (its original's reply answers it) and never
//! runs twice.
//!
//! Ordering (see docs/architecture.md, "Parallel requests in a session"):
//! - a data request whose byte range overlaps an in-flight one of the same file, where
//!   either writes, waits until the session's in-flight requests have finished (a
//!   *barrier*); so do writes through an APPEND open;
//! - every other op (OPEN, CLOSE, COMMIT, SETATTR, locks, chains, batches, session ops,
//!   metadata) is a barrier: it executes after every earlier request has finished, as
//!   it would with one request at a time;
//! - a connection that closes waits for its in-flight requests and records their
//!   replies in the reply cache before its session is parked, so a retransmission on
//!   the next connection is answered from the cache.

use dafs_transport::ServerConn as _;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use dafs_proto::{Header, RemoteRegion, Reply, Request, Status, HEADER_LEN};
use dafs_transport::PlacementLease;
use rustix::fs as rfs;

use super::ops::write_at;
use super::reply::SlotUse;
use super::Conn;
use crate::fsops::{self, st};
use crate::stats::ServerStats;
use crate::Shared;

/// Data requests shorter than this run on the worker: handing them over costs about
/// what their copy does.
pub(super) const PARALLEL_BYTES_MIN: usize = 16 * 1024;
/// How long a barrier sleeps at most between looks at its in-flight requests (the job's
/// completion wakes it sooner).
const BARRIER_WAIT: Duration = Duration::from_millis(1);

/// Results of one connection's jobs, waiting for its worker.
pub(crate) struct DoneBox {
    list: Mutex<Vec<Done>>,
    /// Results of forwarded requests (`conn::forwarding`).
    forwarded: Mutex<Vec<super::forwarding::FwdDone>>,
    /// Signalled with every forwarded result (a condition variable per mutex).
    forwarded_cv: Condvar,
    /// Signalled with every result (a barrier waits on it).
    cv: Condvar,
    /// The owning worker's link: its waker is rung with every result.
    link: Arc<crate::WorkerLink>,
}

impl DoneBox {
    pub(crate) fn new(link: Arc<crate::WorkerLink>) -> Arc<DoneBox> {
        Arc::new(DoneBox {
            list: Mutex::new(Vec::new()),
            forwarded: Mutex::new(Vec::new()),
            forwarded_cv: Condvar::new(),
            cv: Condvar::new(),
            link,
        })
    }

    /// A forwarded request's result: to the list, and the worker woken.
    pub(super) fn push_forwarded(&self, d: super::forwarding::FwdDone) {
        self.forwarded.lock().unwrap_or_else(|e| e.into_inner()).push(d);
        self.forwarded_cv.notify_all();
        let _ = self.link.waker.wake();
    }

    pub(super) fn take_forwarded(&self) -> Vec<super::forwarding::FwdDone> {
        std::mem::take(&mut *self.forwarded.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Sleep until a forwarded result arrives, at most `max`.
    pub(super) fn wait_forwarded(&self, max: Duration) {
        let g = self.forwarded.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_empty() {
            drop(self.forwarded_cv.wait_timeout(g, max));
        }
    }

    fn push(&self, d: Done) {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).push(d);
        self.cv.notify_all();
        let _ = self.link.waker.wake();
    }
}

/// A job's result.
pub(super) struct Done {
    tag: u64,
    result: Result<DoneOk, Status>,
}

pub(super) enum DoneOk {
    ReadDirect {
        count: u32,
        eof: bool,
    },
    /// The data read (the buffer returns to the connection's spares).
    ReadInline {
        data: Vec<u8>,
        eof: bool,
    },
    /// `buf`: the buffer the data came in, to recycle.
    Write {
        count: u32,
        stable: bool,
        offset: u64,
        buf: Option<Vec<u8>>,
    },
}

/// A request whose job is in flight.
pub(super) struct InFlight {
    tag: u64,
    hdr: Header,
    /// (dev, ino) and the byte range `[start, end)`.
    file: (u64, u64),
    start: u64,
    end: u64,
    write: bool,
}

/// What a request is to the parallel path.
pub(super) enum Plan {
    /// Not plain data I/O (or an APPEND write): waits for every in-flight request.
    Barrier,
    /// A READ or WRITE on `file`'s `[start, end)`.
    Data { file: (u64, u64), start: u64, end: u64, write: bool },
}

impl Conn {
    /// True while jobs of this connection are in flight.
    pub(crate) fn has_inflight(&self) -> bool {
        !self.inflight.is_empty() || !self.forwards.is_empty()
    }

    /// How `req` relates to the requests in flight. Requests that will fail before any
    /// I/O (unknown open, wrong mode) count as data requests on no file: they conflict
    /// with nothing.
    pub(super) fn plan(&self, req: &Request) -> Plan {
        let (open_id, offset, len, write) = match req {
            Request::ReadInline { open_id, offset, len } => (*open_id, *offset, *len as u64, false),
            Request::ReadDirect { open_id, offset, len, .. } => {
                (*open_id, *offset, *len as u64, false)
            }
            Request::WriteInline { open_id, offset, data, .. } => {
                (*open_id, *offset, data.len() as u64, true)
            }
            Request::WriteDirect { open_id, offset, len, .. } => {
                (*open_id, *offset, *len as u64, true)
            }
            _ => return Plan::Barrier,
        };
        let Some(s) = self.session.as_ref() else { return Plan::Barrier };
        match s.open_file(open_id, !write) {
            Ok(of) if write && of.append.is_some() => Plan::Barrier,
            Ok(of) => {
                Plan::Data { file: of.file, start: offset, end: offset.saturating_add(len), write }
            }
            Err(_) => Plan::Data { file: (u64::MAX, u64::MAX), start: 0, end: 0, write },
        }
    }

    /// Make `plan`'s request safe to execute now: wait for the in-flight requests it
    /// must follow (all of them for a barrier, else those it overlaps where either
    /// writes).
    pub(super) fn order(&mut self, sh: &Shared, out: &mut Vec<u8>, plan: &Plan) {
        if self.inflight.is_empty() {
            return;
        }
        let wait = match *plan {
            Plan::Barrier => true,
            Plan::Data { file, start, end, write } => self
                .inflight
                .iter()
                .any(|f| f.file == file && (write || f.write) && f.start < end && start < f.end),
        };
        if wait {
            sh.stats.parallel_barriers.fetch_add(1, Relaxed);
            self.drain(sh, out);
        }
    }

    /// Whether a data request of `len` bytes should go to the pool: the pool runs, this
    /// session has room in it, the request is worth handing over, and it is not alone —
    /// something is in flight or another request is waiting. A lone request runs on the
    /// worker at once (no hand-over latency at queue depth 1; a lone large READ_DIRECT is
    /// split by the copy engines there).
    fn may_go_parallel(&self, sh: &Shared, len: usize) -> bool {
        sh.io.threads() > 0
            && len >= PARALLEL_BYTES_MIN
            && self.inflight.len() < sh.io.session_inflight_max()
            && (!self.inflight.is_empty() || self.t.more_input())
    }

    /// Hand `req` (already through `dispatch`'s checks and `order`) to the I/O pool if it
    /// qualifies; false if it did not go and must execute here.
    pub(super) fn try_parallel(
        &mut self,
        sh: &Shared,
        h: &Header,
        req: &Request,
        plan: &Plan,
    ) -> bool {
        let Plan::Data { file, start, end, write } = *plan else { return false };
        let inf = InFlight { tag: 0, hdr: *h, file, start, end, write };
        match *req {
            Request::ReadDirect { open_id, offset, len, region } => {
                if !self.may_go_parallel(sh, len as usize) || len > sh.cfg.direct_bytes_max {
                    return false;
                }
                let Some((fd, mut lease)) = self.leased(open_id, true, region, len) else {
                    return false;
                };
                let stats = sh.stats.clone();
                self.submit(sh, inf, move || {
                    let n = lease.dst().pread_from(fd.as_fd(), offset).map_err(fsops::io_st)?;
                    stats.bytes_read.fetch_add(n as u64, Relaxed);
                    stats.direct_bytes.fetch_add(n as u64, Relaxed);
                    Ok(DoneOk::ReadDirect { count: n as u32, eof: n < len as usize })
                });
                true
            }
            Request::WriteDirect { open_id, offset, len, stable, region } => {
                if !self.may_go_parallel(sh, len as usize)
                    || len > sh.cfg.direct_bytes_max
                    || offset.checked_add(len as u64).is_none_or(|e| e > i64::MAX as u64)
                {
                    return false;
                }
                let Some((fd, lease)) = self.leased(open_id, false, region, len) else {
                    return false;
                };
                let stats = sh.stats.clone();
                self.submit(sh, inf, move || {
                    let (n, at) = write_at(fd.as_fd(), lease.src(), offset, None)?;
                    finish_write(&stats, &fd, n, stable)?;
                    stats.direct_bytes.fetch_add(n as u64, Relaxed);
                    Ok(DoneOk::Write { count: n as u32, stable, offset: at, buf: None })
                });
                true
            }
            Request::ReadInline { open_id, offset, len } => {
                let max = self.t.msg_size_bytes_max() - HEADER_LEN - 64;
                if !self.may_go_parallel(sh, len as usize) || len as usize > max {
                    return false;
                }
                let Ok(of) = self.session().open_file(open_id, true) else { return false };
                let fd = of.fd.clone();
                let mut data = self.spare.pop().unwrap_or_default();
                data.resize(len as usize, 0);
                let stats = sh.stats.clone();
                self.submit(sh, inf, move || {
                    let n = fsops::pread_full(fd.as_fd(), &mut data[..], offset)
                        .map_err(fsops::io_st)?;
                    stats.bytes_read.fetch_add(n as u64, Relaxed);
                    stats.inline_bytes.fetch_add(n as u64, Relaxed);
                    data.truncate(n);
                    Ok(DoneOk::ReadInline { data, eof: n < len as usize })
                });
                true
            }
            Request::WriteInline { open_id, offset, stable, data } => {
                if !self.may_go_parallel(sh, data.len())
                    || offset.checked_add(data.len() as u64).is_none_or(|e| e > i64::MAX as u64)
                {
                    return false;
                }
                let Ok(of) = self.session().open_file(open_id, false) else { return false };
                let fd = of.fd.clone();
                // One copy out of the message, which the transport reuses at once.
                let mut buf = self.spare.pop().unwrap_or_default();
                buf.clear();
                buf.extend_from_slice(data);
                let stats = sh.stats.clone();
                self.submit(sh, inf, move || {
                    let (n, at) = write_at(fd.as_fd(), &buf, offset, None)?;
                    finish_write(&stats, &fd, n, stable)?;
                    stats.inline_bytes.fetch_add(n as u64, Relaxed);
                    Ok(DoneOk::Write { count: n as u32, stable, offset: at, buf: Some(buf) })
                });
                true
            }
            _ => false,
        }
    }

    /// A WRITE_DIRECT's pulled data (TCP) written by the pool. Gives `data` back if the
    /// write must run here.
    pub(super) fn try_parallel_pulled(
        &mut self,
        sh: &Shared,
        out: &mut Vec<u8>,
        p: &super::pending::PendingWrite,
        data: Vec<u8>,
    ) -> Result<(), Vec<u8>> {
        let super::pending::WriteTarget::File(fd) = &p.target else { return Err(data) };
        if p.append.is_some() || p.batch.is_some() || !self.may_go_parallel(sh, data.len()) {
            return Err(data);
        }
        let end = p.offset.saturating_add(data.len() as u64);
        self.order(sh, out, &Plan::Data { file: p.file, start: p.offset, end, write: true });
        let inf = InFlight { tag: 0, hdr: p.hdr, file: p.file, start: p.offset, end, write: true };
        let (fd, offset, stable, stats) = (fd.clone(), p.offset, p.stable, sh.stats.clone());
        self.submit(sh, inf, move || {
            let r = write_at(fd.as_fd(), &data, offset, None)
                .and_then(|(n, at)| finish_write(&stats, &fd, n, stable).map(|_| (n, at)));
            let (n, at) = match r {
                Ok(v) => v,
                // The buffer is dropped with the error: rare, and the pool makes another.
                Err(e) => return Err(e),
            };
            stats.direct_bytes.fetch_add(n as u64, Relaxed);
            Ok(DoneOk::Write { count: n as u32, stable, offset: at, buf: Some(data) })
        });
        Ok(())
    }

    /// The open file's descriptor and a lease on the client's memory, if the provider
    /// gives one (shared memory).
    fn leased(
        &mut self,
        open_id: u64,
        read: bool,
        region: RemoteRegion,
        len: u32,
    ) -> Option<(Arc<OwnedFd>, PlacementLease)> {
        let fd = self.session().open_file(open_id, read).ok()?.fd.clone();
        // A region the client did not register is refused by the ordinary path.
        let lease = self.t.lease(region, len as usize, read).ok()??;
        Some((fd, lease))
    }

    /// Queue `work` on the pool (or run it here when the pool is full); its result
    /// answers `inf`'s request when reaped.
    fn submit(
        &mut self,
        sh: &Shared,
        mut inf: InFlight,
        work: impl FnOnce() -> Result<DoneOk, Status> + Send + 'static,
    ) {
        assert!(self.inflight.len() < sh.io.session_inflight_max(), "session limit checked");
        let tag = self.take_tag();
        inf.tag = tag;
        self.inflight.push(inf);
        sh.stats.requests_parallel.fetch_add(1, Relaxed);
        let (done, fin) = (self.done.clone(), sh.io.finisher());
        let job: crate::io_pool::Job = Box::new(move || {
            let result = work();
            done.push(Done { tag, result });
            fin.finished();
        });
        if let Err(job) = sh.io.try_submit(job) {
            sh.io.run_here(job);
        }
    }

    /// Answer every finished job: reply in completion order, complete its slot.
    pub(crate) fn reap(&mut self, sh: &Shared, out: &mut Vec<u8>) {
        if self.inflight.is_empty() {
            return;
        }
        let done = std::mem::take(&mut *self.done.list.lock().unwrap_or_else(|e| e.into_inner()));
        // Each reply goes on its request's channel; then back to the request being
        // handled, if any (a barrier reaps in the middle of one).
        let current = self.t.channel();
        for d in done {
            let i = self
                .inflight
                .iter()
                .position(|f| f.tag == d.tag)
                .expect("every result belongs to a request in flight");
            let inf = self.inflight.swap_remove(i);
            let reply = match &d.result {
                Ok(DoneOk::ReadDirect { count, eof }) => {
                    Reply::ReadDirect { count: *count, eof: *eof }
                }
                Ok(DoneOk::ReadInline { data, eof }) => Reply::ReadInline { eof: *eof, data },
                Ok(DoneOk::Write { count, stable, offset, .. }) => {
                    Reply::Write { count: *count, stable: *stable, offset: *offset }
                }
                Err(e) => crate::cluster::error_reply(sh, *e),
            };
            self.select_slot_channel(inf.hdr.slot_id);
            // The op has executed: a failed send shows at the connection's next read.
            let _ = self.respond(sh, out, &inf.hdr, &reply, SlotUse::Complete);
            if let Ok(DoneOk::ReadInline { data, .. } | DoneOk::Write { buf: Some(data), .. }) =
                d.result
            {
                if self.spare.len() < sh.io.session_inflight_max() {
                    self.spare.push(data);
                }
            }
        }
        self.t.set_channel(current);
    }

    /// True if the request on `slot` is executing off the worker (an I/O pool job or a
    /// forwarded request): its reply comes later, on the channel `slot_chan` names.
    pub(super) fn job_on_slot(&self, slot: u32) -> bool {
        self.inflight.iter().any(|f| f.hdr.slot_id == slot)
            || self.forwards.iter().any(|f| f.hdr.slot_id == slot)
    }

    /// The worker's look at this connection between events: answer the finished jobs
    /// and write the replies out.
    pub(crate) fn answer_finished(
        &mut self,
        sh: &Shared,
        sc: &mut super::Scratch,
    ) -> super::ConnFate {
        self.reap(sh, &mut sc.out);
        self.reap_forwarded(sh, &mut sc.out);
        self.flush(sh)
    }

    /// Wait until no job of this connection is in flight, answering each as it
    /// finishes; the worker runs the excess queued jobs (any connection's) meanwhile.
    pub(super) fn drain(&mut self, sh: &Shared, out: &mut Vec<u8>) {
        while !self.inflight.is_empty() {
            self.reap(sh, out);
            if self.inflight.is_empty() || sh.io.run_excess() {
                continue;
            }
            let g = self.done.list.lock().unwrap_or_else(|e| e.into_inner());
            if g.is_empty() {
                drop(self.done.cv.wait_timeout(g, BARRIER_WAIT));
            }
        }
    }
}

/// After a write of `n` bytes: `fdatasync` if stable, and count it.
fn finish_write(stats: &ServerStats, fd: &OwnedFd, n: usize, stable: bool) -> Result<(), Status> {
    if stable {
        rfs::fdatasync(fd).map_err(st)?;
    }
    stats.bytes_written.fetch_add(n as u64, Relaxed);
    Ok(())
}
