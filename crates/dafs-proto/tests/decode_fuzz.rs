//! Property tests for the decoders: no byte string makes them panic, allocate beyond the
//! input, or accept something that does not re-encode to the same value; and encode ->
//! decode is the identity for valid messages.
//!
//! Everything here goes through the public API only.

use dafs_proto::header::RawHeader;
use dafs_proto::types::DirEntries;
use dafs_proto::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;
/// Re-encoding a decoded message compacts its heap, but heap fields that overlapped on
/// the wire are written out separately, so a re-encoding may be a little longer than the
/// original (by at most one name). It never needs more than this slack.
const REENCODE_MAX: usize = MAX + 2 * limits::PATH_BYTES_MAX;

// ---------------------------------------------------------------------------------------
// Spec tables (docs/protocol.md): fixed-part length of every request and success reply.
// ---------------------------------------------------------------------------------------

const REQ_FIXED_LEN: &[(Opcode, usize)] = &[
    (Opcode::Null, 0),
    (Opcode::SessionCreate, 24),
    (Opcode::SessionAuth, 64),
    (Opcode::SessionBind, 72),
    (Opcode::SetCred, 16),
    (Opcode::SessionDestroy, 0),
    (Opcode::GetRootHandle, 8),
    (Opcode::Lookup, 48),
    (Opcode::LookupParent, 32),
    (Opcode::GetAttr, 32),
    (Opcode::SetAttr, 72),
    (Opcode::Access, 40),
    (Opcode::Create, 56),
    (Opcode::Open, 56),
    (Opcode::Close, 8),
    (Opcode::ReadInline, 24),
    (Opcode::WriteInline, 32),
    (Opcode::ReadDirect, 40),
    (Opcode::WriteDirect, 40),
    (Opcode::ReadDir, 48),
    (Opcode::Remove, 40),
    (Opcode::RmDir, 40),
    (Opcode::Rename, 88),
    (Opcode::Link, 72),
    (Opcode::Symlink, 48),
    (Opcode::ReadLink, 32),
    (Opcode::Commit, 24),
    (Opcode::FsStat, 32),
    (Opcode::BatchIo, 24),
    (Opcode::Chain, 16),
    (Opcode::CacheHint, 32),
    (Opcode::Lock, 56),
    (Opcode::LockTest, 56),
    (Opcode::Unlock, 48),
    (Opcode::GetNamedAttr, 40),
    (Opcode::SetNamedAttr, 56),
    (Opcode::ListNamedAttr, 32),
    (Opcode::RemoveNamedAttr, 40),
    (Opcode::Publish, 8),
    (Opcode::ReclaimComplete, 0),
    (Opcode::Mknod, 56),
];

const REPLY_FIXED_LEN: &[(Opcode, usize)] = &[
    (Opcode::Null, 0),
    (Opcode::SessionCreate, 128),
    (Opcode::SessionAuth, 32),
    (Opcode::SessionBind, 72),
    (Opcode::SetCred, 0),
    (Opcode::SessionDestroy, 0),
    (Opcode::GetRootHandle, 120),
    (Opcode::Lookup, 120),
    (Opcode::LookupParent, 120),
    (Opcode::GetAttr, 88),
    (Opcode::SetAttr, 88),
    (Opcode::Access, 8),
    (Opcode::Create, 120),
    (Opcode::Open, 128),
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
    (Opcode::Symlink, 120),
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
    (Opcode::Publish, 120),
    (Opcode::ReclaimComplete, 0),
    (Opcode::Mknod, 120),
];

const RESERVED: &[Opcode] = &[Opcode::Callback];

