//! What the decoder property tests (`decode_fuzz.rs`) are built from: the spec tables of
//! fixed-part lengths (docs/protocol.md), owned random material (`Parts`, `Hdr`) and the
//! builders that turn it into every kind of request and reply.
#![allow(dead_code)]

use dafs_proto::*;
use proptest::collection::vec;
use proptest::prelude::*;

pub const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;
/// Re-encoding a decoded message compacts its heap, but heap fields that overlapped on
/// the wire are written out separately, so a re-encoding may be a little longer than the
/// original (by at most one name). It never needs more than this slack.
pub const REENCODE_MAX: usize = MAX + 2 * limits::PATH_BYTES_MAX;

// ---------------------------------------------------------------------------------------
// Spec tables (docs/protocol.md): fixed-part length of every request and success reply.
// ---------------------------------------------------------------------------------------

pub const REQ_FIXED_LEN: &[(Opcode, usize)] = &[
    (Opcode::Null, 0),
    (Opcode::SessionCreate, 24),
    (Opcode::SessionAuth, 64),
    (Opcode::SessionBind, 72),
    (Opcode::SetCred, 16),
    (Opcode::SessionDestroy, 0),
    (Opcode::GetRootHandle, 8),
    (Opcode::Lookup, 56),
    (Opcode::LookupParent, 40),
    (Opcode::GetAttr, 40),
    (Opcode::SetAttr, 80),
    (Opcode::Access, 48),
    (Opcode::Create, 64),
    (Opcode::Open, 64),
    (Opcode::Close, 8),
    (Opcode::ReadInline, 24),
    (Opcode::WriteInline, 32),
    (Opcode::ReadDirect, 40),
    (Opcode::WriteDirect, 40),
    (Opcode::ReadDir, 56),
    (Opcode::Remove, 48),
    (Opcode::RmDir, 48),
    (Opcode::Rename, 104),
    (Opcode::Link, 88),
    (Opcode::Symlink, 56),
    (Opcode::ReadLink, 40),
    (Opcode::Commit, 24),
    (Opcode::FsStat, 40),
    (Opcode::BatchIo, 24),
    (Opcode::Chain, 16),
    (Opcode::CacheHint, 32),
    (Opcode::Lock, 64),
    (Opcode::LockTest, 64),
    (Opcode::Unlock, 56),
    (Opcode::GetNamedAttr, 48),
    (Opcode::SetNamedAttr, 64),
    (Opcode::ListNamedAttr, 40),
    (Opcode::RemoveNamedAttr, 48),
    (Opcode::Publish, 8),
    (Opcode::ReclaimComplete, 0),
    (Opcode::Mknod, 64),
    (Opcode::ClusterMap, 0),
];

pub const REPLY_FIXED_LEN: &[(Opcode, usize)] = &[
    (Opcode::Null, 0),
    (Opcode::SessionCreate, 128),
    (Opcode::SessionAuth, 32),
    (Opcode::SessionBind, 72),
    (Opcode::SetCred, 0),
    (Opcode::SessionDestroy, 0),
    (Opcode::GetRootHandle, 128),
    (Opcode::Lookup, 128),
    (Opcode::LookupParent, 128),
    (Opcode::GetAttr, 88),
    (Opcode::SetAttr, 88),
    (Opcode::Access, 8),
    (Opcode::Create, 128),
    (Opcode::Open, 136),
    (Opcode::Close, 0),
    (Opcode::ReadInline, 16),
    (Opcode::WriteInline, 16),
    (Opcode::ReadDirect, 8),
    (Opcode::WriteDirect, 16),
    (Opcode::ReadDir, 16),
    (Opcode::Remove, 0),
    (Opcode::RmDir, 0),
    (Opcode::Rename, 0),
    (Opcode::Link, 88),
    (Opcode::Symlink, 128),
    (Opcode::ReadLink, 8),
    (Opcode::Commit, 0),
    (Opcode::FsStat, 48),
    (Opcode::BatchIo, 16),
    (Opcode::Chain, 16),
    (Opcode::CacheHint, 0),
    (Opcode::Lock, 0),
    (Opcode::LockTest, 32),
    (Opcode::Unlock, 0),
    (Opcode::GetNamedAttr, 8),
    (Opcode::SetNamedAttr, 0),
    (Opcode::ListNamedAttr, 8),
    (Opcode::RemoveNamedAttr, 0),
    (Opcode::Publish, 128),
    (Opcode::ReclaimComplete, 0),
    (Opcode::Mknod, 128),
    (Opcode::ClusterMap, 24),
];

