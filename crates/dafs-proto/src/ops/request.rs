//! Requests: one variant per op, with their encoders and decoders side by side.

use crate::codec::{BadValue, Dec, DecodeError, Enc};

use crate::limits;
use crate::status::Opcode;
use crate::types::*;

use super::{GROUP_ID_LEN, NONCE_LEN};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    Null,
    SessionCreate {
        msg_size_bytes_max: u32,
        slots: u32,
        auth: AuthMethod,
        /// [`session_flags`] (`RECLAIM`: the client will reclaim state after a restart).
        flags: u32,
        client_id: &'a [u8],
    },
    SessionAuth {
        client_nonce: [u8; NONCE_LEN],
        proof: [u8; NONCE_LEN],
    },
    SessionDestroy,
    /// Bind the session named in the header to this connection. With authentication,
    /// `proof` is [`crate::auth::bind_proof`] over the session's current bind nonce;
    /// otherwise both arrays are zero.
    SessionBind {
        client_nonce: [u8; NONCE_LEN],
        proof: [u8; NONCE_LEN],
        client_id: &'a [u8],
    },
    /// The credential the session's following requests execute with: `groups` is a
    /// packed list of little-endian u32 supplementary group ids (at most
    /// [`limits::CRED_GROUPS_MAX`]).
    SetCred {
        uid: u32,
        gid: u32,
        groups: &'a [u8],
    },
    /// The client has finished reclaiming its state after a server restart.
    ReclaimComplete,
    /// `export` is the export's name; empty selects the server's default export.
    GetRootHandle {
        export: &'a [u8],
    },
    /// `path` is one or more components relative to `dir`. Intermediate symlinks are
    /// followed (beneath the export); the final one only when `follow` is set.
    Lookup {
        dir: FileHandle,
        path: &'a [u8],
        follow: bool,
    },
    LookupParent {
        fh: FileHandle,
    },
    GetAttr {
        fh: FileHandle,
    },
    SetAttr {
        fh: FileHandle,
        set: SetAttrs,
    },
    Access {
        fh: FileHandle,
        mask: u32,
    },
    Create {
        dir: FileHandle,
        ftype: FileType,
        mode: u32,
        exclusive: bool,
        name: &'a [u8],
    },
    /// Open `name` in directory `fh` (or `fh` itself when `name` is empty). `key`, if
    /// not empty, is the open key: the first opener sets it, later ones must match.
    /// `mode`: the permission bits of a CREATE; with RECLAIM (which creates nothing), the
    /// open id the client asks back, 0 for any (docs/protocol.md §6.12, §9.5).
    Open {
        fh: FileHandle,
        flags: u32,
        mode: u32,
        name: &'a [u8],
        key: &'a [u8],
    },
    Close {
        open_id: u64,
    },
    ReadInline {
        open_id: u64,
        offset: u64,
        len: u32,
    },
    WriteInline {
        open_id: u64,
        offset: u64,
        stable: bool,
        data: &'a [u8],
    },
    ReadDirect {
        open_id: u64,
        offset: u64,
        len: u32,
        region: RemoteRegion,
    },
    WriteDirect {
        open_id: u64,
        offset: u64,
        len: u32,
        stable: bool,
        region: RemoteRegion,
    },
    ReadDir {
        dir: FileHandle,
        cookie: u64,
        max_entries: u32,
        max_bytes: u32,
    },
    Remove {
        dir: FileHandle,
        name: &'a [u8],
    },
    RmDir {
        dir: FileHandle,
        name: &'a [u8],
    },
    /// `flags` are [`rename_flags`] (0: replace an existing target, as rename(2)).
    Rename {
        from_dir: FileHandle,
        from_name: &'a [u8],
        to_dir: FileHandle,
        to_name: &'a [u8],
        flags: u32,
    },
    Link {
        fh: FileHandle,
        dir: FileHandle,
        name: &'a [u8],
    },
    Symlink {
        dir: FileHandle,
        name: &'a [u8],
        target: &'a [u8],
    },
    ReadLink {
        fh: FileHandle,
    },
    /// Make `[offset, offset+len)` durable; `len == 0` means to the end of the file.
    Commit {
        open_id: u64,
        offset: u64,
        len: u64,
    },
    FsStat {
        fh: FileHandle,
    },
    /// Many I/Os on one open file in one request; `ios` is a packed list (see
    /// [`crate::types::parse_batch`]) of `count` I/Os.
    BatchIo {
        open_id: u64,
        flags: u32,
        count: u32,
        ios: &'a [u8],
    },
    /// A chain of `count` complete request messages (packed with
    /// [`crate::types::pack_messages`]), executed in order, stopping at the first error.
    Chain {
        count: u32,
        elements: &'a [u8],
    },
    CacheHint {
        open_id: u64,
        offset: u64,
        len: u64,
        hint: u32,
    },
    /// Byte-range lock; `len == 0` means to the end of the 64-bit range. `flags` are
    /// [`lock_flags`] (`RECLAIM` during the grace period after a restart).
    Lock {
        fh: FileHandle,
        offset: u64,
        len: u64,
        ltype: u32,
        flags: u32,
    },
    LockTest {
        fh: FileHandle,
        offset: u64,
        len: u64,
        ltype: u32,
    },
    Unlock {
        fh: FileHandle,
        offset: u64,
        len: u64,
    },
    GetNamedAttr {
        fh: FileHandle,
        name: &'a [u8],
    },
    SetNamedAttr {
        fh: FileHandle,
        flags: u32,
        name: &'a [u8],
        value: &'a [u8],
    },
    ListNamedAttr {
        fh: FileHandle,
    },
    RemoveNamedAttr {
        fh: FileHandle,
        name: &'a [u8],
    },
    /// Give a create-unlinked open its name (the name given at OPEN).
    Publish {
        open_id: u64,
    },
    /// Create a special file `name` in `dir`: `ftype` is a FIFO, socket, character or
    /// block device; `rdev` is the device number (devices only, else zero).
    Mknod {
        dir: FileHandle,
        ftype: FileType,
        mode: u32,
        rdev: u64,
        name: &'a [u8],
    },
    /// An op the spec reserves but this version does not implement; its body is not
    /// interpreted, and the answer is `NOTSUPP`.
    Reserved(Opcode),
    /// CLUSTER_MAP: no body; the answer is [`Reply::ClusterMap`](super::Reply::ClusterMap).
    ClusterMap,
    /// CLUSTER_RENAME: rename the regular file `from_name` in `from_dir` (on the
    /// answering node) to `to_path`, a path beneath the export root (relative, no
    /// leading `/`) which another node manages. The answer is empty.
    ClusterRename {
        from_dir: FileHandle,
        from_name: &'a [u8],
        to_path: &'a [u8],
    },
}

