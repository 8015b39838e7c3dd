//! Named attributes, backed by the exported file system's extended attributes in the
//! `user.` namespace. Clients see names without the prefix; a file system without
//! user xattrs answers NOTSUPP.

use std::os::fd::BorrowedFd;

use dafs_proto::types::{nattr_flags, NATTR_VALUE_BYTES_MAX};
use dafs_proto::Status;
use rustix::fs::XattrFlags;
use rustix::io::Errno;

use crate::fsops;

const PREFIX: &str = "user.";

fn status(e: Errno) -> Status {
    match e {
        Errno::NODATA => Status::NoAttr,
        Errno::NOTSUP => Status::NotSupp,
        Errno::RANGE | Errno::TOOBIG => Status::FBig,
        Errno::NOSPC => Status::NoSpc,
        e => fsops::st(e),
    }
}

fn full_name(name: &[u8]) -> Result<String, Status> {
    let n = std::str::from_utf8(name).map_err(|_| Status::Inval)?;
    Ok(format!("{PREFIX}{n}"))
}

pub fn get(fd: BorrowedFd, name: &[u8]) -> Result<Vec<u8>, Status> {
    let path = fsops::proc_path(fd);
    let mut buf = vec![0u8; NATTR_VALUE_BYTES_MAX];
    let n = rustix::fs::getxattr(path.as_c_str(), full_name(name)?.as_str(), &mut buf)
        .map_err(status)?;
    buf.truncate(n);
    Ok(buf)
}

pub fn set(fd: BorrowedFd, name: &[u8], value: &[u8], flags: u32) -> Result<(), Status> {
    let path = fsops::proc_path(fd);
    let xf = if flags & nattr_flags::CREATE != 0 {
        XattrFlags::CREATE
    } else if flags & nattr_flags::REPLACE != 0 {
        XattrFlags::REPLACE
    } else {
        XattrFlags::empty()
    };
    rustix::fs::setxattr(path.as_c_str(), full_name(name)?.as_str(), value, xf).map_err(status)
}

pub fn remove(fd: BorrowedFd, name: &[u8]) -> Result<(), Status> {
    let path = fsops::proc_path(fd);
    rustix::fs::removexattr(path.as_c_str(), full_name(name)?.as_str()).map_err(status)
}

/// Names (without the prefix) separated by NUL bytes.
pub fn list(fd: BorrowedFd) -> Result<Vec<u8>, Status> {
    let path = fsops::proc_path(fd);
    let mut buf = vec![0u8; 64 * 1024];
    let n = rustix::fs::listxattr(path.as_c_str(), &mut buf).map_err(status)?;
    let mut out = Vec::new();
    for name in buf[..n].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        if let Some(rest) = name.strip_prefix(PREFIX.as_bytes()) {
            if !out.is_empty() {
                out.push(0);
            }
            out.extend_from_slice(rest);
        }
    }
    Ok(out)
}
