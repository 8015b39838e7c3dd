//! Value types that appear inside op bodies.

use crate::codec::{BadValue, Dec, DecodeError, Enc};
use crate::limits;

/// An opaque, fixed-size file handle. Only the server that issued it interprets it;
/// clients compare and copy it, nothing else.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileHandle(pub [u8; FileHandle::LEN]);

impl FileHandle {
    pub const LEN: usize = 40;
    pub(crate) fn enc(&self, e: &mut Enc) {
        e.raw(&self.0);
    }
    pub(crate) fn dec(d: &mut Dec) -> Result<Self, DecodeError> {
        Ok(FileHandle(d.array()?))
    }
}

impl std::fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fh:")?;
        for b in &self.0[..12] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum FileType {
    Regular = 1,
    Directory = 2,
    Symlink = 3,
    CharDevice = 4,
    BlockDevice = 5,
    Fifo = 6,
    Socket = 7,
}

impl FileType {
    pub fn from_wire(v: u32) -> Result<Self, DecodeError> {
        Ok(match v {
            1 => FileType::Regular,
            2 => FileType::Directory,
            3 => FileType::Symlink,
            4 => FileType::CharDevice,
            5 => FileType::BlockDevice,
            6 => FileType::Fifo,
            7 => FileType::Socket,
            _ => return Err(DecodeError::BadValue(BadValue::FileType)),
        })
    }
    /// From the `S_IFMT` bits of a POSIX mode.
    pub fn from_mode(mode: u32) -> Self {
        match mode & S_IFMT {
            0o040000 => FileType::Directory,
            0o120000 => FileType::Symlink,
            0o020000 => FileType::CharDevice,
            0o060000 => FileType::BlockDevice,
            0o010000 => FileType::Fifo,
            0o140000 => FileType::Socket,
            _ => FileType::Regular,
        }
    }
    /// The `S_IFMT` bits for this type.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Regular => 0o100000,
            FileType::Directory => 0o040000,
            FileType::Symlink => 0o120000,
            FileType::CharDevice => 0o020000,
            FileType::BlockDevice => 0o060000,
            FileType::Fifo => 0o010000,
            FileType::Socket => 0o140000,
        }
    }
}

/// The file-type bits of a POSIX mode (`S_IFMT`).
const S_IFMT: u32 = 0o170000;

/// The permission bits of a POSIX mode (including set-uid, set-gid and sticky): the only
/// mode bits the protocol carries, since the type travels separately.
pub const MODE_PERMISSION_BITS: u32 = 0o7777;

/// File attributes (88 bytes on the wire). Times are nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ftype: FileType,
    /// Permission bits (`0o7777`), without the type bits.
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Bytes allocated on the server's storage.
    pub used: u64,
    pub fileid: u64,
    pub fsid: u64,
    pub rdev: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl Attr {
    pub const WIRE_LEN: usize = 88;
    pub(crate) fn enc(&self, e: &mut Enc) {
        e.u32(self.ftype as u32);
        e.u32(self.mode);
        e.u32(self.nlink);
        e.u32(self.uid);
        e.u32(self.gid);
        e.u32(0);
        e.u64(self.size);
        e.u64(self.used);
        e.u64(self.fileid);
        e.u64(self.fsid);
        e.u64(self.rdev);
        e.i64(self.atime_ns);
        e.i64(self.mtime_ns);
        e.i64(self.ctime_ns);
    }
    pub(crate) fn dec(d: &mut Dec) -> Result<Self, DecodeError> {
        let ftype = FileType::from_wire(d.u32()?)?;
        let mode = d.u32()?;
        if mode & !MODE_PERMISSION_BITS != 0 {
            return Err(DecodeError::BadValue(BadValue::ModeBits));
        }
        let a = Attr {
            ftype,
            mode,
            nlink: d.u32()?,
            uid: d.u32()?,
            gid: d.u32()?,
            size: {
                let _pad = d.u32()?;
                d.u64()?
            },
            used: d.u64()?,
            fileid: d.u64()?,
            fsid: d.u64()?,
            rdev: d.u64()?,
            atime_ns: d.i64()?,
            mtime_ns: d.i64()?,
            ctime_ns: d.i64()?,
        };
        Ok(a)
    }
    pub fn is_dir(&self) -> bool {
        self.ftype == FileType::Directory
    }
}

