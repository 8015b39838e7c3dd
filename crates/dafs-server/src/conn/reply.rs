//! The one way a reply leaves: [`Conn::respond`] encodes it, queues it on the
//! transport and, for a request that executed on its slot, completes the slot (reply
//! cache, slot freed). Handlers only build replies; the buffers those replies borrow
//! their data from live here too.

use dafs_transport::ServerConn as _;
use std::sync::atomic::Ordering::Relaxed;

use dafs_proto::{Header, Reply, Status};
use dafs_transport::CountPatch;
use tracing::{debug, warn};

use super::{Conn, ConnFate};
use crate::Shared;

/// Where an encoded READ_DIRECT reply keeps its count and end-of-file flag: the first
/// two u32s of its body, right after the header (checked by a test below).
const READ_DIRECT_COUNT_PATCH: CountPatch =
    CountPatch { count_at: dafs_proto::HEADER_LEN, eof_at: dafs_proto::HEADER_LEN + 4 };

/// Reused per-worker buffers: no allocation per request in steady state.
#[derive(Default)]
pub struct Scratch {
    /// The encoded reply: what is sent, and what the reply cache keeps.
    pub(super) out: Vec<u8>,
    /// What replies borrow their data from.
    pub(super) bufs: ReplyBufs,
}

/// Buffers a reply borrows its data from. Kept apart from `Scratch::out`, so a
/// handler's reply can borrow them while it is encoded.
#[derive(Default)]
pub(super) struct ReplyBufs {
    /// READ_INLINE data.
    pub(super) data: Vec<u8>,
    /// READDIR entries.
    pub(super) entries: Vec<u8>,
    /// Bytes a reply owns (a symlink target, a named attribute's value or name list, a
    /// batch's results, a chain's replies), replaced by the next such reply; bounded by
    /// the message size like the others.
    pub(super) held: Vec<u8>,
}

/// What answering a request does to its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SlotUse {
    /// The request executed on its slot (or consumed its sequence id): keep the reply
    /// for retransmissions and free the slot, so the next sequence id on it may execute.
    Complete,
    /// The request holds no slot: refused before taking one, or a session op that has
    /// none (NULL without a session, SESSION_CREATE, SESSION_BIND).
    Untouched,
}

impl Conn {
    /// Encode the reply to the request `req_h` into `out` (replacing its contents),
    /// counting error replies. Every reply is encoded here, including each element's
    /// reply inside a chain.
    pub(super) fn encode(&self, sh: &Shared, out: &mut Vec<u8>, req_h: &Header, reply: &Reply) {
        let target = self.session.as_ref().map(|s| s.slots.target_highest()).unwrap_or(0);
        let h = Header::reply_to(req_h, Status::Ok, target);
        if reply.status() != Status::Ok {
            sh.stats.errors_replied.fetch_add(1, Relaxed);
            // Every limit refusal, whichever limit (sessions, connections per client, open
            // files, handles, locks per file...), is counted here, once.
            if reply.status() == Status::Limit {
                sh.stats.limit_refusals.fetch_add(1, Relaxed);
            }
        }
        out.clear();
        let max = self.t.msg_size_bytes_max();
        if let Err(e) = dafs_proto::encode_reply(&h, reply, out, max) {
            // Only a server bug can produce an oversized reply (sizes are checked before
            // executing); answer with a fault rather than dropping the slot.
            warn!("reply does not fit: {e}");
            out.clear();
            dafs_proto::encode_reply(&h, &Reply::Error(Status::ServerFault), out, max)
                .expect("an empty reply fits");
        }
    }

    /// Answer the request `req_h`: encode `reply` into `out`, queue it, and with
    /// [`SlotUse::Complete`] complete the request's slot. The slot completes even if the
    /// send failed: the request has executed, and the connection is closing anyway.
    pub(super) fn respond(
        &mut self,
        sh: &Shared,
        out: &mut Vec<u8>,
        req_h: &Header,
        reply: &Reply,
        slot: SlotUse,
    ) -> ConnFate {
        self.encode(sh, out, req_h, reply);
        let sent = if std::mem::take(&mut self.file_reply) {
            // READ_DIRECT after a successful `put_file` (the flag is set only then).
            debug_assert!(matches!(reply, Reply::ReadDirect { .. }), "{reply:?}");
            self.t.send_file_reply(out, READ_DIRECT_COUNT_PATCH)
        } else {
            self.t.send(out)
        };
        let fate = match sent {
            Ok(()) => ConnFate::Keep,
            Err(e) => {
                debug!("send failed: {e}");
                ConnFate::Close
            }
        };
        if slot == SlotUse::Complete {
            self.complete_slot(out, req_h);
        }
        fate
    }

    /// The request on `h`'s slot has been answered with `reply` (as encoded): keep the
    /// reply for retransmissions and free the slot.
    fn complete_slot(&mut self, reply: &[u8], h: &Header) {
        let Some(s) = self.session.as_mut() else { return };
        let slot = h.slot_id;
        let digest = s.exec_digest[slot as usize];
        s.cache.store(slot, digest, h.opcode.is_idempotent(), reply);
        s.answered_here[slot as usize] = true;
        s.slots.complete(slot);
        s.info.slots_busy.store(s.slots.busy_count(), Relaxed);
        s.info.cache_bytes.store(s.cache.bytes_held() as u64, Relaxed);
        s.info.opens.store(s.opens.len() as u32, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::READ_DIRECT_COUNT_PATCH as P;
    use dafs_proto::{Header, Opcode, Reply};

    #[test]
    fn read_direct_count_patch_names_the_count_and_eof_fields() {
        let req = Header::request(Opcode::ReadDirect, 1, 0, 0, 0);
        let h = Header::reply_to(&req, dafs_proto::Status::Ok, 0);
        let mut out = Vec::new();
        let r = Reply::ReadDirect { count: 0x1122_3344, eof: false };
        dafs_proto::encode_reply(&h, &r, &mut out, 4096).unwrap();
        out[P.count_at..P.count_at + 4].copy_from_slice(&7u32.to_le_bytes());
        out[P.eof_at..P.eof_at + 4].copy_from_slice(&1u32.to_le_bytes());
        let (_, back) = dafs_proto::decode_reply(&out, 4096).unwrap();
        assert_eq!(back, Reply::ReadDirect { count: 7, eof: true });
    }
}
