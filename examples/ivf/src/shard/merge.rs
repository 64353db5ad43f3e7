//! The global top-k from each rank's: every rank finds its `K` nearest per query over its own
//! lists (sorted nearest first, ties by id, empty places `(inf, u32::MAX)`), the ranks' lists
//! are gathered rank by rank (`[rank][query][K]`, what an all-gather leaves), and each
//! query's `K` nearest over them is its `K` nearest over the whole index: a vector is in one
//! rank's lists only, and each rank kept every candidate that can be among the `K` best.
//!
//! The merge runs on the host: the batch's answer is wanted there, and merging `ranks` sorted
//! lists of `K` per query is a few hundred comparisons a query (microseconds a batch), less
//! than one more kernel launch and the copy back it would still need.

use ivf_kernels::K;

/// Each query's `K` nearest over the gathered lists: `dist`/`ids` hold `ranks * queries * K`
/// entries, rank by rank. Returns `queries * K` distances and ids, nearest first, ties by
/// id (the order the kernels keep).
pub fn merge_gathered(
    dist: &[f32],
    ids: &[u32],
    ranks: usize,
    queries: usize,
) -> (Vec<f32>, Vec<u32>) {
    let mut out_d = vec![f32::INFINITY; queries * K];
    let mut out_i = vec![u32::MAX; queries * K];
    let per_rank = queries * K;
    let mut heads = vec![0usize; ranks];
    for q in 0..queries {
        heads.fill(0);
        for j in 0..K {
            // The nearest head among the ranks' lists for this query.
            let mut best: Option<(usize, f32, u32)> = None;
            for (r, &h) in heads.iter().enumerate() {
                if h == K {
                    continue;
                }
                let at = r * per_rank + q * K + h;
                let (d, id) = (dist[at], ids[at]);
                if best.is_none_or(|(_, bd, bi)| before(d, id, bd, bi)) {
                    best = Some((r, d, id));
                }
            }
            let Some((r, d, id)) = best else { break };
            heads[r] += 1;
            out_d[q * K + j] = d;
            out_i[q * K + j] = id;
        }
    }
    (out_d, out_i)
}

/// Whether `(d, id)` comes before `(bd, bi)`: nearer, or as near with a smaller id (an empty
/// place, `u32::MAX`, after every vector as near).
fn before(d: f32, id: u32, bd: f32, bi: u32) -> bool {
    d < bd || (d == bd && id < bi)
}

/// Bytes one rank contributes to a batch's merge: `K` distances and `K` ids a query.
pub fn bytes_per_rank(queries: usize) -> usize {
    queries * K * (std::mem::size_of::<f32>() + std::mem::size_of::<u32>())
}