/// Which attributes a SETATTR changes.
pub mod setattr_mask {
    pub const MODE: u32 = 1;
    pub const SIZE: u32 = 2;
    pub const ATIME: u32 = 4;
    pub const MTIME: u32 = 8;
    /// Set atime to the server's current time (ATIME must not be set too).
    pub const ATIME_NOW: u32 = 16;
    pub const MTIME_NOW: u32 = 32;
    pub const UID: u32 = 64;
    pub const GID: u32 = 128;
    pub const ALL: u32 = 255;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetAttrs {
    pub mask: u32,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
}

impl SetAttrs {
    pub(crate) fn enc(&self, e: &mut Enc) {
        e.u32(self.mask);
        e.u32(self.mode);
        e.u32(self.uid);
        e.u32(self.gid);
        e.u64(self.size);
        e.i64(self.atime_ns);
        e.i64(self.mtime_ns);
    }
    pub(crate) fn dec(d: &mut Dec) -> Result<Self, DecodeError> {
        let s = SetAttrs {
            mask: d.u32()?,
            mode: d.u32()?,
            uid: d.u32()?,
            gid: d.u32()?,
            size: d.u64()?,
            atime_ns: d.i64()?,
            mtime_ns: d.i64()?,
        };
        use setattr_mask::*;
        if s.mask & !ALL != 0 {
            return Err(DecodeError::BadValue(BadValue::SetAttrMask));
        }
        if s.mask & ATIME != 0 && s.mask & ATIME_NOW != 0
            || s.mask & MTIME != 0 && s.mask & MTIME_NOW != 0
        {
            return Err(DecodeError::BadValue(BadValue::SetAttrTimeAndNow));
        }
        if s.mask & MODE != 0 && s.mode & !MODE_PERMISSION_BITS != 0 {
            return Err(DecodeError::BadValue(BadValue::ModeBits));
        }
        Ok(s)
    }
}

/// OPEN flags.
pub mod open_flags {
    pub const READ: u32 = 1;
    pub const WRITE: u32 = 2;
    /// Create the file (under the name given) if it does not exist.
    pub const CREATE: u32 = 4;
    /// With CREATE: fail with EXIST if it exists.
    pub const EXCLUSIVE: u32 = 8;
    /// Truncate to zero on open (needs WRITE).
    pub const TRUNCATE: u32 = 16;
    /// Every write through this open appends atomically: the server picks the offset
    /// (the end of file at the moment of the write) and returns it.
    pub const APPEND: u32 = 32;
    /// Create-unlinked: with CREATE, the file is created without a name in the directory;
    /// PUBLISH gives it `name`; closing without PUBLISH, or the session ending, discards it.
    pub const UNLINKED: u32 = 64;
    /// Delete the file's name when the last open of it (by any session) closes.
    pub const DELETE_ON_CLOSE: u32 = 128;
    /// Share reservation: while this open lasts, no other open may read.
    pub const DENY_READ: u32 = 256;
    /// Share reservation: while this open lasts, no other open may write.
    pub const DENY_WRITE: u32 = 512;
    /// Reclaim, during the server's grace period after a restart, an open this session's
    /// client held before (same flags otherwise; no CREATE, EXCLUSIVE, TRUNCATE or
    /// UNLINKED).
    pub const RECLAIM: u32 = 1024;
    pub const ALL: u32 = 2047;
}

/// SESSION_CREATE request flags.
pub mod session_flags {
    /// The client held state (opens, locks) on an earlier instance of this server and
    /// will reclaim it during the grace period.
    pub const RECLAIM: u32 = 1;
    pub const ALL: u32 = 1;
}

/// LOCK request flags.
pub mod lock_flags {
    /// Reclaim, during the server's grace period, a lock held before the restart.
    pub const RECLAIM: u32 = 1;
    pub const ALL: u32 = 1;
}

/// RENAME request flags (the values of Linux `renameat2`). At most one may be set.
pub mod rename_flags {
    /// Fail with EXIST if the target name exists (`RENAME_NOREPLACE`).
    pub const NOREPLACE: u32 = 1;
    /// Swap the two names atomically; both must exist (`RENAME_EXCHANGE`).
    pub const EXCHANGE: u32 = 2;
    pub const ALL: u32 = NOREPLACE | EXCHANGE;

