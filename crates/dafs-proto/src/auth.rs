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

fn transcript(
    secret: &[u8],
    label: &[u8],
    session_id: u64,
    first: &[u8; NONCE_LEN],
    second: &[u8; NONCE_LEN],
    client_id: &[u8],
) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
    m.update(label);
    m.update(&session_id.to_le_bytes());
    m.update(first);
    m.update(second);
    m.update(&(client_id.len() as u32).to_le_bytes());
    m.update(client_id);
    m
}

pub fn client_proof(
    secret: &[u8],
    session_id: u64,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    client_id: &[u8],
) -> [u8; NONCE_LEN] {
    transcript(secret, b"dafs-v1 client", session_id, server_nonce, client_nonce, client_id)
        .finalize()
        .into_bytes()
        .into()
}

pub fn server_proof(
    secret: &[u8],
    session_id: u64,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    client_id: &[u8],
) -> [u8; NONCE_LEN] {
    transcript(secret, b"dafs-v1 server", session_id, client_nonce, server_nonce, client_id)
        .finalize()
        .into_bytes()
        .into()
}

/// Constant-time check of a client's proof.
pub fn verify_client(
    secret: &[u8],
    session_id: u64,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    client_id: &[u8],
    proof: &[u8; NONCE_LEN],
) -> bool {
    transcript(secret, b"dafs-v1 client", session_id, server_nonce, client_nonce, client_id)
        .verify_slice(proof)
        .is_ok()
}

/// Constant-time check of a server's proof.
pub fn verify_server(
    secret: &[u8],
    session_id: u64,
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    client_id: &[u8],
    proof: &[u8; NONCE_LEN],
) -> bool {
    transcript(secret, b"dafs-v1 server", session_id, client_nonce, server_nonce, client_id)
        .verify_slice(proof)
        .is_ok()
}

/// The key of a session's SESSION_BIND proofs: HMAC(shared secret, label | session
/// token). The token travels once, in the SESSION_CREATE reply to the session's creator,
/// so without a shared secret it alone keeps other clients from binding (taking over) the
/// session; with one, both are needed.
pub fn bind_key(secret: Option<&[u8]>, session_token: &[u8; NONCE_LEN]) -> [u8; NONCE_LEN] {
    let mut m =
        HmacSha256::new_from_slice(secret.unwrap_or(&[])).expect("HMAC accepts keys of any length");
    m.update(b"dafs-v2 bind key");
    m.update(session_token);
    m.finalize().into_bytes().into()
}

/// SESSION_BIND (re-binding a session to a new connection) proves the same way over the
/// session's current *bind nonce* (the server's latest nonce, rotated by every bind), with
/// labels of its own so no SESSION_AUTH transcript can be replayed as a bind.
pub fn bind_proof(
    secret: &[u8],
    session_id: u64,
    bind_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    client_id: &[u8],
) -> [u8; NONCE_LEN] {
    transcript(secret, b"dafs-v1 bind client", session_id, bind_nonce, client_nonce, client_id)
        .finalize()
        .into_bytes()
        .into()
}

pub fn verify_bind(
    secret: &[u8],
    session_id: u64,
    bind_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    client_id: &[u8],
    proof: &[u8; NONCE_LEN],
) -> bool {
    transcript(secret, b"dafs-v1 bind client", session_id, bind_nonce, client_nonce, client_id)
        .verify_slice(proof)
        .is_ok()
}

/// The server's answer to a bind: covers the next bind nonce too, so a client knows it
/// came from a server holding the secret.
pub fn bind_server_proof(
    secret: &[u8],
    session_id: u64,
    client_nonce: &[u8; NONCE_LEN],
    next_nonce: &[u8; NONCE_LEN],
    client_id: &[u8],
) -> [u8; NONCE_LEN] {
    transcript(secret, b"dafs-v1 bind server", session_id, client_nonce, next_nonce, client_id)
        .finalize()
        .into_bytes()
        .into()
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
        // A SESSION_AUTH transcript is not a valid bind, and vice versa.
        assert!(!verify_bind(s, 7, &sn, &cn, b"me", &p));
        let b = bind_proof(s, 7, &sn, &cn, b"me");
        assert!(verify_bind(s, 7, &sn, &cn, b"me", &b));
        assert!(!verify_client(s, 7, &sn, &cn, b"me", &b));
        assert_ne!(bind_server_proof(s, 7, &cn, &sn, b"me"), sp);
    }

    #[test]
    fn bind_key_needs_the_token_and_the_secret() {
        let (t1, t2) = ([1u8; 32], [2u8; 32]);
        assert_ne!(bind_key(None, &t1), bind_key(None, &t2), "the token keys the proof");
        assert_ne!(bind_key(Some(b"s"), &t1), bind_key(None, &t1), "so does the secret");
        assert_ne!(bind_key(Some(b"s"), &t1), bind_key(Some(b"t"), &t1));
        assert_eq!(bind_key(Some(b"s"), &t1), bind_key(Some(b"s"), &t1));
    }
}
