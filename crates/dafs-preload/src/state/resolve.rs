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
    /// What lexical normalisation dropped from the end of the path the caller gave,
    /// which the kernel's rules still depend on.
    pub tail: Tail,
}

/// The end of a path as the caller wrote it: normalisation turns "f/", "d/." and "d/.."
/// into "f", "d" and the parent, but the kernel treats each differently (a trailing
/// slash demands a directory; '.' and '..' cannot be removed, renamed or created).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tail {
    /// The path ended in '/' (after a name, '.' or '..'): it must name a directory.
    pub slash: bool,
    /// The last component was "." or "..".
    pub last: Last,
}

/// The kind of the last component of a path as written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Last {
    #[default]
    Name,
    Dot,
    DotDot,
}

impl Tail {
    /// The tail of `path` as written ("" and "/" have a plain, slash-free tail: they
    /// name the working directory's nothing and the root).
    pub fn of(path: &str) -> Tail {
        let trimmed = path.trim_end_matches('/');
        if trimmed.is_empty() {
            return Tail::default();
        }
        let last = match trimmed.rsplit('/').next() {
            Some(".") => Last::Dot,
            Some("..") => Last::DotDot,
            _ => Last::Name,
        };
        Tail { slash: trimmed.len() != path.len(), last }
    }

    /// Must the path name a directory (trailing slash, or ending in '.' or '..')?
    pub fn dir_only(&self) -> bool {
        self.slash || self.last != Last::Name
    }

    /// Is the last component "." or ".." (not a name a directory entry can have)?
    pub fn dots(&self) -> bool {
        self.last != Last::Name
    }
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
        Some((mount, rel)) => Res::Dafs(Target { mount, rel, vpath: abs, tail: Tail::of(p) }),
        // "/dafs/../x" leaves the prefix: the kernel cannot walk through "/dafs" (it
        // does not exist locally), so libc gets the normalised path.
        None if p.starts_with('/') && !paths::through_prefix(mounts, path) => Res::Local(None),
        // Relative to the real working directory and not under a prefix: unchanged.
        None if !p.starts_with('/') && dirfd == libc::AT_FDCWD => Res::Local(None),
        None => Res::Local(CString::new(abs).ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails() {
        let t = |slash, last| Tail { slash, last };
        assert_eq!(Tail::of("f"), t(false, Last::Name));
        assert_eq!(Tail::of("f/"), t(true, Last::Name));
        assert_eq!(Tail::of("/a/f//"), t(true, Last::Name));
        assert_eq!(Tail::of("."), t(false, Last::Dot));
        assert_eq!(Tail::of("d/."), t(false, Last::Dot));
        assert_eq!(Tail::of("d/./"), t(true, Last::Dot));
        assert_eq!(Tail::of(".."), t(false, Last::DotDot));
        assert_eq!(Tail::of("a/.../"), t(true, Last::Name));
        assert_eq!(Tail::of("/"), Tail::default());
        assert_eq!(Tail::of(""), Tail::default());
        assert!(Tail::of("d/.").dir_only() && !Tail::of("d").dir_only());
    }
}
