//! Byte-range locks (LOCK, LOCKT, LOCKU) in the server-wide lock table, owned by the
//! session. Regular files only.

use std::os::fd::AsFd;

use dafs_proto::{FileHandle, FileType, Reply, Status};

use crate::fsops;
use crate::locks::{self, LockResult};
use crate::Shared;

/// LOCK: granted, or `DENIED` on a conflict with another session's lock.
pub(super) fn lock(
    sh: &Shared,
    owner: u64,
    fh: &FileHandle,
    offset: u64,
    len: u64,
    ltype: u32,
) -> Result<Reply<'static>, Status> {
    let file = lockable(sh, fh)?;
    let r = locks::range(offset, len).ok_or(Status::Inval)?;
    match sh.locks.lock(file, owner, r, ltype) {
        LockResult::Granted => Ok(Reply::Empty),
        LockResult::Conflict(_) => Err(Status::Denied),
        LockResult::Limit => Err(Status::Limit),
    }
}

/// LOCKT: the first conflicting lock, if any (nothing is taken).
pub(super) fn test(
    sh: &Shared,
    owner: u64,
    fh: &FileHandle,
    offset: u64,
    len: u64,
    ltype: u32,
) -> Result<Reply<'static>, Status> {
    let file = lockable(sh, fh)?;
    let r = locks::range(offset, len).ok_or(Status::Inval)?;
    Ok(match sh.locks.test(file, owner, r, ltype) {
        None => Reply::LockTest { conflict: false, ltype: 0, owner: 0, offset: 0, len: 0 },
        Some(l) => Reply::LockTest {
            conflict: true,
            ltype: l.ltype,
            owner: opaque_owner(&sh.owner_key, l.owner),
            offset: l.start,
            len: if l.end == u64::MAX { 0 } else { l.end - l.start },
        },
    })
}

pub(super) fn unlock(
    sh: &Shared,
    owner: u64,
    fh: &FileHandle,
    offset: u64,
    len: u64,
) -> Result<Reply<'static>, Status> {
    let file = lockable(sh, fh)?;
    let r = locks::range(offset, len).ok_or(Status::Inval)?;
    sh.locks.unlock(file, owner, r);
    Ok(Reply::Empty)
}

/// What LOCKT reports as a conflicting lock's owner: a keyed digest of its session id
/// (key random per server start), never the id itself — a session id is what
/// SESSION_BIND names, so it must not leak to other clients. Equal owners still report
/// equal values, and 0 stays "no conflict".
fn opaque_owner(key: &[u8; 32], owner: u64) -> u64 {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(b"dafs lockt owner");
    mac.update(&owner.to_le_bytes());
    let d = mac.finalize().into_bytes();
    u64::from_le_bytes(d[..8].try_into().expect("a SHA-256 digest has 8 bytes")).max(1)
}

/// The lock-table key of a handle; locks apply to regular files only.
fn lockable(sh: &Shared, fh: &FileHandle) -> Result<(u64, u64), Status> {
    let d = sh.handles.resolve(fh)?;
    let s = fsops::fstat(d.fd.as_fd())?;
    match FileType::from_mode(s.st_mode) {
        FileType::Regular => Ok((s.st_dev, s.st_ino)),
        FileType::Directory => Err(Status::IsDir),
        _ => Err(Status::Inval),
    }
}
