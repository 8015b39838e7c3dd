//! Registered memory regions: memory the server may place data into (or take it from)
//! directly, pinned while I/O naming it is in flight.

use dafs_transport::{Access, MemPtr};

use crate::counters::InFlightCount;
use crate::{Client, Error, Result};

/// A registered memory region, owned by the client; access it with
/// [`Client::region`] / [`Client::region_mut`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegionId(pub u64);

pub(crate) struct RegionInfo {
    pub(crate) key: u64,
    /// The registered bytes (non-null, registered with the transport under `key`).
    pub(crate) mem: MemPtr,
    /// The Vec handed to `register`, returned by `unregister`.
    pub(crate) vec: Option<Vec<u8>>,
    /// I/Os in flight that name this region: while > 0 the application may not touch it.
    pub(crate) busy: InFlightCount,
}

/// The bound region pins are sized for: the count's whole range. Each pin is one memory
/// segment of a request in flight (or being submitted) that names the region; a request
/// that can be sent fits in one message, so real counts stay far below it.
const PINS_MAX: u32 = u32::MAX;

impl RegionInfo {
    pub(crate) fn new(key: u64, ptr: *mut u8, len: usize, vec: Option<Vec<u8>>) -> Self {
        let mem = MemPtr::new(ptr, len).expect("the transport registered non-null memory");
        RegionInfo { key, mem, vec, busy: InFlightCount::new("region pins", PINS_MAX) }
    }
    pub(crate) fn len(&self) -> usize {
        self.mem.len()
    }
}

impl Client {
    /// Add a registered region to the table. Keys are the transport's and unique among
    /// its live registrations: an entry already there would be a registration leaked.
    pub(crate) fn insert_region(&mut self, r: RegionInfo) {
        let prev = self.regions.insert(r.key, r);
        assert!(prev.is_none(), "region keys are unique among live registrations");
    }

    /// Allocate `len` bytes of zeroed memory registered for direct placement.
    pub fn alloc_registered(&mut self, len: usize) -> Result<RegionId> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.alloc_registered(len);
        }
        let (key, ptr) = self.t.alloc_registered(len)?;
        self.insert_region(RegionInfo::new(key, ptr, len, None));
        Ok(RegionId(key))
    }

    /// Register with the transport; if the connection turns out to be broken, recover the
    /// session (when configured) and register on the new connection.
    ///
    /// # Safety
    /// As [`ClientTransport::register`].
    pub(crate) unsafe fn register_recovering(
        &mut self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<u64> {
        // SAFETY: the caller's contract.
        match unsafe { self.t.register(ptr, len, access) } {
            Ok(k) => Ok(k),
            Err(e) if e.is_fatal() && self.cfg.reconnect && !self.dead => {
                self.connection_broke(e)?;
                // SAFETY: the caller's contract.
                Ok(unsafe { self.t.register(ptr, len, access) }?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Register a buffer the application owns; it is handed back by [`Client::unregister`].
    pub fn register(&mut self, mut vec: Vec<u8>) -> Result<RegionId> {
        if vec.is_empty() {
            return Err(Error::InvalidArgument("empty buffer"));
        }
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.register(vec);
        }
        let (ptr, len) = (vec.as_mut_ptr(), vec.len());
        // SAFETY: the Vec is moved into the region table and not touched (nor its heap
        // buffer moved or freed) until it is unregistered.
        let key = unsafe { self.register_recovering(ptr, len, Access::READ_WRITE)? };
        self.insert_region(RegionInfo::new(key, ptr, len, Some(vec)));
        Ok(RegionId(key))
    }

    /// Register memory the library does not own (C and Python bindings).
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid until [`Client::unregister`], and must not be
    /// accessed by the application while I/O naming it is in flight.
    pub unsafe fn register_raw(&mut self, ptr: *mut u8, len: usize) -> Result<RegionId> {
        if ptr.is_null() || len == 0 {
            return Err(Error::InvalidArgument("null or empty region"));
        }
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.register_raw(ptr, len);
        }
        let key = self.register_recovering(ptr, len, Access::READ_WRITE)?;
        self.insert_region(RegionInfo::new(key, ptr, len, None));
        Ok(RegionId(key))
    }

    /// Unregister a region with no I/O in flight. Returns the Vec given to `register`.
    pub fn unregister(&mut self, id: RegionId) -> Result<Option<Vec<u8>>> {
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.unregister(id);
        }
        match self.regions.get(&id.0) {
            None => return Err(Error::InvalidArgument("unknown region")),
            Some(r) if !r.busy.is_zero() => return Err(Error::RegionBusy),
            _ => {}
        }
        let key = self.regions[&id.0].key;
        match self.t.deregister(key) {
            Ok(()) => {}
            // The connection is gone, and with it the server's access to the memory: it is
            // the application's again (its Vec must not be lost with the connection).
            // With reconnection on, the next call re-binds the session.
            Err(e) if self.dead || e.is_fatal() => {
                if !self.cfg.reconnect {
                    self.fail_all(&e.to_string())
                }
            }
            // Still registered: keep it in the table so the caller can retry.
            Err(e) => return Err(e.into()),
        }
        Ok(self.regions.remove(&id.0).unwrap().vec)
    }

    /// The region's bytes (refused while I/O naming it is in flight).
    pub fn region(&self, id: RegionId) -> Result<&[u8]> {
        if let Some(c) = self.cluster.as_deref() {
            let mem = c.region_mem(id)?;
            // SAFETY: front-region memory of mem.len() bytes, valid until unregistered,
            // and no node has I/O on it in flight (checked); &self prevents progress.
            return Ok(unsafe { mem.as_slice() });
        }
        let r = self.regions.get(&id.0).ok_or(Error::InvalidArgument("unknown region"))?;
        if !r.busy.is_zero() {
            return Err(Error::RegionBusy);
        }
        // SAFETY: registered memory of r.len bytes, valid until unregistered, and no
        // placement targets it now (busy == 0); &self prevents progress meanwhile.
        Ok(unsafe { r.mem.as_slice() })
    }

    pub fn region_mut(&mut self, id: RegionId) -> Result<&mut [u8]> {
        if let Some(c) = self.cluster.as_deref() {
            let mem = c.region_mem(id)?;
            // SAFETY: as in `region`, and &mut self makes the borrow exclusive.
            return Ok(unsafe { mem.as_mut_slice() });
        }
        let r = self.regions.get(&id.0).ok_or(Error::InvalidArgument("unknown region"))?;
        if !r.busy.is_zero() {
            return Err(Error::RegionBusy);
        }
        // SAFETY: as in `region`, and &mut self makes the borrow exclusive.
        Ok(unsafe { r.mem.as_mut_slice() })
    }
}
