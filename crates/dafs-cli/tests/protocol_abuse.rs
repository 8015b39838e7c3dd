//! Hostile and broken peers. Raw `TcpStream` clients speak the 32-byte frame format
//! by hand and send malformed, out-of-order, oversized or never-read traffic; after
//! every case a fresh, well-behaved `dafs_client::Client` must still be served (stat of
//! the root plus a write and read back), and the `dafsd` process must still be alive.
//!
//! Memory-bound cases are in `protocol_abuse_memory.rs`, session set-up, binding and the
//! client against a fake server in `protocol_abuse_session.rs`; the raw client is
//! `abuse/mod.rs`.

mod abuse;
mod common;

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use common::TestServer;
use dafs_client::{Error, OpenOptions};
use dafs_proto::header::FLAG_REPLY;
use dafs_proto::types::open_flags;
use dafs_proto::{
    decode_reply, encode_request, limits, AuthMethod, FileHandle, Header, Opcode, RemoteRegion,
    Reply, Request, Status,
};
use dafs_transport::frame::{FrameHeader, FrameKind};

use abuse::*;

// ------------------------------------------------------------------------------------
// 1. Framing garbage
// ------------------------------------------------------------------------------------

#[test]
fn garbage_frames_close_only_that_connection() {
    let srv = TestServer::start(&[]);
    // A client that stays connected through all of it must keep working.
    let mut bystander = srv.client();
    let good_null = enc(&Header::request(Opcode::Null, 0, 0, 0, 0), &Request::Null);

    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "random garbage",
            (0..200u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 | 0x80).collect(),
        ),
        (
            "bad frame kind",
            frame_bytes(FrameHeader::msg(0), &[])
                .into_iter()
                .enumerate()
                .map(|(i, b)| if i == 0 { 9 } else { b })
                .collect(),
        ),
        ("kind zero", vec![0u8; 64]),
        ("MSG longer than the maximum", FrameHeader::msg(MAX + 1).encode().to_vec()),
        (
            "MSG of u32::MAX bytes",
            FrameHeader { kind: FrameKind::Msg, len: u32::MAX, key: 0, offset: 0, tag: 0 }
                .encode()
                .to_vec(),
        ),
        ("empty MSG", FrameHeader::msg(0).encode().to_vec()),
        (
            "MSG with a key",
            frame_bytes(
                FrameHeader {
                    kind: FrameKind::Msg,
                    len: good_null.len() as u32,
                    key: 1,
                    offset: 0,
                    tag: 0,
                },
                &good_null,
            ),
        ),
        (
            "MSG with a tag",
            frame_bytes(
                FrameHeader {
                    kind: FrameKind::Msg,
                    len: good_null.len() as u32,
                    key: 0,
                    offset: 0,
                    tag: 7,
                },
                &good_null,
            ),
        ),
        (
            "PUT from a client",
            frame_bytes(
                FrameHeader { kind: FrameKind::Put, len: 4, key: 1, offset: 0, tag: 0 },
                b"abcd",
            ),
        ),
        (
            "GET from a client",
            FrameHeader { kind: FrameKind::Get, len: 4, key: 1, offset: 0, tag: 0 }
                .encode()
                .to_vec(),
        ),
        (
            "GET_RESP for no pull",
            frame_bytes(
                FrameHeader { kind: FrameKind::GetResp, len: 4, key: 0, offset: 0, tag: 3 },
                b"abcd",
            ),
        ),
        ("MSG shorter than a DAFS header", msg_frame(&[0x44, 0x41, 0x46, 0x53, 1, 0, 0, 0, 0, 0])),
        ("MSG of zeros", msg_frame(&[0u8; 48])),
    ];
    // A valid NULL followed by garbage: the NULL is answered, then the connection closes.
    let mut then_garbage = msg_frame(&good_null);
    then_garbage.extend_from_slice(&[0xff; 40]);
    cases.push(("good message then garbage", then_garbage));

    for (what, bytes) in &cases {
        let mut raw = Raw::connect(&srv);
        raw.write(bytes);
        raw.expect_closed(what);
        assert_serves(&srv, what);
    }

    // Truncations: the peer goes away in the middle of a frame header / payload.
    for (what, bytes) in [
        ("half a frame header", FrameHeader::msg(100).encode()[..13].to_vec()),
        ("half a payload", {
            let mut v = FrameHeader::msg(100).encode().to_vec();
            v.extend_from_slice(&[0u8; 50]);
            v
        }),
        ("payload of a 4 MiB message cut short", {
            let mut v = FrameHeader::msg(MAX).encode().to_vec();
            v.extend_from_slice(&good_null);
            v
        }),
    ] {
        let mut raw = Raw::connect(&srv);
        raw.write(&bytes);
        raw.s.shutdown(std::net::Shutdown::Write).unwrap();
        raw.expect_closed(what);
        assert_serves(&srv, what);
    }

    // Connections that come and go without a byte, some reset (SO_LINGER 0).
    for i in 0..50 {
        let s = TcpStream::connect(srv.addr()).unwrap();
        if i % 2 == 0 {
            let l = libc::linger { l_onoff: 1, l_linger: 0 };
            // SAFETY: setsockopt on a socket we own, with a correctly sized linger struct.
            unsafe {
                use std::os::fd::AsRawFd;
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    &l as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::linger>() as u32,
                );
            }
        }
        drop(s);
    }
    assert_serves(&srv, "connect-and-drop storm");

    // The connection that was open all along still works.
    assert!(bystander.stat("/").unwrap().is_dir());
    bystander.null().unwrap();
}

