//! Batch I/O: many scattered I/Os on one open file in one request.

use dafs_proto::{RemoteRegion, Request, Status};

use crate::inflight::{BatchState, Inflight};
use crate::{CgId, Client, Error, File, RegionId, ReqId, Result};

/// How a batch reports completion (see [`Client::submit_batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchCompletion {
    /// One completion per I/O, each with that I/O's `user_data`.
    PerIo,
    /// One completion for the whole batch (bytes in total, or the first error).
    PerBatch,
    /// The server reports only failed I/Os: one completion per failed I/O, then one for
    /// the batch.
    ErrorsOnly,
}

impl BatchCompletion {
    /// The most completions a batch of `ios` I/Os delivers in this mode (`ios` is at most
    /// the negotiated batch size, so it fits).
    pub(crate) fn completions_max(self, ios: usize) -> u32 {
        let ios = ios as u32;
        match self {
            BatchCompletion::PerIo => ios,
            BatchCompletion::PerBatch => 1,
            BatchCompletion::ErrorsOnly => ios + 1,
        }
    }
}

/// One I/O of a batch: file segments and memory segments (in registered regions),
/// independently scattered; their total lengths must match.
#[derive(Debug, Clone)]
pub struct BatchIoDesc {
    pub write: bool,
    /// `(file offset, length)` segments.
    pub file: Vec<(u64, u64)>,
    /// `(region, offset in region, length)` segments.
    pub mem: Vec<(RegionId, usize, usize)>,
    pub user_data: u64,
}

impl Client {
    /// Submit a batch of I/Os on one open file in one request (at most
    /// [`Client::batch_max`] I/Os; each I/O's file and memory segments are scattered
    /// independently). Completions arrive on `cg` as `mode` says.
    ///
    /// ```no_run
    /// # use dafs_client::*;
    /// # let mut c = Client::connect("127.0.0.1:7420", ClientConfig::default())?;
    /// # let f = c.open("f", OpenOptions::read())?;
    /// let r = c.alloc_registered(1 << 20)?;
    /// let cg = c.create_cg()?;
    /// // Two I/Os: a gather of two file ranges into one buffer, and a scatter of one
    /// // file range into two buffer pieces.
    /// let ios = vec![
    ///     BatchIoDesc { write: false, file: vec![(0, 4096), (1 << 20, 4096)], mem: vec![(r, 0, 8192)], user_data: 1 },
    ///     BatchIoDesc { write: false, file: vec![(8192, 8192)], mem: vec![(r, 65536, 4096), (r, 131072, 4096)], user_data: 2 },
    /// ];
    /// c.submit_batch(&f, ios, cg, 0, BatchCompletion::PerIo)?;
    /// for done in c.wait_all(cg)? { println!("{}: {:?}", done.user_data, done.result); }
    /// # Ok::<(), dafs_client::Error>(())
    /// ```
    pub fn submit_batch(
        &mut self,
        f: &File,
        ios: Vec<BatchIoDesc>,
        cg: CgId,
        user_data: u64,
        mode: BatchCompletion,
    ) -> Result<ReqId> {
        self.check_user_cg(cg)?;
        if let Some(c) = self.cluster.as_deref_mut() {
            return c.submit_batch(f, ios, cg, user_data, mode);
        }
        let open_id = self.open_id_of(f)?;
        if ios.is_empty() {
            return Err(Error::InvalidArgument("empty batch"));
        }
        if ios.len() > self.batch_max as usize {
            return Err(Error::Status(Status::TooMany));
        }
        let mut packed = Vec::new();
        let mut pins: Vec<(u64, Vec<RegionId>)> = Vec::with_capacity(ios.len());
        let mut bytes = 0u64;
        for io in &ios {
            let mut mem = Vec::with_capacity(io.mem.len());
            for &(rid, off, len) in &io.mem {
                let r = self.regions.get(&rid.0).ok_or(Error::InvalidArgument("unknown region"))?;
                if off.checked_add(len).is_none_or(|e| e > r.len()) {
                    return Err(Error::InvalidArgument("range outside the region"));
                }
                mem.push((RemoteRegion { key: r.key, offset: off as u64 }, len as u64));
            }
            let desc = dafs_proto::types::BatchIo { write: io.write, file: io.file.clone(), mem };
            if desc.total() != io.mem.iter().map(|m| m.2 as u64).sum::<u64>()
                || desc.file.is_empty()
                || desc.mem.is_empty()
            {
                return Err(Error::InvalidArgument(
                    "file and memory segments of an I/O must be non-empty with equal totals",
                ));
            }
            if desc.total() > self.direct_bytes_max as u64 {
                return Err(Error::InvalidArgument("batched I/O larger than io_bytes_max()"));
            }
            bytes += desc.total();
            desc.pack(&mut packed);
            pins.push((io.user_data, io.mem.iter().map(|m| m.0).collect()));
        }
        let flags = if mode == BatchCompletion::ErrorsOnly {
            dafs_proto::types::batch_flags::ERRORS_ONLY
        } else {
            0
        };
        self.check_queue_room(cg, mode.completions_max(ios.len()))?;
        let (slot, seq) = self.acquire_slot(false)?;
        let id = ReqId(self.next_req);
        self.next_req += 1;
        for (_, regions) in &pins {
            for r in regions {
                self.regions.get_mut(&r.0).unwrap().busy.incr();
            }
        }
        let st = BatchState { id, cg, user_data, mode, ios: pins, bytes };
        let req = Request::BatchIo { open_id, flags, count: st.ios.len() as u32, ios: &packed };
        // Not sent: send_on_slot gave the slot back and unpinned the regions. Or sent and
        // failed with the connection: then the batch completed (with the error) already.
        self.send_on_slot(slot, seq, &req, Inflight::Batch(st))?;
        Ok(id)
    }
}