const FTYPES: &[FileType] = &[
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
struct Parts {
    kind: usize,
    fh1: [u8; 32],
    fh2: [u8; 32],
    nonce1: [u8; 32],
    nonce2: [u8; 32],
    a: u64,
    b: u64,
    c: u64,
    x: u32,
    y: u32,
    flag: bool,
    name1: Vec<u8>,
    name2: Vec<u8>,
    /// A valid relative path (may be empty).
    path: Vec<u8>,
    /// A valid symlink target: non-empty, no NUL, may be absolute.
    target: Vec<u8>,
    data: Vec<u8>,
    entries: Vec<u8>,
    entries_count: u32,
}

#[derive(Debug, Clone, Copy)]
struct Hdr {
    session_id: u64,
    slot_id: u32,
    sequence_id: u32,
    highest_slot: u32,
    target_highest: u32,
}

fn hdr() -> impl Strategy<Value = Hdr> {
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
fn name_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        4 => prop::sample::select(&b"abcxyz-_.~ 0123456789"[..]),
        1 => (1u8..=255).prop_filter("no slash", |b| *b != b'/'),
    ]
}

/// A valid single path component: 1..=255 bytes, no `/` or NUL, not `.` or `..`.
fn valid_name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => vec(name_byte(), 1..24),
        1 => vec(name_byte(), 240..=limits::NAME_BYTES_MAX),
    ]
    .prop_filter("not . or ..", |n| n.as_slice() != b"." && n.as_slice() != b"..")
}

/// A valid relative path: components (possibly empty, `.` or `..`) joined by `/`.
fn valid_path() -> impl Strategy<Value = Vec<u8>> {
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

fn valid_target() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), valid_path()).prop_map(|(abs, p)| {
        let mut t = if abs { b"/".to_vec() } else { Vec::new() };
        t.extend_from_slice(&p);
        if t.is_empty() {
            t.push(b't');
        }
        t
    })
}

fn dir_entries() -> impl Strategy<Value = (Vec<u8>, u32)> {
    vec((any::<u64>(), any::<u64>(), 0..FTYPES.len(), valid_name()), 0..6).prop_map(|ents| {
        let mut packed = Vec::new();
        for (cookie, fileid, t, name) in &ents {
            DirEntry { cookie: *cookie, fileid: *fileid, ftype: FTYPES[*t], name }
                .pack(&mut packed);
        }
        (packed, ents.len() as u32)
    })
}

fn parts() -> impl Strategy<Value = Parts> {
    (
        (
            any::<usize>(),
            any::<[u8; 32]>(),
            any::<[u8; 32]>(),
            any::<[u8; 32]>(),
            any::<[u8; 32]>(),
        ),
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

const REQUEST_KINDS: usize = 42;

/// A valid request of kind `p.kind % REQUEST_KINDS` (every opcode, reserved ones as one kind).
fn build_request(p: &Parts) -> Request<'_> {
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
        _ => Request::Reserved(RESERVED[p.x as usize % RESERVED.len()]),
    }
}

/// SETATTR values that decode: known mask bits, never both a time and its time-now bit,
/// and a mode within 0o7777 when the mode is set (otherwise the mode field is free).
fn valid_setattrs(p: &Parts) -> SetAttrs {
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

fn attr_of(p: &Parts) -> Attr {
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

const REPLY_KINDS: usize = 20;

/// A valid (op, reply) pair of kind `p.kind % REPLY_KINDS`.
fn build_reply(p: &Parts) -> (Opcode, Reply<'_>) {
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
        _ => {
            let errors: Vec<Status> =
                Status::ALL.iter().copied().filter(|s| *s != Status::Ok).collect();
            (
                Opcode::ALL[p.y as usize % Opcode::ALL.len()],
                Reply::Error(errors[p.x as usize % errors.len()]),
            )
        }
    }
}

fn encode_req(h: &Hdr, req: &Request) -> Vec<u8> {
    let header =
        Header::request(req.opcode(), h.session_id, h.slot_id, h.sequence_id, h.highest_slot);
    let mut buf = Vec::new();
    let n = encode_request(&header, req, &mut buf, MAX).expect("valid request encodes");
    assert_eq!(n, buf.len());
    buf
}

fn encode_rep(h: &Hdr, op: Opcode, reply: &Reply) -> Vec<u8> {
    let req_h = Header::request(op, h.session_id, h.slot_id, h.sequence_id, h.highest_slot);
    let header = Header::reply_to(&req_h, Status::Ok, h.target_highest);
    let mut buf = Vec::new();
    let n = encode_reply(&header, reply, &mut buf, MAX).expect("valid reply encodes");
    assert_eq!(n, buf.len());
    buf
}

// ---------------------------------------------------------------------------------------
// Checks applied to every decode.
// ---------------------------------------------------------------------------------------

/// `s` lies entirely inside `buf`: the decoder borrowed it, it did not allocate it.
fn assert_within(buf: &[u8], s: &[u8], what: &str) {
    let (b, p) = (buf.as_ptr() as usize, s.as_ptr() as usize);
    assert!(
        s.len() <= buf.len(),
        "{what}: slice of {} bytes from a {}-byte message",
        s.len(),
        buf.len()
    );
    assert!(
        p >= b && p + s.len() <= b + buf.len(),
        "{what}: slice does not point into the message"
    );
}

fn request_slices<'a>(r: &Request<'a>) -> Vec<&'a [u8]> {
    use Request::*;
    match *r {
        SessionCreate { client_id, .. } => vec![client_id],
        GetRootHandle { export } => vec![export],
        Lookup { path, .. } => vec![path],
        Create { name, .. }
        | Open { name, .. }
        | Remove { name, .. }
        | RmDir { name, .. }
        | Link { name, .. } => vec![name],
        WriteInline { data, .. } => vec![data],
        Rename { from_name, to_name, .. } => vec![from_name, to_name],
        Symlink { name, target, .. } => vec![name, target],
        _ => vec![],
    }
}

