//! `dafs._dafs` — the native half of the `dafs` Python package.
//!
//! The pure-Python half (`python/dafs/__init__.py`) builds the public API (`dafs.Client`,
//! file objects that are `io.RawIOBase`s, `open()` modes, `os.stat_result`s) on the
//! low-level `_Client` defined here. This module owns everything that touches memory:
//! reads straight into caller buffers, registered regions, asynchronous I/O.
//!
//! # Threads, the GIL and the client lock
//!
//! `dafs_client::Client` is `Send` but not `Sync`. It lives in a `Mutex` inside
//! `_Client`. Blocking calls (connect, open, pread, pwrite,
//! metadata, waiting for completions) release the GIL and take the lock inside
//! `allow_threads`; short non-blocking calls (submit, poll, region access) take the lock
//! with the GIL held. Rules that keep this deadlock-free:
//!
//! * No Python object is created, dropped or called while the client lock is held
//!   (Python code could run — a finaliser, a GC pass — and re-enter or switch threads).
//!   Results are collected as plain Rust values and converted after unlocking.
//! * A thread holding the lock never waits for the GIL (the lock is taken and released
//!   entirely inside `allow_threads` closures, or entirely while holding the GIL).
//! * Destructors (`Region`, `CompletionGroup` being garbage-collected) only `try_lock`;
//!   when the lock is busy their clean-up is queued in `deferred` and done by the next
//!   call that takes the lock.
//!
//! # Memory safety of I/O into Python buffers
//!
//! * `readinto`/`pwrite`: the caller's object is exported with the buffer protocol
//!   (`PyBuffer<u8>`, C-contiguous, writable for reads) for the whole call, so it can be
//!   neither freed nor resized (a `bytearray` with exports refuses to resize) while the
//!   client reads into it with the GIL released. As with `io.FileIO.readinto`, another
//!   Python thread writing the same buffer at the same time races with the read.
//! * Registered regions (`Region`): while an asynchronous I/O names a region, the region
//!   refuses to export its buffer (`BufferError`), and a region whose buffer is exported
//!   (a live `memoryview`, a numpy array made with `frombuffer`, ...) cannot be named by
//!   a submit (`BufferError`). This mirrors `Client::region`/`region_mut` returning
//!   `RegionBusy`. An in-flight I/O holds a reference to its `Region` until its
//!   completion is reaped, so a region (and a registered Python object it exports) cannot
//!   be freed under the server's feet. `close()` of the client waits for in-flight I/O
//!   and refuses while region buffers are exported. The one thing that cannot be
//!   checked: a Python object given to `register()` can still be accessed directly
//!   through the object itself while I/O naming it is in flight (as in C).

use std::collections::{HashMap, HashSet, VecDeque};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use dafs_client::dafs_proto::types::setattr_mask;
use dafs_client::dafs_proto::{Attr, SetAttrs, Status};
use dafs_client::{
    CgId, Client, ClientConfig, Completion, Error, IoBuf, OpenOptions, Provider, RegionId,
};
use dafs_transport::{MemPtr, TransportError};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyConnectionError, PyOSError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyMemoryView, PyTuple};

// ---------------------------------------------------------------------------------------
// The client, made movable between threads
// ---------------------------------------------------------------------------------------

/// The client behind the `Mutex` in [`PyClient`]: used by one thread at a time, moved
/// between threads by `allow_threads`, so it must be `Send` (which `Client` is, checked
/// below) and need not be `Sync`. Nothing here declares `Send` itself: the argument for
/// pointers into registered memory is made once, at `dafs_transport::MemPtr`.
struct Conn(Client);

const _: () = {
    const fn is_send<T: Send>() {}
    is_send::<Conn>();
    is_send::<dafs_transport::shm::ShmClient>();
    is_send::<dafs_transport::tcp::TcpClient>();
};

struct Inner {
    c: Conn,
    files: HashMap<u64, dafs_client::File>,
    next_fid: u64,
    /// Completion groups created through this object (drained on close).
    cgs: HashSet<u32>,
    /// Regions registered through this object (unregistered on close).
    regions: HashSet<u64>,
}

