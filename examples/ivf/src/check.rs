//! Exact checks of search results against the CPU reference ([`crate::cpu`]).
//!
//! A distance is a sum of squared differences, which the kernels add in their own order
//! (partial sums per lane, shuffles, fused multiply-adds) and the CPU in another: on
//! arbitrary floats the two differ by rounding, and the ids of near-ties may swap, so such
//! a comparison needs a tolerance that can hide a wrong answer. On data whose coordinates
//! lie on a grid of [`GRID`] (see [`snap`]) nothing rounds: every difference is a multiple
//! of 1/16 and every squared difference a multiple of 2^-8, and a multiple of 2^-8 below
//! [`EXACT_BELOW`] (2^16) has at most 24 significant bits, so every partial sum of a
//! distance below it is exact in f32 whatever the order. The GPU's distances then equal the
//! CPU's bit for bit, ties are real ties, both sides order them by id, and the results must
//! be equal: [`top_k_mismatches`] compares every distance and every id.

use crate::cpu::Hit;
use crate::data::Vectors;

/// The grid coordinates are snapped to: 1/16.
pub const GRID: f32 = 1.0 / 16.0;

/// Squared distances between grid points below this (2^16) are exact in f32 in any order
/// of summation.
pub const EXACT_BELOW: f32 = 65536.0;

/// Rounds every value to the nearest multiple of [`GRID`].
pub fn snap_values(values: &mut [f32]) {
    for v in values {
        *v = (*v / GRID).round() * GRID;
    }
}

/// `vectors` with every coordinate on the grid.
pub fn snap(mut vectors: Vectors) -> Vectors {
    snap_values(&mut vectors.data);
    vectors
}

