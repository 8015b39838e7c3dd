use dafs_proto::Status;
use dafs_transport::TransportError;

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
    #[error("protocol violation by server: {0}")]
    Protocol(String),
    /// The connection was lost earlier; reconnect with a new client.
    #[error("not connected (the connection was lost)")]
    Disconnected,
    /// All slots granted by the server are in use: reap completions and retry.
    #[error("no free request slot (all credits in use)")]
    WouldBlock,
    /// The region has I/O in flight, or the id is unknown.
    #[error("region busy or unknown")]
    RegionBusy,
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    #[error("authentication failed: {0}")]
    Auth(String),
    #[error("timed out")]
    TimedOut,
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
            Error::WouldBlock => libc::EAGAIN,
            Error::RegionBusy => libc::EBUSY,
            Error::InvalidArgument(_) => libc::EINVAL,
            Error::Auth(_) => libc::EACCES,
            Error::TimedOut => libc::ETIMEDOUT,
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

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        std::io::Error::from_raw_os_error(e.errno())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
