//! What is in flight on each slot, and how a finished request becomes completions.

use std::time::Instant;

use dafs_proto::{Opcode, Status};

use crate::counters::InFlightCount;
use crate::{
    BatchCompletion, CgId, Client, Completion, Error, ProtocolViolation, RegionId, ReqId, Result,
};

pub(crate) enum Target {
    Region { id: RegionId, offset: usize },
    Vec { buf: Vec<u8>, temp_key: Option<u64> },
}

pub(crate) struct IoState {
    pub(crate) id: ReqId,
    pub(crate) cg: CgId,
    pub(crate) user_data: u64,
    pub(crate) read: bool,
    pub(crate) direct: bool,
    pub(crate) len: usize,
    pub(crate) target: Target,
    /// The open and file offset it covers (requests of a trunked session that overlap
    /// go on one connection, so they stay in issue order).
    pub(crate) open_id: u64,
    pub(crate) offset: u64,
}

impl IoState {
    /// The operation the I/O was sent as.
    pub(crate) fn opcode(&self) -> Opcode {
        match (self.read, self.direct) {
            (true, false) => Opcode::ReadInline,
            (true, true) => Opcode::ReadDirect,
            (false, false) => Opcode::WriteInline,
            (false, true) => Opcode::WriteDirect,
        }
    }

    /// The violation of a reply that transferred `count` bytes, more than asked.
    pub(crate) fn count_exceeds(&self, count: usize) -> Error {
        ProtocolViolation::CountExceedsRequest {
            op: self.opcode(),
            count: count as u64,
            asked: self.len as u64,
        }
        .into()
    }
}

pub(crate) enum Inflight {
    Sync { req: u64 },
    Io(IoState),
    Batch(BatchState),
}

impl Inflight {
    /// The most completions the request may deliver to its group: room reserved in the
    /// group's queue while it is in flight.
    pub(crate) fn completions_max(&self) -> u32 {
        match self {
            Inflight::Sync { .. } => 0,
            Inflight::Io(_) => 1,
            Inflight::Batch(b) => b.mode.completions_max(b.ios.len()),
        }
    }

    /// The completion group the request completes on (a synchronous one has none).
    pub(crate) fn cg(&self) -> Option<CgId> {
        match self {
            Inflight::Sync { .. } => None,
            Inflight::Io(io) => Some(io.cg),
            Inflight::Batch(b) => Some(b.cg),
        }
    }
}

pub(crate) struct BatchState {
    pub(crate) id: ReqId,
    pub(crate) cg: CgId,
    pub(crate) user_data: u64,
    pub(crate) mode: BatchCompletion,
    /// Per I/O: its user data and the regions it pinned.
    pub(crate) ios: Vec<(u64, Vec<RegionId>)>,
    /// The data bytes of every I/O in the batch (for the spin policy).
    pub(crate) bytes: u64,
}

pub(crate) struct Slot {
    pub(crate) seq: u32,
    pub(crate) what: Inflight,
    /// When the request was first sent: its deadline (`request_deadline`) runs from here.
    pub(crate) sent_at: Instant,
    /// Times it was resent after a reconnect (bounded by `reconnects_per_request_max`).
    pub(crate) resends: u32,
    /// The channel (connection of the session) it was last sent on: its reply comes
    /// back there, and is lost with it.
    pub(crate) chan: usize,
}

/// Transfers at least this large take far longer than a wake-up: while only such requests
/// are in flight, the client sleeps at once instead of spinning. A 64–256 KiB placement
/// over shared memory takes 5–30 us, less than a cross-core wake-up (~20 us), so those
/// spin: at 64 KiB the bound made random reads four times slower than 32 KiB ones. From
/// 512 KiB on a placement takes longer than the spin budget would catch, and sleeping
/// keeps the client's CPU per GB far below a local `pread`'s.
pub(crate) const LARGE_IO_BYTES: usize = 512 * 1024;

/// While at least this many bytes of I/O are in flight the client sleeps at once, even
/// if some requests are quick: the server is busy copying them (on a machine with few
/// cores it needs every core for that, and a spinning client takes one), and the replies
/// queue up meanwhile, so one wake-up reaps several and the wake-up's latency is hidden
/// behind the transfers still in flight. Eight 64 KiB reads in flight are this much.
pub(crate) const BUSY_IO_BYTES: u64 = LARGE_IO_BYTES as u64;

