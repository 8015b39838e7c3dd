//! `Region`: registered memory, with the buffer protocol.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};

use dafs_client::{Error, RegionId};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffers::byte_buffer;
use crate::client::{lock, Deferred, PyClient};
use crate::errors::to_pyerr;

// ---------------------------------------------------------------------------------------
// Region
// ---------------------------------------------------------------------------------------

/// Registered memory: the server places reads into it and pulls writes out of it.
///
/// Exposes the buffer protocol (`memoryview(region)`, `numpy.frombuffer(region, ...)`),
/// refused while asynchronous I/O naming the region is in flight; and a region whose
/// buffer is exported cannot be named by a submit. Both raise BufferError.
#[pyclass(frozen, module = "dafs._dafs", name = "Region")]
pub(crate) struct Region {
    pub(crate) client: Py<PyClient>,
    pub(crate) key: u64,
    ptr: usize,
    len: usize,
    /// For `register(obj)`: the export of `obj`, released after unregistering.
    owner: Mutex<Option<PyBuffer<u8>>>,
    pub(crate) exports: AtomicUsize,
    pub(crate) closed: AtomicBool,
}

impl Region {
    pub(crate) fn new(
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