/// Clean-up a destructor could not do because the client lock was busy.
enum Deferred {
    /// Unregister a region; the Python buffer it registered is released afterwards.
    Unregister(u64, Option<PyBuffer<u8>>),
    /// Destroy a completion group once nothing of it is in flight.
    DestroyCg(u32),
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// Map a client error to the Python exception for it: `OSError(errno, strerror[, path])`
/// — which Python turns into the matching subclass (FileNotFoundError for ENOENT,
/// FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError,
/// BlockingIOError for EAGAIN, TimeoutError, ...) — and `ConnectionError` for a lost
/// or unusable connection.
fn to_pyerr(e: Error, path: Option<&str>, path2: Option<&str>) -> PyErr {
    let errno = e.errno();
    let msg = e.to_string();
    match &e {
        Error::Transport(TransportError::Io(io)) => match io.raw_os_error() {
            // e.g. ECONNREFUSED -> ConnectionRefusedError, ECONNRESET -> ConnectionResetError
            Some(raw) if is_connection_errno(raw) => PyOSError::new_err((raw, msg)),
            Some(raw) => PyConnectionError::new_err((raw, msg)),
            None => PyConnectionError::new_err((errno, msg)),
        },
        // Registration refusals leave the connection usable: not a ConnectionError.
        Error::Transport(
            t @ (TransportError::BadRegion
            | TransportError::RegistrationLimit
            | TransportError::NotRegistrable
            | TransportError::TooBig { .. }),
        ) => {
            let errno = match t {
                TransportError::BadRegion => libc::EFAULT,
                TransportError::RegistrationLimit => libc::ENOMEM,
                TransportError::TooBig { .. } => libc::EMSGSIZE,
                _ => libc::EINVAL,
            };
            PyOSError::new_err((errno, msg))
        }
        Error::Transport(_) | Error::Disconnected | Error::Protocol(_) => {
            PyConnectionError::new_err((errno, msg))
        }
        _ => match (path, path2) {
            (Some(p), Some(q)) => {
                PyOSError::new_err((errno, msg, p.to_string(), None::<i32>, q.to_string()))
            }
            (Some(p), None) => PyOSError::new_err((errno, msg, p.to_string())),
            _ => PyOSError::new_err((errno, msg)),
        },
    }
}

/// Errnos Python maps to a `ConnectionError` subclass by itself.
fn is_connection_errno(e: i32) -> bool {
    matches!(
        e,
        libc::ECONNREFUSED | libc::ECONNRESET | libc::ECONNABORTED | libc::EPIPE | libc::ESHUTDOWN
    )
}

fn closed_client() -> PyErr {
    PyValueError::new_err("I/O operation on closed dafs client")
}

fn bad_fid() -> Error {
    Error::Status(Status::BadOpenId)
}

// ---------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------

/// Export `obj` as C-contiguous bytes (any item format: numpy float arrays and
/// `array('d')` are viewed as their bytes through `memoryview.cast('B')`, same memory).
fn byte_buffer(obj: &Bound<'_, PyAny>, writable: bool, what: &str) -> PyResult<PyBuffer<u8>> {
    let buf = match PyBuffer::<u8>::get(obj) {
        Ok(b) => b,
        Err(first) => {
            let Ok(mv) = PyMemoryView::from(obj) else {
                drop(first);
                return Err(PyTypeError::new_err(format!(
                    "{what} argument must be a bytes-like object, not {}",
                    type_name(obj)
                )));
            };
            let cast = mv.call_method1("cast", ("B",))?;
            PyBuffer::<u8>::get(&cast)?
        }
    };
    if writable && buf.readonly() {
        return Err(PyTypeError::new_err(format!(
            "{what} argument must be read-write bytes-like object, not {}",
            type_name(obj)
        )));
    }
    if !buf.is_c_contiguous() {
        return Err(PyBufferError::new_err(format!("{what}: the buffer must be C-contiguous")));
    }
    Ok(buf)
}

/// The memory of an exported buffer, as a [`MemPtr`]: a pointer that may move into an
/// `allow_threads` closure. Valid while the `PyBuffer` is held (see the SAFETY notes at
/// the uses).
fn buffer_mem(pb: &PyBuffer<u8>) -> PyResult<MemPtr> {
    let len = pb.len_bytes();
    match MemPtr::new(pb.buf_ptr() as *mut u8, len) {
        Some(m) => Ok(m),
        None if len == 0 => Ok(MemPtr::empty()),
        None => Err(PyBufferError::new_err("the buffer exports no memory")),
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "object".into())
}

// ---------------------------------------------------------------------------------------
// _Client
// ---------------------------------------------------------------------------------------

/// Low-level client: one DAFS session. Use `dafs.Client`, which wraps it.
#[pyclass(frozen, module = "dafs._dafs", name = "_Client")]
struct PyClient {
    inner: Mutex<Option<Inner>>,
    deferred: Mutex<Vec<Deferred>>,
    /// In-flight asynchronous I/O (request id) -> the region it names: keeps the region
    /// alive until the completion is reaped.
    refs: Mutex<HashMap<u64, Py<Region>>>,
    /// Buffer exports of all this client's regions.
    exports: AtomicUsize,
    inline_threshold: usize,
    io_bytes_max: usize,
    slots: u32,
    msg_size_bytes_max: usize,
    provider: &'static str,
    session_id: u64,
}

/// Attributes as a list of ints: ftype, mode (permission bits), nlink, uid, gid, size,
/// used, fileid, fsid, rdev, atime_ns, mtime_ns, ctime_ns (`dafs._attr_to_stat` turns
/// it into an `os.stat_result`).
type AttrTuple = [i128; 13];

fn attr_tuple(a: &Attr) -> AttrTuple {
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PyClient {
    /// Run `f` on the open client with the GIL held (short, non-blocking work only).
    fn run<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> PyResult<R> {
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
    fn run_nogil<R: Send>(
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
    fn unref(&self, ids: Vec<u64>) {
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
    fn convert(&self, py: Python<'_>, done: Vec<Completion>) -> PyResult<Vec<Py<PyCompletion>>> {
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
    fn submit(
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

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (target, secret=None, provider="auto", slots=None, export=String::new(), client_id=None, connect_timeout=None, reconnect=true, reconnect_timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        target: String,
        secret: Option<Vec<u8>>,
        provider: &str,
        slots: Option<u32>,
        export: String,
        client_id: Option<String>,
        connect_timeout: Option<f64>,
        reconnect: bool,
        reconnect_timeout: Option<f64>,
    ) -> PyResult<Self> {
        let mut cfg = ClientConfig { secret, export, reconnect, ..ClientConfig::default() };
        if let Some(t) = reconnect_timeout {
            if !(t > 0.0 && t.is_finite()) {
                return Err(PyValueError::new_err(
                    "reconnect_timeout must be a positive number of seconds",
                ));
            }
            cfg.reconnect_timeout = Duration::from_secs_f64(t);
        }
        if let Some(s) = slots {
            cfg.slots = s;
        }
        if let Some(id) = client_id {
            cfg.client_id = id;
        }
        if let Some(t) = connect_timeout {
            if !(t > 0.0 && t.is_finite()) {
                return Err(PyValueError::new_err(
                    "connect_timeout must be a positive number of seconds",
                ));
            }
            cfg.connect_timeout = Duration::from_secs_f64(t);
        }
        let require_shm = match provider {
            "auto" => false,
            "tcp" => {
                cfg.provider = Provider::Tcp;
                false
            }
            "shm" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "provider must be 'auto', 'tcp' or 'shm', not {other:?}"
                )))
            }
        };
        let c = py
            .allow_threads(|| Client::connect(&target, cfg).map(Conn))
            .map_err(|e| to_pyerr(e, None, None))?;
        if require_shm && c.0.provider() != "shm" {
            return Err(PyConnectionError::new_err((
                libc::EOPNOTSUPP,
                format!("provider='shm': {target} did not offer shared memory to this host (connected over {})", c.0.provider()),
            )));
        }
        Ok(PyClient {
            inline_threshold: c.0.inline_threshold(),
            io_bytes_max: c.0.io_bytes_max(),
            slots: c.0.slots(),
            msg_size_bytes_max: c.0.msg_size_bytes_max(),
            provider: c.0.provider(),
            session_id: c.0.session_id(),
            inner: Mutex::new(Some(Inner {
                c,
                files: HashMap::new(),
                next_fid: 1,
                cgs: HashSet::new(),
                regions: HashSet::new(),
            })),
            deferred: Mutex::new(Vec::new()),
            refs: Mutex::new(HashMap::new()),
            exports: AtomicUsize::new(0),
        })
    }

    /// End the session: wait for in-flight asynchronous I/O, unregister regions, close
    /// open files. Refused (BufferError) while a region's buffer is exported.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = py.allow_threads(|| {
            let mut g = lock(&self.inner);
            if g.is_none() {
                return Ok(None);
            }
            // Exports only grow under this lock, so the check cannot race with one.
            if self.exports.load(Ordering::SeqCst) > 0 {
                return Err(());
            }
            let inner = g.as_mut().unwrap();
            let cgs: Vec<u32> = inner.cgs.iter().copied().collect();
            for cg in cgs {
                let _ = inner.c.0.wait_all(CgId(cg));
            }
            let regions: Vec<u64> = inner.regions.iter().copied().collect();
            for k in regions {
                let _ = inner.c.0.unregister(RegionId(k));
            }
            let files: Vec<dafs_client::File> = inner.files.drain().map(|(_, f)| f).collect();
            for f in files {
                let _ = inner.c.0.close(f);
            }
            Ok(g.take())
        });
        match taken {
            Err(()) => Err(PyBufferError::new_err(
                "cannot close the client: buffers of its registered regions are still exported (release memoryviews/arrays of them first)",
            )),
            Ok(inner) => {
                // Dropping the client sends SESSION_DESTROY (best effort, never blocks).
                py.allow_threads(move || drop(inner));
                let refs = std::mem::take(&mut *lock(&self.refs));
                drop(refs);
                let deferred = std::mem::take(&mut *lock(&self.deferred));
                drop(deferred);
                Ok(())
            }
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        lock(&self.inner).is_none()
    }
    #[getter]
    fn inline_threshold(&self) -> usize {
        self.inline_threshold
    }
    #[getter]
    fn max_io_size(&self) -> usize {
        self.io_bytes_max
    }
    #[getter]
    fn slots(&self) -> u32 {
        self.slots
    }
    #[getter]
    fn max_msg_size(&self) -> usize {
        self.msg_size_bytes_max
    }
    #[getter]
    fn provider(&self) -> &'static str {
        self.provider
    }
    #[getter]
    fn session_id(&self) -> u64 {
        self.run(|inner| inner.c.0.session_id()).unwrap_or(self.session_id)
    }

