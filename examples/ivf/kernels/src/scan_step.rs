//! The scans: each warp takes work items (a chunk of a probed list for one query) and keeps
//! the `K` nearest vectors; [`scan`] reads the lists where they are (waiting for GPU-driven
//! requests), [`pull_scan`] copies the lists into a device cache first.

use lookahead_device::prelude::*;
use lookahead_device::uvm::{pull, Readiness, RequestQueue};

use crate::distance::{lane_part, LANE_QUADS};
use crate::params::{Batch, BoundItems, Candidates, Index, Pull, PullWork, Total, WorkPlan};
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

/// One work item's scan by the whole warp: the `K` nearest to the item's query among the
/// vectors each step hands it, kept in a [`WarpBest`].
///
/// Each vector is read by [`LANES_PER_ROW`] lanes, 4 vectors per step: lane `g` of a row's
/// group holds the query's dimensions `4g..4g + 4, 4g + 32..` in registers and sums its
/// part; three shuffles finish the distance, and the group's lanes take turns holding it,
/// so that every 8 steps each lane holds one of 32 candidates, which the warp offers to its
/// [`WarpBest`] at once. Lanes `0..K` write the item's `K` nearest.
///
/// With `QUADS` (`dim` a multiple of 4 and `rows` 16-byte aligned, see [`scan_rows`]) a lane
/// loads its dimensions 4 at a time (a quarter of the load instructions and their address
/// arithmetic), otherwise one at a time into the same places: one register layout for
/// both, so that the fallback does not raise the scans' register count.
struct ItemScan<'a, const QUADS: bool> {
    /// The item's vectors (`w.a..w.b` of the index).
    rows: &'a [f32],
    ids: &'a [u32],
    w: WorkItem,
    dim: usize,
    /// This lane's place in its row's group, and its group.
    g: usize,
    group: usize,
    qv: [f32; DIMS_PER_LANE],
    best: WarpBest,
    held: (f32, u32),
    step: usize,
}

const EMPTY: (f32, u32) = (f32::INFINITY, u32::MAX);

/// A lane's part of one vector, loaded ([`ItemScan::fetch`]) ahead of its sums.
#[derive(Clone, Copy)]
struct Fetched {
    v: [[f32; 4]; LANE_QUADS],
    id: u32,
    row: usize,
}

impl<'a, const QUADS: bool> ItemScan<'a, QUADS> {
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // counted loops keep `qv` in registers (below)
    fn new(rows: &'a [f32], w: WorkItem, index: &'a Index, batch: &Batch) -> Self {
        let dim = index.dim as usize;
        let query = &batch.queries[w.q * dim..(w.q + 1) * dim];
        let lane = lane_id() as usize;
        let g = lane % LANES_PER_ROW;
        // Counted loops over constant indices, so `qv` stays in registers: iterator loops
        // over it were left rolled (with jump threading off) and put it in local memory,
        // which made the scan 3x slower (H100, driver 580.159.04).
        let mut qv = [0.0f32; DIMS_PER_LANE];
        for i in 0..DIMS_PER_LANE {
            let d = lane_dim(g, i);
            if d < dim {
                qv[i] = query[d];
            }
        }
        ItemScan {
            rows,
            ids: &index.ids[..],
            w,
            dim,
            g,
            group: lane / LANES_PER_ROW,
            qv,
            best: WarpBest::new(),
            held: EMPTY,
            step: 0,
        }
    }

    /// One step: the distance to vector `row` of the index (this lane's group's; none past
    /// `w.b`), every 8 steps offered with the others.
    #[inline(always)]
    fn step(&mut self, row: usize) {
        let f = self.fetch(row);
        self.consume(f);
    }

    /// This lane's part of vector `row` (its dimensions `lane_dim(g, ..)`, zero past `dim`)
    /// and the vector's id; zeros and no id past `w.b`.
    #[inline(always)]
    fn fetch(&self, row: usize) -> Fetched {
        let (w, dim, g) = (self.w, self.dim, self.g);
        let mut f = Fetched {
            v: [[0.0; 4]; LANE_QUADS],
            id: u32::MAX,
            row,
        };
        if row >= w.b {
            return f;
        }
        // The id is loaded with the row, not after its distance: behind the sum it was a
        // second round trip to memory in every step.
        f.id = self.ids[row];
        let at = (row - w.a) * dim;
        for (j, quad) in f.v.iter_mut().enumerate() {
            let d = lane_dim(g, 4 * j);
            if QUADS && d < dim {
                // SAFETY: a <= row < b and d + 4 <= dim (both multiples of 4), so
                // at + d + 4 <= (b - a) * dim <= rows.len(); `rows` is 16-byte aligned
                // and at + d a multiple of 4, so the quad is aligned.
                *quad = unsafe { quad::load(self.rows, at + d) };
            } else if !QUADS {
                for (u, x) in quad.iter_mut().enumerate() {
                    if d + u < dim {
                        // SAFETY: a <= row < b and d + u < dim, so at + d + u <
                        // (b - a) * dim <= rows.len().
                        *x = unsafe { *self.rows.get_unchecked(at + d + u) };
                    }
                }
            }
        }
        f
    }

