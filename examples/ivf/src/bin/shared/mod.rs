//! What the `ivf_bench` and `ivf_search` programs share (`#[path]`-included by both).

use lookahead_ivf::cpu;
use lookahead_ivf::data::Vectors;
use lookahead_ivf::gpu::SearchOutcome;

/// Recall@K (K = `ivf_kernels::K`) of the first `n` queries' neighbours in `out` against
/// brute force over `data`.
pub fn recall(data: &Vectors, queries: &Vectors, out: &SearchOutcome, n: usize) -> f64 {
    let k = ivf_kernels::K;
    let n = n.min(queries.len());
    let found: Vec<Vec<cpu::Hit>> = (0..n)
        .map(|q| {
            (0..k)
                .map(|j| (out.dist[q * k + j], out.ids[q * k + j]))
                .collect()
        })
        .collect();
    let exact: Vec<Vec<cpu::Hit>> = (0..n)
        .map(|q| cpu::brute_force(data, queries.row(q), k))
        .collect();
    cpu::recall(&found, &exact, k)
}