    /// None while the session is usable; otherwise why it was lost: "BadSession" (its
    /// lease expired, the server restarted, an administrator ended it) or "Fenced".
    #[getter]
    fn session_lost(&self) -> PyResult<Option<&'static str>> {
        self.run(|inner| inner.c.0.session_lost().map(|s| s.name()))
    }

    /// After the session was lost: start a new session with the same server and re-open
    /// every open file by its path (positions kept; creation and truncation not repeated).
    /// Registered regions stay registered. Locks of the old session are gone.
    fn reestablish(&self, py: Python<'_>) -> PyResult<()> {
        self.run_nogil(py, |inner| -> Result<(), Error> {
            inner.c.0.reestablish()?;
            let fids: Vec<u64> = inner.files.keys().copied().collect();
            for fid in fids {
                let nf = inner.c.0.reopen(&inner.files[&fid])?;
                inner.files.insert(fid, nf);
            }
            Ok(())
        })?
        .map_err(|e| to_pyerr(e, None, None))
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.run(|inner| inner.c.0.stats())?;
        let d = PyDict::new(py);
        d.set_item("requests", s.requests)?;
        d.set_item("inline_reads", s.inline_reads)?;
        d.set_item("inline_writes", s.inline_writes)?;
        d.set_item("direct_reads", s.direct_reads)?;
        d.set_item("direct_writes", s.direct_writes)?;
        d.set_item("inline_bytes", s.inline_bytes)?;
        d.set_item("direct_bytes", s.direct_bytes)?;
        d.set_item("off_direct_path", s.off_direct_path)?;
        d.set_item("slot_waits", s.slot_waits)?;
        d.set_item("errors", s.errors)?;
        d.set_item("reconnects", s.reconnects)?;
        d.set_item("retransmits", s.retransmits)?;
        d.set_item("stale_replies", s.stale_replies)?;
        d.set_item("requests_timed_out", s.requests_timed_out)?;
        let t = PyDict::new(py);
        t.set_item("msgs_sent", s.transport.msgs_sent)?;
        t.set_item("msgs_received", s.transport.msgs_received)?;
        t.set_item("placed_bytes", s.transport.placed_bytes)?;
        t.set_item("pulled_bytes", s.transport.pulled_bytes)?;
        t.set_item("placements_refused", s.transport.placements_refused)?;
        t.set_item("waits_spun", s.transport.waits_spun)?;
        t.set_item("waits_slept", s.transport.waits_slept)?;
        t.set_item("vm_registrations", s.transport.vm_registrations)?;
        d.set_item("transport", t)?;
        Ok(d)
    }

    // ------------------------------------------------------------------ files

    /// Open: returns (file id, size at open).
    #[pyo3(signature = (path, read, write, create=false, exclusive=false, truncate=false, mode=0o644, append=false))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        &self,
        py: Python<'_>,
        path: String,
        read: bool,
        write: bool,
        create: bool,
        exclusive: bool,
        truncate: bool,
        mode: u32,
        append: bool,
    ) -> PyResult<(u64, u64)> {
        let opts = match (read, write) {
            (true, false) => OpenOptions::read(),
            (false, true) => OpenOptions::write_only(),
            (true, true) => OpenOptions::read_write(),
            (false, false) => return Err(PyValueError::new_err("open: neither read nor write")),
        };
        let opts =
            opts.create(create).exclusive(exclusive).truncate(truncate).mode(mode).append(append);
        let p = path.clone();
        let r = self.run_nogil(py, move |inner| {
            let f = inner.c.0.open(&p, opts)?;
            let fid = inner.next_fid;
            inner.next_fid += 1;
            let size = f.attr.size;
            inner.files.insert(fid, f);
            Ok::<_, Error>((fid, size))
        })?;
        r.map_err(|e| to_pyerr(e, Some(&path), None))
    }

    /// Close a file id (a no-op once the client is closed).
    fn close_file(&self, py: Python<'_>, fid: u64) -> PyResult<()> {
        let r = py.allow_threads(|| {
            let mut g = lock(&self.inner);
            match g.as_mut() {
                None => Ok(()),
                Some(inner) => match inner.files.remove(&fid) {
                    None => Ok(()),
                    Some(f) => inner.c.0.close(f),
                },
            }
        });
        r.map_err(|e| to_pyerr(e, None, None))
    }

    /// Read into `buf` (any writable C-contiguous buffer) at `offset`, straight into its
    /// memory. Returns the bytes read (short only at end of file).
    fn pread_into(
        &self,
        py: Python<'_>,
        fid: u64,
        buf: &Bound<'_, PyAny>,
        offset: u64,
    ) -> PyResult<usize> {
        let pb = byte_buffer(buf, true, "readinto()")?;
        let len = pb.len_bytes();
        if len == 0 {
            return Ok(0);
        }
        let mem = buffer_mem(&pb)?;
        let r = self.run_nogil(py, move |inner| {
            let f = inner.files.get(&fid).ok_or_else(bad_fid)?;
            // SAFETY: `pb` keeps the buffer exported (alive, not resizable) until after
            // this closure returns; it is writable, C-contiguous and `len` bytes long.
            let s = unsafe { mem.as_mut_slice() };
            inner.c.0.pread(f, s, offset)
        })?;
        drop(pb);
        r.map_err(|e| to_pyerr(e, None, None))
    }

    /// Write all of `data` (any C-contiguous buffer) at `offset`.
    fn pwrite(
        &self,
        py: Python<'_>,
        fid: u64,
        data: &Bound<'_, PyAny>,
        offset: u64,
    ) -> PyResult<usize> {
        let pb = byte_buffer(data, false, "write()")?;
        let len = pb.len_bytes();
        if len == 0 {
            return Ok(0);
        }
        let mem = buffer_mem(&pb)?;
        let r = self.run_nogil(py, move |inner| {
            let f = inner.files.get(&fid).ok_or_else(bad_fid)?;
            // SAFETY: `pb` keeps the buffer exported until after this closure returns.
            let s = unsafe { mem.as_slice() };
            inner.c.0.pwrite(f, s, offset)
        })?;
        drop(pb);
        r.map_err(|e| to_pyerr(e, None, None))
    }

    /// Append all of `data` atomically (the file was opened with append=True): the server
    /// writes it at the end of file as of that moment, across all clients, and returns
    /// the offset it chose. Data larger than io_bytes_max is appended in pieces, each
    /// atomic on its own.
    fn append(&self, py: Python<'_>, fid: u64, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        let pb = byte_buffer(data, false, "write()")?;
        let mem = buffer_mem(&pb)?;
        let r = self.run_nogil(py, move |inner| {
            let f = inner.files.get(&fid).ok_or_else(bad_fid)?;
            // SAFETY: `pb` keeps the buffer exported until after this closure returns.
            let s = unsafe { mem.as_slice() };
            let max = inner.c.0.io_bytes_max();
            let mut first = None;
            for piece in s.chunks(max.max(1)) {
                let off = inner.c.0.append(f, piece)?;
                first.get_or_insert(off);
            }
            Ok::<_, Error>(first.unwrap_or(0))
        })?;
        drop(pb);
        r.map_err(|e| to_pyerr(e, None, None))
    }

    /// Read up to `n` bytes at `offset` into a new bytes object.
    fn pread<'py>(
        &self,
        py: Python<'py>,
        fid: u64,
        n: usize,
        offset: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let r = self.run_nogil(py, move |inner| {
            let f = inner.files.get(&fid).ok_or_else(bad_fid)?;
            let mut v = vec![0u8; n];
            let k = inner.c.0.pread(f, &mut v, offset)?;
            v.truncate(k);
            Ok::<_, Error>(v)
        })?;
        let v = r.map_err(|e| to_pyerr(e, None, None))?;
        Ok(PyBytes::new(py, &v))
    }

    fn fsync(&self, py: Python<'_>, fid: u64) -> PyResult<()> {
        let r = self.run_nogil(py, move |inner| {
            let f = inner.files.get(&fid).ok_or_else(bad_fid)?;
            inner.c.0.fsync(f)
        })?;
        r.map_err(|e| to_pyerr(e, None, None))
    }

    fn fstat(&self, py: Python<'_>, fid: u64) -> PyResult<AttrTuple> {
        let r = self.run_nogil(py, move |inner| {
            let fh = inner.files.get(&fid).ok_or_else(bad_fid)?.fh;
            inner.c.0.getattr(fh)
        })?;
        r.map(|a| attr_tuple(&a)).map_err(|e| to_pyerr(e, None, None))
    }

    fn ftruncate(&self, py: Python<'_>, fid: u64, size: u64) -> PyResult<()> {
        let r = self.run_nogil(py, move |inner| {
            let fh = inner.files.get(&fid).ok_or_else(bad_fid)?.fh;
            inner.c.0.setattr(fh, SetAttrs { mask: setattr_mask::SIZE, size, ..Default::default() })
        })?;
        r.map(|_| ()).map_err(|e| to_pyerr(e, None, None))
    }

    // ------------------------------------------------------------------ namespace

    #[pyo3(signature = (path, follow=true))]
    fn stat(&self, py: Python<'_>, path: String, follow: bool) -> PyResult<AttrTuple> {
        let p = path.clone();
        let r =
            self.run_nogil(
                py,
                move |inner| if follow { inner.c.0.stat(&p) } else { inner.c.0.lstat(&p) },
            )?;
        r.map(|a| attr_tuple(&a)).map_err(|e| to_pyerr(e, Some(&path), None))
    }

    /// Directory entries as (name bytes, fileid, file type number).
    fn readdir<'py>(&self, py: Python<'py>, path: String) -> PyResult<Bound<'py, PyList>> {
        let p = path.clone();
        let r = self.run_nogil(py, move |inner| inner.c.0.readdir(&p))?;
        let entries = r.map_err(|e| to_pyerr(e, Some(&path), None))?;
        let items: Vec<Bound<'py, PyTuple>> = entries
            .iter()
            .map(|e| {
                PyTuple::new(
                    py,
                    [
                        PyBytes::new(py, &e.name).into_any(),
                        e.fileid.into_pyobject(py)?.into_any(),
                        (e.ftype as u32).into_pyobject(py)?.into_any(),
                    ],
                )
            })
            .collect::<PyResult<_>>()?;
        PyList::new(py, items)
    }

    #[pyo3(signature = (path, mode=0o755))]
    fn mkdir(&self, py: Python<'_>, path: String, mode: u32) -> PyResult<()> {
        let p = path.clone();
        let r = self.run_nogil(py, move |inner| inner.c.0.mkdir(&p, mode))?;
        r.map(|_| ()).map_err(|e| to_pyerr(e, Some(&path), None))
    }

    fn rmdir(&self, py: Python<'_>, path: String) -> PyResult<()> {
        let p = path.clone();
        let r = self.run_nogil(py, move |inner| inner.c.0.rmdir(&p))?;
        r.map_err(|e| to_pyerr(e, Some(&path), None))
    }

    fn remove(&self, py: Python<'_>, path: String) -> PyResult<()> {
        let p = path.clone();
        let r = self.run_nogil(py, move |inner| inner.c.0.remove(&p))?;
        r.map_err(|e| to_pyerr(e, Some(&path), None))
    }

    /// `flags`: 0 (replace `dst`), `RENAME_NOREPLACE` or `RENAME_EXCHANGE` (renameat2).
    #[pyo3(signature = (src, dst, flags=0))]
    fn rename(&self, py: Python<'_>, src: String, dst: String, flags: u32) -> PyResult<()> {
        let (s, d) = (src.clone(), dst.clone());
        let r = self.run_nogil(py, move |inner| inner.c.0.rename_with_flags(&s, &d, flags))?;
        r.map_err(|e| to_pyerr(e, Some(&src), Some(&dst)))
    }

    fn link(&self, py: Python<'_>, existing: String, new_path: String) -> PyResult<()> {
        let (s, d) = (existing.clone(), new_path.clone());
        let r = self.run_nogil(py, move |inner| inner.c.0.link(&s, &d))?;
        r.map(|_| ()).map_err(|e| to_pyerr(e, Some(&existing), Some(&new_path)))
    }

    fn symlink(&self, py: Python<'_>, target: String, link_path: String) -> PyResult<()> {
        let (t, l) = (target.clone(), link_path.clone());
        let r = self.run_nogil(py, move |inner| inner.c.0.symlink(&t, &l))?;
        r.map(|_| ()).map_err(|e| to_pyerr(e, Some(&target), Some(&link_path)))
    }

    fn readlink<'py>(&self, py: Python<'py>, path: String) -> PyResult<Bound<'py, PyBytes>> {
        let p = path.clone();
        let r = self.run_nogil(py, move |inner| inner.c.0.readlink(&p))?;
        let v = r.map_err(|e| to_pyerr(e, Some(&path), None))?;
        Ok(PyBytes::new(py, &v))
    }

    fn truncate(&self, py: Python<'_>, path: String, size: u64) -> PyResult<()> {
        let p = path.clone();
        let r = self.run_nogil(py, move |inner| inner.c.0.truncate(&p, size))?;
        r.map(|_| ()).map_err(|e| to_pyerr(e, Some(&path), None))
    }

    fn chmod(&self, py: Python<'_>, path: String, mode: u32) -> PyResult<()> {
        let p = path.clone();
        let r = self.run_nogil(py, move |inner| inner.c.0.chmod(&p, mode))?;
        r.map(|_| ()).map_err(|e| to_pyerr(e, Some(&path), None))
    }

    fn set_times(
        &self,
        py: Python<'_>,
        path: String,
        atime_ns: i64,
        mtime_ns: i64,
    ) -> PyResult<()> {
        let p = path.clone();
        let r = self.run_nogil(py, move |inner| inner.c.0.set_times(&p, atime_ns, mtime_ns))?;
        r.map(|_| ()).map_err(|e| to_pyerr(e, Some(&path), None))
    }

    fn statfs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.run_nogil(py, |inner| inner.c.0.statfs())?;
        let s = r.map_err(|e| to_pyerr(e, None, None))?;
        let d = PyDict::new(py);
        d.set_item("total_bytes", s.total_bytes)?;
        d.set_item("free_bytes", s.free_bytes)?;
        d.set_item("avail_bytes", s.avail_bytes)?;
        d.set_item("total_files", s.total_files)?;
        d.set_item("free_files", s.free_files)?;
        d.set_item("block_size", s.block_size)?;
        d.set_item("name_max", s.name_max)?;
        Ok(d)
    }

    /// NULL round trip (latency probe).
    fn null(&self, py: Python<'_>) -> PyResult<()> {
        let r = self.run_nogil(py, |inner| inner.c.0.null())?;
        r.map_err(|e| to_pyerr(e, None, None))
    }

    // ------------------------------------------------------------------ registration

    /// Allocate `size` bytes of zeroed memory registered for direct placement.
    fn alloc_registered(slf: &Bound<'_, Self>, size: usize) -> PyResult<Py<Region>> {
        if size == 0 {
            return Err(PyValueError::new_err("alloc_registered: size must be > 0"));
        }
        let this = slf.get();
        let r = this.run(|inner| {
            let id = inner.c.0.alloc_registered(size)?;
            let ptr = inner.c.0.region_mut(id)?.as_mut_ptr() as usize;
            inner.regions.insert(id.0);
            Ok::<_, Error>((id.0, ptr))
        })?;
        let (key, ptr) = r.map_err(|e| to_pyerr(e, None, None))?;
        Py::new(slf.py(), Region::new(slf.clone().unbind(), key, ptr, size, None))
    }

    /// Register the memory of `obj` (a writable, C-contiguous buffer: bytearray,
    /// memoryview, numpy array, mmap...). The object stays exported (cannot be resized
    /// or freed) until the region is closed.
    fn register(slf: &Bound<'_, Self>, obj: &Bound<'_, PyAny>) -> PyResult<Py<Region>> {
        let pb = byte_buffer(obj, true, "register()")?;
        let len = pb.len_bytes();
        if len == 0 {
            return Err(PyValueError::new_err("register: empty buffer"));
        }
        let ptr = pb.buf_ptr() as *mut u8;
        let this = slf.get();
        let r = this.run(|inner| {
            // SAFETY: the memory stays valid until unregistered: the Region keeps `pb`
            // (the export) and releases it only after unregistering (close, drop, or
            // the deferred path). The application is told not to touch the object
            // while I/O naming the region is in flight (see the module docs).
            let id = unsafe { inner.c.0.register_raw(ptr, len) }?;
            inner.regions.insert(id.0);
            Ok::<_, Error>(id.0)
        })?;
        let key = r.map_err(|e| to_pyerr(e, None, None))?;
        Py::new(slf.py(), Region::new(slf.clone().unbind(), key, ptr as usize, len, Some(pb)))
    }

    // ------------------------------------------------------------------ asynchronous I/O

    fn completion_group(slf: &Bound<'_, Self>) -> PyResult<Py<PyCg>> {
        let id = slf
            .get()
            .run(|inner| {
                let cg = inner.c.0.create_cg()?;
                inner.cgs.insert(cg.0);
                Ok::<_, Error>(cg.0)
            })?
            .map_err(|e| to_pyerr(e, None, None))?;
        Py::new(
            slf.py(),
            PyCg {
                client: slf.clone().unbind(),
                id,
                closed: AtomicBool::new(false),
                pending: Mutex::new(VecDeque::new()),
            },
        )
    }

    /// Submit a read of `length` bytes at `offset` into `region[region_offset:]`.
    /// Returns the request id. Raises BlockingIOError when every slot is in use.
    #[allow(clippy::too_many_arguments)]
    fn submit_read(
        slf: &Bound<'_, Self>,
        fid: u64,
        offset: u64,
        region: &Bound<'_, Region>,
        region_offset: usize,
        length: usize,
        user_data: u64,
        cg: &Bound<'_, PyCg>,
    ) -> PyResult<u64> {
        slf.get().submit(
            slf.as_ptr(),
            fid,
            offset,
            region,
            region_offset,
            length,
            user_data,
            cg,
            false,
        )
    }

    /// Submit a write of `region[region_offset:region_offset+length]` at `offset`.
    #[allow(clippy::too_many_arguments)]
    fn submit_write(
        slf: &Bound<'_, Self>,
        fid: u64,
        offset: u64,
        region: &Bound<'_, Region>,
        region_offset: usize,
        length: usize,
        user_data: u64,
        cg: &Bound<'_, PyCg>,
    ) -> PyResult<u64> {
        slf.get().submit(
            slf.as_ptr(),
            fid,
            offset,
            region,
            region_offset,
            length,
            user_data,
            cg,
            true,
        )
    }
}

