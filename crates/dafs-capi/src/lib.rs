//! # dafs-capi — the stable C ABI of the DAFS client library
//!
//! Builds `libdafs.so` and `libdafs.a`; the API is declared and documented in the
//! hand-written header `include/dafs.h` (a unit test below keeps the two in sync).
//!
//! Conventions every exported function follows:
//! - **Errors**: functions returning `int`/`ssize_t` return `>= 0` on success and
//!   `-errno` on failure (liburing style); `errno` itself is never set.
//! - **No unwinding into C**: every body runs under `catch_unwind`. A panic (a bug in
//!   the library) returns `-ENOTRECOVERABLE` and poisons the client: every later call on
//!   it returns `-ENOTRECOVERABLE` too (only `dafs_disconnect` still works).
//! - **Null pointers** are checked and answered with `-EINVAL` (`-EBADF` for files).
//! - **Threads**: a client is used by one thread at a time (it is `Send`, not `Sync`, like
//!   the Rust `Client`). Overlapping calls from two threads are detected with an atomic
//!   flag and refused with `-EBUSY` rather than corrupting state.
//! - **Files** are validated against the client's table of live files before they are
//!   dereferenced: a closed (or another client's) `dafs_file_t` gives `-EBADF`, not
//!   undefined behaviour.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

use std::cell::UnsafeCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use dafs_client::{
    BatchCompletion, BatchIoDesc, CgId, Client, ClientConfig, Completion, File, IoBuf, OpenOptions,
    Provider, RegionId,
};
use dafs_proto::Attr;

mod async_io;
mod io;
mod locks;
mod namespace;
mod open_ext;
#[cfg(test)]
mod tests;

pub use async_io::*;
pub use io::*;
pub use locks::*;
pub use namespace::*;
pub use open_ext::*;

// ---------------------------------------------------------------------------------------
// C types (mirrored in include/dafs.h; layout checked by the C tests' static asserts)
// ---------------------------------------------------------------------------------------

pub type dafs_region_t = u64;
pub type dafs_cg_t = u32;

pub const DAFS_PROVIDER_AUTO: u32 = 0;
pub const DAFS_PROVIDER_TCP: u32 = 1;

pub const DAFS_O_RDONLY: c_int = 0o0;
pub const DAFS_O_WRONLY: c_int = 0o1;
pub const DAFS_O_RDWR: c_int = 0o2;
pub const DAFS_O_ACCMODE: c_int = 0o3;
pub const DAFS_O_CREAT: c_int = 0o100;
pub const DAFS_O_EXCL: c_int = 0o200;
pub const DAFS_O_TRUNC: c_int = 0o1000;
pub const DAFS_O_APPEND: c_int = 0o2000;

/// `dafs_rename2` flags: Linux's `RENAME_NOREPLACE` and `RENAME_EXCHANGE` (the
/// protocol's `rename_flags`, asserted in the tests).
pub const DAFS_RENAME_NOREPLACE: u32 = 1;
pub const DAFS_RENAME_EXCHANGE: u32 = 2;

pub const DAFS_BATCH_PER_IO: c_int = 0;
pub const DAFS_BATCH_PER_BATCH: c_int = 1;
pub const DAFS_BATCH_ERRORS_ONLY: c_int = 2;

pub const DAFS_CQE_EOF: u32 = 1;

/// Connection options; an all-zero struct (or NULL) means "defaults".
#[repr(C)]
pub struct dafs_options_t {
    pub client_id: *const c_char,
    pub secret_file: *const c_char,
    pub export_name: *const c_char,
    pub slots: u32,
    pub provider: u32,
    pub connect_timeout_ms: u32,
    pub max_msg_size: u32,
    pub reserved: [u64; 4],
}