    /// The distance to a fetched vector, held by the lane whose turn it is; every 8 steps
    /// the lanes' held candidates are offered together.
    #[inline(always)]
    fn consume(&mut self, f: Fetched) {
        let mut s = lane_part(&self.qv, &f.v);
        s += warp::shfl_xor_f32(s, 1);
        s += warp::shfl_xor_f32(s, 2);
        s += warp::shfl_xor_f32(s, 4);
        if f.row < self.w.b && self.g == self.step % LANES_PER_ROW {
            self.held = (s, f.id);
        }
        self.step += 1;
        if self.step % LANES_PER_ROW == 0 {
            self.best.offer(self.held); // warp-uniform: `step` is
            self.held = EMPTY;
        }
    }

    /// The rows `rows` hands out, 4 per step (one per group of lanes, `usize::MAX` for none;
    /// `None` on every lane when done), each step's vectors loaded while the step before is
    /// summed: one step per round trip to memory left the scans of small batches waiting
    /// on it.
    #[inline(always)]
    fn stream(&mut self, mut rows: impl FnMut() -> Option<usize>) {
        let Some(row) = rows() else {
            return;
        };
        let mut next = self.fetch(row);
        loop {
            let cur = next;
            let more = rows();
            if let Some(row) = more {
                next = self.fetch(row);
            }
            self.consume(cur);
            if more.is_none() {
                return;
            }
        }
    }

    /// Every vector of the item, 4 per step.
    #[inline(always)]
    fn all_rows(&mut self) {
        let (mut r0, b, group) = (self.w.a, self.w.b, self.group);
        self.stream(|| {
            let row = (r0 < b).then_some(r0 + group);
            r0 += 32 / LANES_PER_ROW;
            row
        });
    }

    /// The vectors whose lower bound (`bounds[r - w.a]` for vector `r`) does not exceed
    /// the `K`-th distance kept so far; the others cannot be among the `K` nearest.
    ///
    /// First the 32 vectors of lowest bound among those each lane checks (4 in every 128,
    /// [`LowBounds`]), so that the `K`-th distance is near its final value before the pass
    /// that checks every bound: then the pass computes little more than the `K` nearest.
    /// The second pass reads the bounds the same way, [`LOW_QUADS`] quads a lane at a time,
    /// in rounds of every 4th row (a round of 32 rows in a row per load had a quarter of
    /// the bytes in flight, and the pass waited on them); the first pass's 32 vectors are
    /// prefetched into L2 before their distances: one at a time, each was a round trip to
    /// memory. `bounds` holds the item's bounds padded to a multiple of 4
    /// ([`crate::item_bounds`]), 16-byte aligned.
    ///
    /// Tried on the H100 and slower: the `K` lowest bounds exactly (a second [`WarpBest`]
    /// over all the bounds: 2.7 times as long), and only the `K` lowest of the 32 (a looser
    /// `K`-th let more vectors through: 1.5 times as long).
    #[inline(always)]
    fn bounded_rows(&mut self, bounds: &[f32]) {
        let (w, lane) = (self.w, lane_id() as usize);
        let n = w.b - w.a;
        let low = LowBounds::of(bounds, n).0;
        if low.1 != u32::MAX {
            let row = self.rows.as_ptr().wrapping_add(low.1 as usize * self.dim);
            let mut f = 0;
            while f < self.dim {
                prefetch::prefetch_l2(row.wrapping_add(f));
                f += 32; // one 128-byte line
            }
        }
        let (group, mut st) = (self.group, 0);
        self.stream(|| {
            let at = warp::shfl_idx_u32(low.1, (group * LANES_PER_ROW + st) as u32);
            st += 1;
            (st <= LANES_PER_ROW).then_some(if at == u32::MAX {
                usize::MAX
            } else {
                w.a + at as usize
            })
        });
        let mut base = 0;
        while base < n {
            let mut v = LowBounds::quads(bounds, base);
            // A shift instead of an index: the loop is not unrolled (each round inlines the
            // whole step), and `v[j]` with a variable `j` would put `v` in local memory.
            // Round `t` is bound `t` of every lane: rows 4 apart.
            for t in 0..LOW_BOUNDS {
                let b = v[0];
                v = core::array::from_fn(|i| {
                    if i + 1 < v.len() {
                        v[i + 1]
                    } else {
                        f32::INFINITY
                    }
                });
                let r = LowBounds::row(base, t);
                let first = r - 4 * lane;
                // Not `b <= kth`: a NaN bound passes (its distance is computed, as the
                // warp scan computes it).
                let above = b.partial_cmp(&self.best.kth().0) == Some(core::cmp::Ordering::Greater);
                // The lane's own quad: only it can have taken `r` in the first pass.
                let pass = r < n && r as u32 != low.1 && !above;
                self.bounded_round(w.a + first, 4, warp::ballot(pass));
            }
            base += 128 * LOW_QUADS;
        }
    }