// ---------------------------------------------------------------------------------------
// Region
// ---------------------------------------------------------------------------------------

/// Registered memory: the server places reads into it and pulls writes out of it.
///
/// Exposes the buffer protocol (`memoryview(region)`, `numpy.frombuffer(region, ...)`),
/// refused while asynchronous I/O naming the region is in flight; and a region whose
/// buffer is exported cannot be named by a submit. Both raise BufferError.
#[pyclass(frozen, module = "dafs._dafs", name = "Region")]
struct Region {
    client: Py<PyClient>,
    key: u64,
    ptr: usize,
    len: usize,
    /// For `register(obj)`: the export of `obj`, released after unregistering.
    owner: Mutex<Option<PyBuffer<u8>>>,
    exports: AtomicUsize,
    closed: AtomicBool,
}

impl Region {
    fn new(
        client: Py<PyClient>,
        key: u64,
        ptr: usize,
        len: usize,
        owner: Option<PyBuffer<u8>>,
    ) -> Region {
        Region {
            client,
            key,
            ptr,
            len,
            owner: Mutex::new(owner),
            exports: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// Check the region can be accessed now; run `f` on its bytes under the client lock.
    fn with_bytes<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> PyResult<R> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(PyValueError::new_err("region is closed"));
        }
        let r = self.client.get().run(|inner| inner.c.0.region_mut(RegionId(self.key)).map(f))?;
        r.map_err(region_err)
    }
}

