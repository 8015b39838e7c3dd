//! The wire form of a file handle (40 bytes) and the MAC that makes it unforgeable.
//!
//! Layout (`FileHandle::LEN` = 40):
//! - byte 0: kind in the high nibble (1 volatile, 2 kernel), kernel handle length in
//!   the low nibble (0..=12);
//! - byte 1: the kernel handle's type (0 for volatile handles);
//! - byte 2: export index;
//! - byte 3: reserved, 0;
//! - bytes 4..16: the body. Volatile: boot instance (u32) | serial (u64), naming an
//!   entry of this boot's descriptor cache. Kernel: the kernel's persistent handle
//!   (`name_to_handle_at`), zero-padded;
//! - bytes 16..32: MAC = HMAC-SHA256(server secret, bytes 0..16 | export tag [| boot
//!   instance u64, volatile only]), truncated to 16 bytes;
//! - bytes 32..40: key tag, 8 bytes of SHA-256 of the secret: a handle sealed under
//!   another secret (an earlier boot without `state_dir`, another server) is told apart
//!   as STALE, so clients look the path up again, instead of failing its MAC
//!   (BADHANDLE). 64 bits, so that two secrets share a tag with odds of 2^-64: with the
//!   one byte of protocol version 2, one restart in 256 turned STALE into BADHANDLE.
//!
//! A made-up or altered handle keeps the key tag of the handle it was made from and
//! fails the MAC: BADHANDLE.
//!
//! Bytes 0..16 are the handle's *id*: the same object always gets the same id (kernel)
//! or keeps its id while cached (volatile), so the id keys the descriptor cache.
//! The export tag (SHA-256 of the export's name and path) binds a handle to the export
//! it was issued for: rewriting the export index, or reordering or re-pointing exports
//! across a restart, fails the MAC (BADHANDLE) instead of naming an object elsewhere.

use std::ops::Range;

use dafs_proto::{FileHandle, Status};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::config::Export;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a handle that identify its object (everything before the MAC).
pub const ID_BYTES: usize = 16;
pub type HandleId = [u8; ID_BYTES];
/// The largest kernel handle that fits a wire handle (ext4, XFS and tmpfs use 8-12
/// bytes; objects with larger handles, e.g. on btrfs, get volatile handles).
pub const KERNEL_BYTES_MAX: usize = 12;
/// MAC bytes kept (HMAC-SHA256 truncated; 128 bits leave forging to chance: 2^-128).
pub const MAC_BYTES: usize = 16;

const KIND_VOLATILE: u8 = 1;
const KIND_KERNEL: u8 = 2;
const TYPE_AT: usize = 1;
const EXPORT_AT: usize = 2;
const RESERVED_AT: usize = 3;
/// Where the key tag sits, after the MAC (outside the id: it is the same for every handle).
const KEY_TAG_AT: Range<usize> = ID_BYTES + MAC_BYTES..FileHandle::LEN;
pub const KEY_TAG_BYTES: usize = 8;
const _: () = assert!(ID_BYTES + MAC_BYTES + KEY_TAG_BYTES == FileHandle::LEN);
const BODY_AT: Range<usize> = 4..ID_BYTES;
const INSTANCE_AT: Range<usize> = 4..8;
const SERIAL_AT: Range<usize> = 8..16;
/// Most exports a handle can name (the export index is one byte).
pub const EXPORTS_MAX: usize = u8::MAX as usize + 1;

/// What a handle names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// An entry of this boot's descriptor cache.
    Volatile { serial: u64 },
    /// A kernel persistent handle (type, bytes).
    Kernel { handle_type: u8, bytes: Vec<u8> },
}

#[derive(Debug)]
pub struct Decoded {
    pub export: u32,
    pub body: Body,
    pub id: HandleId,
}

/// Seals and checks handles with the server's secret.
pub struct Sealer {
    mac: HmacSha256,
    export_tags: Vec<[u8; 32]>,
    instance: u64,
    key_tag: [u8; KEY_TAG_BYTES],
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sealer {{ exports: {}, .. }}", self.export_tags.len()) // never the key
    }
}

