//! # dafs-proto — the DAFS wire protocol, sans-I/O
//!
//! This crate never touches a socket, a file or a clock. It defines:
//! - the fixed 48-byte message [`Header`] and the body layout (op-specific fixed part +
//!   heap of variable-length fields referenced by `{offset, len}`), see [`codec`];
//! - [`Opcode`] and [`Status`];
//! - every request and reply ([`Request`], [`Reply`]) with strict, bounded decoding:
//!   no byte string can make a decoder panic, allocate more than the message, or loop;
//! - the session rules shared by client and server ([`session`]): slot table and
//!   sequence-id checks, credit grants;
//! - the shared-secret challenge-response transcript ([`auth`]).
//!
//! The normative description is `docs/protocol.md`; this crate is its executable form.

#![forbid(unsafe_code)]

pub mod auth;
pub mod codec;
pub mod error;
pub mod header;
pub mod ops;
pub mod session;
pub mod status;
pub mod types;

pub use error::{BadValue, DecodeError, EncodeError};
pub use header::{Header, HEADER_LEN, MAGIC, PROTOCOL_VERSION};
pub use ops::{decode_reply, decode_request, encode_reply, encode_request, Reply, Request};
pub use status::{Opcode, Status};
pub use types::*;

/// Protocol limits. Every variable-length thing on the wire has a bound, and every bound
/// is here, so a reader of the spec and of the code sees the same numbers.
pub mod limits {
    /// Most connections one session may be bound to at once (session trunking, §6.4a):
    /// the one it was created or bound on plus extra ones added with a trunking
    /// SESSION_BIND. Enough to spread one client's bulk transfers over several sockets;
    /// every one still counts against the server's connection limits.
    pub const SESSION_CONNECTIONS_MAX: u32 = 8;
    /// `slot_id` of a SESSION_BIND that *adds* its connection to the session (trunking)
    /// instead of moving the session to it.
    pub const BIND_TRUNK: u32 = 1;
    /// Smallest maximum message size a peer may negotiate: big enough for any
    /// non-data request with maximal names (two 255-byte names + a 4 KiB path).
    pub const MSG_SIZE_BYTES_MIN: u32 = 8 * 1024;
    /// Largest maximum message size a peer may negotiate. Bulk data above the
    /// inline threshold travels by direct placement, never in messages, so messages
    /// need not be huge; the bound keeps per-connection buffers small.
    pub const MSG_SIZE_BYTES_MAX: u32 = 4 * 1024 * 1024;
    /// Default maximum message size offered by the client library.
    pub const MSG_SIZE_BYTES_DEFAULT: u32 = 256 * 1024;
    /// Most request slots (credits) a server grants one session.
    pub const SLOTS_MAX: u32 = 1024;
    /// Longest single path component, as in POSIX NAME_MAX.
    pub const NAME_BYTES_MAX: usize = 255;
    /// Longest multi-component path accepted by LOOKUP / GET_ROOTHANDLE, and the
    /// longest symlink target, as in POSIX PATH_MAX.
    pub const PATH_BYTES_MAX: usize = 4096;
    /// Longest client identity string.
    pub const CLIENT_ID_BYTES_MAX: usize = 255;
    /// Supplementary groups one SET_CRED may carry (as NFS AUTH_SYS: 16).
    pub const CRED_GROUPS_MAX: usize = 16;
    /// Largest single direct transfer (one READ_DIRECT / WRITE_DIRECT).
    pub const DIRECT_BYTES_MAX: u32 = 64 * 1024 * 1024;
    /// Most entries one READDIR reply may carry.
    pub const READDIR_ENTRIES_MAX: u32 = 4096;
}
