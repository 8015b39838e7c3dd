//! `CompletionGroup` and `Completion`: reaping asynchronous I/O.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dafs_client::CgId;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::client::{lock, Deferred, PyClient};
use crate::errors::to_pyerr;

// ---------------------------------------------------------------------------------------
// Completion groups and completions
// ---------------------------------------------------------------------------------------

/// A completion group: asynchronous requests name one at submit; completions are reaped
/// from it with `wait()` / `poll()`.
#[pyclass(frozen, module = "dafs._dafs", name = "CompletionGroup")]
pub(crate) struct PyCg {
    pub(crate) client: Py<PyClient>,
    pub(crate) id: u32,
    pub(crate) closed: AtomicBool,
    /// Completions reaped from the client but not yet returned (a wait interrupted by
    /// a signal keeps what it had reaped here).
    pub(crate) pending: Mutex<VecDeque<Py<PyCompletion>>>,
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
pub(crate) struct PyCompletion {
    /// Request id (as returned by submit_read / submit_write).
    #[pyo3(get)]
    pub(crate) id: u64,
    #[pyo3(get)]
    pub(crate) user_data: u64,
    /// For reads: the read reached end of file.
    #[pyo3(get)]
    pub(crate) eof: bool,
    pub(crate) nbytes: Option<usize>,
    pub(crate) error: Option<PyObject>,
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
