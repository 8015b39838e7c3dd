//! The fixed message header. 48 bytes, every field naturally aligned, little-endian.
//!
//! ```text
//! off len field
//!   0   4 magic          0x53464144 ("DAFS" in LE byte order)
//!   4   2 version        PROTOCOL_VERSION
//!   6   2 opcode         Opcode
//!   8   4 flags          bit 0: REPLY; other bits must be zero
//!  12   4 status         Status (replies); zero in requests
//!  16   8 session_id     0 before SESSION_CREATE's reply
//!  24   4 slot_id        request slot; < granted slots
//!  28   4 sequence_id    per-slot sequence id
//!  32   4 highest_slot   request: highest slot id the client has in use;
//!                        reply: target highest slot id the server grants
//!  36   4 fixed_len      length of the op-specific fixed part
//!  40   4 heap_len       length of the heap that follows the fixed part
//!  44   4 reserved       must be zero
//! ```

use crate::codec::DecodeError;
use crate::status::{Opcode, Status};

pub const MAGIC: u32 = 0x5346_4144;
pub const PROTOCOL_VERSION: u16 = 1;
pub const HEADER_LEN: usize = 48;
pub const FLAG_REPLY: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub opcode: Opcode,
    pub is_reply: bool,
    pub status: Status,
    pub session_id: u64,
    pub slot_id: u32,
    pub sequence_id: u32,
    pub highest_slot: u32,
}

impl Header {
    pub fn request(
        opcode: Opcode,
        session_id: u64,
        slot_id: u32,
        sequence_id: u32,
        highest_slot: u32,
    ) -> Self {
        Header {
            opcode,
            is_reply: false,
            status: Status::Ok,
            session_id,
            slot_id,
            sequence_id,
            highest_slot,
        }
    }

    /// The reply header for `req`, with the server's target highest slot.
    pub fn reply_to(req: &Header, status: Status, target_highest_slot: u32) -> Self {
        Header { is_reply: true, status, highest_slot: target_highest_slot, ..*req }
    }
}

/// What the raw header says about the message's size, before the body is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawHeader {
    pub version: u16,
    pub opcode_raw: u16,
    pub flags: u32,
    pub status_raw: u32,
    pub session_id: u64,
    pub slot_id: u32,
    pub sequence_id: u32,
    pub highest_slot: u32,
    pub fixed_len: u32,
    pub heap_len: u32,
}

impl RawHeader {
    /// Total message length the header announces (header + fixed + heap), computed
    /// without overflow.
    pub fn total_len(&self) -> u64 {
        HEADER_LEN as u64 + self.fixed_len as u64 + self.heap_len as u64
    }

    /// Parse the first 48 bytes. Checks magic and reserved bits only; version and
    /// opcode are checked by the caller so it can still answer with a status.
    pub fn parse(buf: &[u8]) -> Result<RawHeader, DecodeError> {
        if buf.len() < HEADER_LEN {
            return Err(DecodeError::Short);
        }
        let u16_at = |o: usize| u16::from_le_bytes([buf[o], buf[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(buf[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(buf[o..o + 8].try_into().unwrap());
        if u32_at(0) != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let flags = u32_at(8);
        if flags & !FLAG_REPLY != 0 || u32_at(44) != 0 {
            return Err(DecodeError::BadValue("reserved header bits"));
        }
        Ok(RawHeader {
            version: u16_at(4),
            opcode_raw: u16_at(6),
            flags,
            status_raw: u32_at(12),
            session_id: u64_at(16),
            slot_id: u32_at(24),
            sequence_id: u32_at(28),
            highest_slot: u32_at(32),
            fixed_len: u32_at(36),
            heap_len: u32_at(40),
        })
    }

    /// Full validation into a typed header.
    pub fn validate(&self) -> Result<Header, DecodeError> {
        if self.version != PROTOCOL_VERSION {
            return Err(DecodeError::BadVersion(self.version));
        }
        let opcode = Opcode::from_wire(self.opcode_raw)
            .ok_or(DecodeError::UnknownOpcode(self.opcode_raw))?;
        let status = Status::from_wire(self.status_raw).ok_or(DecodeError::BadValue("status"))?;
        let is_reply = self.flags & FLAG_REPLY != 0;
        if !is_reply && status != Status::Ok {
            return Err(DecodeError::BadValue("status in request"));
        }
        Ok(Header {
            opcode,
            is_reply,
            status,
            session_id: self.session_id,
            slot_id: self.slot_id,
            sequence_id: self.sequence_id,
            highest_slot: self.highest_slot,
        })
    }
}

/// Write a header into the first 48 bytes of `out`.
pub(crate) fn write_header(out: &mut [u8], h: &Header, fixed_len: u32, heap_len: u32) {
    debug_assert!(out.len() >= HEADER_LEN);
    out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    out[4..6].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    out[6..8].copy_from_slice(&h.opcode.to_wire().to_le_bytes());
    let flags = if h.is_reply { FLAG_REPLY } else { 0 };
    out[8..12].copy_from_slice(&flags.to_le_bytes());
    out[12..16].copy_from_slice(&h.status.to_wire().to_le_bytes());
    out[16..24].copy_from_slice(&h.session_id.to_le_bytes());
    out[24..28].copy_from_slice(&h.slot_id.to_le_bytes());
    out[28..32].copy_from_slice(&h.sequence_id.to_le_bytes());
    out[32..36].copy_from_slice(&h.highest_slot.to_le_bytes());
    out[36..40].copy_from_slice(&fixed_len.to_le_bytes());
    out[40..44].copy_from_slice(&heap_len.to_le_bytes());
    out[44..48].copy_from_slice(&0u32.to_le_bytes());
}