// ------------------------------------------------------------------------------------
// 2. Bad DAFS headers and bodies
// ------------------------------------------------------------------------------------

#[test]
fn bad_headers_and_bodies() {
    let srv = TestServer::start(&[]);
    let null = enc(&Header::request(Opcode::Null, 0, 0, 0, 0), &Request::Null);

    // Unusable headers: the connection is closed.
    let patch = |at: usize, bytes: &[u8]| {
        let mut m = null.clone();
        m[at..at + bytes.len()].copy_from_slice(bytes);
        m
    };
    let mut longer = null.clone();
    longer.extend_from_slice(&[0u8; 8]); // 8 bytes the header does not announce
    let mut claims_more = null.clone();
    claims_more[36..40].copy_from_slice(&16u32.to_le_bytes()); // fixed_len 16, none sent
    for (what, m) in [
        ("bad magic", patch(0, b"NOPE")),
        ("reserved header word", patch(44, &1u32.to_le_bytes())),
        ("unknown flag bit", patch(8, &2u32.to_le_bytes())),
        ("reply flag on a request", patch(8, &FLAG_REPLY.to_le_bytes())),
        ("trailing bytes after the message", longer),
        ("header announces more than the frame", claims_more),
    ] {
        let mut raw = Raw::connect(&srv);
        raw.send_msg(&m);
        raw.expect_closed(what);
        assert_serves(&srv, what);
    }

    // Answerable headers, before any session.
    let mut raw = Raw::connect(&srv);
    let r = raw.roundtrip(&patch(4, &(dafs_proto::PROTOCOL_VERSION + 1).to_le_bytes()));
    assert_eq!(status(&r), Status::BadVersion);
    let r = raw.roundtrip(&patch(4, &1u16.to_le_bytes()));
    assert_eq!(status(&r), Status::BadVersion, "version 1 clients are refused");
    let r = raw.roundtrip(&patch(4, &0u16.to_le_bytes()));
    assert_eq!(status(&r), Status::BadVersion);
    let r = raw.roundtrip(&patch(6, &8u16.to_le_bytes()));
    assert_eq!(status(&r), Status::OpIllegal, "opcode 8 is undefined");
    let r = raw.roundtrip(&patch(6, &u16::MAX.to_le_bytes()));
    assert_eq!(status(&r), Status::OpIllegal);
    let r = raw.roundtrip(&patch(12, &2u32.to_le_bytes()));
    assert_eq!(status(&r), Status::BadXdr, "a request carrying a status");
    // The connection still works: a plain NULL.
    assert_eq!(status(&raw.roundtrip(&null)), Status::Ok);

    // With a session: every refusal keeps the session usable.
    let s = raw.create(65536, 4, AuthMethod::None).expect("session");
    assert_eq!(s.slots, 4);
    let root = raw.root();
    let r = raw.call(0, &Request::Reserved(Opcode::Callback));
    assert_eq!(status(&r), Status::NotSupp);
    // An implemented op without its body is malformed, not unsupported.
    let r = raw.call(1, &Request::Reserved(Opcode::Lock));
    assert_eq!(status(&r), Status::BadXdr);
    let r = raw.call(0, &Request::GetAttr { fh: root });
    assert_eq!(status(&r), Status::Ok);

    // Unknown opcode inside the session: OP_ILLEGAL and the sequence id is consumed.
    let mut m = raw.next(0, &Request::Null);
    m[6..8].copy_from_slice(&8u16.to_le_bytes());
    let r = raw.roundtrip(&m);
    assert_eq!(status(&r), Status::OpIllegal);
    let r = raw.call(0, &Request::GetAttr { fh: root });
    assert_eq!(status(&r), Status::Ok, "next sequence id after OP_ILLEGAL");

    // LOOKUP with a heap reference past the heap: BADXDR, and the slot moves on.
    let mut m = raw.next(0, &Request::Lookup { dir: root, path: b"abc", follow: true });
    let hdr = reply_header(&raw.roundtrip(&{
        let mut bad = m.clone();
        bad[100..104].copy_from_slice(&1000u32.to_le_bytes()); // heap ref len 1000 (heap has 3)
        bad
    }));
    assert_eq!(hdr.status, Status::BadXdr);
    assert_eq!(
        (hdr.slot_id, hdr.sequence_id),
        (0, raw.seq[0] - 1),
        "the reply names the request's slot and sequence id"
    );
    // The same (now valid) message on the consumed sequence id is not a retransmission
    // of what executed there (the malformed message): refused, not executed.
    let r = raw.roundtrip(&m);
    assert_eq!(status(&r), Status::SeqFalseRetry);
    // A heap reference whose offset overflows.
    m = raw.next(0, &Request::Lookup { dir: root, path: b"abc", follow: true });
    m[96..100].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(status(&raw.roundtrip(&m)), Status::BadXdr);
    // Names that are not single components.
    for bad in [&b"a/b"[..], b"..", b".", b"", b"x\0y"] {
        let r = raw.call(0, &Request::Remove { dir: root, name: bad });
        assert_eq!(status(&r), Status::BadXdr, "REMOVE {bad:?}");
    }
    let r = raw.call(0, &Request::Lookup { dir: root, path: b"/etc/passwd", follow: true });
    assert_eq!(status(&r), Status::BadXdr, "absolute lookup path");
    let r = raw.call(0, &Request::Open { fh: root, flags: 0, mode: 0o644, name: b"x", key: b"" });
    assert_eq!(status(&r), Status::BadXdr, "OPEN with neither READ nor WRITE");
    // RENAME flags beyond NOREPLACE and EXCHANGE, or both together.
    for flags in [3, 4, 1 << 31] {
        let (from_name, to_name) = (&b"x"[..], &b"y"[..]);
        let r = raw
            .call(0, &Request::Rename { from_dir: root, from_name, to_dir: root, to_name, flags });
        assert_eq!(status(&r), Status::BadXdr, "RENAME flags {flags:#x}");
    }
    let r = raw.call(
        0,
        &Request::Create {
            dir: root,
            ftype: dafs_proto::FileType::Regular,
            mode: 0o10000,
            exclusive: false,
            name: b"x",
        },
    );
    assert_eq!(status(&r), Status::BadXdr, "mode bits beyond 0o7777");
    // A fixed part cut short (GETATTR without its handle).
    let mut m = raw.next(0, &Request::GetAttr { fh: root });
    m.truncate(48 + 16);
    m[36..40].copy_from_slice(&16u32.to_le_bytes());
    assert_eq!(status(&raw.roundtrip(&m)), Status::BadXdr);
    // A fixed part longer than the op defines.
    let mut m = raw.next(0, &Request::GetAttr { fh: root });
    m.extend_from_slice(&[0u8; 8]);
    m[36..40].copy_from_slice(&(FileHandle::LEN as u32 + 8).to_le_bytes());
    assert_eq!(status(&raw.roundtrip(&m)), Status::BadXdr);
    // A forged file handle.
    let r = raw.call(0, &Request::GetAttr { fh: FileHandle([0xa5; FileHandle::LEN]) });
    assert!(matches!(status(&r), Status::BadHandle | Status::Stale), "{:?}", status(&r));

    // After all that, the session works on the next sequence ids of both slots.
    let r = raw.call(0, &Request::GetAttr { fh: root });
    assert_eq!(status(&r), Status::Ok);
    let r = raw.call(1, &Request::Null);
    assert_eq!(status(&r), Status::Ok);
    assert_serves(&srv, "bad headers");
}