pub const RESERVED: &[Opcode] = &[Opcode::Callback];

pub const FTYPES: &[FileType] = &[
    FileType::Regular,
    FileType::Directory,
    FileType::Symlink,
    FileType::CharDevice,
    FileType::BlockDevice,
    FileType::Fifo,
    FileType::Socket,
];

// ---------------------------------------------------------------------------------------
// Owned random material from which requests and replies (which borrow) are built.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct Parts {
    pub kind: usize,
    pub fh1: [u8; FileHandle::LEN],
    pub fh2: [u8; FileHandle::LEN],
    pub nonce1: [u8; 32],
    pub nonce2: [u8; 32],
    pub a: u64,
    pub b: u64,
    pub c: u64,
    pub x: u32,
    pub y: u32,
    pub flag: bool,
    pub name1: Vec<u8>,
    pub name2: Vec<u8>,
    /// A valid relative path (may be empty).
    pub path: Vec<u8>,
    /// A valid symlink target: non-empty, no NUL, may be absolute.
    pub target: Vec<u8>,
    pub data: Vec<u8>,
    pub entries: Vec<u8>,
    pub entries_count: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct Hdr {
    pub session_id: u64,
    pub slot_id: u32,
    pub sequence_id: u32,
    pub highest_slot: u32,
    pub target_highest: u32,
}

pub fn hdr() -> impl Strategy<Value = Hdr> {
    (any::<u64>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
        |(session_id, slot_id, sequence_id, highest_slot, target_highest)| Hdr {
            session_id,
            slot_id,
            sequence_id,
            highest_slot,
            target_highest,
        },
    )
}

/// One byte of a valid name: anything but `/` and NUL.
pub fn name_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        4 => prop::sample::select(&b"abcxyz-_.~ 0123456789"[..]),
        1 => (1u8..=255).prop_filter("no slash", |b| *b != b'/'),
    ]
}

/// A valid single path component: 1..=255 bytes, no `/` or NUL, not `.` or `..`.
pub fn valid_name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => vec(name_byte(), 1..24),
        1 => vec(name_byte(), 240..=limits::NAME_BYTES_MAX),
    ]
    .prop_filter("not . or ..", |n| n.as_slice() != b"." && n.as_slice() != b"..")
}

/// A valid relative path: components (possibly empty, `.` or `..`) joined by `/`.
pub fn valid_path() -> impl Strategy<Value = Vec<u8>> {
    let comp = prop_oneof![
        6 => vec(name_byte(), 0..12),
        1 => Just(b"..".to_vec()),
        1 => Just(b".".to_vec()),
        1 => vec(name_byte(), limits::NAME_BYTES_MAX..=limits::NAME_BYTES_MAX),
    ];
    vec(comp, 0..6).prop_map(|comps| {
        let mut p = comps.join(&b'/');
        if p.first() == Some(&b'/') {
            p.insert(0, b'a');
        }
        p
    })
}

pub fn valid_target() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), valid_path()).prop_map(|(abs, p)| {
        let mut t = if abs { b"/".to_vec() } else { Vec::new() };
        t.extend_from_slice(&p);
        if t.is_empty() {
            t.push(b't');
        }
        t
    })
}

pub fn dir_entries() -> impl Strategy<Value = (Vec<u8>, u32)> {
    vec((any::<u64>(), any::<u64>(), 0..FTYPES.len(), valid_name()), 0..6).prop_map(|ents| {
        let mut packed = Vec::new();
        for (cookie, fileid, t, name) in &ents {
            DirEntry { cookie: *cookie, fileid: *fileid, ftype: FTYPES[*t], name }
                .pack(&mut packed);
        }
        (packed, ents.len() as u32)
    })
}

