//! The scans: each warp takes work items (a chunk of a probed list for one query) and keeps
//! the `K` nearest vectors; [`scan`] reads the lists where they are (waiting for GPU-driven
//! requests), [`pull_scan`] copies the lists into a device cache first.

use lookahead_device::prelude::*;
use lookahead_device::uvm::{pull, Readiness, RequestQueue};

use crate::distance::{lane_part, LANE_QUADS};
use crate::params::{Batch, Candidates, Index, Pull, PullWork, Total, WorkPlan};
use crate::quad;
use crate::topk::WarpBest;
use crate::{
    DIMS_PER_LANE, HINT_L2, K, LANES_PER_ROW, MAX_DIM, PULL_WORK_WORDS, READY_ARRIVED,
    READY_TIMED_OUT, READY_WENT_AHEAD, SCAN_THREADS,
};

/// A work item of [`crate::plan`], decoded: pair `p` (query `q`) and chunk `ch` of list `l`,
/// which covers the list's vectors `a..b`.
#[derive(Clone, Copy)]
struct WorkItem {
    p: usize,
    ch: usize,
    l: usize,
    q: usize,
    a: usize,
    b: usize,
}

/// Work item `it` of the plan.
#[inline(always)]
fn item(work: &WorkPlan, index: &Index, batch: &Batch, it: usize) -> WorkItem {
    let chunk = (index.chunk_rows as usize).max(1);
    let p = work.item_pair[it] as usize;
    let ch = work.item_chunk[it] as usize;
    let l = batch.probes[p] as usize;
    let a = index.offsets[l] as usize + ch * chunk;
    let b = core::cmp::min(a + chunk, index.offsets[l + 1] as usize);
    WorkItem {
        p,
        ch,
        l,
        q: p / (batch.nprobe as usize).max(1),
        a,
        b,
    }
}

/// Whether the shapes are ones the scans handle (warp-uniform; the host finds the poisoned
/// outputs otherwise).
#[inline(always)]
fn usable(index: &Index) -> bool {
    index.dim > 0 && index.dim as usize <= MAX_DIM
}

/// One work item, by the whole warp: the `K` nearest of the vectors `rows` (rows `w.a..` of
/// the index) to the item's query, written to the item's `K` candidates.
///
/// Each vector is read by [`LANES_PER_ROW`] lanes, 4 vectors per step: lane `g` of a row's
/// group holds the query's dimensions `g, g + 8, ...` in registers and sums its part; three
/// shuffles finish the distance, and the group's lanes take turns holding it, so that every
/// 8 steps each lane holds one of 32 candidates, which the warp offers to its [`WarpBest`]
/// at once. Lanes `0..K` write the item's `K` nearest.
///
/// With `QUADS` (`dim` a multiple of 4 and `rows` 16-byte aligned, see [`scan_rows`]) lane
/// `g` holds dimensions `4g..4g + 4, 4g + 32..`, loaded 4 at a time: a quarter of the load
/// instructions and their address arithmetic.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // counted loops keep `qv` in registers (below)
fn scan_item<const QUADS: bool>(
    rows: &[f32],
    w: WorkItem,
    index: &Index,
    batch: &Batch,
    work: &WorkPlan,
    out: &mut Candidates,
) {
    let dim = index.dim as usize;
    let query = &batch.queries[w.q * dim..(w.q + 1) * dim];
    let first = (work.pair_cand_off[w.p] as usize + w.ch) * K;
    let lane = lane_id() as usize;
    let g = lane % LANES_PER_ROW;
    let group = lane / LANES_PER_ROW;
    let rows_per_step = 32 / LANES_PER_ROW;
    // Counted loops over constant indices, so `qv` stays in registers: iterator loops over it
    // were left rolled (with jump threading off) and put it in local memory, which made the
    // scan 3x slower (H100, driver 580.159.04).
    let mut qv = [0.0f32; DIMS_PER_LANE];
    for i in 0..DIMS_PER_LANE {
        let d = lane_dim::<QUADS>(g, i);
        if d < dim {
            qv[i] = query[d];
        }
    }
    let empty = (f32::INFINITY, u32::MAX);
    let (mut best, mut held) = (WarpBest::new(), empty);
    let (mut step, mut r0) = (0usize, w.a);
    while r0 < w.b {
        let row = r0 + group;
        let mut s = 0.0f32;
        // The id is loaded with the row, not after its distance: behind the sum it was a
        // second round trip to memory in every step.
        let id = if row < w.b { index.ids[row] } else { u32::MAX };
        if row < w.b && QUADS {
            let at = (row - w.a) * dim;
            let mut v = [[0.0f32; 4]; LANE_QUADS];
            for (j, quad) in v.iter_mut().enumerate() {
                let d = lane_dim::<true>(g, 4 * j);
                if d < dim {
                    // SAFETY: a <= row < b and d + 4 <= dim (both multiples of 4), so
                    // at + d + 4 <= (b - a) * dim <= rows.len(); `rows` is 16-byte aligned
                    // and at + d a multiple of 4, so the quad is aligned.
                    *quad = unsafe { quad::load(rows, at + d) };
                }
            }
            s = lane_part(&qv, &v);
        } else if row < w.b {
            let at = (row - w.a) * dim;
            for i in 0..DIMS_PER_LANE {
                let d = lane_dim::<false>(g, i);
                if d < dim {
                    // SAFETY: a <= row < b and d < dim, so at + d < (b - a) * dim <=
                    // rows.len().
                    let t = qv[i] - unsafe { *rows.get_unchecked(at + d) };
                    s += t * t;
                }
            }
        }
        s += warp::shfl_xor_f32(s, 1);
        s += warp::shfl_xor_f32(s, 2);
        s += warp::shfl_xor_f32(s, 4);
        if row < w.b && g == step % LANES_PER_ROW {
            held = (s, id);
        }
        step += 1;
        r0 += rows_per_step;
        if step % LANES_PER_ROW == 0 {
            best.offer(held); // warp-uniform: `step` is
            held = empty;
        }
    }
    if step % LANES_PER_ROW != 0 {
        best.offer(held);
    }
    if lane < K {
        let (d, id) = best.entry();
        out.dist[first + lane] = d;
        out.ids[first + lane] = id;
    }
}

