//! `_Client`: the state behind the lock, and the helpers its methods share (running
//! under the lock with or without the GIL, deferred destructor work, submits).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use dafs_client::dafs_proto::Attr;
use dafs_client::{CgId, Client, Completion, Error, IoBuf, RegionId};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::completion::{PyCg, PyCompletion};
use crate::errors::{bad_fid, closed_client, to_pyerr};
use crate::region::Region;

// ---------------------------------------------------------------------------------------
// The client, made movable between threads
// ---------------------------------------------------------------------------------------

/// The client behind the `Mutex` in [`PyClient`]: used by one thread at a time, moved
/// between threads by `allow_threads`, so it must be `Send` (which `Client` is, checked
/// below) and need not be `Sync`. Nothing here declares `Send` itself: the argument for
/// pointers into registered memory is made once, at `dafs_transport::MemPtr`.
pub(crate) struct Conn(pub(crate) Client);

const _: () = {
    const fn is_send<T: Send>() {}
    is_send::<Conn>();
    is_send::<dafs_transport::shm::ShmClient>();
    is_send::<dafs_transport::tcp::TcpClient>();
};

pub(crate) struct Inner {
    pub(crate) c: Conn,
    pub(crate) files: HashMap<u64, dafs_client::File>,
    pub(crate) next_fid: u64,
    /// Completion groups created through this object (drained on close).
    pub(crate) cgs: HashSet<u32>,
    /// Regions registered through this object (unregistered on close).
    pub(crate) regions: HashSet<u64>,
}

/// Clean-up a destructor could not do because the client lock was busy.
pub(crate) enum Deferred {
    /// Unregister a region; the Python buffer it registered is released afterwards.
    Unregister(u64, Option<PyBuffer<u8>>),
    /// Destroy a completion group once nothing of it is in flight.
    DestroyCg(u32),
}

// ---------------------------------------------------------------------------------------
// _Client
// ---------------------------------------------------------------------------------------

/// Low-level client: one DAFS session. Use `dafs.Client`, which wraps it.
#[pyclass(frozen, module = "dafs._dafs", name = "_Client")]
pub(crate) struct PyClient {
    pub(crate) inner: Mutex<Option<Inner>>,
    pub(crate) deferred: Mutex<Vec<Deferred>>,
    /// In-flight asynchronous I/O (request id) -> the region it names: keeps the region
    /// alive until the completion is reaped.
    pub(crate) refs: Mutex<HashMap<u64, Py<Region>>>,
    /// Buffer exports of all this client's regions.
    pub(crate) exports: AtomicUsize,
    pub(crate) inline_threshold: usize,
    pub(crate) inline_threshold_unregistered: usize,
    pub(crate) io_bytes_max: usize,
    pub(crate) slots: u32,
    pub(crate) msg_size_bytes_max: usize,
    pub(crate) provider: &'static str,
    pub(crate) session_id: u64,
}

/// Attributes as a list of ints: ftype, mode (permission bits), nlink, uid, gid, size,
/// used, fileid, fsid, rdev, atime_ns, mtime_ns, ctime_ns (`dafs._attr_to_stat` turns
/// it into an `os.stat_result`).
pub(crate) type AttrTuple = [i128; 13];