fn region_err(e: Error) -> PyErr {
    match e {
        Error::RegionBusy => PyBufferError::new_err(
            "the region has asynchronous I/O in flight: reap its completions first",
        ),
        e => to_pyerr(e, None, None),
    }
}

#[pymethods]
impl Region {
    fn __len__(&self) -> usize {
        self.len
    }

    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst) || self.client.get().closed()
    }

    /// Exports of this region's buffer still alive (memoryviews, arrays...).
    #[getter]
    fn exports(&self) -> usize {
        self.exports.load(Ordering::SeqCst)
    }

    /// A copy of `length` bytes from `offset` (refused while I/O is in flight).
    #[pyo3(signature = (offset=0, length=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        length: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let end = match length {
            None => self.len,
            Some(n) => offset
                .checked_add(n)
                .filter(|e| *e <= self.len)
                .ok_or_else(|| PyValueError::new_err("range outside the region"))?,
        };
        if offset > end {
            return Err(PyValueError::new_err("range outside the region"));
        }
        let v = self.with_bytes(|b| b[offset..end].to_vec())?;
        Ok(PyBytes::new(py, &v))
    }

    /// Copy `data` into the region at `offset` (refused while I/O is in flight).
    #[pyo3(signature = (data, offset=0))]
    fn write(&self, data: &Bound<'_, PyAny>, offset: usize) -> PyResult<usize> {
        let pb = byte_buffer(data, false, "write()")?;
        let n = pb.len_bytes();
        if offset.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(PyValueError::new_err("data does not fit in the region at this offset"));
        }
        let src = pb.buf_ptr() as *const u8;
        // Copied under the client lock: another thread cannot unregister (free) the
        // region meanwhile.
        self.with_bytes(|b| {
            let dst = b.as_mut_ptr();
            if n > 0 {
                // SAFETY: `pb` exports `n` readable bytes at `src`; `offset .. offset + n`
                // lies in the region (checked above), which has no I/O in flight (checked
                // by `with_bytes`). `ptr::copy` allows `data` to be a view of the region
                // itself (overlapping ranges).
                unsafe { std::ptr::copy(src, dst.add(offset), n) };
            }
        })?;
        drop(pb);
        Ok(n)
    }

    /// Unregister the region (its memory is freed, or the registered object released).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let client = self.client.get();
        let r = py.allow_threads(|| {
            let mut g = lock(&client.inner);
            let Some(inner) = g.as_mut() else { return Ok(true) };
            if self.exports.load(Ordering::SeqCst) > 0 {
                return Ok(false);
            }
            inner.c.0.unregister(RegionId(self.key))?;
            inner.regions.remove(&self.key);
            self.closed.store(true, Ordering::SeqCst);
            Ok::<_, Error>(true)
        });
        match r {
            Ok(false) => Err(PyBufferError::new_err("cannot close the region: its buffer is exported (release memoryviews/arrays of it first)")),
            Ok(true) => {
                self.closed.store(true, Ordering::SeqCst);
                let owner = lock(&self.owner).take();
                drop(owner);
                Ok(())
            }
            Err(e) => Err(region_err(e)),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: PyObject,
        _v: PyObject,
        _tb: PyObject,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<dafs.Region key={:#x} size={}{}>",
            self.key,
            self.len,
            if self.closed() { " closed" } else { "" }
        )
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        if view.is_null() {
            return Err(PyBufferError::new_err("view is null"));
        }
        if this.closed.load(Ordering::SeqCst) {
            return Err(PyValueError::new_err("region is closed"));
        }
        let client = this.client.get();
        let r = client.run(|inner| match inner.c.0.region(RegionId(this.key)) {
            Ok(_) => {
                // Counted under the client lock: a submit (which checks the count under
                // the same lock) cannot slip in between the check and the export.
                this.exports.fetch_add(1, Ordering::SeqCst);
                client.exports.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => Err(e),
        })?;
        r.map_err(region_err)?;
        // SAFETY: `ptr..ptr+len` is the region's registered memory, valid until the region
        // is unregistered, which is refused while exports are alive (and the client cannot
        // be closed either); the view holds a reference to this object.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                this.ptr as *mut c_void,
                this.len as ffi::Py_ssize_t,
                0,
                flags,
            )
        };
        if rc == -1 {
            this.exports.fetch_sub(1, Ordering::SeqCst);
            client.exports.fetch_sub(1, Ordering::SeqCst);
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::SeqCst);
        self.client.get().exports.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if *self.closed.get_mut() {
            return;
        }
        let owner = self.owner.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        let client = self.client.get();
        let mut guard = match client.inner.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        match guard.as_mut().map(|g| g.as_mut()) {
            // Client closed: it unregistered everything already.
            Some(None) => {}
            Some(Some(inner)) => match inner.c.0.unregister(RegionId(self.key)) {
                // Cannot happen (in-flight I/O keeps its region alive), but never free
                // memory the server may still write: retry later.
                Err(Error::RegionBusy) => {
                    lock(&client.deferred).push(Deferred::Unregister(self.key, owner))
                }
                _ => {
                    inner.regions.remove(&self.key);
                }
            },
            None => lock(&client.deferred).push(Deferred::Unregister(self.key, owner)),
        }
        drop(guard);
        // `owner` (if not handed to the deferred queue) is released here, GIL held (dealloc).
    }
}

