//! The forwarding threads: forwarded requests run here, never on a worker.
//!
//! A forwarded request waits a round trip (or, at worst, `FORWARD_DEADLINE`) for the
//! home node. On a worker that wait would hold every other connection of the worker,
//! and two nodes forwarding to each other could each hold the worker the other's
//! forwarding session needs, until both gave up. So the worker hands the request over
//! as a job, keeps the request's slot busy, and answers when the job's result comes
//! back (`conn::forwarding`), as it does for the I/O pool's jobs.
//!
//! Each connection's forwarded requests form a [`Strand`]: they run one at a time, in
//! arrival order (a proxied open's writes, reads and close must not overtake each
//! other, as they would not on a worker), while different connections' strands run in
//! parallel on up to [`ForwardPool::threads`] threads. A home never forwards (it manages
//! the names it is asked for), so the forwarding threads wait only on other nodes'
//! workers, which never wait on them: no cycle.
//!
//! Limits: [`ForwardPool::inflight_max`] forwarded requests per node (queued or
//! running), at most [`FORWARDS_PER_CONN_MAX`] of them one connection's, so no client
//! takes the whole node's share; beyond either the request is answered `DELAY`. Closes
//! of proxied opens whose session ended are always taken (each open is closed once, so
//! they are bounded by the opens that exist).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Forwarding threads per core: they mostly wait on the network, not compute.
pub const FORWARD_THREADS_PER_CORE: usize = 4;
/// Most forwarding threads a node starts.
pub const FORWARD_THREADS_MAX: usize = 64;
/// Forwarded requests in flight per forwarding thread (queued or running), node-wide.
pub const FORWARDS_PER_THREAD: usize = 8;
/// Forwarded requests one connection may have in flight (its strand's queue).
pub const FORWARDS_PER_CONN_MAX: usize = 32;

/// Forwarding threads for this machine: [`FORWARD_THREADS_PER_CORE`] per core, at least
/// 4, at most [`FORWARD_THREADS_MAX`].
pub fn forward_threads_default() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores * FORWARD_THREADS_PER_CORE).clamp(4, FORWARD_THREADS_MAX)
}

/// One forwarded request's work, run once on a forwarding thread.
pub type Job = Box<dyn FnOnce() + Send>;

struct Queue {
    /// Strands with jobs waiting, each at most once.
    ready: VecDeque<Arc<Strand>>,
    shutdown: bool,
}

struct Inner {
    q: Mutex<Queue>,
    cv: Condvar,
    /// Jobs accepted and not finished, node-wide (bounded by `inflight_max`).
    inflight: AtomicUsize,
    inflight_max: usize,
}

/// The node's forwarding threads.
pub struct ForwardPool {
    inner: Arc<Inner>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// One connection's forwarded requests, run in order (see the module documentation).
#[derive(Default)]
pub struct Strand {
    state: Mutex<StrandState>,
}

#[derive(Default)]
struct StrandState {
    jobs: VecDeque<Job>,
    /// In the pool's ready queue or being run by a thread.
    scheduled: bool,
}

/// Why a job was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The node has `inflight_max` forwarded requests in flight.
    NodeFull,
    /// This connection has [`FORWARDS_PER_CONN_MAX`] in flight.
    ConnFull,
}

impl ForwardPool {
    /// Start `threads` forwarding threads (at least one).
    pub fn start(threads: usize) -> std::io::Result<ForwardPool> {
        let threads = threads.clamp(1, FORWARD_THREADS_MAX);
        let inner = Arc::new(Inner {
            q: Mutex::new(Queue { ready: VecDeque::new(), shutdown: false }),
            cv: Condvar::new(),
            inflight: AtomicUsize::new(0),
            inflight_max: threads * FORWARDS_PER_THREAD,
        });
        let mut pool = ForwardPool { inner, threads: Vec::with_capacity(threads) };
        for i in 0..threads {
            let inner = Arc::clone(&pool.inner);
            let t = std::thread::Builder::new()
                .name(format!("dafsd-fwd-{i}"))
                .spawn(move || run(&inner))?;
            pool.threads.push(t);
        }
        Ok(pool)
    }

    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Forwarded requests in flight node-wide at most.
    pub fn inflight_max(&self) -> usize {
        self.inner.inflight_max
    }

    /// Forwarded requests in flight now (queued or running).
    pub fn inflight(&self) -> usize {
        self.inner.inflight.load(Ordering::Relaxed)
    }

