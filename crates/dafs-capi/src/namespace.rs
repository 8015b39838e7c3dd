//! The namespace: lookups, attributes, directories, links, renames.

use super::*;

// ---------------------------------------------------------------------------------------
// Namespace
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn dafs_stat(
    client: *mut dafs_client_t,
    path: *const c_char,
    out: *mut dafs_attr_t,
) -> c_int {
    neg(with_client(client, |inner| {
        let p = cstr(path)?;
        if out.is_null() {
            return Err(EINVAL);
        }
        let a = inner.client.stat(p).map_err(errno)?;
        write_attr(out, &a)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_lstat(
    client: *mut dafs_client_t,
    path: *const c_char,
    out: *mut dafs_attr_t,
) -> c_int {
    neg(with_client(client, |inner| {
        let p = cstr(path)?;
        if out.is_null() {
            return Err(EINVAL);
        }
        let a = inner.client.lstat(p).map_err(errno)?;
        write_attr(out, &a)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_mkdir(
    client: *mut dafs_client_t,
    path: *const c_char,
    mode: u32,
) -> c_int {
    neg(with_client(client, |inner| {
        inner.client.mkdir(cstr(path)?, mode).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_rmdir(client: *mut dafs_client_t, path: *const c_char) -> c_int {
    neg(with_client(client, |inner| inner.client.rmdir(cstr(path)?).map(|_| 0).map_err(errno)))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_unlink(client: *mut dafs_client_t, path: *const c_char) -> c_int {
    neg(with_client(client, |inner| inner.client.remove(cstr(path)?).map(|_| 0).map_err(errno)))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_rename(
    client: *mut dafs_client_t,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    neg(with_client(client, |inner| {
        inner.client.rename(cstr(from)?, cstr(to)?).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_rename2(
    client: *mut dafs_client_t,
    from: *const c_char,
    to: *const c_char,
    flags: u32,
) -> c_int {
    neg(with_client(client, |inner| {
        inner.client.rename_with_flags(cstr(from)?, cstr(to)?, flags).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_truncate(
    client: *mut dafs_client_t,
    path: *const c_char,
    size: u64,
) -> c_int {
    neg(with_client(client, |inner| {
        if size > i64::MAX as u64 {
            return Err(EINVAL);
        }
        inner.client.truncate(cstr(path)?, size).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_readdir(
    client: *mut dafs_client_t,
    path: *const c_char,
    cb: dafs_readdir_fn,
    arg: *mut c_void,
) -> c_int {
    // Fetch everything first, then call back with the client released: the callback may
    // call into the same client.
    let entries = match with_client(client, |inner| {
        let cb_ok = cb.is_some();
        let p = cstr(path)?;
        if !cb_ok {
            return Err(EINVAL);
        }
        inner.client.readdir(p).map_err(errno)
    }) {
        Ok(e) => e,
        Err(e) => return -e,
    };
    let Some(cb) = cb else { return -EINVAL };
    guarded(-PANICKED, || {
        let mut n: c_int = 0;
        for e in entries {
            // Names never contain NUL (the protocol forbids it); skip one that would.
            let Ok(name) = CString::new(e.name) else { continue };
            // SAFETY: a C function pointer supplied by the caller, called as documented.
            let r = unsafe { cb(arg, name.as_ptr(), e.fileid, e.ftype as u32) };
            if r != 0 {
                return r;
            }
            n = n.saturating_add(1);
        }
        n
    })
}
