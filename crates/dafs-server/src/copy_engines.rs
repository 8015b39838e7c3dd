//! Copy engines: threads that help a worker place one large READ_DIRECT.
//!
//! Over shared memory a direct read is one copy, the kernel's `pread` from the page cache
//! into the client's mapped pages — the copy a local `pread` makes. One thread copies at
//! the speed of one core; local readers on a machine with more cores are not faster per
//! call, but the server can be: a read of at least [`PARALLEL_MIN_BYTES`] is cut into
//! page-aligned chunks, and the worker and every idle engine `pread` them at the same
//! time into the client's memory. The worker returns only when every chunk is done, so
//! the client's memory is written only while the placement is lent to the fill callback.
//! The result is the gap-free prefix: a short chunk (end of file) ends the count, and an
//! error in a chunk after the first truncates the count to the chunks before it (an error
//! in the first is the read's error), as one `pread` reports a failure after some bytes.
//!
//! Cost: an engine spins at most [`ENGINE_SPIN`] for work after its last chunk, then
//! sleeps on a condition variable. A worker posting a job wakes only as many sleeping
//! engines as its chunks can use beyond those already spinning, so back-to-back large
//! reads pay no futex wake. Nothing is allocated per request: each worker thread reuses
//! its one [`Job`], and the list of posted jobs holds at most one per worker.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dafs_transport::{PlacementDst, PlacementPart};

/// Most copy engines (`copy_threads`): beyond this memory bandwidth, not cores, limits a
/// copy, and each engine is a thread that spins after its work.
pub const COPY_THREADS_MAX: usize = 16;
/// Direct reads at least this long are split. Below it the chunks are too short to repay
/// an engine's wake-up (a few microseconds of copy each).
pub const PARALLEL_MIN_BYTES: usize = 128 * 1024;
/// Smallest chunk: a `pread` per chunk costs a system call, negligible against 64 KiB
/// of copying.
const CHUNK_BYTES_MIN: usize = 64 * 1024;
/// Most chunks of one job (the size of its result table): larger reads get larger chunks.
const CHUNKS_MAX: usize = 64;
/// Chunks per participant (worker and engines): more than one, so that a participant
/// that starts late (an engine being woken, ~20 us) leaves its share to the others.
const CHUNKS_PER_PARTICIPANT: usize = 2;
/// How long an idle engine polls for the next job before it sleeps: about the gap
/// between a client's back-to-back reads, so streaming keeps engines awake.
const ENGINE_SPIN: Duration = Duration::from_micros(10);
/// How long a worker spins for engines to finish their last chunks before it yields
/// the CPU to them between looks (a preempted engine needs the core back).
const FINISH_SPIN: Duration = Duration::from_micros(50);
const PAGE_BYTES: usize = 4096;

/// The default engine count: one fewer than the cores (the worker copies too), at most
/// [`COPY_THREADS_MAX`].
pub fn copy_threads_default() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(0)
        .min(COPY_THREADS_MAX)
}

/// The chunk size for a read of `len` bytes split among `participants` threads:
/// page-aligned, at least [`CHUNK_BYTES_MIN`], and large enough that there are at most
/// [`CHUNKS_MAX`] chunks.
fn chunk_bytes(len: usize, participants: usize) -> usize {
    let by_share = len / (participants * CHUNKS_PER_PARTICIPANT).max(1);
    let by_table = len.div_ceil(CHUNKS_MAX);
    by_share.max(by_table).max(CHUNK_BYTES_MIN).next_multiple_of(PAGE_BYTES)
}

