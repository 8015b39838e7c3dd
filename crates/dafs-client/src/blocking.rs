//! The blocking data path: `pread`/`pwrite`/`read`/`write`, thin wrappers over the
//! asynchronous path (and one inline round trip for small transfers).

use dafs_proto::{Opcode, Reply, Request, Status};
use dafs_transport::Access;

use crate::completions::INTERNAL_CG;
use crate::error::unexpected_reply;
use crate::region::RegionInfo;
use crate::{Client, Error, File, IoBuf, ProtocolViolation, RegionId, Result};

impl Client {
    /// Read into `buf` at `offset`; returns bytes read (short only at end of file).
    pub fn pread(&mut self, f: &File, buf: &mut [u8], offset: u64) -> Result<usize> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.pread(f, buf, offset));
        }
        self.blocking_io(self.open_id_of(f)?, buf.as_mut_ptr(), buf.len(), offset, true)
    }

    /// Write `buf` at `offset`; returns the bytes written: all of them, or fewer when
    /// the file system failed after some (a short write, e.g. full: the error, such as
    /// ENOSPC, comes with the next call).
    pub fn pwrite(&mut self, f: &File, buf: &[u8], offset: u64) -> Result<usize> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_file(f, |n| n.pwrite(f, buf, offset));
        }
        self.blocking_io(self.open_id_of(f)?, buf.as_ptr() as *mut u8, buf.len(), offset, false)
    }

    /// Read at the file position and advance it.
    pub fn read(&mut self, f: &mut File, buf: &mut [u8]) -> Result<usize> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_node(f.node, |n| n.read(f, buf));
        }
        let n = self.blocking_io(self.open_id_of(f)?, buf.as_mut_ptr(), buf.len(), f.pos, true)?;
        f.pos += n as u64;
        Ok(n)
    }

    /// Write at the file position and advance it.
    pub fn write(&mut self, f: &mut File, buf: &[u8]) -> Result<usize> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.with_node(f.node, |n| n.write(f, buf));
        }
        let n = self.blocking_io(
            self.open_id_of(f)?,
            buf.as_ptr() as *mut u8,
            buf.len(),
            f.pos,
            false,
        )?;
        f.pos += n as u64;
        Ok(n)
    }

    /// The blocking path: chunks of at most `io_bytes_max()` (or the inline threshold),
    /// pipelined over the free slots, on the internal completion group.
    fn blocking_io(
        &mut self,
        open_id: u64,
        ptr: *mut u8,
        len: usize,
        offset: u64,
        read: bool,
    ) -> Result<usize> {
        if len == 0 {
            return Ok(0);
        }
        offset
            .checked_add(len as u64)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or(Error::Status(Status::FBig))?;
        if len <= self.inline_threshold_unregistered() {
            return self.blocking_inline(open_id, ptr, len, offset, read);
        }
        let direct = true;
        let chunk = if direct {
            self.direct_bytes_max
        } else {
            self.inline_threshold_unregistered().max(1)
        };
        // Register the caller's memory for the duration of this call: sound because the
        // call holds the borrow and does not return before every chunk has completed.
        let (region, temp) = if direct {
            self.stats.off_direct_path += 1;
            // SAFETY: see above; the memory outlives the registration (deregistered below).
            let key = unsafe { self.register_recovering(ptr, len, Access::READ_WRITE)? };
            self.insert_region(RegionInfo::new(key, ptr, len, None));
            (Some(RegionId(key)), true)
        } else {
            (None, false)
        };
        let res = self.blocking_chunks(region, ptr, len, offset, chunk, read, open_id);
        // Completions this call did not reap (chunks failed with the connection while
        // being submitted, whose submit reported the error) are this call's alone: left
        // queued, the next blocking call would take them for its own chunks and return
        // before they completed — a write reported done that never was.
        let internal = self.cgs.get_mut(INTERNAL_CG).expect("the internal group exists");
        assert_eq!(internal.outstanding(), 0, "every chunk has completed");
        drop(internal.take(usize::MAX));
        if temp {
            // Always, also after an error: a registration left behind would name the
            // caller's memory after it is freed (and a reconnect registers every region
            // again).
            let r = self.regions.remove(&region.unwrap().0).unwrap();
            assert!(r.busy.is_zero(), "every chunk has completed");
            let _ = self.t.deregister(r.key);
        }
        res
    }

    /// Submit the chunks of a blocking transfer and wait for them: the byte count, or
    /// the first error once nothing is in flight any more.
    #[allow(clippy::too_many_arguments)]
    fn blocking_chunks(
        &mut self,
        region: Option<RegionId>,
        ptr: *mut u8,
        len: usize,
        offset: u64,
        chunk: usize,
        read: bool,
        open_id: u64,
    ) -> Result<usize> {
        let cg = INTERNAL_CG;
        let g = self.cgs.get(cg).expect("the internal group exists");
        assert!(g.queued() == 0 && g.outstanding() == 0, "blocking calls do not overlap");
        let nchunks = len.div_ceil(chunk);
        let mut counts = vec![usize::MAX; nchunks];
        let mut eofs = vec![false; nchunks];
        let mut first_err: Option<Error> = None;
        let mut next = 0;
        let mut done = 0;
        while done < nchunks {
            while next < nchunks && first_err.is_none() && self.slots.available() > 0 {
                let off = next * chunk;
                let n = chunk.min(len - off);
                let buf = match region {
                    Some(r) => IoBuf::Region { region: r, offset: off, len: n },
                    None => {
                        let mut v = vec![0u8; n];
                        if !read {
                            // SAFETY: off + n <= len, within the caller's buffer.
                            v.copy_from_slice(unsafe {
                                std::slice::from_raw_parts(ptr.add(off), n)
                            });
                        }
                        IoBuf::Vec(v)
                    }
                };
                match self.submit(open_id, offset + off as u64, buf, cg, next as u64, read, true) {
                    Ok(_) => next += 1,
                    Err(e) => {
                        first_err = Some(e);
                    }
                }
            }
            if next == done && first_err.is_some() {
                break;
            }
            let got = match self.wait_n(cg, 1, None) {
                Ok(got) => got,
                // Only a dead client fails here, and it failed every chunk in flight.
                Err(e) => {
                    assert!(self.dead, "wait_n fails only on a dead client");
                    return Err(first_err.unwrap_or(e));
                }
            };
            for c in got {
                let i = c.user_data as usize;
                done += 1;
                match c.result {
                    Ok(n) => {
                        counts[i] = n;
                        eofs[i] = c.eof;
                        if let (Some(v), true) = (c.buf, read) {
                            // SAFETY: chunk i covers [i*chunk, i*chunk + v.len()) of the caller's buffer.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    v.as_ptr(),
                                    ptr.add(i * chunk),
                                    n.min(v.len()),
                                )
                            };
                        }
                    }
                    Err(e) => {
                        if first_err.is_none() {
                            first_err = Some(e);
                        }
                    }
                }
            }
            if self.dead {
                break;
            }
        }
        // Bytes transferred: contiguous from the start up to the first chunk that was
        // short, failed or never sent. Bytes written before a failure (a full file
        // system) are reported as a short write, as write(2) does; the error comes with
        // the next call. A read fails instead: a short read would look like end of file.
        let mut total = 0;
        for (i, &count) in counts.iter().enumerate() {
            if count == usize::MAX {
                break;
            }
            total += count;
            if count < chunk.min(len - i * chunk) {
                break;
            }
        }
        match first_err {
            Some(e) if read || total == 0 => Err(e),
            _ => Ok(total),
        }
    }

    /// One inline round trip straight to and from the caller's buffer: no staging
    /// buffers, no completion-group bookkeeping (the small-I/O latency path).
    fn blocking_inline(
        &mut self,
        open_id: u64,
        ptr: *mut u8,
        len: usize,
        offset: u64,
        read: bool,
    ) -> Result<usize> {
        if read {
            self.stats.inline_reads += 1;
            let m = self.call(&Request::ReadInline { open_id, offset, len: len as u32 })?;
            match self.decode(&m)?.1 {
                Reply::ReadInline { data, .. } if data.len() <= len => {
                    // SAFETY: the caller's buffer has `len` bytes; data.len() <= len.
                    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
                    self.stats.inline_bytes += data.len() as u64;
                    Ok(data.len())
                }
                Reply::ReadInline { data, .. } => Err(ProtocolViolation::CountExceedsRequest {
                    op: Opcode::ReadInline,
                    count: data.len() as u64,
                    asked: len as u64,
                }
                .into()),
                _ => Err(unexpected_reply(Opcode::ReadInline)),
            }
        } else {
            self.stats.inline_writes += 1;
            // SAFETY: the caller's buffer has `len` readable bytes for this call.
            let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
            let m = self.call(&Request::WriteInline { open_id, offset, stable: false, data })?;
            match self.decode(&m)?.1 {
                // Fewer bytes than asked: a short write (the file system filled up).
                Reply::Write { count, .. } if count as usize <= len => {
                    self.stats.inline_bytes += u64::from(count);
                    Ok(count as usize)
                }
                Reply::Write { count, .. } => Err(ProtocolViolation::CountExceedsRequest {
                    op: Opcode::WriteInline,
                    count: count.into(),
                    asked: len as u64,
                }
                .into()),
                _ => Err(unexpected_reply(Opcode::WriteInline)),
            }
        }
    }
}
