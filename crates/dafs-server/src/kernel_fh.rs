//! Kernel persistent file handles: `name_to_handle_at(2)` names an object by what the
//! file system stores (inode and generation, for ext4), which survives a restart of
//! dafsd; `open_by_handle_at(2)` opens it again. Opening needs CAP_DAC_READ_SEARCH
//! (it bypasses the directory permissions of the path), so the caller probes it once.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::fs::OFlags;
use rustix::io::Errno;

/// MAX_HANDLE_SZ (include/linux/exportfs.h): the most bytes a kernel handle has.
const KERNEL_HANDLE_BYTES_MAX: usize = 128;

/// `struct file_handle` with room for the largest handle.
#[repr(C)]
struct RawHandle {
    handle_bytes: u32,
    handle_type: i32,
    f_handle: [u8; KERNEL_HANDLE_BYTES_MAX],
}

/// A kernel file handle and the id of the mount it was taken on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelHandle {
    pub handle_type: i32,
    pub bytes: Vec<u8>,
    pub mount_id: i32,
}

fn last_errno() -> Errno {
    Errno::from_raw_os_error(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}

/// The kernel handle of the object `fd` refers to (an `O_PATH` descriptor will do).
pub fn name_of(fd: BorrowedFd) -> Result<KernelHandle, Errno> {
    let mut raw = RawHandle {
        handle_bytes: KERNEL_HANDLE_BYTES_MAX as u32,
        handle_type: 0,
        f_handle: [0; KERNEL_HANDLE_BYTES_MAX],
    };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: `raw` is a `struct file_handle` whose handle_bytes says how much room
    // f_handle has; the kernel writes at most that. The path is a NUL-terminated empty
    // string (AT_EMPTY_PATH: the object is `fd` itself); mount_id is a valid c_int.
    let r = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            fd.as_raw_fd(),
            c"".as_ptr(),
            &mut raw as *mut RawHandle,
            &mut mount_id as *mut libc::c_int,
            libc::AT_EMPTY_PATH,
        )
    };
    if r < 0 {
        return Err(last_errno());
    }
    let n = raw.handle_bytes as usize;
    assert!(n <= KERNEL_HANDLE_BYTES_MAX, "the kernel wrote at most the room it was given");
    Ok(KernelHandle { handle_type: raw.handle_type, bytes: raw.f_handle[..n].to_vec(), mount_id })
}

/// Open the object `h` names on the file system `mount_fd` is on. `mount_fd` must not be
/// an `O_PATH` descriptor (the kernel refuses those here).
pub fn open(mount_fd: BorrowedFd, h: &KernelHandle, flags: OFlags) -> Result<OwnedFd, Errno> {
    if h.bytes.len() > KERNEL_HANDLE_BYTES_MAX {
        return Err(Errno::INVAL);
    }
    let mut raw = RawHandle {
        handle_bytes: h.bytes.len() as u32,
        handle_type: h.handle_type,
        f_handle: [0; KERNEL_HANDLE_BYTES_MAX],
    };
    raw.f_handle[..h.bytes.len()].copy_from_slice(&h.bytes);
    let flags = (flags | OFlags::CLOEXEC).bits() as libc::c_int;
    // SAFETY: `raw` is a valid `struct file_handle` of handle_bytes bytes, alive for the
    // call; the kernel only reads it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            mount_fd.as_raw_fd(),
            &raw as *const RawHandle,
            flags,
        )
    };
    if r < 0 {
        return Err(last_errno());
    }
    // SAFETY: on success the syscall returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r as libc::c_int) })
}

/// Run `f` with the calling thread's file-system uid 0, then restore the previous one
/// (also if `f` panics). A worker running a request with a client's file-system ids
/// (identity asserted or squash) has lost CAP_DAC_READ_SEARCH, which
/// `open_by_handle_at` needs; re-opening a handle under dafsd's own (root) fsuid makes
/// an evicted handle resolve exactly as a cached one does — the operations on the
/// object then run with the client's ids again. Without CAP_SETUID (dafsd not root)
/// the switch does not take and nothing changes.
pub fn with_root_fsuid<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(libc::uid_t);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: setfsuid(2) changes only the calling thread's file-system uid.
            unsafe { libc::setfsuid(self.0) };
        }
    }
    // SAFETY: as above; it returns the previous file-system uid.
    let previous = unsafe { libc::setfsuid(0) } as libc::uid_t;
    let _restore = Restore(previous);
    f()
}

/// An export whose handles persist: a descriptor of its root to open handles on (not
/// `O_PATH`: the kernel refuses those as mount descriptors), and the root's mount id
/// and device (objects on other mounts get volatile handles).
#[derive(Debug)]
pub struct PersistentExport {
    pub mount_fd: OwnedFd,
    pub mount_id: i32,
    pub dev: u64,
}

/// Can handles of the export rooted at `root` be re-opened? `Err(PERM)` when dafsd
/// lacks CAP_DAC_READ_SEARCH; `Err(OPNOTSUPP)` for a file system without handles.
pub fn probe(root: BorrowedFd) -> Result<PersistentExport, Errno> {
    let path = crate::fsops::proc_path(root);
    let mount_fd = rustix::fs::open(
        path.as_c_str(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let h = name_of(root)?;
    let reopened = open(std::os::fd::AsFd::as_fd(&mount_fd), &h, OFlags::PATH)?;
    let (a, b) = (rustix::fs::fstat(root)?, rustix::fs::fstat(&reopened)?);
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
        return Err(Errno::STALE); // the kernel named something else: do not rely on it
    }
    Ok(PersistentExport { mount_fd, mount_id: h.mount_id, dev: a.st_dev })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_handle_reopens_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let h = match name_of(f.as_fd()) {
            Ok(h) => h,
            Err(Errno::OPNOTSUPP) => return, // a file system without handles
            Err(e) => panic!("name_to_handle_at: {e}"),
        };
        let root = std::fs::File::open(dir.path()).unwrap();
        match open(root.as_fd(), &h, OFlags::PATH) {
            Ok(g) => {
                let (a, b) = (rustix::fs::fstat(&f).unwrap(), rustix::fs::fstat(&g).unwrap());
                assert_eq!((a.st_dev, a.st_ino), (b.st_dev, b.st_ino));
            }
            Err(Errno::PERM) => {} // not permitted without CAP_DAC_READ_SEARCH
            Err(e) => panic!("open_by_handle_at: {e}"),
        }
        std::fs::remove_file(&p).unwrap();
        drop(f);
        // ESTALE once the inode is gone (EPERM without the capability): never a file.
        assert!(open(root.as_fd(), &h, OFlags::PATH).is_err(), "a deleted file reopened");
    }
}
