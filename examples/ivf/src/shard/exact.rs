//! Exact nearest neighbours of a few queries over an index too big for
//! [`crate::cpu::brute_force`]'s one pass per query: every core takes a run of vectors and
//! compares each vector with all the queries while it is in cache, so the data is read once
//! for all of them.

use rayon::prelude::*;

use crate::cpu::{top_k, Hit};
use crate::data::Vectors;

/// Rows each task compares with every query.
const ROWS_PER_TASK: usize = 8192;

/// Squared L2 distance in eight partial sums (which the compiler keeps in vector registers).
#[inline]
fn l2_lanes(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            let d = x[i] - y[i];
            acc[i] += d * d;
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += (x - y) * (x - y);
    }
    s
}

/// Keeps the `k` best of a sorted `best` with `hit` offered.
fn offer(best: &mut Vec<Hit>, hit: Hit, k: usize) {
    let before = |h: &Hit| h.0 < hit.0 || (h.0 == hit.0 && h.1 < hit.1);
    if best.len() == k && best.last().is_some_and(before) {
        return;
    }
    let at = best.partition_point(before);
    best.insert(at, hit);
    best.truncate(k);
}

/// Each query's exact `k` nearest rows of `rows` (`dim` floats a row), ids being the rows'
/// places plus `first_id`, nearest first, ties by id.
pub fn exact_top_k(
    rows: &[f32],
    dim: usize,
    first_id: u32,
    queries: &Vectors,
    k: usize,
) -> Vec<Vec<Hit>> {
    let nq = queries.len();
    let partial: Vec<Vec<Vec<Hit>>> = rows
        .par_chunks(ROWS_PER_TASK * dim)
        .enumerate()
        .map(|(task, chunk)| {
            let mut best = vec![Vec::with_capacity(k + 1); nq];
            for (j, row) in chunk.chunks_exact(dim).enumerate() {
                let id = first_id + (task * ROWS_PER_TASK + j) as u32;
                for (q, b) in best.iter_mut().enumerate() {
                    offer(b, (l2_lanes(row, queries.row(q)), id), k);
                }
            }
            best
        })
        .collect();
    (0..nq)
        .map(|q| {
            top_k(
                partial.iter().flat_map(|p| p[q].iter().copied()).collect(),
                k,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_one_pass_brute_force() {
        use crate::data::Clusters;
        let spec = Clusters {
            dim: 19,
            clusters: 5,
            spread: 3.0,
            sigma: 1.0,
            seed: 3,
        };
        let data = spec.points(20_000, 0, None);
        let queries = spec.points(7, 1, None);
        let got = exact_top_k(&data.data, data.dim, 0, &queries, 10);
        for (q, got) in got.iter().enumerate() {
            let want = crate::cpu::brute_force(&data, queries.row(q), 10);
            let ids = |v: &[Hit]| v.iter().map(|h| h.1).collect::<Vec<_>>();
            assert_eq!(ids(got), ids(&want), "query {q}");
        }
    }
}
