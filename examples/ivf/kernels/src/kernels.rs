//! The IVF kernels.

use lookahead_device::kernel;
use lookahead_device::prelude::*;
use lookahead_device::requests::{Readiness, RequestQueue};

use crate::{K, MAX_DIM, MAX_NPROBE, SCAN_WARPS, TILE_FLOATS};

/// Squared L2 distance of two `dim`-float rows.
#[inline(always)]
fn l2(a: &[f32], b: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for d in 0..a.len() {
        let t = a[d] - b[d];
        s += t * t;
    }
    s
}

/// Inserts `(dist, id)` into the sorted top list `(ds, is)` of `n` entries (ties by id).
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

/// `probes[q * nprobe + j]` = the `j`-th nearest centroid to query `q`. One warp per query
/// (launch 32 threads per query): lanes split the centroids, each keeps its own sorted
/// `nprobe` nearest, and the warp merges them by shuffles, nearest first (ties by index).
#[kernel]
pub fn coarse(queries: &[f32], centroids: &[f32], dim: u32, nprobe: u32, probes: &mut [u32]) {
    let dim = dim as usize;
    let nprobe = (nprobe as usize).min(MAX_NPROBE);
    let q = global_index_x() / 32;
    let lane = lane_id();
    if dim == 0 || nprobe == 0 || q >= queries.len() / dim {
        return; // warp-uniform: all 32 lanes of a warp share `q`
    }
    let mut ds = [f32::INFINITY; MAX_NPROBE];
    let mut is = [u32::MAX; MAX_NPROBE];
    let v = &queries[q * dim..(q + 1) * dim];
    let mut c = lane as usize;
    while c < centroids.len() / dim {
        let d = l2(v, &centroids[c * dim..(c + 1) * dim]);
        if d < ds[nprobe - 1] || (d == ds[nprobe - 1] && (c as u32) < is[nprobe - 1]) {
            insert(&mut ds, &mut is, nprobe, d, c as u32);
        }
        c += 32;
    }
    let mut head = 0usize;
    for j in 0..nprobe {
        let (mut bd, mut bi) = if head < nprobe {
            (ds[head], is[head])
        } else {
            (f32::INFINITY, u32::MAX)
        };
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
        // Centroid indices are distinct, so exactly one lane holds the winner.
        if head < nprobe && is[head] == bi {
            head += 1;
        }
        if lane == 0 {
            probes[q * nprobe + j] = bi;
        }
    }
}

/// For each (query, probe) pair `p`: `pairs[list * max_per_list + slot] = p`, with `slot`
/// counted in `counts[list]`.
#[kernel]
pub fn plan(probes: &[u32], max_per_list: u32, counts: &mut [u32], pairs: &mut [u32]) {
    let p = global_index_x();
    if p < probes.len() {
        let l = probes[p] as usize;
        let slot = atomic_add(&mut counts[l], 1u32);
        if slot < max_per_list {
            pairs[l * max_per_list as usize + slot as usize] = p as u32;
        }
    }
}

/// `probed[0..m[0]]` = the lists with a nonzero count, in list order (one thread: a few
/// thousand lists take microseconds).
#[kernel]
pub fn compact(counts: &[u32], probed: &mut [u32], m: &mut [u32]) {
    if global_index_x() == 0 {
        let mut k = 0;
        for l in 0..counts.len() {
            if counts[l] > 0 {
                probed[k] = l as u32;
                k += 1;
            }
        }
        m[0] = k as u32;
    }
}

