//! Application memory of the client process, reached through a descriptor of its own
//! `/proc/self/mem` that the client passes with HELLO.
//!
//! Security: this replaces `process_vm_readv/writev(pid, ...)`, which named the client
//! by pid. A pid outlives nothing: once the client exits, the same number can name
//! another process, and a root server would read and overwrite that process's memory
//! (the kernel's ptrace-access check would pass for root). The descriptor instead pins
//! the client's *address space*: the kernel's ptrace-access check
//! (PTRACE_MODE_ATTACH) ran when the client opened it, against the client itself, so
//! the server's own privileges never enter into it; and when the process exits or
//! execs, that address space is gone and every read or write returns 0 bytes, which is
//! reported as [`TransportError::Closed`] — no pid is ever looked up again.
//!
//! The server checks at HELLO that the descriptor is exactly the memory file of the
//! process the kernel reports for the socket (SO_PEERCRED): same procfs inode.

use std::io;
use std::os::fd::OwnedFd;

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::TransportError;

/// Memory of the process at the other end of one shared-memory connection.
pub struct PeerMem {
    fd: OwnedFd,
}

impl PeerMem {
    /// Client: open this process's memory file, to be passed to the server.
    pub fn open_own() -> io::Result<OwnedFd> {
        rustix::fs::open("/proc/self/mem", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(
            |e| io::Error::other(format!("the shared-memory provider needs /proc/self/mem: {e}")),
        )
    }

    /// Server: accept `fd` only if it is the read-write memory file of process `pid`
    /// (the socket's peer, as the kernel reported it at accept).
    pub fn from_peer(fd: OwnedFd, pid: i32) -> Result<PeerMem, &'static str> {
        let fs = rustix::fs::fstatfs(&fd).map_err(|_| "cannot statfs the client's memory file")?;
        if fs.f_type != rustix::fs::PROC_SUPER_MAGIC {
            return Err("the client's memory file is not on procfs");
        }
        let flags =
            rustix::fs::fcntl_getfl(&fd).map_err(|_| "cannot read the memory file's mode")?;
        if !flags.contains(OFlags::RDWR) {
            return Err("the client's memory file is not open read-write");
        }
        if pid <= 0 {
            return Err("the client's pid is not visible to the server (another pid namespace)");
        }
        let got = rustix::fs::fstat(&fd).map_err(|_| "cannot stat the client's memory file")?;
        let want = rustix::fs::stat(format!("/proc/{pid}/mem"))
            .map_err(|_| "the connecting process is gone or not in the server's /proc")?;
        if FileType::from_raw_mode(got.st_mode) != FileType::RegularFile
            || (got.st_dev, got.st_ino) != (want.st_dev, want.st_ino)
        {
            return Err("the memory file passed is not the connecting process's /proc/PID/mem");
        }
        Ok(PeerMem { fd })
    }

    /// Copy the peer's bytes at `addr` into all of `buf`.
    pub fn read(&self, buf: &mut [u8], addr: u64) -> Result<(), TransportError> {
        let mut done = 0;
        while done < buf.len() {
            let at = addr.checked_add(done as u64).ok_or(TransportError::BadRegion)?;
            let r = rustix::io::pread(&self.fd, &mut buf[done..], at);
            done += Self::progress(r)?;
        }
        Ok(())
    }

    /// Copy all of `buf` into the peer's memory at `addr`.
    pub fn write(&self, buf: &[u8], addr: u64) -> Result<(), TransportError> {
        let mut done = 0;
        while done < buf.len() {
            let at = addr.checked_add(done as u64).ok_or(TransportError::BadRegion)?;
            let r = rustix::io::pwrite(&self.fd, &buf[done..], at);
            done += Self::progress(r)?;
        }
        Ok(())
    }

    /// Bytes one pread/pwrite moved. 0 means the address space is gone (the process
    /// exited or exec'd); EIO means an address that is not mapped there.
    fn progress(r: rustix::io::Result<usize>) -> Result<usize, TransportError> {
        match r {
            Ok(0) => Err(TransportError::Closed),
            Ok(n) => Ok(n),
            Err(Errno::INTR) => Ok(0),
            Err(Errno::IO | Errno::FAULT | Errno::INVAL) => Err(TransportError::BadRegion),
            Err(e) => Err(TransportError::Io(e.into())),
        }
    }
}
