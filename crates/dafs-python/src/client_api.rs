//! The Python methods of `_Client` (the `#[pymethods]` block).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use dafs_client::dafs_proto::types::setattr_mask;
use dafs_client::dafs_proto::SetAttrs;
use dafs_client::{CgId, Client, ClientConfig, Error, OpenOptions, Provider, RegionId};
use pyo3::exceptions::{PyBufferError, PyConnectionError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::buffers::{buffer_mem, byte_buffer};
use crate::client::{attr_tuple, lock, AttrTuple, Conn, Inner, PyClient};
use crate::completion::PyCg;
use crate::errors::{bad_fid, to_pyerr};
use crate::region::Region;

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
            inline_threshold_unregistered: c.0.inline_threshold_unregistered(),
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
    pub(crate) fn closed(&self) -> bool {
        lock(&self.inner).is_none()
    }
    #[getter]
    fn inline_threshold(&self) -> usize {
        self.inline_threshold
    }
    #[getter]
    fn inline_threshold_unregistered(&self) -> usize {
        self.inline_threshold_unregistered
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
