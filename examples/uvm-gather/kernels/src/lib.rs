//! # uvm-gather-kernels
//!
//! A row gather, `out[i] = table[picks[i]]`, over a table in managed memory, written to run
//! under every Unified Memory policy of `lookahead-uvm`. The table is cut into tiles of
//! [`Table::tile_rows`] rows: the ranges a policy moves, asks for or pulls, tile `t` with
//! ready flag and pull counter `t`.
//!
//! - [`gather`]: each warp copies its rows. With an enabled request queue it first asks for
//!   the tile of every row it will copy (GPU-driven requests), then waits for each tile
//!   before its row; with [`HINT_L2`] it prefetches its next row into L2 (the in-kernel
//!   hint). Without either it reads through the fault path, or whatever placement the host
//!   set up (resident, prefetched, mapped).
//! - [`pull_gather`]: the GPU-driven pull. A warp whose tile is not in the device cache yet
//!   claims it and copies it whole over the mapping; warps that find it claimed wait for the
//!   copy (a copying warp never waits, so every wait ends), and every row is then read from
//!   the cache. What was copied stays cached for later launches.
//!
//! Each warp counts how its rows went into [`Gathered::stats`] ([`STAT_READY`] and the
//! others).
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

use lookahead_device::prelude::*;
use lookahead_device::uvm::{pull, Readiness, RequestQueue, Requested};

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/uvm_gather_kernels_ptx.rs"));

/// Threads per block of both kernels.
pub const THREADS: u32 = 256;
/// Blocks of both kernels that fit on one SM (their launch bounds): a grid of this many per
/// SM is resident at once, which a kernel that waits for the host needs (a block waiting to
/// be dispatched holds up the work queued behind it, the flag writes among it).
pub const BLOCKS_PER_SM: u32 = 2;

/// [`gather`]'s `hints`: no in-kernel prefetch.
pub const HINT_NONE: u32 = 0;
/// [`gather`]'s `hints`: prefetch each warp's next row into L2.
pub const HINT_L2: u32 = 1;

/// Words of [`Gathered::stats`].
pub const STATS: usize = 4;
/// Rows read after their tile arrived by request, or from the pull cache.
pub const STAT_READY: usize = 0;
/// Rows read through the fault path because their request fell back (ring full).
pub const STAT_WENT_AHEAD: usize = 1;
/// Rows read after a wait that timed out (through the fault path, or over the mapping).
pub const STAT_TIMED_OUT: usize = 2;
/// Tiles this launch asked the host for, or copied into the pull cache.
pub const STAT_MOVED: usize = 3;

/// The table: `data.len() / row_words` rows of `row_words` words, in managed memory, cut into
/// tiles of `tile_rows` rows (the last one may be shorter).
#[derive(KernelParams)]
#[repr(C)]
pub struct Table {
    /// The rows, one after another.
    pub data: ManagedSlice<u32>,
    /// Words per row.
    pub row_words: u32,
    /// Rows per tile.
    pub tile_rows: u32,
}

/// What a gather writes.
#[derive(KernelParams)]
#[repr(C)]
pub struct Gathered {
    /// `picks.len() * row_words` words: row `picks[i]` at `i * row_words`.
    pub rows: DeviceSliceMut<u32>,
    /// [`STATS`] counters, added to (zero them before the launch).
    pub stats: DeviceSliceMut<u32>,
}

/// The GPU-driven pull's state: the device copy of the table, per tile the copy chunks that
/// are complete (kept across launches), and per tile whether a warp of this launch claimed
/// its copy (zero at launch).
#[derive(KernelParams)]
#[repr(C)]
pub struct Pull {
    /// The copy of [`Table::data`], same layout, in device memory.
    pub cache: DeviceSliceMut<u32>,
    /// Per tile: copy chunks complete ([`pull::copy_chunk`]).
    pub counters: DeviceSliceMut<u32>,
    /// Per tile: non-zero once a warp of this launch claimed its copy.
    pub claims: DeviceSliceMut<u32>,
    /// How long a warp waits for a tile another warp copies before it reads the row over
    /// the mapping, nanoseconds.
    pub wait_ns: u64,
}

