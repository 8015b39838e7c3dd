//! POSIX AIO on dafs descriptors: requests submitted without blocking on the client's
//! completion groups (one group per mount session), completions discovered by the
//! application's own later calls (`aio_error`, `aio_suspend`, `aio_return`, any AIO
//! call): the client has no hidden thread, so progress happens in the caller's calls.
//!
//! A request is split into chunks of at most `io_bytes_max()` bytes, each a client
//! request on a staging `Vec` (writes copy the caller's buffer at submission; reads copy
//! into it when the chunk's completion is reaped). Requests are found by the address of
//! their `aiocb`, as glibc does; the table holds at most [`aio_requests_max`] of them.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

use dafs_client::{CgId, Client, Completion, Error, File, IoBuf};

use super::{Kind, State};

/// Default of [`aio_requests_max`]: requests (submitted and not yet returned by
/// `aio_return`) a process may have on dafs descriptors. glibc's own AIO has no fixed
/// bound; this one turns an application that never calls `aio_return` into EAGAIN
/// (which ROMIO, for one, answers by doing the I/O synchronously) instead of growth.
pub const AIO_REQUESTS_MAX_DEFAULT: usize = 1024;
/// The environment variable that overrides [`AIO_REQUESTS_MAX_DEFAULT`].
pub const AIO_REQUESTS_MAX_ENV: &str = "DAFS_AIO_REQUESTS_MAX";

/// Number of requests in the table: the AIO functions skip the state lock while 0
/// (calls on other descriptors go straight to glibc).
pub static AIO_ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// The limit of the request table (`DAFS_AIO_REQUESTS_MAX`, at least 1).
pub fn aio_requests_max() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        let Ok(v) = std::env::var(AIO_REQUESTS_MAX_ENV) else { return AIO_REQUESTS_MAX_DEFAULT };
        match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!(
                    "dafs-preload: {AIO_REQUESTS_MAX_ENV}={v:?} is not a positive number; \
                     using {AIO_REQUESTS_MAX_DEFAULT}"
                );
                AIO_REQUESTS_MAX_DEFAULT
            }
        }
    })
}

/// glibc's `struct aiocb` (x86_64 and aarch64, where `aiocb64` is the same), with the
/// two fields glibc's own `aio_error`/`aio_return` read, which `libc::aiocb` keeps
/// private: this library stores results there too, so every reader agrees.
#[repr(C)]
pub struct Aiocb {
    pub fildes: c_int,
    pub lio_opcode: c_int,
    pub reqprio: c_int,
    pub buf: *mut c_void,
    pub nbytes: usize,
    pub sigevent: libc::sigevent,
    next_prio: *mut c_void,
    abs_prio: c_int,
    policy: c_int,
    pub error_code: c_int,
    pub return_value: isize,
    pub offset: i64,
    reserved: [u8; 32],
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<Aiocb>() == size_of::<libc::aiocb>());
    assert!(offset_of!(Aiocb, buf) == offset_of!(libc::aiocb, aio_buf));
    assert!(offset_of!(Aiocb, nbytes) == offset_of!(libc::aiocb, aio_nbytes));
    assert!(offset_of!(Aiocb, sigevent) == offset_of!(libc::aiocb, aio_sigevent));
    assert!(offset_of!(Aiocb, offset) == offset_of!(libc::aiocb, aio_offset));
};

/// What one request has come to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AioState {
    InProgress,
    /// Bytes transferred, or the errno.
    Done(Result<usize, c_int>),
}

/// How a submission went: queued on the client, or to be done by the caller now.
pub enum Submitted {
    Queued,
    /// A write the client cannot queue with the descriptor's semantics (O_APPEND,
    /// O_SYNC, O_DSYNC): the caller writes synchronously and records the result.
    Synchronous,
}

struct Req {
    /// Distinguishes this request from an earlier one on the same `aiocb`.
    seq: u64,
    fd: c_int,
    mount: usize,
    gen: u64,
    read: bool,
    buf: usize,
    nbytes: usize,
    chunk_bytes: usize,
    /// Per chunk: bytes transferred, `usize::MAX` while in flight.
    counts: Vec<usize>,
    outstanding: usize,
    /// First error of a chunk (or of submitting one).
    err: c_int,
    state: AioState,
}

/// A chunk in flight: its request and position.
struct Chunk {
    cb: usize,
    seq: u64,
    index: usize,
}