// ---------------------------------------------------------------------------------------
// Completion groups and completions
// ---------------------------------------------------------------------------------------

/// A completion group: asynchronous requests name one at submit; completions are reaped
/// from it with `wait()` / `poll()`.
#[pyclass(frozen, module = "dafs._dafs", name = "CompletionGroup")]
struct PyCg {
    client: Py<PyClient>,
    id: u32,
    closed: AtomicBool,
    /// Completions reaped from the client but not yet returned (a wait interrupted by
    /// a signal keeps what it had reaped here).
    pending: Mutex<VecDeque<Py<PyCompletion>>>,
}

impl PyCg {
    fn check(&self) -> PyResult<&PyClient> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(PyValueError::new_err("completion group is closed"));
        }
        Ok(self.client.get())
    }

    fn take_pending(&self, max: usize) -> Vec<Py<PyCompletion>> {
        let mut p = lock(&self.pending);
        let k = p.len().min(max);
        p.drain(..k).collect()
    }
}

#[pymethods]
impl PyCg {
    /// Wait until `n` completions are available (or nothing else is in flight, or
    /// `timeout` seconds pass) and return them (a list, possibly shorter than `n`).
    #[pyo3(signature = (n=1, timeout=None))]
    fn wait(
        &self,
        py: Python<'_>,
        n: usize,
        timeout: Option<f64>,
    ) -> PyResult<Vec<Py<PyCompletion>>> {
        let client = self.check()?;
        let mut out = self.take_pending(n);
        let deadline = match timeout {
            None => None,
            Some(t) if t.is_finite() && t >= 0.0 => {
                Some(Instant::now() + Duration::from_secs_f64(t))
            }
            Some(_) => {
                return Err(PyValueError::new_err(
                    "timeout must be a non-negative number of seconds or None",
                ))
            }
        };
        let cg = CgId(self.id);
        while out.len() < n {
            let need = n - out.len();
            let slice = match deadline {
                None => Duration::from_millis(100),
                Some(d) => {
                    d.saturating_duration_since(Instant::now()).min(Duration::from_millis(100))
                }
            };
            let (res, outstanding) = client.run_nogil(py, move |inner| {
                let r = if slice.is_zero() {
                    inner.c.0.poll(cg, need)
                } else {
                    inner.c.0.wait_n(cg, need, Some(slice))
                };
                (r, inner.c.0.outstanding(cg))
            })?;
            match res {
                Ok(done) => out.extend(client.convert(py, done)?),
                Err(e) if out.is_empty() => return Err(to_pyerr(e, None, None)),
                // The failed I/Os complete with errors; return what we have.
                Err(_) => break,
            }
            if out.len() >= n || outstanding == 0 || deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if let Err(e) = py.check_signals() {
                lock(&self.pending).extend(out);
                return Err(e);
            }
        }
        Ok(out)
    }

