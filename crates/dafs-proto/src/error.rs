//! Decode and encode errors. Every malformation a decoder can meet has its own variant
//! (a peer's bug report, or a fuzzer's finding, then names exactly what was wrong), and
//! the enums are `#[non_exhaustive]`: a stricter check added later is not a breaking change.

/// Why a message could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("message shorter than its header says")]
    Short,
    #[error("bad magic number")]
    BadMagic,
    #[error("unsupported protocol version {0}")]
    BadVersion(u16),
    #[error("unknown opcode {0}")]
    UnknownOpcode(u16),
    #[error("message of {0} bytes exceeds the maximum")]
    TooBig(u64),
    #[error("fixed part too short for the op")]
    FixedShort,
    #[error("fixed part longer than the op defines")]
    Trailing,
    #[error("heap reference out of bounds")]
    BadRef,
    /// A field holds a value the protocol does not allow; [`BadValue`] says which.
    #[error("invalid value: {0}")]
    BadValue(BadValue),
    /// A decoder for requests was handed a reply.
    #[error("not a request")]
    NotARequest,
    /// A decoder for replies was handed a request.
    #[error("not a reply")]
    NotAReply,
    /// A name component longer than `NAME_BYTES_MAX`, or a path or symlink target longer
    /// than `PATH_BYTES_MAX`: a server answers `NAMETOOLONG` (ENAMETOOLONG), as a local
    /// file system would, not `BADXDR`.
    #[error("name too long")]
    NameTooLong,
}

