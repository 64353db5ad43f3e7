//! The last step: each query's `K` nearest over its candidates.

use lookahead_device::prelude::*;

use crate::topk::{before, merge_sorted_lists, TopK};
use crate::{MergeShape, K, MERGE_RANKED, MERGE_SAMPLE, MERGE_THREADS, MERGE_WARPS};

/// Each query's `K` nearest over its candidate lists (`pair_cand_off[q * nprobe] ..
/// pair_cand_off[(q + 1) * nprobe]`, each of `K`).
///
/// Each candidate list must be sorted nearest first, as the scans write them.
///
/// With `shape.per_block == 0`, one warp per query (warp `q` of the grid). Otherwise one
/// block per query (block `q`, at most [`MERGE_WARPS`] warps) ranks the few candidates that
/// can be among the `K` nearest ([`merge_by_rank`]); when more than [`MERGE_RANKED`] can, its
/// warps split the candidates, each keeps its `K` best, and warp 0 merges their lists
/// through shared memory.
#[kernel(same_len(out_dist, out_ids), launch_bounds(threads = MERGE_THREADS))]
pub fn merge(
    cand_dist: &[f32],
    cand_ids: &[u32],
    pair_cand_off: &[u32],
    shape: MergeShape,
    out_dist: &mut [f32],
    out_ids: &mut [u32],
) {
    let lane = lane_id() as usize;
    let nprobe = shape.nprobe as usize;
    let per_block = shape.per_block != 0;
    let (q, part, parts) = if per_block {
        let warps = (block_dim_x() as usize / 32).clamp(1, MERGE_WARPS);
        (block_idx_x() as usize, thread_idx_x() as usize / 32, warps)
    } else {
        (global_index_x() / 32, 0, 1)
    };
    let best_d = shared_array!(f32; MERGE_WARPS * K);
    let best_i = shared_array!(u32; MERGE_WARPS * K);
    // Uniform over the warp, and over the block when `per_block`.
    let valid = q < out_dist.len() / K && (q + 1) * nprobe < pair_cand_off.len();
    let (lo, hi) = if valid {
        let lo = pair_cand_off[q * nprobe] as usize * K;
        let hi = pair_cand_off[(q + 1) * nprobe] as usize * K;
        (lo, hi.min(cand_dist.len()).min(cand_ids.len()).max(lo))
    } else {
        (0, 0)
    };
    if per_block && valid {
        let ranked = merge_by_rank(&cand_dist[lo..hi], &cand_ids[lo..hi], |j, d, id| {
            out_dist[q * K + j] = d;
            out_ids[q * K + j] = id;
        });
        if ranked {
            return; // uniform over the block
        }
    }
    if valid && part < parts {
        let mut top = TopK::new();
        let walk = (lo + part * 32 + lane, hi, 32 * parts);
        for_each_candidate(cand_dist, cand_ids, walk, |c| top.offer_valid(c));
        top.warp_merge(|j, d, id| {
            if lane == 0 {
                if per_block {
                    best_d.set(part * K + j, d);
                    best_i.set(part * K + j, id);
                } else {
                    out_dist[q * K + j] = d;
                    out_ids[q * K + j] = id;
                }
            }
        });
    }
    if per_block {
        // Every thread of the block reaches this barrier (`per_block` is a parameter).
        sync_threads();
        if valid && part == 0 {
            let entry = |w: usize, r: usize| (best_d.get(w * K + r), best_i.get(w * K + r));
            merge_sorted_lists(parts, entry, |j, d, id| {
                if lane == 0 {
                    out_dist[q * K + j] = d;
                    out_ids[q * K + j] = id;
                }
            });
        }
    }
}

/// A block's merge of one query's candidate lists (`dist`/`ids`, lists of `K`, each sorted
/// nearest first) by rank; `emit(j, dist, id)` is called once for each place `j < K`.
/// Returns false, having emitted nothing, when more than [`MERGE_RANKED`] candidates may be
/// among the `K` nearest. Every thread of the block must call it (it has barriers).
///
/// Any `K` candidates bound the query's `K`-th nearest by their farthest, so [`bound`]
/// takes the best of two such bounds; only candidates no farther are kept, in shared
/// memory (usually little more than `K` of a thousand or more), and each is written at its
/// rank among them: a load of each candidate and a few short counts between three barriers,
/// where merging the lists took `K` rounds of shuffles per warp and block one after another.
#[inline(always)]
fn merge_by_rank(dist: &[f32], ids: &[u32], mut emit: impl FnMut(usize, f32, u32)) -> bool {
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let kept = shared_array!(u32; 1);
    let kept_d = shared_array!(f32; MERGE_RANKED);
    let kept_i = shared_array!(u32; MERGE_RANKED);
    if tid == 0 {
        kept.set(0, 0);
    }
    let bound = bound(dist, ids);
    keep_within(dist, ids, bound, kept, kept_d, kept_i);
    sync_threads();
    let count = kept.get(0) as usize;
    if count > MERGE_RANKED {
        return false;
    }
    let mut s = tid;
    while s < count {
        let (d, id) = (kept_d.get(s), kept_i.get(s));
        let rank = rank_in(kept_d, kept_i, count, s, d, id);
        if rank < K {
            emit(rank, d, id);
        }
        s += threads;
    }
    if tid >= count && tid < K {
        emit(tid, f32::INFINITY, u32::MAX);
    }
    true
}

