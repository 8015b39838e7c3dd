//! Requests and replies: one variant per op (replies grouped by body shape), with
//! encode/decode. The byte layout of every fixed part is listed in `docs/protocol.md`.

use crate::codec::{BadValue, Dec, DecodeError, Enc, EncodeError, Frame};
use crate::header::Header;
use crate::limits;
use crate::status::{Opcode, Status};
use crate::types::*;

/// Size of nonces and proofs in the authentication exchange.
pub const NONCE_LEN: usize = 32;
/// Size of one group id in SET_CRED's packed group list (a little-endian u32).
pub const GROUP_ID_LEN: usize = std::mem::size_of::<u32>();

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
            Reserved(op) => *op,
        }
    }

    fn enc<'a>(&'a self, e: &mut Enc<'a, '_>) {
        use Request::*;
        match self {
            Null | SessionDestroy | ReclaimComplete | Reserved(_) => {}
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

    fn dec<'a>(op: Opcode, d: &mut Dec<'a>) -> Result<Request<'a>, DecodeError> {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// Any op whose reply status is not `Ok`: no body.
    Error(Status),
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
}

fn shape_of(op: Opcode) -> Shape {
    use Opcode::*;
    match op {
        Null | SessionDestroy | SetCred | ReclaimComplete | Close | Remove | RmDir | Rename
        | Commit | CacheHint | Lock | Unlock | SetNamedAttr | RemoveNamedAttr => Shape::Empty,
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
        // Reserved ops only ever answer with an error status.
        _ => Shape::Empty,
    }
}

