//! The NFS baseline's client for the merge: libnfs (the library the peer's nfsbench
//! uses), loaded at run time with dlopen so that building dafs needs no libnfs and a
//! machine without it simply reports NFS as unavailable. Its blocking calls
//! (nfs_pread/nfs_pwrite) run in the merge's read-ahead and write-behind threads, one
//! NFS context per thread (a context is not thread-safe), exactly as local files run
//! pread/pwrite there.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Arc;

use super::threaded::BlockIo;

/// The libnfs library names tried, newest ABI first (Debian 12 ships libnfs13).
const LIBNFS_NAMES: [&str; 3] = ["libnfs.so.13", "libnfs.so.14", "libnfs.so"];

#[repr(C)]
struct NfsUrl {
    server: *mut c_char,
    path: *mut c_char,
    file: *mut c_char,
}

type Ctx = c_void;
type Fh = c_void;

/// The libnfs 4.x synchronous entry points used here.
struct Api {
    init: unsafe extern "C" fn() -> *mut Ctx,
    destroy: unsafe extern "C" fn(*mut Ctx),
    parse_url_dir: unsafe extern "C" fn(*mut Ctx, *const c_char) -> *mut NfsUrl,
    destroy_url: unsafe extern "C" fn(*mut NfsUrl),
    mount: unsafe extern "C" fn(*mut Ctx, *const c_char, *const c_char) -> c_int,
    open: unsafe extern "C" fn(*mut Ctx, *const c_char, c_int, *mut *mut Fh) -> c_int,
    create: unsafe extern "C" fn(*mut Ctx, *const c_char, c_int, c_int, *mut *mut Fh) -> c_int,
    pread: unsafe extern "C" fn(*mut Ctx, *mut Fh, u64, u64, *mut c_void) -> c_int,
    pwrite: unsafe extern "C" fn(*mut Ctx, *mut Fh, u64, u64, *const c_void) -> c_int,
    close: unsafe extern "C" fn(*mut Ctx, *mut Fh) -> c_int,
    unlink: unsafe extern "C" fn(*mut Ctx, *const c_char) -> c_int,
    get_error: unsafe extern "C" fn(*mut Ctx) -> *mut c_char,
}

/// libnfs, loaded.
pub struct LibNfs {
    api: Api,
}

fn sym<T>(lib: *mut c_void, name: &str) -> Result<T, String> {
    let c = CString::new(name).expect("no NUL in symbol names");
    // SAFETY: dlsym on a handle dlopen returned, with a NUL-terminated name.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    if p.is_null() {
        return Err(format!("libnfs has no {name}"));
    }
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: T is one of Api's function pointer types, whose C prototype (libnfs.h
    // 4.x) the field declares; a function pointer has the size of a data pointer here.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

impl LibNfs {
    pub fn load() -> Result<Arc<LibNfs>, String> {
        let mut lib = std::ptr::null_mut();
        for n in LIBNFS_NAMES {
            let c = CString::new(n).unwrap();
            // SAFETY: dlopen with a NUL-terminated name; the handle is never closed (the
            // functions stay valid for the life of the process).
            lib = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            if !lib.is_null() {
                break;
            }
        }
        if lib.is_null() {
            return Err("libnfs not found (Debian: apt-get install libnfs13)".into());
        }
        let api = Api {
            init: sym(lib, "nfs_init_context")?,
            destroy: sym(lib, "nfs_destroy_context")?,
            parse_url_dir: sym(lib, "nfs_parse_url_dir")?,
            destroy_url: sym(lib, "nfs_destroy_url")?,
            mount: sym(lib, "nfs_mount")?,
            open: sym(lib, "nfs_open")?,
            create: sym(lib, "nfs_create")?,
            pread: sym(lib, "nfs_pread")?,
            pwrite: sym(lib, "nfs_pwrite")?,
            close: sym(lib, "nfs_close")?,
            unlink: sym(lib, "nfs_unlink")?,
            get_error: sym(lib, "nfs_get_error")?,
        };
        Ok(Arc::new(LibNfs { api }))
    }
}

/// One mounted NFS context with the files it opened.
pub struct NfsSession {
    lib: Arc<LibNfs>,
    ctx: *mut Ctx,
    files: Vec<*mut Fh>,
}

// SAFETY: a context and its file handles are used by one thread at a time (the session
// moves into the thread that uses it); libnfs keeps no thread-local state.
unsafe impl Send for NfsSession {}