pub fn parts() -> impl Strategy<Value = Parts> {
    (
        (any::<usize>(), fh_bytes(), fh_bytes(), any::<[u8; 32]>(), any::<[u8; 32]>()),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>(), any::<bool>()),
        (
            valid_name(),
            valid_name(),
            valid_path(),
            valid_target(),
            vec(any::<u8>(), 0..300),
            dir_entries(),
        ),
    )
        .prop_map(
            |(
                (kind, fh1, fh2, nonce1, nonce2),
                (a, b, c, x, y, flag),
                (name1, name2, path, target, data, (entries, entries_count)),
            )| Parts {
                kind,
                fh1,
                fh2,
                nonce1,
                nonce2,
                a,
                b,
                c,
                x,
                y,
                flag,
                name1,
                name2,
                path,
                target,
                data,
                entries,
                entries_count,
            },
        )
}

/// Random bytes of one file handle.
pub fn fh_bytes() -> impl Strategy<Value = [u8; FileHandle::LEN]> {
    proptest::array::uniform::<_, { FileHandle::LEN }>(any::<u8>())
}

pub const REQUEST_KINDS: usize = 43;

/// A valid request of kind `p.kind % REQUEST_KINDS` (every opcode, reserved ones as one kind).
pub fn build_request(p: &Parts) -> Request<'_> {
    let (fh1, fh2) = (FileHandle(p.fh1), FileHandle(p.fh2));
    let region = RemoteRegion { key: p.b, offset: p.c };
    let direct_len = p.y % (limits::DIRECT_BYTES_MAX + 1);
    match p.kind % REQUEST_KINDS {
        0 => Request::Null,
        1 => Request::SessionCreate {
            msg_size_bytes_max: p.x,
            slots: p.y,
            auth: if p.flag { AuthMethod::HmacSha256 } else { AuthMethod::None },
            flags: p.a as u32 & session_flags::ALL,
            client_id: &p.data[..p.data.len().min(limits::CLIENT_ID_BYTES_MAX)],
        },
        2 => Request::SessionAuth { client_nonce: p.nonce1, proof: p.nonce2 },
        3 => Request::SessionDestroy,
        4 => Request::GetRootHandle { export: &p.path },
        5 => Request::Lookup {
            dir: fh1,
            path: if p.path.is_empty() { b"." } else { &p.path },
            follow: p.flag,
        },
        6 => Request::LookupParent { fh: fh1 },
        7 => Request::GetAttr { fh: fh1 },
        8 => Request::SetAttr { fh: fh1, set: valid_setattrs(p) },
        9 => Request::Access { fh: fh1, mask: p.x & access_mask::ALL },
        10 => Request::Create {
            dir: fh1,
            ftype: if p.x & 1 == 0 { FileType::Regular } else { FileType::Directory },
            mode: p.y & 0o7777,
            exclusive: p.flag,
            name: &p.name1,
        },
        11 => {
            let mut flags = p.x & open_flags::ALL;
            if flags & (open_flags::READ | open_flags::WRITE) == 0 {
                flags |= open_flags::READ;
            }
            let name: &[u8] = if p.flag { &p.name1 } else { b"" };
            if name.is_empty() {
                flags &= !open_flags::CREATE;
            }
            if name.is_empty() || flags & open_flags::WRITE == 0 {
                flags &= !open_flags::UNLINKED;
            }
            if flags & open_flags::UNLINKED != 0 {
                flags |= open_flags::CREATE;
            }
            let creating = open_flags::CREATE
                | open_flags::EXCLUSIVE
                | open_flags::TRUNCATE
                | open_flags::UNLINKED;
            if flags & creating != 0 {
                flags &= !open_flags::RECLAIM;
            }
            let key: &[u8] = &p.data[..p.data.len().min(OPEN_KEY_BYTES_MAX)];
            Request::Open { fh: fh1, flags, mode: p.y & 0o7777, name, key }
        }
        12 => Request::Close { open_id: p.a },
        13 => Request::ReadInline { open_id: p.a, offset: p.b, len: p.x },
        14 => Request::WriteInline { open_id: p.a, offset: p.b, stable: p.flag, data: &p.data },
        15 => Request::ReadDirect { open_id: p.a, offset: p.b, len: direct_len, region },
        16 => Request::WriteDirect {
            open_id: p.a,
            offset: p.a ^ p.c,
            len: direct_len,
            stable: p.flag,
            region,
        },
        17 => Request::ReadDir { dir: fh1, cookie: p.a, max_entries: p.x, max_bytes: p.y },
        18 => Request::Remove { dir: fh1, name: &p.name1 },
        19 => Request::RmDir { dir: fh1, name: &p.name1 },
        20 => Request::Rename {
            from_dir: fh1,
            from_name: &p.name1,
            to_dir: fh2,
            to_name: &p.name2,
            flags: p.x % 3,
        },
        21 => Request::Link { fh: fh1, dir: fh2, name: &p.name1 },
        22 => Request::Symlink { dir: fh1, name: &p.name1, target: &p.target },
        23 => Request::ReadLink { fh: fh1 },
        24 => Request::Commit { open_id: p.a, offset: p.b, len: p.c },
        25 => Request::FsStat { fh: fh1 },
        26 => Request::CacheHint { open_id: p.a, offset: p.b, len: p.c, hint: p.x % 6 },
        27 => Request::Lock {
            fh: fh1,
            offset: p.b,
            len: p.c,
            ltype: 1 + (p.x & 1),
            flags: p.y & lock_flags::ALL,
        },
        28 => Request::LockTest { fh: fh1, offset: p.b, len: p.c, ltype: 1 + (p.y & 1) },
        29 => Request::Unlock { fh: fh1, offset: p.a, len: p.b },
        30 => Request::GetNamedAttr { fh: fh1, name: b"user-attr.1" },
        31 => Request::SetNamedAttr {
            fh: fh1,
            flags: p.x % 3,
            name: b"k",
            value: &p.data[..p.data.len().min(NATTR_VALUE_BYTES_MAX)],
        },
        32 => Request::ListNamedAttr { fh: fh1 },
        33 => Request::RemoveNamedAttr { fh: fh1, name: b"zz" },
        34 => Request::Publish { open_id: p.a },
        35 => {
            // A valid batch of 1..=3 I/Os with split file and memory segments.
            let n = 1 + p.x % 3;
            let mut packed = Vec::new();
            for i in 0..n {
                let len = (p.b % 100_000) + 1;
                BatchIo {
                    write: (p.y + i).is_multiple_of(2),
                    file: vec![(p.a % (1 << 40), len)],
                    mem: vec![
                        (RemoteRegion { key: p.c ^ i as u64, offset: 0 }, len / 2),
                        (RemoteRegion { key: p.c, offset: 4096 }, len - len / 2),
                    ],
                }
                .pack(&mut packed);
            }
            Request::BatchIo {
                open_id: p.a,
                flags: p.y & batch_flags::ERRORS_ONLY,
                count: n,
                ios: Box::leak(packed.into_boxed_slice()),
            }
        }
        36 => {
            // A chain of a few complete, valid requests.
            let mut elems: Vec<Vec<u8>> = Vec::new();
            for (i, r) in [
                Request::Null,
                Request::GetAttr { fh: CURRENT_FH },
                Request::Close { open_id: CURRENT_OPEN_ID },
            ]
            .iter()
            .enumerate()
            .take(1 + p.x as usize % 3)
            {
                let mut b = Vec::new();
                encode_request(&Header::request(r.opcode(), 0, i as u32, 0, 0), r, &mut b, MAX)
                    .unwrap();
                elems.push(b);
            }
            let mut packed = Vec::new();
            pack_messages(elems.iter().map(|v| v.as_slice()), &mut packed);
            Request::Chain {
                count: elems.len() as u32,
                elements: Box::leak(packed.into_boxed_slice()),
            }
        }
        37 => Request::SessionBind {
            client_nonce: p.nonce1,
            proof: p.nonce2,
            client_id: &p.data[..p.data.len().min(limits::CLIENT_ID_BYTES_MAX)],
        },
        38 => Request::SetCred { uid: p.x, gid: p.y, groups: &p.fh1[..4 * (p.x as usize % 9)] },
        39 => Request::ReclaimComplete,
        40 => {
            let ftype =
                [FileType::Fifo, FileType::Socket, FileType::CharDevice, FileType::BlockDevice]
                    [p.x as usize % 4];
            let device = matches!(ftype, FileType::CharDevice | FileType::BlockDevice);
            Request::Mknod {
                dir: fh1,
                ftype,
                mode: p.y & 0o7777,
                rdev: if device { p.b } else { 0 },
                name: b"node",
            }
        }
        41 => Request::ClusterMap,
        _ => Request::Reserved(RESERVED[p.x as usize % RESERVED.len()]),
    }
}

