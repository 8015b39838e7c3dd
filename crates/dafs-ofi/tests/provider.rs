//! The libfabric provider end to end, both ends in this process: messages, RMA write
//! and read into announced regions, refusal of out-of-bounds and withdrawn keys before
//! any RMA, and a dead peer reported as closed. Each test runs on `tcp;ofi_rxm` and
//! `shm`.

mod common;

use std::time::{Duration, Instant};

use common::{pair, server_event};
use dafs_ofi::{OfiClient, OfiServerConn};
use dafs_transport::{
    Access, ClientTransport, PutError, RemoteRegion, ServerConn, ServerEvent, TransportError, Wait,
};

const PROVIDERS: [&str; 2] = ["tcp", "shm"];

fn client_msg(c: &mut OfiClient, s: &mut OfiServerConn) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        s.flush().unwrap();
        if let Some(m) = c.recv(Wait::NoWait).unwrap() {
            return m;
        }
        assert!(Instant::now() < deadline, "client message timed out");
    }
}

#[test]
fn messages_and_rma_move_the_right_bytes() {
    for name in PROVIDERS {
        let (mut c, mut s) = pair(name);
        let (key, ptr) = c.alloc_registered(64 << 10).unwrap();
        // SAFETY: 64 KiB registered memory owned by the client until deregistered; no
        // transfer names it while we write it here.
        unsafe { std::ptr::write_bytes(ptr, 0x5a, 64 << 10) };
        c.send(b"hello").unwrap();
        match server_event(&mut c, &mut s) {
            ServerEvent::Message(m) => assert_eq!(m, b"hello"),
            e => panic!("{e:?}"),
        }
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let placed = s
            .put(RemoteRegion { key, offset: 4096 }, 1000, &mut |d| Ok(d.copy_from(&data)))
            .unwrap();
        assert_eq!(placed, 1000);
        s.pull(RemoteRegion { key, offset: 60 << 10 }, 100, 7).unwrap();
        s.send(b"done").unwrap();
        // The reply is ordered after the placement: once it is here, so are the bytes.
        assert_eq!(client_msg(&mut c, &mut s), b"done", "{name}");
        // SAFETY: the placement completed (its reply arrived); nothing else names it.
        let got = unsafe { std::slice::from_raw_parts(ptr.add(4096), 1000) };
        assert_eq!(got, &data[..], "{name}: placed bytes");
        // SAFETY: as above, the byte just before the placement.
        assert_eq!(unsafe { *ptr.add(4095) }, 0x5a, "{name}: nothing placed before");
        // SAFETY: as above, the byte just after it.
        assert_eq!(unsafe { *ptr.add(5096) }, 0x5a, "{name}: nothing placed after");
        match server_event(&mut c, &mut s) {
            ServerEvent::Pulled { tag: 7, data: Ok(d) } => assert_eq!(d, vec![0x5a; 100]),
            e => panic!("{name}: {e:?}"),
        }
    }
}

