//! The descriptor table: dafs descriptors are real kernel descriptors (an `O_PATH` open
//! of `/dev/null` reserves each number), mapped to shared open file descriptions.

use std::ffi::c_int;

use super::fdmap::{mark, FD_MAX};
use super::ofd::{FdEnt, Ofd};
use super::State;

/// glibc's open, bypassing the interposed one.
fn real_open(path: &std::ffi::CStr, flags: c_int) -> c_int {
    // SAFETY: a NUL-terminated path; glibc's open.
    unsafe {
        real!(open: fn(*const libc::c_char, c_int, ...) -> c_int)(
            path.as_ptr(),
            flags,
            0 as libc::c_uint,
        )
    }
}

/// glibc's close, for placeholders and the library's own descriptors.
pub fn real_close(fd: c_int) -> c_int {
    // SAFETY: glibc's close.
    unsafe { real!(close: fn(c_int) -> c_int)(fd) }
}

impl State {
    /// The open file description dafs descriptor `fd` names.
    pub fn ofd_id(&self, fd: c_int) -> Result<u64, c_int> {
        self.fds.get(&fd).map(|e| e.ofd).ok_or(libc::EBADF)
    }

    /// Reserve a kernel descriptor for a new open file description and register it.
    pub fn install(&mut self, ofd: Ofd, cloexec: bool) -> Result<c_int, c_int> {
        let fd = real_open(c"/dev/null", libc::O_PATH | if cloexec { libc::O_CLOEXEC } else { 0 });
        if fd < 0 {
            let e = crate::real::errno();
            self.release_ofd_value(ofd);
            return Err(e);
        }
        if fd as usize >= FD_MAX {
            real_close(fd);
            self.release_ofd_value(ofd);
            return Err(libc::EMFILE);
        }
        let id = self.next_ofd;
        self.next_ofd += 1;
        self.ofds.insert(id, ofd);
        self.add_fd(fd, id, cloexec);
        Ok(fd)
    }

    /// Close the client file of a description that never got a descriptor.
    fn release_ofd_value(&mut self, o: Ofd) {
        let m = o.mount;
        let current = o.gen == self.mounts[m].gen;
        if let (Some(f), Some(c), true) = (o.file, self.mounts[m].client.as_mut(), current) {
            let _ = c.close(f);
        }
    }

    /// Make `fd` (a reserved kernel descriptor) name open file description `id`.
    pub fn add_fd(&mut self, fd: c_int, id: u64, cloexec: bool) {
        if self.fds.contains_key(&fd) {
            let _ = self.drop_fd(fd);
        }
        if let Some(o) = self.ofds.get_mut(&id) {
            o.refs += 1;
        }
        self.fds.insert(fd, FdEnt { ofd: id, cloexec });
        mark(fd, true);
    }

    /// Forget descriptor `fd` (the caller closes the kernel descriptor): release the
    /// process's POSIX locks on the file, and close the file when it was the last
    /// descriptor of its open file description.
    pub fn drop_fd(&mut self, fd: c_int) -> Result<(), c_int> {
        let Some(ent) = self.fds.remove(&fd) else { return Ok(()) };
        mark(fd, false);
        let Some(o) = self.ofds.get_mut(&ent.ofd) else { return Ok(()) };
        assert!(o.refs > 0, "descriptor {fd} names a description without references");
        o.refs -= 1;
        let (m, last, fileid) = (o.mount, o.refs == 0, o.file.as_ref().map(|f| f.attr.fileid));
        let current = o.gen == self.mounts[m].gen;
        let mut res = Ok(());
        if let Some(fid) = fileid {
            if current && self.mounts[m].locked.remove(&fid) {
                let id = ent.ofd;
                // POSIX: closing any descriptor of a file releases all of the process's
                // locks on it.
                res = self.with_ofd_id(id, |c, o| Ok(c.unlock(o.file.as_ref().unwrap(), 0, 0)?));
            }
        }
        if last {
            let o = self.ofds.remove(&ent.ofd).unwrap();
            if let (Some(f), true) = (o.file, current) {
                if let Some(c) = self.mounts[m].client.as_mut() {
                    if let Err(e) = c.close(f) {
                        let e = self.fail(m, e.into());
                        res = res.and(Err(e));
                    }
                }
            }
        }
        res
    }
}
