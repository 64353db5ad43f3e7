//! # ivf-kernels
//!
//! The kernels of an IVF-Flat search, in plain Rust with `#[kernel]`, each taking a few
//! parameter structs ([`Index`], [`Batch`], [`PlanOut`], [`PairPlanOut`], [`WorkPlan`],
//! [`Pull`], [`Candidates`]):
//!
//! 1. [`coarse`]: each query's `nprobe` nearest centroids (a warp per
//!    [`COARSE_QUERIES_PER_BLOCK`] queries over the centroids in quads);
//! 2. [`plan`]: one block turns the (query, probe) pairs into the probed lists, asks the
//!    host for all of them at once through a request queue (GPU-driven migration), and cuts
//!    the lists into chunks of work items, one per (pair, chunk); [`plan_pairs`] writes the
//!    same items for a small batch of resident lists, without the passes over every list;
//! 3. [`scan`]: each warp takes work items in turn, waits until its list is resident (or
//!    goes ahead on the fault path), and keeps the `K` nearest vectors of its chunk;
//! 4. [`merge`]: each query's `K` nearest over its candidate lists.
//!
//! [`pull_scan`] replaces [`scan`] for the GPU-driven pull policy: a few of its warps copy
//! the probed lists that are not yet cached over the interconnect into a device-memory
//! cache, and the others scan each list's copy as soon as it is complete.
//!
//! A large resident batch, where many queries probe each list, is scanned by tiles
//! instead: [`tile_work`] (one block) lists the units of [`tile_bounds`] from the plan's
//! per-list counts, [`tile_bounds`] writes a lower bound for every (query, vector) pair
//! from TF32 tensor-core products of a list chunk staged once for 32 of its queries, and
//! [`bounded_scan`] computes exact distances only where a bound can still beat the `K`-th.
//!
//! The lists live in managed memory; everything else in device memory.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

mod block;
mod coarse_step;
mod distance;
mod merge_step;
mod params;
mod plan_step;
mod quad;
mod scan_step;
mod tile_plan;
mod tile_step;
mod topk;
mod yardstick;

pub use coarse_step::{coarse, coarse_merge};
pub use merge_step::merge;
pub use params::*;
pub use plan_step::{plan, plan_pairs};
pub use scan_step::{bounded_scan, pull_scan, scan};
pub use tile_plan::{item_bounds, tile_work, units_at_most, ListWork, TILE_SUMMARY_WORDS};
pub use tile_step::{
    bound_slack, tile_bounds, TILE_QUERIES, TILE_ROWS, TILE_THREADS, UNIT_ROWS, UNIT_WORDS,
};
pub use yardstick::read_sum;

use lookahead_device::prefetch::Level;

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/ivf_kernels_ptx.rs"));

/// Neighbours kept per query.
pub const K: usize = 10;
/// Most probes per query.
pub const MAX_NPROBE: usize = 64;
/// Most dimensions per vector.
pub const MAX_DIM: usize = 128;
/// Queries one block of [`coarse`] handles (each of its warps sees all of them).
pub const COARSE_QUERIES_PER_BLOCK: usize = 4;
/// Threads per block of [`coarse`].
pub const COARSE_THREADS: u32 = 256;
/// Warps per block of [`coarse`].
pub const COARSE_WARPS: usize = COARSE_THREADS as usize / 32;
/// Most slices [`coarse`] splits the centroids into.
pub const MAX_COARSE_SLICES: usize = 32;
/// Most candidates [`coarse_merge`] rescores per query (slices times nprobe).
pub const MAX_COARSE_CANDIDATES: usize = 256;
/// Threads of a [`merge`] block that works on one query: a 1-query batch's merge loads
/// about 10,000 candidates, and with 256 threads their rounds of loads took most of it;
/// 1,024 threads would spill at the 64 registers they allow.
pub const MERGE_THREADS: u32 = 512;
/// Most warps of a [`merge`] block that works on one query.
pub const MERGE_WARPS: usize = MERGE_THREADS as usize / 32;
/// Most candidates a [`merge`] block per query ranks in shared memory (those that can be
/// among the `K` nearest; more fall back to merging lists).
pub const MERGE_RANKED: usize = 512;
/// Entries a [`merge`] block per query samples to bound its `K`-th nearest.
pub const MERGE_SAMPLE: usize = 256;
/// Threads of the one block of [`plan`].
pub const PLAN_THREADS: u32 = 1024;
/// Threads per block of [`scan`] (and of [`merge`] with a warp per query).
pub const SCAN_THREADS: u32 = 256;
/// [`pull_scan`] copies on every this-many-th SM (the rest scan): on an H100 with two blocks
/// of 256 threads per SM, 33 SMs of 16 warps, each warp with 4 KiB of loads in flight, keep
/// more than 2 MiB in flight, far more than the interconnect needs.
pub const PULL_COPY_EVERY_NTH_SM: u32 = 4;
/// Words of [`pull_scan`]'s `work` array.
pub const PULL_WORK_WORDS: usize = 8;
/// Lanes of [`scan`] that share one vector.
pub const LANES_PER_ROW: usize = 8;
/// Query dimensions each lane of [`scan`] holds in registers: `MAX_DIM / LANES_PER_ROW`.
pub const DIMS_PER_LANE: usize = MAX_DIM / LANES_PER_ROW;
/// Vectors per work item of [`scan`] unless the caller picks another size.
pub const DEFAULT_CHUNK_ROWS: u32 = 512;
/// `hints` value for [`scan`]: no in-kernel hint (0, which no level's code is).
pub const HINT_NONE: u32 = 0;
/// `hints` value for [`scan`]: `prefetch.global.L2` over the warp's next work item (it does
/// not migrate managed pages on the H100, driver 580.159.04).
pub const HINT_L2: u32 = Level::L2.code() as u32;
/// `readiness[list]` after [`scan`]: the list arrived by request before it was read.
pub const READY_ARRIVED: u32 = 1;
/// `readiness[list]`: the request fell back, so the list was read through the fault path.
pub const READY_WENT_AHEAD: u32 = 2;
/// `readiness[list]`: the wait timed out; the list was read through the fault path.
pub const READY_TIMED_OUT: u32 = 3;

