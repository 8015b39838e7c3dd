//! The I/O pool: threads that execute the independent data requests of a session in
//! parallel (see `conn::parallel` for which requests, and the ordering rules).
//!
//! A worker thread owns its connections and decodes, checks and answers every request;
//! a READ or WRITE it may run in parallel becomes a [`Job`] here: a closure that does the
//! storage I/O (and, over shared memory, the copy into or out of the client's memory)
//! and hands its result back to the owning connection (`conn::parallel::DoneBox`), whose
//! worker sends the reply and completes the slot. Jobs touch no session state.
//!
//! Limits. At most [`IoPool::inflight_max`] jobs are submitted and not yet finished,
//! server-wide ([`IO_INFLIGHT_PER_THREAD`] per participant); one connection holds at
//! most [`IoPool::session_inflight_max`] of them, so no session takes the whole pool.
//! When either limit is reached the worker runs the request itself, as without a pool:
//! nothing waits for a place and nobody starves.
//!
//! Cost: a pool thread spins at most [`IO_SPIN`] for the next job, then sleeps on a
//! condition variable; a submitter wakes one only when none spins. A worker with
//! nothing else to do also runs queued jobs, but only the *excess* (`run_excess`): those
//! beyond what idle pool threads are about to take. A worker that took every queued job
//! itself (as it once did) left the pool thread it had just woken with nothing, and ran
//! the session's requests one after the other on one core while the other idled.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most I/O threads (`io_threads`): beyond this memory bandwidth, not threads, limits.
pub const IO_THREADS_MAX: usize = 16;
/// Jobs in flight per participant (pool threads and one worker): enough to keep each
/// busy between two looks of the worker, few enough to bound the memory held by reads
/// in flight.
pub const IO_INFLIGHT_PER_THREAD: usize = 4;
/// How long an idle pool thread polls for the next job before it sleeps: about the gap
/// between a client's back-to-back requests at queue depth > 1.
const IO_SPIN: Duration = Duration::from_micros(20);

/// The default thread count: one fewer than the cores (the worker runs jobs too), at
/// least one, at most [`IO_THREADS_MAX`].
pub fn io_threads_default() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .clamp(1, IO_THREADS_MAX)
}

/// One request's storage I/O, run once by a pool thread or a worker.
pub type Job = Box<dyn FnOnce() + Send>;

struct Inner {
    queue: Mutex<VecDeque<Job>>,
    cv: Condvar,
    /// `queue.len()`, readable without the lock by spinning threads.
    queued: AtomicUsize,
    /// Jobs submitted and not yet finished (bounded by `inflight_max`).
    inflight: AtomicUsize,
    sleeping: AtomicUsize,
    spinning: AtomicUsize,
    /// Pool threads running a job now; the others are idle and take queued jobs next.
    busy: AtomicUsize,
    /// The number of pool threads.
    threads: usize,
    shutdown: AtomicBool,
}

/// The I/O threads of one server.
pub struct IoPool {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    inflight_max: usize,
    session_inflight_max: usize,
}

impl IoPool {
    /// Start `n` threads (at most [`IO_THREADS_MAX`]); 0 disables parallel execution
    /// (every request runs on its worker, one at a time per connection).
    pub fn start(n: usize) -> std::io::Result<IoPool> {
        let n = n.min(IO_THREADS_MAX);
        let inflight_max = if n == 0 { 0 } else { (n + 1) * IO_INFLIGHT_PER_THREAD };
        let inner = Arc::new(Inner {
            queue: Mutex::new(VecDeque::with_capacity(inflight_max)),
            cv: Condvar::new(),
            queued: AtomicUsize::new(0),
            inflight: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            spinning: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            threads: n,
            shutdown: AtomicBool::new(false),
        });
        let mut pool = IoPool {
            inner,
            threads: Vec::with_capacity(n),
            inflight_max,
            // Half the pool at most: another session always finds room.
            session_inflight_max: (inflight_max / 2).max(2.min(inflight_max)),
        };
        for i in 0..n {
            let inner = Arc::clone(&pool.inner);
            let t = std::thread::Builder::new()
                .name(format!("dafsd-io-{i}"))
                .spawn(move || io_loop(&inner))?;
            pool.threads.push(t);
        }
        Ok(pool)
    }

    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Jobs in flight server-wide at most.
    pub fn inflight_max(&self) -> usize {
        self.inflight_max
    }

