//! stdio: `FILE` streams on dafs descriptors (glibc's own streams do their I/O with
//! internal system calls no interposer sees, so they are cookie streams here), and the
//! standard streams while descriptor 0, 1 or 2 is a dafs descriptor.

use std::ffi::{c_char, c_int, c_void, CStr};

use super::args::{classify, dafs_fd, Mode, P};
use super::data::{lseek64, read, write};
use super::open::{close, do_open};
use crate::real::{errno, set_errno, Entered};
use crate::state::{self, config, is_dafs_fd, with};

#[repr(C)]
struct CookieIo {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> isize>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize) -> isize>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, funcs: CookieIo) -> *mut libc::FILE;
}

// The cookie is the dafs descriptor; the callbacks go through the interposed
// functions, so a FILE on a dafs file shares the descriptor's offset like any FILE.
unsafe extern "C" fn ck_read(c: *mut c_void, buf: *mut c_char, n: usize) -> isize {
    unsafe { read(c as usize as c_int, buf.cast(), n) }
}
unsafe extern "C" fn ck_write(c: *mut c_void, buf: *const c_char, n: usize) -> isize {
    let mut done = 0;
    while done < n {
        let w = unsafe { write(c as usize as c_int, buf.add(done).cast(), n - done) };
        if w <= 0 {
            // fopencookie: "0 on error" (errno is set).
            return done as isize;
        }
        done += w as usize;
    }
    done as isize
}
unsafe extern "C" fn ck_seek(c: *mut c_void, off: *mut i64, whence: c_int) -> c_int {
    let r = unsafe { lseek64(c as usize as c_int, *off, whence) };
    if r < 0 {
        return -1;
    }
    // SAFETY: `off` is glibc's in/out offset of the seek callback (read above).
    unsafe { *off = r };
    0
}
unsafe extern "C" fn ck_close(c: *mut c_void) -> c_int {
    unsafe { close(c as usize as c_int) }
}

/// glibc's `struct _IO_FILE` keeps the descriptor at this offset on LP64 targets
/// (`int _flags`, padding, 12 pointers). A cookie stream has -2 there; putting the
/// dafs descriptor in its place makes `fileno()` (and so `fstat(fileno(f))`, which
/// e.g. the linker does) work. Verified against a real FILE before the first use.
const FILENO_OFFSET: usize = 112;
/// What glibc keeps as the descriptor of a cookie stream (it has none).
const COOKIE_FILENO: c_int = -2;
/// fopen creates files readable and writable by everyone, before the umask (POSIX).
const FOPEN_CREATE_MODE: Mode = 0o666;
/// Descriptors 0, 1 and 2: the standard streams.
const STD_FDS: c_int = 3;

fn fileno_offset_ok() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        // SAFETY: static strings.
        let fp = unsafe {
            real!(fopen: fn(*const c_char, *const c_char) -> *mut libc::FILE)(
                c"/dev/null".as_ptr(),
                c"r".as_ptr(),
            )
        };
        if fp.is_null() {
            return false;
        }
        // SAFETY: a FILE glibc just returned; reading an int inside the struct.
        let ok = unsafe {
            *((fp as *const u8).add(FILENO_OFFSET) as *const c_int)
                == real!(fileno: fn(*mut libc::FILE) -> c_int)(fp)
        };
        // SAFETY: the FILE opened above.
        unsafe { real!(fclose: fn(*mut libc::FILE) -> c_int)(fp) };
        ok
    })
}

/// A stdio stream on dafs descriptor `fd` (closing the stream closes `fd`).
unsafe fn cookie_stream(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    let io = CookieIo {
        read: Some(ck_read),
        write: Some(ck_write),
        seek: Some(ck_seek),
        close: Some(ck_close),
    };
    // SAFETY: the callbacks match fopencookie's prototypes; the cookie is a plain
    // number, never dereferenced; `mode` is the caller's string.
    let fp = unsafe { fopencookie(fd as usize as *mut c_void, mode, io) };
    set_fileno(fp, fd);
    fp
}

fn set_fileno(fp: *mut libc::FILE, fd: c_int) {
    if !fp.is_null() && fileno_offset_ok() {
        // SAFETY: fp is a cookie FILE; FILENO_OFFSET was checked against glibc.
        unsafe {
            let p = (fp as *mut u8).add(FILENO_OFFSET) as *mut c_int;
            if *p == COOKIE_FILENO {
                *p = fd;
            }
        }
    }
}

/// fopen mode string -> open flags.
fn mode_flags(mode: &[u8]) -> Option<c_int> {
    let plus = mode.contains(&b'+');
    let mut f = match mode.first()? {
        b'r' if plus => libc::O_RDWR,
        b'r' => libc::O_RDONLY,
        b'w' if plus => libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC,
        b'w' => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        b'a' if plus => libc::O_RDWR | libc::O_CREAT | libc::O_APPEND,
        b'a' => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
        _ => return None,
    };
    let opts = mode.split(|&b| b == b',').next().unwrap_or(mode);
    if opts.contains(&b'x') {
        f |= libc::O_EXCL;
    }
    if opts.contains(&b'e') {
        f |= libc::O_CLOEXEC;
    }
    Some(f)
}

