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
//!
//! # Layout
//!
//! `client` (the state behind the lock and the helpers every call shares), `client_api`
//! (the Python methods of `_Client`), `region` (`Region`), `completion`
//! (`CompletionGroup`, `Completion`), `errors` (exception mapping), `buffers` (the buffer
//! protocol). This file registers the classes of the module.

use pyo3::prelude::*;

mod buffers;
mod client;
mod client_api;
mod completion;
mod errors;
mod region;

use client::PyClient;
use completion::{PyCg, PyCompletion};
use region::Region;

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
