//! The server's state directory (`state_dir`): what must outlive a restart. Today the
//! handle secret (`handle.key`, 32 random bytes, mode 0600), which keeps persistent
//! handles valid across restarts; later, state for reclaims.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Bytes of the handle secret.
pub const HANDLE_KEY_BYTES: usize = 32;
const HANDLE_KEY_FILE: &str = "handle.key";

/// A fresh random secret (handles of this boot only).
pub fn random_key() -> std::io::Result<[u8; HANDLE_KEY_BYTES]> {
    let mut k = [0u8; HANDLE_KEY_BYTES];
    getrandom::getrandom(&mut k).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(k)
}

/// The handle secret kept in `dir`, created (directory 0700, file 0600) on first use.
/// A key file of the wrong size or readable by others is an error, not replaced: a
/// silently new key would turn every handle given out into BADHANDLE.
pub fn handle_key(dir: &Path) -> std::io::Result<[u8; HANDLE_KEY_BYTES]> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let path = dir.join(HANDLE_KEY_FILE);
    match std::fs::read(&path) {
        Ok(k) => {
            let mode = std::fs::metadata(&path)?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(std::io::Error::other(format!(
                    "{} is accessible to others (mode {:o}); make it 0600",
                    path.display(),
                    mode & 0o777
                )));
            }
            k.try_into().map_err(|k: Vec<u8>| {
                std::io::Error::other(format!(
                    "{} holds {} bytes, not {HANDLE_KEY_BYTES}",
                    path.display(),
                    k.len()
                ))
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_key(dir, &path),
        Err(e) => Err(e),
    }
}

fn create_key(dir: &Path, path: &Path) -> std::io::Result<[u8; HANDLE_KEY_BYTES]> {
    let key = random_key()?;
    // Written under a temporary name and renamed: a crash never leaves a short key.
    let tmp = dir.join(format!("{HANDLE_KEY_FILE}.tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(&key)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_created_once_private_and_kept() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("state");
        let k1 = handle_key(&dir).unwrap();
        assert_eq!(handle_key(&dir).unwrap(), k1);
        let mode = std::fs::metadata(dir.join(HANDLE_KEY_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.join(HANDLE_KEY_FILE), b"short").unwrap();
        assert!(handle_key(&dir).unwrap_err().to_string().contains("holds 5 bytes"));
        std::fs::write(dir.join(HANDLE_KEY_FILE), k1).unwrap();
        let key_path = dir.join(HANDLE_KEY_FILE);
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(handle_key(&dir).unwrap_err().to_string().contains("accessible to others"));
    }
}
