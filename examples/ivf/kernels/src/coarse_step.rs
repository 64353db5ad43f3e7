//! The coarse step: each query's `nprobe` nearest centroids.

use lookahead_device::prelude::*;

use crate::quad;
use crate::topk::{before, warp_sort};
use crate::{
    CoarseShape, COARSE_QUERIES_PER_BLOCK as QW, COARSE_THREADS, COARSE_WARPS, MAX_DIM, MAX_NPROBE,
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

/// The smallest `(distance, index)` pair over the warp's lanes (ties by index), on every lane.
#[inline(always)]
fn warp_min((mut bd, mut bi): (f32, u32)) -> (f32, u32) {
    let mut step = 16;
    while step > 0 {
        let od = warp::shfl_xor_f32(bd, step);
        let oi = warp::shfl_xor_u32(bi, step);
        if before(od, oi, bd, bi) {
            bd = od;
            bi = oi;
        }
        step /= 2;
    }
    (bd, bi)
}

/// Entries of [`coarse`]'s per-warp lists in shared memory: `nprobe` per query and warp.
const WARP_LISTS: usize = QW * COARSE_WARPS * MAX_NPROBE;

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
            quad::load(centroids, at)
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
    let aligned = quad::aligned(centroids);
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

/// Each query's nearest centroids, slice by slice:
/// `out[(q * slices + s) * nprobe + j]` is the `j`-th nearest to query `q` (ties by index)
/// of slice `s`'s centroids.
///
/// - The grid's `y` dimension is `slices`; slice `s` holds the centroids `c` with
///   `c / COARSE_THREADS % slices == s`.
/// - With one slice, `out` is the probes (`out[q * nprobe + j]`); with more,
///   [`coarse_merge`] merges the slices' lists.
/// - When `out_dist` is as long as `out`, it gets each listed centroid's distance (what
///   [`coarse_merge`] merges by).
/// - Launch blocks of [`COARSE_THREADS`](crate::COARSE_THREADS) threads, one block per
///   `shape.per_block` queries (at most
///   [`COARSE_QUERIES_PER_BLOCK`](crate::COARSE_QUERIES_PER_BLOCK); 0 means that many), as
///   [`coarse_grid`](crate::coarse_grid) does.
///
/// How: the block's queries are staged in shared memory, and its warps split the
/// centroids. Each lane reads its centroid from `centroids_q` (the centroids in quads,
/// `dim.div_ceil(4) x nlist x 4`, zero past `dim`: see `interleave_quads` on the host) 4
/// dimensions at a time, and computes its distance to all of the block's queries from that
/// one load. Each warp keeps a sorted `nprobe` nearest per query spread over its lanes'
/// registers ([`WarpList`]) and writes it to shared memory; one warp per query merges the
/// warps' lists. Distances are summed in dimension order, exactly as the CPU reference does.
///
/// Why: the quads make 32 lanes load 512 consecutive bytes, and a block of several queries
/// reads each centroid once for all of them. Slices spread a few queries over `slices`
/// times as many SMs. Two blocks per SM (128 registers, no spills): left to itself the
/// compiler took 136 and fit one, and large batches' searches were 5-7% slower (H100).
#[kernel(launch_bounds(threads = COARSE_THREADS, blocks_per_sm = 2))]
pub fn coarse(
    queries: &[f32],
    centroids_q: &[f32],
    shape: CoarseShape,
    out: &mut [u32],
    out_dist: &mut [f32],
) {
    let (slices, slice) = (grid_dim_y() as usize, block_idx_y() as usize);
    let dim = shape.dim as usize;
    let nlist = shape.nlist as usize;
    let nprobe = (shape.nprobe as usize).min(MAX_NPROBE).min(nlist);
    let with_dist = out_dist.len() >= out.len();
    let nq = if dim == 0 { 0 } else { queries.len() / dim };
    let lane = lane_id() as usize;
    let warp = thread_idx_x() as usize / 32;
    let per_block = match shape.per_block as usize {
        0 => QW,
        n => n.min(QW),
    };
    let q0 = block_idx_x() as usize * per_block;
    let staged = shared_array!(f32; QW * MAX_DIM);
    let best_d = shared_array!(f32; WARP_LISTS);
    let best_i = shared_array!(u32; WARP_LISTS);
    let quads = dim.div_ceil(4);
    let usable = dim > 0 && dim <= MAX_DIM && nprobe > 0 && centroids_q.len() >= quads * nlist * 4;
    let active = usable && q0 < nq;
    // The block's queries (uniform over the block).
    let block_queries = if active { (nq - q0).min(per_block) } else { 0 };
    if usable {
        // The queries, zero past `dim` and past the block's last query (`distances` sums
        // those).
        let mut f = thread_idx_x() as usize;
        while f < QW * MAX_DIM {
            let (j, d) = (f / MAX_DIM, f % MAX_DIM);
            let v = if j < block_queries && d < dim {
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
    let mut lists = [WarpList::EMPTY; QW];
    if active {
        // Warp-uniform: every lane takes part in the lists' shuffles.
        let mut base = (slice * COARSE_WARPS + warp) * 32;
        while base < nlist {
            let c = base + lane;
            let acc = if c < nlist {
                centroid_distances(staged, centroids_q, quads, nlist, c, block_queries)
            } else {
                [f32::INFINITY; QW]
            };
            offer_all(&mut lists, nprobe, block_queries, c < nlist, &acc, c as u32);
            base += COARSE_WARPS * 32 * slices;
        }
    }
    warp_lists_to_shared(&lists, nprobe, block_queries, warp, best_d, best_i);
    sync_threads();
    // Warp `j` merges query `j`'s per-warp lists: lane `w < COARSE_WARPS` walks warp `w`'s list.
    if warp < block_queries {
        let j = warp;
        let list = |w: usize, r: usize| (j * COARSE_WARPS + w) * MAX_NPROBE + r;
        let mut head = 0usize;
        for r in 0..nprobe {
            let (bd, bi) = warp_min(if lane < COARSE_WARPS && head < nprobe {
                (best_d.get(list(lane, head)), best_i.get(list(lane, head)))
            } else {
                (f32::INFINITY, u32::MAX)
            });
            if lane < COARSE_WARPS && head < nprobe && best_i.get(list(lane, head)) == bi {
                head += 1;
            }
            if lane == 0 {
                let at = ((q0 + j) * slices + slice) * nprobe + r;
                out[at] = bi;
                if with_dist {
                    out_dist[at] = bd;
                }
            }
        }
    }
}

/// `probes[q * nprobe + j]` = the `j`-th nearest centroid to query `q` (ties by index), from
/// the sorted per-slice lists and distances [`coarse`] wrote (`slices` lists of `nprobe` per
/// query, `slices = partial.len() / probes.len()`, at most 32): a warp per query, lane `s`
/// walking slice `s`'s list, as a block merges its warps' lists in [`coarse`].
///
/// Launch blocks of [`COARSE_THREADS`](crate::COARSE_THREADS) threads, a warp per query.
#[kernel]
pub fn coarse_merge(partial_dist: &[f32], partial: &[u32], nprobe: u32, probes: &mut [u32]) {
    let nprobe = (nprobe as usize).min(MAX_NPROBE);
    let nq = if nprobe == 0 {
        0
    } else {
        probes.len() / nprobe
    };
    let q = global_index_x() / 32;
    let lane = lane_id() as usize;
    if q >= nq || partial_dist.len() < partial.len() {
        return; // warp-uniform
    }
    let slices = (partial.len() / (nq * nprobe)).min(32);
    let list = |s: usize, r: usize| (q * slices + s) * nprobe + r;
    let mut head = 0usize;
    for r in 0..nprobe {
        let (_, bi) = warp_min(if lane < slices && head < nprobe {
            (partial_dist[list(lane, head)], partial[list(lane, head)])
        } else {
            (f32::INFINITY, u32::MAX)
        });
        // Slices hold distinct centroids, so at most one lane holds the winner.
        if lane < slices && head < nprobe && partial[list(lane, head)] == bi {
            head += 1;
        }
        if lane == 0 {
            probes[q * nprobe + r] = bi;
        }
    }
}