    /// Jobs in flight per connection (session) at most.
    pub fn session_inflight_max(&self) -> usize {
        self.session_inflight_max
    }

    /// Queue `job`, or give it back when `inflight_max` jobs are in flight (the caller
    /// then runs the request itself). The job must call [`Finisher::finished`] last.
    pub fn try_submit(&self, job: Job) -> Result<(), Job> {
        let p = &self.inner;
        let prev = p.inflight.fetch_add(1, Ordering::AcqRel);
        if prev >= self.inflight_max {
            p.inflight.fetch_sub(1, Ordering::AcqRel);
            return Err(job);
        }
        let mut q = p.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(job);
        p.queued.store(q.len(), Ordering::SeqCst);
        // SeqCst with the pool threads' `spinning` updates: a thread that is seen not
        // spinning either sleeps (and is woken here) or sees the job after its spin.
        if p.spinning.load(Ordering::SeqCst) == 0 && p.sleeping.load(Ordering::Relaxed) > 0 {
            p.cv.notify_one();
        }
        Ok(())
    }

    /// Run one queued job on the calling worker if more are queued than idle pool
    /// threads will take (each idle thread, spinning or woken by `try_submit`, takes
    /// one); true if it ran one. Without pool threads every queued job is excess.
    pub fn run_excess(&self) -> bool {
        let p = &self.inner;
        let busy = p.busy.load(Ordering::SeqCst);
        assert!(busy <= p.threads, "{busy} busy of {} pool threads", p.threads);
        let idle = p.threads - busy;
        if p.queued.load(Ordering::SeqCst) <= idle {
            return false;
        }
        match p.pop() {
            Some(job) => {
                job();
                true
            }
            None => false,
        }
    }

    /// Run `job` on the calling worker now, counted like a queued job (it calls
    /// [`Finisher::finished`] as every job does): the limit was reached.
    pub fn run_here(&self, job: Job) {
        self.inner.inflight.fetch_add(1, Ordering::AcqRel);
        job();
    }

    /// What a job calls last to free its place in `inflight_max`.
    pub fn finisher(&self) -> Finisher {
        Finisher(Arc::clone(&self.inner))
    }
}

/// Frees a job's place in the server-wide limit.
pub struct Finisher(Arc<Inner>);

impl Finisher {
    pub fn finished(self) {
        let prev = self.0.inflight.fetch_sub(1, Ordering::AcqRel);
        assert!(prev > 0, "more jobs finished than were submitted");
    }
}

impl Inner {
    fn pop(&self) -> Option<Job> {
        if self.queued.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let job = q.pop_front();
        self.queued.store(q.len(), Ordering::SeqCst);
        job
    }
}

impl Inner {
    /// `pop` for a pool thread: counted busy under the queue lock, so a worker never
    /// sees a job gone from the queue without the thread that took it counted busy.
    fn pop_busy(&self) -> Option<Job> {
        if self.queued.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let job = q.pop_front();
        if job.is_some() {
            self.busy.fetch_add(1, Ordering::SeqCst);
        }
        self.queued.store(q.len(), Ordering::SeqCst);
        job
    }
}

