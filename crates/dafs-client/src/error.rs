use dafs_proto::codec::EncodeError;
use dafs_proto::{DecodeError, Opcode, Status};
use dafs_transport::TransportError;

use crate::limits::COMPLETION_GROUPS_MAX;

/// Every way a client call can fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with this status.
    #[error("{0}")]
    Status(Status),
    /// The connection failed; the client is unusable afterwards.
    #[error("transport: {0}")]
    Transport(#[from] TransportError),
    /// The server sent something that violates the protocol; the client disconnected.
    /// (Also a request the client refused to encode: [`ProtocolViolation::Encode`].)
    #[error("protocol violation by server: {0}")]
    Protocol(#[from] ProtocolViolation),
    /// The connection was lost earlier; reconnect with a new client.
    #[error("not connected (the connection was lost)")]
    Disconnected,
    /// All slots granted by the server are in use: reap completions and retry.
    #[error("no free request slot (all credits in use)")]
    WouldBlock,
    /// The completion group's queue has no room for every completion the request may
    /// deliver ([`Client::completions_queued_max`](crate::Client::completions_queued_max)):
    /// reap its completions and retry.
    #[error("completion queue full (reap completions and retry)")]
    CompletionQueueFull,
    /// The application holds [`COMPLETION_GROUPS_MAX`] completion groups already:
    /// destroy one first.
    #[error("too many completion groups (at most {COMPLETION_GROUPS_MAX})")]
    TooManyCompletionGroups,
    /// The region has I/O in flight, or the id is unknown.
    #[error("region busy or unknown")]
    RegionBusy,
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    #[error("authentication failed: {0}")]
    Auth(String),
    #[error("timed out")]
    TimedOut,
    /// The file was opened in an earlier session, which is gone (the server restarted or
    /// the lease ran out): nothing was sent. Re-open it ([`Client::reopen`](crate::Client::reopen)).
    #[error("file opened in a lost session (re-open it)")]
    StaleOpen,
    /// A cluster URL, map or call the cluster client cannot serve (see the message).
    #[error("cluster: {0}")]
    Cluster(String),
    /// The cluster node holding the name could not be reached: names on other nodes
    /// still work; the node's own work again once it is back.
    #[error("cluster node {node} unavailable: {source}")]
    NodeUnavailable { node: String, source: Box<Error> },
}

/// A violation of the protocol the client detected in what the server sent (or, for
/// [`ProtocolViolation::Encode`], in a request it was asked to send).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// A reply, or a part of one (batch results, chain elements, directory entries), that
    /// does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A request the client refused to encode (e.g. larger than the negotiated message
    /// size): nothing was sent, and the client stays usable.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// A reply whose body is not the one the request it answers calls for.
    #[error("bad {} reply", .op.name())]
    UnexpectedReply { op: Opcode },
    /// SESSION_CREATE negotiated a value outside what the protocol or the client's
    /// request allows.
    #[error("server negotiated an out-of-range {limit} ({value})")]
    NegotiatedOutOfRange { limit: &'static str, value: u64 },
    /// SESSION_BIND bound the session with another slot count than it was created with.
    #[error("bound session has a different slot count ({bound}, not {granted})")]
    BindSlotsChanged { granted: u32, bound: u32 },
    /// A reply for another session, or for a slot beyond the granted ones.
    #[error(
        "reply for another session or beyond the granted slots (session {session_id:016x}, \
         slot {slot_id})"
    )]
    Misaddressed { session_id: u64, slot_id: u32 },
    /// A batch result for an I/O the batch did not carry.
    #[error("batch result for an I/O that was not sent (index {index} of {count})")]
    BatchResultIndex { index: u32, count: usize },
    /// A reply that transferred more bytes than the request asked for.
    #[error("{} reply counts {count} bytes, more than the {asked} asked", .op.name())]
    CountExceedsRequest { op: Opcode, count: u64, asked: u64 },
    /// A write that succeeded with fewer bytes than asked, where the client needs all of
    /// them (blocking writes, appends).
    #[error("short write ({written} of {asked} bytes)")]
    ShortWrite { written: u64, asked: u64 },
    /// A READDIR reply with no entries that is not the end of the directory: following
    /// it would loop forever.
    #[error("READDIR made no progress")]
    ReaddirNoProgress,
    /// A chain reply whose error element is not the one it says failed.
    #[error("chain error reply at the wrong index ({at}, the failed element is {failed})")]
    ChainErrorIndex { at: usize, failed: u32 },
}