impl NfsSession {
    /// Mount `url` (nfs://server/export?version=3&...).
    pub fn mount(lib: &Arc<LibNfs>, url: &str) -> Result<NfsSession, String> {
        let a = &lib.api;
        // SAFETY: plain constructor; null on failure.
        let ctx = unsafe { (a.init)() };
        if ctx.is_null() {
            return Err("nfs_init_context failed".into());
        }
        let s = NfsSession { lib: lib.clone(), ctx, files: Vec::new() };
        let curl = CString::new(url).map_err(|_| "NUL in the NFS URL".to_string())?;
        // SAFETY: a live context and a NUL-terminated URL; the result is freed below.
        let u = unsafe { (a.parse_url_dir)(ctx, curl.as_ptr()) };
        if u.is_null() {
            return Err(format!("{url}: {}", s.error()));
        }
        // SAFETY: u is a valid nfs_url from libnfs with NUL-terminated server and path.
        let r = unsafe { (a.mount)(ctx, (*u).server, (*u).path) };
        // SAFETY: freeing the URL libnfs allocated, once.
        unsafe { (a.destroy_url)(u) };
        if r != 0 {
            return Err(format!("mount {url}: {}", s.error()));
        }
        Ok(s)
    }

    fn error(&self) -> String {
        // SAFETY: a live context; the message is a NUL-terminated string it owns.
        let p = unsafe { (self.lib.api.get_error)(self.ctx) };
        if p.is_null() {
            return "unknown libnfs error".into();
        }
        // SAFETY: as above; copied before any other call on the context.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    fn path(name: &str) -> Result<CString, String> {
        CString::new(format!("/{name}")).map_err(|_| "NUL in a file name".to_string())
    }

    /// Open `name` (relative to the export root) for reading, or create/truncate it for
    /// writing; returns its index for read_at/write_at.
    pub fn open(&mut self, name: &str, write: bool) -> Result<usize, String> {
        let p = Self::path(name)?;
        let mut fh = std::ptr::null_mut();
        let a = &self.lib.api;
        // SAFETY: a live context, a NUL-terminated path and a place for the handle.
        let r = unsafe {
            if write {
                (a.create)(self.ctx, p.as_ptr(), libc::O_TRUNC | libc::O_RDWR, 0o644, &mut fh)
            } else {
                (a.open)(self.ctx, p.as_ptr(), libc::O_RDONLY, &mut fh)
            }
        };
        if r != 0 || fh.is_null() {
            return Err(format!("open {name} over NFS: {}", self.error()));
        }
        self.files.push(fh);
        Ok(self.files.len() - 1)
    }

    pub fn unlink(&mut self, name: &str) -> Result<(), String> {
        let p = Self::path(name)?;
        // SAFETY: a live context and a NUL-terminated path.
        if unsafe { (self.lib.api.unlink)(self.ctx, p.as_ptr()) } != 0 {
            return Err(format!("unlink {name} over NFS: {}", self.error()));
        }
        Ok(())
    }

    /// Close every file (for written files: the COMMIT that makes the data stable).
    pub fn close_all(&mut self) -> Result<(), String> {
        let mut first_err = Ok(());
        for fh in std::mem::take(&mut self.files) {
            // SAFETY: a handle this context opened, closed once.
            if unsafe { (self.lib.api.close)(self.ctx, fh) } != 0 && first_err.is_ok() {
                first_err = Err(format!("close over NFS: {}", self.error()));
            }
        }
        first_err
    }
}

impl BlockIo for NfsSession {
    fn read_at(&mut self, file: usize, buf: &mut [u8], off: u64) -> Result<(), String> {
        let mut done = 0usize;
        while done < buf.len() {
            let rest = &mut buf[done..];
            // SAFETY: a live context and handle; rest is writable for its length.
            let r = unsafe {
                (self.lib.api.pread)(
                    self.ctx,
                    self.files[file],
                    off + done as u64,
                    rest.len() as u64,
                    rest.as_mut_ptr().cast(),
                )
            };
            if r <= 0 {
                let why = if r == 0 { "end of file".to_string() } else { self.error() };
                return Err(format!("nfs_pread at {}: {why}", off + done as u64));
            }
            done += r as usize;
        }
        Ok(())
    }

    fn write_at(&mut self, file: usize, buf: &[u8], off: u64) -> Result<(), String> {
        let mut done = 0usize;
        while done < buf.len() {
            let rest = &buf[done..];
            // SAFETY: a live context and handle; rest is readable for its length.
            let r = unsafe {
                (self.lib.api.pwrite)(
                    self.ctx,
                    self.files[file],
                    off + done as u64,
                    rest.len() as u64,
                    rest.as_ptr().cast(),
                )
            };
            if r <= 0 {
                return Err(format!("nfs_pwrite at {}: {}", off + done as u64, self.error()));
            }
            done += r as usize;
        }
        Ok(())
    }
}

impl Drop for NfsSession {
    fn drop(&mut self) {
        let _ = self.close_all();
        // SAFETY: the context this session created, destroyed once, its files closed.
        unsafe { (self.lib.api.destroy)(self.ctx) };
    }
}
