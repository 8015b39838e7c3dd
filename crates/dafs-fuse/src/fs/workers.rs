//! Large reads and writes on worker threads. fuser reads the kernel's requests on one
//! thread; a request of at least [`OFFLOAD_BYTES_MIN`] (read-ahead, 1 MiB reads and
//! writes) is handed to one of a bounded set of workers, each with a DAFS session of its
//! own and a registered 1 MiB buffer the server places data in directly, and the worker
//! answers the kernel itself. So several large transfers are in flight at once (the
//! kernel keeps up to `max_background` reads in flight for read-ahead, and every
//! thread of a program its own request), while the main thread goes on with the next
//! request. Small requests stay on the main thread: handing them over would cost a
//! thread wake-up and, for a file a worker has not opened yet, an OPEN round trip.
//!
//! A worker opens each file the kernel gave it I/O for in its own session, by handle,
//! with the opener's credential and access mode, once, and closes it when the kernel
//! releases the file. Whatever its session cannot do — the file was removed or its
//! mode changed since the kernel's open, the session is lost — it does through the
//! main session's open of the file (the `main` client, shared under a mutex), which is
//! what the kernel's open returned and so always works as POSIX expects.
//!
//! Ordering: the kernel answers write(2) only after the WRITE's reply, sends FSYNC and
//! FLUSH only after the writes before them were answered (also with a writeback cache),
//! and RELEASE only after every request on the file was answered; each reply here is
//! sent after the server's. So a worker's session sees everything that POSIX orders
//! before its request, and the main session everything a worker did before it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dafs_client::{CgId, Client, Error, File, IoBuf, OpenOptions, RegionId};
use fuser::{ReplyData, ReplyWrite};

use super::cred::Cred;
use super::IO_BYTES_MAX;
use crate::convert::errno;

/// Makes one more session to the mount's server (with the mount's URL, export and
/// secret): each worker's own.
pub type Connect = Box<dyn Fn() -> Result<Client, Error> + Send + Sync>;

/// Smallest read or write handed to a worker: below it the hand-over (a thread wake-up,
/// ~10 us) and a first OPEN in the worker's session cost more than the transfer.
pub(super) const OFFLOAD_BYTES_MIN: usize = 64 * 1024;
/// Requests waiting for one worker before the main thread waits too: enough to keep a
/// worker busy while the main thread reads the next request, bounded so a slow server
/// holds back the kernel (which then stops sending) rather than filling memory.
const WORKER_QUEUE_DEPTH: usize = 4;
/// Least time between two attempts of a worker at a new session (as the main session's).
const SESSION_RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// What a worker needs to reach a file the kernel opened.
pub(super) struct Target {
    /// The kernel's handle number of the open.
    pub(super) fh: u64,
    /// The main session's open (the fallback). The worker drops it before it replies:
    /// the kernel's RELEASE, which closes it, may follow the reply at once.
    pub(super) file: Arc<File>,
    /// Access mode (read, write or both; nothing else) for the worker's own open.
    pub(super) access: OpenOptions,
    /// Credential the kernel's open was made with (None: the server takes none).
    pub(super) opener: Option<Cred>,
    /// The largest end of file written through this open (see getattr of a file
    /// removed while open).
    pub(super) written_end: Arc<AtomicU64>,
}

pub(super) enum Job {
    Read {
        t: Target,
        off: u64,
        len: usize,
        reply: ReplyData,
    },
    Write {
        t: Target,
        off: u64,
        data: Vec<u8>,
        cred: Option<Cred>,
        reply: ReplyWrite,
    },
    /// The kernel released open `fh`: close the worker's own open of it.
    Close {
        fh: u64,
    },
}

/// The workers and their queues.
pub(super) struct IoPool {
    queues: Vec<SyncSender<Box<Job>>>,
    threads: Vec<JoinHandle<()>>,
    /// Round-robin start for the next job.
    next: usize,
}

