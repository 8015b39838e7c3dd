//! Asynchronous I/O and registered memory on a cluster URL.
//!
//! A file opened through the front client lives on one node, and its I/O goes over
//! that node's session; the application still sees one client:
//!
//! - **Completion groups** are the front client's (its bounded table hands out the
//!   ids). A front group spans a group in each node session it has I/O on, made on
//!   first use. `poll` reaps every node's group without blocking; `wait_*` with work
//!   in flight on one node waits in that session, and with work on several sleeps in
//!   one poll(2) on their connections (no thread per node: the library has none).
//! - **Request ids** name their node: `node id × NODE_SLOTS_MAX + slot`, unique
//!   across the nodes without a table.
//! - **Registered regions** are the front client's memory (allocated page-aligned,
//!   or the application's Vec or raw memory), registered with a node's session the
//!   first time an I/O on a file of that node names it. The application's view
//!   (`region`, `region_mut`) is refused while any node has I/O on it in flight;
//!   `unregister` unregisters it from every node first.
//! - A node session that fails is dropped (see `Cluster::on`); before it goes, what it
//!   still owes is failed (with the node's error) and its completions move to the
//!   front, so a group never loses a completion with a node.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use dafs_transport::{MemPtr, TransportError};

use super::sys::{self, AlignedBuf};
use super::{Cluster, NODE_SLOTS_MAX};
use crate::{
    BatchCompletion, BatchIoDesc, CgId, Client, Completion, Error, File, IoBuf, RegionId, ReqId,
    Result,
};

/// Most regions a front client holds at once: each may be registered with every
/// node's connection, whose table holds this many (`dafs_transport::tcp::REGIONS_MAX`).
pub const CLUSTER_REGIONS_MAX: usize = dafs_transport::tcp::REGIONS_MAX;

/// Who owns a front region's memory.
enum Owner {
    /// [`Client::alloc_registered`]: freed at unregister.
    Alloc { _buf: AlignedBuf },
    /// [`Client::register`]: handed back at unregister.
    Vec(Vec<u8>),
    /// [`Client::register_raw`]: the application's.
    Raw,
}

struct FrontRegion {
    mem: MemPtr,
    owner: Owner,
    /// The region's registration in each node session that has used it.
    nodes: Vec<(usize, RegionId)>,
}

/// The asynchronous state of a front client.
#[derive(Default)]
pub(super) struct Aio {
    /// Front group id → its group in each node session: (node slot, node group).
    groups: HashMap<u32, Vec<(usize, CgId)>>,
    regions: HashMap<u64, FrontRegion>,
    next_region: u64,
    /// Completions of node sessions dropped after a failure, by front group.
    orphans: HashMap<u32, VecDeque<Completion>>,
    /// Node to reap first at the next poll (no node's completions starve the others').
    cursor: usize,
}

/// The front id of node `slot`'s request `id`.
fn front_req(id: ReqId, slot: usize) -> ReqId {
    assert!(slot < NODE_SLOTS_MAX, "node slots are bounded");
    ReqId(id.0.wrapping_mul(NODE_SLOTS_MAX as u64).wrapping_add(slot as u64))
}

fn from_node(mut c: Completion, slot: usize) -> Completion {
    c.id = front_req(c.id, slot);
    c
}

impl Aio {
    /// Node session `c` of `slot` is being dropped: fail what it owes the front's
    /// groups, keep its completions, forget its groups and registrations.
    pub(super) fn forget_node(&mut self, slot: usize, c: &mut Client) {
        let owes = self.groups.values().flatten().any(|&(s, g)| s == slot && c.outstanding(g) > 0);
        if owes {
            // Placement into the application's memory happens only inside this
            // session's calls, and there are no more: the memory is the application's.
            c.fail_all("the cluster client dropped the node's session");
        }
        for (front, nodes) in self.groups.iter_mut() {
            nodes.retain(|&(s, g)| {
                if s != slot {
                    return true;
                }
                let done = c.cgs.get_mut(g).map(|q| q.take(usize::MAX)).unwrap_or_default();
                let q = self.orphans.entry(*front).or_default();
                q.extend(done.into_iter().map(|d| from_node(d, slot)));
                false
            });
        }
        for r in self.regions.values_mut() {
            r.nodes.retain(|&(s, _)| s != slot);
        }
    }

    fn take_orphans(&mut self, cg: CgId, max: usize) -> Vec<Completion> {
        let Some(q) = self.orphans.get_mut(&cg.0) else { return Vec::new() };
        let n = q.len().min(max);
        let out: Vec<Completion> = q.drain(..n).collect();
        if q.is_empty() {
            self.orphans.remove(&cg.0);
        }
        out
    }

    fn insert_region(&mut self, mem: MemPtr, owner: Owner) -> Result<RegionId> {
        if self.regions.len() >= CLUSTER_REGIONS_MAX {
            return Err(Error::Transport(TransportError::RegistrationLimit));
        }
        self.next_region += 1;
        let id = self.next_region;
        self.regions.insert(id, FrontRegion { mem, owner, nodes: Vec::new() });
        Ok(RegionId(id))
    }
}