#[derive(Default)]
pub struct AioTable {
    reqs: HashMap<usize, Req>,
    /// By the completion's user data.
    chunks: HashMap<u64, Chunk>,
    next_tag: u64,
    /// Per mount: the completion group of AIO, and the session generation it belongs to.
    cgs: HashMap<usize, (u64, CgId)>,
}

impl AioTable {
    fn tag(&mut self) -> u64 {
        self.next_tag += 1;
        self.next_tag
    }

    fn publish_len(&self) {
        AIO_ACTIVE.store(self.reqs.len(), Relaxed);
    }

    fn insert(&mut self, cb: usize, r: Req) {
        self.reqs.insert(cb, r);
        self.publish_len();
    }

    /// Apply one chunk completion (unknown tags: a cancelled or replaced request).
    fn apply(&mut self, comp: Completion) {
        let Some(ch) = self.chunks.remove(&comp.user_data) else { return };
        let Some(r) = self.reqs.get_mut(&ch.cb) else { return };
        if r.seq != ch.seq || r.state != AioState::InProgress {
            return;
        }
        match comp.result {
            Ok(n) => {
                if r.read {
                    if let Some(v) = &comp.buf {
                        let at = ch.index * r.chunk_bytes;
                        let k = n.min(v.len()).min(r.nbytes - at);
                        // SAFETY: the caller keeps aio_buf..+aio_nbytes valid and
                        // untouched while the request is in progress (POSIX); at + k
                        // <= nbytes.
                        unsafe {
                            std::ptr::copy_nonoverlapping(v.as_ptr(), (r.buf as *mut u8).add(at), k)
                        };
                    }
                }
                r.counts[ch.index] = n;
            }
            Err(e) => {
                r.counts[ch.index] = 0;
                if r.err == 0 {
                    r.err = errno_of(&e);
                }
            }
        }
        assert!(r.outstanding > 0, "a completion for a request with nothing in flight");
        r.outstanding -= 1;
        if r.outstanding == 0 {
            finish(ch.cb, r);
        }
    }

    fn apply_all(&mut self, comps: Vec<Completion>) {
        for c in comps {
            self.apply(c);
        }
    }
}

fn errno_of(e: &Error) -> c_int {
    match e.errno() {
        0 => libc::EIO,
        n => n,
    }
}

/// The result of a request whose chunks have all completed: the first error, or the
/// bytes up to the first short chunk (end of file, or a short write).
fn finish(cb: usize, r: &mut Req) {
    let res = if r.err != 0 {
        Err(r.err)
    } else {
        let mut total = 0;
        for (i, &n) in r.counts.iter().enumerate() {
            let want = r.chunk_bytes.min(r.nbytes - i * r.chunk_bytes);
            total += n.min(want);
            if n < want {
                break;
            }
        }
        Ok(total)
    };
    complete(cb, r, res);
}

fn complete(cb: usize, r: &mut Req, res: Result<usize, c_int>) {
    r.state = AioState::Done(res);
    store_result(cb, res);
}

/// Store a result where glibc's `aio_error`/`aio_return` look for it.
fn store_result(cb: usize, res: Result<usize, c_int>) {
    let p = cb as *mut Aiocb;
    let (e, v) = match res {
        Ok(n) => (0, n as isize),
        Err(e) => (e, -1),
    };
    // SAFETY: the aiocb stays valid until aio_return (POSIX); only this library writes
    // these two fields while the request is in the table.
    unsafe {
        (*p).error_code = e;
        (*p).return_value = v;
    }
}

