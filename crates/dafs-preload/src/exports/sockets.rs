//! UNIX-domain sockets named under a prefix. The kernel cannot put a socket in a dafs
//! directory, so `bind` makes the socket node on the server (as the kernel makes one in
//! a local directory: type socket, mode 0777 & ~umask, the caller's owner) and binds the
//! real socket to a private local path derived from the node's identity (the server's
//! file system id and file id): `RUNTIME_DIR_PREFIX<euid>/<fsid>-<fileid>`, in a
//! directory of mode 0700 owned by the caller. `connect` to that dafs path — from any
//! process of the same user on the same host, under any prefix reaching the same
//! server — finds the node on the server and connects to the same local path. The name
//! follows the node through renames; processes on other hosts see the node but cannot
//! connect (ECONNREFUSED, as for a socket nobody listens on).

use std::ffi::{c_char, c_int, CString};
use std::mem::{offset_of, size_of};

use dafs_client::Error;
use dafs_proto::types::access_mask;
use dafs_proto::{Attr, FileType, Status};

use super::args::{classify, neg, on_path, P};
use crate::real::{errno, ret};
use crate::state::{err, with, Target};

/// Where the private local sockets live: this prefix and the caller's effective uid.
/// A directory another user made there first is refused (EACCES), never used.
pub const RUNTIME_DIR_PREFIX: &str = "/tmp/dafs-sockets-";

/// A socket is made with every permission the umask leaves, as bind(2) does.
const SOCKET_MODE: u32 = 0o777;

/// The pathname of an AF_UNIX address (None: another family, unnamed or abstract).
///
/// # Safety
/// `addr` is null or points to `len` readable bytes, as bind(2)/connect(2) require.
unsafe fn unix_path<'a>(addr: *const libc::sockaddr, len: libc::socklen_t) -> Option<&'a [u8]> {
    let off = offset_of!(libc::sockaddr_un, sun_path);
    let len = (len as usize).min(size_of::<libc::sockaddr_un>());
    if addr.is_null() || len <= off {
        return None;
    }
    // SAFETY: `len` bytes are readable (the caller's contract), and len > off covers
    // the family field.
    let bytes = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) };
    // SAFETY: the family is the first field of every sockaddr, within `len`.
    if c_int::from(unsafe { (*addr).sa_family }) != libc::AF_UNIX {
        return None;
    }
    let path = &bytes[off..];
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    // An empty first byte is Linux's abstract namespace: no file at all.
    (end > 0).then(|| &path[..end])
}

/// A sockaddr_un for `path` and its length (ENAMETOOLONG if it does not fit).
fn unix_addr(path: &[u8]) -> Result<(libc::sockaddr_un, libc::socklen_t), c_int> {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid (unnamed) address.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if path.len() >= a.sun_path.len() {
        return Err(libc::ENAMETOOLONG);
    }
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, &s) in a.sun_path.iter_mut().zip(path) {
        *d = s as c_char;
    }
    let len = offset_of!(libc::sockaddr_un, sun_path) + path.len() + 1;
    Ok((a, len as libc::socklen_t))
}

/// The caller's private directory of local sockets, made if missing; refused (EACCES)
/// unless it is a real directory owned by the caller and closed to everyone else.
fn runtime_dir() -> Result<String, c_int> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let dir = format!("{RUNTIME_DIR_PREFIX}{uid}");
    let c = CString::new(dir.clone()).map_err(|_| libc::EINVAL)?;
    // SAFETY: a NUL-terminated path.
    if unsafe { real!(mkdir: fn(*const c_char, libc::mode_t) -> c_int)(c.as_ptr(), 0o700) } < 0
        && errno() != libc::EEXIST
    {
        return Err(errno());
    }
    // SAFETY: plain data, filled by lstat below.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a stat buffer.
    if unsafe { real!(lstat: fn(*const c_char, *mut libc::stat) -> c_int)(c.as_ptr(), &mut st) } < 0
    {
        return Err(errno());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != uid || st.st_mode & 0o077 != 0 {
        debug!("{dir}: not a private directory of uid {uid}: sockets under dafs refused");
        return Err(libc::EACCES);
    }
    Ok(dir)
}

/// The local path standing for the socket node `a`.
fn local_path(a: &Attr) -> Result<Vec<u8>, c_int> {
    Ok(format!("{}/{:016x}-{:016x}", runtime_dir()?, a.fsid, a.fileid).into_bytes())
}