impl Cluster {
    /// The node slot of a file this cluster client opened.
    fn file_slot(&self, f: &File) -> Result<usize> {
        if f.node >= self.slots.len() {
            return Err(Error::InvalidArgument("file was not opened by this cluster client"));
        }
        Ok(f.node)
    }

    /// Front group `cg`'s group in node `slot`'s session, made there on first use.
    fn node_cg(&mut self, slot: usize, cg: CgId) -> Result<CgId> {
        let known = self.aio.groups.get(&cg.0).and_then(|v| v.iter().find(|g| g.0 == slot));
        if let Some(&(_, g)) = known {
            return Ok(g);
        }
        let g = self.on(slot, |c| c.create_cg())?;
        self.aio.groups.entry(cg.0).or_default().push((slot, g));
        Ok(g)
    }

    /// Front region `id`'s registration with node `slot`'s session, made on first use.
    fn node_region(&mut self, slot: usize, id: RegionId) -> Result<RegionId> {
        let r = self.aio.regions.get(&id.0).ok_or(Error::InvalidArgument("unknown region"))?;
        if let Some(&(_, rid)) = r.nodes.iter().find(|n| n.0 == slot) {
            return Ok(rid);
        }
        let mem = r.mem;
        let rid = self.on(slot, |c| sys::register_with(c, mem))?;
        self.aio.regions.get_mut(&id.0).expect("looked up above").nodes.push((slot, rid));
        Ok(rid)
    }

    /// `op` on node `slot` if its session is up (no connecting, not counted as a
    /// routed request); None if it is not.
    fn on_live<T>(
        &mut self,
        slot: usize,
        op: impl FnOnce(&mut Client) -> Result<T>,
    ) -> Option<Result<T>> {
        let c = self.slots[slot].client.as_mut()?;
        match op(c) {
            Err(e) if super::node_failed(&e) => {
                self.drop_node(slot);
                Some(Err(self.unavailable(slot, e)))
            }
            r => Some(r),
        }
    }

    pub(crate) fn submit_io(
        &mut self,
        f: &File,
        offset: u64,
        buf: IoBuf,
        cg: CgId,
        user_data: u64,
        read: bool,
    ) -> Result<ReqId> {
        let slot = self.file_slot(f)?;
        let buf = match buf {
            IoBuf::Region { region, offset, len } => {
                IoBuf::Region { region: self.node_region(slot, region)?, offset, len }
            }
            b => b,
        };
        let g = self.node_cg(slot, cg)?;
        let id = self.on(slot, |c| {
            if read {
                c.submit_read(f, offset, buf, g, user_data)
            } else {
                c.submit_write(f, offset, buf, g, user_data)
            }
        })?;
        Ok(front_req(id, slot))
    }

    pub(crate) fn submit_batch(
        &mut self,
        f: &File,
        mut ios: Vec<BatchIoDesc>,
        cg: CgId,
        user_data: u64,
        mode: BatchCompletion,
    ) -> Result<ReqId> {
        let slot = self.file_slot(f)?;
        for io in &mut ios {
            for m in &mut io.mem {
                m.0 = self.node_region(slot, m.0)?;
            }
        }
        let g = self.node_cg(slot, cg)?;
        let id = self.on(slot, |c| c.submit_batch(f, ios, g, user_data, mode))?;
        Ok(front_req(id, slot))
    }

    /// Requests of front group `cg` in flight on every node.
    pub(crate) fn outstanding(&self, cg: CgId) -> usize {
        self.busy_nodes(cg).iter().map(|b| b.2).sum()
    }

    /// The node groups of `cg` with requests in flight: (slot, node group, count).
    fn busy_nodes(&self, cg: CgId) -> Vec<(usize, CgId, usize)> {
        let Some(nodes) = self.aio.groups.get(&cg.0) else { return Vec::new() };
        nodes
            .iter()
            .filter_map(|&(s, g)| {
                let n = self.slots[s].client.as_ref()?.outstanding(g);
                (n > 0).then_some((s, g, n))
            })
            .collect()
    }

    /// Reap up to `max` completions of `cg` from every node, without blocking.
    pub(crate) fn poll(&mut self, cg: CgId, max: usize) -> Result<Vec<Completion>> {
        let mut out = self.aio.take_orphans(cg, max);
        let nodes = self.aio.groups.get(&cg.0).cloned().unwrap_or_default();
        let start = self.aio.cursor;
        self.aio.cursor = self.aio.cursor.wrapping_add(1);
        for i in 0..nodes.len() {
            if out.len() >= max {
                break;
            }
            let (slot, g) = nodes[(start + i) % nodes.len()];
            let want = max - out.len();
            match self.on_live(slot, |c| c.poll(g, want)) {
                None => {}
                Some(Ok(done)) => out.extend(done.into_iter().map(|d| from_node(d, slot))),
                // The node's session was dropped: its completions are orphans now.
                Some(Err(Error::NodeUnavailable { .. })) => {}
                Some(Err(e)) => return Err(e),
            }
        }
        if out.len() < max {
            out.extend(self.aio.take_orphans(cg, max - out.len()));
        }
        Ok(out)
    }

