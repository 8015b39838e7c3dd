//! Directory streams: `opendir`/`fdopendir`/`readdir`/`closedir` and friends, and
//! `scandir`.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::Ordering::Relaxed;

use super::args::{classify, dafs_fd, neg, P};
use super::open::do_open;
use crate::real::{ret, set_errno, Entered};
use crate::state::{self, with, DirStream, Target, DIRS_OPEN};

/// The longest name a `dirent`'s `d_name` holds (256 bytes with the terminating NUL).
const NAME_BYTES_MAX: usize = libc::NAME_MAX as usize;

fn new_stream(fd: c_int) -> Result<*mut libc::DIR, c_int> {
    with(|st| {
        let id = st.ofd_id(fd)?;
        if !st.ofds[&id].is_dir {
            return Err(libc::ENOTDIR);
        }
        let entries = st.list_dir(id)?;
        // SAFETY: plain integers and a byte array.
        let ent: libc::dirent64 = unsafe { std::mem::zeroed() };
        let p = Box::into_raw(Box::new(DirStream { fd, entries, pos: 0, ent }));
        st.dirs.insert(p as usize);
        DIRS_OPEN.fetch_add(1, Relaxed);
        Ok(p.cast())
    })
}

/// Run `f` on a dafs directory stream; None if `d` is not one of ours.
fn with_stream<T>(
    d: *mut libc::DIR,
    f: impl FnOnce(&mut state::State, &mut DirStream) -> T,
) -> Option<T> {
    if DIRS_OPEN.load(Relaxed) == 0 || d.is_null() {
        return None;
    }
    with(|st| {
        if !st.dirs.contains(&(d as usize)) {
            return None;
        }
        // SAFETY: a live DirStream we allocated (it is in `dirs`), used under the lock.
        let s = unsafe { &mut *(d as *mut DirStream) };
        Some(f(st, s))
    })
}

#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, _g) => {
            let r = do_open(&t, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC, 0).and_then(
                |fd| {
                    new_stream(fd).inspect_err(|_| {
                        let _ = with(|st| st.drop_fd(fd));
                        state::real_close(fd);
                    })
                },
            );
            r.unwrap_or_else(|e| {
                set_errno(e);
                std::ptr::null_mut()
            })
        }
        P::Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
        P::Local(p, _k) => real!(opendir: fn(*const c_char) -> *mut libc::DIR)(p),
    }
}
#[no_mangle]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut libc::DIR {
    if let Some(_g) = dafs_fd(fd) {
        return new_stream(fd).unwrap_or_else(|e| {
            set_errno(e);
            std::ptr::null_mut()
        });
    }
    real!(fdopendir: fn(c_int) -> *mut libc::DIR)(fd)
}

fn next_entry(d: *mut libc::DIR) -> Option<*mut libc::dirent64> {
    with_stream(d, |_, s| {
        let (name, ino, ty) = s.entries.get(s.pos)?.clone();
        s.pos += 1;
        let e = &mut s.ent;
        e.d_ino = ino;
        e.d_off = s.pos as i64;
        e.d_type = ty;
        let n = name.len().min(NAME_BYTES_MAX);
        for (dst, src) in e.d_name.iter_mut().zip(name[..n].iter()) {
            *dst = *src as c_char;
        }
        e.d_name[n] = 0;
        e.d_reclen = std::mem::size_of::<libc::dirent64>() as u16;
        Some(e as *mut libc::dirent64)
    })
    .map(|o| o.unwrap_or(std::ptr::null_mut()))
}

/// `struct dirent` and `struct dirent64` have the same layout on the supported targets:
/// `readdir` and `readdir64` differ only in the type they return.
macro_rules! readdir_as {
    ($name:ident -> $dirent:ty) => {
        interpose! {
            fn $name (d: *mut libc::DIR) -> *mut $dirent where next {
                if let Some(_g) = Entered::enter() {
                    if let Some(e) = next_entry(d) {
                        return e.cast();
                    }
                }
                next(d)
            }
        }
    };
}
readdir_as!(readdir -> libc::dirent);
readdir_as!(readdir64 -> libc::dirent64);
#[no_mangle]
pub unsafe extern "C" fn closedir(d: *mut libc::DIR) -> c_int {
    if let Some(_g) = Entered::enter() {
        let r = with_stream(d, |st, s| {
            let fd = s.fd;
            st.dirs.remove(&(d as usize));
            DIRS_OPEN.fetch_sub(1, Relaxed);
            // SAFETY: allocated by new_stream, removed from `dirs` above: freed once.
            drop(unsafe { Box::from_raw(d as *mut DirStream) });
            let r = st.drop_fd(fd);
            state::real_close(fd);
            r
        });
        if let Some(r) = r {
            return ret(r.map(|_| 0));
        }
    }
    real!(closedir: fn(*mut libc::DIR) -> c_int)(d)
}
#[no_mangle]
pub unsafe extern "C" fn dirfd(d: *mut libc::DIR) -> c_int {
    if let Some(_g) = Entered::enter() {
        if let Some(fd) = with_stream(d, |_, s| s.fd) {
            return fd;
        }
    }
    real!(dirfd: fn(*mut libc::DIR) -> c_int)(d)
}
#[no_mangle]
pub unsafe extern "C" fn rewinddir(d: *mut libc::DIR) {
    if let Some(_g) = Entered::enter() {
        let done = with_stream(d, |st, s| {
            if let Ok(id) = st.ofd_id(s.fd) {
                if let Ok(v) = st.list_dir(id) {
                    s.entries = v;
                }
            }
            s.pos = 0;
        });
        if done.is_some() {
            return;
        }
    }
    real!(rewinddir: fn(*mut libc::DIR) -> ())(d)
}
#[no_mangle]
pub unsafe extern "C" fn telldir(d: *mut libc::DIR) -> libc::c_long {
    if let Some(_g) = Entered::enter() {
        if let Some(p) = with_stream(d, |_, s| s.pos as libc::c_long) {
            return p;
        }
    }
    real!(telldir: fn(*mut libc::DIR) -> libc::c_long)(d)
}
#[no_mangle]
pub unsafe extern "C" fn seekdir(d: *mut libc::DIR, pos: libc::c_long) {
    if let Some(_g) = Entered::enter() {
        if with_stream(d, |_, s| s.pos = pos.max(0) as usize).is_some() {
            return;
        }
    }
    real!(seekdir: fn(*mut libc::DIR, libc::c_long) -> ())(d, pos)
}

