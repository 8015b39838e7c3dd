//! Mount options: what the kernel may cache and how the mount looks to other users,
//! parsed from `-o` lists and turned into fuser's and fusermount3's option lists.

use std::time::Duration;

use fuser::MountOption;

use crate::error::OptionError;

/// Default lifetime of the kernel's attribute and name caches: long enough that a
/// `ls -l` or a build does not ask the server again for every stat, short enough that
/// changes made by other clients show within a second.
const ATTR_TTL_DEFAULT: Duration = Duration::from_secs(1);
/// Longest `attr_ttl_ms` accepted (one hour): beyond that other clients' changes would
/// stay invisible for longer than anyone expects of a network file system.
pub(crate) const ATTR_TTL_MS_MAX: u64 = 3_600_000;
/// Most I/O worker threads (`-o threads=N`): each has a session on the server and a
/// registered 1 MiB buffer, and the kernel keeps at most a dozen reads in flight per
/// mount (its default `max_background`) plus one request per program thread.
pub const IO_THREADS_MAX: usize = 32;
/// Default I/O workers at most: enough to keep large reads and writes in flight while
/// the main thread reads the next request, without a session per core on big machines.
const IO_THREADS_DEFAULT_MAX: usize = 4;
/// The mount's FUSE subtype: /proc/mounts shows the type as `fuse.dafs` (when mounted
/// through fusermount3), which is how [`crate::is_dafs_mount`] recognizes it.
pub(crate) const SUBTYPE: &str = "dafs";

/// How the kernel may cache file data (`-o cache=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// `cache=cto` (the default): close-to-open. The kernel keeps a file's pages across
    /// opens while the server's size, mtime and ctime at open are those the pages were
    /// read under; any change by another client drops them at the next open (and a
    /// change seen in attributes drops them at once). Reads within one open may return
    /// pages older than another client's later write, as on NFS.
    CloseToOpen,
    /// `cache=strict`: no data caching. Every read and write goes to the server
    /// (direct I/O; the kernel does no read-ahead), and attributes are asked for on every
    /// use (`attr_ttl_ms=0` unless given after it): a change by another client is seen by
    /// the next read, even through a file opened before it.
    Strict,
}

/// What the kernel may cache, and how the mount looks to other users.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// How long the kernel may use attributes and name lookups without asking again.
    /// Zero: every stat and every path walk asks the server (strict, slower).
    pub attr_ttl: Duration,
    /// Mount read-only (the kernel refuses writes with EROFS).
    pub read_only: bool,
    /// Let other users use the mount (needs `user_allow_other` in /etc/fuse.conf
    /// when not mounting as root).
    pub allow_other: bool,
    /// Let root (besides the mounting user) use the mount.
    pub allow_root: bool,
    /// Shown as the mount's source in /proc/mounts.
    pub fsname: String,
    /// The export name the client connected with ("" = the server's default): the
    /// root handle is fetched again by it when the server recycles it.
    pub export: String,
    /// How file data is cached (see [`CacheMode`]).
    pub cache: CacheMode,
    /// `-o writeback_cache`: the kernel buffers writes in its page cache and sends them
    /// in large pieces later, at the latest on fsync(2) and close(2); until then other
    /// clients do not see them, and the kernel's idea of size and mtime wins over the
    /// server's. Off by default; ignored with `cache=strict`.
    pub writeback_cache: bool,
    /// `-o threads=N`: worker threads (each with its own session) that serve reads and
    /// writes of 64 KiB and more, so that several are in flight at once; 0 serves
    /// everything on the thread that reads the kernel's requests. Default: the cores,
    /// between 2 and 4.
    pub io_threads: usize,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            attr_ttl: ATTR_TTL_DEFAULT,
            read_only: false,
            allow_other: false,
            allow_root: false,
            fsname: "dafs".into(),
            export: String::new(),
            cache: CacheMode::CloseToOpen,
            writeback_cache: false,
            io_threads: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .clamp(2, IO_THREADS_DEFAULT_MAX),
        }
    }
}