/// SETATTR values that decode: known mask bits, never both a time and its time-now bit,
/// and a mode within 0o7777 when the mode is set (otherwise the mode field is free).
pub fn valid_setattrs(p: &Parts) -> SetAttrs {
    use setattr_mask::*;
    let mut mask = p.x & ALL;
    if mask & ATIME != 0 {
        mask &= !ATIME_NOW;
    }
    if mask & MTIME != 0 {
        mask &= !MTIME_NOW;
    }
    let mode = if mask & MODE != 0 { p.y & 0o7777 } else { p.y };
    SetAttrs {
        mask,
        mode,
        uid: p.y.rotate_left(7),
        gid: p.x.rotate_left(3),
        size: p.a,
        atime_ns: p.b as i64,
        mtime_ns: p.c as i64,
    }
}

pub fn attr_of(p: &Parts) -> Attr {
    Attr {
        ftype: FTYPES[p.x as usize % FTYPES.len()],
        mode: p.y & 0o7777,
        nlink: p.x,
        uid: p.y,
        gid: p.x ^ p.y,
        size: p.a,
        used: p.b,
        fileid: p.c,
        fsid: p.a ^ p.b,
        rdev: p.b ^ p.c,
        atime_ns: p.a as i64,
        mtime_ns: p.b as i64,
        ctime_ns: p.c as i64,
    }
}

