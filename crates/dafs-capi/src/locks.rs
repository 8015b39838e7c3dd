//! Byte-range locks (`dafs_lock`, `dafs_lock_wait`, `dafs_test_lock`, `dafs_unlock`): the
//! server's advisory locks, owned by the client's session. The SQLite VFS
//! (adapters/sqlite) builds SQLite's lock states on them.

use super::*;

/// A lock of another session that conflicts (filled in by `dafs_test_lock`). Mirrored in
/// include/dafs.h.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct dafs_lock_info_t {
    pub offset: u64,
    /// 0 = to the end of the 64-bit range.
    pub len: u64,
    /// The owning session's id (as `dafs admin` shows it).
    pub owner: u64,
    pub exclusive: u32,
    pub reserved: u32,
}

/// `dafs_lock_wait` with a negative timeout waits this long at most: a lock that stays
/// held for a day is a stuck peer, and a bounded wait keeps the call finite.
const LOCK_WAIT_FOREVER_MS: u64 = 24 * 3600 * 1000;

#[no_mangle]
pub extern "C" fn dafs_lock(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    offset: u64,
    len: u64,
    exclusive: c_int,
) -> c_int {
    // A conflict is Status::Denied, whose errno is EAGAIN (as fcntl F_SETLK reports it).
    neg(with_file(client, file, |inner, f| {
        inner.client.lock(f, offset, len, exclusive != 0).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_lock_wait(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    offset: u64,
    len: u64,
    exclusive: c_int,
    timeout_ms: c_int,
) -> c_int {
    let ms = u64::try_from(timeout_ms).unwrap_or(LOCK_WAIT_FOREVER_MS);
    neg(with_file(client, file, |inner, f| {
        let t = Duration::from_millis(ms);
        inner.client.lock_wait(f, offset, len, exclusive != 0, t).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_test_lock(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    offset: u64,
    len: u64,
    exclusive: c_int,
    out: *mut dafs_lock_info_t,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        match inner.client.test_lock(f, offset, len, exclusive != 0).map_err(errno)? {
            None => Ok(0),
            Some(l) => {
                if !out.is_null() {
                    let info = dafs_lock_info_t {
                        offset: l.offset,
                        len: l.len,
                        owner: l.owner,
                        exclusive: l.exclusive as u32,
                        reserved: 0,
                    };
                    // SAFETY: non-null, caller-owned storage for one dafs_lock_info_t.
                    unsafe { out.write(info) };
                }
                Ok(1)
            }
        }
    }))
}

#[no_mangle]
pub extern "C" fn dafs_unlock(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    offset: u64,
    len: u64,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        inner.client.unlock(f, offset, len).map(|_| 0).map_err(errno)
    }))
}
