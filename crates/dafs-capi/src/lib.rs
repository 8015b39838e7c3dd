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

// ---------------------------------------------------------------------------------------
// Files and blocking I/O
// ---------------------------------------------------------------------------------------

fn open_options(flags: c_int, mode: u32) -> R<OpenOptions> {
    let known = DAFS_O_ACCMODE | DAFS_O_CREAT | DAFS_O_EXCL | DAFS_O_TRUNC | DAFS_O_APPEND;
    if flags & !known != 0 {
        return Err(EINVAL);
    }
    let o = match flags & DAFS_O_ACCMODE {
        DAFS_O_RDONLY => OpenOptions::read(),
        DAFS_O_WRONLY => OpenOptions::write_only(),
        DAFS_O_RDWR => OpenOptions::read_write(),
        _ => return Err(EINVAL),
    };
    Ok(o.create(flags & DAFS_O_CREAT != 0)
        .exclusive(flags & DAFS_O_EXCL != 0)
        .truncate(flags & DAFS_O_TRUNC != 0)
        .append(flags & DAFS_O_APPEND != 0)
        .mode(mode))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_open(
    client: *mut dafs_client_t,
    path: *const c_char,
    flags: c_int,
    mode: u32,
    out: *mut *mut dafs_file_t,
) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: checked non-null; caller-owned storage.
        unsafe { out.write(std::ptr::null_mut()) };
        let path = cstr(path)?;
        let opts = open_options(flags, mode)?;
        let file = inner.client.open(path, opts).map_err(errno)?;
        let p = Box::into_raw(Box::new(dafs_file_t { file, append: flags & DAFS_O_APPEND != 0 }));
        inner.files.insert(p as usize);
        // SAFETY: as above.
        unsafe { out.write(p) };
        Ok(0)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_close(client: *mut dafs_client_t, file: *mut dafs_file_t) -> c_int {
    neg(with_client(client, |inner| {
        if file.is_null() || !inner.files.remove(&(file as usize)) {
            return Err(EBADF);
        }
        // SAFETY: a live Box of this client, now removed from the table.
        let f = unsafe { Box::from_raw(file) };
        inner.client.close(f.file).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_pread(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    buf: *mut c_void,
    len: usize,
    offset: u64,
) -> isize {
    neg_ssize(with_file(client, file, |inner, f| {
        if len == 0 {
            return Ok(0);
        }
        if buf.is_null() || len > isize::MAX as usize {
            return Err(EINVAL);
        }
        // SAFETY: the caller passes `len` writable bytes at `buf` (documented).
        let b = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) };
        inner.client.pread(f, b, offset).map(|n| n as isize).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_pwrite(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    buf: *const c_void,
    len: usize,
    offset: u64,
) -> isize {
    neg_ssize(with_file(client, file, |inner, f| {
        if len == 0 {
            return Ok(0);
        }
        if buf.is_null() || len > isize::MAX as usize {
            return Err(EINVAL);
        }
        // SAFETY: the caller passes `len` readable bytes at `buf` (documented).
        let b = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
        inner.client.pwrite(f, b, offset).map(|n| n as isize).map_err(errno)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_fsync(client: *mut dafs_client_t, file: *mut dafs_file_t) -> c_int {
    neg(with_file(client, file, |inner, f| inner.client.fsync(f).map(|_| 0).map_err(errno)))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_fstat(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    out: *mut dafs_attr_t,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        if out.is_null() {
            return Err(EINVAL);
        }
        let a = inner.client.fstat(f).map_err(errno)?;
        write_attr(out, &a)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_append(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    buf: *const c_void,
    len: usize,
    offset_out: *mut u64,
) -> isize {
    neg_ssize(with_file(client, file, |inner, f| {
        // SAFETY: `file` was validated by with_file (a live handle of this client).
        if !unsafe { (*file).append } {
            return Err(EINVAL);
        }
        if len == 0 {
            return Ok(0);
        }
        if buf.is_null() || len > isize::MAX as usize {
            return Err(EINVAL);
        }
        // SAFETY: the caller passes `len` readable bytes at `buf` (documented).
        let b = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
        let off = inner.client.append(f, b).map_err(errno)?;
        if !offset_out.is_null() {
            // SAFETY: non-null; caller-owned storage.
            unsafe { offset_out.write(off) };
        }
        Ok(len as isize)
    }))
}

// ---------------------------------------------------------------------------------------
// Memory registration
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn dafs_register(
    client: *mut dafs_client_t,
    buf: *mut c_void,
    len: usize,
    out: *mut dafs_region_t,
) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() || buf.is_null() || len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: the caller keeps buf..buf+len valid until dafs_unregister and does not
        // touch it while I/O naming it is in flight (documented).
        let id = unsafe { inner.client.register_raw(buf as *mut u8, len) }.map_err(errno)?;
        // SAFETY: checked non-null; caller-owned storage.
        unsafe { out.write(id.0) };
        Ok(0)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_alloc_registered(
    client: *mut dafs_client_t,
    len: usize,
    ptr_out: *mut *mut c_void,
    out: *mut dafs_region_t,
) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() || ptr_out.is_null() || len == 0 {
            return Err(EINVAL);
        }
        let id = inner.client.alloc_registered(len).map_err(errno)?;
        // The region is new (no I/O in flight), so region_mut succeeds; the pointer stays
        // valid until the region is unregistered (the memory belongs to the transport).
        let ptr = match inner.client.region_mut(id) {
            Ok(s) => s.as_mut_ptr(),
            Err(e) => {
                let _ = inner.client.unregister(id);
                return Err(errno(e));
            }
        };
        // SAFETY: checked non-null; caller-owned storage.
        unsafe {
            ptr_out.write(ptr as *mut c_void);
            out.write(id.0);
        }
        Ok(0)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_unregister(client: *mut dafs_client_t, region: dafs_region_t) -> c_int {
    neg(with_client(client, |inner| {
        inner.client.unregister(RegionId(region)).map(|_| 0).map_err(errno)
    }))
}

// ---------------------------------------------------------------------------------------
// Completion groups and non-blocking I/O
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn dafs_cg_create(client: *mut dafs_client_t, out: *mut dafs_cg_t) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() {
            return Err(EINVAL);
        }
        let cg = inner.client.create_cg().map_err(errno)?;
        // SAFETY: checked non-null; caller-owned storage.
        unsafe { out.write(cg.0) };
        Ok(0)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_cg_destroy(client: *mut dafs_client_t, cg: dafs_cg_t) -> c_int {
    neg(with_client(client, |inner| {
        let cg = check_cg(cg)?;
        // poll(cg, 0) checks the group exists (EINVAL) without reaping anything.
        inner.client.poll(cg, 0).map_err(errno)?;
        inner.client.destroy_cg(cg).map(|_| 0).map_err(|_| EBUSY)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_cg_outstanding(client: *mut dafs_client_t, cg: dafs_cg_t) -> c_int {
    neg(with_client(client, |inner| {
        let cg = check_cg(cg)?;
        Ok(inner.client.outstanding(cg).min(c_int::MAX as usize) as c_int)
    }))
}

/// Turn completions into C completions; finish `_nb_buf` reads by copying into the
/// caller's memory.
fn deliver(inner: &mut Inner, comps: Vec<Completion>, out: *mut dafs_completion_t) -> c_int {
    let n = comps.len();
    for (i, c) in comps.into_iter().enumerate() {
        let dest = inner.buf_reads.remove(&c.id.0);
        let (result, flags) = match &c.result {
            Ok(n) => (*n as i64, if c.eof { DAFS_CQE_EOF } else { 0 }),
            Err(e) => (-(e.errno() as i64), 0),
        };
        if let (Some((ptr, len)), Some(v), Ok(got)) = (dest, &c.buf, &c.result) {
            let k = (*got).min(len).min(v.len());
            if k > 0 {
                // SAFETY: the caller keeps ptr..ptr+len valid and untouched until this
                // completion is reaped (documented for dafs_pread_nb_buf); k <= len, and
                // ptr is non-null whenever len > 0 (checked at submit).
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), ptr as *mut u8, k) };
            }
        }
        // SAFETY: i < n <= max, the caller's array has max entries.
        unsafe {
            out.add(i).write(dafs_completion_t {
                user_data: c.user_data,
                result,
                flags,
                reserved: 0,
            })
        };
    }
    n as c_int
}

#[no_mangle]
pub unsafe extern "C" fn dafs_cg_poll(
    client: *mut dafs_client_t,
    cg: dafs_cg_t,
    out: *mut dafs_completion_t,
    max: u32,
) -> c_int {
    neg(with_client(client, |inner| {
        let cg = check_cg(cg)?;
        if max == 0 {
            return Ok(0);
        }
        if out.is_null() {
            return Err(EINVAL);
        }
        let comps = inner.client.poll(cg, max.min(c_int::MAX as u32) as usize).map_err(errno)?;
        Ok(deliver(inner, comps, out))
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_cg_wait(
    client: *mut dafs_client_t,
    cg: dafs_cg_t,
    min: u32,
    max: u32,
    timeout_ms: c_int,
    out: *mut dafs_completion_t,
) -> c_int {
    neg(with_client(client, |inner| {
        let cg = check_cg(cg)?;
        if min > max {
            return Err(EINVAL);
        }
        if max == 0 {
            return Ok(0);
        }
        if out.is_null() {
            return Err(EINVAL);
        }
        let max = max.min(c_int::MAX as u32) as usize;
        let timeout =
            if timeout_ms < 0 { None } else { Some(Duration::from_millis(timeout_ms as u64)) };
        let mut comps = Vec::new();
        if min > 0 {
            match inner.client.wait_n(cg, min as usize, timeout) {
                Ok(v) => comps = v,
                Err(e) => {
                    // A dead connection fails every request in flight into its group:
                    // hand those completions out (the error shows in each of them).
                    comps = inner.client.poll(cg, max).unwrap_or_default();
                    if comps.is_empty() {
                        return Err(errno(e));
                    }
                }
            }
        }
        if comps.len() < max {
            match inner.client.poll(cg, max - comps.len()) {
                Ok(mut more) => comps.append(&mut more),
                Err(e) if comps.is_empty() => return Err(errno(e)),
                Err(_) => {}
            }
        }
        Ok(deliver(inner, comps, out))
    }))
}

#[allow(clippy::too_many_arguments)]
fn submit_region(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    region: dafs_region_t,
    region_offset: usize,
    len: usize,
    file_offset: u64,
    user_data: u64,
    read: bool,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        let cg = check_cg(cg)?;
        let buf = IoBuf::Region { region: RegionId(region), offset: region_offset, len };
        let r = if read {
            inner.client.submit_read(f, file_offset, buf, cg, user_data)
        } else {
            inner.client.submit_write(f, file_offset, buf, cg, user_data)
        };
        r.map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_pread_nb(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    region: dafs_region_t,
    region_offset: usize,
    len: usize,
    file_offset: u64,
    user_data: u64,
) -> c_int {
    submit_region(client, file, cg, region, region_offset, len, file_offset, user_data, true)
}

#[no_mangle]
pub extern "C" fn dafs_pwrite_nb(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    region: dafs_region_t,
    region_offset: usize,
    len: usize,
    file_offset: u64,
    user_data: u64,
) -> c_int {
    submit_region(client, file, cg, region, region_offset, len, file_offset, user_data, false)
}

#[no_mangle]
pub unsafe extern "C" fn dafs_pread_nb_buf(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    buf: *mut c_void,
    len: usize,
    file_offset: u64,
    user_data: u64,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        let cg = check_cg(cg)?;
        if buf.is_null() && len > 0 {
            return Err(EINVAL);
        }
        if len > inner.client.io_bytes_max() {
            return Err(EINVAL);
        }
        // The request owns a staging Vec; the data is copied into `buf` when the
        // completion is reaped (dafs_cg_poll / dafs_cg_wait).
        let id = inner
            .client
            .submit_read(f, file_offset, IoBuf::Vec(vec![0u8; len]), cg, user_data)
            .map_err(errno)?;
        inner.buf_reads.insert(id.0, (buf as usize, len));
        Ok(0)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_pwrite_nb_buf(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    buf: *const c_void,
    len: usize,
    file_offset: u64,
    user_data: u64,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        let cg = check_cg(cg)?;
        if buf.is_null() && len > 0 {
            return Err(EINVAL);
        }
        if len > inner.client.io_bytes_max() {
            return Err(EINVAL);
        }
        // Copied now: the caller may reuse `buf` as soon as this returns.
        let data = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller passes `len` readable bytes (documented).
            unsafe { std::slice::from_raw_parts(buf as *const u8, len) }.to_vec()
        };
        inner
            .client
            .submit_write(f, file_offset, IoBuf::Vec(data), cg, user_data)
            .map(|_| 0)
            .map_err(errno)
    }))
}

/// A C array as a slice: NULL is allowed only when `n` is 0.
///
/// SAFETY: a non-null `p` points to `n` initialised elements (the caller's contract).
unsafe fn c_slice<'a, T>(p: *const T, n: usize) -> R<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: see above.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

#[no_mangle]
pub unsafe extern "C" fn dafs_batch_submit(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    ios: *const dafs_batch_io_t,
    n_ios: usize,
    mode: c_int,
    user_data: u64,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        let cg = check_cg(cg)?;
        let mode = match mode {
            DAFS_BATCH_PER_IO => BatchCompletion::PerIo,
            DAFS_BATCH_PER_BATCH => BatchCompletion::PerBatch,
            DAFS_BATCH_ERRORS_ONLY => BatchCompletion::ErrorsOnly,
            _ => return Err(EINVAL),
        };
        if n_ios == 0 {
            return Err(EINVAL);
        }
        if n_ios > inner.client.batch_max() as usize {
            return Err(E2BIG);
        }
        // SAFETY: the caller passes n_ios descriptors, each with its segment arrays
        // (documented); everything is copied here, nothing is kept after the call.
        let c_ios = unsafe { c_slice(ios, n_ios) }?;
        let mut descs = Vec::with_capacity(n_ios);
        for io in c_ios {
            // SAFETY: as above.
            let fs = unsafe { c_slice(io.file_segs, io.n_file_segs) }?;
            // SAFETY: as above.
            let ms = unsafe { c_slice(io.mem_segs, io.n_mem_segs) }?;
            if fs.is_empty() || ms.is_empty() {
                return Err(EINVAL);
            }
            // Totals must match (checked without overflow; the library checks again).
            let ft = fs.iter().try_fold(0u64, |t, s| t.checked_add(s.len)).ok_or(EINVAL)?;
            let mt = ms.iter().try_fold(0u64, |t, s| t.checked_add(s.len as u64)).ok_or(EINVAL)?;
            if ft != mt || fs.iter().any(|s| s.offset.checked_add(s.len).is_none()) {
                return Err(EINVAL);
            }
            descs.push(BatchIoDesc {
                write: io.write != 0,
                file: fs.iter().map(|s| (s.offset, s.len)).collect(),
                mem: ms.iter().map(|s| (RegionId(s.region), s.offset, s.len)).collect(),
                user_data: io.user_data,
            });
        }
        inner.client.submit_batch(f, descs, cg, user_data, mode).map(|_| 0).map_err(errno)
    }))
}

// ---------------------------------------------------------------------------------------
// Namespace
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn dafs_stat(
    client: *mut dafs_client_t,
    path: *const c_char,
    out: *mut dafs_attr_t,
) -> c_int {
    neg(with_client(client, |inner| {
        let p = cstr(path)?;
        if out.is_null() {
            return Err(EINVAL);
        }
        let a = inner.client.stat(p).map_err(errno)?;
        write_attr(out, &a)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_lstat(
    client: *mut dafs_client_t,
    path: *const c_char,
    out: *mut dafs_attr_t,
) -> c_int {
    neg(with_client(client, |inner| {
        let p = cstr(path)?;
        if out.is_null() {
            return Err(EINVAL);
        }
        let a = inner.client.lstat(p).map_err(errno)?;
        write_attr(out, &a)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_mkdir(
    client: *mut dafs_client_t,
    path: *const c_char,
    mode: u32,
) -> c_int {
    neg(with_client(client, |inner| {
        inner.client.mkdir(cstr(path)?, mode).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_rmdir(client: *mut dafs_client_t, path: *const c_char) -> c_int {
    neg(with_client(client, |inner| inner.client.rmdir(cstr(path)?).map(|_| 0).map_err(errno)))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_unlink(client: *mut dafs_client_t, path: *const c_char) -> c_int {
    neg(with_client(client, |inner| inner.client.remove(cstr(path)?).map(|_| 0).map_err(errno)))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_rename(
    client: *mut dafs_client_t,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    neg(with_client(client, |inner| {
        inner.client.rename(cstr(from)?, cstr(to)?).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_rename2(
    client: *mut dafs_client_t,
    from: *const c_char,
    to: *const c_char,
    flags: u32,
) -> c_int {
    neg(with_client(client, |inner| {
        inner.client.rename_with_flags(cstr(from)?, cstr(to)?, flags).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_truncate(
    client: *mut dafs_client_t,
    path: *const c_char,
    size: u64,
) -> c_int {
    neg(with_client(client, |inner| {
        if size > i64::MAX as u64 {
            return Err(EINVAL);
        }
        inner.client.truncate(cstr(path)?, size).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_readdir(
    client: *mut dafs_client_t,
    path: *const c_char,
    cb: dafs_readdir_fn,
    arg: *mut c_void,
) -> c_int {
    // Fetch everything first, then call back with the client released: the callback may
    // call into the same client.
    let entries = match with_client(client, |inner| {
        let cb_ok = cb.is_some();
        let p = cstr(path)?;
        if !cb_ok {
            return Err(EINVAL);
        }
        inner.client.readdir(p).map_err(errno)
    }) {
        Ok(e) => e,
        Err(e) => return -e,
    };
    let Some(cb) = cb else { return -EINVAL };
    guarded(-PANICKED, || {
        let mut n: c_int = 0;
        for e in entries {
            // Names never contain NUL (the protocol forbids it); skip one that would.
            let Ok(name) = CString::new(e.name) else { continue };
            // SAFETY: a C function pointer supplied by the caller, called as documented.
            let r = unsafe { cb(arg, name.as_ptr(), e.fileid, e.ftype as u32) };
            if r != 0 {
                return r;
            }
            n = n.saturating_add(1);
        }
        n
    })
}

#[cfg(test)]
mod tests {
    //! Keep include/dafs.h and the exports in sync (names and version), and check the C
    //! tests call every declared function.
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn exported() -> BTreeSet<String> {
        let src =
            std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
                .unwrap();
        let mut names = BTreeSet::new();
        let mut no_mangle = false;
        for line in src.lines() {
            let l = line.trim();
            if l == "#[no_mangle]" {
                no_mangle = true;
                continue;
            }
            if let Some(i) = l.find("extern \"C\" fn dafs_") {
                assert!(l.starts_with("pub "), "exported function is not pub: {l}");
                assert!(no_mangle, "extern \"C\" fn without #[no_mangle]: {l}");
                let rest = &l[i + "extern \"C\" fn ".len()..];
                let name: String =
                    rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                names.insert(name);
            }
            no_mangle = false;
        }
        names
    }

    /// Every `DAFS_API <type> dafs_xxx(` declaration of the header (declarations may
    /// span lines: the name is the first `dafs_` identifier followed by `(`).
    fn declared() -> BTreeSet<String> {
        let h = std::fs::read_to_string(root().join("include/dafs.h")).unwrap();
        let mut names = BTreeSet::new();
        // Declarations start a line with `DAFS_API ` (the #define lines do not).
        for (i, _) in h.match_indices("\nDAFS_API ") {
            let decl = &h[i + "\nDAFS_API ".len()..];
            let decl = &decl[..decl.find(';').expect("declaration ends with ;")];
            let open = decl.find('(').expect("function declaration");
            let head = &decl[..open];
            let name: String = head
                .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap()
                .to_string();
            assert!(name.starts_with("dafs_"), "declaration without a dafs_ name: {decl}");
            names.insert(name);
        }
        names
    }

    #[test]
    fn header_matches_exports() {
        let e = exported();
        let d = declared();
        assert!(e.len() >= 30, "found only {} exports", e.len());
        let missing_in_header: Vec<_> = e.difference(&d).collect();
        let missing_in_lib: Vec<_> = d.difference(&e).collect();
        assert!(
            missing_in_header.is_empty(),
            "exported but not declared in include/dafs.h: {missing_in_header:?}"
        );
        assert!(
            missing_in_lib.is_empty(),
            "declared in include/dafs.h but not exported: {missing_in_lib:?}"
        );
    }

    #[test]
    fn c_tests_call_every_function() {
        let t = std::fs::read_to_string(root().join("tests/c/test_capi.c")).unwrap();
        let uncalled: Vec<_> =
            declared().into_iter().filter(|n| !t.contains(&format!("{n}("))).collect();
        assert!(uncalled.is_empty(), "tests/c/test_capi.c never calls: {uncalled:?}");
    }

    #[test]
    fn header_version_matches_crate() {
        let h = std::fs::read_to_string(root().join("include/dafs.h")).unwrap();
        let v = env!("CARGO_PKG_VERSION");
        assert!(
            h.contains(&format!("#define DAFS_VERSION \"{v}\"")),
            "DAFS_VERSION in include/dafs.h is not {v}"
        );
        let mut parts = v.split('.');
        for (m, p) in ["MAJOR", "MINOR", "PATCH"].iter().zip(&mut parts) {
            assert!(
                h.contains(&format!("#define DAFS_VERSION_{m} {p}\n")),
                "DAFS_VERSION_{m} is not {p}"
            );
        }
        assert!(
            h.contains("#define DAFS_API_VERSION 1\n"),
            "DAFS_API_VERSION changed: update the soname in build.rs"
        );
        let pc =
            std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("dafs.pc.in"))
                .unwrap();
        assert!(pc.contains("@VERSION@"), "dafs.pc.in takes its version from the build");
    }

    #[test]
    fn rename_flags_match_the_protocol_and_the_header() {
        use super::{DAFS_RENAME_EXCHANGE, DAFS_RENAME_NOREPLACE};
        use dafs_proto::rename_flags;
        assert_eq!(DAFS_RENAME_NOREPLACE, rename_flags::NOREPLACE);
        assert_eq!(DAFS_RENAME_EXCHANGE, rename_flags::EXCHANGE);
        let h = std::fs::read_to_string(root().join("include/dafs.h")).unwrap();
        for (name, v) in [("NOREPLACE", DAFS_RENAME_NOREPLACE), ("EXCHANGE", DAFS_RENAME_EXCHANGE)]
        {
            assert!(
                h.contains(&format!("#define DAFS_RENAME_{name} {v}u")),
                "DAFS_RENAME_{name} in include/dafs.h is not {v}u"
            );
        }
    }

    #[test]
    fn struct_layouts_match_the_header() {
        // The same sizes are asserted on the C side (tests/c/test_capi.c).
        use std::mem::size_of;
        assert_eq!(size_of::<super::dafs_options_t>(), 72);
        assert_eq!(size_of::<super::dafs_attr_t>(), 88);
        assert_eq!(size_of::<super::dafs_completion_t>(), 24);
        assert_eq!(size_of::<super::dafs_stats_t>(), 208);
        assert_eq!(size_of::<super::dafs_file_seg_t>(), 16);
        assert_eq!(size_of::<super::dafs_mem_seg_t>(), 24);
        assert_eq!(size_of::<super::dafs_batch_io_t>(), 48);
    }

    #[test]
    fn strerror_and_version() {
        let s = unsafe { std::ffi::CStr::from_ptr(super::dafs_strerror(-libc::ENOENT)) };
        assert_eq!(s.to_str().unwrap(), "No such file or directory");
        let s = unsafe { std::ffi::CStr::from_ptr(super::dafs_strerror(100000)) };
        assert_eq!(s.to_str().unwrap(), "unknown error");
        let v = unsafe { std::ffi::CStr::from_ptr(super::dafs_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn null_pointers_are_refused() {
        use super::*;
        unsafe {
            assert_eq!(
                dafs_connect(std::ptr::null(), std::ptr::null(), std::ptr::null_mut()),
                -libc::EINVAL
            );
            let mut c: *mut dafs_client_t = std::ptr::dangling_mut();
            assert_eq!(dafs_connect(std::ptr::null(), std::ptr::null(), &mut c), -libc::EINVAL);
            assert!(c.is_null());
            assert_eq!(
                dafs_pread(std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), 1, 0),
                -(libc::EINVAL as isize)
            );
            assert_eq!(dafs_disconnect(std::ptr::null_mut()), 0);
            assert_eq!(dafs_inline_threshold(std::ptr::null()), 0);
            assert_eq!(
                dafs_cg_poll(std::ptr::null_mut(), 1, std::ptr::null_mut(), 1),
                -libc::EINVAL
            );
        }
        assert!(open_options(DAFS_O_ACCMODE, 0).is_err());
        assert!(open_options(0x4000_0000, 0).is_err());
        assert!(
            open_options(DAFS_O_RDWR | DAFS_O_CREAT | DAFS_O_EXCL | DAFS_O_TRUNC, 0o600).is_ok()
        );
        assert!(open_options(DAFS_O_WRONLY | DAFS_O_APPEND, 0).is_ok());
        unsafe {
            assert_eq!(
                dafs_batch_submit(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    1,
                    std::ptr::null(),
                    0,
                    0,
                    0
                ),
                -libc::EINVAL
            );
            assert_eq!(
                dafs_append(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    0,
                    std::ptr::null_mut()
                ),
                -(libc::EINVAL as isize)
            );
        }
        assert_eq!(dafs_batch_max(std::ptr::null()), 0);
        assert_eq!(check_cg(0).err(), Some(libc::EINVAL));
    }
}
