//! The CPU reference: k-means, assignment, exact brute force, IVF search with the same
//! algorithm as the kernels, and recall.

use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use crate::data::Vectors;
use crate::index::IvfLayout;

/// Squared L2 distance.
#[inline]
pub fn l2(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// A candidate: distance and id, ordered by distance then id (so ties break the same way
/// on the CPU and the GPU).
pub type Hit = (f32, u32);

/// Keeps the `k` best of `hits` in order.
pub fn top_k(mut hits: Vec<Hit>, k: usize) -> Vec<Hit> {
    hits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    hits.truncate(k);
    hits
}

/// The `n` nearest of `centroids` (`dim` floats each) to `v`, nearest first (ties by
/// index).
pub fn nearest(centroids: &[f32], dim: usize, v: &[f32], n: usize) -> Vec<u32> {
    if n == 1 {
        let mut best = (f32::INFINITY, u32::MAX);
        for (c, m) in centroids.chunks(dim).enumerate() {
            let d = l2(v, m);
            if d < best.0 {
                best = (d, c as u32);
            }
        }
        return vec![best.1];
    }
    let hits = centroids
        .chunks(dim)
        .enumerate()
        .map(|(c, m)| (l2(v, m), c as u32))
        .collect();
    top_k(hits, n).into_iter().map(|h| h.1).collect()
}

/// Lloyd's k-means on `sample`: `k` centroids, `iters` iterations, seeded initial picks,
/// with the assignment step on the CPU. See [`kmeans_with`].
pub fn kmeans(sample: &Vectors, k: usize, iters: usize, seed: u64) -> Vec<f32> {
    match kmeans_with(sample, k, iters, seed, |c, v| {
        Ok::<_, std::convert::Infallible>(assign(c, v))
    }) {
        Ok(c) => c,
        Err(never) => match never {},
    }
}

/// Lloyd's k-means on `sample`: `k` centroids from seeded random picks, `iters` rounds of
/// assignment (`assign(centroids, sample)`, so a caller can run it on a GPU; its error
/// ends the training) and update.
/// A centroid left with no points is moved next to the centroid of the largest cluster
/// (split in two by a small opposite nudge, as FAISS does), so no list stays empty while
/// another holds several clusters.
pub fn kmeans_with<E>(
    sample: &Vectors,
    k: usize,
    iters: usize,
    seed: u64,
    mut assign: impl FnMut(&[f32], &Vectors) -> Result<Vec<u32>, E>,
) -> Result<Vec<f32>, E> {
    let dim = sample.dim;
    let n = sample.len();
    assert!(
        n >= k,
        "k-means needs at least k = {k} sample points, got {n}"
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut picks: Vec<usize> = (0..n).collect();
    for i in 0..k {
        let j = rng.gen_range(i..n);
        picks.swap(i, j);
    }
    let mut centroids: Vec<f32> = picks[..k]
        .iter()
        .flat_map(|&i| sample.row(i).to_vec())
        .collect();
    for _ in 0..iters {
        let labels = assign(&centroids, sample)?;
        let mut sums = vec![0.0f64; k * dim];
        let mut counts = vec![0usize; k];
        for (i, &c) in labels.iter().enumerate() {
            counts[c as usize] += 1;
            for (s, x) in sums[c as usize * dim..][..dim]
                .iter_mut()
                .zip(sample.row(i))
            {
                *s += *x as f64;
            }
        }
        for c in 0..k {
            if counts[c] > 0 {
                for d in 0..dim {
                    centroids[c * dim + d] = (sums[c * dim + d] / counts[c] as f64) as f32;
                }
            }
        }
        for c in 0..k {
            if counts[c] == 0 {
                let big = (0..k).max_by_key(|&j| counts[j]).unwrap_or(0);
                if counts[big] < 2 {
                    break;
                }
                for d in 0..dim {
                    let v = centroids[big * dim + d];
                    let nudge = if d % 2 == 0 { 1.0 + 1e-3 } else { 1.0 - 1e-3 };
                    centroids[c * dim + d] = v * nudge;
                    centroids[big * dim + d] = v / nudge;
                }
                counts[c] = counts[big] / 2;
                counts[big] -= counts[c];
            }
        }
    }
    Ok(centroids)
}

/// The list of each vector: its nearest centroid.
pub fn assign(centroids: &[f32], data: &Vectors) -> Vec<u32> {
    (0..data.len())
        .into_par_iter()
        .map(|i| nearest(centroids, data.dim, data.row(i), 1)[0])
        .collect()
}

/// Exact top-`k` of `q` over all of `data`.
pub fn brute_force(data: &Vectors, q: &[f32], k: usize) -> Vec<Hit> {
    let hits = (0..data.len())
        .into_par_iter()
        .map(|i| (l2(q, data.row(i)), i as u32))
        .collect();
    top_k(hits, k)
}

/// IVF search on the CPU: the `nprobe` nearest lists of `q`, scanned exactly, top `k`.
/// `lists` holds the vectors in list-major order (as on the GPU).
pub fn search(layout: &IvfLayout, lists: &[f32], q: &[f32], nprobe: usize, k: usize) -> Vec<Hit> {
    let dim = layout.dim;
    let mut hits = Vec::new();
    for l in nearest(&layout.centroids, dim, q, nprobe) {
        let (a, b) = (
            layout.offsets[l as usize] as usize,
            layout.offsets[l as usize + 1] as usize,
        );
        for j in a..b {
            hits.push((l2(q, &lists[j * dim..(j + 1) * dim]), layout.ids[j]));
        }
    }
    top_k(hits, k)
}

/// Mean recall@k of `found` against `exact` (ids only).
pub fn recall(found: &[Vec<Hit>], exact: &[Vec<Hit>], k: usize) -> f64 {
    let total: usize = found
        .iter()
        .zip(exact)
        .map(|(f, e)| {
            let truth: Vec<u32> = e.iter().take(k).map(|h| h.1).collect();
            f.iter().take(k).filter(|h| truth.contains(&h.1)).count()
        })
        .sum();
    total as f64 / (k * found.len().max(1)) as f64
}
