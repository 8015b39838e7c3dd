//! Property: whatever sequence of registrations, deregistrations and direct reads and
//! writes a client issues — with valid or invalid {key, offset, len} — the server never
//! touches client memory outside the range a successful request named, and every
//! request outside a live region is refused with BAD_REGION.

use std::time::Duration;

use dafs_client::dafs_proto::{decode_reply, RemoteRegion, Reply, Request, Status};
use dafs_client::{Client, ClientConfig, OpenOptions, RegionId};
use proptest::prelude::*;

const FILE_LEN: usize = 1 << 20;

#[derive(Debug, Clone)]
enum Op {
    Alloc(usize),
    Free(usize),
    Read { region: usize, bogus_key: bool, offset: u64, len: u32, file_off: u64 },
    Write { region: usize, bogus_key: bool, offset: u64, len: u32, file_off: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    // One draw in four names a key that was never registered.
    let range = (
        0usize..8,
        prop::bool::weighted(0.25),
        0u64..140_000,
        0u32..140_000,
        0u64..(FILE_LEN as u64),
    );
    prop_oneof![
        1 => (1usize..131_072).prop_map(Op::Alloc),
        1 => (0usize..8).prop_map(Op::Free),
        4 => range.clone().prop_map(|(region, bogus_key, offset, len, file_off)| Op::Read { region, bogus_key, offset, len, file_off }),
        2 => range.prop_map(|(region, bogus_key, offset, len, file_off)| Op::Write { region, bogus_key, offset, len, file_off }),
    ]
}

fn file_byte(i: usize) -> u8 {
    (i * 7 % 253) as u8
}

fn status_of(m: &[u8]) -> (Status, Option<u32>) {
    let (h, r) = decode_reply(m, 1 << 22).unwrap();
    let n = match r {
        Reply::ReadDirect { count, .. } | Reply::Write { count, .. } => Some(count),
        _ => None,
    };
    (h.status, n)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 50, ..ProptestConfig::default() })]
    #[test]
    fn server_never_touches_memory_outside_a_region(ops in prop::collection::vec(op(), 1..30)) {
        let export = tempfile::tempdir().unwrap();
        let sockdir = tempfile::tempdir().unwrap();
        let sock = sockdir.path().join("p.sock");
        let content: Vec<u8> = (0..FILE_LEN).map(file_byte).collect();
        std::fs::write(export.path().join("r"), &content).unwrap();
        std::fs::write(export.path().join("w"), vec![0u8; FILE_LEN]).unwrap();
        let mut cfg = dafs_server::ServerConfig::new(export.path());
        cfg.listen = "127.0.0.1:0".into();
        cfg.shm_socket = Some(sock.clone());
        cfg.set_inline_threshold(0);
        let srv = dafs_server::start(cfg).unwrap();
        {
            let mut c = Client::connect(&format!("dafs+shm://{}", sock.display()), ClientConfig { connect_timeout: Duration::from_secs(10), ..Default::default() }).unwrap();
            let fr = c.open("r", OpenOptions::read()).unwrap();
            let fw = c.open("w", OpenOptions::read_write()).unwrap();
            // Live regions with their shadow copies.
            let mut live: Vec<(RegionId, Vec<u8>)> = Vec::new();
            let mut seed = 1u8;
            for op in ops {
                match op {
                    Op::Alloc(len) => {
                        let r = c.alloc_registered(len).unwrap();
                        seed = seed.wrapping_add(31);
                        let fill: Vec<u8> = (0..len).map(|i| (i as u8) ^ seed).collect();
                        c.region_mut(r).unwrap().copy_from_slice(&fill);
                        live.push((r, fill));
                    }
                    Op::Free(i) => {
                        if !live.is_empty() {
                            let (r, _) = live.remove(i % live.len());
                            c.unregister(r).unwrap();
                        }
                    }
                    Op::Read { region, bogus_key, offset, len, file_off } | Op::Write { region, bogus_key, offset, len, file_off } => {
                        let is_read = matches!(op, Op::Read { .. });
                        let (key, region_len) = if live.is_empty() || bogus_key {
                            (0xdead_0000_0000u64 + region as u64, 0usize)
                        } else {
                            let (r, s) = &live[region % live.len()];
                            (r.0, s.len())
                        };
                        let rr = RemoteRegion { key, offset };
                        let req = if is_read {
                            Request::ReadDirect { open_id: fr.open_id(), offset: file_off, len, region: rr }
                        } else {
                            Request::WriteDirect { open_id: fw.open_id(), offset: file_off, len, stable: false, region: rr }
                        };
                        let (st, count) = status_of(&c.raw_call(&req).unwrap());
                        let fits = region_len > 0 && offset.checked_add(len as u64).is_some_and(|e| e <= region_len as u64);
                        if !fits {
                            prop_assert_eq!(st, Status::BadRegion, "out-of-region request must be refused: {:?}", op);
                        } else {
                            prop_assert_eq!(st, Status::Ok, "{:?}", op);
                            let idx = live.iter().position(|(r, _)| r.0 == key).unwrap();
                            let n = count.unwrap() as usize;
                            if is_read {
                                let avail = FILE_LEN.saturating_sub(file_off as usize);
                                prop_assert_eq!(n, (len as usize).min(avail));
                                let o = offset as usize;
                                live[idx].1[o..o + n].copy_from_slice(&content[file_off as usize..file_off as usize + n]);
                            } else {
                                prop_assert_eq!(n, len as usize);
                                let o = offset as usize;
                                let on_disk = std::fs::read(export.path().join("w")).unwrap();
                                let end = file_off as usize + n;
                                prop_assert!(on_disk.len() >= end);
                                prop_assert!(on_disk[file_off as usize..end] == live[idx].1[o..o + n], "written bytes come from exactly the named range");
                            }
                        }
                    }
                }
                // Every live region matches its shadow: nothing outside a named range moved.
                for (r, shadow) in &live {
                    prop_assert!(c.region(*r).unwrap() == &shadow[..], "region {:?} changed outside a placement", r);
                }
            }
            c.close(fr).unwrap();
            c.close(fw).unwrap();
        }
        srv.shutdown();
    }
}
