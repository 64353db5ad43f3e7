//! The last step: each query's `K` nearest over its candidates.

use lookahead_device::prelude::*;

use crate::topk::TopK;
use crate::K;

/// Each query's `K` nearest over its candidate lists (`pair_cand_off[q * nprobe] ..
/// pair_cand_off[(q + 1) * nprobe]`, each of `K`), one warp per query.
#[kernel(same_len(out_dist, out_ids))]
pub fn merge(
    cand_dist: &[f32],
    cand_ids: &[u32],
    pair_cand_off: &[u32],
    nprobe: u32,
    out_dist: &mut [f32],
    out_ids: &mut [u32],
) {
    let q = global_index_x() / 32;
    let lane = lane_id() as usize;
    let nprobe = nprobe as usize;
    if q >= out_dist.len() / K || (q + 1) * nprobe >= pair_cand_off.len() {
        return; // warp-uniform
    }
    let lo = pair_cand_off[q * nprobe] as usize * K;
    let hi = pair_cand_off[(q + 1) * nprobe] as usize * K;
    let mut top = TopK::new();
    let mut c = lo + lane;
    while c < hi {
        if cand_ids[c] != u32::MAX {
            top.offer(cand_dist[c], cand_ids[c]);
        }
        c += 32;
    }
    top.warp_merge(|j, d, id| {
        if lane == 0 {
            out_dist[q * K + j] = d;
            out_ids[q * K + j] = id;
        }
    });
}
