//! Opcodes and status codes. Both are closed enums on the Rust side; unknown numbers
//! from the wire decode to an error, never to a silently-accepted value.

macro_rules! wire_enum {
    ($(#[$m:meta])* $name:ident : $repr:ty { $($(#[$vm:meta])* $var:ident = $val:expr),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr($repr)]
        pub enum $name { $($(#[$vm])* $var = $val),+ }
        impl $name {
            /// Every value, in wire order (for tests and docs).
            pub const ALL: &'static [$name] = &[$($name::$var),+];
            pub fn from_wire(v: $repr) -> Option<Self> {
                match v { $($val => Some($name::$var),)+ _ => None }
            }
            pub fn to_wire(self) -> $repr { self as $repr }
            pub fn name(self) -> &'static str {
                match self { $($name::$var => stringify!($var)),+ }
            }
        }
    };
}

wire_enum! {
    /// Operation numbers. Session ops are 1..=9, core file ops 10..=39, DAFS extensions
    /// (batch I/O, chaining, hints, locks, named attributes, publish) 40..=59; ops from
    /// 60 on are defined but answered with `NOTSUPP` by this version.
    Opcode: u16 {
        Null = 0,
        SessionCreate = 1,
        SessionAuth = 2,
        SessionDestroy = 3,
        /// Bind an existing session to this (new) connection: session recovery after a
        /// broken connection, within the session's lease.
        SessionBind = 4,
        /// Set the credential (uid, gid, groups) the session's following requests run with.
        SetCred = 5,
        /// The client has reclaimed (after a server restart) everything it is going to.
        ReclaimComplete = 6,
        /// The answering node's view of the cluster: its node id, the placement map's
        /// epoch and the map itself (federated servers; `NOTSUPP` from a lone server).
        ClusterMap = 7,
        /// Rename a file to a name another cluster node manages: the answering node (the
        /// source) moves the file to the target node in two phases (federated servers;
        /// `NOTSUPP` from a lone server).
        ClusterRename = 9,
        GetRootHandle = 10,
        Lookup = 11,
        LookupParent = 12,
        GetAttr = 13,
        SetAttr = 14,
        Access = 15,
        Create = 16,
        Open = 17,
        Close = 18,
        ReadInline = 19,
        WriteInline = 20,
        ReadDirect = 21,
        WriteDirect = 22,
        ReadDir = 23,
        Remove = 24,
        RmDir = 25,
        Rename = 26,
        Link = 27,
        Symlink = 28,
        ReadLink = 29,
        Commit = 30,
        FsStat = 31,
        BatchIo = 40,
        Chain = 41,
        CacheHint = 42,
        Lock = 43,
        LockTest = 44,
        Unlock = 45,
        GetNamedAttr = 46,
        SetNamedAttr = 47,
        ListNamedAttr = 48,
        RemoveNamedAttr = 49,
        /// Give a create-unlinked file its name (commit of the create/commit/abort pattern).
        Publish = 50,
        /// Create a special file: FIFO, socket, character or block device.
        Mknod = 51,
        /// Server-to-client callback channel (delegation recalls; planned, not implemented).
        Callback = 60,
    }
}

impl Opcode {
    /// Ops defined in the spec whose semantics this protocol version does not implement:
    /// a server answers them with [`Status::NotSupp`] and an empty body.
    pub fn is_reserved(self) -> bool {
        (self as u16) >= 60
    }
    /// Ops whose re-execution has the same effect and result as their first execution:
    /// the reply cache keeps no copy of their replies (they can be large: reads, directory
    /// pages) and a retransmission is simply executed again. Every other op's reply is
    /// cached, so a retransmission is answered without executing anything twice.
    pub fn is_idempotent(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Null | GetRootHandle
                | Lookup
                | LookupParent
                | GetAttr
                | Access
                | ReadInline
                | ReadDirect
                | ReadDir
                | ReadLink
                | Commit
                | FsStat
                | CacheHint
                | LockTest
                | GetNamedAttr
                | ListNamedAttr
                | ReclaimComplete
        )
    }
    /// Ops that may be sent before the session is authenticated.
    pub fn allowed_before_auth(self) -> bool {
        matches!(
            self,
            Opcode::Null
                | Opcode::SessionCreate
                | Opcode::SessionAuth
                | Opcode::SessionDestroy
                | Opcode::SessionBind
        )
    }
}

wire_enum! {
    /// Reply status. 0 is success; 1..=999 mirror POSIX errno values (Linux numbering) so
    /// that every client can map them to errno without a table; 10000.. are protocol
    /// conditions that have no errno of their own.
    Status: u32 {
        Ok = 0,
        Perm = 1,
        NoEnt = 2,
        Io = 5,
        NxIo = 6,
        Access = 13,
        Busy = 16,
        Exist = 17,
        XDev = 18,
        NotDir = 20,
        IsDir = 21,
        Inval = 22,
        FBig = 27,
        NoSpc = 28,
        RoFs = 30,
        MLink = 31,
        NameTooLong = 36,
        NotEmpty = 39,
        Loop = 40,
        DQuot = 122,
        /// The file handle refers to an object that no longer exists, or to a server
        /// instance that is gone.
        Stale = 10001,
        /// The file handle is malformed or was never issued by this server.
        BadHandle = 10002,
        /// The message could not be decoded (bad lengths, references, values).
        BadXdr = 10003,
        /// The opcode is defined but not implemented by this server.
        NotSupp = 10004,
        /// The opcode is not defined at all.
        OpIllegal = 10005,
        /// Something went wrong inside the server; the request had no effect.
        ServerFault = 10006,
        /// The session id is unknown, or the session was destroyed.
        BadSession = 10007,
        /// The slot id is beyond the slots the server granted.
        BadSlot = 10008,
        /// The sequence id is not the next one for that slot.
        SeqMisordered = 10009,
        /// A request arrived on a slot whose previous request is still executing: the
        /// client exceeded its credits.
        SlotBusy = 10010,
        /// The message exceeds the negotiated maximum message size.
        MsgTooBig = 10011,
        /// Protocol version not supported.
        BadVersion = 10012,
        /// Authentication is required before this op, or the method is not accepted.
        AuthRequired = 10013,
        /// The authentication proof did not verify.
        AuthFailed = 10014,
        /// The open id is unknown to this session (never issued, or closed).
        BadOpenId = 10015,
        /// The direct region {key, offset, len} is not registered by this client, or
        /// is out of its bounds, or lacks the needed access.
        BadRegion = 10016,
        /// The path would leave the export (`..`, absolute symlink, handle trick).
        Escape = 10017,
        /// The name is not a valid single path component.
        BadName = 10018,
        /// The READDIR cookie is not valid for this directory.
        BadCookie = 10019,
        /// A server limit was reached (open files, handles, sessions...).
        Limit = 10020,
        /// The direct transfer failed in the transport (the peer's memory could not be
        /// reached); nothing was written to the file.
        TransferFailed = 10021,
        /// The open id was opened without the access the op needs.
        OpenMode = 10022,
        /// Buffer or count too small to hold even one result.
        TooSmall = 10023,
        /// A byte-range lock conflicts with another session's lock.
        Denied = 10024,
        /// The open conflicts with another open's share reservation (deny-read/-write).
        ShareDenied = 10025,
        /// The file is open with a key and the key presented does not match.
        BadKey = 10026,
        /// A batch or chain has more elements than allowed.
        TooMany = 10027,
        /// The op cannot be part of a chain.
        NotChainable = 10028,
        /// The named attribute does not exist.
        NoAttr = 10029,
        /// A request reused a slot and sequence id of an earlier, different request (the
        /// digests differ): a client bug, refused rather than answered with another reply.
        SeqFalseRetry = 10030,
        /// A retransmission of a request whose reply was too large for the reply cache:
        /// it executed once, its result is lost; nothing was executed again.
        RetryUncachedRep = 10031,
        /// The client has been fenced by the administrator.
        Fenced = 10032,
        /// The server cannot do it now (e.g. the session is still bound to a connection
        /// being torn down); retry shortly.
        Delay = 10033,
        /// The server is in its grace period after a restart and this (non-reclaim) request
        /// could conflict with state a client has not reclaimed yet: retry later.
        Grace = 10034,
        /// A reclaim outside the grace period, or by a client that held no state before
        /// the restart: the state is lost.
        NoGrace = 10035,
        /// The reclaim does not match what can be reclaimed (e.g. it conflicts with
        /// state another client reclaimed).
        ReclaimBad = 10036,
        /// Federation: the request names a path this node neither manages under its
        /// placement map nor holds. The reply carries the node's epoch (an 8-byte body,
        /// the one error reply with a body): the client refreshes its map (CLUSTER_MAP)
        /// and sends the request to the node the map names.
        WrongNode = 10037,
    }
}

impl Status {
    /// The POSIX errno closest to this status (Linux numbering).
    pub fn to_errno(self) -> i32 {
        let v = self as u32;
        if v != 0 && v < 1000 {
            return v as i32;
        }
        match self {
            Status::Ok => 0,
            Status::Stale => 116,          // ESTALE
            Status::BadHandle => 116,      // ESTALE
            Status::BadXdr => 71,          // EPROTO
            Status::NotSupp => 95,         // EOPNOTSUPP
            Status::OpIllegal => 95,       // EOPNOTSUPP
            Status::ServerFault => 5,      // EIO
            Status::BadSession => 107,     // ENOTCONN
            Status::BadSlot => 71,         // EPROTO
            Status::SeqMisordered => 71,   // EPROTO
            Status::SlotBusy => 11,        // EAGAIN
            Status::MsgTooBig => 90,       // EMSGSIZE
            Status::BadVersion => 71,      // EPROTO
            Status::AuthRequired => 13,    // EACCES
            Status::AuthFailed => 13,      // EACCES
            Status::BadOpenId => 9,        // EBADF
            Status::BadRegion => 14,       // EFAULT
            Status::Escape => 18,          // EXDEV: what openat2(RESOLVE_BENEATH) says
            Status::BadName => 22,         // EINVAL
            Status::BadCookie => 22,       // EINVAL
            Status::Limit => 24,           // EMFILE
            Status::TransferFailed => 5,   // EIO
            Status::OpenMode => 9,         // EBADF
            Status::TooSmall => 22,        // EINVAL
            Status::Denied => 11,          // EAGAIN, as fcntl(F_SETLK) reports a conflict
            Status::ShareDenied => 26,     // ETXTBSY: "file busy"
            Status::BadKey => 13,          // EACCES
            Status::TooMany => 7,          // E2BIG
            Status::NotChainable => 22,    // EINVAL
            Status::NoAttr => 61,          // ENODATA
            Status::SeqFalseRetry => 71,   // EPROTO
            Status::RetryUncachedRep => 5, // EIO
            Status::Fenced => 1,           // EPERM
            Status::Delay => 11,           // EAGAIN
            Status::Grace => 11,           // EAGAIN: the client library waits and retries
            Status::NoGrace => 5,          // EIO: state lost in a restart (as NFS reports it)
            Status::ReclaimBad => 5,       // EIO
            Status::WrongNode => 121,      // EREMOTEIO: the name lives on another node
            _ => 5,
        }
    }

    /// Map an errno from the server's file system to the status sent on the wire.
    pub fn from_errno(errno: i32) -> Status {
        match errno {
            0 => Status::Ok,
            1 => Status::Perm,
            2 => Status::NoEnt,
            5 => Status::Io,
            6 => Status::NxIo,
            13 => Status::Access,
            16 => Status::Busy,
            17 => Status::Exist,
            18 => Status::Escape, // openat2 RESOLVE_BENEATH reports an escape as EXDEV
            20 => Status::NotDir,
            21 => Status::IsDir,
            22 => Status::Inval,
            27 => Status::FBig,
            28 => Status::NoSpc,
            30 => Status::RoFs,
            31 => Status::MLink,
            36 => Status::NameTooLong,
            39 => Status::NotEmpty,
            40 => Status::Loop,
            116 => Status::Stale,
            122 => Status::DQuot,
            24 | 23 => Status::Limit,
            95 => Status::NotSupp,
            61 => Status::NoAttr,
            _ => Status::Io,
        }
    }

    /// A short human description, used by the CLI and in error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Status::Ok => "success",
            Status::Perm => "operation not permitted",
            Status::NoEnt => "no such file or directory",
            Status::Io => "input/output error",
            Status::NxIo => "no such device or address",
            Status::Access => "permission denied",
            Status::Busy => "device or resource busy",
            Status::Exist => "file exists",
            Status::XDev => "cross-device link",
            Status::NotDir => "not a directory",
            Status::IsDir => "is a directory",
            Status::Inval => "invalid argument",
            Status::FBig => "file too large",
            Status::NoSpc => "no space left on device",
            Status::RoFs => "read-only file system",
            Status::MLink => "too many links",
            Status::NameTooLong => "file name too long",
            Status::NotEmpty => "directory not empty",
            Status::Loop => "too many levels of symbolic links",
            Status::DQuot => "disk quota exceeded",
            Status::Stale => "stale file handle",
            Status::BadHandle => "bad file handle",
            Status::BadXdr => "malformed message",
            Status::NotSupp => "operation not supported",
            Status::OpIllegal => "illegal operation",
            Status::ServerFault => "server fault",
            Status::BadSession => "bad or expired session",
            Status::BadSlot => "slot id beyond granted slots",
            Status::SeqMisordered => "sequence id misordered",
            Status::SlotBusy => "too many outstanding requests (slot busy)",
            Status::MsgTooBig => "message too big",
            Status::BadVersion => "protocol version not supported",
            Status::AuthRequired => "authentication required",
            Status::AuthFailed => "authentication failed",
            Status::BadOpenId => "bad open id",
            Status::BadRegion => "bad memory region",
            Status::Escape => "path escapes the export",
            Status::BadName => "invalid file name",
            Status::BadCookie => "bad directory cookie",
            Status::Limit => "server limit reached",
            Status::TransferFailed => "direct transfer failed",
            Status::OpenMode => "file not open for this access",
            Status::TooSmall => "buffer too small",
            Status::Denied => "byte range locked by another session",
            Status::ShareDenied => "file busy (share reservation)",
            Status::BadKey => "wrong open key",
            Status::TooMany => "too many elements in batch or chain",
            Status::NotChainable => "operation cannot be chained",
            Status::NoAttr => "no such named attribute",
            Status::SeqFalseRetry => "slot and sequence id reused by a different request",
            Status::RetryUncachedRep => "retransmitted request's reply was not cached",
            Status::Fenced => "client fenced by the administrator",
            Status::Delay => "server busy with this session; retry",
            Status::Grace => "server in its grace period after a restart; retry",
            Status::NoGrace => "state lost in a server restart (reclaim refused)",
            Status::ReclaimBad => "reclaim does not match the state held before the restart",
            Status::WrongNode => "name belongs to another cluster node (refresh the placement map)",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_roundtrip_and_unknown() {
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_wire(op.to_wire()), Some(op));
        }
        assert_eq!(Opcode::from_wire(8), None);
        assert_eq!(Opcode::from_wire(u16::MAX), None);
    }

    #[test]
    fn status_roundtrip_and_errno() {
        for &s in Status::ALL {
            assert_eq!(Status::from_wire(s.to_wire()), Some(s));
            assert!(s == Status::Ok || s.to_errno() > 0, "{s:?} has no errno");
            assert!(!s.describe().is_empty());
        }
        assert_eq!(Status::from_wire(3), None);
        assert_eq!(Status::from_errno(2), Status::NoEnt);
        assert_eq!(Status::NoEnt.to_errno(), 2);
        assert_eq!(Status::NotEmpty.to_errno(), 39);
    }
}
