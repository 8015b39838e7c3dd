//! Configuration (`DAFS_MOUNT`) and lexical path handling.
//!
//! A path is a dafs path when, made absolute (against the virtual or real working
//! directory) and normalised lexically (`.`, `..` and repeated slashes removed, like a
//! mount point would be crossed), it equals a mount prefix or lies below it. A path that
//! leaves the prefix through `..` is therefore simply not a dafs path.

/// One `PREFIX=URL` entry of `DAFS_MOUNT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountCfg {
    /// Normalised absolute prefix without a trailing slash (never "/").
    pub prefix: String,
    /// The URL as configured (for messages).
    pub url: String,
    /// Connect target for `Client::connect` (`host:port` or `dafs+shm:///x.sock`).
    pub target: String,
    /// Directory inside the export the prefix maps to ("" = the export root).
    pub base: String,
}

/// Parse `DAFS_MOUNT`: comma-separated `PREFIX=URL` entries, e.g.
/// `/dafs=dafs://127.0.0.1:7420/,/scratch=dafs://127.0.0.1:7421/tmp`.
pub fn parse_mounts(spec: &str) -> Result<Vec<MountCfg>, String> {
    let mut out: Vec<MountCfg> = Vec::new();
    for ent in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (prefix, url) =
            ent.split_once('=').ok_or_else(|| format!("`{ent}`: expected PREFIX=URL"))?;
        if !prefix.starts_with('/') {
            return Err(format!("`{prefix}`: the prefix must be an absolute path"));
        }
        let prefix = normalize(prefix);
        if prefix == "/" {
            return Err("the prefix must not be `/`".into());
        }
        let (target, path) = dafs_client::parse_url(url).map_err(|e| format!("`{url}`: {e}"))?;
        let base =
            path.split('/').filter(|p| !p.is_empty() && *p != ".").collect::<Vec<_>>().join("/");
        if base.split('/').any(|p| p == "..") {
            return Err(format!("`{url}`: `..` in the URL path"));
        }
        if out.iter().any(|m| m.prefix == prefix) {
            return Err(format!("`{prefix}` is configured twice"));
        }
        out.push(MountCfg { prefix, url: url.to_string(), target, base });
    }
    // Longest prefix first, so nested prefixes pick the deepest mount.
    out.sort_by_key(|m| std::cmp::Reverse(m.prefix.len()));
    Ok(out)
}

/// Lexical normalisation of an absolute path: "/a//b/./c/../d/" -> "/a/b/d"; ".." at
/// the root stays at the root (as the kernel does).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut s = String::with_capacity(path.len() + 1);
    for p in &parts {
        s.push('/');
        s.push_str(p);
    }
    if s.is_empty() {
        s.push('/');
    }
    s
}

/// Join `path` to the absolute directory `base` (if relative) and normalise.
pub fn absolute(base: &str, path: &str) -> String {
    if path.starts_with('/') {
        normalize(path)
    } else {
        normalize(&format!("{base}/{path}"))
    }
}

/// Which mount an absolute normalised path falls under, and its path inside the export.
pub fn split_mount(mounts: &[MountCfg], abs: &str) -> Option<(usize, String)> {
    for (i, m) in mounts.iter().enumerate() {
        let rest = match abs.strip_prefix(m.prefix.as_str()) {
            Some("") => "",
            Some(r) if r.starts_with('/') => &r[1..],
            _ => continue,
        };
        let rel = match (m.base.is_empty(), rest.is_empty()) {
            (true, _) => rest.to_string(),
            (false, true) => m.base.clone(),
            (false, false) => format!("{}/{}", m.base, rest),
        };
        return Some((i, rel));
    }
    None
}

/// Cheap pre-check before any locking: can this absolute path be under a prefix at all?
/// (Paths with ".." or "//" or "/./" are normalised first, so they always pass.)
pub fn maybe_mounted(mounts: &[MountCfg], path: &[u8]) -> bool {
    if path.windows(2).any(|w| w == b"/." || w == b"//") {
        return true;
    }
    mounts.iter().any(|m| {
        let p = m.prefix.as_bytes();
        path.starts_with(p) && (path.len() == p.len() || path[p.len()] == b'/')
    })
}

/// Does the raw absolute path walk through a prefix ("/dafs/..", "/dafs//x")?
pub fn through_prefix(mounts: &[MountCfg], path: &[u8]) -> bool {
    mounts.iter().any(|m| {
        let p = m.prefix.as_bytes();
        path.starts_with(p) && path.get(p.len()) == Some(&b'/')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation() {
        assert_eq!(normalize("/a//b/./c/../d/"), "/a/b/d");
        assert_eq!(normalize("/../.."), "/");
        assert_eq!(normalize("/"), "/");
        assert_eq!(absolute("/dafs/x", "../y/./z"), "/dafs/y/z");
        assert_eq!(absolute("/dafs", "/etc//passwd"), "/etc/passwd");
    }

    #[test]
    fn mounts() {
        let m =
            parse_mounts("/dafs=dafs://127.0.0.1:9/, /d2/=dafs://127.0.0.1:10/sub/dir").unwrap();
        assert_eq!(m.len(), 2);
        let d = m.iter().position(|m| m.prefix == "/dafs").unwrap();
        let d2 = m.iter().position(|m| m.prefix == "/d2").unwrap();
        assert_eq!(m[d].target, "127.0.0.1:9");
        assert_eq!(split_mount(&m, "/dafs"), Some((d, String::new())));
        assert_eq!(split_mount(&m, "/dafs/a/b"), Some((d, "a/b".into())));
        assert_eq!(split_mount(&m, "/dafsx/a"), None);
        assert_eq!(split_mount(&m, "/d2/f"), Some((d2, "sub/dir/f".into())));
        assert_eq!(split_mount(&m, "/d2"), Some((d2, "sub/dir".into())));
        // escaping the prefix through ".." is not a dafs path
        assert_eq!(split_mount(&m, &absolute("/", "/dafs/../etc/passwd")), None);
        assert!(parse_mounts("dafs=dafs://x:1/").is_err());
        assert!(parse_mounts("/=dafs://x:1/").is_err());
        assert!(parse_mounts("/a").is_err());
        assert!(parse_mounts("/a=http://x").is_err());
        assert!(parse_mounts("/a=dafs://x:1/,/a=dafs://x:2/").is_err());
        assert!(maybe_mounted(&m, b"/dafs/x"));
        assert!(maybe_mounted(&m, b"/dafs"));
        assert!(!maybe_mounted(&m, b"/dafsx"));
        assert!(!maybe_mounted(&m, b"/usr/lib/x.so"));
        assert!(maybe_mounted(&m, b"/usr/../dafs/x"));
    }
}
