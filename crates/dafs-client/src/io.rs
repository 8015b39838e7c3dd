//! Asynchronous data I/O: submit a read or write of registered memory or an owned Vec;
//! it completes on a completion group.

use dafs_proto::{RemoteRegion, Request};
use dafs_transport::Access;

use crate::inflight::{Inflight, IoState, Target};
use crate::{CgId, Client, Error, File, RegionId, Result};

/// Identifies one submitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReqId(pub u64);

/// Memory for an asynchronous I/O.
#[derive(Debug)]
pub enum IoBuf {
    /// A range of a registered region: direct placement when above the threshold.
    Region { region: RegionId, offset: usize, len: usize },
    /// Memory owned by the request and handed back in the [`Completion`](crate::Completion). For reads,
    /// the Vec's length is the number of bytes to read. Above the threshold it is
    /// registered for the duration of the request (counted in [`ClientStats::off_direct_path`](crate::ClientStats::off_direct_path)).
    Vec(Vec<u8>),
}

impl Client {
    /// Submit a read of `buf`'s length at `offset`. Completes on `cg`.
    pub fn submit_read(
        &mut self,
        f: &File,
        offset: u64,
        buf: IoBuf,
        cg: CgId,
        user_data: u64,
    ) -> Result<ReqId> {
        self.check_user_cg(cg)?;
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.submit_io(f, offset, buf, cg, user_data, true);
        }
        self.submit(self.open_id_of(f)?, offset, buf, cg, user_data, true, false)
    }

    /// Submit a write of `buf` at `offset`. `stable`: durable before the reply.
    pub fn submit_write(
        &mut self,
        f: &File,
        offset: u64,
        buf: IoBuf,
        cg: CgId,
        user_data: u64,
    ) -> Result<ReqId> {
        self.check_user_cg(cg)?;
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.submit_io(f, offset, buf, cg, user_data, false);
        }
        self.submit(self.open_id_of(f)?, offset, buf, cg, user_data, false, false)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn submit(
        &mut self,
        open_id: u64,
        offset: u64,
        buf: IoBuf,
        cg: CgId,
        user_data: u64,
        read: bool,
        block: bool,
    ) -> Result<ReqId> {
        self.check_cg(cg)?;
        let len = match &buf {
            IoBuf::Region { region, offset: off, len } => {
                let r =
                    self.regions.get(&region.0).ok_or(Error::InvalidArgument("unknown region"))?;
                if off.checked_add(*len).is_none_or(|end| end > r.len()) {
                    return Err(Error::InvalidArgument("range outside the region"));
                }
                *len
            }
            IoBuf::Vec(v) => v.len(),
        };
        if len > self.direct_bytes_max {
            return Err(Error::InvalidArgument("I/O larger than io_bytes_max()"));
        }
        let direct = match &buf {
            IoBuf::Region { .. } => len > self.inline_threshold,
            IoBuf::Vec(_) => len > self.inline_threshold_unregistered(),
        };
        self.check_queue_room(cg, 1)?;
        let chan = self.channel_for_io(open_id, offset, len, read, direct)?;
        let (slot, seq) = self.acquire_slot(block)?;
        self.chan_hint = Some(chan);
        let id = ReqId(self.next_req);
        self.next_req += 1;
        // Resolve the memory and build the request.
        let (target, region) = match buf {
            IoBuf::Region { region, offset: roff, .. } => {
                let r = self.regions.get_mut(&region.0).unwrap();
                r.busy.incr();
                (
                    Target::Region { id: region, offset: roff },
                    RemoteRegion { key: r.key, offset: roff as u64 },
                )
            }
            IoBuf::Vec(mut v) => {
                let mut temp_key = None;
                if direct {
                    self.stats.off_direct_path += 1;
                    // SAFETY: the Vec is owned by the in-flight request until completion,
                    // which deregisters before handing it back.
                    let r = unsafe {
                        self.register_recovering(v.as_mut_ptr(), v.len(), Access::READ_WRITE)
                    };
                    match r {
                        Ok(k) => temp_key = Some(k),
                        Err(e) => {
                            self.slots.abandon(slot);
                            return Err(e);
                        }
                    }
                }
                let key = temp_key.unwrap_or(0);
                (Target::Vec { buf: v, temp_key }, RemoteRegion { key, offset: 0 })
            }
        };
        let io = IoState { id, cg, user_data, read, direct, len, target, open_id, offset };
        let stable = false;
        let res = if read {
            if direct {
                self.stats.direct_reads += 1;
                self.send_on_slot(
                    slot,
                    seq,
                    &Request::ReadDirect { open_id, offset, len: len as u32, region },
                    Inflight::Io(io),
                )
            } else {
                self.stats.inline_reads += 1;
                self.send_on_slot(
                    slot,
                    seq,
                    &Request::ReadInline { open_id, offset, len: len as u32 },
                    Inflight::Io(io),
                )
            }
        } else if direct {
            self.stats.direct_writes += 1;
            self.send_on_slot(
                slot,
                seq,
                &Request::WriteDirect { open_id, offset, len: len as u32, stable, region },
                Inflight::Io(io),
            )
        } else {
            self.stats.inline_writes += 1;
            // The inline payload is copied into the message from the caller's memory.
            let data: &[u8] = match &io.target {
                Target::Region { id, offset } => {
                    let r = &self.regions[&id.0];
                    // SAFETY: range checked against the region above.
                    unsafe { std::slice::from_raw_parts(r.mem.as_ptr().add(*offset), len) }
                }
                Target::Vec { buf, .. } => buf,
            };
            // Not `send_on_slot`: `data` borrows from `io`, which the in-flight record
            // takes only after the encoding.
            let enc = self.encode_on_slot(
                slot,
                seq,
                &Request::WriteInline { open_id, offset, stable, data },
            );
            match enc {
                Err(e) => {
                    self.slots.abandon(slot);
                    self.inflight_undo(Inflight::Io(io));
                    Err(e.into())
                }
                Ok(_) => self.send_slot_buf(slot, seq, Inflight::Io(io)),
            }
        };
        // The request counts on its group from when it was recorded in flight.
        res.map(|()| id)
    }
}
