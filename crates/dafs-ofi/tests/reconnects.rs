//! Many reconnects of one client (as session recovery does under cut connections): after
//! each, the new connection must still move messages and RMA both ways, with regions
//! registered before and after the reconnect.
//!
//! The server runs in a child process (this test binary again, running `serve_child`):
//! in one process `shm` reaches a peer's region through that peer's own mapping, and a
//! connection closed on one side then crashes the other's teardown, which separate
//! processes (each with its own mapping) never see.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use dafs_ofi::{OfiClient, OfiListener};
use dafs_transport::{
    Access, ClientTransport, RemoteRegion, ServerConn, ServerEvent, ServerListener, Wait,
};

/// Reconnects per provider: `shm` past the 145 after which `exactly_once` on `ofi+shm`
/// stalls (session_recovery.rs), `tcp` fewer (each costs a libfabric start-up).
const RECONNECTS: [(&str, usize); 2] = [("shm", 150), ("tcp", 30)];
const LEN: usize = 64 << 10;
const SERVE_ENV: &str = "DAFS_OFI_TEST_SERVE";

/// Serve connections one after another: on a message "KEY" (u64 LE), pull LEN bytes
/// from that region, write them back inverted, and answer "done".
fn serve(mut l: OfiListener, reconnects: usize) {
    for _ in 0..=reconnects {
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
    }
}

/// The child's part: does nothing unless started by the test below.
#[test]
fn serve_child() {
    let Ok(name) = std::env::var(SERVE_ENV) else { return };
    let reconnects = RECONNECTS.iter().find(|(n, _)| *n == name).unwrap().1;
    let l = OfiListener::bind(&format!("ofi+{name}://127.0.0.1:0")).unwrap();
    println!("ADDR {}", l.local_addr());
    serve(l, reconnects);
}

#[test]
fn rma_works_after_hundreds_of_reconnects() {
    for (name, reconnects) in RECONNECTS {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "serve_child", "--nocapture", "--test-threads=1"])
            .env(SERVE_ENV, name)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // libtest may print "test serve_child ... " on the same line first.
        let addr = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.split_once("ADDR ").map(|(_, a)| a.trim().to_string()))
            .expect("the server child printed no address");
        // Keep reading the child's output so that it never writes into a closed pipe.
        let drain = thread::spawn(move || lines.for_each(drop));
        let prov = dafs_ofi::provider_for(name);
        let mut c = OfiClient::connect(&addr, Some(&prov), Duration::from_secs(10)).unwrap();
        let mut keep = Vec::new();
        for i in 0..=reconnects {
            if i > 0 {
                c.cut();
                c.reconnect(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{name} {i}: {e}"));
            }
            // A region registered now, others kept from before (announced again).
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
        assert!(child.wait().unwrap().success(), "{name}: the server child failed");
        drain.join().unwrap();
    }
}