    /// Wait until `n` completions of `cg` are available, nothing of it is in flight any
    /// more, or the deadline passes; return what arrived.
    pub(crate) fn wait_n(
        &mut self,
        cg: CgId,
        n: usize,
        deadline: Option<Instant>,
    ) -> Result<Vec<Completion>> {
        let mut out = Vec::new();
        loop {
            out.extend(self.poll(cg, n - out.len())?);
            if out.len() >= n {
                return Ok(out);
            }
            let busy = self.busy_nodes(cg);
            if busy.is_empty() {
                return Ok(out);
            }
            let left = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(out),
                },
            };
            if let [(slot, g, _)] = busy[..] {
                // One node owes completions: wait in its session (its spin, its fd).
                let want = n - out.len();
                match self.on_live(slot, |c| c.wait_n(g, want, left)) {
                    None | Some(Err(Error::NodeUnavailable { .. })) => {}
                    Some(Ok(done)) => out.extend(done.into_iter().map(|d| from_node(d, slot))),
                    Some(Err(e)) => return Err(e),
                }
            } else {
                // Several: every connection was just drained (`poll`), so anything new
                // wakes its fd; a connection with output queued waits for room too.
                let fds: Vec<_> = busy
                    .iter()
                    .filter_map(|&(s, _, _)| self.slots[s].client.as_ref().map(|c| c.readiness()))
                    .collect();
                sys::sleep_on_fds(&fds, left).map_err(|e| Error::Transport(e.into()))?;
            }
        }
    }

    /// Destroy front group `cg`'s node groups (all must be idle).
    pub(crate) fn destroy_cg(&mut self, cg: CgId) -> Result<()> {
        let nodes = self.aio.groups.get(&cg.0).cloned().unwrap_or_default();
        let idle = nodes.iter().all(|&(s, g)| {
            self.slots[s]
                .client
                .as_ref()
                .and_then(|c| c.cgs.get(g))
                .is_none_or(|q| q.outstanding() == 0 && q.queued() == 0)
        });
        if !idle || self.aio.orphans.contains_key(&cg.0) {
            return Err(Error::InvalidArgument(
                "completion group has requests in flight or unreaped",
            ));
        }
        for (s, g) in nodes {
            if let Some(c) = self.slots[s].client.as_mut() {
                c.destroy_cg(g)?;
            }
        }
        self.aio.groups.remove(&cg.0);
        Ok(())
    }

    pub(crate) fn alloc_registered(&mut self, len: usize) -> Result<RegionId> {
        let buf = AlignedBuf::zeroed(len)
            .ok_or(Error::InvalidArgument("cannot allocate a region of this length"))?;
        let mem = buf.mem();
        self.aio.insert_region(mem, Owner::Alloc { _buf: buf })
    }

    pub(crate) fn register(&mut self, mut vec: Vec<u8>) -> Result<RegionId> {
        let mem = MemPtr::new(vec.as_mut_ptr(), vec.len())
            .ok_or(Error::InvalidArgument("empty buffer"))?;
        self.aio.insert_region(mem, Owner::Vec(vec))
    }

    /// The caller (`Client::register_raw`) holds the memory valid until unregister.
    pub(crate) fn register_raw(&mut self, ptr: *mut u8, len: usize) -> Result<RegionId> {
        let mem = MemPtr::new(ptr, len).ok_or(Error::InvalidArgument("null or empty region"))?;
        self.aio.insert_region(mem, Owner::Raw)
    }

    /// True while a node has I/O naming front region `id` in flight.
    fn region_pinned(&self, r: &FrontRegion) -> bool {
        r.nodes.iter().any(|&(s, rid)| {
            let c = self.slots[s].client.as_ref();
            c.and_then(|c| c.regions.get(&rid.0)).is_some_and(|n| !n.busy.is_zero())
        })
    }

    /// The region's memory, if no node has I/O on it in flight.
    pub(crate) fn region_mem(&self, id: RegionId) -> Result<MemPtr> {
        let r = self.aio.regions.get(&id.0).ok_or(Error::InvalidArgument("unknown region"))?;
        if self.region_pinned(r) {
            return Err(Error::RegionBusy);
        }
        Ok(r.mem)
    }

    pub(crate) fn unregister(&mut self, id: RegionId) -> Result<Option<Vec<u8>>> {
        let r = self.aio.regions.get(&id.0).ok_or(Error::InvalidArgument("unknown region"))?;
        if self.region_pinned(r) {
            return Err(Error::RegionBusy);
        }
        // From every node first: the memory may be freed only when no session names it.
        while let Some(&(s, rid)) = self.aio.regions[&id.0].nodes.last() {
            if let Some(c) = self.slots[s].client.as_mut() {
                c.unregister(rid)?;
            }
            self.aio.regions.get_mut(&id.0).expect("present").nodes.pop();
        }
        let r = self.aio.regions.remove(&id.0).expect("present");
        Ok(match r.owner {
            Owner::Vec(v) => Some(v),
            Owner::Alloc { .. } | Owner::Raw => None,
        })
    }
}
