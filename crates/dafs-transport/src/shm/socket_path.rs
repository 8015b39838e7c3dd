//! Where the server's socket lives, and binding it without following or removing
//! anything another user controls.
//!
//! Threat: a local user who can create the socket's name first (a file, a symlink, a
//! socket of their own) could stop dafsd from starting, redirect it, or impersonate it.
//! So the default socket lives in a directory only dafsd's user can enter (created 0700,
//! refused if it exists as anything else), and an explicit path is refused when other
//! users could replace it.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use tracing::warn;

/// Name of the private directory under `$XDG_RUNTIME_DIR` or `/run` (as root).
const DIR_NAME: &str = "dafsd";
/// Mode of the private directory.
const DIR_MODE: u32 = 0o700;

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn refused(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, msg)
}

/// The default socket: `dafsd-PID.sock` in a 0700 directory of dafsd's user:
/// `$XDG_RUNTIME_DIR/dafsd/` when that is a private directory of ours, else
/// `/run/dafsd/` as root, else `/tmp/dafsd-UID/`. If that directory is unusable (a
/// squatter's symlink, file or directory, or the wrong mode) dafsd still starts: it
/// warns and uses a fresh directory with an unguessable name (mkdtemp) instead.
pub fn default_socket_path() -> io::Result<PathBuf> {
    Ok(private_runtime_dir()?.join(format!("dafsd-{}.sock", std::process::id())))
}

/// The directories `private_runtime_dir` tries, in order (clients such as `dafs admin`
/// look for a server's sockets there).
pub fn runtime_dir_candidates() -> Vec<PathBuf> {
    let uid = euid();
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    let mut v: Vec<PathBuf> =
        xdg.filter(|d| d.is_absolute()).map(|x| x.join(DIR_NAME)).into_iter().collect();
    if uid == 0 {
        v.push(PathBuf::from("/run").join(DIR_NAME));
    }
    v.push(std::env::temp_dir().join(format!("{DIR_NAME}-{uid}")));
    v
}

/// dafsd's private runtime directory (0700, its own user), where its sockets live: the
/// shared-memory socket and the admin socket. See `default_socket_path` for the choice
/// and what happens when a squatter holds the usual place.
pub fn private_runtime_dir() -> io::Result<PathBuf> {
    let uid = euid();
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    let dir = match xdg.filter(|d| d.is_absolute() && is_private_to(d, uid)) {
        Some(x) => x.join(DIR_NAME),
        None if uid == 0 => PathBuf::from("/run").join(DIR_NAME),
        None => std::env::temp_dir().join(format!("{DIR_NAME}-{uid}")),
    };
    let dir = match ensure_private_dir(&dir) {
        Ok(()) => dir,
        Err(e) => {
            let fresh = fresh_private_dir(&std::env::temp_dir())?;
            warn!("runtime directory: {e}; using {} instead", fresh.display());
            fresh
        }
    };
    Ok(dir)
}

/// True if `dir` is a directory owned by `uid` that no one else may write.
fn is_private_to(dir: &Path, uid: u32) -> bool {
    std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0)
}

/// Create `dir` with mode 0700, or accept it if it already is exactly that: a real
/// directory (not a symlink), owned by our uid, mode 0700.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => {
            // Ours: set the mode exactly (the umask may have taken bits away).
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))?;
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    }
    let m = std::fs::symlink_metadata(dir)?;
    let d = dir.display();
    if m.file_type().is_symlink() {
        return Err(refused(format!("{d} is a symlink; refusing to follow it")));
    }
    if !m.is_dir() {
        return Err(refused(format!("{d} exists and is not a directory")));
    }
    if m.uid() != euid() {
        return Err(refused(format!(
            "{d} is owned by uid {}, not by dafsd's uid {}",
            m.uid(),
            euid()
        )));
    }
    if m.mode() & 0o777 != DIR_MODE {
        return Err(refused(format!("{d} has mode {:o}, not {DIR_MODE:o}", m.mode() & 0o777)));
    }
    Ok(())
}

/// A new 0700 directory with an unguessable name under `parent`.
fn fresh_private_dir(parent: &Path) -> io::Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let template = parent.join(format!("{DIR_NAME}-XXXXXX"));
    let mut bytes = template.as_os_str().as_bytes().to_vec();
    bytes.push(0);
    // SAFETY: `bytes` is a NUL-terminated, writable template ending in XXXXXX, as
    // mkdtemp(3) requires; it rewrites the X's in place and creates the directory 0700.
    let r = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    if r.is_null() {
        return Err(io::Error::last_os_error());
    }
    bytes.pop();
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}

/// An explicit socket path: its directory must not let other users replace the socket
/// (writable by group or others without the sticky bit, or owned by another user than
/// dafsd's or root).
pub fn check_socket_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let m = std::fs::metadata(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let d = dir.display();
    const STICKY: u32 = 0o1000;
    if m.mode() & 0o022 != 0 && m.mode() & STICKY == 0 {
        return Err(refused(format!(
            "directory {d} is writable by other users (mode {:o}) without the sticky bit: \
             they could replace the socket; use a private directory",
            m.mode() & 0o7777
        )));
    }
    if m.uid() != euid() && m.uid() != 0 {
        return Err(refused(format!(
            "directory {d} belongs to uid {}: that user could replace the socket",
            m.uid()
        )));
    }
    Ok(())
}