fn export_tag(e: &Export) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(e.name.as_bytes());
    h.update([0u8]);
    // Canonical, so that "/srv/a" and "/srv/a/" (or a symlink to it) are one export.
    let path = std::fs::canonicalize(&e.path).unwrap_or_else(|_| e.path.clone());
    h.update(path.as_os_str().as_encoded_bytes());
    h.finalize().into()
}

fn key_tag_of(secret: &[u8]) -> [u8; KEY_TAG_BYTES] {
    Sha256::digest(secret)[..KEY_TAG_BYTES].try_into().expect("a digest holds a key tag")
}

impl Sealer {
    pub fn new(secret: &[u8], exports: &[Export], instance: u64) -> Self {
        assert!(exports.len() <= EXPORTS_MAX, "config validation bounds the exports");
        Sealer {
            mac: HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length"),
            export_tags: exports.iter().map(export_tag).collect(),
            instance,
            key_tag: key_tag_of(secret),
        }
    }

    fn mac_of(&self, id: &HandleId, volatile: bool) -> HmacSha256 {
        let mut m = self.mac.clone();
        m.update(id);
        m.update(&self.export_tags[id[EXPORT_AT] as usize]);
        if volatile {
            // A volatile handle of another boot (same secret, instance colliding in the
            // 32 bits the handle carries) fails here rather than naming this boot's entry.
            m.update(&self.instance.to_le_bytes());
        }
        m
    }

    /// The handle of `body` in export `export`.
    pub fn seal(&self, export: u32, body: &Body) -> FileHandle {
        let mut id = [0u8; ID_BYTES];
        assert!((export as usize) < self.export_tags.len());
        id[EXPORT_AT] = export as u8;
        let volatile = match body {
            Body::Volatile { serial } => {
                id[0] = KIND_VOLATILE << 4;
                id[INSTANCE_AT].copy_from_slice(&(self.instance as u32).to_le_bytes());
                id[SERIAL_AT].copy_from_slice(&serial.to_le_bytes());
                true
            }
            Body::Kernel { handle_type, bytes } => {
                assert!(bytes.len() <= KERNEL_BYTES_MAX, "caller checks the kernel handle fits");
                id[0] = (KIND_KERNEL << 4) | bytes.len() as u8;
                id[TYPE_AT] = *handle_type;
                id[BODY_AT][..bytes.len()].copy_from_slice(bytes);
                false
            }
        };
        let tag = self.mac_of(&id, volatile).finalize().into_bytes();
        let mut b = [0u8; FileHandle::LEN];
        b[..ID_BYTES].copy_from_slice(&id);
        b[ID_BYTES..ID_BYTES + MAC_BYTES].copy_from_slice(&tag[..MAC_BYTES]);
        b[KEY_TAG_AT].copy_from_slice(&self.key_tag);
        FileHandle(b)
    }

