//! Session set-up and binding under abuse: SESSION_CREATE parameters, failed
//! authentication, SESSION_BIND takeover attempts. And the client side against a fake
//! server socket: placements into memory it never registered are refused.

mod abuse;
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::TestServer;
use dafs_client::Error;

use dafs_proto::{
    auth, decode_reply, limits, AuthMethod, FileHandle, Header, Opcode, Reply, Request, Status,
};
use dafs_transport::frame::{FrameHeader, FrameKind, FRAME_HEADER_LEN};

use abuse::*;

mod fake_server {
    use super::*;
    use dafs_transport::tcp::TcpClient;
    use dafs_transport::{Access, ClientTransport, TransportError, Wait};

    fn pair() -> (TcpClient, TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpClient::connect(&l.local_addr().unwrap().to_string(), Duration::from_secs(5))
            .unwrap();
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        (c, s)
    }

    fn put(key: u64, offset: u64, data: &[u8]) -> Vec<u8> {
        frame_bytes(
            FrameHeader { kind: FrameKind::Put, len: data.len() as u32, key, offset, tag: 0 },
            data,
        )
    }

    const CANARY: u8 = 0xcc;

    /// 64 bytes of canaries; bytes 16..48 are registered.
    struct Guarded {
        mem: Box<[u8; 64]>,
        key: u64,
    }

    fn guarded(c: &mut TcpClient, access: Access) -> Guarded {
        let mut mem = Box::new([CANARY; 64]);
        // SAFETY: the Box outlives the client in every test (declared before use,
        // dropped after the client is dropped or the region deregistered), and the test
        // reads it only while no placement can be in progress.
        let key = unsafe { c.register(mem.as_mut_ptr().add(16), 32, access).unwrap() };
        Guarded { mem, key }
    }

    #[test]
    fn put_for_an_unregistered_key_is_refused() {
        let (mut c, mut s) = pair();
        let g = guarded(&mut c, Access::READ_WRITE);
        let unknown = g.key.wrapping_add(1000);
        s.write_all(&put(unknown, 0, &[0x11; 16])).unwrap();
        // A message after it must never be delivered as if nothing happened.
        s.write_all(&msg_frame(b"x")).unwrap();
        let err = c.recv(Wait::Timeout(Duration::from_secs(5))).unwrap_err();
        assert!(matches!(err, TransportError::Protocol(_)), "{err:?}");
        assert_eq!(c.stats().placements_refused, 1);
        assert_eq!(c.stats().placed_bytes, 0);
        assert!(g.mem.iter().all(|&b| b == CANARY), "memory changed: {:?}", &g.mem[..]);
        drop(c);
    }

    #[test]
    fn put_out_of_bounds_or_without_access_is_refused() {
        for (what, offset, len, access) in [
            ("one byte past the end", 1u64, 32usize, Access::READ_WRITE),
            ("starting at the end", 32, 1, Access::READ_WRITE),
            ("offset overflowing", u64::MAX, 2, Access::READ_WRITE),
            (
                "region without remote write",
                0,
                4,
                Access { remote_write: false, remote_read: true },
            ),
        ] {
            let (mut c, mut s) = pair();
            let g = guarded(&mut c, access);
            s.write_all(&put(g.key, offset, &vec![0x22; len])).unwrap();
            let err = c.recv(Wait::Timeout(Duration::from_secs(5))).unwrap_err();
            assert!(matches!(err, TransportError::Protocol(_)), "{what}: {err:?}");
            assert!(g.mem.iter().all(|&b| b == CANARY), "{what}: memory changed: {:?}", &g.mem[..]);
            drop(c);
        }
    }

    #[test]
    fn put_in_bounds_lands_exactly_there() {
        let (mut c, mut s) = pair();
        let g = guarded(&mut c, Access::READ_WRITE);
        // Whole region, then a piece in the middle, then a zero-length PUT at the end,
        // then a message: all in one burst.
        s.write_all(&put(g.key, 0, &[0x11; 32])).unwrap();
        s.write_all(&put(g.key, 8, &[0x22; 4])).unwrap();
        s.write_all(&put(g.key, 32, &[])).unwrap();
        s.write_all(&msg_frame(b"reply")).unwrap();
        let m = c
            .recv(Wait::Timeout(Duration::from_secs(5)))
            .unwrap()
            .expect("the message after the placements");
        assert_eq!(m, b"reply");
        let mut want = [CANARY; 64];
        want[16..48].fill(0x11);
        want[24..28].fill(0x22);
        assert_eq!(&g.mem[..], &want[..]);
        assert_eq!(c.stats().placed_bytes, 36);
        // After deregistration the same key is refused.
        c.deregister(g.key).unwrap();
        s.write_all(&put(g.key, 0, &[0x33; 4])).unwrap();
        assert!(matches!(
            c.recv(Wait::Timeout(Duration::from_secs(5))),
            Err(TransportError::Protocol(_))
        ));
        assert_eq!(&g.mem[..], &want[..]);
    }