pub const REPLY_KINDS: usize = 21;

/// A valid (op, reply) pair of kind `p.kind % REPLY_KINDS`.
pub fn build_reply(p: &Parts) -> (Opcode, Reply<'_>) {
    use Opcode as O;
    let pick = |ops: &[Opcode]| ops[p.y as usize % ops.len()];
    let fh1 = FileHandle(p.fh1);
    match p.kind % REPLY_KINDS {
        0 => (
            pick(&[
                O::Null,
                O::SessionDestroy,
                O::Close,
                O::Remove,
                O::RmDir,
                O::Rename,
                O::Commit,
                O::CacheHint,
                O::Lock,
                O::Unlock,
                O::SetNamedAttr,
                O::RemoveNamedAttr,
                O::SetCred,
                O::ReclaimComplete,
            ]),
            Reply::Empty,
        ),
        1 => (
            O::SessionCreate,
            Reply::SessionCreate {
                msg_size_bytes_max: p.x,
                slots: p.y,
                inline_threshold: p.x ^ p.y,
                auth: if p.flag { AuthMethod::HmacSha256 } else { AuthMethod::None },
                server_nonce: p.nonce1,
                direct_bytes_max: p.x.rotate_left(5),
                batch_max: p.y % (BATCH_MAX + 1),
                host_id: p.nonce2[..16].try_into().unwrap(),
                shm_path: if p.flag { b"/run/dafsd.sock" } else { b"" },
                boot_verifier: p.b,
                grace_ms: p.x,
                session_token: p.nonce2,
            },
        ),
        2 => (O::SessionAuth, Reply::SessionAuth { server_proof: p.nonce2 }),
        3 => (
            pick(&[
                O::GetRootHandle,
                O::Lookup,
                O::LookupParent,
                O::Create,
                O::Symlink,
                O::Publish,
                O::Mknod,
            ]),
            Reply::Handle { fh: fh1, attr: attr_of(p) },
        ),
        4 => (pick(&[O::GetAttr, O::SetAttr, O::Link]), Reply::Attr { attr: attr_of(p) }),
        5 => (O::Access, Reply::Access { granted: p.x & access_mask::ALL }),
        6 => (O::Open, Reply::Open { open_id: p.a, fh: fh1, attr: attr_of(p) }),
        7 => (O::ReadInline, Reply::ReadInline { eof: p.flag, data: &p.data }),
        8 => (
            pick(&[O::WriteInline, O::WriteDirect]),
            Reply::Write { count: p.x, stable: p.flag, offset: p.a },
        ),
        9 => (O::ReadDirect, Reply::ReadDirect { count: p.x, eof: p.flag }),
        10 => (
            O::ReadDir,
            Reply::ReadDir { eof: p.flag, count: p.entries_count, entries: &p.entries },
        ),
        11 => (O::ReadLink, Reply::ReadLink { target: &p.target }),
        12 => (
            O::FsStat,
            Reply::FsStat(FsStat {
                total_bytes: p.a,
                free_bytes: p.b,
                avail_bytes: p.c,
                total_files: p.a ^ p.c,
                free_files: p.b ^ p.c,
                block_size: p.x,
                name_max: p.y,
            }),
        ),
        13 => {
            let mut packed = Vec::new();
            let n = p.x % 4;
            for i in 0..n {
                BatchResult {
                    index: i,
                    status: if p.flag { Status::Ok } else { Status::BadRegion },
                    count: p.a,
                }
                .pack(&mut packed);
            }
            (O::BatchIo, Reply::Batch { count: n, results: Box::leak(packed.into_boxed_slice()) })
        }
        14 => {
            let mut r = Vec::new();
            let req_h = Header::request(O::Null, 0, 0, 0, 0);
            encode_reply(&Header::reply_to(&req_h, Status::Ok, 0), &Reply::Empty, &mut r, MAX)
                .unwrap();
            let mut packed = Vec::new();
            pack_messages([r.as_slice(), r.as_slice()], &mut packed);
            (
                O::Chain,
                Reply::Chain {
                    executed: 2,
                    failed: if p.flag { 1 } else { u32::MAX },
                    replies: Box::leak(packed.into_boxed_slice()),
                },
            )
        }
        15 => (
            O::LockTest,
            Reply::LockTest { conflict: p.flag, ltype: p.x, owner: p.a, offset: p.b, len: p.c },
        ),
        16 => (
            O::GetNamedAttr,
            Reply::NamedAttr { value: &p.data[..p.data.len().min(NATTR_VALUE_BYTES_MAX)] },
        ),
        17 => (O::ListNamedAttr, Reply::NamedAttrList { names: &p.data }),
        18 => {
            let slots = 1 + p.x % limits::SLOTS_MAX;
            (
                O::SessionBind,
                Reply::SessionBind {
                    slots,
                    target_highest: p.y % slots,
                    next_nonce: p.nonce1,
                    server_proof: p.nonce2,
                },
            )
        }
        19 => (
            O::ClusterMap,
            Reply::ClusterMap {
                epoch: p.a,
                node_id: &p.fh1[..p.x as usize % p.fh1.len()],
                map: &p.data,
            },
        ),
        _ => {
            let errors: Vec<Status> =
                Status::ALL.iter().copied().filter(|s| *s != Status::Ok).collect();
            let op = Opcode::ALL[p.y as usize % Opcode::ALL.len()];
            match errors[p.x as usize % errors.len()] {
                // The one error reply with a body: the node's epoch.
                Status::WrongNode => (op, Reply::WrongNode { epoch: p.b }),
                s => (op, Reply::Error(s)),
            }
        }
    }
}

pub fn encode_req(h: &Hdr, req: &Request) -> Vec<u8> {
    let header =
        Header::request(req.opcode(), h.session_id, h.slot_id, h.sequence_id, h.highest_slot);
    let mut buf = Vec::new();
    let n = encode_request(&header, req, &mut buf, MAX).expect("valid request encodes");
    assert_eq!(n, buf.len());
    buf
}

pub fn encode_rep(h: &Hdr, op: Opcode, reply: &Reply) -> Vec<u8> {
    let req_h = Header::request(op, h.session_id, h.slot_id, h.sequence_id, h.highest_slot);
    let header = Header::reply_to(&req_h, Status::Ok, h.target_highest);
    let mut buf = Vec::new();
    let n = encode_reply(&header, reply, &mut buf, MAX).expect("valid reply encodes");
    assert_eq!(n, buf.len());
    buf
}
