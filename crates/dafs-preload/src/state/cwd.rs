//! The working directory: virtual (under a prefix, set by chdir/fchdir) or the real one.

use super::handover::CWD_ENV;
use super::lock::Locked;

/// The working directory, under its own lock: resolving a relative local path never
/// waits for dafs I/O another thread is doing under the state lock.
pub struct Cwd {
    /// Virtual working directory (set by chdir/fchdir into a prefix).
    pub vcwd: Option<String>,
    /// Cached real working directory (for relative paths when vcwd is None).
    real: Option<String>,
}
pub static CWD: Locked<Cwd> = Locked::new(Cwd { vcwd: None, real: None });

impl Cwd {
    /// The real working directory, asked of glibc once after each change.
    pub(super) fn real(&mut self) -> Option<&str> {
        if self.real.is_none() {
            // PATH_MAX counts the terminating NUL; one more byte costs nothing.
            let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
            // SAFETY: a buffer of buf.len() bytes.
            let p = unsafe {
                real!(getcwd: fn(*mut libc::c_char, usize) -> *mut libc::c_char)(
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if !p.is_null() {
                let n = buf.iter().position(|&b| b == 0).unwrap_or(0);
                self.real = String::from_utf8(buf[..n].to_vec()).ok();
            }
        }
        self.real.as_deref()
    }

    /// Set (Some) or clear the virtual working directory; the environment carries it to
    /// child programs, however they are started.
    pub fn set(&mut self, v: Option<String>) {
        match &v {
            Some(p) => std::env::set_var(CWD_ENV, p),
            None if self.vcwd.is_some() || std::env::var_os(CWD_ENV).is_some() => {
                std::env::remove_var(CWD_ENV)
            }
            None => {}
        }
        self.vcwd = v;
        self.real = None;
    }
}