    #[test]
    fn get_for_unregistered_memory_is_answered_with_a_refusal() {
        let (mut c, mut s) = pair();
        let g = guarded(&mut c, Access { remote_write: true, remote_read: false });
        for (key, offset, len) in [(g.key + 7, 0u64, 8u32), (g.key, 0, 8) /* no remote read */] {
            s.write_all(&FrameHeader { kind: FrameKind::Get, len, key, offset, tag: 99 }.encode())
                .unwrap();
            assert!(c.recv(Wait::Timeout(Duration::from_millis(200))).unwrap().is_none());
            let mut h = [0u8; FRAME_HEADER_LEN];
            s.read_exact(&mut h).unwrap();
            let fh = FrameHeader::decode(&h).unwrap();
            assert_eq!((fh.kind, fh.len, fh.key, fh.tag), (FrameKind::GetResp, 0, 1, 99), "{fh:?}");
        }
        assert_eq!(c.stats().pulled_bytes, 0);
        // A readable region is served, exactly the bytes asked for.
        let mut mem2 = [0u8; 16];
        for (i, b) in mem2.iter_mut().enumerate() {
            *b = i as u8;
        }
        // SAFETY: mem2 outlives the client's use of it (deregistered below).
        let k2 = unsafe { c.register(mem2.as_mut_ptr(), 16, Access::READ_WRITE).unwrap() };
        s.write_all(
            &FrameHeader { kind: FrameKind::Get, len: 4, key: k2, offset: 10, tag: 5 }.encode(),
        )
        .unwrap();
        assert!(c.recv(Wait::Timeout(Duration::from_millis(200))).unwrap().is_none());
        let mut h = [0u8; FRAME_HEADER_LEN];
        s.read_exact(&mut h).unwrap();
        let fh = FrameHeader::decode(&h).unwrap();
        assert_eq!((fh.kind, fh.len, fh.key, fh.tag), (FrameKind::GetResp, 4, 0, 5));
        let mut body = [0u8; 4];
        s.read_exact(&mut body).unwrap();
        assert_eq!(body, [10, 11, 12, 13]);
        c.deregister(k2).unwrap();
    }

    #[test]
    fn oversized_or_misdirected_frames_fail_the_client() {
        for (what, bytes) in [
            ("MSG above the maximum", FrameHeader::msg(MAX + 1).encode().to_vec()),
            ("empty MSG", FrameHeader::msg(0).encode().to_vec()),
            (
                "GET_RESP to a client",
                FrameHeader { kind: FrameKind::GetResp, len: 0, key: 0, offset: 0, tag: 1 }
                    .encode()
                    .to_vec(),
            ),
            ("unknown kind", vec![0x77; 32]),
            (
                "PUT above the direct maximum",
                FrameHeader {
                    kind: FrameKind::Put,
                    len: limits::DIRECT_BYTES_MAX + 1,
                    key: 1,
                    offset: 0,
                    tag: 0,
                }
                .encode()
                .to_vec(),
            ),
        ] {
            let (mut c, mut s) = pair();
            s.write_all(&bytes).unwrap();
            let r = c.recv(Wait::Timeout(Duration::from_secs(5)));
            assert!(r.is_err(), "{what}: {r:?}");
        }
        // The peer closing is reported as Closed.
        let (mut c, s) = pair();
        drop(s);
        assert!(matches!(
            c.recv(Wait::Timeout(Duration::from_secs(5))),
            Err(TransportError::Closed)
        ));
    }
}

// ------------------------------------------------------------------------------------
// 7. Session parameters and authentication
// ------------------------------------------------------------------------------------