// Lanes `0..K` write an item's nearest from the warp's [`WarpBest`] of 32.
const _: () = assert!(K <= 32);

/// The dimension lane `g` of a row's group holds in its `i`-th register.
#[inline(always)]
fn lane_dim<const QUADS: bool>(g: usize, i: usize) -> usize {
    if QUADS {
        4 * g + 4 * LANES_PER_ROW * (i / 4) + i % 4
    } else {
        g + LANES_PER_ROW * i
    }
}

/// [`scan_item`], with quad loads where the rows allow them.
#[inline(always)]
fn scan_rows(
    rows: &[f32],
    w: WorkItem,
    index: &Index,
    batch: &Batch,
    work: &WorkPlan,
    out: &mut Candidates,
) {
    if index.dim % 4 == 0 && quad::aligned(rows) {
        scan_item::<true>(rows, w, index, batch, work, out)
    } else {
        scan_item::<false>(rows, w, index, batch, work, out)
    }
}

/// Scans the work items [`crate::plan`] wrote ([`Total::WorkItems`] of them).
///
/// - Warp `w` of the grid takes items `w`, `w + warps`, ...
/// - For item (pair `p`, chunk `c`) it computes the distance from query `p / nprobe` to each
///   vector of chunk `c` of list `probes[p]`, and writes the `K` nearest to
///   `out.{dist, ids}[(pair_cand_off[p] + c) * K ..]`.
/// - Before a list's first item, lane 0 waits until `queue` reports the list resident (or
///   says to go ahead on the fault path) and records what happened in
///   `out.readiness[list]`.
/// - With `batch.hints == HINT_L2`, each warp first prefetches its next item's vectors into
///   L2.
///
/// Why: under GPU-driven requests a list is read only once its request is served, so the
/// scan does not fault on it. The L2 hint is the in-kernel policy; it does not migrate
/// managed pages ([`HINT_L2`](crate::HINT_L2) says where that was measured).
#[kernel(launch_bounds(threads = SCAN_THREADS, blocks_per_sm = 2))]
pub fn scan(index: Index, batch: Batch, work: WorkPlan, queue: RequestQueue, mut out: Candidates) {
    if !usable(&index) {
        return;
    }
    let dim = index.dim as usize;
    let lane = lane_id() as usize;
    let warps = grid_stride_x() / 32;
    let items = (work.totals[Total::WorkItems as usize] as usize).min(work.item_pair.len());
    let mut ready_list = usize::MAX;
    let mut it = global_index_x() / 32;
    while it < items {
        let w = item(&work, &index, &batch, it);
        // One check of the whole chunk, so the scan can read without one per load.
        let rows = &index.vectors[w.a * dim..w.b * dim];
        if queue.is_enabled() && w.l != ready_list {
            let mut code = 0;
            if lane == 0 {
                code = match queue.wait_ready(w.l as u32) {
                    Readiness::Arrived => READY_ARRIVED,
                    Readiness::GoAhead => READY_WENT_AHEAD,
                    Readiness::TimedOut => READY_TIMED_OUT,
                };
                out.readiness[w.l] = code;
            }
            // The shuffle also holds the other lanes until lane 0 is done waiting.
            if warp::shfl_idx_u32(code, 0) == READY_ARRIVED {
                ready_list = w.l;
            }
        }
        if batch.hints == HINT_L2 && it + warps < items {
            let next = item(&work, &index, &batch, it + warps);
            let mut f = next.a * dim + lane * 32; // one 128-byte line per lane per step
            while f < next.b * dim {
                prefetch::prefetch_l2(index.vectors.as_ptr().wrapping_add(f));
                f += 32 * 32;
            }
        }
        scan_rows(rows, w, &index, &batch, &work, &mut out);
        it += warps;
    }
}

