//! Hostile and broken peers. Raw `TcpStream` clients speak the 32-byte frame format
//! by hand and send malformed, out-of-order, oversized or never-read traffic; after
//! every case a fresh, well-behaved `dafs_client::Client` must still be served (stat of
//! the root plus a write and read back), and the `dafsd` process must still be alive.
//!
//! The last group drives `dafs_transport::tcp::TcpClient` against a fake server socket
//! to check that the client side refuses placements into memory it never registered.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::TestServer;
use dafs_client::{Error, OpenOptions, Provider};
use dafs_proto::header::FLAG_REPLY;
use dafs_proto::types::open_flags;
use dafs_proto::{
    auth, decode_reply, encode_request, limits, AuthMethod, FileHandle, Header, Opcode,
    RemoteRegion, Reply, Request, Status,
};
use dafs_transport::frame::{FrameHeader, FrameKind, FRAME_HEADER_LEN};

const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;

// ------------------------------------------------------------------------------------
// Raw client
// ------------------------------------------------------------------------------------

fn enc(h: &Header, req: &Request) -> Vec<u8> {
    let mut b = Vec::new();
    encode_request(h, req, &mut b, MAX).expect("test request encodes");
    b
}

fn frame_bytes(fh: FrameHeader, payload: &[u8]) -> Vec<u8> {
    let mut v = fh.encode().to_vec();
    v.extend_from_slice(payload);
    v
}

fn msg_frame(msg: &[u8]) -> Vec<u8> {
    frame_bytes(FrameHeader::msg(msg.len()), msg)
}

/// Status of an encoded reply.
fn status(reply: &[u8]) -> Status {
    decode_reply(reply, MAX)
        .unwrap_or_else(|e| panic!("undecodable reply ({e}): {reply:?}"))
        .1
        .status()
}

fn reply_header(reply: &[u8]) -> Header {
    decode_reply(reply, MAX).expect("decodable reply").0
}

struct Raw {
    s: TcpStream,
    sid: u64,
    /// Next sequence id per slot.
    seq: Vec<u32>,
    client_id: Vec<u8>,
}

struct Created {
    msg_size_bytes_max: u32,
    slots: u32,
    auth: AuthMethod,
    nonce: [u8; 32],
    direct_bytes_max: u32,
    /// The session token: with the shared secret (if any), the key of SESSION_BIND proofs.
    token: [u8; 32],
}

impl Raw {
    fn connect(srv: &TestServer) -> Raw {
        Raw::from_stream(TcpStream::connect(srv.addr()).expect("connect"))
    }

    fn from_stream(s: TcpStream) -> Raw {
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw { s, sid: 0, seq: Vec::new(), client_id: b"raw-abuser".to_vec() }
    }

    fn write(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write to server")
    }

    fn send_msg(&mut self, msg: &[u8]) {
        self.write(&msg_frame(msg))
    }

    fn frame(&mut self) -> (FrameHeader, Vec<u8>) {
        let mut h = [0u8; FRAME_HEADER_LEN];
        self.s.read_exact(&mut h).expect("frame header from server");
        let fh = FrameHeader::decode(&h).expect("server frame header decodes");
        // A GET's len is what it asks for; nothing follows its header.
        let n = if fh.kind == FrameKind::Get { 0 } else { fh.len as usize };
        let mut payload = vec![0u8; n];
        self.s.read_exact(&mut payload).expect("frame payload from server");
        (fh, payload)
    }

    /// The next frame, which must be a MSG carrying a reply.
    fn reply(&mut self) -> Vec<u8> {
        let (fh, payload) = self.frame();
        assert_eq!(fh.kind, FrameKind::Msg, "expected a reply message, got {fh:?}");
        payload
    }

    fn roundtrip(&mut self, msg: &[u8]) -> Vec<u8> {
        self.send_msg(msg);
        self.reply()
    }

