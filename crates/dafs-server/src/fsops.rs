//! Thin, export-confined file system primitives. Every name resolution goes through
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to a directory the
//! client already holds, so no `..`, symlink or absolute path reaches outside it.
//! Objects are held as `O_PATH` descriptors; operations that Linux does not offer on
//! an `O_PATH` descriptor go through its `/proc/self/fd/N` name.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use dafs_proto::{Attr, FileType, FsStat, Status};
use rustix::fs::{self as rfs, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

pub type FsResult<T> = Result<T, Status>;

pub fn st(e: Errno) -> Status {
    Status::from_errno(e.raw_os_error())
}

pub fn io_st(e: std::io::Error) -> Status {
    Status::from_errno(e.raw_os_error().unwrap_or(5))
}

const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

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
pub fn reopen(fd: BorrowedFd, oflags: OFlags) -> FsResult<OwnedFd> {
    rfs::open(proc_path(fd).as_c_str(), oflags | OFlags::CLOEXEC, Mode::empty()).map_err(st)
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
        used: (s.st_blocks as u64).saturating_mul(512),
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
        name_max: s.f_namemax.min(255) as u32,
    })
}

pub fn timespec_from_ns(ns: i64) -> rfs::Timespec {
    rfs::Timespec {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_nsec: ns.rem_euclid(1_000_000_000) as _,
    }
}

/// Read a directory from `cookie` (a getdents64 `d_off`, 0 = start), calling `emit` per
/// entry (skipping `.` and `..`) until it returns false or the directory ends.
/// Returns true at end of directory.
pub fn read_dir(
    dir: BorrowedFd,
    cookie: u64,
    mut emit: impl FnMut(u64, u64, FileType, &[u8]) -> bool,
) -> FsResult<bool> {
    let d =
        rfs::openat(dir, c".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(st)?;
    if cookie != 0 {
        rfs::seek(&d, rustix::fs::SeekFrom::Start(cookie)).map_err(|_| Status::BadCookie)?;
    }
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = getdents64(d.as_fd(), &mut buf)?;
        if n == 0 {
            return Ok(true);
        }
        let mut pos = 0usize;
        while pos + 19 <= n {
            let ino = u64::from_ne_bytes(buf[pos..pos + 8].try_into().unwrap());
            let off = u64::from_ne_bytes(buf[pos + 8..pos + 16].try_into().unwrap());
            let reclen = u16::from_ne_bytes(buf[pos + 16..pos + 18].try_into().unwrap()) as usize;
            let dtype = buf[pos + 18];
            if reclen < 20 || pos + reclen > n {
                return Err(Status::Io);
            }
            let name_area = &buf[pos + 19..pos + reclen];
            let name =
                &name_area[..name_area.iter().position(|&b| b == 0).unwrap_or(name_area.len())];
            pos += reclen;
            if name == b"." || name == b".." {
                continue;
            }
            let ftype = match dtype {
                4 => FileType::Directory,
                10 => FileType::Symlink,
                2 => FileType::CharDevice,
                6 => FileType::BlockDevice,
                1 => FileType::Fifo,
                12 => FileType::Socket,
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
            std::io::Error::last_os_error().raw_os_error().unwrap_or(5),
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

/// pwrite all of `buf`.
pub fn pwrite_full(fd: BorrowedFd, buf: &[u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pwrite(fd, &buf[done..], offset + done as u64) {
            Ok(0) => return Err(std::io::Error::from_raw_os_error(28)),
            Ok(n) => done += n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}