/// [`scan`] for the GPU-driven pull policy: the lists are mapped for the GPU (accessed-by
/// advice, pages on the host), and this kernel copies the probed lists that are not yet in
/// the device-memory cache (`pull.cache`, the layout of `index.vectors`) over the
/// interconnect, then scans the copies.
///
/// - The warps on every `copy_every`-th SM ([`sm_id`] a multiple of it), and warp 0 of
///   block 0 in any case, copy the chunks [`crate::plan`] numbered (`wanted`, `copy_first`,
///   [`Total::CopyChunks`] of them). They claim chunks in order ([`PullWork::NextChunk`])
///   and add one to `copied[list]` per chunk ([`pull::copy_chunk`]).
/// - Then every warp takes work items in order ([`PullWork::NextItem`]). Before a list's
///   first item it waits until the list's copy is complete ([`pull::wait_complete`], at
///   most `wait_us` microseconds); after a timeout it reads the list over the interconnect
///   instead, so the result is the same.
/// - `readiness[list]` gets [`READY_ARRIVED`] (read from the cache) or [`READY_TIMED_OUT`].
/// - `work` (at least [`PULL_WORK_WORDS`] words) must be zero at launch. Afterwards
///   [`PullWork::CopyStartNs`] and [`PullWork::CopyEndNs`] hold the GPU's nanosecond clock
///   when the first copy warp started and when the last one finished: the copy's own time.
/// - Copied lists stay complete in `copied` for later launches.
///
/// Why every wait ends: a warp that copies finishes copying before it scans, and block 0's
/// first warp is one of them, so every claimed chunk is being copied and every unclaimed one
/// will be, whatever number of blocks is resident and wherever they run.
#[kernel(launch_bounds(threads = SCAN_THREADS, blocks_per_sm = 2))]
pub fn pull_scan(index: Index, batch: Batch, work: WorkPlan, mut pull: Pull, mut out: Candidates) {
    let nlist = index.offsets.len().saturating_sub(1);
    if !usable(&index)
        || pull.cache.len() < index.vectors.len()
        || pull.copied.len() < nlist
        || pull.work.len() < PULL_WORK_WORDS
    {
        return; // warp-uniform; the host finds the poisoned outputs
    }
    // Whole SMs copy: beside the copy's long system-memory loads, scanning warps on the same
    // SM ran several times slower (docs/unified-memory.md, "Copying on whole SMs"), so the
    // other SMs are left to scan at full speed.
    let copier = (pull.copy_every > 0 && sm_id() % pull.copy_every == 0)
        || (block_idx_x() == 0 && warp_id() == 0);
    if copier {
        copy_lists(&index, &work, &mut pull);
    }
    scan_pulled(&index, &batch, &work, &mut pull, &mut out);
}