/// Scans the probed lists. Block `b` takes probed lists `b, b + grid, ...`; for each, thread 0
/// asks `queue` for the list `ahead + 1` steps further on and waits until its own list is
/// resident (or goes ahead on the fault path), recording how in `readiness[i]` (1 arrived,
/// 2 went ahead, 3 timed out). Then the block reads the list once per group of
/// `SCAN_WARPS` queries through a padded shared-memory tile: warp `w` takes the group's
/// `w`-th query, its lanes split the tile's vectors, and each lane keeps a top `K` that the
/// warp merges by shuffles at the end. Results go to `out_*[pair * K ..]`.
#[kernel(same_len(out_dist, out_ids))]
#[allow(clippy::too_many_arguments)]
pub fn scan(
    lists: ManagedSlice<f32>,
    offsets: &[u64],
    ids: &[u32],
    queries: &[f32],
    probed: &[u32],
    m: &[u32],
    counts: &[u32],
    pairs: &[u32],
    dim: u32,
    nprobe: u32,
    max_per_list: u32,
    ahead: u32,
    hints: u32,
    queue: RequestQueue,
    readiness: &mut [u32],
    out_dist: &mut [f32],
    out_ids: &mut [u32],
) {
    let dim = dim as usize;
    let stride = dim + 1; // padded rows: lanes reading different rows hit different banks
    let m = m[0] as usize;
    let blocks = grid_dim_x() as usize;
    let tid = thread_idx_x() as usize;
    let threads = block_dim_x() as usize;
    let warp = tid / 32;
    let lane = (tid % 32) as u32;
    let tile = shared_array!(f32; TILE_FLOATS);
    let qs = shared_array!(f32; SCAN_WARPS * MAX_DIM);
    let rows_per_tile = TILE_FLOATS / stride.max(1);
    let list_range = |i: usize| {
        let l = probed[i] as usize;
        (offsets[l] as usize, offsets[l + 1] as usize) // in vectors
    };
    let request = |i: usize| {
        if i < m {
            let (a, b) = list_range(i);
            if b > a {
                queue.request(
                    i as u32,
                    lists.as_ptr().wrapping_add(a * dim),
                    (b - a) * dim * 4,
                );
            }
        }
    };

    let mut i = block_idx_x() as usize;
    if tid == 0 {
        // The lists this block scans first: ask for all of them before waiting on any.
        for s in 0..=ahead as usize {
            request(i + s * blocks);
        }
    }
    while i < m {
        if tid == 0 {
            request(i + (ahead as usize + 1) * blocks);
            readiness[i] = match queue.wait_ready(i as u32) {
                Readiness::Arrived => 1,
                Readiness::GoAhead => 2,
                Readiness::TimedOut => 3,
            };
        }
        if hints == crate::HINT_L2 && i + blocks < m {
            // The in-kernel hint: one prefetch per 128-byte line of the next list.
            let (a, b) = list_range(i + blocks);
            let mut f = a * dim + tid * 32;
            while f < b * dim {
                prefetch::prefetch_l2(lists.as_ptr().wrapping_add(f));
                f += threads * 32;
            }
        }
        sync_threads();

        let l = probed[i] as usize;
        let (a, b) = list_range(i);
        let nq = (counts[l] as usize).min(max_per_list as usize);
        let mut group = 0;
        while group < nq {
            // Warp `warp` takes query `group + warp` of this list (warp-uniform).
            let mine = group + warp;
            let pair = if mine < nq {
                pairs[l * max_per_list as usize + mine] as usize
            } else {
                usize::MAX
            };
            if pair != usize::MAX {
                let q = pair / (nprobe as usize).max(1);
                let mut d = lane as usize;
                while d < dim {
                    qs.set(warp * MAX_DIM + d, queries[q * dim + d]);
                    d += 32;
                }
            }
            let mut ds = [f32::INFINITY; K];
            let mut is = [u32::MAX; K];
            let mut start = a;
            while start < b {
                let rows = core::cmp::min(rows_per_tile, b - start);
                // Cooperative, coalesced copy of `rows` vectors into the padded tile.
                // 32-bit index arithmetic: 64-bit division is emulated and slow on the GPU.
                let (rows32, dim32) = (rows as u32, dim as u32);
                let mut f = tid as u32;
                while f < rows32 * dim32 {
                    let (r, c) = (f / dim32, f % dim32);
                    tile.set(
                        (r * (dim32 + 1) + c) as usize,
                        lists[start * dim + f as usize],
                    );
                    f += threads as u32;
                }
                sync_threads();
                if pair != usize::MAX {
                    let mut r = lane as usize;
                    while r < rows {
                        let mut acc = [0.0f32; 4];
                        let mut d = 0;
                        while d + 4 <= dim {
                            for u in 0..4 {
                                // SAFETY: d + u < dim <= MAX_DIM and r < rows_per_tile, so
                                // both indices are inside their arrays.
                                let t = unsafe {
                                    qs.get_unchecked(warp * MAX_DIM + d + u)
                                        - tile.get_unchecked(r * stride + d + u)
                                };
                                acc[u] += t * t;
                            }
                            d += 4;
                        }
                        while d < dim {
                            let t = qs.get(warp * MAX_DIM + d) - tile.get(r * stride + d);
                            acc[0] += t * t;
                            d += 1;
                        }
                        let dist = (acc[0] + acc[1]) + (acc[2] + acc[3]);
                        if dist < ds[K - 1] || (dist == ds[K - 1] && ids[start + r] < is[K - 1]) {
                            insert(&mut ds, &mut is, K, dist, ids[start + r]);
                        }
                        r += 32;
                    }
                }
                sync_threads();
                start += rows;
            }
            if pair != usize::MAX {
                // Merge the 32 lanes' sorted lists: K rounds of a warp-wide minimum.
                let mut head = 0usize;
                for j in 0..K {
                    let (mut bd, mut bi) = if head < K {
                        (ds[head], is[head])
                    } else {
                        (f32::INFINITY, u32::MAX)
                    };
                    let mut bl = lane;
                    let mut step = 16;
                    while step > 0 {
                        let od = warp::shfl_xor_f32(bd, step);
                        let oi = warp::shfl_xor_u32(bi, step);
                        let ol = warp::shfl_xor_u32(bl, step);
                        if od < bd || (od == bd && (oi < bi || (oi == bi && ol < bl))) {
                            bd = od;
                            bi = oi;
                            bl = ol;
                        }
                        step /= 2;
                    }
                    if bl == lane {
                        head += 1;
                    }
                    if lane == 0 {
                        out_dist[pair * K + j] = bd;
                        out_ids[pair * K + j] = bi;
                    }
                }
            }
            group += SCAN_WARPS;
        }
        i += blocks;
    }
}

/// Each query's top `K` over its `nprobe` probes' candidates, one thread per query.
#[kernel(same_len(out_dist, out_ids))]
pub fn merge(
    cand_dist: &[f32],
    cand_ids: &[u32],
    nprobe: u32,
    out_dist: &mut [f32],
    out_ids: &mut [u32],
) {
    let q = global_index_x();
    if q >= out_dist.len() / K {
        return;
    }
    let mut ds = [f32::INFINITY; K];
    let mut is = [u32::MAX; K];
    let per_query = nprobe as usize * K;
    for c in q * per_query..(q + 1) * per_query {
        if cand_ids[c] != u32::MAX {
            insert(&mut ds, &mut is, K, cand_dist[c], cand_ids[c]);
        }
    }
    for j in 0..K {
        out_dist[q * K + j] = ds[j];
        out_ids[q * K + j] = is[j];
    }
}