/// OPEN of an existing file by name without CREATE: the mode field is only for
/// CREATE and must be ignored (openat2 refuses a mode without O_CREAT).
#[test]
fn open_by_name_ignores_mode_without_create() {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("exists"), b"data").unwrap();
    let mut raw = Raw::connect(&srv);
    raw.create(65536, 2, AuthMethod::None).unwrap();
    let root = raw.root();
    for (flags, mode) in [
        (open_flags::READ, 0o644),
        (open_flags::READ, 0),
        (open_flags::WRITE, 0o600),
        (open_flags::READ | open_flags::WRITE | open_flags::TRUNCATE, 0o777),
    ] {
        let r = raw.call(0, &Request::Open { fh: root, flags, mode, name: b"exists", key: b"" });
        assert_eq!(status(&r), Status::Ok, "OPEN flags {flags:#x} mode {mode:o}");
    }
    let meta = std::fs::metadata(srv.dir().join("exists")).unwrap();
    assert_eq!(meta.len(), 0, "TRUNCATE applied");
    use std::os::unix::fs::PermissionsExt;
    assert_ne!(meta.permissions().mode() & 0o777, 0o777, "mode without CREATE changes nothing");
    let r = raw.call(
        0,
        &Request::Open {
            fh: root,
            flags: open_flags::READ,
            mode: 0o644,
            name: b"missing",
            key: b"",
        },
    );
    assert_eq!(status(&r), Status::NoEnt);
}

