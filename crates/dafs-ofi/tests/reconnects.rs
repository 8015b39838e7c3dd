//! Many reconnects of one client (as session recovery does under cut connections): after
//! each, the new connection must still move messages and RMA both ways, with regions
//! registered before and after the reconnect.

use std::thread;
use std::time::{Duration, Instant};

use dafs_ofi::{OfiClient, OfiListener};
use dafs_transport::{
    Access, ClientTransport, RemoteRegion, ServerConn, ServerEvent, ServerListener, Wait,
};

const RECONNECTS: usize = 200;
const LEN: usize = 64 << 10;

/// Serve connections one after another: on a message "KEY" (u64 LE), pull LEN bytes
/// from that region, write them back inverted, and answer "done".
fn serve(mut l: OfiListener) {
    // Both ends share this process: `shm` then reaches the server's region through the
    // server's own mapping, so a server connection is dropped only once the client
    // has reopened its endpoint (the next connection is here), as a separate server
    // process's region would outlive it too.
    let mut _prev = None;
    for _ in 0..=RECONNECTS {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut s = loop {
            if let Some(c) = l.accept().unwrap() {
                break c;
            }
            assert!(Instant::now() < deadline, "no connection");
            thread::sleep(Duration::from_micros(200));
        };
        loop {
            assert!(Instant::now() < deadline, "server stuck");
            match s.poll_event() {
                Ok(Some(ServerEvent::Message(m))) => {
                    let key = u64::from_le_bytes(m[..8].try_into().unwrap());
                    s.pull(RemoteRegion { key, offset: 0 }, LEN, key).unwrap();
                }
                Ok(Some(ServerEvent::Pulled { tag, data })) => {
                    let back: Vec<u8> = data.unwrap().iter().map(|b| !b).collect();
                    let r = RemoteRegion { key: tag, offset: 0 };
                    let n = s.put(r, LEN, &mut |d| Ok(d.copy_from(&back)));
                    assert_eq!(n.unwrap(), LEN);
                    s.send(b"done").unwrap();
                }
                Ok(None) => {}
                Err(_) => break, // the client cut the connection
            }
            let _ = s.flush();
        }
        _prev = Some(s);
    }
}

#[test]
fn rma_works_after_hundreds_of_reconnects() {
    for name in ["shm", "tcp"] {
        let l = OfiListener::bind(&format!("ofi+{name}://127.0.0.1:0")).unwrap();
        let addr = l.local_addr();
        let server = thread::spawn(move || serve(l));
        let prov = dafs_ofi::provider_for(name);
        let mut c = OfiClient::connect(&addr, Some(&prov), Duration::from_secs(10)).unwrap();
        let mut keep = Vec::new();
        for i in 0..=RECONNECTS {
            if i > 0 {
                c.cut();
                c.reconnect(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{name} {i}: {e}"));
            }
            // A region registered now, another kept from before (announced again).
            let mut mem = vec![(i % 251) as u8; LEN];
            // SAFETY: `mem` outlives its registration (deregistered below).
            let key = unsafe { c.register(mem.as_mut_ptr(), LEN, Access::READ_WRITE) }.unwrap();
            if i % 50 == 0 {
                keep.push(c.alloc_registered(4096).unwrap().0);
            }
            c.send(&key.to_le_bytes()).unwrap();
            let m = c.recv(Wait::Timeout(Duration::from_secs(10))).unwrap();
            assert_eq!(m.as_deref(), Some(&b"done"[..]), "{name}: reconnect {i}");
            assert!(mem.iter().all(|b| *b == !((i % 251) as u8)), "{name}: reconnect {i}");
            c.deregister(key).unwrap();
        }
        c.cut();
        drop(c);
        server.join().unwrap();
    }
}