fn reply_slices<'a>(r: &Reply<'a>) -> Vec<&'a [u8]> {
    match *r {
        Reply::ReadInline { data, .. } => vec![data],
        Reply::ReadLink { target } => vec![target],
        Reply::ReadDir { entries, .. } => {
            let mut v = vec![entries];
            for e in DirEntries::new(entries) {
                v.push(e.expect("a decoded READDIR reply holds only valid entries").name);
            }
            v
        }
        _ => vec![],
    }
}

/// Decode `buf` as a request; on success check borrowing, and that the value re-encodes
/// to a canonical message that decodes to the same value (and re-encodes to itself).
fn check_request(buf: &[u8]) -> bool {
    let Ok((h, r)) = decode_request(buf, MAX) else { return false };
    assert!(!h.is_reply);
    assert_eq!(h.opcode, r.opcode());
    for s in request_slices(&r) {
        assert_within(buf, s, "request");
    }
    let mut out = Vec::new();
    encode_request(&h, &r, &mut out, REENCODE_MAX).expect("a decoded request re-encodes");
    let (h2, r2) = decode_request(&out, REENCODE_MAX).expect("a re-encoded request decodes");
    assert_eq!(h2, h);
    assert_eq!(r2, r);
    let mut out2 = Vec::new();
    encode_request(&h2, &r2, &mut out2, REENCODE_MAX).unwrap();
    assert_eq!(out2, out, "canonical encoding is stable");
    true
}

fn check_reply(buf: &[u8]) -> bool {
    let Ok((h, r)) = decode_reply(buf, MAX) else { return false };
    assert!(h.is_reply);
    assert_eq!(h.status, r.status());
    assert!(r.fits(h.opcode));
    for s in reply_slices(&r) {
        assert_within(buf, s, "reply");
    }
    let mut out = Vec::new();
    encode_reply(&h, &r, &mut out, REENCODE_MAX).expect("a decoded reply re-encodes");
    let (h2, r2) = decode_reply(&out, REENCODE_MAX).expect("a re-encoded reply decodes");
    assert_eq!(h2, h);
    assert_eq!(r2, r);
    let mut out2 = Vec::new();
    encode_reply(&h2, &r2, &mut out2, REENCODE_MAX).unwrap();
    assert_eq!(out2, out, "canonical encoding is stable");
    true
}

fn check_raw_header(buf: &[u8]) {
    if let Ok(raw) = RawHeader::parse(buf) {
        assert!(buf.len() >= HEADER_LEN);
        assert_eq!(raw.total_len(), HEADER_LEN as u64 + raw.fixed_len as u64 + raw.heap_len as u64);
        let _ = raw.validate();
    }
}