    fn create_req(&self, msg_size_bytes_max: u32, slots: u32, auth: AuthMethod) -> Vec<u8> {
        let req = Request::SessionCreate {
            msg_size_bytes_max,
            slots,
            auth,
            flags: 0,
            client_id: &self.client_id,
        };
        enc(&Header::request(Opcode::SessionCreate, 0, 0, 0, 0), &req)
    }

    /// SESSION_CREATE; on success the session is remembered.
    fn create(
        &mut self,
        msg_size_bytes_max: u32,
        slots: u32,
        auth: AuthMethod,
    ) -> Result<Created, Status> {
        let m = self.create_req(msg_size_bytes_max, slots, auth);
        let r = self.roundtrip(&m);
        let (h, reply) = decode_reply(&r, MAX).expect("SESSION_CREATE reply decodes");
        match reply {
            Reply::SessionCreate {
                msg_size_bytes_max,
                slots,
                auth,
                server_nonce,
                direct_bytes_max,
                session_token,
                ..
            } => {
                self.sid = h.session_id;
                self.seq = vec![1; slots as usize];
                Ok(Created {
                    msg_size_bytes_max,
                    slots,
                    auth,
                    nonce: server_nonce,
                    direct_bytes_max,
                    token: session_token,
                })
            }
            Reply::Error(s) => Err(s),
            other => panic!("unexpected SESSION_CREATE reply {other:?}"),
        }
    }

    /// Encode `req` on `slot` with that slot's next sequence id (which then advances).
    fn next(&mut self, slot: u32, req: &Request) -> Vec<u8> {
        let seq = self.seq[slot as usize];
        self.seq[slot as usize] += 1;
        enc(&Header::request(req.opcode(), self.sid, slot, seq, slot), req)
    }

    /// Request on `slot` with the right sequence id; returns the reply.
    fn call(&mut self, slot: u32, req: &Request) -> Vec<u8> {
        let m = self.next(slot, req);
        self.roundtrip(&m)
    }

    /// Request with an explicit session, slot and sequence id (slot state untouched).
    fn call_with(&mut self, sid: u64, slot: u32, seq: u32, req: &Request) -> Vec<u8> {
        let m = enc(&Header::request(req.opcode(), sid, slot, seq, 0), req);
        self.roundtrip(&m)
    }

    fn root(&mut self) -> FileHandle {
        let r = self.call(0, &Request::GetRootHandle { export: b"" });
        match decode_reply(&r, MAX).unwrap().1 {
            Reply::Handle { fh, .. } => fh,
            other => panic!("GET_ROOTHANDLE: {other:?}"),
        }
    }

    fn open(&mut self, dir: FileHandle, name: &[u8], flags: u32) -> u64 {
        let r = self.call(0, &Request::Open { fh: dir, flags, mode: 0o644, name, key: b"" });
        match decode_reply(&r, MAX).unwrap().1 {
            Reply::Open { open_id, .. } => open_id,
            other => panic!("OPEN: {other:?}"),
        }
    }

    /// The server must close the connection: a read returns EOF (or a reset) within 5 s.
    /// Anything the server still sent before closing is skipped.
    fn expect_closed(&mut self, what: &str) {
        self.s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut buf = [0u8; 4096];
        loop {
            match self.s.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(_) => return, // reset
            }
            assert!(
                Instant::now() < deadline,
                "{what}: server did not close the connection within 5 s"
            );
        }
    }

    /// The connection stays open: nothing arrives and no EOF within `d`.
    fn expect_silent(&mut self, d: Duration, what: &str) {
        self.s.set_read_timeout(Some(d)).unwrap();
        let mut b = [0u8; 1];
        match self.s.read(&mut b) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            other => panic!("{what}: expected silence, got {other:?}"),
        }
        self.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
}

// ------------------------------------------------------------------------------------
// Server health
// ------------------------------------------------------------------------------------