/// Where `k` results per query (`dist` and `ids`, `queries * k` each, nearest first) differ
/// from the CPU reference's (`want[q]`, its first `k` hits): one line per query that
/// differs (at most 10, then a count), empty when every distance and every id is equal.
/// A reference distance outside the exact range is reported too: there the comparison would
/// not be exact.
pub fn top_k_mismatches(dist: &[f32], ids: &[u32], want: &[Vec<Hit>], k: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut differing = 0;
    if dist.len() != want.len() * k || ids.len() != want.len() * k {
        return vec![format!(
            "{} distances and {} ids for {} queries of {k}",
            dist.len(),
            ids.len(),
            want.len()
        )];
    }
    for (q, w) in want.iter().enumerate() {
        let got: Vec<Hit> = (0..k).map(|j| (dist[q * k + j], ids[q * k + j])).collect();
        let w: Vec<Hit> = w.iter().take(k).copied().collect();
        let line = if let Some(far) = w.iter().find(|h| h.0 >= EXACT_BELOW) {
            Some(format!(
                "query {q}: reference distance {} is outside the exact range",
                far.0
            ))
        } else if w.len() < k {
            Some(format!(
                "query {q}: the reference has {} hits of {k}",
                w.len()
            ))
        } else {
            let same = |a: &Hit, b: &Hit| a.0.to_bits() == b.0.to_bits() && a.1 == b.1;
            (0..k).find(|&j| !same(&got[j], &w[j])).map(|j| {
                format!(
                    "query {q} rank {j}: got (distance {}, id {}), the CPU has (distance {}, id {})",
                    got[j].0, got[j].1, w[j].0, w[j].1
                )
            })
        };
        if let Some(line) = line {
            differing += 1;
            if out.len() < 10 {
                out.push(line);
            }
        }
    }
    if differing > out.len() {
        out.push(format!("{} more queries differ", differing - out.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu;
    use crate::data::Clusters;
    use crate::index::IvfLayout;

    /// A small index on the grid and the CPU's top 10 of 30 queries over 4 of its lists.
    fn reference() -> (Vec<f32>, Vec<u32>, Vec<Vec<Hit>>) {
        let spec = Clusters {
            dim: 16,
            clusters: 8,
            spread: 4.0,
            sigma: 1.0,
            seed: 11,
        };
        let data = snap(spec.points(2000, 0, None));
        let mut centroids = cpu::kmeans(&spec.points(400, 1, None), 8, 5, 11);
        snap_values(&mut centroids);
        let layout =
            IvfLayout::from_assignment(16, centroids.clone(), &cpu::assign(&centroids, &data));
        let mut lists = vec![0.0; data.data.len()];
        layout.scatter(&data, &mut lists);
        let queries = snap(spec.points(30, 2, None));
        let want: Vec<Vec<Hit>> = (0..30)
            .map(|q| cpu::search(&layout, &lists, queries.row(q), 4, 10))
            .collect();
        let dist = want.iter().flatten().map(|h| h.0).collect();
        let ids = want.iter().flatten().map(|h| h.1).collect();
        (dist, ids, want)
    }

    #[test]
    fn the_reference_itself_passes() {
        let (dist, ids, want) = reference();
        assert_eq!(
            top_k_mismatches(&dist, &ids, &want, 10),
            Vec::<String>::new()
        );
    }

    /// The negative controls: one wrong id, one distance a grid step off, two ranks swapped,
    /// a result missing its last query, and data off the grid are each reported.
    #[test]
    fn one_wrong_id_or_distance_is_caught() {
        let (dist, ids, want) = reference();
        let mut wrong_id = ids.clone();
        wrong_id[7 * 10 + 3] = wrong_id[7 * 10 + 3].wrapping_add(1);
        let m = top_k_mismatches(&dist, &wrong_id, &want, 10);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].starts_with("query 7 rank 3:"), "{m:?}");

        let mut off = dist.clone();
        off[12 * 10 + 9] += GRID * GRID;
        let m = top_k_mismatches(&off, &ids, &want, 10);
        assert!(
            m.len() == 1 && m[0].starts_with("query 12 rank 9:"),
            "{m:?}"
        );

        let (mut swapped_d, mut swapped_i) = (dist.clone(), ids.clone());
        swapped_d.swap(40, 41);
        swapped_i.swap(40, 41);
        assert_eq!(top_k_mismatches(&swapped_d, &swapped_i, &want, 10).len(), 1);

        let short = top_k_mismatches(&dist[..290], &ids[..290], &want, 10);
        assert_eq!(short.len(), 1, "{short:?}");

        let mut far = want.clone();
        far[0][0].0 = EXACT_BELOW;
        let m = top_k_mismatches(&dist, &ids, &far, 10);
        assert!(m[0].contains("outside the exact range"), "{m:?}");
    }

    /// On the grid, the distance in any order of summation is the CPU's (here: backwards,
    /// and by fused multiply-adds in eight partial sums, as a GPU lane group may add it).
    #[test]
    fn grid_distances_are_exact_in_any_order() {
        let spec = Clusters {
            dim: 64,
            clusters: 4,
            spread: 6.0,
            sigma: 2.0,
            seed: 5,
        };
        let v = snap(spec.points(200, 0, None));
        for i in 0..v.len() - 1 {
            let (a, b) = (v.row(i), v.row(i + 1));
            let want = cpu::l2(a, b);
            assert!(want < EXACT_BELOW);
            let backwards: f32 = (0..64).rev().map(|d| (a[d] - b[d]) * (a[d] - b[d])).sum();
            let mut lanes = [0.0f32; 8];
            for d in 0..64 {
                let t = a[d] - b[d];
                lanes[d % 8] = t.mul_add(t, lanes[d % 8]);
            }
            let fused = (lanes[0] + lanes[4])
                + (lanes[2] + lanes[6])
                + (lanes[1] + lanes[5])
                + (lanes[3] + lanes[7]);
            assert_eq!(backwards.to_bits(), want.to_bits());
            assert_eq!(fused.to_bits(), want.to_bits());
        }
    }
}