fn check_dir_entries(buf: &[u8]) {
    let mut n = 0usize;
    let mut failed = false;
    for e in DirEntries::new(buf) {
        assert!(!failed, "DirEntries yields nothing after an error");
        n += 1;
        assert!(n <= buf.len() / DirEntry::FIXED_LEN + 1, "DirEntries makes progress");
        match e {
            Ok(e) => {
                assert_within(buf, e.name, "dir entry name");
                assert!(!e.name.is_empty() && e.name.len() <= limits::NAME_BYTES_MAX);
            }
            Err(_) => failed = true,
        }
    }
}

/// Everything that may be done with an untrusted message.
fn check_all(buf: &[u8]) {
    check_raw_header(buf);
    check_request(buf);
    check_reply(buf);
    check_dir_entries(buf);
    if buf.len() > HEADER_LEN {
        check_dir_entries(&buf[HEADER_LEN..]);
    }
}

// ---------------------------------------------------------------------------------------
// Mutations of valid messages.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Mutation {
    Flip(Index, u8),
    SetU32(Index, u32),
    Truncate(Index),
    Extend(Vec<u8>),
    FixedLen(u32),
    HeapLen(u32),
    /// Move the fixed/heap boundary, keeping the total consistent.
    Shift(i8),
    /// Overwrite one 8-byte word of the body with a plausible heap reference.
    HeapRef(Index, u16, u16),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        2 => (any::<Index>(), any::<u32>()).prop_map(|(i, v)| Mutation::SetU32(i, v)),
        2 => any::<Index>().prop_map(Mutation::Truncate),
        1 => vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
        1 => any::<u32>().prop_map(Mutation::FixedLen),
        1 => any::<u32>().prop_map(Mutation::HeapLen),
        2 => any::<i8>().prop_map(Mutation::Shift),
        2 => (any::<Index>(), any::<u16>(), any::<u16>()).prop_map(|(i, o, l)| Mutation::HeapRef(i, o, l)),
    ]
}

fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().unwrap())
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn apply(buf: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Flip(i, x) if !buf.is_empty() => {
            let i = i.index(buf.len());
            buf[i] ^= x;
        }
        Mutation::SetU32(i, v) if buf.len() >= 4 => {
            let i = i.index(buf.len() - 3);
            put_u32(buf, i, *v);
        }
        Mutation::Truncate(i) if !buf.is_empty() => {
            let n = i.index(buf.len());
            buf.truncate(n);
        }
        Mutation::Extend(bytes) => buf.extend_from_slice(bytes),
        Mutation::FixedLen(v) if buf.len() >= HEADER_LEN => put_u32(buf, 36, *v),
        Mutation::HeapLen(v) if buf.len() >= HEADER_LEN => put_u32(buf, 40, *v),
        Mutation::Shift(d) if buf.len() >= HEADER_LEN => {
            let (f, h) = (get_u32(buf, 36) as i64, get_u32(buf, 40) as i64);
            let d = *d as i64;
            if f + d >= 0 && h - d >= 0 {
                put_u32(buf, 36, (f + d) as u32);
                put_u32(buf, 40, (h - d) as u32);
            }
        }
        Mutation::HeapRef(i, off, len) if buf.len() >= HEADER_LEN + 8 => {
            let at = HEADER_LEN + i.index(buf.len() - HEADER_LEN - 7);
            let heap_len = get_u32(buf, 40).max(1);
            put_u32(buf, at, *off as u32 % (heap_len + 8));
            put_u32(buf, at + 4, *len as u32 % (heap_len + 8));
        }
        _ => {}
    }
}