/// Spin before sleeping only while a quick request is in flight (`quick`) and less than
/// [`BUSY_IO_BYTES`] of data is in flight in all (`io_bytes`).
fn spin_policy(quick: bool, io_bytes: u64) -> bool {
    quick && io_bytes < BUSY_IO_BYTES
}

/// The bytes of data the request moves (batches: every I/O in it).
fn io_bytes(what: &Inflight) -> u64 {
    match what {
        Inflight::Sync { .. } => 0,
        Inflight::Io(io) => io.len as u64,
        Inflight::Batch(b) => b.bytes,
    }
}

pub(crate) fn is_small(what: &Inflight) -> bool {
    match what {
        Inflight::Sync { .. } => true,
        Inflight::Io(io) => io.len < LARGE_IO_BYTES,
        Inflight::Batch(_) => false,
    }
}

/// The count of quick requests in flight (see [`is_small`]) for a session of `slots` slots.
pub(crate) fn small_inflight_count(slots: u32) -> InFlightCount {
    InFlightCount::new("quick requests in flight", slots)
}

impl Client {
    /// Record the request sent on `slot` as in flight: from here until its reply is routed
    /// (or the client fails) it counts for the spin policy and on its completion group.
    pub(crate) fn inflight_record(&mut self, slot: u32, seq: u32, what: Inflight) {
        self.count_in(&what);
        if let Some(cg) = what.cg() {
            let capacity = self.completions_queued_max();
            self.cgs
                .get_mut(cg)
                .expect("requests are submitted on existing completion groups")
                .begin(what.completions_max(), capacity);
        }
        let prev = self.inflight[slot as usize].replace(Slot {
            seq,
            what,
            sent_at: Instant::now(),
            resends: 0,
            chan: 0,
        });
        assert!(prev.is_none(), "slot {slot} already has a request in flight");
    }

    /// Take the request on `slot` out of flight (its reply arrived, or the client failed).
    /// Its completion group still counts it until it completes (`finish_io`,
    /// `finish_batch`).
    pub(crate) fn inflight_take(&mut self, slot: usize) -> Option<Slot> {
        let s = self.inflight[slot].take()?;
        if is_small(&s.what) {
            self.small_inflight.decr();
        }
        let n = io_bytes(&s.what);
        assert!(n <= self.io_bytes_inflight, "more I/O bytes leave flight than entered");
        self.io_bytes_inflight -= n;
        Some(s)
    }

    /// Count `what` as in flight for the spin policy (see [`Client::spin_worth_it`]).
    pub(crate) fn count_in(&mut self, what: &Inflight) {
        if is_small(what) {
            self.small_inflight.incr();
        }
        self.io_bytes_inflight += io_bytes(what);
    }

    /// Whether waiting for the next reply should spin before it sleeps: only while a
    /// quick request is in flight and the server is not busy with [`BUSY_IO_BYTES`].
    pub(crate) fn spin_worth_it(&self) -> bool {
        spin_policy(!self.small_inflight.is_zero(), self.io_bytes_inflight)
    }

    /// Take back the request just recorded on `slot`: the transport refused it before
    /// anything was sent, so it will never complete.
    pub(crate) fn inflight_unrecord(&mut self, slot: u32) -> Inflight {
        let s = self.inflight_take(slot as usize).expect("recorded just before");
        if let Some(cg) = s.what.cg() {
            self.cgs.of_request(cg).unbegin(s.what.completions_max());
        }
        s.what
    }

