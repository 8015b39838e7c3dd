//! The PostMark pathname set the seed's Table I hashes.
//!
//! PostMark 1.51 (Debian `postmark`) names its files by a sequence number under its
//! location — `LOC/1`, `LOC/2`, … — or `LOC/sK/N` with `set subdirectories` > 1 (seen
//! with strace). The seed runs one PostMark client per 150-file pool, each with its own
//! location; Table I counts the initial pools (900 files on 2 nodes with 6 clients,
//! 1,500 on 4 with 10, 2,400 on 8 with 16).

use crate::path::ClusterPath;

/// PostMark's file pool per client in the seed's experiments.
pub const SEED_FILES_PER_CLIENT: usize = 150;

/// The seed's clients for each cluster size in Table I: (nodes, clients).
pub const SEED_TABLE_I: [(usize, usize); 3] = [(2, 6), (4, 10), (8, 16)];

/// The pool paths of `clients` PostMark clients with `files_per_client` files each,
/// client `c` working in `/pm<c>` (no subdirectories, PostMark's default).
pub fn postmark_pool_paths(clients: usize, files_per_client: usize) -> Vec<ClusterPath> {
    let mut out = Vec::with_capacity(clients * files_per_client);
    for c in 0..clients {
        for n in 1..=files_per_client {
            out.push(
                ClusterPath::new(format!("/pm{c}/{n}")).expect("generated paths are absolute"),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_is_clients_times_files() {
        let p = postmark_pool_paths(6, SEED_FILES_PER_CLIENT);
        assert_eq!(p.len(), 900);
        assert_eq!(p[0].to_string(), "/pm0/1");
        assert_eq!(p[899].to_string(), "/pm5/150");
    }
}