/// A header that parses, with random opcode/flags/status and a random body whose
/// fixed part is often exactly the length the op defines.
fn headed_random() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![
            4 => prop::sample::select(Opcode::ALL).prop_map(|o| o.to_wire()),
            1 => any::<u16>(),
        ],
        any::<bool>(),
        prop_oneof![3 => Just(0u32), 1 => prop::sample::select(Status::ALL).prop_map(|s| s.to_wire()), 1 => any::<u32>()],
        (any::<u64>(), any::<u32>(), any::<u32>(), any::<u32>()),
        any::<bool>(),
        vec(any::<u8>(), 0..200),
        vec(any::<u8>(), 0..300),
    )
        .prop_map(|(op, is_reply, status, (sid, slot, seq, hs), exact, mut fixed, heap)| {
            if exact {
                let table = if is_reply { REPLY_FIXED_LEN } else { REQ_FIXED_LEN };
                if let Some(&(_, n)) = table.iter().find(|(o, _)| o.to_wire() == op) {
                    fixed.resize(n, 0);
                }
            }
            let mut buf = Vec::with_capacity(HEADER_LEN + fixed.len() + heap.len());
            buf.extend_from_slice(&MAGIC.to_le_bytes());
            buf.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
            buf.extend_from_slice(&op.to_le_bytes());
            buf.extend_from_slice(&(is_reply as u32).to_le_bytes());
            buf.extend_from_slice(&status.to_le_bytes());
            buf.extend_from_slice(&sid.to_le_bytes());
            buf.extend_from_slice(&slot.to_le_bytes());
            buf.extend_from_slice(&seq.to_le_bytes());
            buf.extend_from_slice(&hs.to_le_bytes());
            buf.extend_from_slice(&(fixed.len() as u32).to_le_bytes());
            buf.extend_from_slice(&(heap.len() as u32).to_le_bytes());
            buf.extend_from_slice(&0u32.to_le_bytes());
            buf.extend_from_slice(&fixed);
            buf.extend_from_slice(&heap);
            buf
        })
}

