//! Starting programs: the `exec` family and `posix_spawn` hand the dafs descriptors and
//! the virtual working directory to the new program through its environment; a
//! program stored under a prefix is staged in memory first.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use super::args::{classify, neg, on_path, P};
use crate::real::{errno, Entered};
use crate::state::{self, config, err, with, Target};

extern "C" {
    static mut environ: *const *const c_char;
}

/// The environment for a new program: `envp` without stale DAFS_PRELOAD_* entries,
/// plus the dafs descriptors it inherits (DAFS_PRELOAD_FDS) and the virtual working
/// directory (DAFS_PRELOAD_CWD).
unsafe fn exec_env(
    envp: *const *const c_char,
    fa: usize,
) -> Option<(Vec<CString>, Vec<*const c_char>)> {
    let _g = Entered::enter()?;
    if config().mounts.is_empty() {
        return None;
    }
    let actions = fa_actions(fa);
    let fds = with(|st| st.exec_fds(&actions));
    let cwd = state::CWD.with(|w| w.vcwd.clone());
    let mut own: Vec<CString> = Vec::new();
    let mut ptrs: Vec<*const c_char> = Vec::new();
    let mut p = envp;
    // SAFETY: `envp` is the caller's NULL-terminated array of NUL-terminated strings
    // (execve's contract): `p` stays within it.
    unsafe {
        while !p.is_null() && !(*p).is_null() {
            let e = CStr::from_ptr(*p).to_bytes();
            if !e.starts_with(b"DAFS_PRELOAD_FDS=") && !e.starts_with(b"DAFS_PRELOAD_CWD=") {
                ptrs.push(*p);
            }
            p = p.add(1);
        }
    }
    if let Some(f) = fds {
        own.push(CString::new(format!("{}={f}", state::FDS_ENV)).ok()?);
    }
    if let Some(c) = cwd {
        own.push(CString::new(format!("{}={c}", state::CWD_ENV)).ok()?);
    }
    ptrs.extend(own.iter().map(|c| c.as_ptr()));
    ptrs.push(std::ptr::null());
    Some((own, ptrs))
}

/// The execute bits (owner, group, other): a file with none of them cannot be exec'd.
const EXEC_BITS: u32 = 0o111;

/// A program stored under a prefix cannot be exec'd by the kernel: copy it into an
/// anonymous memory file and exec that (argv[0] is kept). The memory file stays open
/// (not close-on-exec) so that a `#!` script's interpreter can read it via /dev/fd.
fn stage_program(t: &Target) -> Result<CString, c_int> {
    let data = on_path(t, |c, p| {
        let a = c.stat(p)?;
        if !a.is_dir() && a.mode & EXEC_BITS == 0 {
            return err(libc::EACCES);
        }
        if a.is_dir() {
            return err(libc::EACCES);
        }
        let f = c.open(p, dafs_client::OpenOptions::read())?;
        let mut v = vec![0u8; a.size as usize];
        let n = c.pread(&f, &mut v, 0)?;
        v.truncate(n);
        let _ = c.close(f);
        Ok(v)
    })?;
    // SAFETY: a static name; plain syscalls on a descriptor we own.
    let fd = unsafe { libc::memfd_create(c"dafs-exec".as_ptr(), 0) };
    if fd < 0 {
        return Err(errno());
    }
    let mut off = 0;
    while off < data.len() {
        // SAFETY: writing our buffer to our memfd.
        let w = unsafe {
            real!(write: fn(c_int, *const c_void, usize) -> isize)(
                fd,
                data[off..].as_ptr().cast(),
                data.len() - off,
            )
        };
        if w <= 0 {
            let e = errno();
            state::real_close(fd);
            return Err(e);
        }
        off += w as usize;
    }
    CString::new(format!("/proc/self/fd/{fd}")).map_err(|_| libc::EINVAL)
}

