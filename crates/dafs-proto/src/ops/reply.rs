//! Replies: one variant per body shape, with their encoders and decoders side by side.

use crate::codec::{BadValue, Dec, DecodeError, Enc};

use crate::limits;
use crate::status::{Opcode, Status};
use crate::types::*;

use super::{CLUSTER_NODE_ID_BYTES_MAX, NONCE_LEN};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// Any op whose reply status is not `Ok` (except `WRONG_NODE`): no body.
    Error(Status),
    /// Status `WRONG_NODE` (any op naming a path): the answering node's placement-map
    /// epoch, the only error reply with a body (8 bytes).
    WrongNode {
        epoch: u64,
    },
    /// CLUSTER_MAP: the answering node's id, the epoch of its placement map, and the map
    /// (JSON, as `dafs_cluster::PlacementMap::to_json` writes it; the protocol crate
    /// carries it as bytes).
    ClusterMap {
        epoch: u64,
        node_id: &'a [u8],
        map: &'a [u8],
    },
    /// Null, SessionDestroy, Close, Remove, RmDir, Rename, Commit.
    Empty,
    SessionCreate {
        msg_size_bytes_max: u32,
        slots: u32,
        inline_threshold: u32,
        auth: AuthMethod,
        server_nonce: [u8; NONCE_LEN],
        /// Largest single direct transfer the server accepts.
        direct_bytes_max: u32,
        /// Most I/Os one BATCH_IO may carry in this session.
        batch_max: u32,
        /// Identity of the server's host (Linux boot id), so a client can tell it runs
        /// on the same host and may use the shared-memory provider.
        host_id: [u8; 16],
        /// Unix socket of the server's shared-memory provider; empty if none.
        shm_path: &'a [u8],
        /// Random per server start: a client that sees it change knows the server
        /// restarted (its state is to be reclaimed), not merely that a session expired.
        boot_verifier: u64,
        /// Grace period left after a restart, in milliseconds; 0 when not in grace.
        grace_ms: u32,
        /// A secret of this session, known to the client that created it only: it keys
        /// the SESSION_BIND proof (with the shared secret, if any), so nobody else can
        /// take the session over ([`crate::auth::bind_key`]).
        session_token: [u8; NONCE_LEN],
    },
    SessionAuth {
        server_proof: [u8; NONCE_LEN],
    },
    /// SESSION_BIND: the session's slots, the server's target highest slot, the nonce the
    /// next bind must prove over, and (with authentication) the server's proof.
    SessionBind {
        slots: u32,
        target_highest: u32,
        next_nonce: [u8; NONCE_LEN],
        server_proof: [u8; NONCE_LEN],
    },
    /// GetRootHandle, Lookup, LookupParent, Create, Symlink.
    Handle {
        fh: FileHandle,
        attr: Attr,
    },
    /// GetAttr, SetAttr, Link (the attributes after the op).
    Attr {
        attr: Attr,
    },
    Access {
        granted: u32,
    },
    Open {
        open_id: u64,
        fh: FileHandle,
        attr: Attr,
    },
    ReadInline {
        eof: bool,
        data: &'a [u8],
    },
    /// WriteInline, WriteDirect. `offset` is where the data was written (the server's
    /// choice for an append-mode open).
    Write {
        count: u32,
        stable: bool,
        offset: u64,
    },
    ReadDirect {
        count: u32,
        eof: bool,
    },
    /// `entries` is a packed list; iterate it with [`DirEntries`].
    ReadDir {
        eof: bool,
        count: u32,
        entries: &'a [u8],
    },
    ReadLink {
        target: &'a [u8],
    },
    FsStat(FsStat),
    /// BATCH_IO: `count` packed [`BatchResult`]s (all I/Os, or only failed ones).
    Batch {
        count: u32,
        results: &'a [u8],
    },
    /// CHAIN: `executed` elements ran; `failed` is the index of the element that
    /// failed ([`CHAIN_NONE_FAILED`] if none); `replies` packs the reply of every executed element.
    Chain {
        executed: u32,
        failed: u32,
        replies: &'a [u8],
    },
    /// LOCK_TEST: whether a conflicting lock exists, and one such lock.
    LockTest {
        conflict: bool,
        ltype: u32,
        owner: u64,
        offset: u64,
        len: u64,
    },
    /// GET_NATTR.
    NamedAttr {
        value: &'a [u8],
    },
    /// LIST_NATTR: names separated by NUL bytes.
    NamedAttrList {
        names: &'a [u8],
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Empty,
    SessionCreate,
    SessionAuth,
    SessionBind,
    Handle,
    Attr,
    Access,
    Open,
    ReadInline,
    Write,
    ReadDirect,
    ReadDir,
    ReadLink,
    FsStat,
    Batch,
    Chain,
    LockTest,
    NamedAttr,
    NamedAttrList,
    ClusterMap,
}