pub(crate) fn attr_tuple(a: &Attr) -> AttrTuple {
    [
        a.ftype as i128,
        a.mode.into(),
        a.nlink.into(),
        a.uid.into(),
        a.gid.into(),
        a.size.into(),
        a.used.into(),
        a.fileid.into(),
        a.fsid.into(),
        a.rdev.into(),
        a.atime_ns.into(),
        a.mtime_ns.into(),
        a.ctime_ns.into(),
    ]
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PyClient {
    /// Run `f` on the open client with the GIL held (short, non-blocking work only).
    pub(crate) fn run<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> PyResult<R> {
        let mut g = lock(&self.inner);
        let inner = g.as_mut().ok_or_else(closed_client)?;
        let (finished, buffers) = self.process_deferred(inner);
        let r = f(inner);
        drop(g);
        self.unref(finished);
        drop(buffers);
        Ok(r)
    }

    /// Run `f` on the open client with the GIL released (blocking work).
    pub(crate) fn run_nogil<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> R + Send,
    ) -> PyResult<R> {
        let (r, finished, buffers) = py.allow_threads(|| {
            let mut g = lock(&self.inner);
            match g.as_mut() {
                None => (None, Vec::new(), Vec::new()),
                Some(inner) => {
                    let (finished, buffers) = self.process_deferred(inner);
                    (Some(f(inner)), finished, buffers)
                }
            }
        });
        // Python references are dropped with the GIL held and the client unlocked.
        self.unref(finished);
        drop(buffers);
        r.ok_or_else(closed_client)
    }

    /// Do queued destructor work. Returns request ids whose completions were dropped and
    /// Python buffers to release — both handled by the caller after unlocking.
    fn process_deferred(&self, inner: &mut Inner) -> (Vec<u64>, Vec<PyBuffer<u8>>) {
        let items = std::mem::take(&mut *lock(&self.deferred));
        let mut finished = Vec::new();
        let mut buffers = Vec::new();
        if items.is_empty() {
            return (finished, buffers);
        }
        let mut keep = Vec::new();
        for d in items {
            match d {
                Deferred::Unregister(key, buf) => match inner.c.0.unregister(RegionId(key)) {
                    Err(Error::RegionBusy) => keep.push(Deferred::Unregister(key, buf)),
                    Err(Error::Transport(e)) if !e.is_fatal() => {
                        keep.push(Deferred::Unregister(key, buf))
                    }
                    _ => {
                        inner.regions.remove(&key);
                        buffers.extend(buf);
                    }
                },
                Deferred::DestroyCg(id) => {
                    let cg = CgId(id);
                    if let Ok(done) = inner.c.0.poll(cg, usize::MAX) {
                        finished.extend(done.iter().map(|c| c.id.0));
                    }
                    if inner.c.0.outstanding(cg) > 0 {
                        keep.push(Deferred::DestroyCg(id));
                    } else {
                        let _ = inner.c.0.destroy_cg(cg);
                        inner.cgs.remove(&id);
                    }
                }
            }
        }
        if !keep.is_empty() {
            lock(&self.deferred).extend(keep);
        }
        (finished, buffers)
    }

    /// Forget the region references of finished requests (GIL held, client unlocked).
    pub(crate) fn unref(&self, ids: Vec<u64>) {
        if ids.is_empty() {
            return;
        }
        let dropped: Vec<Py<Region>> = {
            let mut r = lock(&self.refs);
            ids.iter().filter_map(|id| r.remove(id)).collect()
        };
        drop(dropped);
    }

    /// Turn reaped completions into Python objects (GIL held, client unlocked).
    pub(crate) fn convert(
        &self,
        py: Python<'_>,
        done: Vec<Completion>,
    ) -> PyResult<Vec<Py<PyCompletion>>> {
        self.unref(done.iter().map(|c| c.id.0).collect());
        done.into_iter()
            .map(|c| {
                let (nbytes, error) = match c.result {
                    Ok(n) => (Some(n), None),
                    Err(e) => (None, Some(to_pyerr(e, None, None).into_value(py).into_any())),
                };
                Py::new(
                    py,
                    PyCompletion { id: c.id.0, user_data: c.user_data, eof: c.eof, nbytes, error },
                )
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn submit(
        &self,
        slf_ptr: *mut ffi::PyObject,
        fid: u64,
        offset: u64,
        region: &Bound<'_, Region>,
        region_offset: usize,
        length: usize,
        user_data: u64,
        cg: &Bound<'_, PyCg>,
        write: bool,
    ) -> PyResult<u64> {
        let r = region.get();
        let g = cg.get();
        if r.client.as_ptr() != slf_ptr || g.client.as_ptr() != slf_ptr {
            return Err(PyValueError::new_err(
                "region and completion group must belong to this client",
            ));
        }
        if g.closed.load(Ordering::SeqCst) {
            return Err(PyValueError::new_err("completion group is closed"));
        }
        let keep: Py<Region> = region.clone().unbind();
        let res = self.run(|inner| {
            if r.closed.load(Ordering::SeqCst) {
                return Err(Refusal::Closed);
            }
            if r.exports.load(Ordering::SeqCst) > 0 {
                return Err(Refusal::Exported);
            }
            let f = inner.files.get(&fid).ok_or(Refusal::Dafs(bad_fid()))?;
            let buf = IoBuf::Region { region: RegionId(r.key), offset: region_offset, len: length };
            let id = if write {
                inner.c.0.submit_write(f, offset, buf, CgId(g.id), user_data)
            } else {
                inner.c.0.submit_read(f, offset, buf, CgId(g.id), user_data)
            }
            .map_err(Refusal::Dafs)?;
            // Still under the client lock, so no other thread can reap the completion
            // before the reference is recorded. (Cloning a Py only bumps a refcount.)
            lock(&self.refs).insert(id.0, keep);
            Ok(id.0)
        })?;
        res.map_err(|e| match e {
            Refusal::Closed => PyValueError::new_err("region is closed"),
            Refusal::Exported => PyBufferError::new_err(
                "the region's buffer is exported (a memoryview or array of it is alive): release it before submitting I/O on the region",
            ),
            Refusal::Dafs(e) => to_pyerr(e, None, None),
        })
    }
}

enum Refusal {
    Closed,
    Exported,
    Dafs(Error),
}
