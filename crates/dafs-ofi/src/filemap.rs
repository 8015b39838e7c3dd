//! A read-only mapping of a file range: the source of a READ_DIRECT's RMA write straight
//! from the page cache, instead of a staging buffer the worker first `pread`s into (one
//! copy fewer: over `shm` the client's `process_vm_readv` copies page cache to its
//! buffer, over `tcp;ofi_rxm` the socket send copies from it), as the native TCP
//! provider's `sendfile`.

use std::os::fd::{AsRawFd, BorrowedFd};

/// `len` bytes of a file, mapped read-only and populated; unmapped on drop.
pub struct FileMap {
    base: *mut libc::c_void,
    map_bytes: usize,
    /// Where the range starts inside the first page.
    skip_bytes: usize,
    len: usize,
}

// SAFETY: a FileMap is only an address range it owns (mapped in `new`, unmapped once in
// `drop`); nothing in it is tied to the thread that made it.
unsafe impl Send for FileMap {}

impl FileMap {
    /// Map `len` (> 0) bytes of `fd` from `offset`. The pages are read in here
    /// (`MAP_POPULATE`), by the server's worker, not during the peer's transfer. Fails
    /// where the file system cannot map (the caller copies instead).
    pub fn new(fd: BorrowedFd<'_>, offset: u64, len: usize) -> std::io::Result<FileMap> {
        assert!(len > 0, "empty file mapping");
        let inval = || std::io::Error::from_raw_os_error(libc::EINVAL);
        // SAFETY: sysconf has no memory effects.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = u64::try_from(page).ok().filter(|p| *p > 0).ok_or_else(inval)?;
        let skip_bytes = (offset % page) as usize;
        let start = libc::off_t::try_from(offset - skip_bytes as u64).map_err(|_| inval())?;
        let map_bytes = skip_bytes.checked_add(len).ok_or_else(inval)?;
        // SAFETY: a new mapping at an address the kernel chooses: it replaces nothing,
        // and on failure (MAP_FAILED) nothing is mapped.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_bytes,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                start,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(FileMap { base, map_bytes, skip_bytes, len })
    }

    /// The first byte of the range. No reference to the bytes is ever made: another
    /// process may write the file meanwhile (the transfer then carries either bytes).
    pub fn ptr(&self) -> *const u8 {
        self.base.cast::<u8>().cast_const().wrapping_add(self.skip_bytes)
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for FileMap {
    fn drop(&mut self) {
        // SAFETY: `base`/`map_bytes` are exactly the mapping `new` made, unmapped only here.
        let r = unsafe { libc::munmap(self.base, self.map_bytes) };
        debug_assert_eq!(r, 0, "munmap of our own mapping failed");
    }
}

#[cfg(test)]
mod tests {
    use super::FileMap;
    use std::os::fd::AsFd;

    #[test]
    fn maps_an_unaligned_range() {
        let mut f = std::env::temp_dir();
        f.push(format!("dafs-ofi-filemap-{}", std::process::id()));
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&f, &data).unwrap();
        let file = std::fs::File::open(&f).unwrap();
        std::fs::remove_file(&f).unwrap();
        let m = FileMap::new(file.as_fd(), 5_000, 9_000).unwrap();
        assert_eq!(m.len(), 9_000);
        // SAFETY: the range is mapped (and nobody writes the unlinked file) for this test.
        let got = unsafe { std::slice::from_raw_parts(m.ptr(), m.len()) };
        assert_eq!(got, &data[5_000..14_000]);
    }
}