fn shape_of(op: Opcode) -> Shape {
    use Opcode::*;
    match op {
        Null | SessionDestroy | SetCred | ReclaimComplete | Close | Remove | RmDir | Rename
        | ClusterRename | Commit | CacheHint | Lock | Unlock | SetNamedAttr | RemoveNamedAttr => {
            Shape::Empty
        }
        SessionCreate => Shape::SessionCreate,
        SessionAuth => Shape::SessionAuth,
        SessionBind => Shape::SessionBind,
        GetRootHandle | Lookup | LookupParent | Create | Symlink | Publish | Mknod => Shape::Handle,
        GetAttr | SetAttr | Link => Shape::Attr,
        Access => Shape::Access,
        Open => Shape::Open,
        ReadInline => Shape::ReadInline,
        WriteInline | WriteDirect => Shape::Write,
        ReadDirect => Shape::ReadDirect,
        ReadDir => Shape::ReadDir,
        ReadLink => Shape::ReadLink,
        FsStat => Shape::FsStat,
        BatchIo => Shape::Batch,
        Chain => Shape::Chain,
        LockTest => Shape::LockTest,
        GetNamedAttr => Shape::NamedAttr,
        ListNamedAttr => Shape::NamedAttrList,
        ClusterMap => Shape::ClusterMap,
        // Reserved ops only ever answer with an error status.
        _ => Shape::Empty,
    }
}