/// bind(2) to a dafs path: the node on the server first (EADDRINUSE if the name
/// exists), then the real socket to its local path; a failed local bind removes the node
/// again, so nothing is left behind.
fn bind_dafs(fd: c_int, t: &Target) -> Result<c_int, c_int> {
    let mode = SOCKET_MODE & !with(|st| st.umask);
    let attr = on_path(t, |c, p| match c.mknod(p, FileType::Socket, mode, 0) {
        Err(Error::Status(Status::Exist)) => err(libc::EADDRINUSE),
        r => Ok(r?),
    })?;
    let r = local_path(&attr).and_then(|local| {
        let (a, len) = unix_addr(&local)?;
        let c = CString::new(local).map_err(|_| libc::EINVAL)?;
        // A file left by an earlier socket of the same identity (its node since
        // unlinked on the server: the server just made this one) is stale.
        // SAFETY: a NUL-terminated path.
        unsafe { real!(unlink: fn(*const c_char) -> c_int)(c.as_ptr()) };
        let bind = real!(bind: fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int);
        // SAFETY: a complete sockaddr_un of `len` bytes.
        if unsafe { bind(fd, (&a as *const libc::sockaddr_un).cast(), len) } < 0 {
            return Err(errno());
        }
        Ok(0)
    });
    if r.is_err() {
        let _ = on_path(t, |c, p| Ok(c.remove(p)?));
    }
    r
}

/// connect(2) to a dafs path: it must name a socket (ECONNREFUSED otherwise, as Linux
/// says for a non-socket) the caller may write (EACCES), bound on this host.
fn connect_dafs(fd: c_int, t: &Target) -> Result<c_int, c_int> {
    let attr = on_path(t, |c, p| {
        let a = c.stat(p)?;
        if a.ftype != FileType::Socket {
            return err(libc::ECONNREFUSED);
        }
        if c.access(p, access_mask::WRITE)? & access_mask::WRITE == 0 {
            return err(libc::EACCES);
        }
        Ok(a)
    })?;
    let local = local_path(&attr)?;
    let (a, len) = unix_addr(&local)?;
    let connect = real!(connect: fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int);
    // SAFETY: a complete sockaddr_un of `len` bytes.
    if unsafe { connect(fd, (&a as *const libc::sockaddr_un).cast(), len) } < 0 {
        // No local socket: bound on another host, or its process is gone.
        return Err(match errno() {
            libc::ENOENT => libc::ECONNREFUSED,
            e => e,
        });
    }
    Ok(0)
}

/// What to do with an address: serve a dafs path, or pass on (possibly rewritten to
/// the absolute local path a relative name under a virtual working directory means).
///
/// # Safety
/// As for [`unix_path`].
unsafe fn on_unix_addr(
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
    dafs: fn(c_int, &Target) -> Result<c_int, c_int>,
    next: impl FnOnce(*const libc::sockaddr, libc::socklen_t) -> c_int,
) -> c_int {
    let Some(path) = (unsafe { unix_path(addr, len) }) else { return next(addr, len) };
    let Ok(cpath) = CString::new(path) else { return next(addr, len) };
    match unsafe { classify(libc::AT_FDCWD, cpath.as_ptr()) } {
        P::Dafs(t, _g) => ret(dafs(fd, &t)),
        P::Err(e) => neg(e),
        P::Local(_, Some(abs)) => match unix_addr(abs.as_bytes()) {
            Ok((a, l)) => next((&a as *const libc::sockaddr_un).cast(), l),
            Err(e) => neg(e),
        },
        P::Local(_, None) => next(addr, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn bind(
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
    let next = real!(bind: fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int);
    unsafe { on_unix_addr(fd, addr, len, bind_dafs, |a, l| next(fd, a, l)) }
}

#[no_mangle]
pub unsafe extern "C" fn connect(
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
    let next = real!(connect: fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int);
    unsafe { on_unix_addr(fd, addr, len, connect_dafs, |a, l| next(fd, a, l)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(a: &libc::sockaddr_un, len: libc::socklen_t) -> Option<Vec<u8>> {
        // SAFETY: a complete sockaddr_un, of at least `len` bytes.
        unsafe { unix_path((a as *const libc::sockaddr_un).cast(), len) }.map(<[u8]>::to_vec)
    }

    #[test]
    fn addresses() {
        let (a, len) = unix_addr(b"/dafs/sock").unwrap();
        assert_eq!(path_of(&a, len).as_deref(), Some(&b"/dafs/sock"[..]));
        // The full size, as most programs pass it: the path ends at its NUL.
        assert_eq!(path_of(&a, size_of::<libc::sockaddr_un>() as _).unwrap(), b"/dafs/sock");
        // Unnamed (family only) and abstract ("\0name") addresses name no file.
        assert_eq!(path_of(&a, offset_of!(libc::sockaddr_un, sun_path) as _), None);
        let (abs, len) = unix_addr(b"\0x").unwrap();
        assert_eq!(path_of(&abs, len), None);
        let mut inet = a;
        inet.sun_family = libc::AF_INET as libc::sa_family_t;
        assert_eq!(path_of(&inet, len), None);
        assert_eq!(unix_addr(&[b'x'; 108]).unwrap_err(), libc::ENAMETOOLONG);
        assert!(unix_addr(&[b'x'; 107]).is_ok());
    }
}
