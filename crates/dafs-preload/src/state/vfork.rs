//! `vfork()`ed children: they share the parent's memory, so their descriptor changes go
//! into a per-child overlay instead of the shared table.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};

use super::State;

/// Overlays kept before those of children that are gone are dropped: an exec'd child
/// keeps its pid but never comes back to remove its own, and the entries are tiny, so
/// pruning only past a handful keeps `kill(pid, 0)` calls rare.
const OVERLAYS_PRUNE_AT: usize = 16;

/// The process the state belongs to (set at load and in a forked child).
static OWNER: AtomicI32 = AtomicI32::new(0);

pub(super) fn set_owner() {
    // SAFETY: getpid has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Relaxed);
}

/// True in a `vfork()`ed child (Python's subprocess, for one, uses vfork): it shares
/// this memory with the suspended parent and ran no fork handler, so it must not change
/// the parent's descriptor table. Its `dup2`/`close`/`F_DUPFD` on dafs descriptors go
/// into an overlay, which its `execve` uses to describe the descriptors it hands over.
pub fn in_vfork_child() -> bool {
    let o = OWNER.load(Relaxed);
    // SAFETY: getpid has no preconditions.
    o != 0 && o != unsafe { libc::getpid() }
}

/// Per vfork child (pid): fd -> Some((open file description, cloexec)) or None (closed).
type Overlay = HashMap<c_int, Option<(u64, bool)>>;
static VFORK: std::sync::Mutex<Option<HashMap<i32, Overlay>>> = std::sync::Mutex::new(None);
/// Set once any vfork child recorded something (then dup2 of non-dafs numbers is checked).
pub static VFORK_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn overlay<T>(f: impl FnOnce(&mut Overlay) -> T) -> T {
    let mut g = VFORK.lock().unwrap_or_else(|e| e.into_inner());
    let all = g.get_or_insert_with(HashMap::new);
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    // Forget children that are gone (exec'd children keep their pid but never come
    // back here; entries are tiny).
    if all.len() > OVERLAYS_PRUNE_AT {
        // SAFETY: kill(pid, 0) sends nothing; it only checks that the process exists.
        all.retain(|&pid, _| pid == me || unsafe { libc::kill(pid, 0) } == 0);
    }
    f(all.entry(me).or_default())
}

impl State {
    /// A vfork child's view of descriptor `fd`.
    pub fn vfork_view(&self, fd: c_int) -> Option<(u64, bool)> {
        match overlay(|o| o.get(&fd).copied()) {
            Some(v) => v,
            None => self.fds.get(&fd).map(|e| (e.ofd, e.cloexec)),
        }
    }
}

pub fn vfork_note(fd: c_int, v: Option<(u64, bool)>) {
    VFORK_USED.store(true, Relaxed);
    overlay(|o| o.insert(fd, v));
}

pub(super) fn vfork_overlay() -> Overlay {
    overlay(|o| o.clone())
}
