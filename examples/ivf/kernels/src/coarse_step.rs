//! The coarse step: each query's `nprobe` nearest centroids.

use lookahead_device::prelude::*;

use crate::topk::{before, merge_sorted_lists, warp_sort};
use crate::{
    CoarseShape, CoarseSlices, COARSE_QUERIES_PER_BLOCK as QW, COARSE_WARPS, MAX_DIM, MAX_NPROBE,
};

/// A sorted list of up to [`MAX_NPROBE`] `(distance, index)` pairs spread over a warp's
/// registers: lane `r` holds entries `r` and `32 + r`. Empty places hold
/// `(f32::INFINITY, u32::MAX)`. Indexed by lane, not by a loop variable, so it never goes
/// to local memory (per-lane lists of `MAX_NPROBE` did: 2 KiB a thread to fill and walk).
#[derive(Clone, Copy)]
struct WarpList {
    lo: (f32, u32),
    hi: (f32, u32),
    /// No entry yet (the same on every lane).
    empty: bool,
}

impl WarpList {
    const EMPTY: WarpList = WarpList {
        lo: (f32::INFINITY, u32::MAX),
        hi: (f32::INFINITY, u32::MAX),
        empty: true,
    };

    /// Entry `r < MAX_NPROBE`, on every lane.
    #[inline(always)]
    fn entry(&self, r: usize) -> (f32, u32) {
        let (d, i) = if r < 32 { self.lo } else { self.hi };
        let src = (r % 32) as u32;
        (warp::shfl_idx_f32(d, src), warp::shfl_idx_u32(i, src))
    }

    /// Inserts `(d, i)` (the same on every lane) if it is among the first `n` entries.
    #[inline(always)]
    fn insert(&mut self, n: usize, d: f32, i: u32) {
        let lane = lane_id();
        let pos = warp::ballot(before(self.lo.0, self.lo.1, d, i)).count_ones()
            + warp::ballot(before(self.hi.0, self.hi.1, d, i)).count_ones();
        if pos as usize >= n {
            return; // warp-uniform
        }
        // Entries from `pos` on move up one place; the last one falls off.
        let lo_up = (
            warp::shfl_up_f32(self.lo.0, 1),
            warp::shfl_up_u32(self.lo.1, 1),
        );
        let hi_up = (
            warp::shfl_up_f32(self.hi.0, 1),
            warp::shfl_up_u32(self.hi.1, 1),
        );
        let lo_last = (
            warp::shfl_idx_f32(self.lo.0, 31),
            warp::shfl_idx_u32(self.lo.1, 31),
        );
        let hi_from = if lane == 0 { lo_last } else { hi_up };
        self.lo = shifted(self.lo, lo_up, (d, i), lane, pos);
        self.hi = shifted(self.hi, hi_from, (d, i), lane + 32, pos);
    }

    /// Offers each lane's `(d, c)` where `offer` holds: those that would be among the first
    /// `n` entries go in, one at a time.
    #[inline(always)]
    fn offer(&mut self, n: usize, offer: bool, d: f32, c: u32) {
        if self.empty {
            // The first offers all go in: sorting them costs 15 exchanges instead of 32
            // insertions (with a lane per centroid, most warps see only this round).
            let none = (f32::INFINITY, u32::MAX);
            self.lo = warp_sort(if offer { (d, c) } else { none });
            self.empty = false;
            return;
        }
        let (td, ti) = self.entry(n - 1);
        let mut want = warp::ballot(offer && before(d, c, td, ti));
        while want != 0 {
            let src = want.trailing_zeros();
            self.insert(n, warp::shfl_idx_f32(d, src), warp::shfl_idx_u32(c, src));
            want &= want - 1;
        }
    }
}

/// Entry `at` of a list after inserting `new` at `pos`: unchanged before `pos`, `new` at
/// `pos`, and the entry below (`below`) after it.
#[inline(always)]
fn shifted(own: (f32, u32), below: (f32, u32), new: (f32, u32), at: u32, pos: u32) -> (f32, u32) {
    if at > pos {
        below
    } else if at == pos {
        new
    } else {
        own
    }
}

