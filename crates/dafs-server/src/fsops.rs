//! Thin, export-confined file system primitives. Every name resolution goes through
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to a directory the
//! client already holds, so no `..`, symlink or absolute path reaches outside it.
//! Objects are held as `O_PATH` descriptors; operations that Linux does not offer on
//! an `O_PATH` descriptor go through its `/proc/self/fd/N` name.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use dafs_proto::{limits, Attr, FileType, FsStat, Status};
use rustix::fs::{self as rfs, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

pub type FsResult<T> = Result<T, Status>;

pub fn st(e: Errno) -> Status {
    Status::from_errno(e.raw_os_error())
}

/// An I/O error's status; one without an errno (not from a system call) is `EIO`.
pub fn io_st(e: std::io::Error) -> Status {
    Status::from_errno(e.raw_os_error().unwrap_or(libc::EIO))
}

const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// `st_blocks` counts 512-byte units, whatever the file system's block size (stat(2)).
const STAT_BLOCK_BYTES: u64 = 512;

/// getdents64 buffer (one per READDIR): room for hundreds of entries per system call.
const GETDENTS_BUF_BYTES: usize = 32 * 1024;

// `struct linux_dirent64` (getdents64(2)): d_ino u64, d_off i64, d_reclen u16,
// d_type u8, then the NUL-terminated name.
const DIRENT_INO_AT: usize = 0;
const DIRENT_OFF_AT: usize = 8;
const DIRENT_RECLEN_AT: usize = 16;
const DIRENT_TYPE_AT: usize = 18;
const DIRENT_NAME_AT: usize = 19;
/// The smallest record the parser accepts: the fixed fields and the name's NUL.
const DIRENT_RECLEN_MIN: usize = DIRENT_NAME_AT + 1;

/// Resolve `path` beneath `dir` to an `O_PATH` descriptor.
pub fn lookup(dir: BorrowedFd, path: &[u8], follow: bool) -> FsResult<OwnedFd> {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let c = CString::new(path).map_err(|_| Status::BadName)?;
    rfs::openat2(dir, c.as_c_str(), flags, Mode::empty(), BENEATH).map_err(|e| match e {
        // RESOLVE_BENEATH refuses escapes with EXDEV; NO_MAGICLINKS and some symlink
        // escapes with ELOOP. Report both as an escape attempt where they are one.
        Errno::XDEV => Status::Escape,
        e => st(e),
    })
}

/// Open (and maybe create) `name` in `dir` for I/O.
pub fn open_in(dir: BorrowedFd, name: &[u8], oflags: OFlags, mode: u32) -> FsResult<OwnedFd> {
    let c = CString::new(name).map_err(|_| Status::BadName)?;
    rfs::openat2(dir, c.as_c_str(), oflags | OFlags::CLOEXEC, Mode::from_raw_mode(mode), BENEATH)
        .map_err(|e| match e {
            Errno::XDEV => Status::Escape,
            e => st(e),
        })
}

pub fn proc_path(fd: BorrowedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number")
}

/// Re-open an `O_PATH` descriptor for I/O.
/// Open the object behind an `O_PATH` descriptor for real. Never blocks the worker: a
/// FIFO (or a device) in the export would otherwise hold it until a peer appears, so
/// the open is non-blocking (no effect on regular files) and never becomes a terminal's
/// controlling one.
pub fn reopen(fd: BorrowedFd, oflags: OFlags) -> FsResult<OwnedFd> {
    let oflags = oflags | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    rfs::open(proc_path(fd).as_c_str(), oflags, Mode::empty()).map_err(st)
}

pub fn ts_ns(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

pub fn attr_from_stat(s: &rfs::Stat) -> Attr {
    Attr {
        ftype: FileType::from_mode(s.st_mode),
        mode: s.st_mode & 0o7777,
        nlink: s.st_nlink as u32,
        uid: s.st_uid,
        gid: s.st_gid,
        size: s.st_size as u64,
        used: (s.st_blocks as u64).saturating_mul(STAT_BLOCK_BYTES),
        fileid: s.st_ino,
        fsid: s.st_dev,
        rdev: s.st_rdev,
        atime_ns: ts_ns(s.st_atime as i64, s.st_atime_nsec as i64),
        mtime_ns: ts_ns(s.st_mtime as i64, s.st_mtime_nsec as i64),
        ctime_ns: ts_ns(s.st_ctime as i64, s.st_ctime_nsec as i64),
    }
}

pub fn fstat(fd: BorrowedFd) -> FsResult<rfs::Stat> {
    rfs::fstat(fd).map_err(st)
}

pub fn getattr(fd: BorrowedFd) -> FsResult<Attr> {
    Ok(attr_from_stat(&fstat(fd)?))
}

pub fn fsstat(fd: BorrowedFd) -> FsResult<FsStat> {
    let s = rfs::fstatvfs(fd).map_err(st)?;
    let frsize = if s.f_frsize > 0 { s.f_frsize } else { s.f_bsize };
    Ok(FsStat {
        total_bytes: s.f_blocks.saturating_mul(frsize),
        free_bytes: s.f_bfree.saturating_mul(frsize),
        avail_bytes: s.f_bavail.saturating_mul(frsize),
        total_files: s.f_files,
        free_files: s.f_ffree,
        block_size: s.f_bsize as u32,
        name_max: s.f_namemax.min(limits::NAME_BYTES_MAX as u64) as u32,
    })
}

/// Set the size of `file` (open for writing) to `size`, as ftruncate(2) does. Cutting an
/// already empty file to 0 marks its modification and change times (what O_TRUNC and
/// truncate(2) promise) without calling ftruncate(0): ext4 takes a truncate to 0 as a
/// file being replaced and writes its data back when it is closed (auto_da_alloc),
/// which turns every create-with-O_TRUNC of a new file into a flush.
pub fn set_size(file: BorrowedFd, size: u64, size_now: u64) -> FsResult<()> {
    if size == 0 && size_now == 0 {
        let ts = rfs::Timestamps {
            last_access: rfs::Timespec { tv_sec: 0, tv_nsec: rfs::UTIME_OMIT },
            last_modification: rfs::Timespec { tv_sec: 0, tv_nsec: rfs::UTIME_NOW },
        };
        return rfs::futimens(file, &ts).map_err(st);
    }
    rfs::ftruncate(file, size).map_err(st)
}

pub fn timespec_from_ns(ns: i64) -> rfs::Timespec {
    rfs::Timespec {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_nsec: ns.rem_euclid(1_000_000_000) as _,
    }
}

/// Open a directory (given as an `O_PATH` descriptor) for reading its entries.
pub fn open_dir(dir: BorrowedFd) -> FsResult<OwnedFd> {
    rfs::openat(dir, c".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(st)
}

/// Run `then` after `file` was created as `name` in `dir`; if it fails and the create
/// was exclusive, unlink the name again (if it still names `file`): a failed exclusive
/// create leaves nothing behind, so its retry does not find the file and answer EXIST.
pub fn undo_create_on_error<T>(
    dir: BorrowedFd,
    name: &[u8],
    file: &OwnedFd,
    exclusive: bool,
    then: impl FnOnce() -> FsResult<T>,
) -> FsResult<T> {
    let r = then();
    if r.is_err() && exclusive {
        if let Ok(s) = fstat(file.as_fd()) {
            crate::openstate::delete_if_same(dir, name, (s.st_dev, s.st_ino));
        }
    }
    r
}

/// Read a directory (`d`, from `open_dir`) from `cookie` (a getdents64 `d_off`, 0 =
/// start), calling `emit` per entry (skipping `.` and `..`) until it returns false or
/// the directory ends. Returns true at end of directory.
pub fn read_dir(
    d: OwnedFd,
    cookie: u64,
    mut emit: impl FnMut(u64, u64, FileType, &[u8]) -> bool,
) -> FsResult<bool> {
    if cookie != 0 {
        rfs::seek(&d, rustix::fs::SeekFrom::Start(cookie)).map_err(|_| Status::BadCookie)?;
    }
    let mut buf = vec![0u8; GETDENTS_BUF_BYTES];
    loop {
        let n = getdents64(d.as_fd(), &mut buf)?;
        if n == 0 {
            return Ok(true);
        }
        let mut pos = 0usize;
        while pos + DIRENT_NAME_AT <= n {
            let rec = &buf[pos..];
            let ino = u64::from_ne_bytes(rec[DIRENT_INO_AT..][..8].try_into().unwrap());
            let off = u64::from_ne_bytes(rec[DIRENT_OFF_AT..][..8].try_into().unwrap());
            let reclen =
                u16::from_ne_bytes(rec[DIRENT_RECLEN_AT..][..2].try_into().unwrap()) as usize;
            let dtype = rec[DIRENT_TYPE_AT];
            if reclen < DIRENT_RECLEN_MIN || pos + reclen > n {
                return Err(Status::Io);
            }
            let name_area = &buf[pos + DIRENT_NAME_AT..pos + reclen];
            let name =
                &name_area[..name_area.iter().position(|&b| b == 0).unwrap_or(name_area.len())];
            pos += reclen;
            if name == b"." || name == b".." {
                continue;
            }
            let ftype = match dtype {
                libc::DT_DIR => FileType::Directory,
                libc::DT_LNK => FileType::Symlink,
                libc::DT_CHR => FileType::CharDevice,
                libc::DT_BLK => FileType::BlockDevice,
                libc::DT_FIFO => FileType::Fifo,
                libc::DT_SOCK => FileType::Socket,
                _ => FileType::Regular,
            };
            if !emit(off, ino, ftype, name) {
                return Ok(false);
            }
        }
    }
}

fn getdents64(fd: BorrowedFd, buf: &mut [u8]) -> FsResult<usize> {
    // SAFETY: getdents64 writes at most buf.len() bytes into buf, which we own mutably.
    let r =
        unsafe { libc::syscall(libc::SYS_getdents64, fd.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
    if r < 0 {
        Err(st(Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO),
        )))
    } else {
        Ok(r as usize)
    }
}

/// pread until `buf` is full or end of file.
pub fn pread_full(fd: BorrowedFd, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(dir: BorrowedFd, name: &[u8], exclusive: bool) -> OwnedFd {
        let mut fl = OFlags::RDONLY | OFlags::CREATE | OFlags::NOFOLLOW;
        if exclusive {
            fl |= OFlags::EXCL;
        }
        open_in(dir, name, fl, 0o644).unwrap()
    }

    #[test]
    fn a_failed_exclusive_create_leaves_no_file() {
        let d = tempfile::tempdir().unwrap();
        let dir = rfs::open(d.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let f = create(dir.as_fd(), b"x", true);
        let r: FsResult<()> =
            undo_create_on_error(dir.as_fd(), b"x", &f, true, || Err(Status::Limit));
        assert_eq!(r, Err(Status::Limit));
        assert!(!d.path().join("x").exists(), "a failed exclusive create left its file");
        // So the retry creates it afresh instead of answering EXIST.
        let f = create(dir.as_fd(), b"x", true);
        assert_eq!(undo_create_on_error(dir.as_fd(), b"x", &f, true, || Ok(7)), Ok(7));
        assert!(d.path().join("x").exists());
        // A non-exclusive create may have opened an existing file: never removed.
        let f = create(dir.as_fd(), b"x", false);
        let r: FsResult<()> =
            undo_create_on_error(dir.as_fd(), b"x", &f, false, || Err(Status::Io));
        assert!(r.is_err() && d.path().join("x").exists());
    }
}