/// Clear the way for binding `path`: nothing there is fine; a stale socket of our own
/// uid that nobody answers on is removed; anything else (a symlink, which is never
/// followed, a file, another user's socket, a live server) is an error and is left alone.
pub fn clear_stale_socket(path: &Path) -> io::Result<()> {
    let m = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) => m,
    };
    let p = path.display();
    if m.file_type().is_symlink() {
        return Err(refused(format!("{p} is a symlink; refusing to follow or remove it")));
    }
    if !m.file_type().is_socket() {
        return Err(refused(format!("{p} exists and is not a socket; refusing to remove it")));
    }
    if m.uid() != euid() {
        return Err(refused(format!("{p} is a socket of uid {}; refusing to remove it", m.uid())));
    }
    if UnixStream::connect(path).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{p}: another server answers on this socket"),
        ));
    }
    std::fs::remove_file(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode_of(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }
    fn set_mode(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    fn chown(p: &Path, uid: u32) -> bool {
        std::os::unix::fs::lchown(p, Some(uid), None).is_ok()
    }
    /// A uid that is not ours (only root can give files away to it).
    const OTHER_UID: u32 = 54_321;

    #[test]
    fn private_dir_is_created_0700_and_squatters_are_refused() {
        let base = tempfile::tempdir().unwrap();
        let d = base.path().join("dafsd");
        ensure_private_dir(&d).unwrap();
        assert_eq!(mode_of(&d), 0o700);
        ensure_private_dir(&d).unwrap();
        // Wrong mode: refused, not "fixed" behind the owner's back.
        set_mode(&d, 0o755);
        assert!(ensure_private_dir(&d).unwrap_err().to_string().contains("mode 755"));
        // A symlink to a private-looking directory is never followed.
        let target = base.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        set_mode(&target, 0o700);
        let link = base.path().join("link");
        symlink(&target, &link).unwrap();
        assert!(ensure_private_dir(&link).unwrap_err().to_string().contains("symlink"));
        let file = base.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(ensure_private_dir(&file).unwrap_err().to_string().contains("not a directory"));
        let theirs = base.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        set_mode(&theirs, 0o700);
        if chown(&theirs, OTHER_UID) {
            assert!(ensure_private_dir(&theirs).unwrap_err().to_string().contains("owned by"));
        }
    }

    #[test]
    fn explicit_socket_dir_must_not_be_writable_by_others() {
        let base = tempfile::tempdir().unwrap();
        let sock = base.path().join("s.sock");
        check_socket_dir(&sock).unwrap();
        set_mode(base.path(), 0o777);
        let e = check_socket_dir(&sock).unwrap_err();
        assert!(e.to_string().contains("writable by other users"), "{e}");
        set_mode(base.path(), 0o1777);
        check_socket_dir(&sock).unwrap();
        set_mode(base.path(), 0o700);
        if chown(base.path(), OTHER_UID) {
            assert!(check_socket_dir(&sock).unwrap_err().to_string().contains("belongs to uid"));
        }
    }

    #[test]
    fn only_our_own_stale_socket_is_removed() {
        let base = tempfile::tempdir().unwrap();
        let p = base.path().join("s.sock");
        clear_stale_socket(&p).unwrap();
        // Ours and stale: removed.
        drop(std::os::unix::net::UnixListener::bind(&p).unwrap());
        clear_stale_socket(&p).unwrap();
        assert!(!p.exists());
        // Ours and live: kept, AddrInUse.
        let live = std::os::unix::net::UnixListener::bind(&p).unwrap();
        assert_eq!(clear_stale_socket(&p).unwrap_err().kind(), io::ErrorKind::AddrInUse);
        drop(live);
        // Another user's socket: kept.
        if chown(&p, OTHER_UID) {
            assert!(clear_stale_socket(&p).unwrap_err().to_string().contains("uid 54321"));
            assert!(p.exists());
        }
        std::fs::remove_file(&p).unwrap();
        // A symlink (to a socket of ours) is neither followed nor removed.
        let target = base.path().join("target.sock");
        drop(std::os::unix::net::UnixListener::bind(&target).unwrap());
        symlink(&target, &p).unwrap();
        assert!(clear_stale_socket(&p).unwrap_err().to_string().contains("symlink"));
        assert!(std::fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
        assert!(target.exists());
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, b"not a socket").unwrap();
        assert!(clear_stale_socket(&p).unwrap_err().to_string().contains("not a socket"));
        assert_eq!(std::fs::read(&p).unwrap(), b"not a socket");
    }

    #[test]
    fn fresh_dir_is_private_and_unguessable() {
        let base = tempfile::tempdir().unwrap();
        let a = fresh_private_dir(base.path()).unwrap();
        let b = fresh_private_dir(base.path()).unwrap();
        assert_ne!(a, b);
        for d in [&a, &b] {
            assert_eq!(d.parent().unwrap(), base.path());
            assert_eq!(mode_of(d), 0o700);
            ensure_private_dir(d).unwrap();
        }
    }
}
