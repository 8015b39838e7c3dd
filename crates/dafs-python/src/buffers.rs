//! Python objects exported as byte buffers (the buffer protocol) for I/O into them.

use dafs_transport::MemPtr;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;

// ---------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------

/// Export `obj` as C-contiguous bytes (any item format: numpy float arrays and
/// `array('d')` are viewed as their bytes through `memoryview.cast('B')`, same memory).
pub(crate) fn byte_buffer(
    obj: &Bound<'_, PyAny>,
    writable: bool,
    what: &str,
) -> PyResult<PyBuffer<u8>> {
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
pub(crate) fn buffer_mem(pb: &PyBuffer<u8>) -> PyResult<MemPtr> {
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
