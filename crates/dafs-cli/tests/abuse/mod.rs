//! Shared by the protocol-abuse tests: a raw client that speaks the frame format by
//! hand (`Raw`), message helpers, and the checks that the server still serves.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::common::TestServer;
use dafs_client::{Error, OpenOptions, Provider};
use dafs_proto::{
    decode_reply, encode_request, limits, AuthMethod, FileHandle, Header, Opcode, Reply, Request,
    Status,
};
use dafs_transport::frame::{FrameHeader, FrameKind, FRAME_HEADER_LEN};

pub const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;

// ------------------------------------------------------------------------------------
// Raw client
// ------------------------------------------------------------------------------------

pub fn enc(h: &Header, req: &Request) -> Vec<u8> {
    let mut b = Vec::new();
    encode_request(h, req, &mut b, MAX).expect("test request encodes");
    b
}

pub fn frame_bytes(fh: FrameHeader, payload: &[u8]) -> Vec<u8> {
    let mut v = fh.encode().to_vec();
    v.extend_from_slice(payload);
    v
}

pub fn msg_frame(msg: &[u8]) -> Vec<u8> {
    frame_bytes(FrameHeader::msg(msg.len()), msg)
}

/// Status of an encoded reply.
pub fn status(reply: &[u8]) -> Status {
    decode_reply(reply, MAX)
        .unwrap_or_else(|e| panic!("undecodable reply ({e}): {reply:?}"))
        .1
        .status()
}

pub fn reply_header(reply: &[u8]) -> Header {
    decode_reply(reply, MAX).expect("decodable reply").0
}

pub struct Raw {
    pub s: TcpStream,
    pub sid: u64,
    /// Next sequence id per slot.
    pub seq: Vec<u32>,
    pub client_id: Vec<u8>,
}

pub struct Created {
    pub msg_size_bytes_max: u32,
    pub slots: u32,
    pub auth: AuthMethod,
    pub nonce: [u8; 32],
    pub direct_bytes_max: u32,
    /// The session token: with the shared secret (if any), the key of SESSION_BIND proofs.
    pub token: [u8; 32],
}

impl Raw {
    pub fn connect(srv: &TestServer) -> Raw {
        Raw::from_stream(TcpStream::connect(srv.addr()).expect("connect"))
    }

    pub fn from_stream(s: TcpStream) -> Raw {
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw { s, sid: 0, seq: Vec::new(), client_id: b"raw-abuser".to_vec() }
    }

    pub fn write(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write to server")
    }

    pub fn send_msg(&mut self, msg: &[u8]) {
        self.write(&msg_frame(msg))
    }

    pub fn frame(&mut self) -> (FrameHeader, Vec<u8>) {
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
    pub fn reply(&mut self) -> Vec<u8> {
        let (fh, payload) = self.frame();
        assert_eq!(fh.kind, FrameKind::Msg, "expected a reply message, got {fh:?}");
        payload
    }

    pub fn roundtrip(&mut self, msg: &[u8]) -> Vec<u8> {
        self.send_msg(msg);
        self.reply()
    }

    pub fn create_req(&self, msg_size_bytes_max: u32, slots: u32, auth: AuthMethod) -> Vec<u8> {
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
    pub fn create(
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
    pub fn next(&mut self, slot: u32, req: &Request) -> Vec<u8> {
        let seq = self.seq[slot as usize];
        self.seq[slot as usize] += 1;
        enc(&Header::request(req.opcode(), self.sid, slot, seq, slot), req)
    }

    /// Request on `slot` with the right sequence id; returns the reply.
    pub fn call(&mut self, slot: u32, req: &Request) -> Vec<u8> {
        let m = self.next(slot, req);
        self.roundtrip(&m)
    }

    /// Request with an explicit session, slot and sequence id (slot state untouched).
    pub fn call_with(&mut self, sid: u64, slot: u32, seq: u32, req: &Request) -> Vec<u8> {
        let m = enc(&Header::request(req.opcode(), sid, slot, seq, 0), req);
        self.roundtrip(&m)
    }

    pub fn root(&mut self) -> FileHandle {
        let r = self.call(0, &Request::GetRootHandle { export: b"" });
        match decode_reply(&r, MAX).unwrap().1 {
            Reply::Handle { fh, .. } => fh,
            other => panic!("GET_ROOTHANDLE: {other:?}"),
        }
    }

    pub fn open(&mut self, dir: FileHandle, name: &[u8], flags: u32) -> u64 {
        let r = self.call(0, &Request::Open { fh: dir, flags, mode: 0o644, name, key: b"" });
        match decode_reply(&r, MAX).unwrap().1 {
            Reply::Open { open_id, .. } => open_id,
            other => panic!("OPEN: {other:?}"),
        }
    }

    /// The server must close the connection: a read returns EOF (or a reset) within 5 s.
    /// Anything the server still sent before closing is skipped.
    pub fn expect_closed(&mut self, what: &str) {
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
    pub fn expect_silent(&mut self, d: Duration, what: &str) {
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

pub fn server_alive(srv: &TestServer) {
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
pub fn assert_serves(srv: &TestServer, case: &str) {
    // Over TCP (the listener the abuse went to), and with the default provider choice
    // (which may switch a same-host client to shared memory).
    assert_serves_with(srv, case, Provider::Tcp);
    assert_serves_with(srv, case, Provider::Auto);
}

pub fn assert_serves_with(srv: &TestServer, case: &str, provider: Provider) {
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
        let data = super::common::pattern(off, len, 0x5a);
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
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    let after_comm = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = after_comm.split_whitespace().collect();
    // after the comm: state is field 3, utime 14, stime 15 (1-based over the whole line)
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

pub fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