    /// Queue `job` on `strand`, after the strand's earlier jobs. `conn_inflight`: the
    /// connection's forwarded requests in flight before this one.
    pub fn submit(
        &self,
        strand: &Arc<Strand>,
        conn_inflight: usize,
        job: Job,
    ) -> Result<(), Refused> {
        if conn_inflight >= FORWARDS_PER_CONN_MAX {
            return Err(Refused::ConnFull);
        }
        self.submit_counted(strand, job)
    }

    /// Queue a job that answers no connection (closing a proxied open whose session
    /// ended) on a strand of its own. Counted, but never refused (see the module
    /// documentation).
    pub fn submit_detached(&self, job: Job) {
        self.inner.inflight.fetch_add(1, Ordering::AcqRel);
        self.enqueue(&Arc::new(Strand::default()), job);
    }

    fn submit_counted(&self, strand: &Arc<Strand>, job: Job) -> Result<(), Refused> {
        let p = &self.inner;
        if p.inflight.fetch_add(1, Ordering::AcqRel) >= p.inflight_max {
            p.inflight.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::NodeFull);
        }
        self.enqueue(strand, job);
        Ok(())
    }

    /// Put an accepted (counted) job on `strand`, scheduling the strand if idle.
    fn enqueue(&self, strand: &Arc<Strand>, job: Job) {
        let p = &self.inner;
        let inner = Arc::clone(p);
        let job: Job = Box::new(move || {
            job();
            let prev = inner.inflight.fetch_sub(1, Ordering::AcqRel);
            assert!(prev > 0, "more forwarded requests finished than were accepted");
        });
        let mut s = strand.state.lock().unwrap_or_else(|e| e.into_inner());
        s.jobs.push_back(job);
        if !s.scheduled {
            s.scheduled = true;
            drop(s);
            let mut q = p.q.lock().unwrap_or_else(|e| e.into_inner());
            q.ready.push_back(Arc::clone(strand));
            p.cv.notify_one();
        }
    }
}

impl Drop for ForwardPool {
    fn drop(&mut self) {
        self.inner.q.lock().unwrap_or_else(|e| e.into_inner()).shutdown = true;
        self.inner.cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A forwarding thread: take a ready strand, run its jobs in order until it is empty.
fn run(p: &Inner) {
    loop {
        let strand = {
            let mut q = p.q.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(s) = q.ready.pop_front() {
                    break s;
                }
                if q.shutdown {
                    return;
                }
                q = p.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        loop {
            let job = {
                let mut s = strand.state.lock().unwrap_or_else(|e| e.into_inner());
                match s.jobs.pop_front() {
                    Some(j) => j,
                    None => {
                        // Unscheduled under the strand's lock: a submit after this
                        // schedules it again, one before it was taken here.
                        s.scheduled = false;
                        break;
                    }
                }
            };
            job();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_strand_runs_its_jobs_in_order_while_strands_run_in_parallel() {
        let pool = ForwardPool::start(2).unwrap();
        let (a, b) = (Arc::new(Strand::default()), Arc::new(Strand::default()));
        let (tx, rx) = mpsc::channel();
        let (block_tx, block_rx) = mpsc::channel::<()>();
        // Strand a's first job blocks: its second waits, strand b's jobs go on.
        let t = tx.clone();
        pool.submit(
            &a,
            0,
            Box::new(move || {
                block_rx.recv().unwrap();
                t.send("a1").unwrap();
            }),
        )
        .unwrap();
        let t = tx.clone();
        pool.submit(&a, 1, Box::new(move || t.send("a2").unwrap())).unwrap();
        let t = tx.clone();
        pool.submit(&b, 0, Box::new(move || t.send("b1").unwrap())).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), "b1");
        block_tx.send(()).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), "a1");
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), "a2");
    }

    #[test]
    fn limits_refuse_beyond_the_node_and_connection_shares() {
        let pool = ForwardPool::start(1).unwrap();
        let s = Arc::new(Strand::default());
        assert_eq!(pool.submit(&s, FORWARDS_PER_CONN_MAX, Box::new(|| {})), Err(Refused::ConnFull));
        let (block_tx, block_rx) = mpsc::channel::<()>();
        let block_rx = Arc::new(Mutex::new(block_rx));
        for _ in 0..pool.inflight_max() {
            let r = block_rx.clone();
            pool.submit(
                &Arc::new(Strand::default()),
                0,
                Box::new(move || r.lock().unwrap().recv().unwrap()),
            )
            .unwrap();
        }
        assert_eq!(pool.submit(&s, 0, Box::new(|| {})), Err(Refused::NodeFull));
        for _ in 0..pool.inflight_max() {
            block_tx.send(()).unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while pool.inflight() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(pool.inflight(), 0);
        assert!(pool.submit(&s, 0, Box::new(|| {})).is_ok());
    }
}