impl Error {
    /// The POSIX errno for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Status(s) => s.to_errno(),
            // Keep the operating system's errno where there is one (ECONNREFUSED, ...).
            Error::Transport(TransportError::Io(e)) => e.raw_os_error().unwrap_or(libc::EIO),
            Error::Transport(TransportError::TooBig { .. }) => libc::EMSGSIZE,
            Error::Transport(TransportError::BadRegion) => libc::EFAULT,
            Error::Transport(TransportError::RegistrationLimit) => libc::ENOMEM,
            Error::Transport(TransportError::NotRegistrable) => libc::EINVAL,
            Error::Transport(_) | Error::Disconnected => libc::ENOTCONN,
            Error::Protocol(_) => libc::EPROTO,
            Error::WouldBlock | Error::CompletionQueueFull => libc::EAGAIN,
            Error::TooManyCompletionGroups => libc::EMFILE,
            Error::RegionBusy => libc::EBUSY,
            Error::InvalidArgument(_) => libc::EINVAL,
            Error::Auth(_) => libc::EACCES,
            Error::TimedOut => libc::ETIMEDOUT,
            Error::StaleOpen => libc::ESTALE,
            Error::Cluster(_) => libc::EINVAL,
            Error::NodeUnavailable { source, .. } => match source.errno() {
                libc::ENOTCONN | libc::EIO => libc::EHOSTDOWN,
                e => e,
            },
        }
    }
    /// The server status, if the server answered.
    pub fn status(&self) -> Option<Status> {
        match self {
            Error::Status(s) => Some(*s),
            _ => None,
        }
    }
}

impl From<Status> for Error {
    fn from(s: Status) -> Self {
        Error::Status(s)
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Error::Protocol(e.into())
    }
}

impl From<EncodeError> for Error {
    fn from(e: EncodeError) -> Self {
        Error::Protocol(e.into())
    }
}

/// The error for a reply whose body does not fit the request `op` it answers.
pub(crate) fn unexpected_reply(op: Opcode) -> Error {
    Error::Protocol(ProtocolViolation::UnexpectedReply { op })
}

/// A write reply's `count` against the `asked` bytes of a write that must be whole.
pub(crate) fn check_write_count(op: Opcode, count: u32, asked: usize) -> Result<()> {
    let (count, asked) = (u64::from(count), asked as u64);
    match count.cmp(&asked) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Greater => {
            Err(ProtocolViolation::CountExceedsRequest { op, count, asked }.into())
        }
        std::cmp::Ordering::Less => {
            Err(ProtocolViolation::ShortWrite { written: count, asked }.into())
        }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::from_raw_os_error(e.errno())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn violations_say_what_was_wrong() {
        let e = unexpected_reply(Opcode::GetAttr);
        assert_eq!(e.to_string(), "protocol violation by server: bad GetAttr reply");
        assert_eq!(e.errno(), libc::EPROTO);
        let e: Error = EncodeError::TooBig { len: 9000, max: 8192 }.into();
        assert!(e.to_string().contains("9000 bytes exceeds the maximum of 8192"), "{e}");
        let e: Error = DecodeError::BadMagic.into();
        assert!(matches!(e, Error::Protocol(ProtocolViolation::Decode(DecodeError::BadMagic))));
    }

    #[test]
    fn write_counts_must_be_whole() {
        assert!(check_write_count(Opcode::WriteInline, 5, 5).is_ok());
        assert!(matches!(
            check_write_count(Opcode::WriteInline, 4, 5),
            Err(Error::Protocol(ProtocolViolation::ShortWrite { written: 4, asked: 5 }))
        ));
        assert!(matches!(
            check_write_count(Opcode::WriteDirect, 6, 5),
            Err(Error::Protocol(ProtocolViolation::CountExceedsRequest {
                op: Opcode::WriteDirect,
                count: 6,
                asked: 5
            }))
        ));
    }
}