fn server_alive(srv: &TestServer) {
    let pid = srv.pid().expect("server running");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|_| panic!("dafsd (pid {pid}) is gone\nstderr:\n{}", srv.stderr_log()));
    let state = stat.rsplit_once(')').map(|(_, r)| r.trim_start().chars().next().unwrap()).unwrap();
    assert!(state != 'Z' && state != 'X', "dafsd exited\nstderr:\n{}", srv.stderr_log());
    let log = srv.stderr_log();
    assert!(!log.contains("panicked"), "dafsd panicked:\n{log}");
}

/// A fresh, well-behaved client is served: stat of "/", then a small (inline) and a
/// large (direct) write read back byte for byte.
fn assert_serves(srv: &TestServer, case: &str) {
    // Over TCP (the listener the abuse went to), and with the default provider choice
    // (which may switch a same-host client to shared memory).
    assert_serves_with(srv, case, Provider::Tcp);
    assert_serves_with(srv, case, Provider::Auto);
}

fn assert_serves_with(srv: &TestServer, case: &str, provider: Provider) {
    server_alive(srv);
    // A session freed by a just-closed connection is released asynchronously.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut c = loop {
        match srv.client_with(|cfg| cfg.provider = provider) {
            Ok(c) => break c,
            Err(Error::Status(Status::Limit)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!(
                "after {case}: connect ({provider:?}) failed: {e}\nstderr:\n{}",
                srv.stderr_log()
            ),
        }
    };
    if provider == Provider::Tcp {
        assert_eq!(c.provider(), "tcp");
    }
    assert!(c.stat("/").unwrap_or_else(|e| panic!("after {case}: stat /: {e}")).is_dir());
    let name = format!("health-{}", case.replace(|ch: char| !ch.is_ascii_alphanumeric(), "_"));
    let f = c.open(&name, OpenOptions::read_write().create(true).truncate(true)).unwrap();
    for (off, len) in [(0u64, 100usize), (4096, 40_000)] {
        let data = common::pattern(off, len, 0x5a);
        assert_eq!(c.pwrite(&f, &data, off).unwrap(), len, "after {case}");
        let mut back = vec![0u8; len];
        assert_eq!(c.pread(&f, &mut back, off).unwrap(), len, "after {case}");
        assert!(back == data, "after {case}: data read back differs");
    }
    c.close(f).unwrap();
    c.remove(&name).unwrap();
    server_alive(srv);
}

