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

use crate::codec::{BadValue, DecodeError};
use crate::status::{Opcode, Status};

pub const MAGIC: u32 = 0x5346_4144;
/// Version 2: persistent handles, grace and reclaim (SESSION_CREATE reclaim flag, boot
/// verifier, OPEN/LOCK RECLAIM, RECLAIM_COMPLETE), session tokens keying SESSION_BIND,
/// MKNOD, NAMETOOLONG for long names. Version 3: 40-byte file handles (a 64-bit key tag,
/// so that a handle of another server secret is reliably STALE, not BADHANDLE).
/// Version 4: federation (CLUSTER_MAP, WRONG_NODE carrying the node's epoch).
pub const PROTOCOL_VERSION: u16 = 4;
pub const HEADER_LEN: usize = 48;
pub const FLAG_REPLY: u32 = 1;

/// Byte offset of each header field (the table above), so the parser, the writer and the
/// reply cache's request digest agree on one layout.
pub(crate) mod offset {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const OPCODE: usize = 6;
    pub const FLAGS: usize = 8;
    pub const STATUS: usize = 12;
    pub const SESSION_ID: usize = 16;
    pub const SLOT_ID: usize = 24;
    pub const SEQUENCE_ID: usize = 28;
    pub const HIGHEST_SLOT: usize = 32;
    pub const FIXED_LEN: usize = 36;
    pub const HEAP_LEN: usize = 40;
    pub const RESERVED: usize = 44;
}

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
        if u32_at(offset::MAGIC) != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let flags = u32_at(offset::FLAGS);
        if flags & !FLAG_REPLY != 0 || u32_at(offset::RESERVED) != 0 {
            return Err(DecodeError::BadValue(BadValue::ReservedHeaderBits));
        }
        Ok(RawHeader {
            version: u16_at(offset::VERSION),
            opcode_raw: u16_at(offset::OPCODE),
            flags,
            status_raw: u32_at(offset::STATUS),
            session_id: u64_at(offset::SESSION_ID),
            slot_id: u32_at(offset::SLOT_ID),
            sequence_id: u32_at(offset::SEQUENCE_ID),
            highest_slot: u32_at(offset::HIGHEST_SLOT),
            fixed_len: u32_at(offset::FIXED_LEN),
            heap_len: u32_at(offset::HEAP_LEN),
        })
    }

    /// Full validation into a typed header.
    pub fn validate(&self) -> Result<Header, DecodeError> {
        if self.version != PROTOCOL_VERSION {
            return Err(DecodeError::BadVersion(self.version));
        }
        let opcode = Opcode::from_wire(self.opcode_raw)
            .ok_or(DecodeError::UnknownOpcode(self.opcode_raw))?;
        let status =
            Status::from_wire(self.status_raw).ok_or(DecodeError::BadValue(BadValue::Status))?;
        let is_reply = self.flags & FLAG_REPLY != 0;
        if !is_reply && status != Status::Ok {
            return Err(DecodeError::BadValue(BadValue::StatusInRequest));
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
    let mut put = |at: usize, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
    put(offset::MAGIC, &MAGIC.to_le_bytes());
    put(offset::VERSION, &PROTOCOL_VERSION.to_le_bytes());
    put(offset::OPCODE, &h.opcode.to_wire().to_le_bytes());
    let flags = if h.is_reply { FLAG_REPLY } else { 0 };
    put(offset::FLAGS, &flags.to_le_bytes());
    put(offset::STATUS, &h.status.to_wire().to_le_bytes());
    put(offset::SESSION_ID, &h.session_id.to_le_bytes());
    put(offset::SLOT_ID, &h.slot_id.to_le_bytes());
    put(offset::SEQUENCE_ID, &h.sequence_id.to_le_bytes());
    put(offset::HIGHEST_SLOT, &h.highest_slot.to_le_bytes());
    put(offset::FIXED_LEN, &fixed_len.to_le_bytes());
    put(offset::HEAP_LEN, &heap_len.to_le_bytes());
    put(offset::RESERVED, &0u32.to_le_bytes());
}
