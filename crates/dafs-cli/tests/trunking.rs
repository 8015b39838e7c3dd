//! Session trunking over TCP: one session bound to several connections. Reads and
//! writes at queue depth 8 are spread over them and land intact; a connection cut while
//! requests are in flight on it is dropped alone (its requests are resent on the
//! others, each executing once) and replaced; the limits hold.

#[macro_use]
mod common;
mod raw;

use common::{pattern, Provider, TestServer};
use dafs_client::{Client, Completion, IoBuf, OpenOptions, RegionId};
use raw::{free_addr, metric};

const QD: usize = 8;

fn ok(c: &Completion) -> usize {
    match &c.result {
        Ok(n) => *n,
        Err(e) => panic!("request {} failed: {e:?}", c.user_data),
    }
}

fn trunked(srv: &TestServer, connections: u32) -> Client {
    let c = srv
        .client_with(|cfg| {
            cfg.provider = Provider::Tcp;
            cfg.connections = connections;
        })
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", srv.stderr_log()));
    assert_eq!(c.provider(), "tcp");
    c
}

/// Write `QD` blocks of `block` bytes at once from registered memory (block `i` holds
/// `pattern(i, block, seed)`), optionally cutting connection `cut` once they are in
/// flight; every write completes in full.
fn write_blocks(c: &mut Client, f: &dafs_client::File, block: usize, seed: u8, cut: Option<usize>) {
    let cg = c.create_cg().unwrap();
    let regions: Vec<RegionId> = (0..QD).map(|_| c.alloc_registered(block).unwrap()).collect();
    for (i, &r) in regions.iter().enumerate() {
        c.region_mut(r).unwrap().copy_from_slice(&pattern(i as u64, block, seed));
    }
    for (i, &r) in regions.iter().enumerate() {
        let buf = IoBuf::Region { region: r, offset: 0, len: block };
        c.submit_write(f, (i * block) as u64, buf, cg, i as u64).unwrap();
    }
    if let Some(k) = cut {
        c.cut_connection(k);
    }
    for d in c.wait_all(cg).unwrap() {
        assert_eq!(ok(&d), block, "write {}", d.user_data);
    }
    for r in regions {
        c.unregister(r).unwrap();
    }
}

/// Read the `QD` blocks back at once (optionally cutting connection `cut` while they are
/// in flight) and check every byte.
fn read_blocks(c: &mut Client, f: &dafs_client::File, block: usize, seed: u8, cut: Option<usize>) {
    let cg = c.create_cg().unwrap();
    let regions: Vec<RegionId> = (0..QD).map(|_| c.alloc_registered(block).unwrap()).collect();
    for (i, &r) in regions.iter().enumerate() {
        let buf = IoBuf::Region { region: r, offset: 0, len: block };
        c.submit_read(f, (i * block) as u64, buf, cg, i as u64).unwrap();
    }
    if let Some(k) = cut {
        c.cut_connection(k);
    }
    for d in c.wait_all(cg).unwrap() {
        assert_eq!(ok(&d), block, "read {}", d.user_data);
    }
    for (i, &r) in regions.iter().enumerate() {
        let want = pattern(i as u64, block, seed);
        assert!(c.region(r).unwrap() == &want[..], "block {i} ({block} bytes) differs");
        c.unregister(r).unwrap();
    }
}

