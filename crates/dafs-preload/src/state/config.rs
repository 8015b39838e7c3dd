//! The environment this library is configured by: `DAFS_MOUNT`, `DAFS_PRELOAD_DEBUG`
//! and `DAFS_SECRET_FILE`, read once.

use std::sync::OnceLock;

use crate::paths::{self, MountCfg};

/// The shortest secret accepted, in bytes: the server refuses shorter ones too (`dafs
/// serve` checks the same length), so a short secret here could never authenticate.
const SECRET_BYTES_MIN: usize = 8;

pub struct Config {
    pub mounts: Vec<MountCfg>,
    pub debug: bool,
    pub secret: Option<Result<Vec<u8>, String>>,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

pub fn config() -> &'static Config {
    CONFIG.get_or_init(|| {
        let debug =
            std::env::var("DAFS_PRELOAD_DEBUG").map(|v| !v.is_empty() && v != "0").unwrap_or(false);
        let mounts = match std::env::var("DAFS_MOUNT") {
            Ok(s) => paths::parse_mounts(&s).unwrap_or_else(|e| {
                eprintln!("dafs-preload: DAFS_MOUNT: {e}; no path is redirected to dafs");
                Vec::new()
            }),
            Err(_) => Vec::new(),
        };
        let secret = std::env::var("DAFS_SECRET_FILE").ok().filter(|p| !p.is_empty()).map(|p| {
            let s =
                std::fs::read(&p).map_err(|e| format!("cannot read DAFS_SECRET_FILE {p}: {e}"))?;
            let s = s.strip_suffix(b"\n").unwrap_or(&s).to_vec();
            if s.len() < SECRET_BYTES_MIN {
                return Err(format!("the secret in {p} is shorter than {SECRET_BYTES_MIN} bytes"));
            }
            Ok(s)
        });
        Config { mounts, debug, secret }
    })
}

macro_rules! debug {
    ($($a:tt)*) => {
        if $crate::state::config().debug {
            eprintln!("dafs-preload[{}]: {}", std::process::id(), format_args!($($a)*));
        }
    };
}