/// Entries of [`coarse`]'s per-warp lists in shared memory: `nprobe` per query and warp.
const WARP_LISTS: usize = QW * COARSE_WARPS * MAX_NPROBE;

/// Four floats, 16-byte aligned: one vector load.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Quad([f32; 4]);

/// Quad `k` of centroid `c` in the interleaved layout (`quads x nlist x 4`), by one vector
/// load when `ALIGNED`.
#[inline(always)]
fn load_quad<const ALIGNED: bool>(centroids: &[f32], nlist: usize, k: usize, c: usize) -> [f32; 4] {
    let at = (k * nlist + c) * 4;
    // SAFETY: the caller checked k < quads, c < nlist and centroids.len() >= quads * nlist *
    // 4, so at + 4 <= centroids.len(); when ALIGNED the slice is 16-byte aligned and at a
    // multiple of 4 floats.
    unsafe {
        if ALIGNED {
            centroids.as_ptr().add(at).cast::<Quad>().read().0
        } else {
            let p = centroids.as_ptr().add(at);
            [*p, *p.add(1), *p.add(2), *p.add(3)]
        }
    }
}

/// [`distances`]' arguments: the staged queries, the centroids in quads, their quads and
/// count, the centroid.
type DistanceArgs<'a> = (
    SharedArray<f32, { QW * MAX_DIM }>,
    &'a [f32],
    usize,
    usize,
    usize,
);

/// Centroid `c`'s squared distances to the block's first `Q` staged queries (zero where the
/// block has fewer), summed in dimension order (as the CPU reference does; the padding
/// dimensions, zero on both sides, add exact zeros). A tile's loads are issued before its
/// sums: with a lane per centroid there are few warps, and the step waits on memory once per
/// tile. `Q` is 1 for a block of one query, `QW` otherwise; `TILE` is the quads (4
/// dimensions each) a lane loads at once.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // counted loops keep `acc` and the tile in registers
fn distances<const Q: usize, const TILE: usize, const ALIGNED: bool>(
    (staged, centroids, quads, nlist, c): DistanceArgs,
) -> [f32; QW] {
    const { assert!((MAX_DIM / 4) % TILE == 0) };
    let mut acc = [0.0f32; QW];
    let mut k0 = 0;
    while k0 < quads {
        let mut tile = [[0.0f32; 4]; TILE];
        for u in 0..TILE {
            if k0 + u < quads {
                tile[u] = load_quad::<ALIGNED>(centroids, nlist, k0 + u, c);
            }
        }
        // Unconditional sums (predicates kept these loops rolled, and the tile in local
        // memory): past `quads` and past the block's queries both sides are zero.
        for u in 0..TILE {
            for e in 0..4 {
                let d = 4 * (k0 + u) + e;
                for j in 0..Q {
                    // SAFETY: j * MAX_DIM + d < QW * MAX_DIM: j < Q <= QW, and d < 4 * (k0 +
                    // TILE) <= MAX_DIM since k0 < quads <= MAX_DIM / 4 and TILE divides
                    // MAX_DIM / 4.
                    let t = unsafe { staged.get_unchecked(j * MAX_DIM + d) } - tile[u][e];
                    acc[j] += t * t;
                }
            }
        }
        k0 += TILE;
    }
    acc
}

/// [`distances`] for `queries` (1 or more) with the right specialisation. Unaligned
/// centroids (never from a device allocation) load a quad at a time, as scalars: their
/// tiles went to local memory.
#[inline(always)]
fn centroid_distances(
    staged: SharedArray<f32, { QW * MAX_DIM }>,
    centroids: &[f32],
    quads: usize,
    nlist: usize,
    c: usize,
    queries: usize,
) -> [f32; QW] {
    let aligned = centroids.as_ptr() as usize % core::mem::align_of::<Quad>() == 0;
    let args = (staged, centroids, quads, nlist, c);
    match (queries == 1, aligned) {
        (true, true) => distances::<1, 8, true>(args),
        (false, true) => distances::<QW, 4, true>(args),
        (true, false) => distances::<1, 1, false>(args),
        (false, false) => distances::<QW, 1, false>(args),
    }
}