/// The byte count of a job from its chunks' results (`len` bytes in chunks of `chunk`):
/// the gap-free prefix.
/// The results are taken (left `Ok(0)`).
fn prefix_count(results: &mut [io::Result<usize>], len: usize, chunk: usize) -> io::Result<usize> {
    let mut total = 0;
    for (i, r) in results.iter_mut().enumerate() {
        let want = chunk.min(len - i * chunk);
        match std::mem::replace(r, Ok(0)) {
            Ok(n) => {
                total += n;
                if n < want {
                    break;
                }
            }
            Err(e) if i == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(total)
}

struct JobState {
    /// The whole destination, while the job is posted.
    dst: Option<PlacementPart>,
    fd: RawFd,
    offset: u64,
    chunk: usize,
    nchunks: usize,
    /// The next chunk to claim; `nchunks` once all are claimed.
    next: usize,
    results: Vec<io::Result<usize>>,
}

/// One worker's reusable job.
struct Job {
    state: Mutex<JobState>,
    /// Chunks finished (their result stored).
    done: AtomicUsize,
}

impl Job {
    fn new() -> Job {
        let mut results = Vec::with_capacity(CHUNKS_MAX);
        results.resize_with(CHUNKS_MAX, || Ok(0));
        Job {
            state: Mutex::new(JobState {
                dst: None,
                fd: -1,
                offset: 0,
                chunk: 0,
                nchunks: 0,
                next: 0,
                results,
            }),
            done: AtomicUsize::new(0),
        }
    }

    fn has_chunks_left(&self) -> bool {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.next < s.nchunks
    }

    /// Claim and copy chunks until none is left unclaimed; the count copied.
    fn work(&self) -> usize {
        let mut copied = 0;
        loop {
            let (part, fd, offset, i) = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if s.next >= s.nchunks {
                    return copied;
                }
                let i = s.next;
                s.next += 1;
                let dst = s.dst.expect("a job with chunks left has a destination");
                let at = i * s.chunk;
                let len = s.chunk.min(dst.len() - at);
                // Page-aligned disjoint ranges inside the destination.
                let part = dst.sub(at, len).expect("chunks lie inside the destination");
                (part, s.fd, s.offset + at as u64, i)
            };
            // SAFETY: the worker that posted the job holds `fd` open and its destination
            // lent until `done` counts this chunk (it waits for every chunk before
            // returning from the fill callback); no one else claims chunk `i`.
            let r = unsafe { part.pread_from(BorrowedFd::borrow_raw(fd), offset) };
            self.state.lock().unwrap_or_else(|e| e.into_inner()).results[i] = r;
            // Release: the result above is visible to the worker that sees the count.
            self.done.fetch_add(1, Ordering::Release);
            copied += 1;
        }
    }
}

struct Pool {
    /// Jobs with chunks left to claim (at most one per worker thread).
    active: Mutex<Vec<Arc<Job>>>,
    cv: Condvar,
    /// `active.len()`, readable without the lock by spinning engines.
    active_count: AtomicUsize,
    /// Engines asleep on `cv` (changed under the `active` lock).
    sleeping: AtomicUsize,
    /// Engines idle but spinning: they will see a new job without a wake-up.
    spinning: AtomicUsize,
    shutdown: AtomicBool,
}

/// The engines of one server.
pub struct CopyEngines {
    pool: Arc<Pool>,
    threads: Vec<JoinHandle<()>>,
}

thread_local! {
    /// The calling worker's job, made on its first large read and reused after.
    static JOB: Arc<Job> = Arc::new(Job::new());
}

impl CopyEngines {
    /// Start `n` engines (at most [`COPY_THREADS_MAX`]); 0 disables splitting.
    pub fn start(n: usize) -> io::Result<CopyEngines> {
        let n = n.min(COPY_THREADS_MAX);
        let pool = Arc::new(Pool {
            active: Mutex::new(Vec::with_capacity(crate::config::WORKERS_MAX)),
            cv: Condvar::new(),
            active_count: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            spinning: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
        });
        let mut engines = CopyEngines { pool, threads: Vec::with_capacity(n) };
        for i in 0..n {
            let pool = Arc::clone(&engines.pool);
            let t = std::thread::Builder::new()
                .name(format!("dafsd-copy-{i}"))
                .spawn(move || engine_loop(&pool))?;
            engines.threads.push(t);
        }
        Ok(engines)
    }

    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Fill `dst` from `fd` at `offset`, as [`PlacementDst::pread_from`], with the
    /// engines' help when it is large enough.
    pub fn pread(
        &self,
        dst: &mut PlacementDst<'_>,
        fd: BorrowedFd<'_>,
        offset: u64,
    ) -> io::Result<usize> {
        let len = dst.len();
        if self.threads.is_empty() || len < PARALLEL_MIN_BYTES {
            return dst.pread_from(fd, offset);
        }
        let chunk = chunk_bytes(len, self.threads.len() + 1);
        let nchunks = len.div_ceil(chunk);
        assert!((2..=CHUNKS_MAX).contains(&nchunks), "{nchunks} chunks of {chunk} bytes");
        let whole = dst.part(0, len).expect("the whole destination lies inside itself");
        JOB.with(|job| {
            {
                let mut s = job.state.lock().unwrap_or_else(|e| e.into_inner());
                assert!(s.dst.is_none() && s.next >= s.nchunks, "a worker posts one job at a time");
                job.done.store(0, Ordering::Relaxed);
                *s = JobState {
                    dst: Some(whole),
                    fd: fd.as_raw_fd(),
                    offset,
                    chunk,
                    nchunks,
                    next: 0,
                    results: std::mem::take(&mut s.results),
                };
            }
            self.post(job, nchunks - 1);
            job.work();
            self.withdraw(job);
            // Engines may still be copying chunks they claimed: the destination stays
            // lent (and `fd` open) until every one is done.
            let start = Instant::now();
            while job.done.load(Ordering::Acquire) < nchunks {
                if start.elapsed() < FINISH_SPIN {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            let mut s = job.state.lock().unwrap_or_else(|e| e.into_inner());
            s.dst = None;
            prefix_count(&mut s.results[..nchunks], len, chunk)
        })
    }

    /// Make `job` visible to the engines and wake as many sleeping ones as can help
    /// (`helpers`) beyond those spinning.
    fn post(&self, job: &Arc<Job>, helpers: usize) {
        let p = &self.pool;
        let mut active = p.active.lock().unwrap_or_else(|e| e.into_inner());
        assert!(active.len() < active.capacity(), "one posted job per worker");
        active.push(Arc::clone(job));
        p.active_count.store(active.len(), Ordering::SeqCst);
        // Wake-ups are only for speed: a job no engine helps the worker finishes alone.
        let wanted = helpers.saturating_sub(p.spinning.load(Ordering::SeqCst));
        let asleep = p.sleeping.load(Ordering::Relaxed);
        for _ in 0..wanted.min(asleep) {
            p.cv.notify_one();
        }
    }

    /// Take `job` off the list (all its chunks are claimed).
    fn withdraw(&self, job: &Arc<Job>) {
        let p = &self.pool;
        let mut active = p.active.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = active.iter().position(|j| Arc::ptr_eq(j, job)) {
            active.swap_remove(i);
        }
        p.active_count.store(active.len(), Ordering::SeqCst);
    }
}

impl Drop for CopyEngines {
    fn drop(&mut self) {
        self.pool.shutdown.store(true, Ordering::Release);
        {
            let _g = self.pool.active.lock().unwrap_or_else(|e| e.into_inner());
            self.pool.cv.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn engine_loop(p: &Pool) {
    loop {
        if p.shutdown.load(Ordering::Acquire) {
            return;
        }
        // A posted job with chunks left, if any.
        let job = if p.active_count.load(Ordering::SeqCst) > 0 {
            let active = p.active.lock().unwrap_or_else(|e| e.into_inner());
            active.iter().find(|j| j.has_chunks_left()).cloned()
        } else {
            None
        };
        if let Some(job) = job {
            job.work();
            continue;
        }
        // SeqCst for `spinning` and `active_count` on both sides: a poster that sees this
        // engine spinning (and wakes no one) is seen by it in the check after the spin.
        p.spinning.fetch_add(1, Ordering::SeqCst);
        let start = Instant::now();
        while p.active_count.load(Ordering::SeqCst) == 0
            && start.elapsed() < ENGINE_SPIN
            && !p.shutdown.load(Ordering::Acquire)
        {
            std::hint::spin_loop();
        }
        p.spinning.fetch_sub(1, Ordering::SeqCst);
        if p.active_count.load(Ordering::SeqCst) > 0 {
            continue;
        }
        let mut active = p.active.lock().unwrap_or_else(|e| e.into_inner());
        p.sleeping.fetch_add(1, Ordering::Relaxed);
        while active.is_empty() && !p.shutdown.load(Ordering::Acquire) {
            active = p.cv.wait(active).unwrap_or_else(|e| e.into_inner());
        }
        p.sleeping.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