#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let env = unsafe { exec_env(envp, 0) };
    let envp2 = env.as_ref().map(|(_, p)| p.as_ptr()).unwrap_or(envp);
    match unsafe { classify(libc::AT_FDCWD, path) } {
        P::Dafs(t, g) => {
            let staged = stage_program(&t);
            drop(g);
            match staged {
                Ok(p) => {
                    state::end_sessions();
                    real!(execve: fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int)(
                        p.as_ptr(),
                        argv,
                        envp2,
                    )
                }
                Err(e) => neg(e),
            }
        }
        P::Err(e) => neg(e),
        P::Local(p, _k) => {
            state::end_sessions();
            real!(execve: fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int)(
                p, argv, envp2,
            )
        }
    }
}
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    unsafe { execve(path, argv, environ) }
}
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // A name with a slash is a path (possibly a dafs one); PATH search is glibc's
    // (directories under a prefix in PATH are not searched).
    if !file.is_null() && unsafe { CStr::from_ptr(file) }.to_bytes().contains(&b'/') {
        return unsafe { execve(file, argv, envp) };
    }
    let env = unsafe { exec_env(envp, 0) };
    let envp2 = env.as_ref().map(|(_, p)| p.as_ptr()).unwrap_or(envp);
    state::end_sessions();
    real!(execvpe: fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int)(
        file, argv, envp2,
    )
}
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    unsafe { execvpe(file, argv, environ) }
}
/// dup2/close file actions recorded per `posix_spawn_file_actions_t` (by address), so
/// that posix_spawn can describe the dafs descriptors the new program will have.
/// (actions object address, [(from, to)]); `from == CLOSE_ACTION`: close(to).
type Recorded = Vec<(usize, Vec<(c_int, c_int)>)>;
static FILE_ACTIONS: std::sync::Mutex<Recorded> = std::sync::Mutex::new(Vec::new());

fn fa_actions(fa: usize) -> Vec<(c_int, c_int)> {
    if fa == 0 {
        return Vec::new();
    }
    let g = FILE_ACTIONS.lock().unwrap_or_else(|e| e.into_inner());
    g.iter().find(|(a, _)| *a == fa).map(|(_, v)| v.clone()).unwrap_or_default()
}

fn fa_record(fa: usize, act: Option<(c_int, c_int)>) {
    let mut g = FILE_ACTIONS.lock().unwrap_or_else(|e| e.into_inner());
    match act {
        None => g.retain(|(a, _)| *a != fa),
        Some(x) => match g.iter_mut().find(|(a, _)| *a == fa) {
            Some((_, v)) => v.push(x),
            None => g.push((fa, vec![x])),
        },
    }
}

#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_init(
    fa: *mut libc::posix_spawn_file_actions_t,
) -> c_int {
    fa_record(fa as usize, None);
    real!(posix_spawn_file_actions_init: fn(*mut libc::posix_spawn_file_actions_t) -> c_int)(fa)
}
#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_destroy(
    fa: *mut libc::posix_spawn_file_actions_t,
) -> c_int {
    fa_record(fa as usize, None);
    real!(posix_spawn_file_actions_destroy: fn(*mut libc::posix_spawn_file_actions_t) -> c_int)(fa)
}
#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_adddup2(
    fa: *mut libc::posix_spawn_file_actions_t,
    fd: c_int,
    newfd: c_int,
) -> c_int {
    let r = real!(posix_spawn_file_actions_adddup2: fn(*mut libc::posix_spawn_file_actions_t, c_int, c_int) -> c_int)(
        fa, fd, newfd,
    );
    if r == 0 {
        fa_record(fa as usize, Some((fd, newfd)));
    }
    r
}
#[no_mangle]
pub unsafe extern "C" fn posix_spawn_file_actions_addclose(
    fa: *mut libc::posix_spawn_file_actions_t,
    fd: c_int,
) -> c_int {
    let r = real!(posix_spawn_file_actions_addclose: fn(*mut libc::posix_spawn_file_actions_t, c_int) -> c_int)(
        fa, fd,
    );
    if r == 0 {
        fa_record(fa as usize, Some((state::CLOSE_ACTION, fd)));
    }
    r
}

interpose! {
    /// For posix_spawnp, `path` is a file name glibc searches in PATH.
    fn posix_spawn | posix_spawnp (
        pid: *mut libc::pid_t,
        path: *const c_char,
        fa: *const libc::posix_spawn_file_actions_t,
        at: *const libc::posix_spawnattr_t,
        argv: *const *mut c_char,
        envp: *const *mut c_char,
    ) -> c_int
    where next
    {
        let env = unsafe { exec_env(envp.cast(), fa as usize) };
        let envp2 = env.as_ref().map(|(_, p)| p.as_ptr().cast()).unwrap_or(envp);
        next(pid, path, fa, at, argv, envp2)
    }
}