// ------------------------------------------------------------------------------------
// 3. Session and slot rules
// ------------------------------------------------------------------------------------

#[test]
fn session_and_slot_rules() {
    let srv = TestServer::start(&[]);
    let mut raw = Raw::connect(&srv);

    // Before SESSION_CREATE.
    let r = raw.call_with(0, 0, 1, &Request::GetRootHandle { export: b"" });
    assert_eq!(status(&r), Status::BadSession);
    let r = raw.call_with(12345, 0, 1, &Request::Null);
    assert_eq!(status(&r), Status::BadSession, "NULL naming a session that does not exist");
    let r = raw.call_with(0, 0, 0, &Request::SessionDestroy);
    assert_eq!(status(&r), Status::BadSession);

    let s = raw.create(65536, 4, AuthMethod::None).expect("session");
    assert_eq!(s.slots, 4);
    let sid = raw.sid;
    assert_ne!(sid, 0);
    // A second SESSION_CREATE on the same connection is refused.
    let m = raw.create_req(65536, 4, AuthMethod::None);
    assert_eq!(status(&raw.roundtrip(&m)), Status::Inval);

    // Wrong session id.
    let r = raw.call_with(sid ^ 0x10, 0, 1, &Request::Null);
    assert_eq!(status(&r), Status::BadSession);
    // Slot beyond the grant.
    for slot in [4, 5, 1024, u32::MAX] {
        let r = raw.call_with(sid, slot, 1, &Request::Null);
        assert_eq!(status(&r), Status::BadSlot, "slot {slot}");
    }
    // Wrong sequence ids (the first valid one is 1).
    for seq in [0, 2, 3, u32::MAX] {
        let r = raw.call_with(sid, 0, seq, &Request::Null);
        assert_eq!(status(&r), Status::SeqMisordered, "seq {seq}");
    }
    // None of the refusals consumed anything: seq 1 executes.
    assert_eq!(status(&raw.call(0, &Request::Null)), Status::Ok);
    // Retransmission of seq 1: NULL is idempotent, so it is executed again.
    let r = raw.call_with(sid, 0, 1, &Request::Null);
    assert_eq!(status(&r), Status::Ok, "replay of an idempotent op");
    // A different request on the same slot and sequence id is refused.
    let r = raw.call_with(sid, 0, 1, &Request::GetRootHandle { export: b"" });
    assert_eq!(status(&r), Status::SeqFalseRetry, "false retry");
    assert_eq!(status(&raw.call(0, &Request::Null)), Status::Ok, "seq 2 after the replays");

    // Slot busy: a WRITE_DIRECT whose pull we do not answer keeps slot 0 busy.
    let root = raw.root();
    let open_id =
        raw.open(root, b"pulled", open_flags::READ | open_flags::WRITE | open_flags::CREATE);
    let data = common::pattern(0, 100, 3);
    let busy_seq = raw.seq[0];
    let wd = raw.next(
        0,
        &Request::WriteDirect {
            open_id,
            offset: 0,
            len: 100,
            stable: false,
            region: RemoteRegion { key: 777, offset: 40 },
        },
    );
    raw.send_msg(&wd);
    let (get, payload) = raw.frame();
    assert_eq!((get.kind, get.len, get.key, get.offset), (FrameKind::Get, 100, 777, 40), "{get:?}");
    assert!(payload.is_empty());
    raw.expect_silent(Duration::from_millis(200), "no reply while the pull is outstanding");
    // Same slot, next sequence id, while the first is in flight.
    let r = raw.call_with(sid, 0, busy_seq + 1, &Request::Null);
    let h = reply_header(&r);
    assert_eq!(h.status, Status::SlotBusy);
    assert_eq!(Status::SlotBusy.describe(), "too many outstanding requests (slot busy)");
    assert_eq!((h.slot_id, h.sequence_id), (0, busy_seq + 1));
    // Same slot, same sequence id (a duplicate while executing): dropped without an
    // answer; the original's reply answers it.
    raw.send_msg(&wd);
    raw.expect_silent(
        Duration::from_millis(200),
        "a duplicate of an executing request gets no reply of its own",
    );
    // Other slots are unaffected.
    assert_eq!(status(&raw.call(1, &Request::GetAttr { fh: root })), Status::Ok);
    assert_eq!(status(&raw.call(3, &Request::Null)), Status::Ok);
    // Now answer the pull: the write completes on slot 0 with the busy sequence id.
    raw.write(&frame_bytes(
        FrameHeader { kind: FrameKind::GetResp, len: 100, key: 0, offset: 0, tag: get.tag },
        &data,
    ));
    let r = raw.reply();
    let (h, reply) = decode_reply(&r, MAX).unwrap();
    assert_eq!((h.slot_id, h.sequence_id), (0, busy_seq));
    assert_eq!(reply, Reply::Write { count: 100, stable: false, offset: 0 });
    assert_eq!(std::fs::read(srv.dir().join("pulled")).unwrap(), data);
    // A retransmission of the completed WRITE_DIRECT is answered from the reply cache,
    // byte for byte: no second pull (no GET frame comes), no second write (the file is
    // changed behind the server's back to prove it).
    std::fs::write(srv.dir().join("pulled"), b"changed").unwrap();
    assert_eq!(raw.roundtrip(&wd), r, "the cached reply, exactly");
    assert_eq!(std::fs::read(srv.dir().join("pulled")).unwrap(), b"changed");
    std::fs::write(srv.dir().join("pulled"), &data).unwrap();
    assert_eq!(status(&raw.call(0, &Request::Null)), Status::Ok, "slot 0 free again");

    // A refused pull (GET_RESP with key 1 = bad region): BAD_REGION, nothing written.
    let m = raw.next(
        0,
        &Request::WriteDirect {
            open_id,
            offset: 0,
            len: 50,
            stable: false,
            region: RemoteRegion { key: 1, offset: 0 },
        },
    );
    raw.send_msg(&m);
    let (get, _) = raw.frame();
    assert_eq!(get.kind, FrameKind::Get);
    raw.write(
        &FrameHeader { kind: FrameKind::GetResp, len: 0, key: 1, offset: 0, tag: get.tag }.encode(),
    );
    assert_eq!(status(&raw.reply()), Status::BadRegion);
    assert_eq!(std::fs::read(srv.dir().join("pulled")).unwrap(), data);
    assert_eq!(status(&raw.call(0, &Request::Null)), Status::Ok);

    // SESSION_DESTROY ends the session: later requests are BAD_SESSION, a new one can start.
    assert_eq!(status(&raw.call(2, &Request::SessionDestroy)), Status::Ok);
    assert_eq!(status(&raw.call_with(sid, 0, raw.seq[0], &Request::Null)), Status::BadSession);
    raw.create(65536, 2, AuthMethod::None).expect("a new session after SESSION_DESTROY");
    assert_ne!(raw.sid, sid);
    assert_eq!(status(&raw.call(1, &Request::Null)), Status::Ok);
    assert_serves(&srv, "session rules");
}

