//! Shared-secret challenge-response authentication (HMAC-SHA256), mutual.
//!
//! 1. SESSION_CREATE reply carries a fresh 32-byte `server_nonce`.
//! 2. The client sends SESSION_AUTH with its own fresh `client_nonce` and
//!    `client_proof = HMAC(secret, "dafs-v1 client" | session_id | server_nonce | client_nonce | client_id)`.
//! 3. The server verifies (constant time) and answers with
//!    `server_proof = HMAC(secret, "dafs-v1 server" | session_id | client_nonce | server_nonce | client_id)`,
//!    which the client verifies, so a client also knows it reached a server holding the secret.
//!
//! The secret never crosses the wire; both nonces make every transcript unique.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::ops::NONCE_LEN;

type HmacSha256 = Hmac<Sha256>;

fn transcript(secret: &[u8], label: &[u8], session_id: u64, first: &[u8; NONCE_LEN], second: &[u8; NONCE_LEN], client_id: &[u8]) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
    m.update(label);
    m.update(&session_id.to_le_bytes());
    m.update(first);
    m.update(second);
    m.update(&(client_id.len() as u32).to_le_bytes());
    m.update(client_id);
    m
}

pub fn client_proof(secret: &[u8], session_id: u64, server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN], client_id: &[u8]) -> [u8; NONCE_LEN] {
    transcript(secret, b"dafs-v1 client", session_id, server_nonce, client_nonce, client_id).finalize().into_bytes().into()
}

pub fn server_proof(secret: &[u8], session_id: u64, server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN], client_id: &[u8]) -> [u8; NONCE_LEN] {
    transcript(secret, b"dafs-v1 server", session_id, client_nonce, server_nonce, client_id).finalize().into_bytes().into()
}

/// Constant-time check of a client's proof.
pub fn verify_client(secret: &[u8], session_id: u64, server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN], client_id: &[u8], proof: &[u8; NONCE_LEN]) -> bool {
    transcript(secret, b"dafs-v1 client", session_id, server_nonce, client_nonce, client_id).verify_slice(proof).is_ok()
}

/// Constant-time check of a server's proof.
pub fn verify_server(secret: &[u8], session_id: u64, server_nonce: &[u8; NONCE_LEN], client_nonce: &[u8; NONCE_LEN], client_id: &[u8], proof: &[u8; NONCE_LEN]) -> bool {
    transcript(secret, b"dafs-v1 server", session_id, client_nonce, server_nonce, client_id).verify_slice(proof).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_and_bind_everything() {
        let (s, sn, cn) = (b"secret".as_slice(), [1u8; 32], [2u8; 32]);
        let p = client_proof(s, 7, &sn, &cn, b"me");
        assert!(verify_client(s, 7, &sn, &cn, b"me", &p));
        assert!(!verify_client(b"other", 7, &sn, &cn, b"me", &p));
        assert!(!verify_client(s, 8, &sn, &cn, b"me", &p));
        assert!(!verify_client(s, 7, &cn, &sn, b"me", &p));
        assert!(!verify_client(s, 7, &sn, &cn, b"you", &p));
        let sp = server_proof(s, 7, &sn, &cn, b"me");
        assert_ne!(sp, p, "client and server proofs differ (no reflection)");
        assert!(verify_server(s, 7, &sn, &cn, b"me", &sp));
        assert!(!verify_server(s, 7, &sn, &cn, b"me", &p));
    }
}