// ---------------------------------------------------------------------------------------
// Properties.
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// (a) Arbitrary bytes never panic any decoder.
    #[test]
    fn random_bytes_never_panic(buf in vec(any::<u8>(), 0..4096)) {
        check_all(&buf);
    }

    /// (a) Same, behind a well-formed header so the body decoders are reached.
    #[test]
    fn random_bodies_never_panic(buf in headed_random()) {
        check_all(&buf);
    }

    /// (b) Mutated valid requests never panic; whatever still decodes is stable.
    #[test]
    fn mutated_requests(p in parts(), h in hdr(), muts in vec(mutation(), 1..5)) {
        let mut buf = encode_req(&h, &build_request(&p));
        prop_assert!(check_request(&buf), "the unmutated request decodes");
        for m in &muts {
            apply(&mut buf, m);
        }
        check_all(&buf);
    }

    /// (b) Mutated valid replies never panic; whatever still decodes is stable.
    #[test]
    fn mutated_replies(p in parts(), h in hdr(), muts in vec(mutation(), 1..5)) {
        let (op, reply) = build_reply(&p);
        let mut buf = encode_rep(&h, op, &reply);
        prop_assert!(check_reply(&buf), "the unmutated reply decodes");
        for m in &muts {
            apply(&mut buf, m);
        }
        check_all(&buf);
    }

    /// (c) encode -> decode is the identity, for every request kind, random header fields.
    #[test]
    fn any_request_roundtrips(p in parts(), h in hdr()) {
        let req = build_request(&p);
        let buf = encode_req(&h, &req);
        let (h2, r2) = decode_request(&buf, MAX).expect("decodes");
        prop_assert_eq!(h2, Header::request(req.opcode(), h.session_id, h.slot_id, h.sequence_id, h.highest_slot));
        prop_assert_eq!(r2, req);
        if !matches!(req, Request::Reserved(_)) {
            let fixed = REQ_FIXED_LEN.iter().find(|(o, _)| *o == req.opcode()).unwrap().1;
            prop_assert_eq!(RawHeader::parse(&buf).unwrap().fixed_len as usize, fixed);
        }
    }

    /// (c) encode -> decode is the identity for every reply shape.
    #[test]
    fn any_reply_roundtrips(p in parts(), h in hdr()) {
        let (op, reply) = build_reply(&p);
        let buf = encode_rep(&h, op, &reply);
        let (h2, r2) = decode_reply(&buf, MAX).expect("decodes");
        prop_assert_eq!(h2.opcode, op);
        prop_assert_eq!(h2.status, reply.status());
        prop_assert_eq!((h2.session_id, h2.slot_id, h2.sequence_id, h2.highest_slot), (h.session_id, h.slot_id, h.sequence_id, h.target_highest));
        prop_assert_eq!(r2, reply);
        let fixed = RawHeader::parse(&buf).unwrap().fixed_len as usize;
        if let Reply::Error(_) = reply {
            prop_assert_eq!(fixed, 0);
        } else {
            prop_assert_eq!(fixed, REPLY_FIXED_LEN.iter().find(|(o, _)| *o == op).unwrap().1);
        }
    }

    /// (c) LOOKUP with random valid paths.
    #[test]
    fn lookup_roundtrips(dir in any::<[u8; 32]>(), path in valid_path(), follow in any::<bool>(), h in hdr()) {
        let path = if path.is_empty() { b"x".to_vec() } else { path };
        let req = Request::Lookup { dir: FileHandle(dir), path: &path, follow };
        let buf = encode_req(&h, &req);
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);
    }

    /// (c) WRITE_INLINE with random data.
    #[test]
    fn write_inline_roundtrips(open_id in any::<u64>(), offset in any::<u64>(), stable in any::<bool>(), data in vec(any::<u8>(), 0..4096), h in hdr()) {
        let req = Request::WriteInline { open_id, offset, stable, data: &data };
        let buf = encode_req(&h, &req);
        prop_assert_eq!(buf.len(), HEADER_LEN + 32 + data.len());
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);
    }

    /// (c) READ_DIRECT with random numbers.
    #[test]
    fn read_direct_roundtrips(open_id in any::<u64>(), offset in any::<u64>(), len in 0..=limits::DIRECT_BYTES_MAX, key in any::<u64>(), roff in any::<u64>(), h in hdr()) {
        let req = Request::ReadDirect { open_id, offset, len, region: RemoteRegion { key, offset: roff } };
        let buf = encode_req(&h, &req);
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);
    }

    /// (c) RENAME with random valid names.
    #[test]
    fn rename_roundtrips(a in any::<[u8; 32]>(), b in any::<[u8; 32]>(), from in valid_name(), to in valid_name(), flags in 0u32..3, h in hdr()) {
        let req = Request::Rename { from_dir: FileHandle(a), from_name: &from, to_dir: FileHandle(b), to_name: &to, flags };
        let buf = encode_req(&h, &req);
        prop_assert_eq!(buf.len(), HEADER_LEN + 88 + from.len() + to.len());
        // The flags word follows both name references, the pad word after it.
        prop_assert_eq!(&buf[HEADER_LEN + 80..HEADER_LEN + 88], &[flags.to_le_bytes(), [0; 4]].concat()[..]);
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);
    }

    /// (c) RENAME flags with an unknown bit, or NOREPLACE and EXCHANGE together, are
    /// refused as `BadValue::RenameFlags`; the pad word after them is ignored.
    #[test]
    fn rename_bad_flags_are_refused(flags in any::<u32>(), pad in any::<u32>(), h in hdr()) {
        let rename = |flags| Request::Rename { from_dir: FileHandle([1; 32]), from_name: b"a", to_dir: FileHandle([2; 32]), to_name: b"b", flags };
        let mut buf = encode_req(&h, &rename(0));
        buf[HEADER_LEN + 80..HEADER_LEN + 84].copy_from_slice(&flags.to_le_bytes());
        buf[HEADER_LEN + 84..HEADER_LEN + 88].copy_from_slice(&pad.to_le_bytes());
        let r = decode_request(&buf, MAX);
        if flags <= rename_flags::EXCHANGE {
            let (_, r2) = r.unwrap();
            prop_assert_eq!(r2, rename(flags));
        } else {
            prop_assert_eq!(r.unwrap_err().1, DecodeError::BadValue(BadValue::RenameFlags));
        }
    }

    /// (c) SETATTR with random valid masks; invalid masks are refused.
    #[test]
    fn setattr_roundtrips(p in parts(), h in hdr(), raw_mask in any::<u32>()) {
        let set = valid_setattrs(&p);
        let req = Request::SetAttr { fh: FileHandle(p.fh1), set };
        let buf = encode_req(&h, &req);
        let (_, r2) = decode_request(&buf, MAX).unwrap();
        prop_assert_eq!(r2, req);

        use setattr_mask::*;
        let bad = SetAttrs { mask: raw_mask, ..set };
        let valid = raw_mask & !ALL == 0
            && !(raw_mask & ATIME != 0 && raw_mask & ATIME_NOW != 0)
            && !(raw_mask & MTIME != 0 && raw_mask & MTIME_NOW != 0)
            && !(raw_mask & MODE != 0 && set.mode & !0o7777 != 0);
        let buf = encode_req(&h, &Request::SetAttr { fh: FileHandle(p.fh1), set: bad });
        prop_assert_eq!(decode_request(&buf, MAX).is_ok(), valid);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// (d) A READDIR reply whose packed list is damaged never decodes to a slice outside
    /// the message, and never decodes with a count that disagrees with its entries.
    #[test]
    fn damaged_readdir_lists(ents in dir_entries(), h in hdr(), muts in vec(mutation(), 1..4)) {
        let (mut packed, count) = ents;
        for m in &muts {
            apply(&mut packed, m);
        }
        check_dir_entries(&packed);
        let n = DirEntries::new(&packed).take_while(|e| e.is_ok()).count() as u32;
        let all_ok = DirEntries::new(&packed).all(|e| e.is_ok());
        for claimed in [count, n] {
            let reply = Reply::ReadDir { eof: false, count: claimed, entries: &packed };
            let buf = encode_rep(&h, Opcode::ReadDir, &reply);
            let ok = check_reply(&buf);
            prop_assert_eq!(ok, all_ok && claimed == n);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Deterministic checks of the spec tables.
// ---------------------------------------------------------------------------------------

fn fixed_parts() -> Parts {
    Parts {
        kind: 0,
        fh1: [1; 32],
        fh2: [2; 32],
        nonce1: [3; 32],
        nonce2: [4; 32],
        a: 5,
        b: 6,
        c: 7,
        x: 8,
        y: 9,
        flag: true,
        name1: b"n1".to_vec(),
        name2: b"n2".to_vec(),
        path: b"a/b".to_vec(),
        target: b"/t".to_vec(),
        data: b"data".to_vec(),
        entries: Vec::new(),
        entries_count: 0,
    }
}

#[test]
fn every_opcode_is_covered_with_its_documented_fixed_len() {
    let h = Hdr { session_id: 1, slot_id: 2, sequence_id: 3, highest_slot: 4, target_highest: 5 };
    let mut seen_req = Vec::new();
    for kind in 0..REQUEST_KINDS {
        let p = Parts { kind, ..fixed_parts() };
        let req = build_request(&p);
        let buf = encode_req(&h, &req);
        assert!(check_request(&buf), "{req:?}");
        seen_req.push(req.opcode());
        if let Some(&(_, n)) = REQ_FIXED_LEN.iter().find(|(o, _)| *o == req.opcode()) {
            assert_eq!(RawHeader::parse(&buf).unwrap().fixed_len as usize, n, "{:?}", req.opcode());
        }
    }
    for &(op, _) in REQ_FIXED_LEN {
        assert!(seen_req.contains(&op), "request kind for {op:?}");
    }
    // Every non-reserved opcode has a success reply of the documented length.
    for &(op, n) in REPLY_FIXED_LEN {
        let mut found = false;
        for kind in 0..REPLY_KINDS - 1 {
            for y in 0..16 {
                let p = Parts { kind, y, ..fixed_parts() };
                let (o, reply) = build_reply(&p);
                if o == op {
                    let buf = encode_rep(&h, o, &reply);
                    assert!(check_reply(&buf));
                    assert_eq!(RawHeader::parse(&buf).unwrap().fixed_len as usize, n, "{op:?}");
                    found = true;
                }
            }
        }
        assert!(found, "reply for {op:?}");
    }
    assert_eq!(Attr::WIRE_LEN, 88);
    assert_eq!(FileHandle::LEN, 32);
    assert_eq!(DirEntry::FIXED_LEN, 24);
}

#[test]
fn reserved_ops_ignore_their_body_and_cannot_succeed() {
    let h = Header::request(Opcode::Callback, 1, 0, 1, 0);
    let mut buf = Vec::new();
    encode_request(&h, &Request::Reserved(Opcode::Callback), &mut buf, MAX).unwrap();
    // Give it an arbitrary body: still decodes, as Reserved.
    buf.extend_from_slice(&[0xAB; 20]);
    buf[36..40].copy_from_slice(&12u32.to_le_bytes());
    buf[40..44].copy_from_slice(&8u32.to_le_bytes());
    let (_, r) = decode_request(&buf, MAX).unwrap();
    assert_eq!(r, Request::Reserved(Opcode::Callback));
    // A success reply to a reserved op does not decode; NOTSUPP does.
    let mut rep = Vec::new();
    encode_reply(
        &Header::reply_to(&h, Status::Ok, 0),
        &Reply::Error(Status::NotSupp),
        &mut rep,
        MAX,
    )
    .unwrap();
    assert_eq!(decode_reply(&rep, MAX).unwrap().1, Reply::Error(Status::NotSupp));
    rep[12..16].copy_from_slice(&0u32.to_le_bytes());
    assert!(decode_reply(&rep, MAX).is_err());
}

#[test]
fn overlapping_heap_fields_decode_and_reencode_longer() {
    // RENAME whose two names point at the same heap bytes: valid on the wire (the
    // decoder does not require disjoint fields); the canonical re-encoding is longer.
    let req = Request::Rename {
        from_dir: FileHandle([1; 32]),
        from_name: b"same",
        to_dir: FileHandle([2; 32]),
        to_name: b"same",
        flags: rename_flags::NOREPLACE,
    };
    let mut buf = Vec::new();
    encode_request(&Header::request(Opcode::Rename, 1, 0, 1, 0), &req, &mut buf, MAX).unwrap();
    // to_name ref at fixed offset 72 -> point at offset 0; drop the second copy.
    let at = HEADER_LEN + 72;
    buf[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    buf.truncate(buf.len() - 4);
    buf[40..44].copy_from_slice(&4u32.to_le_bytes());
    let n = buf.len();
    let (_, r) = decode_request(&buf, n).unwrap();
    assert_eq!(r, req);
    let mut out = Vec::new();
    assert!(encode_request(&Header::request(Opcode::Rename, 1, 0, 1, 0), &r, &mut out, n).is_err());
    assert!(check_request(&buf));
}

/// Writes one valid message per request kind and per reply shape as a seed corpus for
/// the cargo-fuzz targets (see fuzz/README.md). Does nothing unless `DAFS_FUZZ_SEEDS`
/// names a directory: `DAFS_FUZZ_SEEDS=fuzz/corpus cargo test -p dafs-proto --test
/// decode_fuzz write_fuzz_seeds` fills `fuzz/corpus/decode_request` and `.../decode_reply`.
#[test]
fn write_fuzz_seeds() {
    let Some(dir) = std::env::var_os("DAFS_FUZZ_SEEDS") else { return };
    let dir = std::path::PathBuf::from(dir);
    let h = Hdr { session_id: 1, slot_id: 0, sequence_id: 1, highest_slot: 0, target_highest: 7 };
    let req_dir = dir.join("decode_request");
    std::fs::create_dir_all(&req_dir).unwrap();
    for kind in 0..REQUEST_KINDS {
        let p = Parts { kind, ..fixed_parts() };
        std::fs::write(req_dir.join(format!("seed-{kind:02}")), encode_req(&h, &build_request(&p)))
            .unwrap();
    }
    let rep_dir = dir.join("decode_reply");
    std::fs::create_dir_all(&rep_dir).unwrap();
    let (packed, count) = {
        let mut v = Vec::new();
        DirEntry { cookie: 1, fileid: 2, ftype: FileType::Regular, name: b"one" }.pack(&mut v);
        DirEntry { cookie: 2, fileid: 3, ftype: FileType::Directory, name: b"two-longer" }
            .pack(&mut v);
        (v, 2)
    };
    for kind in 0..REPLY_KINDS {
        let p = Parts { kind, entries: packed.clone(), entries_count: count, ..fixed_parts() };
        let (op, reply) = build_reply(&p);
        std::fs::write(rep_dir.join(format!("seed-{kind:02}")), encode_rep(&h, op, &reply))
            .unwrap();
    }
}
