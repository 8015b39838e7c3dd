//! What a path argument names: a dafs target, or a local path (possibly rewritten).

use std::ffi::{c_int, CString};

use super::cwd::CWD;
use super::fdmap::is_dafs_fd;
use super::{config, with};
use crate::paths;

/// A path under a prefix.
pub struct Target {
    /// Index of the mount (in `config().mounts`).
    pub mount: usize,
    /// Path inside the export.
    pub rel: String,
    /// Absolute, normalised virtual path (`/dafs/...`).
    pub vpath: String,
}

/// What a path argument resolves to.
pub enum Res {
    Dafs(Target),
    /// Not a dafs path. `Some(abs)`: relative to a virtual (dafs) working directory but
    /// outside the prefix — call libc with this absolute path instead.
    Local(Option<CString>),
}

/// Resolve a path argument relative to `dirfd` (AT_FDCWD, a dafs directory, or a local
/// directory descriptor). Absolute paths outside every prefix take no lock at all.
pub fn resolve(dirfd: c_int, path: &[u8]) -> Result<Res, c_int> {
    let mounts = &config().mounts;
    if mounts.is_empty() || path.is_empty() {
        return Ok(Res::Local(None));
    }
    let Ok(p) = std::str::from_utf8(path) else { return Ok(Res::Local(None)) };
    let abs = if p.starts_with('/') {
        if !paths::maybe_mounted(mounts, path) {
            return Ok(Res::Local(None));
        }
        paths::normalize(p)
    } else if dirfd == libc::AT_FDCWD {
        let r = CWD.with(|w| match &w.vcwd {
            Some(v) => Some((paths::absolute(v, p), true)),
            None => w.real().map(|c| (paths::absolute(c, p), false)),
        });
        match r {
            Some((abs, true)) if paths::split_mount(mounts, &abs).is_none() => {
                return Ok(Res::Local(CString::new(abs).ok()))
            }
            Some((abs, _)) => abs,
            None => return Ok(Res::Local(None)),
        }
    } else if is_dafs_fd(dirfd) {
        let (is_dir, vpath) = with(|st| {
            st.ofd_id(dirfd).map(|id| (st.ofds[&id].is_dir, st.ofds[&id].vpath.clone()))
        })?;
        if !is_dir {
            return Err(libc::ENOTDIR);
        }
        let abs = paths::absolute(&vpath, p);
        if paths::split_mount(mounts, &abs).is_none() {
            return Ok(Res::Local(CString::new(abs).ok()));
        }
        abs
    } else {
        return Ok(Res::Local(None));
    };
    Ok(match paths::split_mount(mounts, &abs) {
        Some((mount, rel)) => Res::Dafs(Target { mount, rel, vpath: abs }),
        // "/dafs/../x" leaves the prefix: the kernel cannot walk through "/dafs" (it
        // does not exist locally), so libc gets the normalised path.
        None if p.starts_with('/') && !paths::through_prefix(mounts, path) => Res::Local(None),
        // Relative to the real working directory and not under a prefix: unchanged.
        None if !p.starts_with('/') && dirfd == libc::AT_FDCWD => Res::Local(None),
        None => Res::Local(CString::new(abs).ok()),
    })
}