/// Submit `count` chunks; completions reaped while waiting for a free slot go to
/// `early`, the tags of the submitted chunks to `tags`.
#[allow(clippy::too_many_arguments)]
fn submit_chunks(
    c: &mut Client,
    f: &File,
    cg: CgId,
    (read, ptr, nbytes, offset, chunk_bytes): (bool, usize, usize, u64, usize),
    aio: &mut AioTable,
    early: &mut Vec<Completion>,
    tags: &mut Vec<u64>,
) -> Result<(), Error> {
    let count = nbytes.div_ceil(chunk_bytes);
    for i in 0..count {
        let at = i * chunk_bytes;
        let len = chunk_bytes.min(nbytes - at);
        let tag = aio.tag();
        loop {
            let buf = if read {
                vec![0u8; len]
            } else {
                // SAFETY: the caller's aio_buf of aio_nbytes readable bytes.
                unsafe { std::slice::from_raw_parts((ptr as *const u8).add(at), len) }.to_vec()
            };
            let r = if read {
                c.submit_read(f, offset + at as u64, IoBuf::Vec(buf), cg, tag)
            } else {
                c.submit_write(f, offset + at as u64, IoBuf::Vec(buf), cg, tag)
            };
            match r {
                Ok(_) => break,
                // Every slot busy with this group's requests: reap one, as io_submit
                // waits for room in its ring.
                Err(Error::WouldBlock) if c.outstanding(cg) > 0 => {
                    early.extend(c.wait_n(cg, 1, None)?);
                }
                // Completions the application has not asked about yet fill the group's
                // queue: take them (they are applied after this submission).
                Err(Error::CompletionQueueFull) => {
                    let got = c.poll(cg, usize::MAX)?;
                    if got.is_empty() {
                        return Err(Error::CompletionQueueFull);
                    }
                    early.extend(got);
                }
                Err(e) => return Err(e),
            }
        }
        tags.push(tag);
    }
    Ok(())
}

impl State {
    /// AIO's completion group on mount `m`'s current session (created at first use and
    /// again after a new session).
    fn aio_cg(&mut self, m: usize) -> Result<CgId, c_int> {
        let gen = self.mounts[m].gen;
        if let Some(&(g, cg)) = self.aio.cgs.get(&m) {
            if g == gen {
                return Ok(cg);
            }
        }
        let r = self.call(m, |c| Ok(c.create_cg()?));
        let cg = r?;
        self.aio.cgs.insert(m, (gen, cg));
        Ok(cg)
    }

    /// Room for request `cb` in the table (EAGAIN when full).
    pub fn aio_room(&self, cb: usize) -> Result<(), c_int> {
        if self.aio.reqs.len() >= aio_requests_max() && !self.aio.reqs.contains_key(&cb) {
            return Err(libc::EAGAIN);
        }
        Ok(())
    }

    /// Queue `aio_read` (`read`) or `aio_write` of `cb`, whose fields are checked.
    pub fn aio_submit(&mut self, cb: *mut Aiocb, read: bool) -> Result<Submitted, c_int> {
        let key = cb as usize;
        self.aio_room(key)?;
        // SAFETY: the caller's aiocb (checked non-null by the caller).
        let (fd, buf, nbytes, offset) =
            unsafe { ((*cb).fildes, (*cb).buf as usize, (*cb).nbytes, (*cb).offset as u64) };
        let id = self.ofd_id(fd)?;
        self.ensure(id)?;
        let o = self.ofds.get(&id).ok_or(libc::EBADF)?;
        let (m, kind, flags) = (o.mount, o.kind, o.flags);
        match kind {
            Kind::Dir if read => return Err(libc::EISDIR),
            Kind::File => {}
            _ => return Err(libc::EBADF),
        }
        let acc = flags & libc::O_ACCMODE;
        if (read && acc == libc::O_WRONLY) || (!read && acc == libc::O_RDONLY) {
            return Err(libc::EBADF);
        }
        if !read && flags & (libc::O_APPEND | libc::O_SYNC | libc::O_DSYNC) != 0 {
            return Ok(Submitted::Synchronous);
        }
        let cg = self.aio_cg(m)?;
        self.mounts[m].state_cred();
        let gen = self.mounts[m].gen;
        let seq = self.aio.tag();
        let c = self.mounts[m].client.as_mut().ok_or(libc::ENOTCONN)?;
        let chunk_bytes = c.io_bytes_max().max(1);
        let f = self.ofds.get(&id).and_then(|o| o.file.as_ref()).ok_or(libc::EBADF)?;
        let (mut early, mut tags) = (Vec::new(), Vec::new());
        let res = submit_chunks(
            c,
            f,
            cg,
            (read, buf, nbytes, offset, chunk_bytes),
            &mut self.aio,
            &mut early,
            &mut tags,
        );
        let err = match res {
            Ok(()) => 0,
            Err(e) => {
                let e = self.fail(m, e.into());
                if tags.is_empty() {
                    self.aio.apply_all(early);
                    return Err(e);
                }
                e
            }
        };
        let count = nbytes.div_ceil(chunk_bytes);
        debug!(
            "aio {} fd {fd}: {nbytes} bytes at {offset} in {count} chunk(s), {} reaped while submitting",
            if read { "read" } else { "write" },
            early.len()
        );
        let mut r = Req {
            seq,
            fd,
            mount: m,
            gen,
            read,
            buf,
            nbytes,
            chunk_bytes,
            counts: vec![usize::MAX; count],
            outstanding: tags.len(),
            err,
            state: AioState::InProgress,
        };
        store_result(key, Err(libc::EINPROGRESS));
        if r.outstanding == 0 {
            finish(key, &mut r);
        }
        for (index, &t) in tags.iter().enumerate() {
            self.aio.chunks.insert(t, Chunk { cb: key, seq, index });
        }
        self.aio.insert(key, r);
        self.aio.apply_all(early);
        Ok(Submitted::Queued)
    }