#[test]
fn session_create_parameters() {
    // Lease 0: a session ends with its connection (the default keeps it for 90 s).
    let srv = TestServer::start(&["--max-sessions", "2", "--lease-secs", "0"]);
    let mut raw = Raw::connect(&srv);
    assert_eq!(
        raw.create(limits::MSG_SIZE_BYTES_MIN - 1, 4, AuthMethod::None).err(),
        Some(Status::Inval)
    );
    assert_eq!(raw.create(0, 4, AuthMethod::None).err(), Some(Status::Inval));
    assert_eq!(raw.create(65536, 0, AuthMethod::None).err(), Some(Status::Inval));
    // Auth method outside the enum: a body decode error.
    let mut m = raw.create_req(65536, 4, AuthMethod::None);
    m[56..60].copy_from_slice(&7u32.to_le_bytes());
    assert_eq!(status(&raw.roundtrip(&m)), Status::BadXdr);
    // Session flags outside the defined ones (bit 0 is RECLAIM).
    let mut m = raw.create_req(65536, 4, AuthMethod::None);
    m[60..64].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(status(&raw.roundtrip(&m)), Status::BadXdr);
    // A client id above the limit.
    raw.client_id = vec![b'c'; limits::CLIENT_ID_BYTES_MAX + 1];
    assert_eq!(raw.create(65536, 4, AuthMethod::None).err(), Some(Status::BadXdr));
    raw.client_id = b"ok".to_vec();
    // Huge requests are clamped to the server's limits.
    let s = raw.create(u32::MAX, u32::MAX, AuthMethod::None).unwrap();
    assert_eq!(
        s.msg_size_bytes_max,
        limits::MSG_SIZE_BYTES_DEFAULT,
        "server default msg_size_bytes_max"
    );
    assert_eq!(s.slots, 64, "server default slots_max");
    assert_eq!(s.auth, AuthMethod::None);
    // SESSION_AUTH on a server without a secret.
    let r = raw.call(0, &Request::SessionAuth { client_nonce: [1; 32], proof: [2; 32] });
    assert_eq!(status(&r), Status::Inval);
    assert_eq!(status(&raw.call(63, &Request::Null)), Status::Ok);

    // Session limit: this is session 1 of 2.
    let mut second = Raw::connect(&srv);
    second.create(65536, 1, AuthMethod::None).unwrap();
    let mut third = Raw::connect(&srv);
    assert_eq!(third.create(65536, 1, AuthMethod::None).err(), Some(Status::Limit));
    // Closing a connection frees its session.
    drop(second);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match third.create(65536, 1, AuthMethod::None) {
            Ok(_) => break,
            Err(Status::Limit) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(s) => panic!("session after a disconnect: {s:?}"),
        }
    }
    drop(third);
    drop(raw);
    assert_serves(&srv, "session parameters");
}