    /// True if `flags` is a value RENAME accepts: no unknown bit, not both flags.
    pub const fn valid(flags: u32) -> bool {
        flags & !ALL == 0 && flags != NOREPLACE | EXCHANGE
    }
}

/// CACHE_HINT advice values (posix_fadvise on the server).
pub mod cache_hint {
    pub const NORMAL: u32 = 0;
    pub const SEQUENTIAL: u32 = 1;
    pub const RANDOM: u32 = 2;
    pub const WILL_NEED: u32 = 3;
    pub const DONT_NEED: u32 = 4;
    pub const NO_REUSE: u32 = 5;
}

/// Byte-range lock types.
pub mod lock_type {
    /// Shared (read) lock.
    pub const SHARED: u32 = 1;
    /// Exclusive (write) lock.
    pub const EXCLUSIVE: u32 = 2;
}

/// SET_NATTR flags.
pub mod nattr_flags {
    /// Fail with EXIST if the attribute exists.
    pub const CREATE: u32 = 1;
    /// Fail with NOATTR if it does not.
    pub const REPLACE: u32 = 2;
}

/// BATCH_IO flags.
pub mod batch_flags {
    /// The reply lists only the I/Os that failed (completion "only on errors").
    pub const ERRORS_ONLY: u32 = 1;
}

/// Longest named-attribute name (without the server's namespace prefix).
pub const NATTR_NAME_BYTES_MAX: usize = 200;
/// Largest named-attribute value.
pub const NATTR_VALUE_BYTES_MAX: usize = 64 * 1024;
/// Longest open key.
pub const OPEN_KEY_BYTES_MAX: usize = 64;
/// Most elements of one chain.
pub const CHAIN_LEN_MAX: usize = 16;
/// A CHAIN reply's `failed` index when no element failed.
pub const CHAIN_NONE_FAILED: u32 = u32::MAX;
/// Most I/Os one BATCH_IO may carry, whatever the server negotiates.
pub const BATCH_MAX: u32 = 256;
/// Most file or memory segments of one batched I/O.
pub const BATCH_SEGMENTS_MAX: usize = 64;
/// In a chain element, this handle means "the current file handle" (from the
/// previous element), and this open id "the open id from the previous OPEN".
pub const CURRENT_FH: FileHandle = FileHandle([0xff; FileHandle::LEN]);
pub const CURRENT_OPEN_ID: u64 = u64::MAX;

/// ACCESS mask bits.
pub mod access_mask {
    pub const READ: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const EXECUTE: u32 = 4;
    pub const ALL: u32 = 7;
}

/// A client-registered memory region, as the server addresses it for direct placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteRegion {
    /// The key the client's transport returned when the memory was registered.
    pub key: u64,
    /// Byte offset within the region.
    pub offset: u64,
}

/// Authentication methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum AuthMethod {
    None = 0,
    /// Shared-secret challenge-response with HMAC-SHA256 (see [`crate::auth`]).
    HmacSha256 = 1,
}

impl AuthMethod {
    pub fn from_wire(v: u32) -> Result<Self, DecodeError> {
        match v {
            0 => Ok(AuthMethod::None),
            1 => Ok(AuthMethod::HmacSha256),
            _ => Err(DecodeError::BadValue(BadValue::AuthMethod)),
        }
    }
}

/// FSSTAT reply body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStat {
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub avail_bytes: u64,
    pub total_files: u64,
    pub free_files: u64,
    pub block_size: u32,
    pub name_max: u32,
}