    /// Make progress without blocking; return up to `max` completions (all if None).
    #[pyo3(signature = (max=None))]
    fn poll(&self, py: Python<'_>, max: Option<usize>) -> PyResult<Vec<Py<PyCompletion>>> {
        let client = self.check()?;
        let max = max.unwrap_or(usize::MAX);
        let mut out = self.take_pending(max);
        if out.len() < max {
            let need = max - out.len();
            let r = client.run(|inner| inner.c.0.poll(CgId(self.id), need))?;
            out.extend(client.convert(py, r.map_err(|e| to_pyerr(e, None, None))?)?);
        }
        Ok(out)
    }

    /// Wait for everything in flight and return all completions.
    fn wait_all(&self, py: Python<'_>) -> PyResult<Vec<Py<PyCompletion>>> {
        let mut out = Vec::new();
        loop {
            let got = self.wait(py, usize::MAX, None)?;
            let empty = got.is_empty();
            out.extend(got);
            if empty || self.outstanding()? == 0 {
                out.extend(self.poll(py, None)?);
                return Ok(out);
            }
        }
    }

    /// Requests of this group still in flight.
    #[getter]
    fn outstanding(&self) -> PyResult<usize> {
        let client = self.check()?;
        client.run(|inner| inner.c.0.outstanding(CgId(self.id)))
    }

    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst) || self.client.get().closed()
    }

    /// Wait for the group's in-flight requests (their completions are discarded), then
    /// destroy it.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let client = self.client.get();
        let cg = CgId(self.id);
        let done = py.allow_threads(|| {
            let mut g = lock(&client.inner);
            let inner = g.as_mut()?;
            let done = inner.c.0.wait_all(cg).unwrap_or_default();
            let _ = inner.c.0.destroy_cg(cg);
            inner.cgs.remove(&cg.0);
            Some(done.iter().map(|c| c.id.0).collect::<Vec<u64>>())
        });
        if let Some(ids) = done {
            client.unref(ids);
        }
        let pending = std::mem::take(&mut *lock(&self.pending));
        drop(pending);
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: PyObject,
        _v: PyObject,
        _tb: PyObject,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<dafs.CompletionGroup id={}{}>",
            self.id,
            if self.closed() { " closed" } else { "" }
        )
    }
}

