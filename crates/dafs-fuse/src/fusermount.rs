//! The setuid helper fusermount3, for mounts by users other than root (and, on request,
//! by root): it mounts and hands over the /dev/fuse descriptor (the `_FUSE_COMMFD`
//! protocol: one SCM_RIGHTS message on a socket pair), and it unmounts what the user
//! mounted.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::error::MountError;

/// The helper program (package fuse3).
const FUSERMOUNT: &str = "fusermount3";
/// The environment variable that tells fusermount3 which descriptor of its to send the
/// /dev/fuse descriptor on.
const COMMFD_ENV: &str = "_FUSE_COMMFD";
/// Room for the control message carrying the descriptor, in u64 words (so the buffer is
/// aligned like struct cmsghdr): CMSG_SPACE(sizeof(int)) is 24 bytes on 64-bit Linux;
/// 64 leaves room to spare.
const CONTROL_WORDS: usize = 8;

/// Mount with fusermount3 and receive the /dev/fuse descriptor it opened.
pub(crate) fn mount(mountpoint: &Path, options: &str) -> Result<OwnedFd, MountError> {
    let (ours, theirs) = UnixStream::pair().map_err(MountError::SocketPair)?;
    let theirs_fd = theirs.as_raw_fd();
    let mut cmd = Command::new(FUSERMOUNT);
    cmd.arg("-o")
        .arg(options)
        .arg("--")
        .arg(mountpoint)
        .env(COMMFD_ENV, theirs_fd.to_string())
        .stdin(Stdio::null());
    // SAFETY: fcntl is async-signal-safe; only the child's copy loses close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(theirs_fd, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().map_err(MountError::FusermountMissing)?;
    drop(theirs);
    if !out.status.success() {
        return Err(MountError::Fusermount {
            path: mountpoint.into(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().into(),
        });
    }
    // The descriptor comes with one byte of ordinary data.
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: byte.len() };
    let mut control = [0u64; CONTROL_WORDS];
    // SAFETY: msghdr is plain data; every pointer in it refers to live locals above.
    let fd = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(ours.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if n < 0
            || cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            let _ = crate::unmount(mountpoint, true);
            return Err(MountError::FusermountNoDescriptor { path: mountpoint.into() });
        }
        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>())
    };
    // SAFETY: SCM_RIGHTS gave this process a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Unmount `mountpoint` (absolute) with `fusermount3 -u` (`-z`: lazily).
pub(crate) fn unmount(mountpoint: &Path, lazy: bool) -> Result<(), MountError> {
    let mut cmd = Command::new(FUSERMOUNT);
    cmd.arg("-u");
    if lazy {
        cmd.arg("-z");
    }
    cmd.arg("--").arg(mountpoint);
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(MountError::FusermountUnmount {
            path: mountpoint.into(),
            stderr: String::from_utf8_lossy(&o.stderr).trim().into(),
        }),
        Err(e) => Err(MountError::FusermountMissing(e)),
    }
}