    /// Record a request that completed at submission (zero bytes, synchronous writes,
    /// aio_fsync, failed lio_listio entries).
    pub fn aio_record(&mut self, cb: *mut Aiocb, fd: c_int, read: bool, res: Result<usize, c_int>) {
        let key = cb as usize;
        let seq = self.aio.tag();
        let mut r = Req {
            seq,
            fd,
            mount: 0,
            gen: 0,
            read,
            buf: 0,
            nbytes: 0,
            chunk_bytes: 1,
            counts: Vec::new(),
            outstanding: 0,
            err: 0,
            state: AioState::InProgress,
        };
        complete(key, &mut r, res);
        self.aio.insert(key, r);
    }

    /// Is `cb` a request of this library (submitted, not yet returned)?
    pub fn aio_owns(&self, cb: usize) -> bool {
        self.aio.reqs.contains_key(&cb)
    }

    /// Requests still in progress (after reaping what has arrived).
    fn aio_pending_mounts(&self) -> Vec<usize> {
        let mut ms: Vec<usize> = self
            .aio
            .reqs
            .values()
            .filter(|r| r.state == AioState::InProgress)
            .map(|r| r.mount)
            .collect();
        ms.sort_unstable();
        ms.dedup();
        ms
    }

    /// Reap, without blocking, every completion that has arrived; fail the requests of
    /// sessions that are gone (EIO: a lost connection, or a forked child).
    pub fn aio_reap(&mut self) {
        for m in self.aio_pending_mounts() {
            let Some(&(gen, cg)) = self.aio.cgs.get(&m) else { continue };
            if gen != self.mounts[m].gen {
                continue;
            }
            let Some(c) = self.mounts[m].client.as_mut() else { continue };
            match c.poll(cg, usize::MAX) {
                Ok(v) => self.aio.apply_all(v),
                Err(e) => {
                    self.fail(m, e.into());
                }
            }
        }
        self.aio_sweep();
    }

    /// Wait up to `slice` for a completion on any mount with requests in progress.
    pub fn aio_wait(&mut self, slice: Duration) {
        let ms = self.aio_pending_mounts();
        let each = slice / ms.len().max(1) as u32;
        for m in ms {
            let Some(&(gen, cg)) = self.aio.cgs.get(&m) else { continue };
            if gen != self.mounts[m].gen {
                continue;
            }
            let Some(c) = self.mounts[m].client.as_mut() else { continue };
            // Then everything else that has arrived: the sweep below counts on an empty
            // queue.
            match c.wait_n(cg, 1, Some(each)).and_then(|mut v| {
                v.extend(c.poll(cg, usize::MAX)?);
                Ok(v)
            }) {
                Ok(v) => self.aio.apply_all(v),
                Err(e) => {
                    self.fail(m, e.into());
                }
            }
        }
        self.aio_sweep();
    }

    /// Fail requests that can never complete: their session is gone, or (which would
    /// be a bug) nothing of theirs is in flight any more. A hang is the worst outcome.
    fn aio_sweep(&mut self) {
        let mut dead = Vec::new();
        for (&cb, r) in &self.aio.reqs {
            if r.state != AioState::InProgress {
                continue;
            }
            let ms = &self.mounts[r.mount];
            let cur = self.aio.cgs.get(&r.mount).filter(|(g, _)| *g == ms.gen && r.gen == *g);
            let alive = match (cur, ms.client.as_ref()) {
                (Some(&(_, cg)), Some(c)) => c.outstanding(cg) > 0,
                _ => false,
            };
            if !alive {
                dead.push(cb);
            }
        }
        for cb in dead {
            let r = self.aio.reqs.get_mut(&cb).unwrap();
            debug!("AIO request on fd {} lost its session: EIO", r.fd);
            complete(cb, r, Err(libc::EIO));
        }
        let reqs = &self.aio.reqs;
        self.aio.chunks.retain(|_, ch| {
            reqs.get(&ch.cb).is_some_and(|r| r.seq == ch.seq && r.state == AioState::InProgress)
        });
    }

