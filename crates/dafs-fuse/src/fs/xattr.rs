//! Extended attributes over DAFS named attributes: only the `user.` namespace has a
//! DAFS counterpart.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use dafs_client::dafs_proto::types::{validate_nattr_name, NATTR_VALUE_BYTES_MAX};

/// Longest extended-attribute value: the longest named-attribute value the protocol
/// carries.
pub(super) const XATTR_VALUE_BYTES_MAX: usize = NATTR_VALUE_BYTES_MAX;
/// The extended-attribute namespace that maps to DAFS named attributes.
pub(super) const USER_PREFIX: &[u8] = b"user.";

/// `user.NAME` → `NAME`, when NAME can be a DAFS named attribute (printable ASCII
/// without space, 1..=NATTR_NAME_BYTES_MAX bytes: the protocol's own check). Other
/// namespaces (security., system., trusted.) have no DAFS counterpart.
pub(super) fn nattr_name(name: &OsStr) -> Option<&str> {
    let rest = name.as_bytes().strip_prefix(USER_PREFIX)?;
    validate_nattr_name(rest).ok()?;
    std::str::from_utf8(rest).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xattr_names() {
        assert_eq!(nattr_name(OsStr::new("user.color")), Some("color"));
        assert_eq!(nattr_name(OsStr::new("user.a/b")), Some("a/b"));
        assert_eq!(nattr_name(OsStr::new("security.capability")), None);
        assert_eq!(nattr_name(OsStr::new("user.")), None);
        assert_eq!(nattr_name(OsStr::new("user.has space")), None);
        assert_eq!(nattr_name(OsStr::new(&format!("user.{}", "x".repeat(201)))), None);
    }

    #[test]
    fn xattr_limits_are_the_protocol_limits() {
        assert_eq!(XATTR_VALUE_BYTES_MAX, 65536);
        let longest = format!("user.{}", "x".repeat(200));
        assert_eq!(nattr_name(OsStr::new(&longest)).map(str::len), Some(200));
        assert_eq!(nattr_name(OsStr::new("user.tab\there")), None);
        assert_eq!(nattr_name(OsStr::new("user.del\x7f")), None);
        assert_eq!(nattr_name(OsStr::new("user.~!")), Some("~!"));
    }
}
