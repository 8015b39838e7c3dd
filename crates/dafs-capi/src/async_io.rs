//! Completion groups and non-blocking I/O.

use super::*;

// ---------------------------------------------------------------------------------------
// Completion groups and non-blocking I/O
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn dafs_cg_create(client: *mut dafs_client_t, out: *mut dafs_cg_t) -> c_int {
    neg(with_client(client, |inner| {
        if out.is_null() {
            return Err(EINVAL);
        }
        let cg = inner.client.create_cg().map_err(errno)?;
        // SAFETY: checked non-null; caller-owned storage.
        unsafe { out.write(cg.0) };
        Ok(0)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_cg_destroy(client: *mut dafs_client_t, cg: dafs_cg_t) -> c_int {
    neg(with_client(client, |inner| {
        let cg = check_cg(cg)?;
        // poll(cg, 0) checks the group exists (EINVAL) without reaping anything.
        inner.client.poll(cg, 0).map_err(errno)?;
        inner.client.destroy_cg(cg).map(|_| 0).map_err(|_| EBUSY)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_cg_outstanding(client: *mut dafs_client_t, cg: dafs_cg_t) -> c_int {
    neg(with_client(client, |inner| {
        let cg = check_cg(cg)?;
        Ok(inner.client.outstanding(cg).min(c_int::MAX as usize) as c_int)
    }))
}

/// Turn completions into C completions; finish `_nb_buf` reads by copying into the
/// caller's memory.
fn deliver(inner: &mut Inner, comps: Vec<Completion>, out: *mut dafs_completion_t) -> c_int {
    let n = comps.len();
    for (i, c) in comps.into_iter().enumerate() {
        let dest = inner.buf_reads.remove(&c.id.0);
        let (result, flags) = match &c.result {
            Ok(n) => (*n as i64, if c.eof { DAFS_CQE_EOF } else { 0 }),
            Err(e) => (-(e.errno() as i64), 0),
        };
        if let (Some((ptr, len)), Some(v), Ok(got)) = (dest, &c.buf, &c.result) {
            let k = (*got).min(len).min(v.len());
            if k > 0 {
                // SAFETY: the caller keeps ptr..ptr+len valid and untouched until this
                // completion is reaped (documented for dafs_pread_nb_buf); k <= len, and
                // ptr is non-null whenever len > 0 (checked at submit).
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), ptr as *mut u8, k) };
            }
        }
        // SAFETY: i < n <= max, the caller's array has max entries.
        unsafe {
            out.add(i).write(dafs_completion_t {
                user_data: c.user_data,
                result,
                flags,
                reserved: 0,
            })
        };
    }
    n as c_int
}

#[no_mangle]
pub unsafe extern "C" fn dafs_cg_poll(
    client: *mut dafs_client_t,
    cg: dafs_cg_t,
    out: *mut dafs_completion_t,
    max: u32,
) -> c_int {
    neg(with_client(client, |inner| {
        let cg = check_cg(cg)?;
        if max == 0 {
            return Ok(0);
        }
        if out.is_null() {
            return Err(EINVAL);
        }
        let comps = inner.client.poll(cg, max.min(c_int::MAX as u32) as usize).map_err(errno)?;
        Ok(deliver(inner, comps, out))
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_cg_wait(
    client: *mut dafs_client_t,
    cg: dafs_cg_t,
    min: u32,
    max: u32,
    timeout_ms: c_int,
    out: *mut dafs_completion_t,
) -> c_int {
    neg(with_client(client, |inner| {
        let cg = check_cg(cg)?;
        if min > max {
            return Err(EINVAL);
        }
        if max == 0 {
            return Ok(0);
        }
        if out.is_null() {
            return Err(EINVAL);
        }
        let max = max.min(c_int::MAX as u32) as usize;
        let timeout =
            if timeout_ms < 0 { None } else { Some(Duration::from_millis(timeout_ms as u64)) };
        let mut comps = Vec::new();
        if min > 0 {
            match inner.client.wait_n(cg, min as usize, timeout) {
                Ok(v) => comps = v,
                Err(e) => {
                    // A dead connection fails every request in flight into its group:
                    // hand those completions out (the error shows in each of them).
                    comps = inner.client.poll(cg, max).unwrap_or_default();
                    if comps.is_empty() {
                        return Err(errno(e));
                    }
                }
            }
        }
        if comps.len() < max {
            match inner.client.poll(cg, max - comps.len()) {
                Ok(mut more) => comps.append(&mut more),
                Err(e) if comps.is_empty() => return Err(errno(e)),
                Err(_) => {}
            }
        }
        Ok(deliver(inner, comps, out))
    }))
}

#[allow(clippy::too_many_arguments)]
fn submit_region(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    region: dafs_region_t,
    region_offset: usize,
    len: usize,
    file_offset: u64,
    user_data: u64,
    read: bool,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        let cg = check_cg(cg)?;
        let buf = IoBuf::Region { region: RegionId(region), offset: region_offset, len };
        let r = if read {
            inner.client.submit_read(f, file_offset, buf, cg, user_data)
        } else {
            inner.client.submit_write(f, file_offset, buf, cg, user_data)
        };
        r.map(|_| 0).map_err(errno)
    }))
}

#[no_mangle]
pub extern "C" fn dafs_pread_nb(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    region: dafs_region_t,
    region_offset: usize,
    len: usize,
    file_offset: u64,
    user_data: u64,
) -> c_int {
    submit_region(client, file, cg, region, region_offset, len, file_offset, user_data, true)
}

#[no_mangle]
pub extern "C" fn dafs_pwrite_nb(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    region: dafs_region_t,
    region_offset: usize,
    len: usize,
    file_offset: u64,
    user_data: u64,
) -> c_int {
    submit_region(client, file, cg, region, region_offset, len, file_offset, user_data, false)
}

#[no_mangle]
pub unsafe extern "C" fn dafs_pread_nb_buf(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    buf: *mut c_void,
    len: usize,
    file_offset: u64,
    user_data: u64,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        let cg = check_cg(cg)?;
        if buf.is_null() && len > 0 {
            return Err(EINVAL);
        }
        if len > inner.client.io_bytes_max() {
            return Err(EINVAL);
        }
        // The request owns a staging Vec; the data is copied into `buf` when the
        // completion is reaped (dafs_cg_poll / dafs_cg_wait).
        let id = inner
            .client
            .submit_read(f, file_offset, IoBuf::Vec(vec![0u8; len]), cg, user_data)
            .map_err(errno)?;
        inner.buf_reads.insert(id.0, (buf as usize, len));
        Ok(0)
    }))
}

#[no_mangle]
pub unsafe extern "C" fn dafs_pwrite_nb_buf(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    buf: *const c_void,
    len: usize,
    file_offset: u64,
    user_data: u64,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        let cg = check_cg(cg)?;
        if buf.is_null() && len > 0 {
            return Err(EINVAL);
        }
        if len > inner.client.io_bytes_max() {
            return Err(EINVAL);
        }
        // Copied now: the caller may reuse `buf` as soon as this returns.
        let data = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller passes `len` readable bytes (documented).
            unsafe { std::slice::from_raw_parts(buf as *const u8, len) }.to_vec()
        };
        inner
            .client
            .submit_write(f, file_offset, IoBuf::Vec(data), cg, user_data)
            .map(|_| 0)
            .map_err(errno)
    }))
}

