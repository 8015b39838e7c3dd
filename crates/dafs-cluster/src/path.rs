//! The normalized cluster path: the byte string every node and client hashes.
//!
//! Placement must give the same node for every spelling of a name, so a path is
//! normalized before it is hashed: absolute, components separated by exactly one `/`,
//! no `.` components, `..` resolved lexically (clamped at the root, as POSIX does for
//! `/..`), no trailing `/`. The root is `/`. Paths are bytes (DAFS names need not be
//! UTF-8); only NUL is refused, since no file system can hold it.

use std::fmt;

/// Longest path accepted, in bytes (Linux `PATH_MAX`): a longer one can name nothing.
pub const PATH_BYTES_MAX: usize = 4096;

/// Why a path cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("cluster path must be absolute (start with '/')")]
    NotAbsolute,
    #[error("cluster path contains a NUL byte")]
    Nul,
    #[error("cluster path longer than {PATH_BYTES_MAX} bytes")]
    TooLong,
}

/// A normalized absolute path (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterPath(Vec<u8>);

impl ClusterPath {
    /// Normalize `raw` (an absolute path, as bytes).
    pub fn new(raw: impl AsRef<[u8]>) -> Result<Self, PathError> {
        let raw = raw.as_ref();
        if raw.len() > PATH_BYTES_MAX {
            return Err(PathError::TooLong);
        }
        if raw.first() != Some(&b'/') {
            return Err(PathError::NotAbsolute);
        }
        if raw.contains(&0) {
            return Err(PathError::Nul);
        }
        let mut parts: Vec<&[u8]> = Vec::new();
        for comp in raw.split(|&b| b == b'/') {
            match comp {
                b"" | b"." => {}
                b".." => {
                    parts.pop();
                }
                c => parts.push(c),
            }
        }
        let mut out = Vec::with_capacity(raw.len());
        for p in &parts {
            out.push(b'/');
            out.extend_from_slice(p);
        }
        if out.is_empty() {
            out.push(b'/');
        }
        debug_assert!(out.len() <= raw.len().max(1));
        Ok(ClusterPath(out))
    }

    /// The root directory `/`.
    pub fn root() -> Self {
        ClusterPath(b"/".to_vec())
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0 == b"/"
    }

    /// The directory holding this name (`None` for the root): the virtual directory
    /// whose manager records the name.
    pub fn parent(&self) -> Option<ClusterPath> {
        if self.is_root() {
            return None;
        }
        let cut = self.0.iter().rposition(|&b| b == b'/').expect("normalized paths start with '/'");
        Some(ClusterPath(if cut == 0 { b"/".to_vec() } else { self.0[..cut].to_vec() }))
    }

    /// The last component (empty for the root).
    pub fn file_name(&self) -> &[u8] {
        let cut = self.0.iter().rposition(|&b| b == b'/').expect("normalized paths start with '/'");
        &self.0[cut + 1..]
    }
}

impl fmt::Display for ClusterPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        ClusterPath::new(s).unwrap().to_string()
    }

    #[test]
    fn spellings_of_one_name_normalize_alike() {
        assert_eq!(norm("/a/b"), "/a/b");
        assert_eq!(norm("//a///b/"), "/a/b");
        assert_eq!(norm("/a/./b/."), "/a/b");
        assert_eq!(norm("/a/x/../b"), "/a/b");
        assert_eq!(norm("/../a/b"), "/a/b");
        assert_eq!(norm("/"), "/");
        assert_eq!(norm("/.."), "/");
        assert_eq!(norm("/a/.."), "/");
    }

    #[test]
    fn bad_paths_are_refused() {
        assert_eq!(ClusterPath::new("a/b"), Err(PathError::NotAbsolute));
        assert_eq!(ClusterPath::new(""), Err(PathError::NotAbsolute));
        assert_eq!(ClusterPath::new(b"/a\0b"), Err(PathError::Nul));
        assert_eq!(ClusterPath::new(vec![b'/'; PATH_BYTES_MAX + 1]), Err(PathError::TooLong));
        assert!(ClusterPath::new(vec![b'/'; PATH_BYTES_MAX]).is_ok());
    }

    #[test]
    fn parent_and_name() {
        let p = ClusterPath::new("/a/b/c").unwrap();
        assert_eq!(p.parent().unwrap().to_string(), "/a/b");
        assert_eq!(p.file_name(), b"c");
        let top = ClusterPath::new("/a").unwrap();
        assert_eq!(top.parent().unwrap(), ClusterPath::root());
        assert_eq!(ClusterPath::root().parent(), None);
        assert_eq!(ClusterPath::root().file_name(), b"");
    }

    proptest::proptest! {
        /// Any input either fails with a reason or yields a normal form that is its own
        /// normal form (so every spelling of a name hashes alike).
        #[test]
        fn normalizing_is_idempotent(raw in proptest::collection::vec(proptest::sample::select(b"/.ab\0\xff".to_vec()), 0..40)) {
            if let Ok(p) = ClusterPath::new(&raw) {
                let again = ClusterPath::new(p.as_bytes()).unwrap();
                proptest::prop_assert_eq!(&again, &p);
                let b = p.as_bytes();
                proptest::prop_assert!(b == b"/" || !b.ends_with(b"/"));
                for bad in [&b"//"[..], b"/./", b"/../"] {
                    proptest::prop_assert!(!b.windows(bad.len()).any(|w| w == bad));
                }
                proptest::prop_assert!(!b.ends_with(b"/.") && !b.ends_with(b"/.."));
            }
        }
    }

    #[test]
    fn non_utf8_names_are_kept() {
        let p = ClusterPath::new(b"/d/\xff\xfe").unwrap();
        assert_eq!(p.as_bytes(), b"/d/\xff\xfe");
    }
}