#[repr(C)]
#[derive(Default)]
pub struct dafs_attr_t {
    pub type_: u32,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub reserved0: u32,
    pub size: u64,
    pub used: u64,
    pub fileid: u64,
    pub fsid: u64,
    pub rdev: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

#[repr(C)]
pub struct dafs_completion_t {
    pub user_data: u64,
    pub result: i64,
    pub flags: u32,
    pub reserved: u32,
}

#[repr(C)]
#[derive(Default)]
pub struct dafs_stats_t {
    pub requests: u64,
    pub inline_reads: u64,
    pub inline_writes: u64,
    pub direct_reads: u64,
    pub direct_writes: u64,
    pub inline_bytes: u64,
    pub direct_bytes: u64,
    pub off_direct_path: u64,
    pub slot_waits: u64,
    pub errors: u64,
    pub msgs_sent: u64,
    pub msgs_received: u64,
    pub placed_bytes: u64,
    pub pulled_bytes: u64,
    pub placements_refused: u64,
    pub waits_spun: u64,
    pub waits_slept: u64,
    pub vm_registrations: u64,
    pub reconnects: u64,
    pub retransmits: u64,
    pub stale_replies: u64,
    pub reserved: [u64; 5],
}

/// One file segment of a batched I/O.
#[repr(C)]
pub struct dafs_file_seg_t {
    pub offset: u64,
    pub len: u64,
}

/// One memory segment (a range of a registered region) of a batched I/O.
#[repr(C)]
pub struct dafs_mem_seg_t {
    pub region: dafs_region_t,
    pub offset: usize,
    pub len: usize,
}

/// One I/O of a batch (`dafs_batch_submit`).
#[repr(C)]
pub struct dafs_batch_io_t {
    pub write: c_int,
    pub file_segs: *const dafs_file_seg_t,
    pub n_file_segs: usize,
    pub mem_segs: *const dafs_mem_seg_t,
    pub n_mem_segs: usize,
    pub user_data: u64,
}

pub type dafs_readdir_fn = Option<
    unsafe extern "C" fn(arg: *mut c_void, name: *const c_char, fileid: u64, type_: u32) -> c_int,
>;

/// Opaque client handle (`dafs_client_t` in C).
pub struct dafs_client_t {
    in_use: AtomicBool,
    poisoned: AtomicBool,
    inner: UnsafeCell<Inner>,
}

/// Opaque open-file handle (`dafs_file_t` in C).
pub struct dafs_file_t {
    file: File,
    /// Opened with DAFS_O_APPEND (dafs_append refuses other files).
    append: bool,
}

struct Inner {
    client: Client,
    /// Addresses of this client's live `dafs_file_t` boxes.
    files: HashSet<usize>,
    /// Reads submitted with `dafs_pread_nb_buf`: request id -> caller's destination.
    buf_reads: HashMap<u64, (usize, usize)>,
}

// ---------------------------------------------------------------------------------------
// Plumbing: errno results, the entry guard, panics
// ---------------------------------------------------------------------------------------

const EINVAL: c_int = libc::EINVAL;
const EBADF: c_int = libc::EBADF;
const EBUSY: c_int = libc::EBUSY;
const E2BIG: c_int = libc::E2BIG;
const PANICKED: c_int = libc::ENOTRECOVERABLE;

type R<T> = Result<T, c_int>;

fn errno(e: dafs_client::Error) -> c_int {
    e.errno()
}

fn neg(r: R<c_int>) -> c_int {
    match r {
        Ok(v) => v,
        Err(e) => -e,
    }
}

fn neg_ssize(r: R<isize>) -> isize {
    match r {
        Ok(v) => v,
        Err(e) => -(e as isize),
    }
}

/// Run `f` with exclusive access to the client: null check, poison check, overlapping
/// use refused with EBUSY, panics caught (and the client poisoned).
fn with_client<T>(c: *const dafs_client_t, f: impl FnOnce(&mut Inner) -> R<T>) -> R<T> {
    if c.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: the caller passes a pointer obtained from dafs_connect and not yet given to
    // dafs_disconnect (documented); only atomics are touched before the guard is taken.
    let h = unsafe { &*c };
    if h.poisoned.load(Ordering::Relaxed) {
        return Err(PANICKED);
    }
    if h.in_use.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return Err(EBUSY);
    }
    // SAFETY: the in_use flag makes this the only live reference to `inner`.
    let inner = unsafe { &mut *h.inner.get() };
    let r = catch_unwind(AssertUnwindSafe(|| f(inner)));
    h.in_use.store(false, Ordering::Release);
    match r {
        Ok(v) => v,
        Err(_) => {
            h.poisoned.store(true, Ordering::Relaxed);
            Err(PANICKED)
        }
    }
}

/// Like `with_client` for calls that also name a file: the file must be in the client's
/// table of live files (else EBADF) before it is dereferenced.
fn with_file<T>(
    c: *const dafs_client_t,
    f: *const dafs_file_t,
    body: impl FnOnce(&mut Inner, &File) -> R<T>,
) -> R<T> {
    with_client(c, |inner| {
        if f.is_null() || !inner.files.contains(&(f as usize)) {
            return Err(EBADF);
        }
        // SAFETY: the address is a live Box<dafs_file_t> of this client (checked above);
        // it is freed only by dafs_close/dafs_disconnect, which also take the guard.
        let file = unsafe { &(*f).file };
        body(inner, file)
    })
}

/// Catch panics in functions that have no client to poison.
fn guarded<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// Read-only queries: no guard needed beyond a null check (they read plain fields), but
/// refuse while another thread is inside a call.
fn query<T>(c: *const dafs_client_t, default: T, f: impl FnOnce(&Client) -> T) -> T {
    with_client(c, |inner| Ok(f(&inner.client))).unwrap_or(default)
}