/// A C array as a slice: NULL is allowed only when `n` is 0.
///
/// SAFETY: a non-null `p` points to `n` initialised elements (the caller's contract).
unsafe fn c_slice<'a, T>(p: *const T, n: usize) -> R<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: see above.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

#[no_mangle]
pub unsafe extern "C" fn dafs_batch_submit(
    client: *mut dafs_client_t,
    file: *mut dafs_file_t,
    cg: dafs_cg_t,
    ios: *const dafs_batch_io_t,
    n_ios: usize,
    mode: c_int,
    user_data: u64,
) -> c_int {
    neg(with_file(client, file, |inner, f| {
        let cg = check_cg(cg)?;
        let mode = match mode {
            DAFS_BATCH_PER_IO => BatchCompletion::PerIo,
            DAFS_BATCH_PER_BATCH => BatchCompletion::PerBatch,
            DAFS_BATCH_ERRORS_ONLY => BatchCompletion::ErrorsOnly,
            _ => return Err(EINVAL),
        };
        if n_ios == 0 {
            return Err(EINVAL);
        }
        if n_ios > inner.client.batch_max() as usize {
            return Err(E2BIG);
        }
        // SAFETY: the caller passes n_ios descriptors, each with its segment arrays
        // (documented); everything is copied here, nothing is kept after the call.
        let c_ios = unsafe { c_slice(ios, n_ios) }?;
        let mut descs = Vec::with_capacity(n_ios);
        for io in c_ios {
            // SAFETY: as above.
            let fs = unsafe { c_slice(io.file_segs, io.n_file_segs) }?;
            // SAFETY: as above.
            let ms = unsafe { c_slice(io.mem_segs, io.n_mem_segs) }?;
            if fs.is_empty() || ms.is_empty() {
                return Err(EINVAL);
            }
            // Totals must match (checked without overflow; the library checks again).
            let ft = fs.iter().try_fold(0u64, |t, s| t.checked_add(s.len)).ok_or(EINVAL)?;
            let mt = ms.iter().try_fold(0u64, |t, s| t.checked_add(s.len as u64)).ok_or(EINVAL)?;
            if ft != mt || fs.iter().any(|s| s.offset.checked_add(s.len).is_none()) {
                return Err(EINVAL);
            }
            descs.push(BatchIoDesc {
                write: io.write != 0,
                file: fs.iter().map(|s| (s.offset, s.len)).collect(),
                mem: ms.iter().map(|s| (RegionId(s.region), s.offset, s.len)).collect(),
                user_data: io.user_data,
            });
        }
        inner.client.submit_batch(f, descs, cg, user_data, mode).map(|_| 0).map_err(errno)
    }))
}