    /// Offers what the lanes hold now and starts the next 8 steps' candidates.
    #[inline(always)]
    fn offer_held(&mut self) {
        if self.step % LANES_PER_ROW != 0 {
            self.best.offer(self.held);
            self.held = EMPTY;
            self.step = self.step.next_multiple_of(LANES_PER_ROW);
        }
    }

    /// The vectors `first + stride * i` for the bits `i` of `mask`, 4 per step.
    #[inline(always)]
    fn bounded_round(&mut self, first: usize, stride: usize, mut mask: u32) {
        while mask != 0 {
            let m1 = mask & mask.wrapping_sub(1);
            let m2 = m1 & m1.wrapping_sub(1);
            let m3 = m2 & m2.wrapping_sub(1);
            let mine = match self.group {
                0 => mask,
                1 => m1,
                2 => m2,
                _ => m3,
            };
            let row = if mine != 0 {
                first + stride * mine.trailing_zeros() as usize
            } else {
                usize::MAX
            };
            self.step(row);
            mask = m3 & m3.wrapping_sub(1);
        }
    }

    /// Every vector of the item, or with `bounds` those that can beat the `K`-th, then
    /// [`ItemScan::finish`].
    #[inline(always)]
    fn run(mut self, bounds: Option<&[f32]>, first: usize, out: &mut Candidates) {
        match bounds {
            Some(b) => self.bounded_rows(b),
            None => self.all_rows(),
        }
        self.finish(first, out)
    }

    /// The last candidates offered, and lanes `0..K` write the item's `K` nearest to its
    /// candidates at `first`.
    #[inline(always)]
    fn finish(mut self, first: usize, out: &mut Candidates) {
        self.offer_held();
        let lane = lane_id() as usize;
        if lane < K {
            let (d, id) = self.best.entry();
            out.dist[first + lane] = d;
            out.ids[first + lane] = id;
        }
    }
}

/// Each lane's vector of lowest bound among the rows `128 j + 4 lane + {0, 1, 2, 3}` of an
/// item (`(bound, row)`, [`EMPTY`] for none), read 16 bytes a lane and [`LOW_QUADS`] quads at
/// a time: the first pass over an item's bounds waited on their loads, and quads put 4
/// times the bytes in flight per load instruction.
struct LowBounds((f32, u32));

/// Quads of bounds a lane loads at once ([`LowBounds::quads`]), in both passes of
/// [`ItemScan::bounded_rows`].
const LOW_QUADS: usize = 4;
/// Bounds a lane loads at once.
const LOW_BOUNDS: usize = 4 * LOW_QUADS;

impl LowBounds {
    /// Over the first `n` bounds of `bounds` (padded to a multiple of 4, 16-byte aligned).
    #[inline(always)]
    fn of(bounds: &[f32], n: usize) -> LowBounds {
        let mut low = EMPTY;
        let mut base = 0;
        while base < n {
            let v = Self::quads(bounds, base);
            for (t, &b) in v.iter().enumerate() {
                let r = Self::row(base, t);
                if r < n && (low.1 == u32::MAX || b < low.0) {
                    low = (b, r as u32);
                }
            }
            base += 128 * LOW_QUADS;
        }
        LowBounds(low)
    }

    /// The row of the lane's bound `t` of those [`LowBounds::quads`] loads from `base`:
    /// element `t % 4` of its quad `t / 4`.
    #[inline(always)]
    fn row(base: usize, t: usize) -> usize {
        base + 128 * (t / 4) + 4 * lane_id() as usize + t % 4
    }