fn cstr<'a>(p: *const c_char) -> R<&'a str> {
    if p.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: the caller passes a NUL-terminated string (documented).
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| EINVAL)
}

fn opt_cstr<'a>(p: *const c_char) -> R<Option<&'a str>> {
    if p.is_null() {
        Ok(None)
    } else {
        cstr(p).map(Some)
    }
}

fn check_cg(cg: dafs_cg_t) -> R<CgId> {
    // CgId(0) is the library's internal group used by the blocking calls.
    if cg == 0 {
        Err(EINVAL)
    } else {
        Ok(CgId(cg))
    }
}

fn attr_to_c(a: &Attr) -> dafs_attr_t {
    dafs_attr_t {
        type_: a.ftype as u32,
        mode: a.mode,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        reserved0: 0,
        size: a.size,
        used: a.used,
        fileid: a.fileid,
        fsid: a.fsid,
        rdev: a.rdev,
        atime_ns: a.atime_ns,
        mtime_ns: a.mtime_ns,
        ctime_ns: a.ctime_ns,
    }
}

fn write_attr(out: *mut dafs_attr_t, a: &Attr) -> R<c_int> {
    // SAFETY: non-null checked by the callers; points to caller-owned storage.
    unsafe { out.write(attr_to_c(a)) };
    Ok(0)
}

fn read_secret(path: &str) -> R<Vec<u8>> {
    let s = std::fs::read(path).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    let trimmed = s.strip_suffix(b"\n").unwrap_or(&s).to_vec();
    if trimmed.len() < 8 {
        return Err(EINVAL);
    }
    Ok(trimmed)
}

// ---------------------------------------------------------------------------------------
// Library
// ---------------------------------------------------------------------------------------

static VERSION: &CStr = {
    const V: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    match CStr::from_bytes_with_nul(V.as_bytes()) {
        Ok(s) => s,
        Err(_) => panic!("version string"),
    }
};

#[no_mangle]
pub extern "C" fn dafs_version() -> *const c_char {
    VERSION.as_ptr()
}

fn errno_table() -> &'static Vec<CString> {
    static T: OnceLock<Vec<CString>> = OnceLock::new();
    T.get_or_init(|| {
        (0..256)
            .map(|i| {
                let s = if i == 0 {
                    "Success".to_string()
                } else {
                    let full = std::io::Error::from_raw_os_error(i).to_string();
                    match full.rfind(" (os error ") {
                        Some(p) => full[..p].to_string(),
                        None => full,
                    }
                };
                CString::new(s).unwrap_or_default()
            })
            .collect()
    })
}

#[no_mangle]
pub extern "C" fn dafs_strerror(err: c_int) -> *const c_char {
    guarded(c"unknown error".as_ptr(), || {
        let e = err.unsigned_abs() as usize;
        match errno_table().get(e) {
            Some(s) => s.as_ptr(),
            None => c"unknown error".as_ptr(),
        }
    })
}

// ---------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn dafs_connect(
    target: *const c_char,
    opts: *const dafs_options_t,
    out: *mut *mut dafs_client_t,
) -> c_int {
    guarded(-PANICKED, || {
        neg((|| {
            if out.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: checked non-null; caller-owned storage.
            unsafe { out.write(std::ptr::null_mut()) };
            let target = cstr(target)?;
            let mut cfg = ClientConfig::default();
            // SAFETY: NULL or a valid options struct (documented).
            if let Some(o) = unsafe { opts.as_ref() } {
                if o.reserved.iter().any(|&r| r != 0) {
                    return Err(EINVAL);
                }
                if let Some(id) = opt_cstr(o.client_id)? {
                    cfg.client_id = id.to_string();
                }
                if let Some(p) = opt_cstr(o.secret_file)? {
                    cfg.secret = Some(read_secret(p)?);
                }
                if let Some(x) = opt_cstr(o.export_name)? {
                    cfg.export = x.to_string();
                }
                if o.slots != 0 {
                    cfg.slots = o.slots;
                }
                cfg.provider = match o.provider {
                    DAFS_PROVIDER_AUTO => Provider::Auto,
                    DAFS_PROVIDER_TCP => Provider::Tcp,
                    _ => return Err(EINVAL),
                };
                if o.connect_timeout_ms != 0 {
                    cfg.connect_timeout = Duration::from_millis(o.connect_timeout_ms as u64);
                }
                if o.max_msg_size != 0 {
                    cfg.msg_size_bytes_max = o.max_msg_size;
                }
            }
            let client = Client::connect(target, cfg).map_err(errno)?;
            let h = Box::new(dafs_client_t {
                in_use: AtomicBool::new(false),
                poisoned: AtomicBool::new(false),
                inner: UnsafeCell::new(Inner {
                    client,
                    files: HashSet::new(),
                    buf_reads: HashMap::new(),
                }),
            });
            // SAFETY: as above.
            unsafe { out.write(Box::into_raw(h)) };
            Ok(0)
        })())
    })
}