    /// The state of request `cb` (None: not one of this library's).
    pub fn aio_state(&self, cb: usize) -> Option<AioState> {
        self.aio.reqs.get(&cb).map(|r| r.state)
    }

    /// `aio_return`: the result of a completed request, which is then forgotten.
    ///
    /// Its `aiocb` then says -1 to glibc's `aio_error`/`aio_return` (and this library's
    /// answer EINVAL for it, POSIX's "return status already retrieved"): glibc would
    /// repeat the result, and ROMIO, which polls completed requests again from
    /// `MPI_Testall`, would complete its MPI request twice (an MPICH assertion).
    pub fn aio_take(&mut self, cb: usize) -> Option<AioState> {
        let st = self.aio_state(cb)?;
        if let AioState::Done(_) = st {
            self.aio.reqs.remove(&cb);
            self.aio.publish_len();
            let p = cb as *mut Aiocb;
            // SAFETY: the caller's aiocb, valid during aio_return.
            unsafe {
                (*p).error_code = -1;
                (*p).return_value = -1;
            }
        }
        Some(st)
    }

    /// Are requests on `fd` in progress?
    pub fn aio_fd_busy(&self, fd: c_int) -> bool {
        self.aio.reqs.values().any(|r| r.fd == fd && r.state == AioState::InProgress)
    }

    /// `aio_cancel` on dafs descriptor `fd` (all its requests, or only `cb`): reads in
    /// progress are cancelled (their data is dropped on arrival, the buffer is left
    /// alone: ECANCELED); writes in progress may already have reached the server and
    /// are not (AIO_NOTCANCELED).
    pub fn aio_cancel(&mut self, fd: c_int, cb: Option<usize>) -> c_int {
        self.aio_reap();
        let (mut cancelled, mut not) = (false, false);
        let keys: Vec<usize> = match cb {
            Some(k) => vec![k],
            None => self.aio.reqs.keys().copied().collect(),
        };
        for k in keys {
            let Some(r) = self.aio.reqs.get_mut(&k) else { continue };
            if r.fd != fd || r.state != AioState::InProgress {
                continue;
            }
            if r.read {
                complete(k, r, Err(libc::ECANCELED));
                cancelled = true;
            } else {
                not = true;
            }
        }
        self.aio_sweep();
        if not {
            libc::AIO_NOTCANCELED
        } else if cancelled {
            libc::AIO_CANCELED
        } else {
            libc::AIO_ALLDONE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(nbytes: usize, chunk_bytes: usize, counts: Vec<usize>, err: c_int) -> Req {
        Req {
            seq: 1,
            fd: 3,
            mount: 0,
            gen: 1,
            read: true,
            buf: 0,
            nbytes,
            chunk_bytes,
            counts,
            outstanding: 0,
            err,
            state: AioState::InProgress,
        }
    }

    /// The result is the bytes up to the first short chunk (end of file), the first
    /// error otherwise; it is also stored where glibc's aio_error/aio_return look.
    #[test]
    fn finish_counts_up_to_the_first_short_chunk() {
        // SAFETY: an all-zero aiocb is a valid value of the C struct.
        let mut cb: Aiocb = unsafe { std::mem::zeroed() };
        let key = &mut cb as *mut Aiocb as usize;
        let mut r = req(20, 8, vec![8, 5, 0], 0);
        finish(key, &mut r);
        assert_eq!(r.state, AioState::Done(Ok(13)));
        assert_eq!((cb.error_code, cb.return_value), (0, 13));
        // The last chunk is shorter by construction (20 = 8 + 8 + 4): not end of file.
        let mut r = req(20, 8, vec![8, 8, 4], 0);
        finish(key, &mut r);
        assert_eq!(r.state, AioState::Done(Ok(20)));
        // Bytes after a short chunk are not contiguous with the ones before: not counted.
        let mut r = req(20, 8, vec![8, 3, 4], 0);
        finish(key, &mut r);
        assert_eq!(r.state, AioState::Done(Ok(11)));
        let mut r = req(20, 8, vec![8, 0, 4], libc::EIO);
        finish(key, &mut r);
        assert_eq!(r.state, AioState::Done(Err(libc::EIO)));
        assert_eq!((cb.error_code, cb.return_value), (libc::EIO, -1));
    }
}
