//! Named attributes (GET, SET, LIST, REMOVE), kept as the object's `user.` extended
//! attributes (`crate::nattr`). SET and REMOVE check for a read-only export.

use std::os::fd::AsFd;

use dafs_proto::{FileHandle, Reply, Status};

use super::check_writable;
use crate::{nattr, Shared};

/// GET: the value goes into `held`, which the reply borrows.
pub(super) fn get<'a>(
    sh: &Shared,
    fh: &FileHandle,
    name: &[u8],
    held: &'a mut Vec<u8>,
) -> Result<Reply<'a>, Status> {
    let d = sh.handles.resolve(fh)?;
    *held = nattr::get(d.fd.as_fd(), name)?;
    Ok(Reply::NamedAttr { value: held })
}

pub(super) fn set(
    sh: &Shared,
    fh: &FileHandle,
    flags: u32,
    name: &[u8],
    value: &[u8],
) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(fh)?;
    check_writable(sh, d.export)?;
    nattr::set(d.fd.as_fd(), name, value, flags)?;
    Ok(Reply::Empty)
}

/// LIST: the names go into `held`, which the reply borrows.
pub(super) fn list<'a>(
    sh: &Shared,
    fh: &FileHandle,
    held: &'a mut Vec<u8>,
) -> Result<Reply<'a>, Status> {
    let d = sh.handles.resolve(fh)?;
    *held = nattr::list(d.fd.as_fd())?;
    Ok(Reply::NamedAttrList { names: held })
}

pub(super) fn remove(sh: &Shared, fh: &FileHandle, name: &[u8]) -> Result<Reply<'static>, Status> {
    let d = sh.handles.resolve(fh)?;
    check_writable(sh, d.export)?;
    nattr::remove(d.fd.as_fd(), name)?;
    Ok(Reply::Empty)
}
