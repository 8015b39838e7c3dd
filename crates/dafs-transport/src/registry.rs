//! Client-side table of registered memory. Every placement the server asks for is
//! checked here before a single byte moves: the key must exist, the range must lie
//! inside the region (checked arithmetic), and the region must allow the access.

use std::collections::HashMap;

use crate::mem_ptr::MemPtr;
use crate::{Access, TransportError};

#[derive(Debug, Clone, Copy)]
pub struct Registration {
    pub mem: MemPtr,
    pub access: Access,
    /// Memory the registry allocated itself (freed on deregister).
    pub owned: bool,
}

/// Bounded registration table. `Send` without ceremony: its pointers are [`MemPtr`]s,
/// and the memory it allocated itself (`owned`) is plain heap, freed by whichever thread
/// drops or deregisters it, like a `Box`.
#[derive(Debug)]
pub struct Registry {
    regions: HashMap<u64, Registration>,
    next_key: u64,
    max_regions: usize,
}

pub const PAGE: usize = 4096;

impl Registry {
    pub fn new(max_regions: usize) -> Self {
        // Keys start at a random point so a key from another connection or an earlier
        // process is very unlikely to name a live region by accident.
        let mut seed = [0u8; 8];
        let _ = getrandom_fallback(&mut seed);
        Registry {
            regions: HashMap::new(),
            next_key: (u64::from_le_bytes(seed) >> 16) | 1,
            max_regions,
        }
    }

    pub fn insert(
        &mut self,
        ptr: *mut u8,
        len: usize,
        access: Access,
        owned: bool,
    ) -> Result<u64, TransportError> {
        if self.regions.len() >= self.max_regions {
            return Err(TransportError::RegistrationLimit);
        }
        let mem = MemPtr::new(ptr, len).filter(|m| !m.is_empty());
        let mem = mem.ok_or(TransportError::BadRegion)?;
        let key = self.next_key;
        self.next_key = self.next_key.wrapping_add(1).max(1);
        self.regions.insert(key, Registration { mem, access, owned });
        Ok(key)
    }

    pub fn remove(&mut self, key: u64) -> Result<Registration, TransportError> {
        let r = self.regions.remove(&key).ok_or(TransportError::BadRegion)?;
        if r.owned {
            // SAFETY: owned regions were allocated by `alloc_owned` with this layout.
            unsafe {
                std::alloc::dealloc(
                    r.mem.as_ptr(),
                    std::alloc::Layout::from_size_align(r.mem.len(), PAGE).unwrap(),
                )
            };
        }
        Ok(r)
    }

    /// Resolve `{key, offset, len}` for the given access to the range it names inside
    /// the region.
    pub fn resolve(
        &self,
        key: u64,
        offset: u64,
        len: usize,
        write: bool,
    ) -> Result<MemPtr, TransportError> {
        let r = self.regions.get(&key).ok_or(TransportError::BadRegion)?;
        let allowed = if write { r.access.remote_write } else { r.access.remote_read };
        if !allowed {
            return Err(TransportError::BadRegion);
        }
        let off = usize::try_from(offset).map_err(|_| TransportError::BadRegion)?;
        r.mem.range(off, len).ok_or(TransportError::BadRegion)
    }

    /// The registration under `key`, if live.
    pub fn get(&self, key: u64) -> Option<Registration> {
        self.regions.get(&key).copied()
    }

    pub fn len(&self) -> usize {
        self.regions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Allocate zeroed, page-aligned memory and register it as owned.
    pub fn alloc_owned(
        &mut self,
        len: usize,
        access: Access,
    ) -> Result<(u64, *mut u8), TransportError> {
        if len == 0 {
            return Err(TransportError::BadRegion);
        }
        let layout = std::alloc::Layout::from_size_align(len, PAGE)
            .map_err(|_| TransportError::BadRegion)?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(TransportError::Io(std::io::Error::from(std::io::ErrorKind::OutOfMemory)));
        }
        match self.insert(ptr, len, access, true) {
            Ok(k) => Ok((k, ptr)),
            Err(e) => {
                // SAFETY: just allocated with this layout, never shared.
                unsafe { std::alloc::dealloc(ptr, layout) };
                Err(e)
            }
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let keys: Vec<u64> = self.regions.keys().copied().collect();
        for k in keys {
            let _ = self.remove(k);
        }
    }
}

fn getrandom_fallback(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_checks_bounds_and_access() {
        let mut r = Registry::new(4);
        let mut mem = vec![0u8; 100];
        let k = r
            .insert(mem.as_mut_ptr(), 100, Access { remote_write: true, remote_read: false }, false)
            .unwrap();
        assert!(r.resolve(k, 0, 100, true).is_ok());
        assert!(r.resolve(k, 1, 100, true).is_err());
        assert!(r.resolve(k, u64::MAX, 2, true).is_err());
        assert!(r.resolve(k, 100, 0, true).is_ok());
        assert!(r.resolve(k, 0, 1, false).is_err(), "no remote read access");
        assert!(r.resolve(k + 1, 0, 1, true).is_err());
        r.remove(k).unwrap();
        assert!(r.resolve(k, 0, 1, true).is_err(), "deregistered");
        let (k2, p) = r.alloc_owned(8192, Access::READ_WRITE).unwrap();
        assert_eq!(p as usize % PAGE, 0);
        assert_eq!(r.resolve(k2, 4096, 10, true).unwrap().addr(), p as usize + 4096);
        assert!(r.resolve(k2, 4096, 4096, false).is_ok());
        for _ in 0..3 {
            r.alloc_owned(10, Access::READ_WRITE).unwrap();
        }
        assert!(matches!(
            r.alloc_owned(10, Access::READ_WRITE),
            Err(TransportError::RegistrationLimit)
        ));
    }
}