impl IoPool {
    /// Start `n` workers, each with a session from `connect`. A session that cannot be
    /// made leaves its worker out (everything still works, on fewer threads).
    pub(super) fn start(n: usize, connect: Connect, main: Arc<Mutex<Client>>) -> IoPool {
        let mut pool = IoPool { queues: Vec::new(), threads: Vec::new(), next: 0 };
        // A worker is one bit of an open's `workers_used`.
        assert!(n <= u32::BITS as usize && n <= crate::options::IO_THREADS_MAX);
        for i in 0..n {
            let c = match connect() {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(
                        "I/O worker {i}: no session ({e}); large I/O uses {} worker(s)",
                        pool.queues.len()
                    );
                    break;
                }
            };
            let (tx, rx) = sync_channel(WORKER_QUEUE_DEPTH);
            let w = Worker::new(c, main.clone());
            match std::thread::Builder::new()
                .name(format!("dafs-mount-io{i}"))
                .spawn(move || w.run(rx))
            {
                Ok(h) => {
                    pool.queues.push(tx);
                    pool.threads.push(h);
                }
                Err(e) => {
                    tracing::warn!("I/O worker {i}: no thread ({e})");
                    break;
                }
            }
        }
        pool
    }

    pub(super) fn has_workers(&self) -> bool {
        !self.queues.is_empty()
    }

    /// Hand `job` to the first worker (round robin) with room in its queue, or wait for
    /// the next one's; returns the worker's bit (for [`Self::released`]). Gives the job
    /// back when no worker is left to take it.
    pub(super) fn submit(&mut self, mut job: Box<Job>) -> Result<u32, Box<Job>> {
        let n = self.queues.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            match self.queues[i].try_send(job) {
                Ok(()) => {
                    self.next = (i + 1) % n;
                    return Ok(1 << i);
                }
                Err(TrySendError::Full(j)) | Err(TrySendError::Disconnected(j)) => job = j,
            }
        }
        if n == 0 {
            return Err(job);
        }
        let i = self.next;
        self.next = (i + 1) % n;
        self.queues[i].send(job).map(|()| 1 << i).map_err(|e| e.0)
    }

    /// Tell the workers in `used` (bits from [`Self::submit`]) that the kernel released
    /// open `fh`; the others never opened it (a release wakes no idle worker).
    pub(super) fn released(&mut self, fh: u64, used: u32) {
        for (i, q) in self.queues.iter().enumerate() {
            if used & (1 << i) != 0 {
                // A worker that is gone has nothing open.
                let _ = q.send(Box::new(Job::Close { fh }));
            }
        }
    }
}

