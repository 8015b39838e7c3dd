//! Framing for stream providers (TCP): every unit on the stream starts with a 32-byte
//! frame header. Sans-I/O.
//!
//! ```text
//! off len field
//!   0   4 kind     1 MSG, 2 PUT, 3 GET, 4 GET_RESP
//!   4   4 len      payload bytes that follow the header
//!   8   8 key      PUT/GET: region key;   GET_RESP: status (0 ok, 1 bad region)
//!  16   8 offset   PUT/GET: offset within the region
//!  24   8 tag      GET/GET_RESP: the server's pull tag; 0 otherwise
//! ```
//! MSG carries one DAFS message. PUT is the server's direct write into client memory;
//! the client reads the payload straight into the registered region. GET asks the
//! client for `len` bytes of a region; the client answers GET_RESP with the bytes
//! written straight from the region.

pub const FRAME_HEADER_LEN: usize = 32;
/// GET_RESP's `key` field: the bytes follow.
pub const GET_RESP_OK: u64 = 0;
/// GET_RESP's `key` field: the client refused (the GET named memory not registered for
/// remote read); no payload.
pub const GET_RESP_REFUSED: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Msg = 1,
    Put = 2,
    Get = 3,
    GetResp = 4,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: FrameKind,
    pub len: u32,
    pub key: u64,
    pub offset: u64,
    pub tag: u64,
}

impl FrameHeader {
    pub fn msg(len: usize) -> Self {
        FrameHeader { kind: FrameKind::Msg, len: len as u32, key: 0, offset: 0, tag: 0 }
    }
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0..4].copy_from_slice(&(self.kind as u32).to_le_bytes());
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.key.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.tag.to_le_bytes());
        b
    }
    pub fn decode(b: &[u8; FRAME_HEADER_LEN]) -> Result<Self, &'static str> {
        let kind = match u32::from_le_bytes(b[0..4].try_into().unwrap()) {
            1 => FrameKind::Msg,
            2 => FrameKind::Put,
            3 => FrameKind::Get,
            4 => FrameKind::GetResp,
            _ => return Err("unknown frame kind"),
        };
        let h = FrameHeader {
            kind,
            len: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            key: u64::from_le_bytes(b[8..16].try_into().unwrap()),
            offset: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            tag: u64::from_le_bytes(b[24..32].try_into().unwrap()),
        };
        if h.kind == FrameKind::Msg && (h.key | h.offset | h.tag) != 0 {
            return Err("MSG frame with non-zero fields");
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn roundtrip_and_reject() {
        let h = FrameHeader { kind: FrameKind::Put, len: 7, key: 1, offset: 2, tag: 3 };
        assert_eq!(FrameHeader::decode(&h.encode()).unwrap(), h);
        let mut b = h.encode();
        b[0] = 9;
        assert!(FrameHeader::decode(&b).is_err());
        let mut m = FrameHeader::msg(5).encode();
        m[20] = 1;
        assert!(FrameHeader::decode(&m).is_err());
    }
}
