//! The last step: each query's `K` nearest over its candidates.

use lookahead_device::prelude::*;

use crate::topk::{merge_sorted_lists, TopK};
use crate::{MergeShape, K, MERGE_WARPS};

/// Each query's `K` nearest over its candidate lists (`pair_cand_off[q * nprobe] ..
/// pair_cand_off[(q + 1) * nprobe]`, each of `K`).
///
/// With `shape.per_block == 0`, one warp per query (warp `q` of the grid). Otherwise one
/// block per query (block `q`, at most [`MERGE_WARPS`] warps): its warps split the
/// candidates, each keeps its `K` best, and warp 0 merges their lists through shared
/// memory, so a few queries with many candidates use many warps each.
#[kernel(same_len(out_dist, out_ids))]
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
    if valid && part < parts {
        let lo = pair_cand_off[q * nprobe] as usize * K;
        let hi = pair_cand_off[(q + 1) * nprobe] as usize * K;
        let mut top = TopK::new();
        let stride = 32 * parts;
        let load = |at: usize| {
            if at < hi {
                (cand_dist[at], cand_ids[at])
            } else {
                (f32::INFINITY, u32::MAX)
            }
        };
        let mut c = lo + part * 32 + lane;
        // Four candidates' loads at once, named one by one so they stay in registers: the
        // block has few warps, so each round trip to memory is paid in full (one load, then
        // the other, per candidate took most of a 1-query merge).
        while c < hi {
            let got = [
                load(c),
                load(c + stride),
                load(c + 2 * stride),
                load(c + 3 * stride),
            ];
            top.offer_valid(got[0]);
            top.offer_valid(got[1]);
            top.offer_valid(got[2]);
            top.offer_valid(got[3]);
            c += 4 * stride;
        }
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
