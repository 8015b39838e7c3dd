//! `mmap` of dafs files (private mappings only).

use std::ffi::{c_int, c_void};

use super::data::do_read;
use crate::real::{errno, set_errno, Entered};
use crate::state::{is_dafs_fd, with, Kind};

/// mmap offsets are multiples of the page size: 4 KiB on x86_64 (and the usual aarch64
/// kernels).
const MMAP_OFFSET_ALIGN_BYTES: i64 = 4096;

interpose! {
    /// mmap of a dafs file. A private mapping (MAP_PRIVATE) is emulated: anonymous memory
    /// filled with the file's bytes at map time, then given the requested protection —
    /// what the program writes there stays private, as with any private mapping; later
    /// changes of the file are not seen (POSIX leaves that unspecified for MAP_PRIVATE).
    /// Shared mappings would need page-cache coherence the client does not have: ENODEV,
    /// the errno for "this file system does not support mmap".
    fn mmap | mmap64 => mmap (
        addr: *mut c_void,
        len: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        off: i64,
    ) -> *mut c_void
    where next
    {
        if flags & libc::MAP_ANONYMOUS == 0 && is_dafs_fd(fd) {
            let Some(_g) = Entered::enter() else { return next(addr, len, prot, flags, fd, off) };
            let fail = |e: c_int| {
                set_errno(e);
                libc::MAP_FAILED
            };
            if flags & libc::MAP_TYPE != libc::MAP_PRIVATE {
                return fail(libc::ENODEV);
            }
            if len == 0 || off < 0 || off % MMAP_OFFSET_ALIGN_BYTES != 0 {
                return fail(libc::EINVAL);
            }
            let readable = with(|st| {
                st.ofd_id(fd).map(|id| (st.ofds[&id].kind, st.ofds[&id].flags & libc::O_ACCMODE))
            });
            match readable {
                Err(e) => return fail(e),
                Ok((Kind::File, acc)) if acc != libc::O_WRONLY => {}
                Ok(_) => return fail(libc::EACCES),
            }
            let keep = flags
                & (libc::MAP_FIXED
                    | libc::MAP_FIXED_NOREPLACE
                    | libc::MAP_NORESERVE
                    | libc::MAP_POPULATE
                    | libc::MAP_32BIT);
            let p = next(
                addr,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                keep | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return fail(errno());
            }
            // Read the bytes: a short read (end of file) leaves zeros.
            let mut done = 0usize;
            while done < len {
                match do_read(
                    fd,
                    // SAFETY: done < len: within our fresh mapping of `len` bytes.
                    unsafe { (p as *mut u8).add(done) },
                    len - done,
                    Some(off + done as i64),
                ) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) => {
                        // SAFETY: our mapping, not handed out yet.
                        unsafe { libc::munmap(p, len) };
                        return fail(e);
                    }
                }
            }
            // SAFETY: our fresh mapping of `len` bytes.
            if unsafe { libc::mprotect(p, len, prot) } != 0 {
                let e = errno();
                // SAFETY: our mapping, not handed out yet.
                unsafe { libc::munmap(p, len) };
                return fail(e);
            }
            return p;
        }
        next(addr, len, prot, flags, fd, off)
    }
}