#[no_mangle]
pub unsafe extern "C" fn dafs_disconnect(client: *mut dafs_client_t) -> c_int {
    if client.is_null() {
        return 0;
    }
    // SAFETY: a pointer from dafs_connect (documented); only the atomic is read first.
    if unsafe { &*client }.in_use.load(Ordering::Acquire) {
        return -EBUSY;
    }
    guarded(-PANICKED, || {
        // SAFETY: from Box::into_raw in dafs_connect; not used after this (documented).
        let h = unsafe { Box::from_raw(client) };
        let inner = h.inner.into_inner();
        for addr in inner.files {
            // SAFETY: every address in the table is a live Box<dafs_file_t>.
            drop(unsafe { Box::from_raw(addr as *mut dafs_file_t) });
        }
        // Dropping the Client sends SESSION_DESTROY (best effort) and closes the
        // connection, which releases the server's open files and every region.
        drop(inner.client);
        0
    })
}

#[no_mangle]
pub extern "C" fn dafs_provider(client: *const dafs_client_t) -> *const c_char {
    guarded(c"".as_ptr(), || {
        query(client, c"".as_ptr(), |c| match c.provider() {
            "tcp" => c"tcp".as_ptr(),
            "tcp+tls" => c"tcp+tls".as_ptr(),
            "shm" => c"shm".as_ptr(),
            _ => c"unknown".as_ptr(),
        })
    })
}

#[no_mangle]
pub extern "C" fn dafs_inline_threshold(client: *const dafs_client_t) -> usize {
    guarded(0, || query(client, 0, |c| c.inline_threshold()))
}

#[no_mangle]
pub extern "C" fn dafs_inline_threshold_unregistered(client: *const dafs_client_t) -> usize {
    guarded(0, || query(client, 0, |c| c.inline_threshold_unregistered()))
}

#[no_mangle]
pub extern "C" fn dafs_max_io_size(client: *const dafs_client_t) -> usize {
    guarded(0, || query(client, 0, |c| c.io_bytes_max()))
}

#[no_mangle]
pub extern "C" fn dafs_slots(client: *const dafs_client_t) -> u32 {
    guarded(0, || query(client, 0, |c| c.slots()))
}

#[no_mangle]
pub extern "C" fn dafs_batch_max(client: *const dafs_client_t) -> u32 {
    guarded(0, || query(client, 0, |c| c.batch_max()))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_stats(client: *const dafs_client_t, out: *mut dafs_stats_t) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() {
            return Err(EINVAL);
        }
        let s = inner.client.stats();
        let t = s.transport;
        let c = dafs_stats_t {
            requests: s.requests,
            inline_reads: s.inline_reads,
            inline_writes: s.inline_writes,
            direct_reads: s.direct_reads,
            direct_writes: s.direct_writes,
            inline_bytes: s.inline_bytes,
            direct_bytes: s.direct_bytes,
            off_direct_path: s.off_direct_path,
            slot_waits: s.slot_waits,
            errors: s.errors,
            msgs_sent: t.msgs_sent,
            msgs_received: t.msgs_received,
            placed_bytes: t.placed_bytes,
            pulled_bytes: t.pulled_bytes,
            placements_refused: t.placements_refused,
            waits_spun: t.waits_spun,
            waits_slept: t.waits_slept,
            vm_registrations: t.vm_registrations,
            reconnects: s.reconnects,
            retransmits: s.retransmits,
            stale_replies: s.stale_replies,
            reserved: [0; 5],
        };
        // SAFETY: checked non-null; caller-owned storage.
        unsafe { out.write(c) };
        Ok(0)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_null(client: *mut dafs_client_t) -> c_int {
    neg(with_client(client, |inner| inner.client.null().map(|_| 0).map_err(errno)))
}

#[no_mangle]
pub extern "C" fn dafs_session_lost(client: *const dafs_client_t) -> c_int {
    neg(with_client(client, |inner| match inner.client.session_lost() {
        None => Ok(0),
        Some(st) => Err(st.to_errno()),
    }))
}

#[no_mangle]
pub extern "C" fn dafs_reestablish(client: *mut dafs_client_t) -> c_int {
    neg(with_client(client, |inner| {
        inner.client.reestablish().map_err(errno)?;
        // Every dafs_file_t of the client stays valid: re-open each by its path.
        let files: Vec<usize> = inner.files.iter().copied().collect();
        for p in files {
            let fp = p as *mut dafs_file_t;
            // SAFETY: a live Box<dafs_file_t> of this client (in its table); the guard
            // makes this the only access.
            let f = unsafe { &mut *fp };
            f.file = inner.client.reopen(&f.file).map_err(errno)?;
        }
        Ok(0)
    }))
}