/// Offers centroid `c`'s distances to the lists of the block's first `queries` queries.
/// Written out query by query: a loop over the lists stayed rolled (`offer` has a loop of
/// its own) and put them in local memory.
#[inline(always)]
fn offer_all(
    lists: &mut [WarpList; QW],
    nprobe: usize,
    queries: usize,
    offer: bool,
    acc: &[f32; QW],
    c: u32,
) {
    let [l0, l1, l2, l3] = lists;
    l0.offer(nprobe, offer, acc[0], c);
    if queries > 1 {
        l1.offer(nprobe, offer, acc[1], c);
    }
    if queries > 2 {
        l2.offer(nprobe, offer, acc[2], c);
    }
    if queries > 3 {
        l3.offer(nprobe, offer, acc[3], c);
    }
}

/// Each warp's best `nprobe` for each of the block's first `queries` queries into shared
/// memory at `(query * COARSE_WARPS + warp) * MAX_NPROBE`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // a counted loop keeps `lists` in registers
fn warp_lists_to_shared(
    lists: &[WarpList; QW],
    nprobe: usize,
    queries: usize,
    warp: usize,
    best_d: SharedArray<f32, WARP_LISTS>,
    best_i: SharedArray<u32, WARP_LISTS>,
) {
    let lane = lane_id() as usize;
    for j in 0..QW {
        let at = (j * COARSE_WARPS + warp) * MAX_NPROBE;
        let list = lists[j];
        if j < queries && lane < nprobe {
            best_d.set(at + lane, list.lo.0);
            best_i.set(at + lane, list.lo.1);
        }
        if j < queries && lane + 32 < nprobe {
            best_d.set(at + lane + 32, list.hi.0);
            best_i.set(at + lane + 32, list.hi.1);
        }
    }
}