/// A session asks for three connections and gets them (the server counts two trunking
/// binds); reads and writes at queue depth 8 — inline (4 KiB) and direct (64 KiB,
/// 1 MiB) — go over all three and every byte arrives; CLOSE after them still sees them
/// all done.
#[test]
fn qd8_io_over_three_connections_is_intact() {
    let metrics = free_addr();
    let srv = TestServer::start(&["--io-threads", "2", "--metrics-listen", &metrics]);
    let mut c = trunked(&srv, 3);
    assert_eq!(c.connections(), 3, "one session, three connections");
    assert_eq!(metric(&metrics, "trunk_binds"), 2);
    for (k, block) in [4096usize, 64 * 1024, 1 << 20].into_iter().enumerate() {
        let name = format!("f{k}");
        let f = c.open(&name, OpenOptions::read_write().create(true)).unwrap();
        write_blocks(&mut c, &f, block, k as u8 + 1, None);
        read_blocks(&mut c, &f, block, k as u8 + 1, None);
        c.close(f).unwrap();
        let on_disk = std::fs::read(srv.dir().join(&name)).unwrap();
        for i in 0..QD {
            assert!(
                on_disk[i * block..(i + 1) * block] == pattern(i as u64, block, k as u8 + 1)[..],
                "{name}: block {i} on disk"
            );
        }
    }
    let s = c.stats();
    assert_eq!((s.reconnects, s.connections_lost), (0, 0));
    // The URL option asks for the same.
    let c2 = Client::connect_url(
        &format!("{}?connections=2", srv.url("/")),
        dafs_client::ClientConfig { provider: Provider::Tcp, ..srv.config() },
    )
    .unwrap();
    assert_eq!(c2.connections(), 2);
    assert!(
        Client::connect_url(&format!("{}?connections=9", srv.url("/")), srv.config()).is_err(),
        "more than SESSION_CONNECTIONS_MAX is refused"
    );
}

/// Cut one connection of three while 8 reads (then 8 writes, whose data the server is
/// still pulling) are in flight over all of them: the session goes on over the others
/// without a full reconnect, the cut connection's requests are resent there and answered
/// once, a replacement connection is bound, and the data is intact. Cutting the first
/// connection (the one the session was created on) works the same.
#[test]
fn a_cut_connection_is_dropped_alone_and_replaced() {
    let metrics = free_addr();
    let srv = TestServer::start(&["--io-threads", "2", "--metrics-listen", &metrics]);
    let mut c = trunked(&srv, 3);
    assert_eq!(c.connections(), 3);
    let block = 256 * 1024;
    let f = c.open("cut", OpenOptions::read_write().create(true)).unwrap();
    write_blocks(&mut c, &f, block, 7, None);
    let mut lost = 0;
    for (round, k) in [1usize, 0, 2, 0].into_iter().enumerate() {
        read_blocks(&mut c, &f, block, 7, Some(k));
        let seed = 7 + round as u8;
        write_blocks(&mut c, &f, block, seed, Some(k));
        read_blocks(&mut c, &f, block, seed, None);
        // Rewrite the original contents for the next round's reads.
        write_blocks(&mut c, &f, block, 7, None);
        let s = c.stats();
        assert!(s.connections_lost > lost, "round {round}: the cut was noticed ({s:?})");
        lost = s.connections_lost;
        assert_eq!(s.reconnects, 0, "round {round}: no full recovery ({s:?})");
        assert_eq!(c.connections(), 3, "round {round}: the lost connection was replaced");
    }
    c.close(f).unwrap();
    assert!(metric(&metrics, "trunk_connections_lost") >= 4, "{}", srv.stderr_log());
    assert!(metric(&metrics, "trunk_binds") >= 2 + 4);
}

/// Connections per session are capped at `SESSION_CONNECTIONS_MAX` (8) and count against
/// the server's per-address limit like any other: asking for more than fits leaves the
/// session with fewer, never failing it.
#[test]
fn connections_per_session_are_limited() {
    let srv = TestServer::start(&["--max-connections-per-addr", "5"]);
    let c = trunked(&srv, 8);
    assert_eq!(c.connections(), 5, "the per-address limit caps the trunk");
    // Another client from the same address still finds no room beyond it: refused at
    // accept, as before trunking.
    assert!(srv
        .client_with(|cfg| {
            cfg.provider = Provider::Tcp;
            cfg.connections = 1;
        })
        .is_err());
    drop(c);
}
