//! Files and blocking I/O, and memory registration.

use super::*;

// ---------------------------------------------------------------------------------------
// Files and blocking I/O
// ---------------------------------------------------------------------------------------

pub(crate) fn open_options(flags: c_int, mode: u32) -> R<OpenOptions> {
    let known = DAFS_O_ACCMODE | DAFS_O_CREAT | DAFS_O_EXCL | DAFS_O_TRUNC | DAFS_O_APPEND;
    if flags & !known != 0 {
        return Err(EINVAL);
    }
    let o = match flags & DAFS_O_ACCMODE {
        DAFS_O_RDONLY => OpenOptions::read(),
        DAFS_O_WRONLY => OpenOptions::write_only(),
        DAFS_O_RDWR => OpenOptions::read_write(),
        _ => return Err(EINVAL),
    };
    Ok(o.create(flags & DAFS_O_CREAT != 0)
        .exclusive(flags & DAFS_O_EXCL != 0)
        .truncate(flags & DAFS_O_TRUNC != 0)
        .append(flags & DAFS_O_APPEND != 0)
        .mode(mode))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_open(
    client: *mut dafs_client_t,
    path: *const c_char,
    flags: c_int,
    mode: u32,
    out: *mut *mut dafs_file_t,
) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: checked non-null; caller-owned storage.
        unsafe { out.write(std::ptr::null_mut()) };
        let path = cstr(path)?;
        let opts = open_options(flags, mode)?;
        let file = inner.client.open(path, opts).map_err(errno)?;
        let p = Box::into_raw(Box::new(dafs_file_t { file, append: flags & DAFS_O_APPEND != 0 }));
        inner.files.insert(p as usize);
        // SAFETY: as above.
        unsafe { out.write(p) };
        Ok(0)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_close(client: *mut dafs_client_t, file: *mut dafs_file_t) -> c_int {
    neg(with_client(client, |inner| {
        if file.is_null() || !inner.files.remove(&(file as usize)) {
            return Err(EBADF);
        }
        // SAFETY: a live Box of this client, now removed from the table.
        let f = unsafe { Box::from_raw(file) };
        inner.client.close(f.file).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_pread(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    buf: *mut c_void,
    len: usize,
    offset: u64,
) -> isize {
    neg_ssize(with_file(client, file, |inner, f| {
        if len == 0 {
            return Ok(0);
        }
        if buf.is_null() || len > isize::MAX as usize {
            return Err(EINVAL);
        }
        // SAFETY: the caller passes `len` writable bytes at `buf` (documented).
        let b = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) };
        inner.client.pread(f, b, offset).map(|n| n as isize).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_pwrite(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    buf: *const c_void,
    len: usize,
    offset: u64,
) -> isize {
    neg_ssize(with_file(client, file, |inner, f| {
        if len == 0 {
            return Ok(0);
        }
        if buf.is_null() || len > isize::MAX as usize {
            return Err(EINVAL);
        }
        // SAFETY: the caller passes `len` readable bytes at `buf` (documented).
        let b = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
        inner.client.pwrite(f, b, offset).map(|n| n as isize).map_err(errno)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_fsync(client: *mut dafs_client_t, file: *mut dafs_file_t) -> c_int {
    neg(with_file(client, file, |inner, f| inner.client.fsync(f).map(|_| 0).map_err(errno)))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_fstat(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    out: *mut dafs_attr_t,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        if out.is_null() {
            return Err(EINVAL);
        }
        let a = inner.client.fstat(f).map_err(errno)?;
        write_attr(out, &a)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_ftruncate(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    size: u64,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        if size > i64::MAX as u64 {
            return Err(EINVAL);
        }
        inner.client.ftruncate(f, size).map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_append(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    buf: *const c_void,
    len: usize,
    offset_out: *mut u64,
) -> isize {
    neg_ssize(with_file(client, file, |inner, f| {
        // SAFETY: `file` was validated by with_file (a live handle of this client).
        if !unsafe { (*file).append } {
            return Err(EINVAL);
        }
        if len == 0 {
            return Ok(0);
        }
        if buf.is_null() || len > isize::MAX as usize {
            return Err(EINVAL);
        }
        // SAFETY: the caller passes `len` readable bytes at `buf` (documented).
        let b = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
        let off = inner.client.append(f, b).map_err(errno)?;
        if !offset_out.is_null() {
            // SAFETY: non-null; caller-owned storage.
            unsafe { offset_out.write(off) };
        }
        Ok(len as isize)
    }))
}

// ---------------------------------------------------------------------------------------
// Memory registration
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn dafs_register(
    client: *mut dafs_client_t,
    buf: *mut c_void,
    len: usize,
    out: *mut dafs_region_t,
) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() || buf.is_null() || len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: the caller keeps buf..buf+len valid until dafs_unregister and does not
        // touch it while I/O naming it is in flight (documented).
        let id = unsafe { inner.client.register_raw(buf as *mut u8, len) }.map_err(errno)?;
        // SAFETY: checked non-null; caller-owned storage.
        unsafe { out.write(id.0) };
        Ok(0)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_alloc_registered(
    client: *mut dafs_client_t,
    len: usize,
    ptr_out: *mut *mut c_void,
    out: *mut dafs_region_t,
) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() || ptr_out.is_null() || len == 0 {
            return Err(EINVAL);
        }
        let id = inner.client.alloc_registered(len).map_err(errno)?;
        // The region is new (no I/O in flight), so region_mut succeeds; the pointer stays
        // valid until the region is unregistered (the memory belongs to the transport).
        let ptr = match inner.client.region_mut(id) {
            Ok(s) => s.as_mut_ptr(),
            Err(e) => {
                let _ = inner.client.unregister(id);
                return Err(errno(e));
            }
        };
        // SAFETY: checked non-null; caller-owned storage.
        unsafe {
            ptr_out.write(ptr as *mut c_void);
            out.write(id.0);
        }
        Ok(0)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_unregister(client: *mut dafs_client_t, region: dafs_region_t) -> c_int {
    neg(with_client(client, |inner| {
        inner.client.unregister(RegionId(region)).map(|_| 0).map_err(errno)
    }))
}