/// Words `first..end` of tile `tile` of a table of `rows` rows of `row_words` words cut into
/// tiles of `tile_rows` rows (empty past the last row).
#[inline(always)]
pub fn tile_words(tile: usize, rows: usize, row_words: usize, tile_rows: usize) -> (usize, usize) {
    let first = tile.saturating_mul(tile_rows).min(rows);
    let end = first.saturating_add(tile_rows).min(rows);
    (first * row_words, end * row_words)
}

/// The table's rows, when the launch's buffers hold what it writes; `None` otherwise (the
/// kernels then write nothing, which the host's poisoned output shows).
#[inline(always)]
fn rows_of(table: &Table, picks: usize, out: &Gathered) -> Option<usize> {
    let w = table.row_words as usize;
    let fits = picks.checked_mul(w).is_some_and(|n| out.rows.len() >= n);
    (w > 0 && table.tile_rows > 0 && fits && out.stats.len() >= STATS).then(|| table.data.len() / w)
}

/// This warp's rows, warp `w` of the grid taking `w`, `w + warps`, ...: `(i, picks[i])`,
/// leaving out picks past the table's `rows`.
#[inline(always)]
fn warp_rows(picks: &[u32], rows: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    let (first, warps) = (global_index_x() / 32, grid_stride_x() / 32);
    (first..picks.len())
        .step_by(warps.max(1))
        .map(|i| (i, picks[i] as usize))
        .filter(move |&(_, r)| r < rows)
}

/// Copies `src` to `dst` (the same length) with the whole warp.
#[inline(always)]
fn copy_row(src: &[u32], dst: &mut [u32], lane: usize) {
    let mut w = lane;
    while w < src.len() {
        dst[w] = src[w];
        w += 32;
    }
}

/// Adds lane 0's counts into `stats` (one atomic per counter that moved).
#[inline(always)]
fn add_stats(stats: &mut DeviceSliceMut<u32>, counts: &[u32; STATS], lane: usize) {
    if lane == 0 {
        for (k, &n) in counts.iter().enumerate() {
            if n > 0 {
                atomic_add(&mut stats[k], n);
            }
        }
    }
}

/// Asks `queue` for tile `tile` (words `first..end` of `data`), unless it arrived by an
/// earlier launch's request and was not moved back since; whether a request was queued.
#[inline(always)]
fn ask(queue: &RequestQueue, data: &[u32], tile: usize, (first, end): (usize, usize)) -> bool {
    let flag = tile as u32;
    if queue.arrived_earlier(flag) {
        queue.mark_arrived(flag);
        return false;
    }
    let range = &data[first..end];
    queue.request(flag, range.as_ptr(), range.len() * 4) == Requested::Queued
}

/// Copies row `picks[i]` of `table` to row `i` of `out.rows`, warp `w` of the grid taking
/// rows `w`, `w + warps`, ... Picks past the table's rows are skipped. See the crate docs
/// for `queue` and `hints`.
#[kernel(launch_bounds(threads = THREADS, blocks_per_sm = BLOCKS_PER_SM))]
pub fn gather(table: Table, picks: &[u32], queue: RequestQueue, hints: u32, mut out: Gathered) {
    let Some(rows) = rows_of(&table, picks.len(), &out) else {
        return;
    };
    let (w, tile_rows) = (table.row_words as usize, table.tile_rows as usize);
    let lane = lane_id() as usize;
    let warps = grid_stride_x() / 32;
    let mut counts = [0u32; STATS];
    if queue.is_enabled() && lane == 0 {
        // Every tile this warp reads, asked for before it waits for any.
        for (_, r) in warp_rows(picks, rows) {
            let t = r / tile_rows;
            let words = tile_words(t, rows, w, tile_rows);
            counts[STAT_MOVED] += ask(&queue, &table.data, t, words) as u32;
        }
    }
    for (i, r) in warp_rows(picks, rows) {
        if queue.is_enabled() {
            let mut code = 0;
            if lane == 0 {
                code = match queue.wait_ready((r / tile_rows) as u32) {
                    Readiness::Arrived => STAT_READY,
                    Readiness::GoAhead => STAT_WENT_AHEAD,
                    Readiness::TimedOut => STAT_TIMED_OUT,
                } as u32;
                counts[code as usize] += 1;
            }
            // Also holds the other lanes until lane 0 is done waiting.
            warp::shfl_idx_u32(code, 0);
        }
        if hints == HINT_L2 && i + warps < picks.len() {
            let next = (picks[i + warps] as usize).min(rows.saturating_sub(1)) * w;
            let mut f = lane * 32; // one 128-byte line per lane per step
            while f < w {
                prefetch::prefetch_l2(table.data.as_ptr().wrapping_add(next + f));
                f += 32 * 32;
            }
        }
        copy_row(
            &table.data[r * w..(r + 1) * w],
            &mut out.rows[i * w..(i + 1) * w],
            lane,
        );
    }
    add_stats(&mut out.stats, &counts, lane);
}