/// Work items [`plan`] can write for `pairs` (query, probe) pairs over lists of at most
/// `max_list_len` vectors: one per (pair, chunk). Size `item_pair`/`item_chunk` with it.
pub fn max_items(pairs: usize, max_list_len: usize, chunk_rows: u32) -> usize {
    pairs * max_list_len.div_ceil(chunk_rows.max(1) as usize).max(1)
}

/// The launch of [`coarse`] for `queries` queries in one slice,
/// [`COARSE_QUERIES_PER_BLOCK`] per block (a shape with `per_block` 0). (Host only.)
#[cfg(not(target_arch = "nvptx64"))]
pub fn coarse_config(queries: usize) -> lookahead::launch::LaunchConfig {
    coarse_grid(queries, COARSE_QUERIES_PER_BLOCK, 1)
}

/// The launch of [`merge`] for `queries` queries on `sms` SMs: a block per query while
/// that leaves SMs idle anyway (at most `sms` queries), else a warp per query. (Host only.)
#[cfg(not(target_arch = "nvptx64"))]
pub fn merge_config(
    queries: usize,
    nprobe: usize,
    sms: usize,
) -> (lookahead::launch::LaunchConfig, MergeShape) {
    let per_block = queries <= sms;
    let cfg = if per_block {
        lookahead::launch::LaunchConfig::new((queries.max(1) as u32, 1, 1), (MERGE_THREADS, 1, 1))
    } else {
        lookahead::launch::LaunchConfig::for_len(queries * 32, SCAN_THREADS)
    };
    (
        cfg,
        MergeShape {
            nprobe: nprobe as u32,
            per_block: per_block as u32,
        },
    )
}

/// The launch of [`coarse`] for `queries` queries, `per_block` per block (the shape's
/// `per_block`), with the centroids split into `slices` (the grid's `y`). (Host only.)
#[cfg(not(target_arch = "nvptx64"))]
pub fn coarse_grid(
    queries: usize,
    per_block: usize,
    slices: usize,
) -> lookahead::launch::LaunchConfig {
    let per_block = per_block.clamp(1, COARSE_QUERIES_PER_BLOCK);
    let blocks = queries.div_ceil(per_block).clamp(1, u32::MAX as usize);
    let slices = slices.clamp(1, MAX_COARSE_SLICES) as u32;
    lookahead::launch::LaunchConfig::new((blocks as u32, slices, 1), (COARSE_THREADS, 1, 1))
}

/// Queries per block of [`coarse`] for `queries` queries on `sms` SMs: one while a block per
/// query fills at most half the SMs, else [`COARSE_QUERIES_PER_BLOCK`] (each centroid load
/// then serves that many queries). A block of several queries issues each query's sums in
/// every warp; for a few queries the warps' instruction streams, not the loads, set the
/// step's time.
pub fn coarse_per_block(queries: usize, sms: usize) -> usize {
    if queries * 2 <= sms {
        1
    } else {
        COARSE_QUERIES_PER_BLOCK
    }
}

/// How many slices [`coarse`] splits the centroids into for `queries` queries over `nlist`
/// centroids on `sms` SMs ([`coarse_per_block`] queries per block): enough for about a
/// block per SM, at least a warp's worth of centroids per slice's block, and at most
/// [`MAX_COARSE_SLICES`] lists to merge.
pub fn coarse_slices(queries: usize, nlist: usize, nprobe: usize, sms: usize) -> usize {
    let blocks = queries.div_ceil(coarse_per_block(queries, sms)).max(1);
    let by_sms = sms.div_ceil(blocks);
    let by_centroids = nlist.div_ceil(COARSE_THREADS as usize);
    let by_merge = (MAX_COARSE_CANDIDATES / nprobe.max(1)).max(1);
    by_sms
        .min(by_centroids)
        .min(by_merge)
        .clamp(1, MAX_COARSE_SLICES)
}