/// fopen `path`: a dafs path is served here; any other path goes to `next` (as given, or
/// rewritten to an absolute path).
unsafe fn fopen_path(
    path: *const c_char,
    mode: *const c_char,
    next: impl FnOnce(*const c_char) -> *mut libc::FILE,
) -> *mut libc::FILE {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => {
            let Some(flags) = (!mode.is_null())
                .then(|| mode_flags(unsafe { CStr::from_ptr(mode) }.to_bytes()))
                .flatten()
            else {
                set_errno(libc::EINVAL);
                return std::ptr::null_mut();
            };
            match do_open(&t, flags, FOPEN_CREATE_MODE) {
                Ok(fd) => {
                    let fp = unsafe { cookie_stream(fd, mode) };
                    if fp.is_null() {
                        let e = errno();
                        let _ = with(|st| st.drop_fd(fd));
                        state::real_close(fd);
                        set_errno(e);
                    }
                    fp
                }
                Err(e) => {
                    set_errno(e);
                    std::ptr::null_mut()
                }
            }
        }
        P::Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
        P::Local(p, _k) => next(p),
    }
}

interpose! {
    fn fopen | fopen64 (path: *const c_char, mode: *const c_char) -> *mut libc::FILE where next {
        unsafe { fopen_path(path, mode, |p| next(p, mode)) }
    }
}
#[no_mangle]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut libc::FILE {
    if let Some(_g) = dafs_fd(fd) {
        return unsafe { cookie_stream(fd, mode) };
    }
    real!(fdopen: fn(c_int, *const c_char) -> *mut libc::FILE)(fd, mode)
}
interpose! {
    /// freopen cannot turn an existing FILE into a dafs stream (glibc's FILE does its I/O
    /// with internal system calls no interposer sees): refused with EOPNOTSUPP for a dafs
    /// path, and the stream is left open and unchanged.
    fn freopen | freopen64 => freopen (
        path: *const c_char,
        mode: *const c_char,
        fp: *mut libc::FILE,
    ) -> *mut libc::FILE
    where next
    {
        match unsafe { classify(libc::AT_FDCWD, path) } {
            P::Dafs(_, _g) => {
                set_errno(libc::EOPNOTSUPP);
                std::ptr::null_mut()
            }
            P::Err(e) => {
                set_errno(e);
                std::ptr::null_mut()
            }
            P::Local(p, _k) => next(p, mode, fp),
        }
    }
}

extern "C" {
    static mut stdin: *mut libc::FILE;
    static mut stdout: *mut libc::FILE;
    static mut stderr: *mut libc::FILE;
}

unsafe extern "C" fn ck_keep(_c: *mut c_void) -> c_int {
    0
}

/// Standard streams replaced while descriptor 0, 1 or 2 is a dafs descriptor: the
/// original FILE (to put back) per descriptor. Only touched with the state lock held.
struct StdSwap([Option<usize>; STD_FDS as usize]);
static STD_SWAP: std::sync::Mutex<StdSwap> =
    std::sync::Mutex::new(StdSwap([None; STD_FDS as usize]));

/// Keep `stdin`/`stdout`/`stderr` usable when descriptor 0, 1 or 2 is (or stops being)
/// a dafs descriptor — after an exec that handed one over (`prog < /dafs/in` in a
/// preloaded shell), or a `dup2(dafsfd, 1)` (a shell's `echo x >> /dafs/f`). glibc's
/// standard streams do their I/O with internal system calls no interposer sees, so
/// while the descriptor is a dafs one the stream is a cookie stream on it (which does
/// not own the descriptor), and the original stream is put back afterwards.
fn sync_std_streams() {
    let mut sw = STD_SWAP.lock().unwrap_or_else(|e| e.into_inner());
    for fd in 0..STD_FDS {
        let dafs = is_dafs_fd(fd);
        // SAFETY: the standard stream variables of the program (copy-relocated
        // globals, so the program sees the change); streams we created are freed
        // only here.
        unsafe {
            let slot: *mut *mut libc::FILE = match fd {
                0 => &raw mut stdin,
                1 => &raw mut stdout,
                _ => &raw mut stderr,
            };
            match (dafs, sw.0[fd as usize]) {
                (true, None) => {
                    let flags = with(|st| st.ofd_id(fd).map(|id| st.ofds[&id].flags).ok());
                    let Some(flags) = flags else { continue };
                    let mode: &CStr = match fd {
                        0 => c"r",
                        _ if flags & libc::O_APPEND != 0 => c"a",
                        _ => c"w",
                    };
                    let io = CookieIo {
                        read: Some(ck_read),
                        write: Some(ck_write),
                        seek: None,
                        close: Some(ck_keep),
                    };
                    let fp = fopencookie(fd as usize as *mut c_void, mode.as_ptr(), io);
                    if fp.is_null() {
                        continue;
                    }
                    set_fileno(fp, fd);
                    if fd == libc::STDERR_FILENO {
                        libc::setvbuf(fp, std::ptr::null_mut(), libc::_IONBF, 0);
                    }
                    sw.0[fd as usize] = Some(*slot as usize);
                    *slot = fp;
                }
                (false, Some(orig)) => {
                    let ours = *slot;
                    *slot = orig as *mut libc::FILE;
                    sw.0[fd as usize] = None;
                    // Pending output goes to the dafs file it was written for... which
                    // is already gone from this descriptor: glibc flushed it at fflush
                    // time in every program we know (shells flush before restoring).
                    real!(fclose: fn(*mut libc::FILE) -> c_int)(ours);
                }
                _ => {}
            }
        }
    }
}

pub(super) fn adopt_std_streams() {
    if config().mounts.is_empty() || !(0..STD_FDS).any(is_dafs_fd) {
        return;
    }
    if let Some(_g) = Entered::enter() {
        sync_std_streams();
    }
}

/// After a descriptor change that may involve 0, 1 or 2.
pub(super) fn std_changed(fd: c_int) {
    if (0..STD_FDS).contains(&fd) {
        sync_std_streams();
    }
}