/// Check a single path component: 1..=255 bytes, no `/`, no NUL, not `.` or `..`.
pub fn validate_name(name: &[u8]) -> Result<(), DecodeError> {
    if name.len() > limits::NAME_BYTES_MAX {
        return Err(DecodeError::NameTooLong);
    }
    if name.is_empty() {
        return Err(DecodeError::BadValue(BadValue::NameLength));
    }
    if name == b"." || name == b".." {
        return Err(DecodeError::BadValue(BadValue::NameDotOrDotDot));
    }
    if name.iter().any(|&b| b == b'/' || b == 0) {
        return Err(DecodeError::BadValue(BadValue::NameSlashOrNul));
    }
    Ok(())
}

/// Check a relative multi-component path for LOOKUP: not absolute, no NUL, bounded.
/// `..` components are allowed here; the server resolves the path beneath the
/// directory and refuses any resolution that would leave the export.
pub fn validate_path(path: &[u8]) -> Result<(), DecodeError> {
    if path.len() > limits::PATH_BYTES_MAX {
        return Err(DecodeError::NameTooLong);
    }
    if path.first() == Some(&b'/') {
        return Err(DecodeError::BadValue(BadValue::AbsolutePath));
    }
    if path.contains(&0) {
        return Err(DecodeError::BadValue(BadValue::PathNul));
    }
    for comp in path.split(|&b| b == b'/') {
        if comp.len() > limits::NAME_BYTES_MAX {
            return Err(DecodeError::NameTooLong);
        }
    }
    Ok(())
}

/// Packed lists (READDIR entries, chain elements) keep every item 8-byte aligned, so the
/// fixed-size fields of each item can be read as aligned words.
const WIRE_ALIGN: usize = 8;

/// One READDIR entry. On the wire (in the reply heap), each entry is
/// `cookie u64, fileid u64, ftype u32, name_len u32, name bytes`, padded to 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirEntry<'a> {
    /// Cookie to pass to the next READDIR to continue after this entry.
    pub cookie: u64,
    pub fileid: u64,
    pub ftype: FileType,
    pub name: &'a [u8],
}

impl DirEntry<'_> {
    pub const FIXED_LEN: usize = 24;
    /// Bytes this entry occupies in the packed list.
    pub fn wire_len(name_len: usize) -> usize {
        (Self::FIXED_LEN + name_len).next_multiple_of(WIRE_ALIGN)
    }
    /// Append to a packed entry list.
    pub fn pack(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.cookie.to_le_bytes());
        out.extend_from_slice(&self.fileid.to_le_bytes());
        out.extend_from_slice(&(self.ftype as u32).to_le_bytes());
        out.extend_from_slice(&(self.name.len() as u32).to_le_bytes());
        out.extend_from_slice(self.name);
        out.resize(start + Self::wire_len(self.name.len()), 0);
    }
}

/// Iterator over a packed READDIR entry list. Yields an error (once, then stops) on a
/// malformed entry; never reads outside the list.
pub struct DirEntries<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> DirEntries<'a> {
    pub fn new(packed: &'a [u8]) -> Self {
        DirEntries { rest: packed, failed: false }
    }
}

impl<'a> Iterator for DirEntries<'a> {
    type Item = Result<DirEntry<'a>, DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        let parse = |b: &'a [u8]| -> Result<(DirEntry<'a>, usize), DecodeError> {
            if b.len() < DirEntry::FIXED_LEN {
                return Err(DecodeError::BadRef);
            }
            let cookie = u64::from_le_bytes(b[0..8].try_into().unwrap());
            let fileid = u64::from_le_bytes(b[8..16].try_into().unwrap());
            let ftype = FileType::from_wire(u32::from_le_bytes(b[16..20].try_into().unwrap()))?;
            let name_len = u32::from_le_bytes(b[20..24].try_into().unwrap()) as usize;
            if name_len > limits::NAME_BYTES_MAX {
                return Err(DecodeError::BadValue(BadValue::DirEntryNameLength));
            }
            let name = b.get(DirEntry::FIXED_LEN..DirEntry::FIXED_LEN + name_len);
            let name = name.ok_or(DecodeError::BadRef)?;
            validate_name(name)?;
            let step = DirEntry::wire_len(name_len).min(b.len());
            Ok((DirEntry { cookie, fileid, ftype, name }, step))
        };
        match parse(self.rest) {
            Ok((e, step)) => {
                self.rest = &self.rest[step..];
                Some(Ok(e))
            }
            Err(err) => {
                self.failed = true;
                Some(Err(err))
            }
        }
    }
}

