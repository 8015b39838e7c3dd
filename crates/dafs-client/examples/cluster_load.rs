//! Load on a cluster URL for `scripts/test-federation.sh`: for SECONDS, create, write,
//! read back, check and remove files under DIR, counting errors. Prints one line:
//! `ops N errors E epoch_first A epoch_last B map_refreshes R`.
//!
//! `cargo run -p dafs-client --example cluster_load -- URL DIR SECONDS`

use std::time::{Duration, Instant};

use dafs_client::{Client, ClientConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: cluster_load URL DIR SECONDS");
        std::process::exit(2);
    }
    let secs: u64 = args[3].parse().expect("SECONDS is a number");
    let (target, _) = dafs_client::parse_url(&args[1]).expect("a cluster URL");
    let mut c = Client::connect(&target, ClientConfig::default()).expect("connect");
    let epoch_first = c.cluster_epoch().unwrap_or(0);
    let dir = &args[2];
    let (mut ops, mut errors) = (0u64, 0u64);
    let end = Instant::now() + Duration::from_secs(secs);
    let mut i = 0u64;
    while Instant::now() < end {
        let name = format!("{dir}/f{i}");
        let data = format!("{name} {}", i * 7919);
        let r = c
            .create_and_write(&name, data.as_bytes(), 0o644)
            .and_then(|_| c.open_and_read(&name, 4096))
            .and_then(|(f, got, _)| {
                c.close(f)?;
                if got != data.as_bytes() {
                    eprintln!("{name}: read back {} bytes that differ", got.len());
                    return Err(dafs_client::Error::InvalidArgument("data differs"));
                }
                // Every other file stays, so later reads cross the epoch change.
                if i.is_multiple_of(2) {
                    c.remove(&name)?;
                }
                Ok(())
            });
        if let Err(e) = r {
            errors += 1;
            eprintln!("{name}: {e}");
        }
        ops += 1;
        i += 1;
    }
    // The files kept must all still be found, wherever the map now puts their names.
    for j in (1..i).step_by(2) {
        if let Err(e) = c.stat(&format!("{dir}/f{j}")) {
            errors += 1;
            eprintln!("{dir}/f{j} after the load: {e}");
        }
    }
    println!(
        "ops {ops} errors {errors} epoch_first {epoch_first} epoch_last {} map_refreshes {}",
        c.cluster_epoch().unwrap_or(0),
        c.cluster_map_refreshes().unwrap_or(0)
    );
}
