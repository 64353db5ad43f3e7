//! The benchmark's data and batches: a table of rows and an IVF index in host memory, and
//! batches that pick rows or lists with a skewed (Zipf) popularity.

use host_cache_kernels::reference::grid_value;
use host_cache_kernels::DIM;
use rand::rngs::StdRng;
use rand::Rng;
use rand_distr::{Distribution, Zipf};

/// Element `i` of the data: a float on the grid of [`grid_value`] (a multiple of 1/16 in
/// [-1, 1)) from a hash of `i`: cheap to make in parallel, no two rows alike, and list scans
/// over it are exact, so the CPU reference gives the kernels' results bit for bit.
pub fn value(i: usize) -> f32 {
    let mut x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 29;
    grid_value(x >> 40)
}

/// Fills `chunk` with [`value`]s from element `first` on.
pub fn fill(first: usize, chunk: &mut [f32]) {
    for (k, v) in chunk.iter_mut().enumerate() {
        *v = value(first + k);
    }
}

/// Items drawn with Zipf popularity over `n` items (rank 1 the most popular), the ranks
/// scattered over the items by a fixed permutation so that popular items are not neighbours.
pub struct Popularity {
    zipf: Zipf<f64>,
    n: u64,
    stride: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Popularity {
    /// Zipf with exponent `s` over `n` items.
    pub fn new(n: usize, s: f64) -> Popularity {
        let n = n.max(1) as u64;
        let mut stride = 0x9e37_79b9u64 % n.max(2);
        while gcd(stride, n) != 1 {
            stride += 1;
        }
        Popularity {
            zipf: Zipf::new(n, s).expect("n >= 1 and s > 0"),
            n,
            stride,
        }
    }

    /// One item.
    pub fn draw(&self, rng: &mut StdRng) -> u32 {
        let rank = self.zipf.sample(rng) as u64 - 1;
        ((rank * self.stride) % self.n) as u32
    }
}

/// `batches` batches of `rows` row ids each.
pub fn row_batches(
    pop: &Popularity,
    rng: &mut StdRng,
    batches: usize,
    rows: usize,
) -> Vec<Vec<u32>> {
    (0..batches)
        .map(|_| (0..rows).map(|_| pop.draw(rng)).collect())
        .collect()
}

/// An IVF index's layout: `lists + 1` offsets into the vectors, list sizes spread around
/// the mean.
pub fn list_offsets(rng: &mut StdRng, vectors: usize, lists: usize) -> Vec<u32> {
    let weights: Vec<f64> = (0..lists).map(|_| rng.gen_range(0.5..1.5)).collect();
    let total: f64 = weights.iter().sum();
    let mut off = vec![0u32];
    let mut acc = 0.0;
    for w in &weights {
        acc += w;
        off.push(((acc / total) * vectors as f64).round() as u32);
    }
    *off.last_mut().unwrap() = vectors as u32;
    off
}

/// One batch of list scans: queries and the (list, query) pairs to scan.
pub struct ScanBatch {
    pub queries: Vec<f32>,
    pub pair_list: Vec<u32>,
    pub pair_query: Vec<u32>,
}

/// `batches` batches of `queries` queries, each probing `nprobe` distinct lists drawn by
/// popularity.
pub fn scan_batches(
    pop: &Popularity,
    rng: &mut StdRng,
    batches: usize,
    queries: usize,
    nprobe: usize,
) -> Vec<ScanBatch> {
    (0..batches)
        .map(|_| {
            let mut pair_list = Vec::new();
            let mut pair_query = Vec::new();
            for q in 0..queries {
                let mut probed: Vec<u32> = Vec::new();
                while probed.len() < nprobe {
                    let l = pop.draw(rng);
                    if !probed.contains(&l) {
                        probed.push(l);
                    }
                }
                pair_query.extend(std::iter::repeat_n(q as u32, nprobe));
                pair_list.extend(probed);
            }
            let queries = (0..queries * DIM).map(|_| grid_value(rng.gen())).collect();
            ScanBatch {
                queries,
                pair_list,
                pair_query,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn popularity_is_skewed_and_covers_the_range() {
        let pop = Popularity::new(1000, 1.1);
        let mut rng = StdRng::seed_from_u64(1);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[pop.draw(&mut rng) as usize] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        assert!(sorted[0] > 50 * sorted[500].max(1), "{:?}", &sorted[..5]);
        assert!(counts.iter().filter(|c| **c > 0).count() > 500);
    }

    #[test]
    fn offsets_cover_the_vectors_and_batches_probe_distinct_lists() {
        let mut rng = StdRng::seed_from_u64(2);
        let off = list_offsets(&mut rng, 10_000, 64);
        assert_eq!((off.len(), off[0], off[64]), (65, 0, 10_000));
        assert!(off.windows(2).all(|w| w[1] >= w[0]));
        let b = &scan_batches(&Popularity::new(64, 1.0), &mut rng, 1, 3, 4)[0];
        assert_eq!((b.pair_list.len(), b.queries.len()), (12, 3 * DIM));
        for q in 0..3 {
            let mut l = b.pair_list[q * 4..q * 4 + 4].to_vec();
            l.sort_unstable();
            l.dedup();
            assert_eq!(l.len(), 4);
        }
        let row = |r: usize| (r * 1024..(r + 1) * 1024).map(value).collect::<Vec<f32>>();
        assert_ne!(row(0), row(1), "rows differ");
        assert!(row(2)
            .iter()
            .all(|v| (-1.0..1.0).contains(v) && (v * 16.0).fract() == 0.0));
    }
}