/// One I/O of a BATCH_IO: a list of file segments and an independent list of memory
/// segments with the same total length; data flows between them in order.
///
/// Packed form: `kind u32 (1 read, 2 write), nfile u32, nmem u32, pad u32`, then
/// `nfile x {offset u64, len u64}`, then `nmem x {key u64, offset u64, len u64}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchIo {
    pub write: bool,
    pub file: Vec<(u64, u64)>,
    pub mem: Vec<(RemoteRegion, u64)>,
}

/// Packed batch layout (see [`BatchIo`]): per I/O a header, then file segments, then
/// memory segments.
const BATCH_IO_HEADER_LEN: usize = 16;
const BATCH_FILE_SEGMENT_LEN: usize = 16;
const BATCH_MEM_SEGMENT_LEN: usize = 24;
/// The `kind` of a packed batched I/O.
const BATCH_KIND_READ: u32 = 1;
const BATCH_KIND_WRITE: u32 = 2;

impl BatchIo {
    pub fn total(&self) -> u64 {
        self.file.iter().map(|s| s.1).sum()
    }
    pub fn pack(&self, out: &mut Vec<u8>) {
        let kind = if self.write { BATCH_KIND_WRITE } else { BATCH_KIND_READ };
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&(self.file.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.mem.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        for (o, l) in &self.file {
            out.extend_from_slice(&o.to_le_bytes());
            out.extend_from_slice(&l.to_le_bytes());
        }
        for (r, l) in &self.mem {
            out.extend_from_slice(&r.key.to_le_bytes());
            out.extend_from_slice(&r.offset.to_le_bytes());
            out.extend_from_slice(&l.to_le_bytes());
        }
    }
}

/// Parse a packed batch of exactly `count` I/Os. Every length is checked; the segment
/// sums of each I/O must match and stay within `io_len_max`.
pub fn parse_batch(mut b: &[u8], count: u32, io_len_max: u64) -> Result<Vec<BatchIo>, DecodeError> {
    let mut out = Vec::with_capacity((count as usize).min(BATCH_MAX as usize));
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    for _ in 0..count {
        if b.len() < BATCH_IO_HEADER_LEN {
            return Err(DecodeError::BadRef);
        }
        let write = match u32_at(b, 0) {
            BATCH_KIND_READ => false,
            BATCH_KIND_WRITE => true,
            _ => return Err(DecodeError::BadValue(BadValue::BatchIoKind)),
        };
        let (nf, nm) = (u32_at(b, 4) as usize, u32_at(b, 8) as usize);
        if nf == 0 || nm == 0 || nf > BATCH_SEGMENTS_MAX || nm > BATCH_SEGMENTS_MAX {
            return Err(DecodeError::BadValue(BadValue::BatchSegmentCount));
        }
        let mem_start = BATCH_IO_HEADER_LEN + nf * BATCH_FILE_SEGMENT_LEN;
        let need = mem_start + nm * BATCH_MEM_SEGMENT_LEN;
        if b.len() < need {
            return Err(DecodeError::BadRef);
        }
        let mut io = BatchIo { write, file: Vec::with_capacity(nf), mem: Vec::with_capacity(nm) };
        let (mut ft, mut mt) = (0u64, 0u64);
        for i in 0..nf {
            let o = BATCH_IO_HEADER_LEN + i * BATCH_FILE_SEGMENT_LEN;
            let (off, len) = (u64_at(b, o), u64_at(b, o + 8));
            off.checked_add(len)
                .filter(|e| *e <= i64::MAX as u64)
                .ok_or(DecodeError::BadValue(BadValue::BatchFileRange))?;
            ft = ft.checked_add(len).ok_or(DecodeError::BadValue(BadValue::BatchLength))?;
            io.file.push((off, len));
        }
        for i in 0..nm {
            let o = mem_start + i * BATCH_MEM_SEGMENT_LEN;
            let (key, off, len) = (u64_at(b, o), u64_at(b, o + 8), u64_at(b, o + 16));
            mt = mt.checked_add(len).ok_or(DecodeError::BadValue(BadValue::BatchLength))?;
            io.mem.push((RemoteRegion { key, offset: off }, len));
        }
        if ft != mt || ft > io_len_max {
            return Err(DecodeError::BadValue(BadValue::BatchLengthsMismatch));
        }
        out.push(io);
        b = &b[need..];
    }
    if !b.is_empty() {
        return Err(DecodeError::Trailing);
    }
    Ok(out)
}

/// One entry of a BATCH_IO reply: `index u32, status u32, count u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchResult {
    pub index: u32,
    pub status: crate::Status,
    pub count: u64,
}

