//! The coarse step: each query's `nprobe` nearest centroids.

use lookahead_device::prelude::*;

use crate::{CoarseShape, COARSE_QUERIES_PER_BLOCK as QW, COARSE_WARPS, MAX_DIM, MAX_NPROBE};

/// Inserts `(dist, id)` into the sorted list `(ds, is)` of `n` entries (ties by id).
#[inline(always)]
fn insert(ds: &mut [f32], is: &mut [u32], n: usize, dist: f32, id: u32) {
    let last = n - 1;
    if dist > ds[last] || (dist == ds[last] && id >= is[last]) {
        return;
    }
    let mut j = last;
    while j > 0 && (ds[j - 1] > dist || (ds[j - 1] == dist && is[j - 1] > id)) {
        ds[j] = ds[j - 1];
        is[j] = is[j - 1];
        j -= 1;
    }
    ds[j] = dist;
    is[j] = id;
}

/// The smallest `(distance, index)` pair over the warp's lanes (ties by index), on every lane.
#[inline(always)]
fn warp_min((mut bd, mut bi): (f32, u32)) -> (f32, u32) {
    let mut step = 16;
    while step > 0 {
        let od = warp::shfl_xor_f32(bd, step);
        let oi = warp::shfl_xor_u32(bi, step);
        if od < bd || (od == bd && oi < bi) {
            bd = od;
            bi = oi;
        }
        step /= 2;
    }
    (bd, bi)
}

/// Entries of [`coarse`]'s per-warp lists in shared memory: `nprobe` per query and warp.
const WARP_LISTS: usize = QW * COARSE_WARPS * MAX_NPROBE;

/// Each warp's best `nprobe` per query (its lanes' sorted lists `ds`/`is` merged by
/// shuffles) into shared memory at `(query * COARSE_WARPS + warp) * MAX_NPROBE`.
#[inline(always)]
fn warp_lists_to_shared(
    ds: &[[f32; MAX_NPROBE]; QW],
    is: &[[u32; MAX_NPROBE]; QW],
    nprobe: usize,
    warp: usize,
    best_d: SharedArray<f32, WARP_LISTS>,
    best_i: SharedArray<u32, WARP_LISTS>,
) {
    let lane = lane_id();
    for j in 0..QW {
        let mut head = 0usize;
        for r in 0..nprobe {
            let (bd, bi) = warp_min(if head < nprobe {
                (ds[j][head], is[j][head])
            } else {
                (f32::INFINITY, u32::MAX)
            });
            // Centroid indices are distinct, so at most one lane holds the winner.
            if head < nprobe && is[j][head] == bi {
                head += 1;
            }
            if lane == 0 {
                best_d.set((j * COARSE_WARPS + warp) * MAX_NPROBE + r, bd);
                best_i.set((j * COARSE_WARPS + warp) * MAX_NPROBE + r, bi);
            }
        }
    }
}

/// `out[(q * slices + s) * nprobe + j]` = the `j`-th nearest to query `q` (ties by index) of
/// slice `s`'s centroids, where the grid's `y` dimension is `slices` and slice `s` holds the
/// centroids `c` with `c / COARSE_THREADS % slices == s`. With one slice, `out` is the
/// probes (`out[q * nprobe + j]`); with more, [`coarse_merge`] merges the slices' lists, so a
/// few queries spread over `slices` times as many SMs. When `out_dist` is as long as `out`,
/// it gets each listed centroid's distance (what [`coarse_merge`] merges by).
///
/// Launch blocks of [`COARSE_THREADS`](crate::COARSE_THREADS) threads, one block per
/// [`COARSE_QUERIES_PER_BLOCK`](crate::COARSE_QUERIES_PER_BLOCK) queries. The block's queries
/// are staged in shared memory; its warps split the centroids, and each lane reads
/// `centroids_t` (the centroids transposed, `dim x nlist`) so that 32 lanes load 32
/// consecutive floats, computing its centroid's distance to all of the block's queries from
/// one load. Each lane keeps a sorted `nprobe` nearest per query; each warp merges its lanes'
/// by shuffles into shared memory, and one warp per query merges the warps'. Distances are
/// summed in dimension order, exactly as the CPU reference does.
#[kernel]
pub fn coarse(
    queries: &[f32],
    centroids_t: &[f32],
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
    let q0 = block_idx_x() as usize * QW;
    let staged = shared_array!(f32; QW * MAX_DIM);
    let best_d = shared_array!(f32; WARP_LISTS);
    let best_i = shared_array!(u32; WARP_LISTS);
    let usable = dim > 0 && dim <= MAX_DIM && nprobe > 0 && centroids_t.len() >= dim * nlist;
    if usable {
        let mut f = thread_idx_x() as usize;
        while f < QW * dim {
            let (j, d) = (f / dim, f % dim);
            let v = if q0 + j < nq {
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
    let mut ds = [[f32::INFINITY; MAX_NPROBE]; QW];
    let mut is = [[u32::MAX; MAX_NPROBE]; QW];
    if active {
        let mut c = (slice * COARSE_WARPS + warp) * 32 + lane;
        while c < nlist {
            let mut acc = [0.0f32; QW];
            for d in 0..dim {
                // SAFETY: d < dim and c < nlist, and centroids_t holds dim * nlist floats
                // (checked in `usable`).
                let cv = unsafe { *centroids_t.get_unchecked(d * nlist + c) };
                for j in 0..QW {
                    // SAFETY: j * MAX_DIM + d < QW * MAX_DIM.
                    let t = unsafe { staged.get_unchecked(j * MAX_DIM + d) } - cv;
                    acc[j] += t * t;
                }
            }
            for j in 0..QW {
                let (dj, ij) = (&mut ds[j], &mut is[j]);
                if acc[j] < dj[nprobe - 1]
                    || (acc[j] == dj[nprobe - 1] && (c as u32) < ij[nprobe - 1])
                {
                    insert(dj, ij, nprobe, acc[j], c as u32);
                }
            }
            c += COARSE_WARPS * 32 * slices;
        }
    }
    warp_lists_to_shared(&ds, &is, nprobe, warp, best_d, best_i);
    sync_threads();
    // Warp `j` merges query `j`'s per-warp lists: lane `w < COARSE_WARPS` walks warp `w`'s list.
    if active && warp < QW && q0 + warp < nq {
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
