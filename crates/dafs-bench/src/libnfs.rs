//! The NFS baseline's client for the application benchmarks (merge, PostMark): libnfs
//! (the library the peer's nfsbench uses), loaded at run time with dlopen so that
//! building dafs needs no libnfs and a machine without it simply reports NFS as
//! unavailable. Its calls are blocking; one NFS context per thread (a context is not
//! thread-safe): the merge runs them in its read-ahead and write-behind threads, exactly
//! as local files run pread/pwrite there.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Arc;

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
    mkdir: unsafe extern "C" fn(*mut Ctx, *const c_char) -> c_int,
    rmdir: unsafe extern "C" fn(*mut Ctx, *const c_char) -> c_int,
    lseek: unsafe extern "C" fn(*mut Ctx, *mut Fh, i64, c_int, *mut u64) -> c_int,
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
            mkdir: sym(lib, "nfs_mkdir")?,
            rmdir: sym(lib, "nfs_rmdir")?,
            lseek: sym(lib, "nfs_lseek")?,
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
        Ok(self.keep(fh))
    }

    /// Open an existing `name` with `flags` (O_RDONLY, O_WRONLY, ...).
    pub fn open_existing(&mut self, name: &str, flags: c_int) -> Result<usize, String> {
        let p = Self::path(name)?;
        let mut fh = std::ptr::null_mut();
        // SAFETY: a live context, a NUL-terminated path and a place for the handle.
        let r = unsafe { (self.lib.api.open)(self.ctx, p.as_ptr(), flags, &mut fh) };
        if r != 0 || fh.is_null() {
            return Err(format!("open {name} over NFS: {}", self.error()));
        }
        Ok(self.keep(fh))
    }

    /// Create `name`, which must not exist (O_EXCL), for writing.
    pub fn create_new(&mut self, name: &str, mode: c_int) -> Result<usize, String> {
        let p = Self::path(name)?;
        let mut fh = std::ptr::null_mut();
        let flags = libc::O_WRONLY | libc::O_EXCL;
        // SAFETY: a live context, a NUL-terminated path and a place for the handle.
        let r = unsafe { (self.lib.api.create)(self.ctx, p.as_ptr(), flags, mode, &mut fh) };
        if r != 0 || fh.is_null() {
            return Err(format!("create {name} over NFS: {}", self.error()));
        }
        Ok(self.keep(fh))
    }

    /// A slot for `fh`: a closed one again, so that a long run of open/close (PostMark)
    /// keeps the table as small as the files open at once.
    fn keep(&mut self, fh: *mut Fh) -> usize {
        match self.files.iter().position(|f| f.is_null()) {
            Some(i) => {
                self.files[i] = fh;
                i
            }
            None => {
                self.files.push(fh);
                self.files.len() - 1
            }
        }
    }

    /// Close one file (for a written file: the COMMIT that makes its data stable).
    pub fn close(&mut self, file: usize) -> Result<(), String> {
        let fh = std::mem::replace(&mut self.files[file], std::ptr::null_mut());
        assert!(!fh.is_null(), "closing a closed NFS file");
        // SAFETY: a handle this context opened, closed once (its slot is now null).
        if unsafe { (self.lib.api.close)(self.ctx, fh) } != 0 {
            return Err(format!("close over NFS: {}", self.error()));
        }
        Ok(())
    }

    /// The file's size (an lseek to its end, which asks the server).
    pub fn size(&mut self, file: usize) -> Result<u64, String> {
        let mut end = 0u64;
        // SAFETY: a live context and handle, and a place for the offset.
        let r = unsafe {
            (self.lib.api.lseek)(self.ctx, self.files[file], 0, libc::SEEK_END, &mut end)
        };
        if r < 0 {
            return Err(format!("lseek over NFS: {}", self.error()));
        }
        Ok(end)
    }

    /// Read up to `buf.len()` bytes at `off`; 0 at the end of the file.
    pub fn read_some(&mut self, file: usize, buf: &mut [u8], off: u64) -> Result<usize, String> {
        // SAFETY: a live context and handle; buf is writable for its length.
        let r = unsafe {
            (self.lib.api.pread)(
                self.ctx,
                self.files[file],
                off,
                buf.len() as u64,
                buf.as_mut_ptr().cast(),
            )
        };
        if r < 0 {
            return Err(format!("nfs_pread at {off}: {}", self.error()));
        }
        Ok(r as usize)
    }

    /// Write up to `buf.len()` bytes at `off`; returns how many were written.
    pub fn write_some(&mut self, file: usize, buf: &[u8], off: u64) -> Result<usize, String> {
        // SAFETY: a live context and handle; buf is readable for its length.
        let r = unsafe {
            (self.lib.api.pwrite)(
                self.ctx,
                self.files[file],
                off,
                buf.len() as u64,
                buf.as_ptr().cast(),
            )
        };
        if r <= 0 {
            return Err(format!("nfs_pwrite at {off}: {}", self.error()));
        }
        Ok(r as usize)
    }

    /// Make directory `name`; with `exist_ok`, one that exists already is no error.
    pub fn mkdir(&mut self, name: &str, exist_ok: bool) -> Result<(), String> {
        let p = Self::path(name)?;
        // SAFETY: a live context and a NUL-terminated path.
        let r = unsafe { (self.lib.api.mkdir)(self.ctx, p.as_ptr()) };
        // libnfs's synchronous calls return -errno.
        if r != 0 && !(exist_ok && r == -libc::EEXIST) {
            return Err(format!("mkdir {name} over NFS: {}", self.error()));
        }
        Ok(())
    }

    pub fn rmdir(&mut self, name: &str) -> Result<(), String> {
        let p = Self::path(name)?;
        // SAFETY: a live context and a NUL-terminated path.
        if unsafe { (self.lib.api.rmdir)(self.ctx, p.as_ptr()) } != 0 {
            return Err(format!("rmdir {name} over NFS: {}", self.error()));
        }
        Ok(())
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
        for fh in std::mem::take(&mut self.files).into_iter().filter(|f| !f.is_null()) {
            // SAFETY: a handle this context opened, closed once.
            if unsafe { (self.lib.api.close)(self.ctx, fh) } != 0 && first_err.is_ok() {
                first_err = Err(format!("close over NFS: {}", self.error()));
            }
        }
        first_err
    }
}

impl Drop for NfsSession {
    fn drop(&mut self) {
        let _ = self.close_all();
        // SAFETY: the context this session created, destroyed once, its files closed.
        unsafe { (self.lib.api.destroy)(self.ctx) };
    }
}
