//! Body codec: an op-specific fixed part of little-endian scalars and heap references
//! (`{offset: u32, len: u32}` relative to the heap start), followed by the heap.
//!
//! Decoding is strictly bounded: every read is checked against the fixed part, every
//! heap reference against the heap, nothing allocates, and there are no loops whose
//! count comes from the wire except over byte ranges that were already bounds-checked.

pub use crate::error::{BadValue, DecodeError, EncodeError};
use crate::header::{write_header, Header, RawHeader, HEADER_LEN};

/// Most heap fields one op carries (RENAME has two names; SYMLINK a name and a target).
const HEAP_FIELDS_MAX: usize = 4;

/// Encoder writing one message into a caller-owned, reused buffer.
pub struct Enc<'a, 'b> {
    buf: &'b mut Vec<u8>,
    start: usize,
    deferred: [(usize, &'a [u8]); HEAP_FIELDS_MAX],
    deferred_count: usize,
}

impl<'a, 'b> Enc<'a, 'b> {
    /// Start a message at the end of `buf` (normally an empty, reused Vec).
    pub fn new(buf: &'b mut Vec<u8>) -> Self {
        let start = buf.len();
        buf.resize(start + HEADER_LEN, 0);
        Enc { buf, start, deferred: [(0, &[]); HEAP_FIELDS_MAX], deferred_count: 0 }
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn raw(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    /// A heap field: an 8-byte reference now, the bytes after the fixed part.
    pub fn heap(&mut self, v: &'a [u8]) {
        assert!(
            self.deferred_count < HEAP_FIELDS_MAX,
            "op encodes more heap fields than HEAP_FIELDS_MAX"
        );
        self.deferred[self.deferred_count] = (self.buf.len(), v);
        self.deferred_count += 1;
        self.u64(0); // patched in finish()
    }
    /// Lay out the heap, patch references, write the header. Fails (leaving `buf`
    /// truncated back to where it started) if the message exceeds `max_len`.
    pub fn finish(self, h: &Header, max_len: usize) -> Result<usize, EncodeError> {
        let fixed_start = self.start + HEADER_LEN;
        let fixed_len = self.buf.len() - fixed_start;
        let heap_len: usize = self.deferred[..self.deferred_count].iter().map(|d| d.1.len()).sum();
        let total = HEADER_LEN + fixed_len + heap_len;
        if total > max_len || total > u32::MAX as usize {
            self.buf.truncate(self.start);
            return Err(EncodeError::TooBig { len: total, max: max_len });
        }
        let heap_start = self.buf.len();
        for &(patch_at, bytes) in &self.deferred[..self.deferred_count] {
            let off = (self.buf.len() - heap_start) as u32;
            self.buf[patch_at..patch_at + 4].copy_from_slice(&off.to_le_bytes());
            self.buf[patch_at + 4..patch_at + 8]
                .copy_from_slice(&(bytes.len() as u32).to_le_bytes());
            self.buf.extend_from_slice(bytes);
        }
        write_header(&mut self.buf[self.start..], h, fixed_len as u32, heap_len as u32);
        Ok(total)
    }
}

/// A split, bounds-checked message: header fields, fixed part and heap.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub raw: RawHeader,
    pub fixed: &'a [u8],
    pub heap: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Split a complete message. `buf` must be exactly one message.
    pub fn split(buf: &'a [u8], max_len: usize) -> Result<Frame<'a>, DecodeError> {
        let raw = RawHeader::parse(buf)?;
        let total = raw.total_len();
        if total > max_len as u64 {
            return Err(DecodeError::TooBig(total));
        }
        if total != buf.len() as u64 {
            return Err(DecodeError::Short);
        }
        let fixed_end = HEADER_LEN + raw.fixed_len as usize;
        Ok(Frame { raw, fixed: &buf[HEADER_LEN..fixed_end], heap: &buf[fixed_end..] })
    }
}

/// Decoder over a fixed part and its heap.
pub struct Dec<'a> {
    fixed: &'a [u8],
    pos: usize,
    heap: &'a [u8],
}

impl<'a> Dec<'a> {
    pub fn new(fixed: &'a [u8], heap: &'a [u8]) -> Self {
        Dec { fixed, pos: 0, heap }
    }
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let end = self.pos.checked_add(N).ok_or(DecodeError::FixedShort)?;
        let s = self.fixed.get(self.pos..end).ok_or(DecodeError::FixedShort)?;
        self.pos = end;
        Ok(s.try_into().expect("slice of length N"))
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.take()?))
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.take()?))
    }
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.take()
    }
    /// A heap field, with a maximum length.
    pub fn heap(&mut self, max_len: usize) -> Result<&'a [u8], DecodeError> {
        let off = self.u32()? as usize;
        let len = self.u32()? as usize;
        if len > max_len {
            return Err(DecodeError::BadValue(BadValue::HeapFieldTooLong));
        }
        let end = off.checked_add(len).ok_or(DecodeError::BadRef)?;
        self.heap.get(off..end).ok_or(DecodeError::BadRef)
    }
    /// A heap field holding a name or path: longer than `max_len` is
    /// [`DecodeError::NameTooLong`] (an errno users know), not a malformed message.
    pub fn heap_name(&mut self, max_len: usize) -> Result<&'a [u8], DecodeError> {
        let off = self.u32()? as usize;
        let len = self.u32()? as usize;
        let end = off.checked_add(len).ok_or(DecodeError::BadRef)?;
        let v = self.heap.get(off..end).ok_or(DecodeError::BadRef)?;
        if len > max_len {
            return Err(DecodeError::NameTooLong);
        }
        Ok(v)
    }
    /// A boolean encoded as u32 0/1; anything else is an error.
    pub fn bool32(&mut self) -> Result<bool, DecodeError> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::BadValue(BadValue::Boolean)),
        }
    }
    /// The op consumed exactly the fixed part.
    pub fn end(self) -> Result<(), DecodeError> {
        if self.pos == self.fixed.len() {
            Ok(())
        } else {
            Err(DecodeError::Trailing)
        }
    }
}
