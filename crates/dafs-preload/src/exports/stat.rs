//! The stat family: `stat`/`lstat`/`fstatat`/`fstat` (and their `64` twins and the
//! pre-2.33 `__xstat` wrappers), `statx`, and the conversion of protocol attributes.

use std::ffi::{c_char, c_int};

use dafs_proto::{Attr, FileType};

use super::args::{at_flags, classify, dafs_fd, neg, on_path, Mode, MODE_PERM_BITS, NS_PER_SEC, P};
use crate::real::ret;
use crate::state::{err, is_dafs_fd, with, Target};

/// Major device number of dafs files (0xdaf reads "daf"); the minor number tells the
/// server's file systems apart.
const DEV_MAJOR: u32 = 0xdaf;
/// Linux minor numbers have 20 bits (the kernel's MINORBITS): the fsid is cut to that.
const DEV_MINOR_MASK: u32 = 0xfffff;
/// The preferred I/O size reported (`st_blksize`): programs size their buffers by it
/// (cp, stdio), and each request to the server is a network round trip, so larger
/// requests than a local disk's 4 KiB pay off. 1 MiB, as NFS reports (its rsize): cp
/// then copies in 1 MiB reads and writes, each one direct transfer.
const IO_SIZE_PREFERRED_BYTES: u32 = 1 << 20;
/// `st_blocks` counts 512-byte units whatever the file system's block size.
const STAT_BLOCK_BYTES: u64 = 512;
/// The size of the kernel's `struct statx`.
const STATX_BYTES: usize = 256;

fn type_bits(t: FileType) -> Mode {
    match t {
        FileType::Regular => libc::S_IFREG,
        FileType::Directory => libc::S_IFDIR,
        FileType::Symlink => libc::S_IFLNK,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Fifo => libc::S_IFIFO,
        FileType::Socket => libc::S_IFSOCK,
    }
}

/// Device number reported for dafs files: major 0xdaf, minor from the server's fsid.
fn dev_of(a: &Attr) -> (u32, u32) {
    (DEV_MAJOR, (a.fsid as u32) & DEV_MINOR_MASK)
}

unsafe fn fill_stat(a: &Attr, st: *mut libc::stat) {
    // SAFETY: the caller's out-buffer of the right type.
    let s = unsafe { &mut *st };
    // SAFETY: plain integers.
    *s = unsafe { std::mem::zeroed() };
    let (ma, mi) = dev_of(a);
    s.st_dev = libc::makedev(ma, mi);
    s.st_ino = a.fileid;
    s.st_mode = type_bits(a.ftype) | (a.mode & MODE_PERM_BITS);
    s.st_nlink = a.nlink as _;
    s.st_uid = a.uid;
    s.st_gid = a.gid;
    s.st_rdev = a.rdev;
    s.st_size = a.size as i64;
    s.st_blksize = IO_SIZE_PREFERRED_BYTES as _;
    s.st_blocks = a.used.div_ceil(STAT_BLOCK_BYTES) as i64;
    s.st_atime = a.atime_ns.div_euclid(NS_PER_SEC);
    s.st_atime_nsec = a.atime_ns.rem_euclid(NS_PER_SEC);
    s.st_mtime = a.mtime_ns.div_euclid(NS_PER_SEC);
    s.st_mtime_nsec = a.mtime_ns.rem_euclid(NS_PER_SEC);
    s.st_ctime = a.ctime_ns.div_euclid(NS_PER_SEC);
    s.st_ctime_nsec = a.ctime_ns.rem_euclid(NS_PER_SEC);
}

/// `struct statx` (linux/stat.h), 256 bytes.
#[repr(C)]
pub struct StatxTs {
    tv_sec: i64,
    tv_nsec: u32,
    _r: i32,
}
#[repr(C)]
pub struct Statx {
    stx_mask: u32,
    stx_blksize: u32,
    stx_attributes: u64,
    stx_nlink: u32,
    stx_uid: u32,
    stx_gid: u32,
    stx_mode: u16,
    _spare0: u16,
    stx_ino: u64,
    stx_size: u64,
    stx_blocks: u64,
    stx_attributes_mask: u64,
    stx_atime: StatxTs,
    stx_btime: StatxTs,
    stx_ctime: StatxTs,
    stx_mtime: StatxTs,
    stx_rdev_major: u32,
    stx_rdev_minor: u32,
    stx_dev_major: u32,
    stx_dev_minor: u32,
    _spare2: [u64; 14],
}
const _: () = assert!(std::mem::size_of::<Statx>() == STATX_BYTES);

fn ts(ns: i64) -> StatxTs {
    StatxTs { tv_sec: ns.div_euclid(NS_PER_SEC), tv_nsec: ns.rem_euclid(NS_PER_SEC) as u32, _r: 0 }
}

unsafe fn fill_statx(a: &Attr, out: *mut Statx) {
    let (ma, mi) = dev_of(a);
    let v = Statx {
        stx_mask: libc::STATX_BASIC_STATS,
        stx_blksize: IO_SIZE_PREFERRED_BYTES,
        stx_attributes: 0,
        stx_nlink: a.nlink,
        stx_uid: a.uid,
        stx_gid: a.gid,
        stx_mode: (type_bits(a.ftype) | (a.mode & MODE_PERM_BITS)) as u16,
        _spare0: 0,
        stx_ino: a.fileid,
        stx_size: a.size,
        stx_blocks: a.used.div_ceil(STAT_BLOCK_BYTES),
        stx_attributes_mask: 0,
        stx_atime: ts(a.atime_ns),
        stx_btime: ts(0),
        stx_ctime: ts(a.ctime_ns),
        stx_mtime: ts(a.mtime_ns),
        stx_rdev_major: libc::major(a.rdev),
        stx_rdev_minor: libc::minor(a.rdev),
        stx_dev_major: ma,
        stx_dev_minor: mi,
        _spare2: [0; 14],
    };
    // SAFETY: the caller's 256-byte out-buffer.
    unsafe { out.write(v) };
}

