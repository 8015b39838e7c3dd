//! Server-wide state of open files, per inode: share reservations (deny-read /
//! deny-write), the open key, delete-on-last-close, and the append serialisation lock.
//! Shared by all workers (one mutex; held only for table updates, never across I/O).

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use dafs_proto::Status;

#[derive(Debug)]
struct OpenEntry {
    session: u64,
    open_id: u64,
    read: bool,
    write: bool,
    deny_read: bool,
    deny_write: bool,
}

#[derive(Default)]
struct FileState {
    opens: Vec<OpenEntry>,
    key: Option<Vec<u8>>,
    /// Directory and name to unlink when the last open closes.
    delete_on_close: Option<(Arc<OwnedFd>, Vec<u8>)>,
}

/// Append serialisation: a fixed array of mutexes picked by inode. A file's mutex never
/// changes (unlike per-file state, which goes at the last close while a write may still
/// be arriving), and the array bounds memory whatever the number of files.
const APPEND_STRIPES: usize = 64;
/// Fibonacci hashing: multiply by 2^64 divided by the golden ratio and keep the top
/// log2(APPEND_STRIPES) bits of the product, which depend on every bit of the key.
const FIBONACCI_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;
const APPEND_STRIPE_SHIFT: u32 = u64::BITS - APPEND_STRIPES.trailing_zeros();
const _: () = assert!(APPEND_STRIPES.is_power_of_two());

pub struct OpenTable {
    files: Mutex<HashMap<(u64, u64), FileState>>,
    append: Vec<Arc<Mutex<()>>>,
}

impl Default for OpenTable {
    fn default() -> Self {
        OpenTable {
            files: Mutex::new(HashMap::new()),
            append: (0..APPEND_STRIPES).map(|_| Arc::new(Mutex::new(()))).collect(),
        }
    }
}

pub struct OpenRequest<'a> {
    pub session: u64,
    pub open_id: u64,
    pub read: bool,
    pub write: bool,
    pub deny_read: bool,
    pub deny_write: bool,
    pub key: &'a [u8],
    pub delete_on_close: Option<(Arc<OwnedFd>, Vec<u8>)>,
}

impl OpenTable {
    /// Admit an open, or refuse it (share conflict, wrong key). Returns the file's append
    /// lock.
    pub fn admit(&self, file: (u64, u64), r: OpenRequest) -> Result<Arc<Mutex<()>>, Status> {
        let mut g = self.files.lock().unwrap();
        let st = g.entry(file).or_default();
        if !st.opens.is_empty() {
            if let Some(k) = &st.key {
                if k.as_slice() != r.key {
                    return Err(Status::BadKey);
                }
            }
            for o in &st.opens {
                let conflict = (r.read && o.deny_read)
                    || (r.write && o.deny_write)
                    || (r.deny_read && o.read)
                    || (r.deny_write && o.write);
                if conflict {
                    return Err(Status::ShareDenied);
                }
            }
        } else {
            st.key = if r.key.is_empty() { None } else { Some(r.key.to_vec()) };
        }
        if r.delete_on_close.is_some() {
            st.delete_on_close = r.delete_on_close;
        }
        st.opens.push(OpenEntry {
            session: r.session,
            open_id: r.open_id,
            read: r.read,
            write: r.write,
            deny_read: r.deny_read,
            deny_write: r.deny_write,
        });
        let stripe = (file.0.wrapping_mul(FIBONACCI_MULTIPLIER) ^ file.1)
            .wrapping_mul(FIBONACCI_MULTIPLIER)
            >> APPEND_STRIPE_SHIFT;
        Ok(self.append[stripe as usize % APPEND_STRIPES].clone())
    }

    /// An open ended. On the file's last close, performs a pending delete-on-close.
    pub fn release(&self, file: (u64, u64), session: u64, open_id: u64) {
        let pending = {
            let mut g = self.files.lock().unwrap();
            let Some(st) = g.get_mut(&file) else { return };
            st.opens.retain(|o| !(o.session == session && o.open_id == open_id));
            if !st.opens.is_empty() {
                return;
            }
            g.remove(&file).and_then(|s| s.delete_on_close)
        };
        if let Some((dir, name)) = pending {
            delete_if_same(dir.as_fd(), &name, file);
        }
    }
}

/// Unlink `name` in `dir` only if it still names the inode that was opened (it may
/// have been renamed over or removed meanwhile).
pub(crate) fn delete_if_same(dir: BorrowedFd, name: &[u8], file: (u64, u64)) {
    let Ok(c) = std::ffi::CString::new(name) else { return };
    if let Ok(s) = rustix::fs::statat(dir, c.as_c_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
        if (s.st_dev, s.st_ino) == file {
            let _ = rustix::fs::unlinkat(dir, c.as_c_str(), rustix::fs::AtFlags::empty());
        }
    }
}
