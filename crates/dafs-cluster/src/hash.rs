//! The placement hash: stable across builds, platforms and Rust versions.
//!
//! Every node and client must compute the same placement, and a file's home must not
//! move when dafs is rebuilt, so the hash is spelled out here rather than taken from
//! `std` (whose `DefaultHasher` may change between releases). It is
//! **`hrw-fnv1a64-fmix64`**:
//!
//! - `key(bytes) = fmix64(fnv1a64(bytes))` — FNV-1a 64 (offset basis
//!   `0xcbf29ce484222325`, prime `0x100000001b3`) followed by MurmurHash3's 64-bit
//!   finalizer, which spreads FNV's weak low bits over all 64 (PostMark names are short
//!   numbers: `/pm3/s0/117`);
//! - `score(node, path) = fmix64(key(path) ^ key(node_id))`; the node with the highest
//!   score is the path's manager (rendezvous / highest-random-weight hashing; ties,
//!   which need a 64-bit collision, go to the smaller node id).
//!
//! This is not a cryptographic hash: a client that picks names to pile files on one
//! node only slows that node down, it gains no access. Changing anything here moves
//! almost every file; the golden values in the tests pin it.

/// The name of the hash, as written in `cluster.toml` and in the epoch record in etcd.
pub const HASH_NAME: &str = "hrw-fnv1a64-fmix64";

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET_BASIS;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// MurmurHash3's 64-bit finalizer (a bijection with full avalanche).
pub fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// The 64-bit key of a path or node id.
pub fn key(bytes: &[u8]) -> u64 {
    fmix64(fnv1a64(bytes))
}

/// Rendezvous score of a node (by its key) for a path (by its key).
pub fn score(path_key: u64, node_key: u64) -> u64 {
    fmix64(path_key ^ node_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fmix64_is_murmur3s_finalizer() {
        assert_eq!(fmix64(0), 0);
        // Reference value from MurmurHash3_x64_128's fmix64(1).
        assert_eq!(fmix64(1), 0xb456_bcfc_34c2_cb2c);
    }

    /// Golden values: if these change, every federated file changes node.
    #[test]
    fn placement_keys_are_pinned() {
        assert_eq!(key(b"/"), GOLDEN_ROOT);
        assert_eq!(score(key(b"/pm0/1"), key(b"127.0.0.1:7420")), GOLDEN_SCORE);
    }

    // Computed by an independent Python implementation of the definition above.
    const GOLDEN_ROOT: u64 = 0x23c4_9fa3_6281_442f;
    const GOLDEN_SCORE: u64 = 0x1573_3b27_6a35_2204;
}
