//! Finding dafs mounts in /proc/self/mountinfo, and mount point paths as the kernel
//! shows them (absolute and lexically normalized, without touching the mount).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::options::SUBTYPE;

/// Index of the mount point among a mountinfo line's space-separated fields (proc(5):
/// mount ID, parent ID, major:minor, root, mount point, ...). The file system type and
/// the source are the two fields after the "-" separator.
const MOUNT_POINT_FIELD: usize = 4;

/// Is `path` the mount point of a dafs FUSE mount (per /proc/self/mountinfo)? Works on
/// a mount whose server process died (where stat of the path fails with ENOTCONN).
pub fn is_dafs_mount(path: &Path) -> bool {
    let Ok(abs) = absolute(path) else { return false };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    info.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let Some(sep) = f.iter().position(|x| *x == "-") else { return false };
        if f.len() < sep + 3
            || f.get(MOUNT_POINT_FIELD).map(|m| unescape_mountinfo(m)) != Some(abs.clone())
        {
            return false;
        }
        // Mounted by fusermount3 the type carries our subtype; mounted directly (as
        // root) it is plain "fuse" and our source name tells.
        let (fstype, source) = (f[sep + 1], f[sep + 2]);
        fstype.strip_prefix("fuse.") == Some(SUBTYPE)
            || (fstype == "fuse" && source.starts_with("dafs:"))
    })
}

fn unescape_mountinfo(s: &str) -> PathBuf {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            match u8::try_from(v) {
                Ok(v) => out.push(v),
                // Not an escape the kernel writes (above \377): keep it as text.
                Err(_) => out.extend_from_slice(&b[i..i + 4]),
            }
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

/// The absolute, lexically normalized form of `path`, without touching the mount
/// itself (canonicalize would stat it, which hangs or fails on a dead mount).
pub(crate) fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    let p = std::path::absolute(path)?;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_unescape() {
        assert_eq!(unescape_mountinfo("/tmp/a\\040b"), PathBuf::from("/tmp/a b"));
        assert_eq!(unescape_mountinfo("/x\\134y"), PathBuf::from("/x\\y"));
        assert_eq!(unescape_mountinfo("/plain"), PathBuf::from("/plain"));
        assert_eq!(unescape_mountinfo("/odd\\777"), PathBuf::from("/odd\\777"));
        assert_eq!(unescape_mountinfo("/end\\04"), PathBuf::from("/end\\04"));
    }

    #[test]
    fn absolute_is_lexical() {
        assert_eq!(absolute(Path::new("/a/./b/../c")).unwrap(), PathBuf::from("/a/c"));
    }
}