/// Which value of a message broke the protocol's rules (see [`DecodeError::BadValue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadValue {
    /// The header's reserved flag bits or reserved word are not zero.
    #[error("reserved header bits")]
    ReservedHeaderBits,
    /// An unknown status code.
    #[error("status")]
    Status,
    /// A request carries a non-zero status.
    #[error("status in request")]
    StatusInRequest,
    /// A heap field is longer than that field's maximum.
    #[error("heap field too long")]
    HeapFieldTooLong,
    /// A boolean that is neither 0 nor 1.
    #[error("boolean")]
    Boolean,
    /// An unknown file type.
    #[error("file type")]
    FileType,
    /// Mode bits outside the permission bits (`0o7777`).
    #[error("mode bits")]
    ModeBits,
    /// Unknown SETATTR mask bits.
    #[error("setattr mask")]
    SetAttrMask,
    /// SETATTR sets a time both explicitly and to the server's clock.
    #[error("setattr time and time-now both set")]
    SetAttrTimeAndNow,
    /// An unknown authentication method.
    #[error("auth method")]
    AuthMethod,
    /// A name that is empty or longer than `NAME_BYTES_MAX`.
    #[error("name length")]
    NameLength,
    /// A name that is `.` or `..`.
    #[error("name is . or ..")]
    NameDotOrDotDot,
    /// A name containing `/` or NUL.
    #[error("name contains / or NUL")]
    NameSlashOrNul,
    /// A path longer than `PATH_BYTES_MAX`.
    #[error("path length")]
    PathLength,
    /// An absolute path where a relative one is required.
    #[error("absolute path")]
    AbsolutePath,
    /// A path containing NUL.
    #[error("path contains NUL")]
    PathNul,
    /// A path component longer than `NAME_BYTES_MAX`.
    #[error("path component length")]
    PathComponentLength,
    /// A READDIR entry whose name is longer than `NAME_BYTES_MAX`.
    #[error("dir entry name length")]
    DirEntryNameLength,
    /// A batched I/O that is neither a read nor a write.
    #[error("batch I/O kind")]
    BatchIoKind,
    /// A batched I/O with no segments or more than `BATCH_SEGMENTS_MAX` of a kind.
    #[error("batch segment count")]
    BatchSegmentCount,
    /// A batched file segment whose end overflows or exceeds the largest file offset.
    #[error("batch file range")]
    BatchFileRange,
    /// The segment lengths of a batched I/O overflow when summed.
    #[error("batch length")]
    BatchLength,
    /// A batched I/O whose file and memory lengths differ or exceed the direct maximum.
    #[error("batch file and memory lengths differ or exceed the maximum")]
    BatchLengthsMismatch,
    /// A BATCH_IO result list that is not a whole number of entries.
    #[error("batch results length")]
    BatchResultsLength,
    /// More packed messages than the container allows.
    #[error("too many packed messages")]
    TooManyPackedMessages,
    /// A named-attribute name that is empty, too long or not printable ASCII.
    #[error("named attribute name")]
    NamedAttrName,
    /// Non-zero SESSION_CREATE flags.
    #[error("session flags")]
    SessionFlags,
    /// A SET_CRED group list that is not a whole number of group ids.
    #[error("group list length")]
    GroupListLength,
    /// A LOOKUP with an empty path.
    #[error("empty lookup path")]
    EmptyLookupPath,
    /// Unknown ACCESS mask bits.
    #[error("access mask")]
    AccessMask,
    /// CREATE of a type other than a regular file or a directory.
    #[error("create type")]
    CreateType,
    /// Unknown OPEN flags, or neither READ nor WRITE.
    #[error("open flags")]
    OpenFlags,
    /// OPEN with CREATE but without a name.
    #[error("create without a name")]
    CreateWithoutName,
    /// OPEN with UNLINKED but without CREATE and WRITE.
    #[error("create-unlinked needs CREATE and WRITE")]
    UnlinkedWithoutCreateWrite,
    /// A direct transfer longer than `DIRECT_BYTES_MAX`.
    #[error("direct length")]
    DirectLength,
    /// A symlink target that is empty or contains NUL.
    #[error("symlink target")]
    SymlinkTarget,
    /// Unknown BATCH_IO flags.
    #[error("batch flags")]
    BatchFlags,
    /// A BATCH_IO with no I/Os or more than `BATCH_MAX`.
    #[error("batch count")]
    BatchCount,
    /// A CHAIN with no elements or more than `CHAIN_LEN_MAX`.
    #[error("chain length")]
    ChainLength,
    /// A CHAIN whose count differs from the elements it packs.
    #[error("chain count does not match its elements")]
    ChainCountMismatch,
    /// An unknown CACHE_HINT advice value.
    #[error("cache hint")]
    CacheHint,
    /// A lock type that is neither shared nor exclusive.
    #[error("lock type")]
    LockType,
    /// Unknown SET_NATTR flags, or CREATE and REPLACE together.
    #[error("named attribute flags")]
    NamedAttrFlags,
    /// A SESSION_CREATE reply granting more than `BATCH_MAX` I/Os per batch.
    #[error("batch maximum")]
    BatchMax,
    /// A shared-memory socket path containing NUL.
    #[error("shm path contains NUL")]
    ShmPathNul,
    /// A SESSION_BIND reply whose slot grant or target is out of range.
    #[error("bound session slots")]
    BoundSessionSlots,
    /// A READDIR reply with more than `READDIR_ENTRIES_MAX` entries.
    #[error("readdir count")]
    ReaddirCount,
    /// A READDIR reply whose count differs from the entries it packs.
    #[error("readdir count does not match entries")]
    ReaddirCountMismatch,
    /// A BATCH_IO reply whose count differs from the results it packs.
    #[error("batch result count")]
    BatchResultCount,
    /// A CHAIN reply whose executed count differs from the replies it packs.
    #[error("chain replies do not match")]
    ChainRepliesMismatch,
    /// A CHAIN reply whose failure index is not its last executed element.
    #[error("chain failure index")]
    ChainFailureIndex,
    /// A success reply to an op the protocol reserves.
    #[error("success reply to a reserved op")]
    SuccessReplyToReservedOp,
    /// OPEN with RECLAIM together with CREATE, EXCLUSIVE, TRUNCATE or UNLINKED.
    #[error("reclaim with create flags")]
    ReclaimWithCreate,
    /// LOCK flags outside `lock_flags::ALL` (or any flag on LOCKT).
    #[error("lock flags")]
    LockFlags,
    /// RENAME flags with an unknown bit, or NOREPLACE and EXCHANGE together.
    #[error("rename flags")]
    RenameFlags,
    /// MKNOD of a type other than FIFO, socket, character or block device.
    #[error("mknod file type")]
    MknodType,
    /// MKNOD with a device number for a FIFO or a socket.
    #[error("mknod device number")]
    MknodRdev,
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    #[error("message of {len} bytes exceeds the maximum of {max}")]
    TooBig { len: usize, max: usize },
}