/// `probes[q * nprobe + j]` = the `j`-th nearest centroid to query `q` (ties by index).
///
/// Launch blocks of [`COARSE_THREADS`](crate::COARSE_THREADS) threads, one block per
/// [`COARSE_QUERIES_PER_BLOCK`](crate::COARSE_QUERIES_PER_BLOCK) queries (the grid's `x`),
/// and `slices` blocks per block of queries (the grid's `y`, at most
/// [`MAX_COARSE_SLICES`](crate::MAX_COARSE_SLICES)): slice `s` holds the centroids `c` with
/// `c / COARSE_THREADS % slices == s`, so a few queries spread over `slices` times as many
/// SMs. The block's queries are staged in shared memory; its warps split the slice's
/// centroids, and each lane reads its centroid from `centroids_q` (the centroids in quads,
/// `dim.div_ceil(4) x nlist x 4`, zero past `dim`: see `interleave_quads` on the host) 4
/// dimensions at a time, so that 32 lanes load 512 consecutive bytes, computing its
/// centroid's distance to all of the block's queries from one load. Each warp keeps a
/// sorted `nprobe` nearest per query spread over its lanes' registers ([`WarpList`]), writes
/// it to shared memory, and one warp per query merges the warps' lists: into the probes with
/// one slice; with more, into `slices`' lists, and the last of a block of queries' slices to
/// finish merges those (`slices.done` counts them), so no second kernel is needed. Distances
/// are summed in dimension order, exactly as the CPU reference does. With one slice,
/// `slices`' views may be empty.
#[kernel]
pub fn coarse(
    queries: &[f32],
    centroids_q: &[f32],
    shape: CoarseShape,
    mut slices: CoarseSlices,
    probes: &mut [u32],
) {
    let (nslices, slice) = (grid_dim_y() as usize, block_idx_y() as usize);
    let dim = shape.dim as usize;
    let nlist = shape.nlist as usize;
    let nprobe = (shape.nprobe as usize).min(MAX_NPROBE).min(nlist);
    let nq = if dim == 0 { 0 } else { queries.len() / dim };
    let lane = lane_id() as usize;
    let warp = thread_idx_x() as usize / 32;
    let q0 = block_idx_x() as usize * QW;
    let staged = shared_array!(f32; QW * MAX_DIM);
    let best_d = shared_array!(f32; WARP_LISTS);
    let best_i = shared_array!(u32; WARP_LISTS);
    let last = shared_array!(u32; 1);
    let quads = dim.div_ceil(4);
    let usable = dim > 0 && dim <= MAX_DIM && nprobe > 0 && centroids_q.len() >= quads * nlist * 4;
    if usable {
        // The queries, zero past `dim` and past the last query (`distances` sums those).
        let mut f = thread_idx_x() as usize;
        while f < QW * MAX_DIM {
            let (j, d) = (f / MAX_DIM, f % MAX_DIM);
            let v = if q0 + j < nq && d < dim {
                queries[(q0 + j) * dim + d]
            } else {
                0.0
            };
            staged.set(j * MAX_DIM + d, v);
            f += block_dim_x() as usize;
        }
    }
    // Barriers every thread reaches (no early return before them).
    sync_threads();
    let active = usable && q0 < nq;
    // The block's queries that exist (uniform over the block).
    let queries = if active { (nq - q0).min(QW) } else { 0 };
    let mut lists = [WarpList::EMPTY; QW];
    if active {
        // Warp-uniform: every lane takes part in the lists' shuffles.
        let mut base = (slice * COARSE_WARPS + warp) * 32;
        while base < nlist {
            let c = base + lane;
            let acc = if c < nlist {
                centroid_distances(staged, centroids_q, quads, nlist, c, queries)
            } else {
                [f32::INFINITY; QW]
            };
            offer_all(&mut lists, nprobe, queries, c < nlist, &acc, c as u32);
            base += COARSE_WARPS * 32 * nslices;
        }
    }
    warp_lists_to_shared(&lists, nprobe, queries, warp, best_d, best_i);
    sync_threads();
    // Warp `j` merges query `j`'s per-warp lists: lane `w < COARSE_WARPS` walks warp `w`'s list.
    let j = warp;
    if active && j < QW && q0 + j < nq {
        let entry = |w: usize, r: usize| {
            let at = (j * COARSE_WARPS + w) * MAX_NPROBE + r;
            (best_d.get(at), best_i.get(at))
        };
        merge_sorted_lists(COARSE_WARPS, nprobe, entry, |r, d, i| {
            if lane != 0 {
                return;
            }
            if nslices == 1 {
                probes[(q0 + j) * nprobe + r] = i;
            } else {
                let at = ((q0 + j) * nslices + slice) * nprobe + r;
                slices.ids[at] = i;
                slices.dist[at] = d;
            }
        });
    }
    // `nslices` is uniform over the grid: every thread of the block reaches the barriers.
    if nslices > 1 && last_slice(&mut slices.done, nslices, last) && active && j < QW && q0 + j < nq
    {
        let q = q0 + j;
        let entry = |s: usize, r: usize| {
            let at = (q * nslices + s) * nprobe + r;
            (slices.dist[at], slices.ids[at])
        };
        merge_sorted_lists(nslices, nprobe, entry, |r, _, i| {
            if lane == 0 {
                probes[q * nprobe + r] = i;
            }
        });
    }
}

/// Whether this block is the last of its block of queries' `slices` to get here; its count
/// in `done` (indexed by the grid's `x`) is then reset to zero for the next launch. What
/// the other slices' blocks wrote before is visible to the last one after: each thread
/// fences its writes before the count, and the last block fences after reading it. Every
/// thread of the block must call it (it has barriers).
#[inline(always)]
fn last_slice(done: &mut [u32], slices: usize, last: SharedArray<u32, 1>) -> bool {
    fence_gpu();
    sync_threads();
    if thread_idx_x() == 0 {
        let slot = &mut done[block_idx_x() as usize];
        let is_last = atomic_add(slot, 1) as usize + 1 == slices;
        if is_last {
            *slot = 0;
        }
        last.set(0, is_last as u32);
    }
    sync_threads();
    let is_last = last.get(0) != 0;
    if is_last {
        fence_gpu();
    }
    is_last
}