#[test]
fn authentication_failures() {
    let secret = b"correct horse battery staple";
    let srv = TestServer::start_with_secret(secret, &[]);
    let mut raw = Raw::connect(&srv);
    assert_eq!(raw.create(65536, 2, AuthMethod::None).err(), Some(Status::AuthRequired));
    let s = raw.create(65536, 2, AuthMethod::HmacSha256).expect("session with auth");
    assert_eq!(s.auth, AuthMethod::HmacSha256);
    // Nothing but session ops before authenticating.
    assert_eq!(status(&raw.call(0, &Request::GetRootHandle { export: b"" })), Status::AuthRequired);
    assert_eq!(status(&raw.call(0, &Request::Null)), Status::Ok, "NULL is allowed before auth");
    // A wrong proof.
    let cn = [9u8; 32];
    let wrong = auth::client_proof(b"not the secret", raw.sid, &s.nonce, &cn, &raw.client_id);
    assert_eq!(
        status(&raw.call(1, &Request::SessionAuth { client_nonce: cn, proof: wrong })),
        Status::AuthFailed
    );
    assert_eq!(status(&raw.call(1, &Request::GetRootHandle { export: b"" })), Status::AuthRequired);
    // A proof for the right secret but another client id / session.
    let other_id = auth::client_proof(secret, raw.sid, &s.nonce, &cn, b"someone else");
    assert_eq!(
        status(&raw.call(0, &Request::SessionAuth { client_nonce: cn, proof: other_id })),
        Status::AuthFailed
    );
    let other_sid = auth::client_proof(secret, raw.sid ^ 2, &s.nonce, &cn, &raw.client_id);
    assert_eq!(
        status(&raw.call(0, &Request::SessionAuth { client_nonce: cn, proof: other_sid })),
        Status::AuthFailed
    );
    assert_eq!(
        status(&raw.call(0, &Request::GetAttr { fh: FileHandle([0; FileHandle::LEN]) })),
        Status::AuthRequired
    );
    // The right proof: the server proves itself back, and ops work.
    let good = auth::client_proof(secret, raw.sid, &s.nonce, &cn, &raw.client_id);
    let r = raw.call(1, &Request::SessionAuth { client_nonce: cn, proof: good });
    match decode_reply(&r, MAX).unwrap().1 {
        Reply::SessionAuth { server_proof } => assert!(auth::verify_server(
            secret,
            raw.sid,
            &s.nonce,
            &cn,
            &raw.client_id,
            &server_proof
        )),
        other => panic!("SESSION_AUTH: {other:?}"),
    }
    assert_eq!(status(&raw.call(1, &Request::GetRootHandle { export: b"" })), Status::Ok);
    assert_eq!(
        status(&raw.call(0, &Request::SessionAuth { client_nonce: cn, proof: good })),
        Status::Inval,
        "authenticating twice"
    );

    // The library: without a secret it gets an auth error; with a wrong one too.
    let e = srv.client_with(|cfg| cfg.secret = None).err().expect("no secret must fail");
    assert!(matches!(e, Error::Auth(_)), "{e:?}");
    let e = srv
        .client_with(|cfg| cfg.secret = Some(b"wrong secret!".to_vec()))
        .err()
        .expect("wrong secret must fail");
    assert!(matches!(e, Error::Status(Status::AuthFailed)), "{e:?}");
    assert_serves(&srv, "auth failures");
}

/// SESSION_BIND from a raw client: what a hijacker, a confused client or a replayed bind
/// gets, and that the legitimate owner can still bind afterwards.
#[test]
fn session_bind_abuse() {
    let secret = b"correct horse battery staple";
    let srv = TestServer::start_with_secret(secret, &[]);
    // The owner: a session, authenticated, with one request executed on slot 0.
    let mut owner = Raw::connect(&srv);
    let s = owner.create(65536, 2, AuthMethod::HmacSha256).unwrap();
    let sid = owner.sid;
    let cn = [5u8; 32];
    let good = auth::client_proof(secret, sid, &s.nonce, &cn, &owner.client_id);
    assert_eq!(
        status(&owner.call(0, &Request::SessionAuth { client_nonce: cn, proof: good })),
        Status::Ok
    );
    let id = owner.client_id.clone();
    // The bind key: the shared secret and the session token only the owner received.
    let bind = |sid: u64, nonce: &[u8; 32], cn: [u8; 32], secret: &[u8], client: &[u8]| {
        let proof =
            auth::bind_proof(&auth::bind_key(Some(secret), &s.token), sid, nonce, &cn, client);
        enc(
            &Header::request(Opcode::SessionBind, sid, 0, 0, 0),
            &Request::SessionBind { client_nonce: cn, proof, client_id: client },
        )
    };
    let mut other = Raw::connect(&srv);
    // Unknown session, other client id, wrong secret: refused, nothing changes.
    assert_eq!(
        status(&other.roundtrip(&bind(sid ^ 4, &s.nonce, [1; 32], secret, &id))),
        Status::BadSession
    );
    assert_eq!(
        status(&other.roundtrip(&bind(sid, &s.nonce, [1; 32], secret, b"intruder"))),
        Status::BadSession
    );
    // Without the secret, a bind cannot even disturb the live owner.
    assert_eq!(
        status(&other.roundtrip(&bind(sid, &s.nonce, [1; 32], b"not the secret", &id))),
        Status::AuthFailed
    );
    assert_eq!(
        status(&owner.call(1, &Request::Null)),
        Status::Ok,
        "the owner's connection is untouched"
    );
    // A correct bind while the owner's connection is alive: DELAY, and the server closes
    // the owner's connection (the session is parked, not lost).
    assert_eq!(status(&other.roundtrip(&bind(sid, &s.nonce, [1; 32], secret, &id))), Status::Delay);
    let mut b = [0u8; 1];
    owner.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(owner.s.read(&mut b).unwrap_or(0), 0, "the old connection is closed");
    drop(owner);
    assert_eq!(
        status(&other.roundtrip(&bind(sid, &s.nonce, [1; 32], b"not the secret", &id))),
        Status::AuthFailed
    );
    // A SESSION_AUTH transcript replayed as a bind proof does not verify either.
    let replayed = enc(
        &Header::request(Opcode::SessionBind, sid, 0, 0, 0),
        &Request::SessionBind { client_nonce: cn, proof: good, client_id: &id },
    );
    assert_eq!(status(&other.roundtrip(&replayed)), Status::AuthFailed);
    // The right proof binds, and the session continues: slot 0's next sequence id is 2.
    let r = other.roundtrip(&bind(sid, &s.nonce, [2; 32], secret, &id));
    let (h, reply) = decode_reply(&r, MAX).unwrap();
    assert_eq!(h.session_id, sid);
    let Reply::SessionBind { slots, next_nonce, server_proof, .. } = reply else {
        panic!("SESSION_BIND: {reply:?}")
    };
    assert_eq!(slots, 2);
    let key = auth::bind_key(Some(secret), &s.token);
    assert_eq!(server_proof, auth::bind_server_proof(&key, sid, &[2; 32], &next_nonce, &id));
    other.sid = sid;
    other.seq = vec![2, 1];
    assert_eq!(
        status(&other.call(0, &Request::Null)),
        Status::Ok,
        "bound: no re-authentication needed"
    );
    // The old bind message cannot be replayed: the nonce rotated.
    let mut third = Raw::connect(&srv);
    drop(other);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        status(&third.roundtrip(&bind(sid, &s.nonce, [2; 32], secret, &id))),
        Status::AuthFailed
    );
    assert_eq!(status(&third.roundtrip(&bind(sid, &next_nonce, [3; 32], secret, &id))), Status::Ok);
    // A second bind (or create) on a connection that has a session is refused.
    assert_eq!(
        status(&third.roundtrip(&bind(sid, &next_nonce, [3; 32], secret, &id))),
        Status::Inval
    );
    assert_serves(&srv, "bind abuse");
}