/// Attributes of a path target. A trailing slash (or final '.') follows a final symlink
/// even for lstat, and demands a directory (ENOTDIR), as the kernel's lookup does.
pub(super) fn path_attr(t: &Target, follow: bool) -> Result<Attr, c_int> {
    on_path(t, |c, p| {
        let a = if follow || t.tail.dir_only() { c.stat(p)? } else { c.lstat(p)? };
        if t.tail.dir_only() && !a.is_dir() {
            return err(libc::ENOTDIR);
        }
        Ok(a)
    })
}

/// The flags fstatat takes (others: EINVAL).
const FSTATAT_FLAGS: c_int =
    libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH | libc::AT_NO_AUTOMOUNT;
/// statx adds the synchronisation choice.
const STATX_FLAGS: c_int = FSTATAT_FLAGS | libc::AT_STATX_SYNC_TYPE;

pub(super) fn fd_attr(fd: c_int) -> Result<Attr, c_int> {
    with(|st| st.with_ofd(fd, |c, o| Ok(c.getattr(o.fh)?)))
}

/// stat `path` relative to `dirfd` into `buf`: a dafs path is served here; any other
/// path goes to `next` (as given, or rewritten to an absolute path).
unsafe fn stat_at(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
    next: impl FnOnce(*const c_char) -> c_int,
) -> c_int {
    // fstatat(fd, "", buf, AT_EMPTY_PATH) is fstat(fd).
    if flags & libc::AT_EMPTY_PATH != 0
        && !path.is_null()
        && unsafe { *path } == 0
        && is_dafs_fd(dirfd)
    {
        return unsafe { fstat(dirfd, buf) };
    }
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(at_flags(flags, FSTATAT_FLAGS)
            .and_then(|_| path_attr(&t, flags & libc::AT_SYMLINK_NOFOLLOW == 0))
            .map(|a| {
                unsafe { fill_stat(&a, buf) };
                0
            })),
        P::Err(e) => neg(e),
        P::Local(p, _k) => next(p),
    }
}

// struct stat64 is struct stat on the supported (LP64) targets.
interpose! {
    fn stat | stat64 (path: *const c_char, buf: *mut libc::stat) -> c_int where next {
        unsafe { stat_at(libc::AT_FDCWD, path, buf, 0, |p| next(p, buf)) }
    }
}
interpose! {
    fn lstat | lstat64 (path: *const c_char, buf: *mut libc::stat) -> c_int where next {
        unsafe { stat_at(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW, |p| next(p, buf)) }
    }
}
interpose! {
    fn fstatat | fstatat64 (
        dirfd: c_int,
        path: *const c_char,
        buf: *mut libc::stat,
        flags: c_int,
    ) -> c_int
    where next
    {
        unsafe { stat_at(dirfd, path, buf, flags, |p| next(dirfd, p, buf, flags)) }
    }
}
interpose! {
    fn fstat | fstat64 (fd: c_int, buf: *mut libc::stat) -> c_int where next {
        if let Some(_g) = dafs_fd(fd) {
            return ret(fd_attr(fd).map(|a| {
                unsafe { fill_stat(&a, buf) };
                0
            }));
        }
        next(fd, buf)
    }
}

/// The pre-2.33 wrappers old binaries import: each takes a leading `ver`, which selects
/// the `struct stat` layout (the kernel's on the supported targets), and then the
/// arguments of the function it stands for.
macro_rules! versioned_stat {
    ($($name:ident => $to:ident($($arg:ident : $ty:ty),*);)+) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(_ver: c_int, $($arg: $ty),*) -> c_int {
            unsafe { $to($($arg),*) }
        }
    )+};
}
versioned_stat! {
    __xstat => stat(path: *const c_char, buf: *mut libc::stat);
    __xstat64 => stat64(path: *const c_char, buf: *mut libc::stat);
    __lxstat => lstat(path: *const c_char, buf: *mut libc::stat);
    __lxstat64 => lstat64(path: *const c_char, buf: *mut libc::stat);
    __fxstat => fstat(fd: c_int, buf: *mut libc::stat);
    __fxstat64 => fstat64(fd: c_int, buf: *mut libc::stat);
    __fxstatat => fstatat(
        dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int
    );
    __fxstatat64 => fstatat64(
        dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int
    );
}

#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: u32,
    buf: *mut Statx,
) -> c_int {
    if flags & libc::AT_EMPTY_PATH != 0 && !path.is_null() && unsafe { *path } == 0 {
        if let Some(_g) = dafs_fd(dirfd) {
            return ret(fd_attr(dirfd).map(|a| {
                unsafe { fill_statx(&a, buf) };
                0
            }));
        }
    }
    match unsafe { classify(dirfd, path) } {
        P::Dafs(t, _g) => ret(at_flags(flags, STATX_FLAGS)
            .and_then(|_| path_attr(&t, flags & libc::AT_SYMLINK_NOFOLLOW == 0))
            .map(|a| {
                unsafe { fill_statx(&a, buf) };
                0
            })),
        P::Err(e) => neg(e),
        P::Local(p, _k) => real!(statx: fn(c_int, *const c_char, c_int, u32, *mut Statx) -> c_int)(
            dirfd, p, flags, mask, buf,
        ),
    }
}