    /// Check a handle: BADHANDLE for one this server (with this secret) did not issue —
    /// forged, corrupted, or re-pointed at another export; STALE for one sealed under
    /// another secret, or a volatile handle of an earlier boot.
    pub fn unseal(&self, fh: &FileHandle) -> Result<Decoded, Status> {
        let b = &fh.0;
        let id: HandleId = b[..ID_BYTES].try_into().expect("ID_BYTES fit a handle");
        let export = id[EXPORT_AT] as u32;
        let (kind, len) = (id[0] >> 4, (id[0] & 0x0f) as usize);
        // What no server ever issues is BADHANDLE whatever the key: checked first.
        let well_formed = export < EXPORTS_MAX as u32
            && id[RESERVED_AT] == 0
            && match kind {
                KIND_VOLATILE => len == 0 && id[TYPE_AT] == 0,
                KIND_KERNEL => len <= KERNEL_BYTES_MAX,
                _ => false,
            };
        if !well_formed {
            return Err(Status::BadHandle);
        }
        if b[KEY_TAG_AT] != self.key_tag {
            return Err(Status::Stale); // another secret's (or forged with a made-up tag)
        }
        if export as usize >= self.export_tags.len() {
            return Err(Status::BadHandle);
        }
        let body = match kind {
            KIND_VOLATILE if len == 0 && id[TYPE_AT] == 0 => {
                if id[INSTANCE_AT] != (self.instance as u32).to_le_bytes() {
                    return Err(Status::Stale); // an earlier boot's cache entry
                }
                Body::Volatile { serial: u64::from_le_bytes(id[SERIAL_AT].try_into().unwrap()) }
            }
            KIND_KERNEL if len <= KERNEL_BYTES_MAX => {
                Body::Kernel { handle_type: id[TYPE_AT], bytes: id[BODY_AT][..len].to_vec() }
            }
            _ => return Err(Status::BadHandle),
        };
        let volatile = matches!(body, Body::Volatile { .. });
        self.mac_of(&id, volatile)
            .verify_truncated_left(&b[ID_BYTES..ID_BYTES + MAC_BYTES])
            .map_err(|_| Status::BadHandle)?;
        Ok(Decoded { export, body, id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exports() -> Vec<Export> {
        vec![Export::new("a", "/srv/a", false), Export::new("b", "/srv/b", false)]
    }

    #[test]
    fn sealed_handles_unseal_and_tampering_is_refused() {
        let s = Sealer::new(b"secret", &exports(), 7);
        let k = Body::Kernel { handle_type: 1, bytes: vec![1, 2, 3, 4, 5, 6, 7, 8] };
        for (export, body) in [(0, Body::Volatile { serial: 42 }), (1, k)] {
            let fh = s.seal(export, &body);
            let d = s.unseal(&fh).unwrap();
            assert_eq!((d.export, &d.body), (export, &body));
            for i in 0..FileHandle::LEN {
                let mut bad = fh;
                bad.0[i] ^= 0x10;
                assert!(s.unseal(&bad).is_err(), "byte {i} flipped still unseals");
            }
            let mut other = fh;
            other.0[EXPORT_AT] = (export ^ 1) as u8;
            assert_eq!(s.unseal(&other).unwrap_err(), Status::BadHandle);
            // Altering anything but the key tag (or a volatile handle's boot instance,
            // which names an earlier boot) is BADHANDLE, never STALE.
            let volatile = matches!(body, Body::Volatile { .. });
            for i in (0..ID_BYTES + MAC_BYTES).filter(|i| !volatile || !INSTANCE_AT.contains(i)) {
                let mut bad = fh;
                bad.0[i] ^= 0x01;
                assert_eq!(s.unseal(&bad).unwrap_err(), Status::BadHandle, "byte {i}");
            }
        }
    }

    #[test]
    fn another_secret_or_boot_does_not_unseal() {
        let s = Sealer::new(b"secret", &exports(), 7);
        let k = s.seal(0, &Body::Kernel { handle_type: 1, bytes: vec![9; 8] });
        let v = s.seal(0, &Body::Volatile { serial: 1 });
        let other = Sealer::new(b"another", &exports(), 7);
        assert_ne!(other.key_tag, s.key_tag, "test keys with different tags");
        assert_eq!(other.unseal(&k).unwrap_err(), Status::Stale);
        assert_eq!(other.unseal(&v).unwrap_err(), Status::Stale);
        // Many other secrets: every one says STALE (a one-byte tag failed 1 in 256).
        for i in 0..4096u32 {
            let other = Sealer::new(format!("key {i}").as_bytes(), &exports(), 7);
            assert_eq!(other.unseal(&k).unwrap_err(), Status::Stale, "secret {i}");
        }
        // Another secret that somehow shares the key tag: the MAC still refuses it.
        let mut same_tag = Sealer::new(b"another", &exports(), 7);
        same_tag.key_tag = s.key_tag;
        assert_eq!(same_tag.unseal(&k).unwrap_err(), Status::BadHandle);
        let reboot = Sealer::new(b"secret", &exports(), 8);
        assert!(reboot.unseal(&k).is_ok(), "kernel handles outlive a restart");
        assert_eq!(reboot.unseal(&v).unwrap_err(), Status::Stale);
        // Same low 32 bits of the instance: the MAC still tells the boots apart.
        let collide = Sealer::new(b"secret", &exports(), 7 | (1 << 40));
        assert_eq!(collide.unseal(&v).unwrap_err(), Status::BadHandle);
        let moved = vec![Export::new("a", "/srv/elsewhere", false), exports()[1].clone()];
        assert_eq!(Sealer::new(b"secret", &moved, 7).unseal(&k).unwrap_err(), Status::BadHandle);
    }
}
