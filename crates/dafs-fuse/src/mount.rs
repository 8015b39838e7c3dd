//! Mounting and unmounting: [`mount`] serves until the mount goes away (by [`unmount`],
//! `fusermount3 -u`, or a SIGINT/SIGTERM/SIGHUP to this process), [`unmount`] detaches
//! it (through fusermount3 when not root).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use dafs_client::Client;

use crate::error::MountError;
use crate::fs::{Connect, DafsFs};
use crate::fusermount;
use crate::mountinfo::{absolute, is_dafs_mount};
use crate::options::MountOptions;

/// The device fuser and fusermount3 open to serve a mount.
const FUSE_DEVICE: &str = "/dev/fuse";
/// Set to "1": mount through fusermount3 even as root (see [`mount`]).
const VIA_FUSERMOUNT_ENV: &str = "DAFS_MOUNT_VIA_FUSERMOUNT";
/// The read-ahead the mount asks for, KiB: as large as one request (`IO_BYTES_MAX`), so a
/// sequential reader keeps whole 1 MiB requests in flight. The kernel caps a FUSE
/// mount's read-ahead at the system default (128 KiB) whatever the INIT reply says; root
/// may raise it in /sys/class/bdi.
const READ_AHEAD_KB: u32 = crate::fs::IO_BYTES_MAX / 1024;
/// The signals that unmount: a terminal's ^C, a service manager's stop, a closed terminal.
const UNMOUNT_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Unmount the dafs mount at `path`. `lazy`: detach it now even while programs still
/// use it (they keep their open files; the mount disappears from the namespace).
pub fn unmount(path: &Path, lazy: bool) -> Result<(), MountError> {
    let abs = absolute(path).map_err(|source| MountError::Io { path: path.into(), source })?;
    if !is_dafs_mount(&abs) {
        return Err(MountError::NotMounted { path: abs });
    }
    let Ok(c) = CString::new(abs.as_os_str().as_bytes()) else {
        return Err(MountError::PathNul { path: abs });
    };
    // SAFETY: c is a valid NUL-terminated path for the duration of the call.
    let r = unsafe { libc::umount2(c.as_ptr(), if lazy { libc::MNT_DETACH } else { 0 }) };
    if r == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        // Not root: the setuid helper unmounts what this user mounted.
        Some(libc::EPERM) => fusermount::unmount(&abs, lazy),
        Some(libc::EBUSY) => Err(MountError::Busy { path: abs, source: err }),
        _ => Err(MountError::Unmount { path: abs, source: err }),
    }
}

