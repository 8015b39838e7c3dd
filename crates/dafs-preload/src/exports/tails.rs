//! The kernel's rules for the end of a path that lexical normalisation drops ("f/",
//! "d/.", ".."): each namespace call checks them before it asks the server, which only
//! ever sees the normalised name. The errnos are Linux's (fs/namei.c).

use dafs_client::{Client, Error};
use dafs_proto::Status;

use crate::state::{err, Last, Tail, FR};

/// A path that must name an existing directory when it ends in '/' or '.' (the object
/// it names, symlinks followed as a trailing slash does): ENOTDIR otherwise.
pub(super) fn existing_dir(c: &mut Client, p: &str, tail: Tail) -> FR<()> {
    if tail.dir_only() && !c.stat(p)?.is_dir() {
        return err(libc::ENOTDIR);
    }
    Ok(())
}

/// A new name for a non-directory (link, symlink, mknod): "." or ".." exist already
/// (EEXIST); a trailing slash cannot name a new file (ENOENT, EEXIST if it exists).
pub(super) fn new_name(c: &mut Client, p: &str, tail: Tail) -> FR<()> {
    if tail.dots() {
        return err(libc::EEXIST);
    }
    if tail.slash {
        return match c.lstat(p) {
            Ok(_) => err(libc::EEXIST),
            Err(Error::Status(Status::NoEnt)) => err(libc::ENOENT),
            Err(e) => Err(e.into()),
        };
    }
    Ok(())
}

/// unlink: "." and ".." are directories (EISDIR); "x/" is EISDIR for a directory,
/// ENOTDIR for anything else (the last component is not followed).
pub(super) fn unlink(c: &mut Client, p: &str, tail: Tail) -> FR<()> {
    if tail.dots() {
        return err(libc::EISDIR);
    }
    if tail.slash {
        return err(if c.lstat(p)?.is_dir() { libc::EISDIR } else { libc::ENOTDIR });
    }
    Ok(())
}

/// rmdir: a path ending in "." is EINVAL, in ".." ENOTEMPTY (a trailing slash is fine).
pub(super) fn rmdir(tail: Tail) -> FR<()> {
    match tail.last {
        Last::Dot => err(libc::EINVAL),
        Last::DotDot => err(libc::ENOTEMPTY),
        Last::Name => Ok(()),
    }
}

/// rename: "." or ".." at either end is EBUSY (EEXIST as the target of
/// RENAME_NOREPLACE); a trailing slash at either end needs the source to be a
/// directory (ENOTDIR), which must exist first (ENOENT).
pub(super) fn rename(c: &mut Client, from: (&str, Tail), to: Tail, noreplace: bool) -> FR<()> {
    if from.1.dots() {
        return err(libc::EBUSY);
    }
    if to.dots() {
        return err(if noreplace { libc::EEXIST } else { libc::EBUSY });
    }
    if (from.1.slash || to.slash) && !c.lstat(from.0)?.is_dir() {
        return err(libc::ENOTDIR);
    }
    Ok(())
}