#[test]
fn forged_ranges_and_withdrawn_keys_are_refused_before_any_rma() {
    for name in PROVIDERS {
        let (mut c, mut s) = pair(name);
        let mut buf = vec![1u8; 8192];
        // SAFETY: `buf` outlives the registration (deregistered below, before drop).
        let key = unsafe { c.register(buf.as_mut_ptr(), buf.len(), Access::READ_WRITE) }.unwrap();
        c.send(b"ready").unwrap();
        assert!(matches!(server_event(&mut c, &mut s), ServerEvent::Message(_)));
        let filled = std::cell::Cell::new(false);
        let mut fill = |d: &mut dafs_transport::PlacementDst<'_>| {
            filled.set(true);
            Ok(d.len())
        };
        for (offset, len) in [(8192, 1), (4096, 4097), (u64::MAX - 10, 100), (0, 8193)] {
            let r = s.put(RemoteRegion { key, offset }, len, &mut fill);
            assert!(
                matches!(r, Err(PutError::Transport(TransportError::BadRegion))),
                "{name}: {r:?}"
            );
            s.pull(RemoteRegion { key, offset }, len, 9).unwrap();
            match s.poll_event().unwrap() {
                Some(ServerEvent::Pulled { tag: 9, data: Err(TransportError::BadRegion) }) => {}
                e => panic!("{name}: pull at {offset}+{len}: {e:?}"),
            }
        }
        assert!(!filled.get(), "{name}: refused before the data was even produced");
        let r = s.put(RemoteRegion { key: key ^ 1, offset: 0 }, 10, &mut fill);
        assert!(matches!(r, Err(PutError::Transport(TransportError::BadRegion))), "unknown key");
        // Withdrawn: the server learns it before the next message.
        c.deregister(key).unwrap();
        c.send(b"after").unwrap();
        assert!(matches!(server_event(&mut c, &mut s), ServerEvent::Message(_)));
        let r = s.put(RemoteRegion { key, offset: 0 }, 10, &mut fill);
        assert!(
            matches!(r, Err(PutError::Transport(TransportError::BadRegion))),
            "{name}: stale key"
        );
        assert!(!filled.get());
        assert_eq!(buf, vec![1u8; 8192], "{name}: no byte written");
    }
}

#[test]
fn a_dead_peer_is_reported_as_closed() {
    for name in PROVIDERS {
        let (c, mut s) = pair(name);
        drop(c);
        let deadline = Instant::now() + Duration::from_secs(10);
        let e = loop {
            match s.poll_event() {
                Err(e) => break e,
                Ok(_) => assert!(Instant::now() < deadline, "{name}: server never noticed"),
            }
        };
        assert!(matches!(e, TransportError::Closed), "{name}: {e:?}");

        let (mut c, s) = pair(name);
        drop(s);
        let r = c.recv(Wait::Timeout(Duration::from_secs(10)));
        assert!(matches!(r, Err(TransportError::Closed)), "{name}: {r:?}");
    }
}

/// Transfers of several MiB each way while the client sleeps between doorbells (as the
/// client library does once only large transfers are in flight), the server on its own
/// thread driving the connection the way dafsd's worker does.
#[test]
fn large_transfers_complete_while_the_client_sleeps() {
    const LEN: usize = 8 << 20;
    for name in PROVIDERS {
        let (mut c, mut s) = pair(name);
        let (key, ptr) = c.alloc_registered(LEN).unwrap();
        // SAFETY: LEN bytes of registered memory the client owns; nothing names them yet.
        let mem = unsafe { std::slice::from_raw_parts_mut(ptr, LEN) };
        mem.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8);
        c.set_spin(Duration::ZERO);
        c.send(b"go").unwrap();
        let server = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut pulled = None;
            while pulled.is_none() {
                assert!(Instant::now() < deadline, "pull never completed");
                match s.poll_event().unwrap() {
                    Some(ServerEvent::Message(m)) => {
                        assert_eq!(m, b"go");
                        s.pull(RemoteRegion { key, offset: 0 }, LEN, 1).unwrap();
                    }
                    Some(ServerEvent::Pulled { tag: 1, data }) => pulled = Some(data.unwrap()),
                    Some(e) => panic!("{e:?}"),
                    None => {}
                }
            }
            let back: Vec<u8> = pulled.unwrap().iter().map(|b| !b).collect();
            let n = s.put(RemoteRegion { key, offset: 0 }, LEN, &mut |d| Ok(d.copy_from(&back)));
            assert_eq!(n.unwrap(), LEN);
            s.send(b"done").unwrap();
            while !s.flush().unwrap() || s.backlog_bytes() > 0 {
                assert!(Instant::now() < deadline, "placement never completed");
            }
            s
        });
        let m = c.recv(Wait::Timeout(Duration::from_secs(20))).unwrap();
        assert_eq!(m.as_deref(), Some(&b"done"[..]), "{name}");
        drop(server.join().unwrap());
        // SAFETY: the placement completed (its reply arrived).
        let mem = unsafe { std::slice::from_raw_parts(ptr, LEN) };
        assert!(mem.iter().enumerate().all(|(i, b)| *b == !((i % 251) as u8)), "{name}");
    }
}