impl Reply<'_> {
    fn shape(&self) -> Option<Shape> {
        Some(match self {
            Reply::Error(_) => return None,
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
            _ => Status::Ok,
        }
    }

    fn enc<'a>(&'a self, e: &mut Enc<'a, '_>) {
        match self {
            Reply::Error(_) | Reply::Empty => {}
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

    fn dec<'a>(op: Opcode, d: &mut Dec<'a>) -> Result<Reply<'a>, DecodeError> {
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

/// Encode a request (appending to `buf`). `h.opcode` must match the request.
pub fn encode_request(
    h: &Header,
    req: &Request,
    buf: &mut Vec<u8>,
    max_len: usize,
) -> Result<usize, EncodeError> {
    assert_eq!(h.opcode, req.opcode(), "header opcode must match the request");
    assert!(!h.is_reply);
    let mut e = Enc::new(buf);
    req.enc(&mut e);
    e.finish(h, max_len)
}

/// Encode a reply (appending to `buf`). A `Reply::Error` forces the status into the header.
pub fn encode_reply(
    h: &Header,
    reply: &Reply,
    buf: &mut Vec<u8>,
    max_len: usize,
) -> Result<usize, EncodeError> {
    assert!(h.is_reply);
    assert!(reply.fits(h.opcode), "reply body {reply:?} does not fit op {:?}", h.opcode);
    let mut h = *h;
    h.status = reply.status();
    let mut e = Enc::new(buf);
    reply.enc(&mut e);
    e.finish(&h, max_len)
}

/// Decode one complete request message.
///
/// On a decode error after the header was understood, the header is returned with the
/// error so the server can still answer that slot with `BADXDR`.
pub fn decode_request(
    buf: &[u8],
    max_len: usize,
) -> Result<(Header, Request<'_>), (Option<Header>, DecodeError)> {
    let frame = Frame::split(buf, max_len).map_err(|e| (None, e))?;
    let h = frame.raw.validate().map_err(|e| (None, e))?;
    if h.is_reply {
        return Err((None, DecodeError::NotARequest));
    }
    let mut d = Dec::new(frame.fixed, frame.heap);
    let req = Request::dec(h.opcode, &mut d).map_err(|e| (Some(h), e))?;
    if !matches!(req, Request::Reserved(_)) {
        d.end().map_err(|e| (Some(h), e))?;
    }
    Ok((h, req))
}

/// Decode one complete reply message.
pub fn decode_reply(buf: &[u8], max_len: usize) -> Result<(Header, Reply<'_>), DecodeError> {
    let frame = Frame::split(buf, max_len)?;
    let h = frame.raw.validate()?;
    if !h.is_reply {
        return Err(DecodeError::NotAReply);
    }
    if h.status != Status::Ok {
        if !frame.fixed.is_empty() || !frame.heap.is_empty() {
            return Err(DecodeError::Trailing);
        }
        return Ok((h, Reply::Error(h.status)));
    }
    if h.opcode.is_reserved() {
        return Err(DecodeError::BadValue(BadValue::SuccessReplyToReservedOp));
    }
    let mut d = Dec::new(frame.fixed, frame.heap);
    let r = Reply::dec(h.opcode, &mut d)?;
    d.end()?;
    Ok((h, r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::HEADER_LEN;

    const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;

    fn fh(b: u8) -> FileHandle {
        FileHandle([b; 32])
    }
    fn attr() -> Attr {
        Attr {
            ftype: FileType::Regular,
            mode: 0o644,
            nlink: 1,
            uid: 1000,
            gid: 1000,
            size: 12345,
            used: 16384,
            fileid: 77,
            fsid: 3,
            rdev: 0,
            atime_ns: 1,
            mtime_ns: -2,
            ctime_ns: 3,
        }
    }

    pub(crate) fn sample_requests() -> Vec<Request<'static>> {
        let region = RemoteRegion { key: 0xdead_beef, offset: 4096 };
        vec![
            Request::Null,
            Request::SessionCreate {
                msg_size_bytes_max: 65536,
                slots: 16,
                auth: AuthMethod::HmacSha256,
                flags: session_flags::RECLAIM,
                client_id: b"host:42",
            },
            Request::SessionAuth { client_nonce: [1; 32], proof: [2; 32] },
            Request::SessionDestroy,
            Request::GetRootHandle { export: b"" },
            Request::Lookup { dir: fh(1), path: b"a/b/c.txt", follow: true },
            Request::LookupParent { fh: fh(2) },
            Request::GetAttr { fh: fh(3) },
            Request::SetAttr {
                fh: fh(4),
                set: SetAttrs {
                    mask: setattr_mask::SIZE | setattr_mask::MODE,
                    mode: 0o600,
                    size: 1 << 40,
                    ..Default::default()
                },
            },
            Request::Access { fh: fh(5), mask: access_mask::READ | access_mask::WRITE },
            Request::Create {
                dir: fh(6),
                ftype: FileType::Directory,
                mode: 0o755,
                exclusive: true,
                name: b"d",
            },
            Request::Open {
                fh: fh(7),
                flags: open_flags::READ | open_flags::WRITE | open_flags::CREATE,
                mode: 0o644,
                name: b"f",
                key: b"",
            },
            Request::Open {
                fh: fh(7),
                flags: open_flags::WRITE
                    | open_flags::CREATE
                    | open_flags::UNLINKED
                    | open_flags::DENY_WRITE,
                mode: 0o600,
                name: b"g",
                key: b"secret-key",
            },
            Request::Close { open_id: 9 },
            Request::ReadInline { open_id: 9, offset: 1 << 33, len: 4096 },
            Request::WriteInline { open_id: 9, offset: 10, stable: true, data: b"hello" },
            Request::ReadDirect { open_id: 9, offset: 0, len: 1 << 20, region },
            Request::WriteDirect { open_id: 9, offset: 5, len: 1 << 20, stable: false, region },
            Request::ReadDir { dir: fh(8), cookie: 123, max_entries: 100, max_bytes: 65536 },
            Request::Remove { dir: fh(8), name: b"x" },
            Request::RmDir { dir: fh(8), name: b"y" },
            Request::Rename {
                from_dir: fh(8),
                from_name: b"a",
                to_dir: fh(9),
                to_name: b"b",
                flags: 0,
            },
            Request::Rename {
                from_dir: fh(8),
                from_name: b"a",
                to_dir: fh(8),
                to_name: b"c",
                flags: rename_flags::NOREPLACE,
            },
            Request::Rename {
                from_dir: fh(9),
                from_name: b"d",
                to_dir: fh(8),
                to_name: b"e",
                flags: rename_flags::EXCHANGE,
            },
            Request::Link { fh: fh(1), dir: fh(2), name: b"hard" },
            Request::Symlink { dir: fh(1), name: b"sym", target: b"../target" },
            Request::ReadLink { fh: fh(1) },
            Request::Commit { open_id: 1, offset: 0, len: 0 },
            Request::FsStat { fh: fh(1) },
            Request::CacheHint { open_id: 3, offset: 0, len: 0, hint: cache_hint::SEQUENTIAL },
            Request::Lock {
                fh: fh(2),
                offset: 10,
                len: 0,
                ltype: lock_type::EXCLUSIVE,
                flags: lock_flags::RECLAIM,
            },
            Request::LockTest { fh: fh(2), offset: u64::MAX - 5, len: 5, ltype: lock_type::SHARED },
            Request::Unlock { fh: fh(2), offset: 0, len: 100 },
            Request::GetNamedAttr { fh: fh(1), name: b"color" },
            Request::SetNamedAttr {
                fh: fh(1),
                flags: nattr_flags::CREATE,
                name: b"color",
                value: b"blue",
            },
            Request::ListNamedAttr { fh: fh(1) },
            Request::RemoveNamedAttr { fh: fh(1), name: b"color" },
            Request::Publish { open_id: 12 },
            Request::ReclaimComplete,
            Request::Mknod {
                dir: fh(1),
                ftype: FileType::CharDevice,
                mode: 0o620,
                rdev: 0x0105,
                name: b"tty5",
            },
            Request::SessionBind { client_nonce: [3; 32], proof: [4; 32], client_id: b"host:42" },
            Request::SetCred { uid: 1000, gid: 100, groups: &[1, 0, 0, 0, 2, 0, 0, 0] },
            Request::Reserved(Opcode::Callback),
        ]
    }

    #[test]
    fn every_request_roundtrips() {
        let mut buf = Vec::new();
        for (i, req) in sample_requests().iter().enumerate() {
            buf.clear();
            let h = Header::request(req.opcode(), 77, i as u32, 5, 15);
            let n = encode_request(&h, req, &mut buf, MAX).unwrap();
            assert_eq!(n, buf.len());
            let (h2, r2) = decode_request(&buf, MAX).unwrap();
            assert_eq!(h2, h);
            assert_eq!(&r2, req);
        }
    }

    #[test]
    fn every_reply_roundtrips() {
        let mut entries = Vec::new();
        DirEntry { cookie: 1, fileid: 2, ftype: FileType::Regular, name: b"one" }
            .pack(&mut entries);
        DirEntry { cookie: 2, fileid: 3, ftype: FileType::Directory, name: b"two-longer-name" }
            .pack(&mut entries);
        let cases: Vec<(Opcode, Reply)> = vec![
            (Opcode::Null, Reply::Empty),
            (Opcode::Close, Reply::Empty),
            (
                Opcode::SessionCreate,
                Reply::SessionCreate {
                    msg_size_bytes_max: 1 << 16,
                    slots: 8,
                    inline_threshold: 8192,
                    auth: AuthMethod::None,
                    server_nonce: [7; 32],
                    direct_bytes_max: 1 << 24,
                    batch_max: 64,
                    host_id: [9; 16],
                    shm_path: b"/run/dafs.sock",
                    boot_verifier: 0x1234_5678_9abc_def0,
                    grace_ms: 90_000,
                    session_token: [5; 32],
                },
            ),
            (Opcode::SessionAuth, Reply::SessionAuth { server_proof: [3; 32] }),
            (Opcode::Lookup, Reply::Handle { fh: fh(1), attr: attr() }),
            (Opcode::GetAttr, Reply::Attr { attr: attr() }),
            (Opcode::Access, Reply::Access { granted: 5 }),
            (Opcode::Open, Reply::Open { open_id: 99, fh: fh(2), attr: attr() }),
            (Opcode::ReadInline, Reply::ReadInline { eof: true, data: b"data" }),
            (Opcode::WriteDirect, Reply::Write { count: 100, stable: true, offset: 1 << 40 }),
            (
                Opcode::LockTest,
                Reply::LockTest { conflict: true, ltype: 2, owner: 77, offset: 5, len: 0 },
            ),
            (Opcode::GetNamedAttr, Reply::NamedAttr { value: b"v" }),
            (Opcode::ListNamedAttr, Reply::NamedAttrList { names: b"a\0b" }),
            (Opcode::Publish, Reply::Handle { fh: fh(4), attr: attr() }),
            (Opcode::ReadDirect, Reply::ReadDirect { count: 100, eof: false }),
            (Opcode::ReadDir, Reply::ReadDir { eof: false, count: 2, entries: &entries }),
            (Opcode::ReadLink, Reply::ReadLink { target: b"x/y" }),
            (
                Opcode::FsStat,
                Reply::FsStat(FsStat {
                    total_bytes: 1,
                    free_bytes: 2,
                    avail_bytes: 3,
                    total_files: 4,
                    free_files: 5,
                    block_size: 4096,
                    name_max: 255,
                }),
            ),
            (Opcode::Lookup, Reply::Error(Status::NoEnt)),
            (Opcode::Callback, Reply::Error(Status::NotSupp)),
            (
                Opcode::SessionBind,
                Reply::SessionBind {
                    slots: 16,
                    target_highest: 7,
                    next_nonce: [5; 32],
                    server_proof: [6; 32],
                },
            ),
            (Opcode::SetCred, Reply::Empty),
            (Opcode::Lock, Reply::Error(Status::Denied)),
        ];
        let mut buf = Vec::new();
        for (op, reply) in cases {
            buf.clear();
            let req_h = Header::request(op, 1, 2, 3, 4);
            let h = Header::reply_to(&req_h, Status::Ok, 31);
            encode_reply(&h, &reply, &mut buf, MAX).unwrap();
            let (h2, r2) = decode_reply(&buf, MAX).unwrap();
            assert_eq!(h2.status, reply.status());
            assert_eq!(h2.highest_slot, 31);
            assert_eq!(r2, reply, "op {op:?}");
        }
    }

    #[test]
    fn bad_names_and_paths_are_refused() {
        let mut buf = Vec::new();
        for bad in [&b""[..], b".", b"..", b"a/b", b"a\0b", &[b'x'; 256]] {
            buf.clear();
            let req = Request::Remove { dir: fh(1), name: bad };
            let h = Header::request(Opcode::Remove, 1, 0, 1, 0);
            encode_request(&h, &req, &mut buf, MAX).unwrap();
            let err = decode_request(&buf, MAX).unwrap_err();
            assert!(err.0.is_some(), "header is still reported for {bad:?}");
        }
        buf.clear();
        let req = Request::Lookup { dir: fh(1), path: b"/etc/passwd", follow: false };
        encode_request(&Header::request(Opcode::Lookup, 1, 0, 1, 0), &req, &mut buf, MAX).unwrap();
        assert!(decode_request(&buf, MAX).is_err());
    }

    #[test]
    fn too_big_is_refused_on_both_sides() {
        let mut buf = vec![];
        let data = vec![0u8; 10_000];
        let req = Request::WriteInline { open_id: 1, offset: 0, stable: false, data: &data };
        let h = Header::request(Opcode::WriteInline, 1, 0, 1, 0);
        assert!(matches!(
            encode_request(&h, &req, &mut buf, 8192),
            Err(EncodeError::TooBig { .. })
        ));
        assert!(buf.is_empty(), "a failed encode leaves the buffer as it was");
        encode_request(&h, &req, &mut buf, MAX).unwrap();
        assert!(matches!(decode_request(&buf, 8192), Err((None, DecodeError::TooBig(_)))));
    }

    #[test]
    fn truncations_never_panic_and_always_fail() {
        let mut buf = Vec::new();
        for req in sample_requests() {
            buf.clear();
            encode_request(&Header::request(req.opcode(), 1, 0, 1, 0), &req, &mut buf, MAX)
                .unwrap();
            for cut in 0..buf.len() {
                assert!(decode_request(&buf[..cut], MAX).is_err());
            }
        }
    }

    #[test]
    fn header_reserved_and_direction() {
        let mut buf = Vec::new();
        encode_request(&Header::request(Opcode::Null, 0, 0, 0, 0), &Request::Null, &mut buf, MAX)
            .unwrap();
        assert_eq!(buf.len(), HEADER_LEN);
        let mut bad = buf.clone();
        bad[44] = 1;
        assert!(decode_request(&bad, MAX).is_err());
        assert!(decode_reply(&buf, MAX).is_err(), "a request is not a reply");
        let mut bad = buf.clone();
        bad[6] = 9; // opcode 9 is undefined
        assert_eq!(decode_request(&bad, MAX).unwrap_err().1, DecodeError::UnknownOpcode(9));
    }
}