impl BatchResult {
    pub const WIRE_LEN: usize = 16;
    pub fn pack(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&self.status.to_wire().to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
    }
    pub fn parse_all(b: &[u8]) -> Result<Vec<BatchResult>, DecodeError> {
        if !b.len().is_multiple_of(Self::WIRE_LEN) {
            return Err(DecodeError::BadValue(BadValue::BatchResultsLength));
        }
        b.chunks_exact(Self::WIRE_LEN)
            .map(|c| {
                Ok(BatchResult {
                    index: u32::from_le_bytes(c[0..4].try_into().unwrap()),
                    status: crate::Status::from_wire(u32::from_le_bytes(
                        c[4..8].try_into().unwrap(),
                    ))
                    .ok_or(DecodeError::BadValue(BadValue::Status))?,
                    count: u64::from_le_bytes(c[8..16].try_into().unwrap()),
                })
            })
            .collect()
    }
}

/// Bytes before each packed message: `len u32, pad u32`.
const PACKED_MSG_HEADER_LEN: usize = 8;

/// Pack messages one after another: `len u32, pad u32, bytes` padded to 8 (chains).
pub fn pack_messages<'a>(msgs: impl IntoIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    for m in msgs {
        out.extend_from_slice(&(m.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(m);
        out.resize(out.len() + (m.len().next_multiple_of(WIRE_ALIGN) - m.len()), 0);
    }
}

/// Split packed messages (at most `max` of them).
pub fn unpack_messages(mut b: &[u8], max: usize) -> Result<Vec<&[u8]>, DecodeError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if out.len() == max {
            return Err(DecodeError::BadValue(BadValue::TooManyPackedMessages));
        }
        if b.len() < PACKED_MSG_HEADER_LEN {
            return Err(DecodeError::BadRef);
        }
        let len = u32::from_le_bytes(b[0..4].try_into().unwrap()) as usize;
        let padded = len.checked_next_multiple_of(WIRE_ALIGN).ok_or(DecodeError::BadRef)?;
        let m = b.get(PACKED_MSG_HEADER_LEN..PACKED_MSG_HEADER_LEN + len);
        out.push(m.ok_or(DecodeError::BadRef)?);
        b = b.get(PACKED_MSG_HEADER_LEN + padded..).unwrap_or(&[]);
    }
    Ok(out)
}

/// Validate a named-attribute name: 1..=200 bytes of printable ASCII other than space
/// (0x21..=0x7e).
pub fn validate_nattr_name(n: &[u8]) -> Result<(), DecodeError> {
    if n.is_empty()
        || n.len() > NATTR_NAME_BYTES_MAX
        || n.iter().any(|&c| !(0x21..0x7f).contains(&c))
    {
        return Err(DecodeError::BadValue(BadValue::NamedAttrName));
    }
    Ok(())
}
