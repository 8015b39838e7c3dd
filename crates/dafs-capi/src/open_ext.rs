//! Opens with the DAFS open modes the plain `dafs_open` does not reach: create-unlinked
//! (a file that gets its name only at `dafs_publish`), delete-on-close and open keys.
//! These carry the create/commit/abort and identify-with-a-key patterns of database
//! I/O layers such as ODM (adapters/odm).

use dafs_proto::types::OPEN_KEY_BYTES_MAX;

use super::*;
use crate::io::open_options;

/// `dafs_open_ex_t.flags`: create-unlinked (no name until `dafs_publish`).
pub const DAFS_OX_UNLINKED: u32 = 1;
/// `dafs_open_ex_t.flags`: remove the name when the file's last open closes.
pub const DAFS_OX_DELETE_ON_CLOSE: u32 = 2;

/// Extra open options of `dafs_open_ex`; an all-zero struct means "none".
#[repr(C)]
pub struct dafs_open_ex_t {
    pub flags: u32,
    pub key_len: u32,
    pub key: *const c_void,
    pub reserved: [u64; 4],
}

/// The OpenOptions of `dafs_open_ex`: those of `flags`/`mode` plus `ex` (NULL = none).
pub(crate) fn open_ex_options(
    flags: c_int,
    mode: u32,
    ex: Option<&dafs_open_ex_t>,
) -> R<OpenOptions> {
    let mut o = open_options(flags, mode)?;
    let Some(ex) = ex else { return Ok(o) };
    if ex.reserved.iter().any(|&r| r != 0)
        || ex.flags & !(DAFS_OX_UNLINKED | DAFS_OX_DELETE_ON_CLOSE) != 0
        || ex.key_len as usize > OPEN_KEY_BYTES_MAX
        || (ex.key_len != 0 && ex.key.is_null())
    {
        return Err(EINVAL);
    }
    let unlinked = ex.flags & DAFS_OX_UNLINKED != 0;
    let delete_on_close = ex.flags & DAFS_OX_DELETE_ON_CLOSE != 0;
    // The server refuses these too; refusing here sends nothing and says why sooner:
    // a file with no name has no name to delete, and it is created, never appended to.
    if unlinked && (delete_on_close || flags & (DAFS_O_APPEND | DAFS_O_TRUNC) != 0) {
        return Err(EINVAL);
    }
    if ex.key_len != 0 {
        // SAFETY: non-null checked above; the caller passes key_len readable bytes.
        let key = unsafe { std::slice::from_raw_parts(ex.key as *const u8, ex.key_len as usize) };
        o = o.key(key);
    }
    Ok(o.unlinked(unlinked).delete_on_close(delete_on_close))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_open_ex(
    client: *mut dafs_client_t,
    path: *const c_char,
    flags: c_int,
    mode: u32,
    ex: *const dafs_open_ex_t,
    out: *mut *mut dafs_file_t,
) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: checked non-null; caller-owned storage.
        unsafe { out.write(std::ptr::null_mut()) };
        let path = cstr(path)?;
        // SAFETY: NULL or a valid dafs_open_ex_t (documented).
        let opts = open_ex_options(flags, mode, unsafe { ex.as_ref() })?;
        let file = inner.client.open(path, opts).map_err(errno)?;
        let p = Box::into_raw(Box::new(dafs_file_t { file, append: flags & DAFS_O_APPEND != 0 }));
        inner.files.insert(p as usize);
        // SAFETY: as above.
        unsafe { out.write(p) };
        Ok(0)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_publish(client: *mut dafs_client_t, file: *mut dafs_file_t) -> c_int {
    neg(with_file(client, file, |inner, f| inner.client.publish(f).map(|_| 0).map_err(errno)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(flags: u32, key: &[u8]) -> dafs_open_ex_t {
        dafs_open_ex_t {
            flags,
            key_len: key.len() as u32,
            key: key.as_ptr() as *const c_void,
            reserved: [0; 4],
        }
    }

    #[test]
    fn options_are_checked_before_anything_is_sent() {
        let rw = DAFS_O_RDWR;
        assert!(open_ex_options(rw, 0o600, None).is_ok());
        assert!(open_ex_options(rw, 0o600, Some(&ex(DAFS_OX_UNLINKED, b"k"))).is_ok());
        assert!(open_ex_options(rw, 0, Some(&ex(DAFS_OX_DELETE_ON_CLOSE, b""))).is_ok());
        let both = DAFS_OX_UNLINKED | DAFS_OX_DELETE_ON_CLOSE;
        assert_eq!(open_ex_options(rw, 0, Some(&ex(both, b""))).err(), Some(EINVAL));
        assert_eq!(open_ex_options(rw, 0, Some(&ex(4, b""))).err(), Some(EINVAL));
        let long = [7u8; OPEN_KEY_BYTES_MAX + 1];
        assert_eq!(open_ex_options(rw, 0, Some(&ex(0, &long))).err(), Some(EINVAL));
        assert!(open_ex_options(rw, 0, Some(&ex(0, &long[..OPEN_KEY_BYTES_MAX]))).is_ok());
        let mut e = ex(0, b"");
        e.key_len = 3; // NULL key with a length
        e.key = std::ptr::null();
        assert_eq!(open_ex_options(rw, 0, Some(&e)).err(), Some(EINVAL));
        let mut e = ex(0, b"");
        e.reserved[2] = 1;
        assert_eq!(open_ex_options(rw, 0, Some(&e)).err(), Some(EINVAL));
        let e = ex(DAFS_OX_UNLINKED, b"");
        assert_eq!(open_ex_options(rw | DAFS_O_TRUNC, 0, Some(&e)).err(), Some(EINVAL));
    }

    #[test]
    fn layout() {
        assert_eq!(std::mem::size_of::<dafs_open_ex_t>(), 48);
    }
}
