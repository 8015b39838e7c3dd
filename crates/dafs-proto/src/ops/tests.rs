//! Round trips and refusals of every request and reply.

use super::*;
use crate::codec::{DecodeError, EncodeError};
use crate::header::{Header, HEADER_LEN};
use crate::limits;
use crate::status::{Opcode, Status};
use crate::types::*;

const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;

fn fh(b: u8) -> FileHandle {
    FileHandle([b; FileHandle::LEN])
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
        Request::ClusterRename { from_dir: fh(8), from_name: b"a", to_path: b"d/e/b" },
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
        Request::ClusterMap,
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
    DirEntry { cookie: 1, fileid: 2, ftype: FileType::Regular, name: b"one" }.pack(&mut entries);
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
        (Opcode::Lookup, Reply::WrongNode { epoch: 7 }),
        (Opcode::Create, Reply::WrongNode { epoch: u64::MAX }),
        (Opcode::ClusterMap, Reply::ClusterMap { epoch: 3, node_id: b"n1", map: b"{}" }),
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
    // CLUSTER_RENAME's target is a path beneath the export root: not absolute, not
    // empty, no NUL, no component over NAME_MAX; its source name follows the name rules.
    let long = [b'x'; 256];
    for (name, path) in [
        (&b"a"[..], &b"/d/b"[..]),
        (b"a", b""),
        (b"a", b"d\0b"),
        (b"a", &long[..]),
        (b"..", b"d/b"),
        (b"a/b", b"d/b"),
    ] {
        buf.clear();
        let req = Request::ClusterRename { from_dir: fh(1), from_name: name, to_path: path };
        let h = Header::request(Opcode::ClusterRename, 1, 0, 1, 0);
        encode_request(&h, &req, &mut buf, MAX).unwrap();
        let err = decode_request(&buf, MAX).unwrap_err();
        assert!(err.0.is_some(), "header is still reported for {name:?} -> {path:?}");
    }
}

#[test]
fn too_big_is_refused_on_both_sides() {
    let mut buf = vec![];
    let data = vec![0u8; 10_000];
    let req = Request::WriteInline { open_id: 1, offset: 0, stable: false, data: &data };
    let h = Header::request(Opcode::WriteInline, 1, 0, 1, 0);
    assert!(matches!(encode_request(&h, &req, &mut buf, 8192), Err(EncodeError::TooBig { .. })));
    assert!(buf.is_empty(), "a failed encode leaves the buffer as it was");
    encode_request(&h, &req, &mut buf, MAX).unwrap();
    assert!(matches!(decode_request(&buf, 8192), Err((None, DecodeError::TooBig(_)))));
}

#[test]
fn truncations_never_panic_and_always_fail() {
    let mut buf = Vec::new();
    for req in sample_requests() {
        buf.clear();
        encode_request(&Header::request(req.opcode(), 1, 0, 1, 0), &req, &mut buf, MAX).unwrap();
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
    bad[6] = 8; // opcode 8 is undefined
    assert_eq!(decode_request(&bad, MAX).unwrap_err().1, DecodeError::UnknownOpcode(8));
}
