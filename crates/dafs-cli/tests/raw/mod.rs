//! A minimal raw-protocol client for the admission tests: TCP sockets (optionally from a
//! chosen 127.x.y.z source address, optionally with a tiny receive buffer) speaking the
//! 32-byte frame format and DAFS messages by hand.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

use dafs_proto::{
    auth, decode_reply, encode_request, limits, AuthMethod, FileHandle, Header, Opcode, Reply,
    Request, Status,
};
use dafs_transport::frame::{FrameHeader, FrameKind, FRAME_HEADER_LEN};

pub const MAX: usize = limits::MSG_SIZE_BYTES_MAX as usize;

pub fn enc(h: &Header, req: &Request) -> Vec<u8> {
    let mut b = Vec::new();
    encode_request(h, req, &mut b, MAX).expect("test request encodes");
    b
}

pub fn msg_frame(msg: &[u8]) -> Vec<u8> {
    let mut v = FrameHeader::msg(msg.len()).encode().to_vec();
    v.extend_from_slice(msg);
    v
}

/// A TCP connection to `addr` from source address `from` (any port), with SO_RCVBUF set
/// to `rcvbuf_bytes` if given (before connecting, so the window stays small).
pub fn connect_from(addr: &str, from: Ipv4Addr, rcvbuf_bytes: Option<i32>) -> TcpStream {
    let SocketAddr::V4(to) = addr.parse().unwrap() else { panic!("IPv4 expected") };
    let sa = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(ip.octets()) },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
    // SAFETY: socket/setsockopt/bind/connect on a descriptor created here and handed to
    // TcpStream (which owns it from then on); every pointer is to a live local.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        if let Some(sz) = rcvbuf_bytes {
            let p = &sz as *const i32 as *const libc::c_void;
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, p, 4);
        }
        let src = sa(from, 0);
        let r = libc::bind(fd, &src as *const _ as *const libc::sockaddr, len);
        assert_eq!(r, 0, "bind {from}: {}", std::io::Error::last_os_error());
        let dst = sa(*to.ip(), to.port());
        let r = libc::connect(fd, &dst as *const _ as *const libc::sockaddr, len);
        assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

pub struct Raw {
    pub s: TcpStream,
    pub sid: u64,
    pub seq: Vec<u32>,
    pub client_id: Vec<u8>,
    /// SESSION_CREATE's server nonce and session token.
    pub nonce: [u8; 32],
    pub token: [u8; 32],
}

impl Raw {
    pub fn new(s: TcpStream) -> Raw {
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw {
            s,
            sid: 0,
            seq: Vec::new(),
            client_id: b"raw".to_vec(),
            nonce: [0; 32],
            token: [0; 32],
        }
    }

    pub fn connect(addr: &str) -> Raw {
        Raw::new(TcpStream::connect(addr).expect("connect"))
    }

    pub fn send_msg(&mut self, msg: &[u8]) {
        self.s.write_all(&msg_frame(msg)).expect("write to server")
    }

    /// The next reply message.
    pub fn reply(&mut self) -> Vec<u8> {
        let mut h = [0u8; FRAME_HEADER_LEN];
        self.s.read_exact(&mut h).expect("frame header from server");
        let fh = FrameHeader::decode(&h).expect("server frame header decodes");
        assert_eq!(fh.kind, FrameKind::Msg, "expected a reply message, got {fh:?}");
        let mut payload = vec![0u8; fh.len as usize];
        self.s.read_exact(&mut payload).expect("frame payload from server");
        payload
    }

    pub fn roundtrip(&mut self, msg: &[u8]) -> Vec<u8> {
        self.send_msg(msg);
        self.reply()
    }

    /// SESSION_CREATE (64 KiB messages, 2 slots); on success the session is remembered.
    pub fn create(&mut self, auth: AuthMethod) -> Result<(), Status> {
        let req = Request::SessionCreate {
            msg_size_bytes_max: 65536,
            slots: 2,
            auth,
            flags: 0,
            client_id: &self.client_id.clone(),
        };
        let r = self.roundtrip(&enc(&Header::request(Opcode::SessionCreate, 0, 0, 0, 0), &req));
        let (h, reply) = decode_reply(&r, MAX).expect("SESSION_CREATE reply decodes");
        match reply {
            Reply::SessionCreate { slots, server_nonce, session_token, .. } => {
                self.sid = h.session_id;
                self.seq = vec![1; slots as usize];
                self.nonce = server_nonce;
                self.token = session_token;
                Ok(())
            }
            Reply::Error(s) => Err(s),
            other => panic!("unexpected SESSION_CREATE reply {other:?}"),
        }
    }

    /// SESSION_AUTH with `secret` (after a create with HMAC).
    pub fn authenticate(&mut self, secret: &[u8]) -> Status {
        let cn = [7u8; 32];
        let proof = auth::client_proof(secret, self.sid, &self.nonce, &cn, &self.client_id);
        let r = self.call(0, &Request::SessionAuth { client_nonce: cn, proof });
        decode_reply(&r, MAX).unwrap().1.status()
    }

    /// Encode `req` on `slot` with that slot's next sequence id (which then advances).
    pub fn next(&mut self, slot: u32, req: &Request) -> Vec<u8> {
        let seq = self.seq[slot as usize];
        self.seq[slot as usize] += 1;
        enc(&Header::request(req.opcode(), self.sid, slot, seq, slot), req)
    }

    pub fn call(&mut self, slot: u32, req: &Request) -> Vec<u8> {
        let m = self.next(slot, req);
        self.roundtrip(&m)
    }

    pub fn root(&mut self) -> FileHandle {
        match decode_reply(&self.call(0, &Request::GetRootHandle { export: b"" }), MAX).unwrap().1 {
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

    /// True if the server closed the connection (EOF or reset) within `d`; anything it
    /// sent before is skipped.
    pub fn closed_within(&mut self, d: Duration) -> bool {
        self.s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let deadline = Instant::now() + d;
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            match self.s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(_) => return true,
            }
        }
        false
    }
}

/// Value of a Prometheus counter or gauge (`dafs_NAME_total` or `dafs_NAME`) served on
/// `metrics_addr`.
pub fn metric(metrics_addr: &str, name: &str) -> u64 {
    let mut s = TcpStream::connect(metrics_addr).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    for line in out.lines() {
        if let Some(v) = line
            .strip_prefix(&format!("dafs_{name}_total "))
            .or_else(|| line.strip_prefix(&format!("dafs_{name} ")))
        {
            return v.trim().parse().unwrap();
        }
    }
    panic!("metric {name} missing:\n{out}")
}

/// A free loopback address for `--metrics-listen`.
pub fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Resident set size of a process, in KiB.
pub fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