impl Reply<'_> {
    fn shape(&self) -> Option<Shape> {
        Some(match self {
            Reply::Error(_) | Reply::WrongNode { .. } => return None,
            Reply::Empty => Shape::Empty,
            Reply::SessionCreate { .. } => Shape::SessionCreate,
            Reply::SessionAuth { .. } => Shape::SessionAuth,
            Reply::SessionBind { .. } => Shape::SessionBind,
            Reply::Handle { .. } => Shape::Handle,
            Reply::Attr { .. } => Shape::Attr,
            Reply::Access { .. } => Shape::Access,
            Reply::Open { .. } => Shape::Open,
            Reply::ReadInline { .. } => Shape::ReadInline,
            Reply::Write { .. } => Shape::Write,
            Reply::ReadDirect { .. } => Shape::ReadDirect,
            Reply::ReadDir { .. } => Shape::ReadDir,
            Reply::ReadLink { .. } => Shape::ReadLink,
            Reply::FsStat(_) => Shape::FsStat,
            Reply::Batch { .. } => Shape::Batch,
            Reply::Chain { .. } => Shape::Chain,
            Reply::LockTest { .. } => Shape::LockTest,
            Reply::NamedAttr { .. } => Shape::NamedAttr,
            Reply::NamedAttrList { .. } => Shape::NamedAttrList,
            Reply::ClusterMap { .. } => Shape::ClusterMap,
        })
    }

    /// True if this reply body is the one the protocol defines for `op`.
    pub fn fits(&self, op: Opcode) -> bool {
        match self.shape() {
            None => true,
            Some(s) => s == shape_of(op) && (!op.is_reserved() || op == Opcode::Null),
        }
    }

    pub fn status(&self) -> Status {
        match self {
            Reply::Error(s) => *s,
            Reply::WrongNode { .. } => Status::WrongNode,
            _ => Status::Ok,
        }
    }

    pub(super) fn enc<'a>(&'a self, e: &mut Enc<'a, '_>) {
        match self {
            Reply::Error(_) | Reply::Empty => {}
            Reply::WrongNode { epoch } => e.u64(*epoch),
            Reply::ClusterMap { epoch, node_id, map } => {
                e.u64(*epoch);
                e.heap(node_id);
                e.heap(map);
            }
            Reply::SessionCreate {
                msg_size_bytes_max,
                slots,
                inline_threshold,
                auth,
                server_nonce,
                direct_bytes_max,
                batch_max,
                host_id,
                shm_path,
                boot_verifier,
                grace_ms,
                session_token,
            } => {
                e.u32(*msg_size_bytes_max);
                e.u32(*slots);
                e.u32(*inline_threshold);
                e.u32(*auth as u32);
                e.u32(*direct_bytes_max);
                e.u32(*batch_max);
                e.raw(server_nonce);
                e.raw(host_id);
                e.heap(shm_path);
                e.u64(*boot_verifier);
                e.u32(*grace_ms);
                e.u32(0);
                e.raw(session_token);
            }
            Reply::SessionAuth { server_proof } => e.raw(server_proof),
            Reply::SessionBind { slots, target_highest, next_nonce, server_proof } => {
                e.u32(*slots);
                e.u32(*target_highest);
                e.raw(next_nonce);
                e.raw(server_proof);
            }
            Reply::Handle { fh, attr } => {
                fh.enc(e);
                attr.enc(e);
            }
            Reply::Attr { attr } => attr.enc(e),
            Reply::Access { granted } => {
                e.u32(*granted);
                e.u32(0);
            }
            Reply::Open { open_id, fh, attr } => {
                e.u64(*open_id);
                fh.enc(e);
                attr.enc(e);
            }
            Reply::ReadInline { eof, data } => {
                e.u32(*eof as u32);
                e.u32(0);
                e.heap(data);
            }
            Reply::Write { count, stable, offset } => {
                e.u32(*count);
                e.u32(*stable as u32);
                e.u64(*offset);
            }
            Reply::ReadDirect { count, eof } => {
                e.u32(*count);
                e.u32(*eof as u32);
            }
            Reply::ReadDir { eof, count, entries } => {
                e.u32(*eof as u32);
                e.u32(*count);
                e.heap(entries);
            }
            Reply::ReadLink { target } => e.heap(target),
            Reply::Batch { count, results } => {
                e.u32(*count);
                e.u32(0);
                e.heap(results);
            }
            Reply::Chain { executed, failed, replies } => {
                e.u32(*executed);
                e.u32(*failed);
                e.heap(replies);
            }
            Reply::LockTest { conflict, ltype, owner, offset, len } => {
                e.u32(*conflict as u32);
                e.u32(*ltype);
                e.u64(*owner);
                e.u64(*offset);
                e.u64(*len);
            }
            Reply::NamedAttr { value } => e.heap(value),
            Reply::NamedAttrList { names } => e.heap(names),
            Reply::FsStat(s) => {
                e.u64(s.total_bytes);
                e.u64(s.free_bytes);
                e.u64(s.avail_bytes);
                e.u64(s.total_files);
                e.u64(s.free_files);
                e.u32(s.block_size);
                e.u32(s.name_max);
            }
        }
    }

    pub(super) fn dec<'a>(op: Opcode, d: &mut Dec<'a>) -> Result<Reply<'a>, DecodeError> {
        Ok(match shape_of(op) {
            Shape::Empty => Reply::Empty,
            Shape::SessionCreate => {
                let msg_size_bytes_max = d.u32()?;
                let slots = d.u32()?;
                let inline_threshold = d.u32()?;
                let auth = AuthMethod::from_wire(d.u32()?)?;
                let direct_bytes_max = d.u32()?;
                let batch_max = d.u32()?;
                if batch_max > BATCH_MAX {
                    return Err(DecodeError::BadValue(BadValue::BatchMax));
                }
                let server_nonce = d.array()?;
                let host_id = d.array()?;
                let shm_path = d.heap(limits::PATH_BYTES_MAX)?;
                if shm_path.contains(&0) {
                    return Err(DecodeError::BadValue(BadValue::ShmPathNul));
                }
                let boot_verifier = d.u64()?;
                let grace_ms = d.u32()?;
                let _pad = d.u32()?;
                let session_token = d.array()?;
                Reply::SessionCreate {
                    msg_size_bytes_max,
                    slots,
                    inline_threshold,
                    auth,
                    server_nonce,
                    direct_bytes_max,
                    batch_max,
                    host_id,
                    shm_path,
                    boot_verifier,
                    grace_ms,
                    session_token,
                }
            }
            Shape::SessionAuth => Reply::SessionAuth { server_proof: d.array()? },
            Shape::SessionBind => {
                let slots = d.u32()?;
                let target_highest = d.u32()?;
                if slots == 0 || slots > limits::SLOTS_MAX || target_highest >= slots {
                    return Err(DecodeError::BadValue(BadValue::BoundSessionSlots));
                }
                Reply::SessionBind {
                    slots,
                    target_highest,
                    next_nonce: d.array()?,
                    server_proof: d.array()?,
                }
            }
            Shape::Handle => Reply::Handle { fh: FileHandle::dec(d)?, attr: Attr::dec(d)? },
            Shape::Attr => Reply::Attr { attr: Attr::dec(d)? },
            Shape::Access => {
                let granted = d.u32()?;
                let _pad = d.u32()?;
                if granted & !access_mask::ALL != 0 {
                    return Err(DecodeError::BadValue(BadValue::AccessMask));
                }
                Reply::Access { granted }
            }
            Shape::Open => {
                Reply::Open { open_id: d.u64()?, fh: FileHandle::dec(d)?, attr: Attr::dec(d)? }
            }
            Shape::ReadInline => {
                let eof = d.bool32()?;
                let _pad = d.u32()?;
                Reply::ReadInline { eof, data: d.heap(limits::MSG_SIZE_BYTES_MAX as usize)? }
            }
            Shape::Write => Reply::Write { count: d.u32()?, stable: d.bool32()?, offset: d.u64()? },
            Shape::ReadDirect => Reply::ReadDirect { count: d.u32()?, eof: d.bool32()? },
            Shape::ReadDir => {
                let eof = d.bool32()?;
                let count = d.u32()?;
                if count > limits::READDIR_ENTRIES_MAX {
                    return Err(DecodeError::BadValue(BadValue::ReaddirCount));
                }
                let entries = d.heap(limits::MSG_SIZE_BYTES_MAX as usize)?;
                // Validate the whole list now so users of the reply never see a bad entry.
                let mut n = 0u32;
                for e in DirEntries::new(entries) {
                    e?;
                    n += 1;
                }
                if n != count {
                    return Err(DecodeError::BadValue(BadValue::ReaddirCountMismatch));
                }
                Reply::ReadDir { eof, count, entries }
            }
            Shape::ReadLink => Reply::ReadLink { target: d.heap(limits::PATH_BYTES_MAX)? },
            Shape::Batch => {
                let count = d.u32()?;
                let _pad = d.u32()?;
                let results = d.heap(BATCH_MAX as usize * BatchResult::WIRE_LEN)?;
                if BatchResult::parse_all(results)?.len() != count as usize {
                    return Err(DecodeError::BadValue(BadValue::BatchResultCount));
                }
                Reply::Batch { count, results }
            }
            Shape::Chain => {
                let (executed, failed) = (d.u32()?, d.u32()?);
                let replies = d.heap(limits::MSG_SIZE_BYTES_MAX as usize)?;
                if executed as usize > CHAIN_LEN_MAX
                    || unpack_messages(replies, CHAIN_LEN_MAX)?.len() != executed as usize
                {
                    return Err(DecodeError::BadValue(BadValue::ChainRepliesMismatch));
                }
                if failed != CHAIN_NONE_FAILED && failed + 1 != executed {
                    return Err(DecodeError::BadValue(BadValue::ChainFailureIndex));
                }
                Reply::Chain { executed, failed, replies }
            }
            Shape::LockTest => Reply::LockTest {
                conflict: d.bool32()?,
                ltype: d.u32()?,
                owner: d.u64()?,
                offset: d.u64()?,
                len: d.u64()?,
            },
            Shape::NamedAttr => Reply::NamedAttr { value: d.heap(NATTR_VALUE_BYTES_MAX)? },
            Shape::NamedAttrList => {
                Reply::NamedAttrList { names: d.heap(limits::MSG_SIZE_BYTES_MAX as usize)? }
            }
            Shape::ClusterMap => Reply::ClusterMap {
                epoch: d.u64()?,
                node_id: d.heap(CLUSTER_NODE_ID_BYTES_MAX)?,
                map: d.heap(limits::MSG_SIZE_BYTES_MAX as usize)?,
            },
            Shape::FsStat => Reply::FsStat(FsStat {
                total_bytes: d.u64()?,
                free_bytes: d.u64()?,
                avail_bytes: d.u64()?,
                total_files: d.u64()?,
                free_files: d.u64()?,
                block_size: d.u32()?,
                name_max: d.u32()?,
            }),
        })
    }
}