/// User + system CPU time of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    let after_comm = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = after_comm.split_whitespace().collect();
    // after the comm: state is field 3, utime 14, stime 15 (1-based over the whole line)
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

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
    let r = raw.roundtrip(&patch(6, &9u16.to_le_bytes()));
    assert_eq!(status(&r), Status::OpIllegal, "opcode 9 is undefined");
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
    m[6..8].copy_from_slice(&9u16.to_le_bytes());
    let r = raw.roundtrip(&m);
    assert_eq!(status(&r), Status::OpIllegal);
    let r = raw.call(0, &Request::GetAttr { fh: root });
    assert_eq!(status(&r), Status::Ok, "next sequence id after OP_ILLEGAL");

    // LOOKUP with a heap reference past the heap: BADXDR, and the slot moves on.
    let mut m = raw.next(0, &Request::Lookup { dir: root, path: b"abc", follow: true });
    let hdr = reply_header(&raw.roundtrip(&{
        let mut bad = m.clone();
        bad[92..96].copy_from_slice(&1000u32.to_le_bytes()); // heap ref len 1000 (heap has 3)
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
    m[88..92].copy_from_slice(&u32::MAX.to_le_bytes());
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
    m[36..40].copy_from_slice(&40u32.to_le_bytes());
    assert_eq!(status(&raw.roundtrip(&m)), Status::BadXdr);
    // A forged file handle.
    let r = raw.call(0, &Request::GetAttr { fh: FileHandle([0xa5; 32]) });
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
// 5. Clients that never read: bounded server memory
// ------------------------------------------------------------------------------------

/// A connection over which the peer's receive window stays tiny, so the server's
/// replies pile up in the server and not in kernel buffers.
fn connect_small_rcvbuf(addr: &str) -> TcpStream {
    use std::os::fd::FromRawFd;
    let a: SocketAddr = addr.parse().unwrap();
    let SocketAddr::V4(v4) = a else { panic!("IPv4 expected") };
    // SAFETY: plain socket/setsockopt/connect on a descriptor we create and then hand
    // to TcpStream, which owns it from then on.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let sz: libc::c_int = 4096;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &sz as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as u32,
        );
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
            sin_zero: [0; 8],
        };
        let r = libc::connect(
            fd,
            &sa as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

/// Send `batch` repeatedly until the server stops taking it (its backpressure) or
/// `max_bytes` went out. Returns bytes sent.
fn flood(srv: &TestServer, s: &mut TcpStream, batch: &[u8], max_bytes: usize) -> usize {
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut sent = 0;
    while sent < max_bytes {
        match s.write(batch) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => {
                server_alive(srv);
                panic!(
                    "flood write failed after {sent} bytes: {e}\nserver stderr:\n{}",
                    srv.stderr_log()
                );
            }
        }
    }
    sent
}

const RSS_LIMIT_KB: u64 = 200 * 1024;

#[test]
fn never_reading_client_null_flood_is_bounded() {
    let srv = TestServer::start(&[]);
    let pid = srv.pid().unwrap();
    let before = rss_kb(pid);
    let mut s = connect_small_rcvbuf(&srv.addr());
    // Session-less NULLs are answered without any slot, so every one produces a reply
    // that the client never reads.
    let one = msg_frame(&enc(&Header::request(Opcode::Null, 0, 0, 0, 0), &Request::Null));
    let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 2000).collect();
    let t = Instant::now();
    let sent = flood(&srv, &mut s, &batch, 160 << 20);
    std::thread::sleep(Duration::from_millis(300));
    let rss = rss_kb(pid);
    eprintln!(
        "null flood: sent {} MB ({} requests) in {:?}; server RSS {} -> {} kB",
        sent >> 20,
        sent / one.len(),
        t.elapsed(),
        before,
        rss
    );
    assert!(
        sent < 160 << 20,
        "the server kept reading {} MB from a client that never reads",
        sent >> 20
    );
    assert!(
        rss < RSS_LIMIT_KB,
        "server RSS {rss} kB after a never-reading client (limit {RSS_LIMIT_KB} kB)"
    );
    // The paused connection must not make the server spin.
    let t0 = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(pid) - t0;
    assert!(
        spent < 50,
        "server used {spent} ticks of CPU in 1 s while a never-reading client was paused"
    );
    assert_serves(&srv, "null flood");
    drop(s);
    assert_serves(&srv, "null flood after disconnect");
}

#[test]
fn never_reading_client_slot_refusals_are_bounded() {
    let srv = TestServer::start(&[]);
    let pid = srv.pid().unwrap();
    let mut raw = Raw::from_stream(connect_small_rcvbuf(&srv.addr()));
    raw.create(65536, 2, AuthMethod::None).unwrap();
    // Thousands of requests that are refused: misordered, bad slot, bad session.
    let mut batch = Vec::new();
    for i in 0..3000u32 {
        let h = Header::request(
            Opcode::Null,
            if i % 3 == 0 { 42 } else { raw.sid },
            i % 5,
            1000 + i,
            0,
        );
        batch.extend_from_slice(&msg_frame(&enc(&h, &Request::Null)));
    }
    let sent = flood(&srv, &mut raw.s, &batch, 160 << 20);
    std::thread::sleep(Duration::from_millis(300));
    let rss = rss_kb(pid);
    eprintln!("refusal flood: sent {} MB; server RSS {rss} kB", sent >> 20);
    assert!(rss < RSS_LIMIT_KB, "server RSS {rss} kB (limit {RSS_LIMIT_KB} kB)");
    assert_serves(&srv, "refusal flood");
}

/// READ_DIRECT of a large length from a tiny file by a client that never reads: each
/// placement is tiny, so it must not pin a full-length buffer in the server.
#[test]
fn never_reading_client_direct_reads_are_bounded() {
    let srv = TestServer::start(&[]);
    let pid = srv.pid().unwrap();
    std::fs::write(srv.dir().join("tiny"), b"x").unwrap();
    let mut raw = Raw::from_stream(connect_small_rcvbuf(&srv.addr()));
    let s = raw.create(65536, 2, AuthMethod::None).unwrap();
    let root = raw.root();
    let open_id = raw.open(root, b"tiny", open_flags::READ);
    let before = rss_kb(pid);
    raw.s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut rss = before;
    let mut sent = 0;
    // 400 requests in batches, watching the server's memory so that a leak shows up as
    // a failure instead of exhausting the machine.
    'outer: for _ in 0..40 {
        let mut batch = Vec::new();
        for _ in 0..10 {
            let m = raw.next(
                0,
                &Request::ReadDirect {
                    open_id,
                    offset: 0,
                    len: s.direct_bytes_max,
                    region: RemoteRegion { key: 12345, offset: 0 },
                },
            );
            batch.extend_from_slice(&msg_frame(&m));
        }
        match raw.s.write_all(&batch) {
            Ok(()) => sent += 10,
            Err(_) => break 'outer, // the server stopped reading: fine
        }
        std::thread::sleep(Duration::from_millis(15));
        rss = rss_kb(pid);
        if rss > before + 150 * 1024 {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    rss = rss.max(rss_kb(pid));
    eprintln!(
        "direct-read flood: {sent} requests of {} B each; server RSS {before} -> {rss} kB",
        s.direct_bytes_max
    );
    assert!(rss < before + 150 * 1024, "server RSS grew from {before} kB to {rss} kB after {sent} tiny READ_DIRECTs the client never read");
    assert_serves(&srv, "direct read flood");
}

/// Connections that announce a maximal message and then stall must not each pin
/// a maximal buffer before they even have a session.
#[test]
fn stalled_large_frames_before_session_are_cheap() {
    let srv = TestServer::start(&[]);
    let pid = srv.pid().unwrap();
    let before = rss_kb(pid);
    let mut conns = Vec::new();
    for _ in 0..48 {
        let mut s = TcpStream::connect(srv.addr()).unwrap();
        s.write_all(&FrameHeader::msg(MAX).encode()).unwrap();
        s.write_all(&[0u8; 48]).unwrap();
        conns.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    let rss = rss_kb(pid);
    eprintln!("48 stalled 4 MiB frames: server RSS {before} -> {rss} kB");
    assert!(
        rss < before + 64 * 1024,
        "48 stalled connections grew the server from {before} kB to {rss} kB"
    );
    assert_serves(&srv, "stalled frames");
    drop(conns);
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
    // A retransmission of a READ_DIRECT executes again (reads are idempotent): the data
    // is placed again, into the memory the retransmitted request names, and the file's
    // current content is what is placed.
    std::fs::write(srv.dir().join("hello"), b"HELLO WORLD").unwrap();
    raw.send_msg(&m);
    let (put, payload) = raw.frame();
    assert_eq!((put.kind, put.key, put.offset, put.len), (FrameKind::Put, 12345, 7, 11), "{put:?}");
    assert_eq!(payload, b"HELLO WORLD");
    assert_eq!(
        decode_reply(&raw.reply(), MAX).unwrap().1,
        Reply::ReadDirect { count: 11, eof: true }
    );
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
        status(&raw.call(0, &Request::GetAttr { fh: FileHandle([0; 32]) })),
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