/// Entry `s` `(d, id)`'s rank among entries `0..n` of `(dist, ids)`: how many are before it,
/// equal entries (the same vector twice) in slot order.
#[inline(always)]
fn rank_in<const N: usize>(
    dist: SharedArray<f32, N>,
    ids: SharedArray<u32, N>,
    n: usize,
    s: usize,
    d: f32,
    id: u32,
) -> usize {
    let mut rank = 0;
    for j in 0..n {
        let (dj, ij) = (dist.get(j), ids.get(j));
        if before(dj, ij, d, id) || (dj == d && ij == id && j < s) {
            rank += 1;
        }
    }
    rank
}

/// A distance no nearer than the query's `K`-th nearest candidate, on every thread: the
/// smaller of the nearest last entry of a list (its list holds `K` candidates that near) and
/// the `K`-th smallest distance in a sample of [`MERGE_SAMPLE`] entries, the first few of
/// each list (exact when the `K` nearest are among them, as when they lie in different
/// lists). Every thread of the block must call it (it has barriers).
#[inline(always)]
fn bound(dist: &[f32], ids: &[u32]) -> f32 {
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let warps = threads.div_ceil(32).min(MERGE_WARPS);
    let per_warp = shared_array!(f32; 2 * MERGE_WARPS);
    let sample = shared_array!(f32; MERGE_SAMPLE);
    let n = dist.len().min(ids.len());
    let lists = n / K;
    let per_list = (MERGE_SAMPLE / lists.max(1)).clamp(1, K);
    let samples = (lists * per_list).min(MERGE_SAMPLE);
    let mut t = tid;
    while t < samples {
        let at = (t / per_list) * K + t % per_list;
        let d = dist[at];
        // Empty places and NaNs (never kept) count as infinitely far.
        let far = ids[at] == u32::MAX || d.is_nan();
        sample.set(t, if far { f32::INFINITY } else { d });
        t += threads;
    }
    let mut last = f32::INFINITY;
    let mut at = (tid + 1) * K;
    while at <= n {
        let d = dist[at - 1];
        if d < last {
            last = d;
        }
        at += threads * K;
    }
    sync_threads();
    // The `K`-th smallest sample is the largest with fewer than `K` samples below it
    // (infinite while fewer than `K` are finite).
    let mut kth = 0.0f32;
    let mut t = tid;
    while t < samples {
        let d = sample.get(t);
        let mut below = 0u32;
        for j in 0..samples {
            below += (sample.get(j) < d) as u32;
        }
        if below < K as u32 && d > kth {
            kth = d;
        }
        t += threads;
    }
    let mut step = 16;
    while step > 0 {
        let (k, l) = (
            warp::shfl_xor_f32(kth, step),
            warp::shfl_xor_f32(last, step),
        );
        kth = if k > kth { k } else { kth };
        last = if l < last { l } else { last };
        step /= 2;
    }
    if lane_id() == 0 && tid / 32 < MERGE_WARPS {
        per_warp.set(2 * (tid / 32), kth);
        per_warp.set(2 * (tid / 32) + 1, last);
    }
    sync_threads();
    for w in 0..warps {
        let (k, l) = (per_warp.get(2 * w), per_warp.get(2 * w + 1));
        kth = if k > kth { k } else { kth };
        last = if l < last { l } else { last };
    }
    if samples >= K && kth < last {
        kth
    } else {
        last
    }
}

/// Appends the candidates no farther than `bound` (empty places left out) to `kept_d` /
/// `kept_i`, counting all of them in `kept[0]`, stored or not.
#[inline(always)]
fn keep_within(
    dist: &[f32],
    ids: &[u32],
    bound: f32,
    kept: SharedArray<u32, 1>,
    kept_d: SharedArray<f32, MERGE_RANKED>,
    kept_i: SharedArray<u32, MERGE_RANKED>,
) {
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let n = dist.len().min(ids.len());
    let keep = |(d, id): (f32, u32)| {
        if id != u32::MAX && d <= bound {
            let slot = kept.atomic_add(0, 1) as usize;
            if slot < MERGE_RANKED {
                kept_d.set(slot, d);
                kept_i.set(slot, id);
            }
        }
    };
    for_each_candidate(dist, ids, (tid, n, threads), keep);
}

/// Calls `each` with the candidates `(dist[c], ids[c])` for `c = first, first + stride, ...`
/// below `end` (`walk = (first, end, stride)`), four at a time: the four loads are issued
/// before any is used, named one by one so they stay in registers. A merge block has few
/// warps, so each round trip to memory is paid in full (one load, then the other, per
/// candidate took most of a 1-query merge). Places past `end` in the last round come as
/// empty places, `(f32::INFINITY, u32::MAX)`.
#[inline(always)]
fn for_each_candidate(
    dist: &[f32],
    ids: &[u32],
    (first, end, stride): (usize, usize, usize),
    mut each: impl FnMut((f32, u32)),
) {
    let load = |at: usize| {
        if at < end {
            (dist[at], ids[at])
        } else {
            (f32::INFINITY, u32::MAX)
        }
    };
    let mut c = first;
    while c < end {
        let got = [
            load(c),
            load(c + stride),
            load(c + 2 * stride),
            load(c + 3 * stride),
        ];
        each(got[0]);
        each(got[1]);
        each(got[2]);
        each(got[3]);
        c += 4 * stride;
    }
}