#[test]
fn broken_pulls() {
    let srv = TestServer::start(&[]);
    let setup = |srv: &TestServer| {
        let mut raw = Raw::connect(srv);
        raw.create(65536, 4, AuthMethod::None).unwrap();
        let root = raw.root();
        let open_id = raw.open(root, b"target", open_flags::WRITE | open_flags::CREATE);
        let m = raw.next(
            1,
            &Request::WriteDirect {
                open_id,
                offset: 0,
                len: 64,
                stable: true,
                region: RemoteRegion { key: 9, offset: 0 },
            },
        );
        raw.send_msg(&m);
        let (get, _) = raw.frame();
        assert_eq!(get.kind, FrameKind::Get);
        (raw, get)
    };

    // GET_RESP of the wrong length: protocol violation, connection closed.
    let (mut raw, get) = setup(&srv);
    raw.write(&frame_bytes(
        FrameHeader { kind: FrameKind::GetResp, len: 10, key: 0, offset: 0, tag: get.tag },
        &[1; 10],
    ));
    raw.expect_closed("GET_RESP length differs");
    assert_serves(&srv, "short GET_RESP");

    // GET_RESP naming another tag.
    let (mut raw, get) = setup(&srv);
    raw.write(&frame_bytes(
        FrameHeader { kind: FrameKind::GetResp, len: 64, key: 0, offset: 0, tag: get.tag + 1 },
        &[1; 64],
    ));
    raw.expect_closed("GET_RESP for another tag");
    assert_serves(&srv, "GET_RESP wrong tag");

    // A refusal that still carries a payload.
    let (mut raw, get) = setup(&srv);
    raw.write(&frame_bytes(
        FrameHeader { kind: FrameKind::GetResp, len: 64, key: 1, offset: 0, tag: get.tag },
        &[1; 64],
    ));
    raw.expect_closed("refused GET_RESP with payload");
    assert_serves(&srv, "refused GET_RESP with payload");

    // The client disappears while the pull is in flight.
    let (raw, _) = setup(&srv);
    drop(raw);
    assert_serves(&srv, "disconnect during a pull");

    // SESSION_DESTROY while the pull is in flight, then the late GET_RESP.
    let (mut raw, get) = setup(&srv);
    assert_eq!(status(&raw.call(0, &Request::SessionDestroy)), Status::Ok);
    raw.write(&frame_bytes(
        FrameHeader { kind: FrameKind::GetResp, len: 64, key: 0, offset: 0, tag: get.tag },
        &[1; 64],
    ));
    // Either answered or closed; it must not take the server down.
    raw.s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut sink = [0u8; 256];
    let _ = raw.s.read(&mut sink);
    drop(raw);
    assert_serves(&srv, "GET_RESP after SESSION_DESTROY");
    assert!(std::fs::read(srv.dir().join("target")).unwrap().iter().all(|&b| b == 1 || b == 0));
}

