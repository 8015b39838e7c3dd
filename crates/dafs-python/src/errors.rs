//! Client errors as Python exceptions (`OSError` with errno and path, `ConnectionError`).

use dafs_client::dafs_proto::Status;
use dafs_client::Error;
use dafs_transport::TransportError;
use pyo3::exceptions::{PyConnectionError, PyOSError, PyValueError};
use pyo3::prelude::*;

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// Map a client error to the Python exception for it: `OSError(errno, strerror[, path])`
/// — which Python turns into the matching subclass (FileNotFoundError for ENOENT,
/// FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError,
/// BlockingIOError for EAGAIN, TimeoutError, ...) — and `ConnectionError` for a lost
/// or unusable connection.
pub(crate) fn to_pyerr(e: Error, path: Option<&str>, path2: Option<&str>) -> PyErr {
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

pub(crate) fn closed_client() -> PyErr {
    PyValueError::new_err("I/O operation on closed dafs client")
}

pub(crate) fn bad_fid() -> Error {
    Error::Status(Status::BadOpenId)
}
