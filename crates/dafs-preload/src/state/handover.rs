//! Hand-over across `exec`: the dafs descriptors a new program keeps are described in
//! its environment (`DAFS_PRELOAD_FDS`), and taken over by the library it loads.

use std::collections::HashMap;
use std::ffi::c_int;

use dafs_proto::FileHandle;

use super::fdmap::FD_MAX;
use super::ofd::{Kind, Ofd};
use super::vfork::{in_vfork_child, vfork_overlay};
use super::{config, State};
use crate::paths;

/// Fields of one `DAFS_PRELOAD_FDS` entry: `fd:kind:flags:offset:hexpath`.
const ENTRY_FIELDS: usize = 5;

/// The descriptors a new program inherits (see [`State::exec_fds`]).
pub const FDS_ENV: &str = "DAFS_PRELOAD_FDS";
/// The virtual working directory a new program starts in.
pub const CWD_ENV: &str = "DAFS_PRELOAD_CWD";
/// The `from` of a recorded `close(to)` file action in [`State::exec_fds`]'s `actions`
/// (the source of a real dup2 is never negative).
pub const CLOSE_ACTION: c_int = -1;

/// Paths travel hex-encoded: the entry separators may occur in a path.
fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let b: Option<Vec<u8>> =
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(b?).ok()
}

impl State {
    /// The DAFS_PRELOAD_FDS value describing the descriptors an exec keeps
    /// (`fd:kind:flags:offset:hexpath`, comma separated), or None.
    /// `actions`: posix_spawn file actions to apply first, in order: (from, to) is
    /// dup2(from, to), ([`CLOSE_ACTION`], fd) is close(fd).
    pub fn exec_fds(&self, actions: &[(c_int, c_int)]) -> Option<String> {
        let mut v: Vec<String> = Vec::new();
        let mut table: HashMap<c_int, (u64, bool)> =
            self.fds.iter().map(|(fd, e)| (*fd, (e.ofd, e.cloexec))).collect();
        if in_vfork_child() {
            for (fd, e) in vfork_overlay() {
                match e {
                    Some(x) => table.insert(fd, x),
                    None => table.remove(&fd),
                };
            }
        }
        for &(from, to) in actions {
            if from < 0 {
                table.remove(&to);
            } else if from != to {
                match table.get(&from).copied() {
                    Some((id, _)) => table.insert(to, (id, false)),
                    None => table.remove(&to),
                };
            } else if let Some(e) = table.get_mut(&to) {
                // dup2(fd, fd) in a file action clears close-on-exec.
                e.1 = false;
            }
        }
        for (fd, (ofd, cloexec)) in &table {
            if *cloexec {
                continue;
            }
            let Some(o) = self.ofds.get(ofd) else { continue };
            let k = match o.kind {
                Kind::File => 'f',
                Kind::Dir => 'd',
                Kind::Path => 'p',
            };
            v.push(format!("{fd}:{k}:{}:{}:{}", o.flags, o.offset, hex(&o.vpath)));
        }
        if v.is_empty() {
            None
        } else {
            Some(v.join(","))
        }
    }

    /// In a freshly exec'd program: take over the descriptors the parent described,
    /// if they still are our placeholders (an O_PATH descriptor of /dev/null).
    pub(super) fn adopt_inherited(&mut self, spec: &str) {
        // SAFETY: `struct stat` is plain integers: all zeroes is a valid value.
        let mut null: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid path and an out-buffer we own.
        if unsafe { libc::stat(c"/dev/null".as_ptr(), &mut null) } != 0 {
            return;
        }
        let mut by_ofd: HashMap<(String, u64, c_int), u64> = HashMap::new();
        for ent in spec.split(',') {
            let f: Vec<&str> = ent.split(':').collect();
            if f.len() != ENTRY_FIELDS {
                continue;
            }
            let (Ok(fd), Ok(flags), Ok(offset), Some(vpath)) =
                (f[0].parse::<c_int>(), f[2].parse::<c_int>(), f[3].parse::<u64>(), unhex(f[4]))
            else {
                continue;
            };
            let kind = match f[1] {
                "f" => Kind::File,
                "d" => Kind::Dir,
                _ => Kind::Path,
            };
            if fd < 0 || fd as usize >= FD_MAX {
                continue;
            }
            // SAFETY: F_GETFL takes no argument.
            let fl = unsafe { real!(fcntl: fn(c_int, c_int, ...) -> c_int)(fd, libc::F_GETFL) };
            // SAFETY: `struct stat` is plain integers: all zeroes is a valid value.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: an out-buffer we own.
            let ok = fl >= 0
                && fl & libc::O_PATH != 0
                && unsafe { real!(fstat: fn(c_int, *mut libc::stat) -> c_int)(fd, &mut st) } == 0
                && st.st_rdev == null.st_rdev
                && st.st_mode & libc::S_IFMT == libc::S_IFCHR;
            if !ok {
                continue;
            }
            let Some((mount, rel)) = paths::split_mount(&config().mounts, &vpath) else { continue };
            // Descriptors that shared one description (dup) before the exec share one
            // again only if they agree on everything; otherwise each gets its own.
            let key = (vpath.clone(), offset, flags);
            let id = match by_ofd.get(&key) {
                Some(&id) => id,
                None => {
                    let id = self.next_ofd;
                    self.next_ofd += 1;
                    let is_dir = kind == Kind::Dir;
                    self.ofds.insert(
                        id,
                        Ofd {
                            mount,
                            rel,
                            vpath,
                            kind,
                            is_dir,
                            file: None,
                            fh: FileHandle([0; FileHandle::LEN]),
                            // Sessions count from 1: re-opened at first use.
                            gen: 0,
                            offset,
                            flags,
                            opened_append: flags & libc::O_APPEND != 0,
                            refs: 0,
                        },
                    );
                    by_ofd.insert(key, id);
                    id
                }
            };
            self.add_fd(fd, id, false);
            debug!("inherited dafs descriptor {fd}");
        }
    }
}
