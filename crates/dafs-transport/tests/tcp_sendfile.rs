//! READ_DIRECT placements sent from the page cache (`ServerConn::put_file`, plaintext
//! TCP: `sendfile`), driven by hand through tiny socket buffers: every send is partial
//! and must resume at the right file offset; a file that shrinks before its bytes go out
//! is padded with zeros (the stream stays framed) and the reply queued behind it is
//! corrected to the bytes that really came from the file.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dafs_transport::tcp::{TcpClient, TcpListener, TcpServerConn, SENDFILE_BYTES_MIN};
use dafs_transport::{ClientTransport, CountPatch, RemoteRegion, ServerConn, ServerListener, Wait};

/// The reply used here: a count at 0 and an end-of-file flag at 4 (u32 LE), then text.
const PATCH: CountPatch = CountPatch { count_at: 0, eof_at: 4 };

fn pair() -> (TcpClient, TcpServerConn) {
    let mut l = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpClient::connect(&l.local_addr(), Duration::from_secs(10)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let conn = loop {
        if let Some(c) = l.accept().unwrap() {
            break c;
        }
        assert!(Instant::now() < deadline, "no connection");
        std::thread::sleep(Duration::from_millis(1));
    };
    (client, conn)
}

fn small_send_buffer<F: AsFd>(fd: &F) {
    // The kernel doubles this: a MiB placement takes dozens of partial sends.
    rustix::net::sockopt::set_socket_send_buffer_size(fd, 16 * 1024).unwrap();
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[1]).collect()
}

fn file_with(data: &[u8]) -> (std::fs::File, Arc<OwnedFd>) {
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(data).unwrap();
    let fd = Arc::new(f.as_fd().try_clone_to_owned().unwrap());
    (f, fd)
}

fn reply(count: usize) -> Vec<u8> {
    let mut m = (count as u32).to_le_bytes().to_vec();
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(b"read reply");
    m
}

/// Alternate client receive and server flush until the client has a message.
fn deliver(client: &mut TcpClient, conn: &mut TcpServerConn) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(m) = client.recv(Wait::NoWait).unwrap() {
            return m;
        }
        conn.flush().unwrap();
        assert!(Instant::now() < deadline, "stalled with {} bytes queued", conn.backlog_bytes());
    }
}

fn region(ptr: *mut u8, len: usize) -> Vec<u8> {
    // SAFETY: `ptr` is a live registration of at least `len` bytes (alloc_registered in
    // the test), and no placement is in flight while it is read.
    unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec()
}

#[test]
fn partial_sendfile_sends_resume_at_the_file_offset() {
    let (mut client, mut conn) = pair();
    small_send_buffer(conn.mio());
    const N: usize = 3 << 20;
    let data = pattern(N + 4096);
    let (_f, fd) = file_with(&data);
    let (key, ptr) = client.alloc_registered(N).unwrap();

    // From an unaligned file offset into an unaligned region offset.
    let (foff, roff, len) = (4096 + 17, 5, N - 4096);
    let n = conn.put_file(RemoteRegion { key, offset: roff }, len, &fd, foff as u64).unwrap();
    assert_eq!(n, len);
    conn.send_file_reply(&reply(n), PATCH).unwrap();
    assert!(!conn.flush().unwrap(), "3 MiB cannot fit in a 32 KiB send buffer");
    assert!(conn.backlog_bytes() > 0);
    let m = deliver(&mut client, &mut conn);
    assert_eq!(m, reply(len), "no correction for a file that kept its size");
    let got = region(ptr, N);
    assert!(got[roff as usize..roff as usize + len] == data[foff..foff + len], "bytes differ");
    assert!(got[..roff as usize].iter().all(|&b| b == 0), "nothing before the placement");
    assert!(conn.flush().unwrap());
    assert_eq!(conn.backlog_bytes(), 0);
    assert_eq!(client.stats().placed_bytes, len as u64);

    // The end of the file caps the count when queued; small placements take the copy
    // path, and both keep the stream's order.
    let n = conn.put_file(RemoteRegion { key, offset: 0 }, N, &fd, (N - 100) as u64).unwrap();
    assert_eq!(n, 4096 + 100);
    conn.send_file_reply(&reply(n), PATCH).unwrap();
    let small = conn.put_file(RemoteRegion { key, offset: 1 << 20 }, 512, &fd, 0).unwrap();
    assert!(small < SENDFILE_BYTES_MIN);
    conn.send_file_reply(&reply(small), PATCH).unwrap();
    assert_eq!(deliver(&mut client, &mut conn), reply(4096 + 100));
    assert_eq!(deliver(&mut client, &mut conn), reply(512));
    let got = region(ptr, N);
    assert!(got[..4196] == data[N - 100..], "end-of-file placement");
    assert!(got[1 << 20..(1 << 20) + 512] == data[..512], "small placement");
}

#[test]
fn a_file_that_shrinks_under_a_queued_placement_is_padded_and_the_reply_corrected() {
    let (mut client, mut conn) = pair();
    small_send_buffer(conn.mio());
    const N: usize = 3 << 20;
    let data = pattern(N);
    let (f, fd) = file_with(&data);
    let (key, ptr) = client.alloc_registered(N + 8).unwrap();
    // SAFETY: the registration is N + 8 bytes and nothing is in flight yet.
    unsafe { std::ptr::write_bytes(ptr, 0xAA, N + 8) };

    let n = conn.put_file(RemoteRegion { key, offset: 0 }, N, &fd, 0).unwrap();
    assert_eq!(n, N);
    conn.send_file_reply(&reply(n), PATCH).unwrap();
    assert!(!conn.flush().unwrap());
    let sent_before = N - (conn.backlog_bytes() - 32 - reply(n).len());
    // The file shrinks to a point the placement has not reached yet.
    let keep = sent_before + 1_000_003;
    assert!(keep < N);
    f.set_len(keep as u64).unwrap();

    let m = deliver(&mut client, &mut conn);
    let mut want = (keep as u32).to_le_bytes().to_vec();
    want.extend_from_slice(&1u32.to_le_bytes());
    want.extend_from_slice(b"read reply");
    assert_eq!(m, want, "the reply reports the bytes the file still had, and end of file");
    let got = region(ptr, N + 8);
    assert!(got[..keep] == data[..keep], "file bytes");
    assert!(got[keep..N].iter().all(|&b| b == 0), "the rest of the frame is zeros");
    assert!(got[N..].iter().all(|&b| b == 0xAA), "nothing beyond the frame");

    // The stream is still framed: the next placement and message arrive intact.
    let n = conn.put_file(RemoteRegion { key, offset: 8 }, 64 * 1024, &fd, 0).unwrap();
    conn.send_file_reply(&reply(n), PATCH).unwrap();
    conn.send(b"next").unwrap();
    assert_eq!(deliver(&mut client, &mut conn), reply(64 * 1024));
    assert_eq!(deliver(&mut client, &mut conn), b"next");
    assert!(region(ptr, 8 + 64 * 1024)[8..] == data[..64 * 1024]);
    assert!(conn.flush().unwrap());
    assert_eq!(conn.backlog_bytes(), 0);
}
