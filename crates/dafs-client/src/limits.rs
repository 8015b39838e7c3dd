//! The client library's own limits (the protocol's are in [`dafs_proto::limits`]). Like
//! every bound in dafs, each is named here with the reason for its value, and listed in
//! docs/architecture.md ("Limits").

use dafs_proto::limits::SLOTS_MAX;
use dafs_proto::types::BATCH_MAX;

/// Most completion groups an application may hold at once (the library's internal group
/// for blocking calls is not counted): [`Client::create_cg`](crate::Client::create_cg)
/// fails with [`Error::TooManyCompletionGroups`](crate::Error::TooManyCompletionGroups)
/// beyond it. Requests in flight are bounded by slots (at most `SLOTS_MAX`), so more
/// groups than that buy no concurrency; the bound turns groups created and never
/// destroyed into a clear error instead of growth.
pub const COMPLETION_GROUPS_MAX: usize = SLOTS_MAX as usize;

/// The most completions one group's queue is ever sized for, delivered and owed: every
/// slot a session can have carrying a batch of the most I/Os, each delivering one
/// completion per I/O plus one for the batch. A session's bound is the same product of
/// its negotiated values,
/// [`Client::completions_queued_max`](crate::Client::completions_queued_max).
pub const COMPLETIONS_QUEUED_MAX: usize = SLOTS_MAX as usize * (BATCH_MAX as usize + 1);
