//! The asynchronous client API against a real `dafsd`: registered memory, submit paths
//! (inline/direct, region/Vec), completion groups, slot limits, EOF, and the promise
//! that the library starts no threads.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;
mod completion;
mod io_edges;
mod submit;

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use common::{pattern, Provider, TestServer};
use dafs_client::dafs_proto::Status;
use dafs_client::limits::COMPLETION_GROUPS_MAX;
use dafs_client::{
    BatchCompletion, BatchIoDesc, CgId, Client, Completion, Error, IoBuf, OpenOptions,
};

use completion::*;
use io_edges::*;
use submit::*;

/// Write `len` bytes of `pattern(0, len, seed)` to `name` in the export.
pub(crate) fn make_file(srv: &TestServer, name: &str, len: usize, seed: u8) -> Vec<u8> {
    let data = pattern(0, len, seed);
    std::fs::write(srv.dir().join(name), &data).unwrap();
    data
}

pub(crate) fn ok(c: &Completion) -> usize {
    match &c.result {
        Ok(n) => *n,
        Err(e) => panic!("completion {} failed: {e:?}", c.user_data),
    }
}

for_each_provider!(
    registered_memory,
    submit_paths_and_counters,
    completion_groups,
    slots_are_credits_and_submit_never_blocks,
    eof_semantics,
    max_io_size_is_enforced,
    no_hidden_threads,
    server_reads_and_writes_race_free_with_many_in_flight,
    server_death_fails_in_flight_io,
    close_after_submitted_io,
    huge_offsets,
    completion_groups_are_bounded,
    completion_queue_is_bounded
);