/// Without a shared secret, a session still belongs to the client that created it: a
/// bind must prove the session token only the creator received (a guessed session id and
/// client id are not enough to take a session over), and a wrong token disturbs nothing.
#[test]
fn session_bind_without_secret_needs_the_token() {
    let srv = TestServer::start(&[]);
    let mut owner = Raw::connect(&srv);
    let s = owner.create(65536, 2, AuthMethod::None).unwrap();
    let (sid, id) = (owner.sid, owner.client_id.clone());
    assert_eq!(status(&owner.call(0, &Request::Null)), Status::Ok);
    let bind = |token: &[u8; 32], cn: [u8; 32]| {
        let proof = auth::bind_proof(&auth::bind_key(None, token), sid, &s.nonce, &cn, &id);
        enc(
            &Header::request(Opcode::SessionBind, sid, 0, 0, 0),
            &Request::SessionBind { client_nonce: cn, proof, client_id: &id },
        )
    };
    let mut thief = Raw::connect(&srv);
    // What a client without the token can send: a zero proof (what protocol v1 accepted
    // without a secret) or a proof under a guessed token.
    let zero = enc(
        &Header::request(Opcode::SessionBind, sid, 0, 0, 0),
        &Request::SessionBind { client_nonce: [0; 32], proof: [0; 32], client_id: &id },
    );
    assert_eq!(status(&thief.roundtrip(&zero)), Status::AuthFailed);
    assert_eq!(status(&thief.roundtrip(&bind(&[0; 32], [1; 32]))), Status::AuthFailed);
    assert_eq!(status(&owner.call(1, &Request::Null)), Status::Ok, "the owner is undisturbed");
    // The owner, reconnecting with its token, gets its session back.
    drop(owner);
    std::thread::sleep(Duration::from_millis(100));
    let mut again = Raw::connect(&srv);
    let r = again.roundtrip(&bind(&s.token, [2; 32]));
    let (_, reply) = decode_reply(&r, MAX).unwrap();
    let Reply::SessionBind { next_nonce, server_proof, .. } = reply else {
        panic!("SESSION_BIND: {reply:?}")
    };
    let key = auth::bind_key(None, &s.token);
    assert_eq!(server_proof, auth::bind_server_proof(&key, sid, &[2; 32], &next_nonce, &id));
    assert_serves(&srv, "bind without secret");
}