    /// The lane's [`LOW_QUADS`] quads of bounds from `base` (a multiple of 128), bound `t`
    /// that of row [`LowBounds::row`]`(base, t)`; infinity past `bounds`.
    #[inline(always)]
    fn quads(bounds: &[f32], base: usize) -> [f32; LOW_BOUNDS] {
        let mut v = [f32::INFINITY; LOW_BOUNDS];
        for (j, quad) in v.chunks_exact_mut(4).enumerate() {
            let r = Self::row(base, 4 * j);
            if r + 4 <= bounds.len() {
                // SAFETY: in bounds (checked), `r` a multiple of 4 and `bounds` 16-byte
                // aligned (checked in `bounded_scan`).
                quad.copy_from_slice(&unsafe { quad::load(bounds, r) });
            }
        }
        v
    }
}

// Lanes `0..K` write an item's nearest from the warp's [`WarpBest`] of 32.
const _: () = assert!(K <= 32);

/// The dimension lane `g` of a row's group holds in its `i`-th register: quads
/// `4g..4g + 4, 4g + 32..`, so that aligned rows load 4 floats at a time.
#[inline(always)]
fn lane_dim(g: usize, i: usize) -> usize {
    4 * g + 4 * LANES_PER_ROW * (i / 4) + i % 4
}

/// One work item, by the whole warp: the `K` nearest of the vectors `rows` (rows `w.a..`
/// of the index) to the item's query, written to the item's `K` candidates; with `bounds`,
/// only the vectors whose bound can beat the `K`-th ([`ItemScan::bounded_rows`]). Quad
/// loads where the rows allow them.
#[inline(always)]
fn scan_rows(
    rows: &[f32],
    w: WorkItem,
    index: &Index,
    batch: &Batch,
    work: &WorkPlan,
    bounds: Option<&[f32]>,
    out: &mut Candidates,
) {
    let first = (work.pair_cand_off[w.p] as usize + w.ch) * K;
    if index.dim % 4 == 0 && quad::aligned(rows) {
        ItemScan::<true>::new(rows, w, index, batch).run(bounds, first, out)
    } else {
        ItemScan::<false>::new(rows, w, index, batch).run(bounds, first, out)
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
        scan_rows(rows, w, &index, &batch, &work, None, &mut out);
        it += warps;
    }
}

/// [`scan`] for a large resident batch, after [`crate::tile_bounds`] wrote the bounds of
/// the work items of `range` (see [`BoundItems`]):
/// each warp takes items of the range in turn, as [`scan`] does, but computes the exact
/// distance only to the vectors whose bound does not exceed the `K`-th kept so far (the
/// 32 of lowest bound first). A vector it skips is farther than the item's `K`-th, so the
/// `K` nearest are [`scan`]'s, bit for bit. `bounds` must be 16-byte aligned, with each
/// item's bounds padded as [`crate::item_bounds`] pads them (otherwise it writes nothing).
#[kernel(launch_bounds(threads = SCAN_THREADS, blocks_per_sm = 2))]
pub fn bounded_scan(
    index: Index,
    batch: Batch,
    work: WorkPlan,
    range: BoundItems,
    bounds: &[f32],
    mut out: Candidates,
) {
    if !usable(&index) || !quad::aligned(bounds) {
        return;
    }
    let dim = index.dim as usize;
    let warps = grid_stride_x() / 32;
    let items = (work.totals[Total::WorkItems as usize] as usize).min(work.item_pair.len());
    let first = range.first as usize;
    let end = (first + range.count as usize)
        .min(items)
        .min(range.offsets.len().saturating_sub(1));
    let at = |it: usize| (range.offsets[it] - range.offsets[first]) as usize;
    let mut it = first + global_index_x() / 32;
    while it < end {
        let w = item(&work, &index, &batch, it);
        let rows = &index.vectors[w.a * dim..w.b * dim];
        let b = &bounds[at(it)..at(it + 1).max(at(it) + (w.b - w.a))];
        if it + warps < end {
            // The next item's bounds on their way while this one is scanned.
            let next = bounds.as_ptr().wrapping_add(at(it + warps));
            let mut f = lane_id() as usize * 32;
            while f < at(it + warps + 1) - at(it + warps) {
                prefetch::prefetch_l2(next.wrapping_add(f));
                f += 32 * 32;
            }
        }
        scan_rows(rows, w, &index, &batch, &work, Some(b), &mut out);
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
        scan_rows(rows, w, index, batch, work, None, out);
    }
}