/// Mount `c`'s export on `mountpoint` and serve it until it is unmounted; `connect`
/// makes a session like `c` for each I/O worker (`opts.io_threads`). SIGINT,
/// SIGTERM and SIGHUP unmount it (lazily when it is busy, so the process always ends
/// once programs let go). `on_mounted` runs once the mount is in place.
///
/// Call this before starting other threads: it blocks those signals in the calling
/// thread so that every thread started later inherits the mask and only the
/// dedicated signal thread receives them.
pub fn mount(
    c: Client,
    connect: Connect,
    mountpoint: &Path,
    opts: &MountOptions,
    on_mounted: impl FnOnce(),
) -> Result<(), MountError> {
    let md = std::fs::metadata(mountpoint)
        .map_err(|source| MountError::Io { path: mountpoint.into(), source })?;
    if !md.is_dir() {
        return Err(MountError::NotDirectory { path: mountpoint.into() });
    }
    if is_dafs_mount(mountpoint) {
        return Err(MountError::AlreadyMounted { path: mountpoint.into() });
    }
    if !Path::new(FUSE_DEVICE).exists() {
        return Err(MountError::NoFuseDevice);
    }
    let abs = absolute(mountpoint)
        .map_err(|source| MountError::Io { path: mountpoint.into(), source })?;
    // Before the I/O workers start: they inherit the mask, so only the signal thread
    // receives the unmount signals.
    block_unmount_signals();
    let fs = DafsFs::new(c, opts, connect).map_err(MountError::ExportRoot)?;
    let notifier = fs.notifier_slot();

    // Root mounts with mount(2) (fuser). Anyone else goes through the setuid helper
    // fusermount3 directly: fuser first opens /dev/fuse itself, which fails with EACCES
    // where the device is root-only (common in containers), while fusermount3 opens it
    // as root and hands us the descriptor.
    // DAFS_MOUNT_VIA_FUSERMOUNT=1 takes the helper's path as root too (the tests use it:
    // where /dev/fuse is root-only, nobody but root can mount at all).
    // SAFETY: geteuid has no preconditions.
    let via_helper = unsafe { libc::geteuid() } != 0
        || std::env::var_os(VIA_FUSERMOUNT_ENV).is_some_and(|v| v == "1");
    let mut session = if via_helper {
        let fd = fusermount::mount(&abs, &opts.fusermount_options())?;
        fuser::Session::from_fd(fs, fd, opts.acl())
    } else {
        fuser::Session::new(fs, &abs, &opts.fuse_options())
            .map_err(|source| MountError::Mount { path: abs.clone(), source })?
    };
    // A fresh slot: set exactly once.
    let _ = notifier.set(session.notifier());
    on_mounted();
    spawn_signal_thread(abs.clone())?;
    spawn_read_ahead_raise(abs.clone());
    // Returns when the kernel ends the connection: after any unmount of the mount.
    let r = session.run().map_err(|source| MountError::Serve { path: abs.clone(), source });
    if r.is_err() && via_helper && is_dafs_mount(&abs) {
        // Ended for another reason: do not leave a dead mount behind (a session made
        // from a descriptor does not unmount on drop).
        let _ = unmount(&abs, true);
    }
    r
}

/// Raise the mount's read-ahead to [`READ_AHEAD_KB`] once the kernel has initialized it
/// (its backing device, `/sys/class/bdi/MAJOR:MINOR`, is the mount's st_dev). From a
/// thread: the stat waits for the INIT reply, which the session's loop sends. Best
/// effort: not root, or no sysfs, leaves the kernel's default.
fn spawn_read_ahead_raise(path: PathBuf) {
    let raise = move || {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(&path)?.dev();
        let bdi = format!("/sys/class/bdi/{}:{}/read_ahead_kb", libc::major(dev), libc::minor(dev));
        std::fs::write(&bdi, READ_AHEAD_KB.to_string())?;
        tracing::debug!("read-ahead of {} raised to {READ_AHEAD_KB} KiB ({bdi})", path.display());
        Ok::<(), std::io::Error>(())
    };
    let spawned =
        std::thread::Builder::new().name("dafs-mount-readahead".into()).spawn(move || {
            if let Err(e) = raise() {
                tracing::debug!("read-ahead left at the kernel's default: {e}");
            }
        });
    if let Err(e) = spawned {
        tracing::debug!("read-ahead left at the kernel's default: {e}");
    }
}

/// [`UNMOUNT_SIGNALS`] as a signal set.
fn unmount_signal_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, initialized by sigemptyset before any use; the
    // signal numbers are valid.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in UNMOUNT_SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Block [`UNMOUNT_SIGNALS`] in this thread (and so in every thread it starts later):
/// only the signal thread, which waits for them, receives them.
fn block_unmount_signals() {
    let set = unmount_signal_set();
    // SAFETY: plain signal-mask manipulation on this thread.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// The thread that waits for [`UNMOUNT_SIGNALS`] and unmounts `path` (lazily when it is
/// busy); the unmount ends the session's `run`.
fn spawn_signal_thread(sig_path: PathBuf) -> Result<(), MountError> {
    std::thread::Builder::new()
        .name("dafs-mount-signals".into())
        .spawn(move || loop {
            let set = unmount_signal_set();
            let mut sig: libc::c_int = 0;
            // SAFETY: waits for one of the signals blocked above.
            if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                return;
            }
            tracing::info!("signal {sig}: unmounting {}", sig_path.display());
            if let Err(e) = unmount(&sig_path, false).or_else(|_| unmount(&sig_path, true)) {
                eprintln!("dafs: unmount {}: {e}", sig_path.display());
            }
        })
        .map_err(MountError::SignalThread)?;
    Ok(())
}