type DirentFilter = Option<unsafe extern "C" fn(*const libc::dirent64) -> c_int>;
type DirentCompar = Option<
    unsafe extern "C" fn(*const *const libc::dirent64, *const *const libc::dirent64) -> c_int,
>;

/// scandir on a dafs directory (glibc's opens the directory with an internal call):
/// the same contract — malloc'd entries in a malloc'd array, filtered and sorted.
unsafe fn scandir_dafs(
    t: &Target,
    list: *mut *mut *mut libc::dirent64,
    filter: DirentFilter,
    compar: DirentCompar,
) -> c_int {
    let entries = match do_open(t, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC, 0) {
        Ok(fd) => {
            let r = with(|st| st.ofd_id(fd).and_then(|id| st.list_dir(id)));
            let _ = with(|st| st.drop_fd(fd));
            state::real_close(fd);
            match r {
                Ok(v) => v,
                Err(e) => return neg(e),
            }
        }
        Err(e) => return neg(e),
    };
    let mut out: Vec<*mut libc::dirent64> = Vec::new();
    let free_all = |v: &Vec<*mut libc::dirent64>| {
        for &p in v {
            // SAFETY: allocated with malloc below.
            unsafe { libc::free(p.cast()) };
        }
    };
    for (i, (name, ino, ty)) in entries.iter().enumerate() {
        // SAFETY: a zeroed, malloc'd dirent64 the caller frees with free().
        let e = unsafe { libc::calloc(1, std::mem::size_of::<libc::dirent64>()) }
            as *mut libc::dirent64;
        if e.is_null() {
            free_all(&out);
            return neg(libc::ENOMEM);
        }
        // SAFETY: `e` is non-null and points to a zeroed dirent64 we just allocated.
        let d = unsafe { &mut *e };
        d.d_ino = *ino;
        d.d_off = i as i64 + 1;
        d.d_type = *ty;
        d.d_reclen = std::mem::size_of::<libc::dirent64>() as u16;
        for (dst, src) in d.d_name.iter_mut().zip(name.iter().take(NAME_BYTES_MAX)) {
            *dst = *src as c_char;
        }
        if let Some(f) = filter {
            // SAFETY: the caller's filter on a valid entry.
            if unsafe { f(e) } == 0 {
                // SAFETY: allocated above with calloc, not handed out: freed once.
                unsafe { libc::free(e.cast()) };
                continue;
            }
        }
        out.push(e);
    }
    if let Some(c) = compar {
        // SAFETY: qsort over our array with the caller's comparison of entry pointers.
        unsafe {
            libc::qsort(
                out.as_mut_ptr().cast(),
                out.len(),
                std::mem::size_of::<*mut libc::dirent64>(),
                Some(std::mem::transmute::<
                    unsafe extern "C" fn(
                        *const *const libc::dirent64,
                        *const *const libc::dirent64,
                    ) -> c_int,
                    unsafe extern "C" fn(*const c_void, *const c_void) -> c_int,
                >(c)),
            )
        };
    }
    // SAFETY: a malloc'd array the caller frees with free().
    let arr = unsafe { libc::malloc(out.len().max(1) * std::mem::size_of::<*mut libc::dirent64>()) }
        as *mut *mut libc::dirent64;
    if arr.is_null() {
        free_all(&out);
        return neg(libc::ENOMEM);
    }
    // SAFETY: `arr` has room for out.len() pointers (checked non-null above); `list` is
    // the caller's out-pointer.
    unsafe {
        std::ptr::copy_nonoverlapping(out.as_ptr(), arr, out.len());
        *list = arr;
    }
    out.len() as c_int
}

// struct dirent and dirent64 have one layout on the supported targets.
interpose! {
    fn scandir | scandir64 (
        dir: *const c_char,
        list: *mut *mut *mut libc::dirent64,
        filter: DirentFilter,
        compar: DirentCompar,
    ) -> c_int
    where next
    {
        match unsafe { classify(libc::AT_FDCWD, dir) } {
            P::Dafs(t, _g) => unsafe { scandir_dafs(&t, list, filter, compar) },
            P::Err(e) => neg(e),
            P::Local(p, _k) => next(p, list, filter, compar),
        }
    }
}
