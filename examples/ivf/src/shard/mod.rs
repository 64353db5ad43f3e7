//! The index over several GPUs, in one process or one process per GPU (as across hosts).
//!
//! - [`Partition`]: the lists cut into contiguous runs balanced by bytes, one per rank, and
//!   each rank's index ([`Partition::shard_layout`]): all lists, the others' empty.
//! - [`crate::gpu::ShardIndex`]: a shard on its GPU, its lists in host memory, read through
//!   the GPU-driven pull (or in place).
//! - [`ranks`]: a batch over every rank: the queries broadcast, each rank's `K` nearest
//!   all-gathered with NCCL and merged ([`merge`]); or, in one process, gathered by peer
//!   copies over the GPUs' link.
//! - [`Synthetic`]: an index any rank can generate any part of; [`exact`]: the exact
//!   neighbours of a few queries for recall.

pub mod exact;
pub mod merge;
pub mod partition;
pub mod ranks;
pub mod synthetic;

pub use merge::merge_gathered;
pub use partition::Partition;
pub use synthetic::Synthetic;