impl MountOptions {
    /// Apply one comma-separated `-o` list (`ro,allow_other,attr_ttl_ms=500`).
    pub fn parse_list(&mut self, list: &str) -> Result<(), OptionError> {
        for opt in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            match opt {
                "ro" => self.read_only = true,
                "rw" => self.read_only = false,
                "allow_other" => self.allow_other = true,
                "allow_root" => self.allow_root = true,
                "writeback_cache" => self.writeback_cache = true,
                "cache=cto" => self.cache = CacheMode::CloseToOpen,
                "cache=strict" => {
                    self.cache = CacheMode::Strict;
                    self.attr_ttl = Duration::ZERO;
                }
                _ => match opt.split_once('=') {
                    Some(("attr_ttl_ms", v)) => {
                        let ms: u64 = v
                            .parse()
                            .map_err(|_| OptionError::AttrTtlNotNumber { value: v.into() })?;
                        if ms > ATTR_TTL_MS_MAX {
                            return Err(OptionError::AttrTtlTooLong { value: v.into() });
                        }
                        self.attr_ttl = Duration::from_millis(ms);
                    }
                    Some(("threads", v)) => {
                        let n: usize = v
                            .parse()
                            .ok()
                            .filter(|n| *n <= IO_THREADS_MAX)
                            .ok_or(OptionError::Threads { value: v.into() })?;
                        self.io_threads = n;
                    }
                    Some(("cache", v)) => return Err(OptionError::CacheMode { value: v.into() }),
                    _ => return Err(OptionError::Unknown { option: opt.into() }),
                },
            }
        }
        if self.allow_other && self.allow_root {
            return Err(OptionError::AllowOtherAndRoot);
        }
        Ok(())
    }

    /// The kernel buffers writes (`writeback_cache`, and data may be cached at all).
    pub(crate) fn writeback(&self) -> bool {
        self.writeback_cache && self.cache != CacheMode::Strict
    }

    /// The `-o` list for fusermount3 (same options as [`Self::fuse_options`]).
    pub(crate) fn fusermount_options(&self) -> String {
        let mut v = vec![
            format!("fsname={}", self.fsname.replace(',', "_")),
            format!("subtype={SUBTYPE}"),
            "default_permissions".into(),
            "nodev".into(),
            "nosuid".into(),
            "noatime".into(),
            if self.read_only { "ro" } else { "rw" }.into(),
        ];
        if self.allow_other {
            v.push("allow_other".into());
        }
        if self.allow_root {
            v.push("allow_root".into());
        }
        v.join(",")
    }

    pub(crate) fn acl(&self) -> fuser::SessionACL {
        if self.allow_other {
            fuser::SessionACL::All
        } else if self.allow_root {
            fuser::SessionACL::RootAndOwner
        } else {
            fuser::SessionACL::Owner
        }
    }

    pub(crate) fn fuse_options(&self) -> Vec<MountOption> {
        let mut v = vec![
            MountOption::FSName(self.fsname.clone()),
            MountOption::Subtype(SUBTYPE.into()),
            // The protocol carries no user credentials (the server acts with its own
            // ids), so the only per-user check possible is the kernel's, against the
            // mode bits and owners the server reports.
            MountOption::DefaultPermissions,
            MountOption::NoDev,
            MountOption::NoSuid,
            MountOption::NoAtime,
        ];
        v.push(if self.read_only { MountOption::RO } else { MountOption::RW });
        if self.allow_other {
            v.push(MountOption::AllowOther);
        }
        if self.allow_root {
            v.push(MountOption::AllowRoot);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let mut o = MountOptions::default();
        assert_eq!(o.attr_ttl, Duration::from_secs(1));
        o.parse_list("ro,allow_other,attr_ttl_ms=250").unwrap();
        assert!(o.read_only && o.allow_other);
        assert_eq!(o.attr_ttl, Duration::from_millis(250));
        o.parse_list("attr_ttl_ms=0,rw").unwrap();
        assert!(!o.read_only);
        assert_eq!(o.attr_ttl, Duration::ZERO);
        assert!(o.parse_list("attr_ttl_ms=soon").is_err());
        assert!(o.parse_list("attr_ttl_ms=99999999").is_err());
        assert!(o.parse_list("bogus").unwrap_err().to_string().contains("unknown mount option"));
        let mut o = MountOptions::default();
        assert!(o.parse_list("allow_other,allow_root").is_err());
    }

    #[test]
    fn cache_options_parse() {
        let mut o = MountOptions::default();
        assert_eq!(o.cache, CacheMode::CloseToOpen);
        assert!(!o.writeback_cache && !o.writeback());
        o.parse_list("writeback_cache").unwrap();
        assert!(o.writeback());
        // strict: no data caching, attributes asked for every time (unless given after).
        o.parse_list("cache=strict").unwrap();
        assert_eq!(o.cache, CacheMode::Strict);
        assert_eq!(o.attr_ttl, Duration::ZERO);
        assert!(!o.writeback(), "strict caches no data, so nothing is written back");
        o.parse_list("cache=strict,attr_ttl_ms=20").unwrap();
        assert_eq!(o.attr_ttl, Duration::from_millis(20));
        o.parse_list("cache=cto").unwrap();
        assert_eq!(o.cache, CacheMode::CloseToOpen);
        assert!((2..=4).contains(&MountOptions::default().io_threads));
        o.parse_list("threads=0").unwrap();
        assert_eq!(o.io_threads, 0);
        o.parse_list("threads=32").unwrap();
        assert_eq!(o.io_threads, 32);
        assert_eq!(
            o.parse_list("threads=33").unwrap_err().to_string(),
            "-o threads=33: not a number of I/O threads from 0 to 32"
        );
        assert!(o.parse_list("threads=many").is_err());
        assert_eq!(
            o.parse_list("cache=none").unwrap_err().to_string(),
            "-o cache=none: not a cache mode (cto or strict)"
        );
    }

    #[test]
    fn option_errors_read_as_before() {
        let mut o = MountOptions::default();
        let msg = |o: &mut MountOptions, l: &str| o.parse_list(l).unwrap_err().to_string();
        assert_eq!(
            msg(&mut o, "attr_ttl_ms=soon"),
            "-o attr_ttl_ms=soon: not a number of milliseconds"
        );
        assert_eq!(
            msg(&mut o, "attr_ttl_ms=3600001"),
            "-o attr_ttl_ms=3600001: at most 3600000 (one hour)"
        );
        assert_eq!(
            msg(&mut o, "ro,frobnicate"),
            "-o frobnicate: unknown mount option (known: ro, rw, allow_other, allow_root, attr_ttl_ms=N, cache=cto|strict, writeback_cache, threads=N)"
        );
        assert_eq!(
            msg(&mut o, "allow_other,allow_root"),
            "-o allow_other and allow_root exclude each other"
        );
        MountOptions::default().parse_list("attr_ttl_ms=3600000").unwrap();
    }
}