impl Drop for IoPool {
    fn drop(&mut self) {
        // Closing the queues ends the workers (after what is queued).
        self.queues.clear();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

/// A worker's open of a file: its own, or the main session's (its own open failed).
enum Own {
    File(Box<File>),
    Main,
}

struct Worker {
    c: Client,
    main: Arc<Mutex<Client>>,
    /// The registered buffer of this worker's transfers (None: could not be made; the
    /// transfers then go through the main session).
    region: Option<RegionId>,
    cg: Option<CgId>,
    files: HashMap<u64, Own>,
    /// The credential this session last stated (None: none yet, or not taken).
    stated: Option<Cred>,
    cred_unsupported: bool,
    last_recovery: Option<Instant>,
}

impl Worker {
    fn new(mut c: Client, main: Arc<Mutex<Client>>) -> Worker {
        let region = c.alloc_registered(IO_BYTES_MAX as usize);
        let cg = c.create_cg();
        let (region, cg) = match (region, cg) {
            (Ok(r), Ok(g)) => (Some(r), Some(g)),
            (r, g) => {
                tracing::warn!("I/O worker without a registered buffer ({:?}, {:?}): its I/O goes through the main session", r.err(), g.err());
                (None, None)
            }
        };
        Worker {
            c,
            main,
            region,
            cg,
            files: HashMap::new(),
            stated: None,
            cred_unsupported: false,
            last_recovery: None,
        }
    }

    fn run(mut self, rx: Receiver<Box<Job>>) {
        while let Ok(job) = rx.recv() {
            match *job {
                Job::Read { t, off, len, reply } => self.read(t, off, len, reply),
                Job::Write { t, off, data, cred, reply } => self.write(t, off, &data, cred, reply),
                Job::Close { fh } => {
                    if let Some(Own::File(f)) = self.files.remove(&fh) {
                        if let Err(e) = self.c.close(*f) {
                            tracing::debug!("I/O worker: close: {e}");
                        }
                    }
                }
            }
        }
        for (_, own) in self.files.drain() {
            if let Own::File(f) = own {
                let _ = self.c.close(*f);
            }
        }
    }

    fn read(&mut self, t: Target, off: u64, len: usize, reply: ReplyData) {
        let own = match self.own_file(&t) {
            Some(f) => self.read_own(f, off, len),
            None => Err(None),
        };
        match own {
            Ok(n) => {
                drop(t);
                let region = self.region.expect("own transfers use the region");
                match self.c.region(region) {
                    Ok(buf) => reply.data(&buf[..n]),
                    Err(e) => reply.error(errno(&e)),
                }
            }
            Err(why) => {
                if let Some(e) = why {
                    tracing::debug!("I/O worker: read through its session failed ({e}); through the main session");
                }
                let mut buf = vec![0u8; len];
                let r = lock(&self.main).pread(&t.file, &mut buf, off);
                drop(t);
                match r {
                    Ok(n) => reply.data(&buf[..n]),
                    Err(e) => reply.error(errno(&e)),
                }
            }
        }
    }

    fn write(&mut self, t: Target, off: u64, data: &[u8], cred: Option<Cred>, reply: ReplyWrite) {
        let own = match self.own_file(&t) {
            Some(f) => {
                self.state(cred.as_ref());
                self.write_own(f, off, data)
            }
            None => Err(None),
        };
        let r = match own {
            Ok(n) => Ok(n),
            Err(why) => {
                if let Some(e) = why {
                    tracing::debug!("I/O worker: write through its session failed ({e}); through the main session");
                }
                // The main session states its callers itself, on the main thread: this
                // write runs under the credential stated there last. The server checked
                // access at the kernel's open; only the clearing of set-ID bits by a
                // writer other than the owner depends on who writes.
                lock(&self.main).pwrite(&t.file, data, off).map_err(|e| errno(&e))
            }
        };
        if let Ok(n) = r {
            t.written_end.fetch_max(off + n as u64, Ordering::Relaxed);
        }
        drop(t);
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    /// The worker's own open of `t` (opened now if need be), or None: use the main
    /// session's.
    fn own_file(&mut self, t: &Target) -> Option<u64> {
        if self.region.is_none() || !self.session_alive() {
            return None;
        }
        if !self.files.contains_key(&t.fh) {
            self.state(t.opener.as_ref());
            let own = match self.c.open_handle(t.file.fh, t.access) {
                Ok(f) => Own::File(Box::new(f)),
                Err(e) => {
                    tracing::debug!("I/O worker: own open failed ({e}); this file's I/O goes through the main session");
                    Own::Main
                }
            };
            self.files.insert(t.fh, own);
        }
        match self.files.get(&t.fh) {
            Some(Own::File(_)) => Some(t.fh),
            _ => None,
        }
    }

    /// Read into the region through the own open of kernel handle `fh`.
    fn read_own(&mut self, fh: u64, off: u64, len: usize) -> Result<usize, Option<Error>> {
        let (Some(region), Some(cg)) = (self.region, self.cg) else { return Err(None) };
        if len > IO_BYTES_MAX as usize {
            return Err(None);
        }
        let Some(Own::File(f)) = self.files.get(&fh) else { return Err(None) };
        let chunk = self.c.io_bytes_max().max(1);
        let mut done = 0;
        while done < len {
            let n = chunk.min(len - done);
            let buf = IoBuf::Region { region, offset: done, len: n };
            self.c.submit_read(f, off + done as u64, buf, cg, 0).map_err(Some)?;
            let got = wait(&mut self.c, cg)?;
            done += got;
            if got < n {
                break; // end of file
            }
        }
        Ok(done)
    }

    /// Write `data` from the region through the own open of kernel handle `fh`.
    fn write_own(&mut self, fh: u64, off: u64, data: &[u8]) -> Result<usize, Option<Error>> {
        let (Some(region), Some(cg)) = (self.region, self.cg) else { return Err(None) };
        if data.len() > IO_BYTES_MAX as usize {
            return Err(None);
        }
        self.c.region_mut(region).map_err(Some)?[..data.len()].copy_from_slice(data);
        let Some(Own::File(f)) = self.files.get(&fh) else { return Err(None) };
        let chunk = self.c.io_bytes_max().max(1);
        let mut done = 0;
        while done < data.len() {
            let n = chunk.min(data.len() - done);
            let buf = IoBuf::Region { region, offset: done, len: n };
            self.c.submit_write(f, off + done as u64, buf, cg, 0).map_err(Some)?;
            let got = wait(&mut self.c, cg)?;
            done += got;
            if got < n {
                break; // a short write: the error (if any) comes with the next call
            }
        }
        Ok(done)
    }

    /// State `cred` to this session if it is not the one stated last.
    fn state(&mut self, cred: Option<&Cred>) {
        let Some(cred) = cred else { return };
        if self.cred_unsupported || self.stated.as_ref() == Some(cred) {
            return;
        }
        match self.c.set_cred(cred.uid, cred.gid, &cred.groups) {
            Ok(()) => self.stated = Some(cred.clone()),
            Err(Error::Status(dafs_client::dafs_proto::Status::NotSupp)) => {
                self.cred_unsupported = true
            }
            Err(e) => {
                self.stated = None;
                tracing::debug!("I/O worker: SET_CRED for uid {} failed: {e}", cred.uid)
            }
        }
    }

    /// Is this worker's session usable? A lost one is replaced (at most once a second);
    /// the opens of the old one are gone with it.
    fn session_alive(&mut self) -> bool {
        if !self.c.is_dead() {
            return true;
        }
        let now = Instant::now();
        if self.last_recovery.is_some_and(|t| now.duration_since(t) < SESSION_RETRY_INTERVAL) {
            return false;
        }
        self.last_recovery = Some(now);
        if self.c.reestablish().is_err() {
            return false;
        }
        self.files.clear();
        self.stated = None;
        self.cred_unsupported = false;
        // A new session: register the buffer afresh rather than rely on the old one's.
        if let Some(r) = self.region.take() {
            let _ = self.c.unregister(r);
        }
        self.region = self.c.alloc_registered(IO_BYTES_MAX as usize).ok();
        true
    }
}

/// Wait for the one request in flight on `cg`.
fn wait(c: &mut Client, cg: CgId) -> Result<usize, Option<Error>> {
    match c.wait_one(cg, None) {
        Ok(Some(done)) => done.result.map_err(Some),
        Ok(None) => Err(None),
        Err(e) => Err(Some(e)),
    }
}

fn lock(m: &Mutex<Client>) -> std::sync::MutexGuard<'_, Client> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