impl Drop for IoPool {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::Release);
        {
            let _g = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
            self.inner.cv.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn io_loop(p: &Inner) {
    loop {
        if let Some(job) = p.pop_busy() {
            job();
            let prev = p.busy.fetch_sub(1, Ordering::SeqCst);
            assert!(prev > 0, "a pool thread finished a job it did not start");
            continue;
        }
        if p.shutdown.load(Ordering::Acquire) {
            return;
        }
        p.spinning.fetch_add(1, Ordering::SeqCst);
        let start = Instant::now();
        while p.queued.load(Ordering::SeqCst) == 0
            && start.elapsed() < IO_SPIN
            && !p.shutdown.load(Ordering::Acquire)
        {
            std::hint::spin_loop();
        }
        p.spinning.fetch_sub(1, Ordering::SeqCst);
        if p.queued.load(Ordering::SeqCst) > 0 {
            continue;
        }
        let mut q = p.queue.lock().unwrap_or_else(|e| e.into_inner());
        p.sleeping.fetch_add(1, Ordering::Relaxed);
        while q.is_empty() && !p.shutdown.load(Ordering::Acquire) {
            q = p.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        p.sleeping.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn limits_refuse_beyond_inflight_max_and_jobs_run() {
        let pool = IoPool::start(1).unwrap();
        assert_eq!(pool.inflight_max(), 2 * IO_INFLIGHT_PER_THREAD);
        assert_eq!(pool.session_inflight_max(), IO_INFLIGHT_PER_THREAD);
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let go_rx = Arc::new(Mutex::new(go_rx));
        let (done_tx, done_rx) = mpsc::channel();
        for i in 0..pool.inflight_max() {
            let (go, done, fin) = (go_rx.clone(), done_tx.clone(), pool.finisher());
            let job: Job = Box::new(move || {
                go.lock().unwrap().recv().unwrap();
                done.send(i).unwrap();
                fin.finished();
            });
            assert!(pool.try_submit(job).is_ok());
        }
        // Full: the next one comes back to be run by the caller.
        assert!(pool.try_submit(Box::new(|| {})).is_err());
        for _ in 0..pool.inflight_max() {
            go_tx.send(()).unwrap();
        }
        let mut got: Vec<usize> =
            (0..pool.inflight_max()).map(|_| done_rx.recv().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..pool.inflight_max()).collect::<Vec<_>>());
        // Every place is free again.
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.inner.inflight.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(pool.inner.inflight.load(Ordering::Acquire), 0);
    }

    #[test]
    fn without_threads_nothing_is_accepted() {
        // No threads: parallel execution is off, nothing is accepted.
        let off = IoPool::start(0).unwrap();
        assert!(off.try_submit(Box::new(|| {})).is_err());
        assert!(!off.run_excess());
    }

    /// A job that sends the name of the thread it ran on.
    fn named_job(pool: &IoPool, tx: &mpsc::Sender<String>) -> Job {
        let (tx, fin) = (tx.clone(), pool.finisher());
        Box::new(move || {
            tx.send(std::thread::current().name().unwrap_or("?").to_string()).unwrap();
            fin.finished();
        })
    }

    #[test]
    fn a_worker_leaves_a_job_to_an_idle_pool_thread() {
        // The worker once ran every queued job itself before the pool thread it had just
        // woken got there: the session's requests then ran one at a time.
        let pool = IoPool::start(1).unwrap();
        let (tx, rx) = mpsc::channel();
        for _ in 0..20 {
            // The thread has finished its last job (sent its name) and is idle again.
            let deadline = Instant::now() + Duration::from_secs(5);
            while pool.inner.busy.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
                std::thread::yield_now();
            }
            assert!(pool.try_submit(named_job(&pool, &tx)).is_ok());
            assert!(!pool.run_excess(), "one job, one idle pool thread: not the worker's");
            assert_eq!(rx.recv().unwrap(), "dafsd-io-0");
        }
    }

    #[test]
    fn a_worker_runs_the_jobs_a_busy_pool_cannot_take() {
        let pool = IoPool::start(1).unwrap();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (tx, rx) = mpsc::channel();
        let (started_tx, started_rx) = mpsc::channel();
        let fin = pool.finisher();
        let blocker: Job = Box::new(move || {
            started_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            fin.finished();
        });
        assert!(pool.try_submit(blocker).is_ok());
        started_rx.recv().unwrap();
        // The pool thread is busy: both queued jobs are excess, the worker runs them.
        assert!(pool.try_submit(named_job(&pool, &tx)).is_ok());
        assert!(pool.try_submit(named_job(&pool, &tx)).is_ok());
        let me = std::thread::current().name().unwrap_or("?").to_string();
        assert!(pool.run_excess());
        assert!(pool.run_excess());
        assert!(!pool.run_excess(), "nothing left");
        assert_eq!(rx.recv().unwrap(), me);
        assert_eq!(rx.recv().unwrap(), me);
        go_tx.send(()).unwrap();
    }
}