/// READ_DIRECT's path from the page cache (`put_file`): a range at an unaligned offset
/// is written from a mapping of the file, the count is what the file holds (short at
/// its end, zero past it), and the mapping is released once the write completed.
#[test]
fn file_ranges_are_placed_from_the_page_cache() {
    const FILE_LEN: usize = 1 << 20;
    let dir = std::env::temp_dir().join(format!("dafs-ofi-put-file-{}", std::process::id()));
    let data: Vec<u8> = (0..FILE_LEN as u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&dir, &data).unwrap();
    let file = std::sync::Arc::new(std::os::fd::OwnedFd::from(std::fs::File::open(&dir).unwrap()));
    std::fs::remove_file(&dir).unwrap();
    for name in PROVIDERS {
        let (mut c, mut s) = pair(name);
        let (key, ptr) = c.alloc_registered(FILE_LEN).unwrap();
        // The server learns the region with this message (the announcement precedes it).
        c.send(b"hi").unwrap();
        assert!(matches!(server_event(&mut c, &mut s), ServerEvent::Message(_)), "{name}");
        let len = 300 << 10;
        assert!(s.sends_files(len), "{name}: large ranges go from the page cache");
        // Unaligned, whole; then the file's last 1000 bytes asked as `len`; then past the end.
        for (off, want) in [(777u64, len), ((FILE_LEN - 1000) as u64, 1000), (FILE_LEN as u64, 0)] {
            // SAFETY: the client's registered memory; no transfer names it meanwhile.
            unsafe { std::ptr::write_bytes(ptr, 0, FILE_LEN) };
            let n = s.put_file(RemoteRegion { key, offset: 0 }, len, &file, off).unwrap();
            assert_eq!(n, want, "{name}: count at offset {off}");
            s.send(b"done").unwrap();
            assert_eq!(client_msg(&mut c, &mut s), b"done", "{name}");
            // SAFETY: the placement completed (its reply arrived after it).
            let got = unsafe { std::slice::from_raw_parts(ptr, n + 1) };
            assert_eq!(&got[..n], &data[off as usize..off as usize + n], "{name}: at {off}");
            assert_eq!(got[n], 0, "{name}: nothing placed past the count");
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.backlog_bytes() > 0 {
            s.flush().unwrap();
            c.recv(Wait::NoWait).unwrap();
            assert!(Instant::now() < deadline, "{name}: mapping never released");
        }
    }
}

/// `shm` has no completion wait fd: a server whose RMA waits for the client's progress
/// sleeps once it has handed the client the token (DOORBELL_ANSWER), instead of polling
/// and taking the CPU the client needs; the client's answer then completes the work.
#[test]
fn a_server_waiting_for_the_clients_progress_sleeps() {
    let (mut c, mut s) = pair("shm");
    let (key, _ptr) = c.alloc_registered(1 << 20).unwrap();
    c.send(b"hi").unwrap();
    assert!(matches!(server_event(&mut c, &mut s), ServerEvent::Message(_)));
    let n =
        s.put(RemoteRegion { key, offset: 0 }, 1 << 20, &mut |d| Ok(d.copy_from(&[7u8; 1 << 20])));
    assert_eq!(n.unwrap(), 1 << 20);
    assert!(s.backlog_bytes() > 0, "the client has not progressed yet");
    assert!(!s.input_pending(), "nothing for the server to poll for");
    assert!(s.arm_sleep(), "the server may sleep while only the client can move the write");
    s.disarm_sleep();
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.backlog_bytes() > 0 {
        // The client's progress answers the token; the server is woken by that doorbell.
        c.recv(Wait::Timeout(Duration::from_millis(1))).unwrap();
        s.poll_event().unwrap();
        assert!(Instant::now() < deadline, "write never completed");
    }
}