    /// Copy inline read data into the request's memory (`data.len() <= io.len`, checked
    /// by the caller; the range was checked against the region at submit).
    pub(crate) fn copy_into_target(&mut self, io: &mut IoState, data: &[u8]) {
        debug_assert!(data.len() <= io.len);
        match &mut io.target {
            Target::Region { id, offset } => {
                let r = self.regions.get(&id.0).expect("a busy region stays registered");
                assert!(*offset + data.len() <= r.len());
                // SAFETY: in bounds (asserted), and the region is pinned (busy) so the
                // application holds no reference to it.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        r.mem.as_ptr().add(*offset),
                        data.len(),
                    )
                };
            }
            Target::Vec { buf, .. } => buf[..data.len()].copy_from_slice(data),
        }
    }

    pub(crate) fn finish_io(&mut self, io: IoState, res: Result<usize>, eof: bool) {
        if res.is_err() {
            self.stats.errors += 1;
        }
        let mut out_buf = None;
        match io.target {
            Target::Region { id, .. } => {
                if let Some(r) = self.regions.get_mut(&id.0) {
                    r.busy.decr();
                }
            }
            Target::Vec { buf, temp_key } => {
                if let Some(k) = temp_key {
                    let _ = self.t.deregister(k);
                }
                out_buf = Some(buf);
            }
        }
        let done =
            Completion { id: io.id, user_data: io.user_data, result: res, eof, buf: out_buf };
        self.cgs.of_request(io.cg).finish(1, [done]);
    }

    /// Turn a batch reply (None: the connection died) into completions.
    pub(crate) fn finish_batch(
        &mut self,
        b: BatchState,
        results: Option<Result<Vec<dafs_proto::types::BatchResult>, Status>>,
    ) {
        for (_, regions) in &b.ios {
            for r in regions {
                if let Some(reg) = self.regions.get_mut(&r.0) {
                    reg.busy.decr();
                }
            }
        }
        let n = b.ios.len();
        // Per-I/O outcome: (result, reported by the server).
        let mut per: Vec<Result<usize>> = (0..n).map(|_| Ok(0)).collect();
        let whole: Result<usize> = match results {
            None => {
                per.iter_mut().for_each(|p| *p = Err(Error::Disconnected));
                Err(Error::Disconnected)
            }
            Some(Err(s)) => {
                per.iter_mut().for_each(|p| *p = Err(Error::Status(s)));
                Err(Error::Status(s))
            }
            Some(Ok(rs)) => {
                let mut total = 0usize;
                let mut first_err = None;
                for r in rs {
                    if r.status == Status::Ok {
                        per[r.index as usize] = Ok(r.count as usize);
                        total += r.count as usize;
                    } else {
                        per[r.index as usize] = Err(Error::Status(r.status));
                        first_err.get_or_insert(r.status);
                    }
                }
                match first_err {
                    Some(s) => Err(Error::Status(s)),
                    None => Ok(total),
                }
            }
        };
        if whole.is_err() {
            self.stats.errors += 1;
        }
        let mut out = Vec::new();
        match b.mode {
            BatchCompletion::PerIo => {
                for ((ud, _), res) in b.ios.iter().zip(per) {
                    out.push(Completion {
                        id: b.id,
                        user_data: *ud,
                        result: res,
                        eof: false,
                        buf: None,
                    });
                }
            }
            BatchCompletion::PerBatch => out.push(Completion {
                id: b.id,
                user_data: b.user_data,
                result: whole,
                eof: false,
                buf: None,
            }),
            BatchCompletion::ErrorsOnly => {
                for ((ud, _), res) in b.ios.iter().zip(per) {
                    if res.is_err() {
                        out.push(Completion {
                            id: b.id,
                            user_data: *ud,
                            result: res,
                            eof: false,
                            buf: None,
                        });
                    }
                }
                out.push(Completion {
                    id: b.id,
                    user_data: b.user_data,
                    result: whole,
                    eof: false,
                    buf: None,
                });
            }
        }
        let reserved = b.mode.completions_max(b.ios.len());
        self.cgs.of_request(b.cg).finish(reserved, out);
    }

    /// Undo the bookkeeping of a request that was never sent (its memory is released
    /// without a completion: the submit call itself fails).
    pub(crate) fn inflight_undo(&mut self, what: Inflight) {
        match what {
            Inflight::Io(io) => match io.target {
                Target::Region { id, .. } => {
                    if let Some(r) = self.regions.get_mut(&id.0) {
                        r.busy.decr();
                    }
                }
                Target::Vec { temp_key: Some(k), .. } => {
                    let _ = self.t.deregister(k);
                }
                Target::Vec { .. } => {}
            },
            Inflight::Batch(b) => {
                for (_, regions) in &b.ios {
                    for r in regions {
                        if let Some(reg) = self.regions.get_mut(&r.0) {
                            reg.busy.decr();
                        }
                    }
                }
            }
            Inflight::Sync { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_sleeps_while_the_server_has_half_a_mebibyte_to_move() {
        const K64: u64 = 64 * 1024;
        // QD1 and shallow queues of quick transfers spin: a reply is microseconds away.
        assert!(spin_policy(true, 4096));
        assert!(spin_policy(true, 7 * K64));
        assert!(spin_policy(true, 256 * 1024));
        // Eight 64 KiB reads keep the server's copies busy: the client's core is theirs.
        assert!(!spin_policy(true, 8 * K64));
        assert!(!spin_policy(true, 8 * 256 * 1024));
        // Nothing quick in flight (only large transfers): sleep, as before.
        assert!(!spin_policy(false, LARGE_IO_BYTES as u64));
        assert!(!spin_policy(false, 0));
    }
}