/// [`gather`] under the GPU-driven pull: the table is mapped for the GPU (accessed-by
/// advice, pages on the host), and each row is read from `pull.cache` once its tile's copy
/// there is complete. A warp whose tile is not complete claims it (`pull.claims`) and copies
/// it whole with [`pull::copy_chunk`], or, when another warp has claimed it, waits for that
/// copy up to `pull.wait_ns` and then reads the row over the mapping.
#[kernel(launch_bounds(threads = THREADS, blocks_per_sm = BLOCKS_PER_SM))]
pub fn pull_gather(table: Table, picks: &[u32], mut pull: Pull, mut out: Gathered) {
    let Some(rows) = rows_of(&table, picks.len(), &out) else {
        return;
    };
    let (w, tile_rows) = (table.row_words as usize, table.tile_rows as usize);
    let tiles = rows.div_ceil(tile_rows);
    if pull.cache.len() < table.data.len()
        || pull.counters.len() < tiles
        || pull.claims.len() < tiles
    {
        return;
    }
    let lane = lane_id() as usize;
    let (src, dst) = (table.data.as_ptr(), pull.cache.as_mut_ptr());
    let counters = pull.counters.as_mut_ptr();
    let mut counts = [0u32; STATS];
    for (i, r) in warp_rows(picks, rows) {
        let t = r / tile_rows;
        let (first, end) = tile_words(t, rows, w, tile_rows);
        let chunks = pull::chunks((end - first) * 4);
        // SAFETY (every use of `counters.add(t)` below): `t < tiles <= counters.len()`.
        let mut cached = unsafe { pull::wait_complete(counters.add(t), chunks, 0) };
        if !cached {
            let mut won = 0;
            if lane == 0 {
                won = (atomic_cas(&mut pull.claims[t], 0, 1) == 0) as u32;
            }
            if warp::shfl_idx_u32(won, 0) == 1 {
                for c in 0..chunks {
                    let (x, y) = pull::chunk_words(c, end - first);
                    // SAFETY: `first + y <= end <= table.data.len() <= cache.len()`; the
                    // claim makes this warp the tile's only writer, and no warp reads the
                    // tile's copy before its counter says it is complete.
                    unsafe {
                        pull::copy_chunk(
                            src.add(first + x),
                            dst.add(first + x),
                            y - x,
                            counters.add(t),
                        )
                    };
                }
                counts[STAT_MOVED] += 1;
                cached = true;
            } else {
                cached = unsafe { pull::wait_complete(counters.add(t), chunks, pull.wait_ns) };
            }
        }
        counts[if cached { STAT_READY } else { STAT_TIMED_OUT }] += 1;
        let row = r * w..(r + 1) * w;
        let dst_row = &mut out.rows[i * w..(i + 1) * w];
        if cached {
            // SAFETY: the tile's copy is complete (its counter said so, with acquire
            // ordering), and no warp writes a complete tile again.
            let cache = unsafe { core::slice::from_raw_parts(dst as *const u32, row.end) };
            copy_row(&cache[row], dst_row, lane);
        } else {
            copy_row(&table.data[row], dst_row, lane);
        }
    }
    add_stats(&mut out.stats, &counts, lane);
}