// ------------------------------------------------------------------------------------
// 4. Oversized messages
// ------------------------------------------------------------------------------------

#[test]
fn oversized_messages() {
    let srv = TestServer::start(&[]);

    // The client library refuses to encode a message above the negotiated maximum.
    let mut c = srv.client_with(|cfg| cfg.msg_size_bytes_max = limits::MSG_SIZE_BYTES_MIN).unwrap();
    assert_eq!(c.msg_size_bytes_max(), limits::MSG_SIZE_BYTES_MIN as usize);
    let f = c.open("big", OpenOptions::read_write().create(true)).unwrap();
    let data = vec![7u8; 10_000];
    let err = c
        .raw_call(&Request::WriteInline {
            open_id: f.open_id(),
            offset: 0,
            stable: false,
            data: &data,
        })
        .unwrap_err();
    assert!(matches!(err, Error::Protocol(ref m) if m.to_string().contains("exceeds")), "{err:?}");
    c.null().expect("the client is still usable after a refused encode");
    // The blocking API splits it instead (inline threshold below the message size).
    assert_eq!(c.pwrite(&f, &data, 0).unwrap(), data.len());
    assert!(c.inline_threshold() + 1024 <= c.msg_size_bytes_max());
    c.close(f).unwrap();
    let mut buf = Vec::new();
    let h = Header::request(Opcode::WriteInline, 1, 0, 1, 0);
    let e = encode_request(
        &h,
        &Request::WriteInline { open_id: 1, offset: 0, stable: false, data: &data },
        &mut buf,
        8192,
    )
    .unwrap_err();
    assert!(matches!(e, dafs_proto::codec::EncodeError::TooBig { max: 8192, .. }));
    assert!(buf.is_empty());

    // Raw: negotiate 8 KiB, then send a 9 KiB message -> the connection is closed.
    let mut raw = Raw::connect(&srv);
    let s = raw.create(limits::MSG_SIZE_BYTES_MIN, 2, AuthMethod::None).unwrap();
    assert_eq!(s.msg_size_bytes_max, limits::MSG_SIZE_BYTES_MIN);
    let root = raw.root();
    let open_id = raw.open(root, b"big", open_flags::READ | open_flags::WRITE);
    // Inline read whose reply could not fit: MSG_TOO_BIG status, session fine.
    let r =
        raw.call(0, &Request::ReadInline { open_id, offset: 0, len: limits::MSG_SIZE_BYTES_MIN });
    assert_eq!(status(&r), Status::MsgTooBig);
    assert_eq!(
        status(&raw.call(0, &Request::ReadInline { open_id, offset: 0, len: 4096 })),
        Status::Ok
    );
    let big = vec![1u8; 9000];
    let m = raw.next(0, &Request::WriteInline { open_id, offset: 0, stable: false, data: &big });
    assert!(m.len() > limits::MSG_SIZE_BYTES_MIN as usize);
    raw.send_msg(&m);
    raw.expect_closed("message above the negotiated maximum");
    assert_serves(&srv, "oversized message");

    // Raw: a frame within the limit whose header announces fixed+heap beyond it.
    let mut raw = Raw::connect(&srv);
    raw.create(limits::MSG_SIZE_BYTES_MIN, 2, AuthMethod::None).unwrap();
    let mut m = raw.next(0, &Request::Null);
    m[40..44].copy_from_slice(&9000u32.to_le_bytes()); // heap_len
    raw.send_msg(&m);
    raw.expect_closed("header announcing more than the negotiated maximum");
    // Same with lengths that overflow u32 when added.
    let mut raw = Raw::connect(&srv);
    raw.create(limits::MSG_SIZE_BYTES_MIN, 2, AuthMethod::None).unwrap();
    let mut m = raw.next(0, &Request::Null);
    m[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
    m[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
    raw.send_msg(&m);
    raw.expect_closed("fixed_len + heap_len overflowing");

    // The file written through the library is intact, and the library client still works.
    assert_eq!(std::fs::read(srv.dir().join("big")).unwrap(), data);
    assert!(c.stat("/big").unwrap().size == data.len() as u64);
    assert_serves(&srv, "oversized headers");
}

// ------------------------------------------------------------------------------------
// 6. Direct placement into memory the client never registered
// ------------------------------------------------------------------------------------

#[test]
fn read_direct_with_unregistered_key_is_placed_by_key() {
    let srv = TestServer::start(&[]);
    std::fs::write(srv.dir().join("hello"), b"hello world").unwrap();
    let mut raw = Raw::connect(&srv);
    raw.create(65536, 2, AuthMethod::None).unwrap();
    let root = raw.root();
    let open_id = raw.open(root, b"hello", open_flags::READ);
    let m = raw.next(
        1,
        &Request::ReadDirect {
            open_id,
            offset: 0,
            len: 4096,
            region: RemoteRegion { key: 12345, offset: 7 },
        },
    );
    raw.send_msg(&m);
    // The server names the key it was given; refusing is the client's job.
    let (put, payload) = raw.frame();
    assert_eq!((put.kind, put.key, put.offset, put.len), (FrameKind::Put, 12345, 7, 11), "{put:?}");
    assert_eq!(payload, b"hello world");
    let r = raw.reply();
    let (h, reply) = decode_reply(&r, MAX).unwrap();
    assert_eq!(h.slot_id, 1);
    assert_eq!(reply, Reply::ReadDirect { count: 11, eof: true });
    // A copy of the READ_DIRECT on the connection that carried its reply is a duplicate,
    // not a retransmission (that follows a reconnect, and executes again): nothing is
    // placed a second time, after the client had its answer and may have reused the
    // memory. Before, it was executed again; over `ofi+shm` into a region the client
    // had withdrawn, which stalled the connection (`session_recovery::exactly_once`).
    raw.send_msg(&m);
    let probe = raw.next(0, &Request::Null);
    raw.send_msg(&probe);
    let (fh, payload) = raw.frame();
    assert_eq!(fh.kind, FrameKind::Msg, "the copy placed data again: {fh:?}");
    let (h, reply) = decode_reply(&payload, MAX).unwrap();
    assert_eq!((h.slot_id, reply), (0, Reply::Empty), "only the probe is answered");
    // Past EOF: nothing placed (at most an empty PUT), count 0.
    let m = raw.next(
        1,
        &Request::ReadDirect {
            open_id,
            offset: 100,
            len: 4096,
            region: RemoteRegion { key: 12345, offset: 0 },
        },
    );
    raw.send_msg(&m);
    let (mut fh, mut payload) = raw.frame();
    if fh.kind == FrameKind::Put {
        assert_eq!((fh.len, fh.key), (0, 12345), "{fh:?}");
        (fh, payload) = raw.frame();
    }
    assert_eq!(fh.kind, FrameKind::Msg);
    assert_eq!(decode_reply(&payload, MAX).unwrap().1, Reply::ReadDirect { count: 0, eof: true });
    // Above the server's direct maximum: INVAL.
    let m = raw.next(
        1,
        &Request::ReadDirect {
            open_id,
            offset: 0,
            len: limits::DIRECT_BYTES_MAX,
            region: RemoteRegion { key: 1, offset: 0 },
        },
    );
    assert_eq!(status(&raw.roundtrip(&m)), Status::Inval);
    assert_serves(&srv, "unregistered READ_DIRECT");
}

/// A name over 255 bytes, or a path over 4096, is ENAMETOOLONG (as on a local file
/// system), not a malformed message.
#[test]
fn long_names_answer_nametoolong() {
    let srv = TestServer::start(&[]);
    let mut raw = Raw::connect(&srv);
    raw.create(65536, 2, AuthMethod::None).unwrap();
    let root = raw.root();
    let long = vec![b'n'; 256];
    let r = raw.call(0, &Request::Lookup { dir: root, path: &long, follow: true });
    assert_eq!(status(&r), Status::NameTooLong);
    let r = raw.call(
        0,
        &Request::Create {
            dir: root,
            ftype: dafs_proto::FileType::Regular,
            mode: 0o644,
            exclusive: true,
            name: &long,
        },
    );
    assert_eq!(status(&r), Status::NameTooLong);
    let deep: Vec<u8> = std::iter::repeat_n(&b"d/"[..], 2100).flatten().copied().collect();
    let r = raw.call(0, &Request::Lookup { dir: root, path: &deep, follow: true });
    assert_eq!(status(&r), Status::NameTooLong);
    let r = raw.call(0, &Request::Symlink { dir: root, name: b"s", target: &deep });
    assert_eq!(status(&r), Status::NameTooLong);
    // 255 bytes is a valid name: it is looked up (and not found).
    let ok = vec![b'n'; 255];
    let r = raw.call(0, &Request::Lookup { dir: root, path: &ok, follow: true });
    assert_eq!(status(&r), Status::NoEnt);
    assert_serves(&srv, "long names");
}