/// Not `if lane == 0 { atomic_add }`: such branches split the copy loop's warps in two.
#[inline(always)]
fn claim(slot: &mut u64) -> usize {
    warp_fetch_add(slot, 1u64) as usize
}

/// A copy warp's part of [`pull_scan`]: claims copy chunks in order until none is left.
#[inline(always)]
fn copy_lists(index: &Index, work: &WorkPlan, pull: &mut Pull) {
    let lane = lane_id() as usize;
    let (dim, nlist) = (index.dim as usize, index.offsets.len().saturating_sub(1));
    let nw = (work.totals[Total::WantedLists as usize] as usize).min(pull.wanted.len());
    let copies = if nw < pull.copy_first.len() {
        pull.copy_first[nw] as usize
    } else {
        0
    };
    if claim(&mut pull.work[PullWork::CopyWarps as usize]) == 0 && lane == 0 {
        pull.work[PullWork::CopyStartNs as usize] = globaltimer_ns();
    }
    let words = pull.cache.len();
    let src = index.vectors.as_ptr() as *const u32;
    let (dst, counters) = (
        pull.cache.as_mut_ptr() as *mut u32,
        pull.copied.as_mut_ptr(),
    );
    loop {
        let c = claim(&mut pull.work[PullWork::NextChunk as usize]);
        if c >= copies {
            if lane == 0 {
                atomic_max(
                    &mut pull.work[PullWork::CopyEndNs as usize],
                    globaltimer_ns(),
                );
            }
            return;
        }
        // The wanted list whose chunks include `c`: the last `k` with copy_first[k] <= c.
        let (mut lo, mut hi) = (0usize, nw);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if pull.copy_first[mid] as usize <= c {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let l = pull.wanted[lo] as usize;
        if l >= nlist {
            continue; // warp-uniform; `plan` writes only list ids
        }
        let first = index.offsets[l] as usize * dim;
        let len = (index.offsets[l + 1] - index.offsets[l]) as usize * dim;
        let (x, y) = pull::chunk_words(c as u32 - pull.copy_first[lo], len);
        if first + y <= words {
            // SAFETY: `first + y <= words`, and the cache and the lists have `words` floats;
            // chunk `c` is copied by this warp alone; `l < nlist <= copied.len()`.
            unsafe {
                pull::copy_chunk(
                    src.add(first + x),
                    dst.add(first + x),
                    y - x,
                    counters.add(l),
                )
            };
        }
    }
}

/// Every warp's part of [`pull_scan`]: work items in order, each list read from the cache
/// once its copy is complete (or over the interconnect after a timeout).
#[inline(always)]
fn scan_pulled(
    index: &Index,
    batch: &Batch,
    work: &WorkPlan,
    pull: &mut Pull,
    out: &mut Candidates,
) {
    let (dim, lane) = (index.dim as usize, lane_id() as usize);
    let items = (work.totals[Total::WorkItems as usize] as usize).min(work.item_pair.len());
    let timeout_ns = pull.wait_us as u64 * 1000;
    let counters = pull.copied.as_mut_ptr();
    // SAFETY: the cache is read only where `wait_complete` saw its copy complete, and no
    // warp writes a range after its copy is complete.
    let cached = unsafe { core::slice::from_raw_parts(pull.cache.as_ptr(), pull.cache.len()) };
    let (mut ready_list, mut from_cache) = (usize::MAX, false);
    loop {
        let it = claim(&mut pull.work[PullWork::NextItem as usize]);
        if it >= items {
            return;
        }
        let w = item(work, index, batch, it);
        if w.l != ready_list {
            let need =
                pull::chunks((index.offsets[w.l + 1] - index.offsets[w.l]) as usize * dim * 4);
            // SAFETY: `l < nlist <= copied.len()` (probes hold list ids below nlist).
            from_cache = unsafe { pull::wait_complete(counters.add(w.l), need, timeout_ns) };
            if lane == 0 {
                out.readiness[w.l] = if from_cache {
                    READY_ARRIVED
                } else {
                    READY_TIMED_OUT
                };
            }
            ready_list = w.l;
        }
        let rows = if from_cache {
            &cached[w.a * dim..w.b * dim]
        } else {
            &index.vectors[w.a * dim..w.b * dim]
        };
        scan_rows(rows, w, index, batch, work, out);
    }
}