impl Drop for PyCg {
    fn drop(&mut self) {
        if *self.closed.get_mut() {
            return;
        }
        let client = self.client.get();
        let cg = CgId(self.id);
        let finished = match client.inner.try_lock() {
            Ok(mut g) => match g.as_mut() {
                None => None,
                Some(inner) if inner.c.0.outstanding(cg) == 0 => {
                    let done = inner.c.0.poll(cg, usize::MAX).unwrap_or_default();
                    let _ = inner.c.0.destroy_cg(cg);
                    inner.cgs.remove(&cg.0);
                    Some(done.iter().map(|c| c.id.0).collect::<Vec<u64>>())
                }
                Some(_) => {
                    lock(&client.deferred).push(Deferred::DestroyCg(self.id));
                    None
                }
            },
            Err(_) => {
                lock(&client.deferred).push(Deferred::DestroyCg(self.id));
                None
            }
        };
        if let Some(ids) = finished {
            client.unref(ids);
        }
    }
}

/// A finished asynchronous request.
#[pyclass(frozen, module = "dafs._dafs", name = "Completion")]
struct PyCompletion {
    /// Request id (as returned by submit_read / submit_write).
    #[pyo3(get)]
    id: u64,
    #[pyo3(get)]
    user_data: u64,
    /// For reads: the read reached end of file.
    #[pyo3(get)]
    eof: bool,
    nbytes: Option<usize>,
    error: Option<PyObject>,
}

#[pymethods]
impl PyCompletion {
    /// Bytes transferred; raises the request's exception if it failed.
    #[getter]
    fn result(&self, py: Python<'_>) -> PyResult<usize> {
        match (&self.nbytes, &self.error) {
            (Some(n), _) => Ok(*n),
            (None, Some(e)) => Err(PyErr::from_value(e.bind(py).clone())),
            (None, None) => Err(PyValueError::new_err("no result")),
        }
    }

    /// Bytes transferred, or None if the request failed.
    #[getter]
    fn nbytes(&self) -> Option<usize> {
        self.nbytes
    }

    /// The request's exception (an OSError), or None.
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<PyObject> {
        self.error.as_ref().map(|e| e.clone_ref(py))
    }

    #[getter]
    fn ok(&self) -> bool {
        self.error.is_none()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match (&self.nbytes, &self.error) {
            (Some(n), _) => format!(
                "<dafs.Completion id={} user_data={} result={}{}>",
                self.id,
                self.user_data,
                n,
                if self.eof { " eof" } else { "" }
            ),
            (None, Some(e)) => {
                let s = e.bind(py).repr().map(|r| r.to_string()).unwrap_or_default();
                format!("<dafs.Completion id={} user_data={} error={}>", self.id, self.user_data, s)
            }
            _ => format!("<dafs.Completion id={}>", self.id),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Module
// ---------------------------------------------------------------------------------------

#[pymodule]
fn _dafs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyClient>()?;
    m.add_class::<Region>()?;
    m.add_class::<PyCg>()?;
    m.add_class::<PyCompletion>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("RENAME_NOREPLACE", dafs_client::dafs_proto::rename_flags::NOREPLACE)?;
    m.add("RENAME_EXCHANGE", dafs_client::dafs_proto::rename_flags::EXCHANGE)?;
    Ok(())
}