impl Request<'_> {
    pub fn opcode(&self) -> Opcode {
        use Request::*;
        match self {
            Null => Opcode::Null,
            SessionCreate { .. } => Opcode::SessionCreate,
            SessionAuth { .. } => Opcode::SessionAuth,
            SessionDestroy => Opcode::SessionDestroy,
            SessionBind { .. } => Opcode::SessionBind,
            SetCred { .. } => Opcode::SetCred,
            GetRootHandle { .. } => Opcode::GetRootHandle,
            Lookup { .. } => Opcode::Lookup,
            LookupParent { .. } => Opcode::LookupParent,
            GetAttr { .. } => Opcode::GetAttr,
            SetAttr { .. } => Opcode::SetAttr,
            Access { .. } => Opcode::Access,
            Create { .. } => Opcode::Create,
            Open { .. } => Opcode::Open,
            Close { .. } => Opcode::Close,
            ReadInline { .. } => Opcode::ReadInline,
            WriteInline { .. } => Opcode::WriteInline,
            ReadDirect { .. } => Opcode::ReadDirect,
            WriteDirect { .. } => Opcode::WriteDirect,
            ReadDir { .. } => Opcode::ReadDir,
            Remove { .. } => Opcode::Remove,
            RmDir { .. } => Opcode::RmDir,
            Rename { .. } => Opcode::Rename,
            Link { .. } => Opcode::Link,
            Symlink { .. } => Opcode::Symlink,
            ReadLink { .. } => Opcode::ReadLink,
            Commit { .. } => Opcode::Commit,
            FsStat { .. } => Opcode::FsStat,
            BatchIo { .. } => Opcode::BatchIo,
            Chain { .. } => Opcode::Chain,
            CacheHint { .. } => Opcode::CacheHint,
            Lock { .. } => Opcode::Lock,
            LockTest { .. } => Opcode::LockTest,
            Unlock { .. } => Opcode::Unlock,
            GetNamedAttr { .. } => Opcode::GetNamedAttr,
            SetNamedAttr { .. } => Opcode::SetNamedAttr,
            ListNamedAttr { .. } => Opcode::ListNamedAttr,
            RemoveNamedAttr { .. } => Opcode::RemoveNamedAttr,
            Publish { .. } => Opcode::Publish,
            Mknod { .. } => Opcode::Mknod,
            ReclaimComplete => Opcode::ReclaimComplete,
            ClusterMap => Opcode::ClusterMap,
            ClusterRename { .. } => Opcode::ClusterRename,
            Reserved(op) => *op,
        }
    }

    pub(super) fn enc<'a>(&'a self, e: &mut Enc<'a, '_>) {
        use Request::*;
        match self {
            Null | SessionDestroy | ReclaimComplete | ClusterMap | Reserved(_) => {}
            SessionCreate { msg_size_bytes_max, slots, auth, flags, client_id } => {
                e.u32(*msg_size_bytes_max);
                e.u32(*slots);
                e.u32(*auth as u32);
                e.u32(*flags);
                e.heap(client_id);
            }
            SessionAuth { client_nonce, proof } => {
                e.raw(client_nonce);
                e.raw(proof);
            }
            SessionBind { client_nonce, proof, client_id } => {
                e.raw(client_nonce);
                e.raw(proof);
                e.heap(client_id);
            }
            SetCred { uid, gid, groups } => {
                e.u32(*uid);
                e.u32(*gid);
                e.heap(groups);
            }
            GetRootHandle { export } => e.heap(export),
            Lookup { dir, path, follow } => {
                dir.enc(e);
                e.u32(*follow as u32);
                e.u32(0);
                e.heap(path);
            }
            LookupParent { fh } | GetAttr { fh } | ReadLink { fh } | FsStat { fh } => fh.enc(e),
            SetAttr { fh, set } => {
                fh.enc(e);
                set.enc(e);
            }
            Access { fh, mask } => {
                fh.enc(e);
                e.u32(*mask);
                e.u32(0);
            }
            Create { dir, ftype, mode, exclusive, name } => {
                dir.enc(e);
                e.u32(*ftype as u32);
                e.u32(*mode);
                e.u32(*exclusive as u32);
                e.u32(0);
                e.heap(name);
            }
            Open { fh, flags, mode, name, key } => {
                fh.enc(e);
                e.u32(*flags);
                e.u32(*mode);
                e.heap(name);
                e.heap(key);
            }
            Close { open_id } => e.u64(*open_id),
            ReadInline { open_id, offset, len } => {
                e.u64(*open_id);
                e.u64(*offset);
                e.u32(*len);
                e.u32(0);
            }
            WriteInline { open_id, offset, stable, data } => {
                e.u64(*open_id);
                e.u64(*offset);
                e.u32(*stable as u32);
                e.u32(0);
                e.heap(data);
            }
            ReadDirect { open_id, offset, len, region } => {
                e.u64(*open_id);
                e.u64(*offset);
                e.u32(*len);
                e.u32(0);
                e.u64(region.key);
                e.u64(region.offset);
            }
            WriteDirect { open_id, offset, len, stable, region } => {
                e.u64(*open_id);
                e.u64(*offset);
                e.u32(*len);
                e.u32(*stable as u32);
                e.u64(region.key);
                e.u64(region.offset);
            }
            ReadDir { dir, cookie, max_entries, max_bytes } => {
                dir.enc(e);
                e.u64(*cookie);
                e.u32(*max_entries);
                e.u32(*max_bytes);
            }
            Remove { dir, name } | RmDir { dir, name } => {
                dir.enc(e);
                e.heap(name);
            }
            Rename { from_dir, from_name, to_dir, to_name, flags } => {
                from_dir.enc(e);
                to_dir.enc(e);
                e.heap(from_name);
                e.heap(to_name);
                e.u32(*flags);
                e.u32(0);
            }
            ClusterRename { from_dir, from_name, to_path } => {
                from_dir.enc(e);
                e.heap(from_name);
                e.heap(to_path);
            }
            Link { fh, dir, name } => {
                fh.enc(e);
                dir.enc(e);
                e.heap(name);
            }
            Symlink { dir, name, target } => {
                dir.enc(e);
                e.heap(name);
                e.heap(target);
            }
            Commit { open_id, offset, len } => {
                e.u64(*open_id);
                e.u64(*offset);
                e.u64(*len);
            }
            BatchIo { open_id, flags, count, ios } => {
                e.u64(*open_id);
                e.u32(*flags);
                e.u32(*count);
                e.heap(ios);
            }
            Chain { count, elements } => {
                e.u32(*count);
                e.u32(0);
                e.heap(elements);
            }
            CacheHint { open_id, offset, len, hint } => {
                e.u64(*open_id);
                e.u64(*offset);
                e.u64(*len);
                e.u32(*hint);
                e.u32(0);
            }
            Lock { fh, offset, len, ltype, flags } => {
                fh.enc(e);
                e.u64(*offset);
                e.u64(*len);
                e.u32(*ltype);
                e.u32(*flags);
            }
            LockTest { fh, offset, len, ltype } => {
                fh.enc(e);
                e.u64(*offset);
                e.u64(*len);
                e.u32(*ltype);
                e.u32(0);
            }
            Unlock { fh, offset, len } => {
                fh.enc(e);
                e.u64(*offset);
                e.u64(*len);
            }
            GetNamedAttr { fh, name } | RemoveNamedAttr { fh, name } => {
                fh.enc(e);
                e.heap(name);
            }
            SetNamedAttr { fh, flags, name, value } => {
                fh.enc(e);
                e.u32(*flags);
                e.u32(0);
                e.heap(name);
                e.heap(value);
            }
            ListNamedAttr { fh } => fh.enc(e),
            Publish { open_id } => e.u64(*open_id),
            Mknod { dir, ftype, mode, rdev, name } => {
                dir.enc(e);
                e.u32(*ftype as u32);
                e.u32(*mode);
                e.u64(*rdev);
                e.heap(name);
            }
        }
    }

    pub(super) fn dec<'a>(op: Opcode, d: &mut Dec<'a>) -> Result<Request<'a>, DecodeError> {
        use Request::*;
        let name = |d: &mut Dec<'a>| -> Result<&'a [u8], DecodeError> {
            let n = d.heap_name(limits::NAME_BYTES_MAX)?;
            validate_name(n)?;
            Ok(n)
        };
        let r = match op {
            Opcode::Null => Null,
            Opcode::SessionDestroy => SessionDestroy,
            Opcode::ReclaimComplete => ReclaimComplete,
            Opcode::ClusterMap => ClusterMap,
            Opcode::SessionCreate => {
                let msg_size_bytes_max = d.u32()?;
                let slots = d.u32()?;
                let auth = AuthMethod::from_wire(d.u32()?)?;
                let flags = d.u32()?;
                if flags & !session_flags::ALL != 0 {
                    return Err(DecodeError::BadValue(BadValue::SessionFlags));
                }
                let client_id = d.heap(limits::CLIENT_ID_BYTES_MAX)?;
                SessionCreate { msg_size_bytes_max, slots, auth, flags, client_id }
            }
            Opcode::SessionAuth => SessionAuth { client_nonce: d.array()?, proof: d.array()? },
            Opcode::SessionBind => {
                let client_nonce = d.array()?;
                let proof = d.array()?;
                let client_id = d.heap(limits::CLIENT_ID_BYTES_MAX)?;
                SessionBind { client_nonce, proof, client_id }
            }
            Opcode::SetCred => {
                let uid = d.u32()?;
                let gid = d.u32()?;
                let groups = d.heap(limits::CRED_GROUPS_MAX * GROUP_ID_LEN)?;
                if !groups.len().is_multiple_of(GROUP_ID_LEN) {
                    return Err(DecodeError::BadValue(BadValue::GroupListLength));
                }
                SetCred { uid, gid, groups }
            }
            Opcode::GetRootHandle => {
                let export = d.heap_name(limits::PATH_BYTES_MAX)?;
                validate_path(export)?;
                GetRootHandle { export }
            }
            Opcode::Lookup => {
                let dir = FileHandle::dec(d)?;
                let follow = d.bool32()?;
                let _pad = d.u32()?;
                let path = d.heap_name(limits::PATH_BYTES_MAX)?;
                validate_path(path)?;
                if path.is_empty() {
                    return Err(DecodeError::BadValue(BadValue::EmptyLookupPath));
                }
                Lookup { dir, path, follow }
            }
            Opcode::LookupParent => LookupParent { fh: FileHandle::dec(d)? },
            Opcode::GetAttr => GetAttr { fh: FileHandle::dec(d)? },
            Opcode::ReadLink => ReadLink { fh: FileHandle::dec(d)? },
            Opcode::FsStat => FsStat { fh: FileHandle::dec(d)? },
            Opcode::SetAttr => SetAttr { fh: FileHandle::dec(d)?, set: SetAttrs::dec(d)? },
            Opcode::Access => {
                let fh = FileHandle::dec(d)?;
                let mask = d.u32()?;
                let _pad = d.u32()?;
                if mask & !access_mask::ALL != 0 {
                    return Err(DecodeError::BadValue(BadValue::AccessMask));
                }
                Access { fh, mask }
            }
            Opcode::Create => {
                let dir = FileHandle::dec(d)?;
                let ftype = FileType::from_wire(d.u32()?)?;
                if !matches!(ftype, FileType::Regular | FileType::Directory) {
                    return Err(DecodeError::BadValue(BadValue::CreateType));
                }
                let mode = d.u32()?;
                if mode & !MODE_PERMISSION_BITS != 0 {
                    return Err(DecodeError::BadValue(BadValue::ModeBits));
                }
                let exclusive = d.bool32()?;
                let _pad = d.u32()?;
                Create { dir, ftype, mode, exclusive, name: name(d)? }
            }
            Opcode::Open => {
                let fh = FileHandle::dec(d)?;
                let flags = d.u32()?;
                let mode = d.u32()?;
                if flags & !open_flags::ALL != 0
                    || flags & (open_flags::READ | open_flags::WRITE) == 0
                {
                    return Err(DecodeError::BadValue(BadValue::OpenFlags));
                }
                // A reclaim creates nothing: its `mode` is the open id it asks back.
                if mode & !MODE_PERMISSION_BITS != 0 && flags & open_flags::RECLAIM == 0 {
                    return Err(DecodeError::BadValue(BadValue::ModeBits));
                }
                if flags & open_flags::RECLAIM != 0
                    && flags
                        & (open_flags::CREATE
                            | open_flags::EXCLUSIVE
                            | open_flags::TRUNCATE
                            | open_flags::UNLINKED)
                        != 0
                {
                    return Err(DecodeError::BadValue(BadValue::ReclaimWithCreate));
                }
                let n = d.heap_name(limits::NAME_BYTES_MAX)?;
                if !n.is_empty() {
                    validate_name(n)?;
                } else if flags & open_flags::CREATE != 0 {
                    return Err(DecodeError::BadValue(BadValue::CreateWithoutName));
                }
                if flags & open_flags::UNLINKED != 0
                    && (flags & open_flags::CREATE == 0 || flags & open_flags::WRITE == 0)
                {
                    return Err(DecodeError::BadValue(BadValue::UnlinkedWithoutCreateWrite));
                }
                let key = d.heap(OPEN_KEY_BYTES_MAX)?;
                Open { fh, flags, mode, name: n, key }
            }
            Opcode::Close => Close { open_id: d.u64()? },
            Opcode::ReadInline => {
                let (open_id, offset, len) = (d.u64()?, d.u64()?, d.u32()?);
                let _pad = d.u32()?;
                ReadInline { open_id, offset, len }
            }
            Opcode::WriteInline => {
                let (open_id, offset, stable) = (d.u64()?, d.u64()?, d.bool32()?);
                let _pad = d.u32()?;
                WriteInline {
                    open_id,
                    offset,
                    stable,
                    data: d.heap(limits::MSG_SIZE_BYTES_MAX as usize)?,
                }
            }
            Opcode::ReadDirect => {
                let (open_id, offset, len) = (d.u64()?, d.u64()?, d.u32()?);
                let _pad = d.u32()?;
                let region = RemoteRegion { key: d.u64()?, offset: d.u64()? };
                if len > limits::DIRECT_BYTES_MAX {
                    return Err(DecodeError::BadValue(BadValue::DirectLength));
                }
                ReadDirect { open_id, offset, len, region }
            }
            Opcode::WriteDirect => {
                let (open_id, offset, len, stable) = (d.u64()?, d.u64()?, d.u32()?, d.bool32()?);
                let region = RemoteRegion { key: d.u64()?, offset: d.u64()? };
                if len > limits::DIRECT_BYTES_MAX {
                    return Err(DecodeError::BadValue(BadValue::DirectLength));
                }
                WriteDirect { open_id, offset, len, stable, region }
            }
            Opcode::ReadDir => ReadDir {
                dir: FileHandle::dec(d)?,
                cookie: d.u64()?,
                max_entries: d.u32()?,
                max_bytes: d.u32()?,
            },
            Opcode::Remove => Remove { dir: FileHandle::dec(d)?, name: name(d)? },
            Opcode::RmDir => RmDir { dir: FileHandle::dec(d)?, name: name(d)? },
            Opcode::Rename => {
                let from_dir = FileHandle::dec(d)?;
                let to_dir = FileHandle::dec(d)?;
                let (from_name, to_name) = (name(d)?, name(d)?);
                let flags = d.u32()?;
                let _pad = d.u32()?;
                if !rename_flags::valid(flags) {
                    return Err(DecodeError::BadValue(BadValue::RenameFlags));
                }
                Rename { from_dir, to_dir, from_name, to_name, flags }
            }
            Opcode::ClusterRename => {
                let from_dir = FileHandle::dec(d)?;
                let from_name = name(d)?;
                let to_path = d.heap_name(limits::PATH_BYTES_MAX)?;
                validate_path(to_path)?;
                if to_path.is_empty() {
                    return Err(DecodeError::BadValue(BadValue::EmptyLookupPath));
                }
                ClusterRename { from_dir, from_name, to_path }
            }
            Opcode::Link => {
                Link { fh: FileHandle::dec(d)?, dir: FileHandle::dec(d)?, name: name(d)? }
            }
            Opcode::Symlink => {
                let dir = FileHandle::dec(d)?;
                let n = name(d)?;
                let target = d.heap_name(limits::PATH_BYTES_MAX)?;
                if target.is_empty() || target.contains(&0) {
                    return Err(DecodeError::BadValue(BadValue::SymlinkTarget));
                }
                Symlink { dir, name: n, target }
            }
            Opcode::Commit => Commit { open_id: d.u64()?, offset: d.u64()?, len: d.u64()? },
            Opcode::BatchIo => {
                let (open_id, flags, count) = (d.u64()?, d.u32()?, d.u32()?);
                if flags & !batch_flags::ERRORS_ONLY != 0 {
                    return Err(DecodeError::BadValue(BadValue::BatchFlags));
                }
                if count == 0 || count > BATCH_MAX {
                    return Err(DecodeError::BadValue(BadValue::BatchCount));
                }
                let ios = d.heap(limits::MSG_SIZE_BYTES_MAX as usize)?;
                parse_batch(ios, count, limits::DIRECT_BYTES_MAX as u64)?;
                BatchIo { open_id, flags, count, ios }
            }
            Opcode::Chain => {
                let count = d.u32()?;
                let _pad = d.u32()?;
                let elements = d.heap(limits::MSG_SIZE_BYTES_MAX as usize)?;
                if count == 0 || count as usize > CHAIN_LEN_MAX {
                    return Err(DecodeError::BadValue(BadValue::ChainLength));
                }
                if unpack_messages(elements, CHAIN_LEN_MAX)?.len() != count as usize {
                    return Err(DecodeError::BadValue(BadValue::ChainCountMismatch));
                }
                Chain { count, elements }
            }
            Opcode::CacheHint => {
                let (open_id, offset, len, hint) = (d.u64()?, d.u64()?, d.u64()?, d.u32()?);
                let _pad = d.u32()?;
                if hint > cache_hint::NO_REUSE {
                    return Err(DecodeError::BadValue(BadValue::CacheHint));
                }
                CacheHint { open_id, offset, len, hint }
            }
            Opcode::Lock | Opcode::LockTest => {
                let (fh, offset, len, ltype) = (FileHandle::dec(d)?, d.u64()?, d.u64()?, d.u32()?);
                let flags = d.u32()?;
                if ltype != lock_type::SHARED && ltype != lock_type::EXCLUSIVE {
                    return Err(DecodeError::BadValue(BadValue::LockType));
                }
                // LOCKT's word is padding: it reclaims nothing.
                let allowed = if op == Opcode::Lock { lock_flags::ALL } else { 0 };
                if flags & !allowed != 0 {
                    return Err(DecodeError::BadValue(BadValue::LockFlags));
                }
                if op == Opcode::Lock {
                    Lock { fh, offset, len, ltype, flags }
                } else {
                    LockTest { fh, offset, len, ltype }
                }
            }
            Opcode::Unlock => Unlock { fh: FileHandle::dec(d)?, offset: d.u64()?, len: d.u64()? },
            Opcode::GetNamedAttr | Opcode::RemoveNamedAttr => {
                let fh = FileHandle::dec(d)?;
                let name = d.heap(NATTR_NAME_BYTES_MAX)?;
                validate_nattr_name(name)?;
                if op == Opcode::GetNamedAttr {
                    GetNamedAttr { fh, name }
                } else {
                    RemoveNamedAttr { fh, name }
                }
            }
            Opcode::SetNamedAttr => {
                let fh = FileHandle::dec(d)?;
                let flags = d.u32()?;
                let _pad = d.u32()?;
                if flags & !(nattr_flags::CREATE | nattr_flags::REPLACE) != 0
                    || flags == nattr_flags::CREATE | nattr_flags::REPLACE
                {
                    return Err(DecodeError::BadValue(BadValue::NamedAttrFlags));
                }
                let name = d.heap(NATTR_NAME_BYTES_MAX)?;
                validate_nattr_name(name)?;
                SetNamedAttr { fh, flags, name, value: d.heap(NATTR_VALUE_BYTES_MAX)? }
            }
            Opcode::ListNamedAttr => ListNamedAttr { fh: FileHandle::dec(d)? },
            Opcode::Publish => Publish { open_id: d.u64()? },
            Opcode::Mknod => {
                let dir = FileHandle::dec(d)?;
                let ftype = FileType::from_wire(d.u32()?)?;
                if !matches!(
                    ftype,
                    FileType::CharDevice
                        | FileType::BlockDevice
                        | FileType::Fifo
                        | FileType::Socket
                ) {
                    return Err(DecodeError::BadValue(BadValue::MknodType));
                }
                let mode = d.u32()?;
                if mode & !MODE_PERMISSION_BITS != 0 {
                    return Err(DecodeError::BadValue(BadValue::ModeBits));
                }
                let rdev = d.u64()?;
                if rdev != 0 && !matches!(ftype, FileType::CharDevice | FileType::BlockDevice) {
                    return Err(DecodeError::BadValue(BadValue::MknodRdev));
                }
                Mknod { dir, ftype, mode, rdev, name: name(d)? }
            }
            op if op.is_reserved() => return Ok(Reserved(op)),
            _ => return Err(DecodeError::UnknownOpcode(op.to_wire())),
        };
        Ok(r)
    }
}
