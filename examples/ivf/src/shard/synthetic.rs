//! An index too big to train: `nlist` Gaussian clusters whose centres are the centroids and
//! whose points are the lists, each vector a pure function of the seed and its place. Any
//! rank makes any range of the list-major vectors (its shard) in parallel, without the
//! rest, and every rank and run gets the same bits. k-means over a few hundred million
//! vectors would take longer than the searches measured on them; the inverted file is the
//! same structure either way (recall is still measured against brute force).
//!
//! List sizes vary by up to 3x (weights 0.5 to 1.5), so a partition by bytes has unequal
//! lists to balance. Each coordinate's noise is an Irwin-Hall sum of four uniforms (a
//! standard normal to within its tails, which end at 3.5 sigma).

use crate::data::Vectors;
use crate::index::IvfLayout;

/// How to generate the index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Synthetic {
    /// Floats per vector.
    pub dim: usize,
    /// Lists (clusters).
    pub nlist: usize,
    /// Vectors in all lists.
    pub vectors: usize,
    /// Centres are uniform in `[-spread, spread]` per coordinate.
    pub spread: f32,
    /// Standard deviation of points around their centre, per coordinate.
    pub sigma: f32,
    /// Everything derives from it.
    pub seed: u64,
}

/// SplitMix64's step: a well-mixed 64-bit value from a counter.
#[inline(always)]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A uniform in `[0, 1)` from a 64-bit value.
#[inline(always)]
fn unit(z: u64) -> f32 {
    (z >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
}

/// An approximately standard normal value from a 64-bit value (four 16-bit uniforms).
#[inline(always)]
fn normal(z: u64) -> f32 {
    let s = (z & 0xFFFF) + ((z >> 16) & 0xFFFF) + ((z >> 32) & 0xFFFF) + (z >> 48);
    // Mean 2, variance 1/3 in units of 65536.
    (s as f32 * (1.0 / 65536.0) - 2.0) * 1.732_050_8
}

impl Synthetic {
    /// Centre `list`'s coordinates.
    fn centre(&self, list: usize, out: &mut [f32]) {
        let base = self.seed ^ (list as u64).wrapping_mul(GOLDEN) ^ 0xC3A5_C85C_97CB_3127;
        for (d, x) in out.iter_mut().enumerate() {
            *x = (unit(mix(base.wrapping_add((d as u64 + 1).wrapping_mul(GOLDEN)))) * 2.0 - 1.0)
                * self.spread;
        }
    }

    /// All centres, list by list (the centroids).
    pub fn centres(&self) -> Vec<f32> {
        let mut c = vec![0.0; self.nlist * self.dim];
        for (l, row) in c.chunks_mut(self.dim.max(1)).enumerate() {
            self.centre(l, row);
        }
        c
    }

    /// `nlist + 1` list offsets, in vectors: sizes in proportion to weights from 0.5 to 1.5,
    /// rounded so they add up to `vectors` exactly.
    pub fn offsets(&self) -> Vec<u64> {
        let weights: Vec<f64> = (0..self.nlist)
            .map(|l| 0.5 + unit(mix(self.seed ^ 0x5EED ^ (l as u64).wrapping_mul(GOLDEN))) as f64)
            .collect();
        let total: f64 = weights.iter().sum();
        let mut offsets = Vec::with_capacity(self.nlist + 1);
        let mut acc = 0.0;
        offsets.push(0);
        for w in &weights {
            acc += w;
            offsets.push(((acc / total) * self.vectors as f64).round() as u64);
        }
        if let Some(last) = offsets.last_mut() {
            *last = self.vectors as u64;
        }
        offsets
    }

    /// The layout: the centres as centroids, the offsets, and ids that are the vectors'
    /// places in the list-major array.
    pub fn layout(&self) -> IvfLayout {
        IvfLayout {
            dim: self.dim,
            centroids: self.centres(),
            offsets: self.offsets(),
            ids: (0..self.vectors as u32).collect(),
        }
    }

    /// Rows `first_row..` of the list-major vectors into `out` (whole rows), for the lists'
    /// `offsets`: row `i` of list `l` is centre `l` plus noise drawn from the seed and `i`.
    pub fn fill(&self, offsets: &[u64], first_row: usize, out: &mut [f32]) {
        let dim = self.dim;
        let mut list = offsets
            .partition_point(|&o| o <= first_row as u64)
            .saturating_sub(1);
        let mut centre = vec![0.0; dim];
        self.centre(list, &mut centre);
        for (j, row) in out.chunks_mut(dim).enumerate() {
            let i = (first_row + j) as u64;
            while i >= offsets[list + 1] {
                list += 1;
                self.centre(list, &mut centre);
            }
            let mut state = self.seed ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93);
            for (x, c) in row.iter_mut().zip(&centre) {
                state = state.wrapping_add(GOLDEN);
                *x = c + self.sigma * normal(mix(state));
            }
        }
    }

    /// `n` queries, query `j` drawn around the centre of a list picked from the seed,
    /// `stream` and `j`, with the points' spread.
    pub fn queries(&self, n: usize, stream: u64) -> Vectors {
        let dim = self.dim;
        let mut data = vec![0.0; n * dim];
        let mut centre = vec![0.0; dim];
        for (j, row) in data.chunks_mut(dim).enumerate() {
            let key = self.seed ^ (stream << 32) ^ (j as u64).wrapping_mul(GOLDEN) ^ 0x0051_E51E;
            self.centre((mix(key) % self.nlist.max(1) as u64) as usize, &mut centre);
            let mut state = mix(key ^ 0xA5A5);
            for (x, c) in row.iter_mut().zip(&centre) {
                state = state.wrapping_add(GOLDEN);
                *x = c + self.sigma * normal(mix(state));
            }
        }
        Vectors { dim, data }
    }

    /// Vectors of `dim` floats in `bytes` bytes of lists.
    pub fn vectors_in(bytes: u64, dim: usize) -> usize {
        (bytes / (dim as u64 * 4)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Synthetic {
        Synthetic {
            dim: 12,
            nlist: 37,
            vectors: 5000,
            spread: 1.0,
            sigma: 0.1,
            seed: 7,
        }
    }

    #[test]
    fn any_range_is_the_same_as_the_whole() {
        let s = spec();
        let offsets = s.offsets();
        let mut whole = vec![0.0; s.vectors * s.dim];
        s.fill(&offsets, 0, &mut whole);
        for (first, n) in [(0, 1), (123, 400), (4999, 1), (1000, 2500)] {
            let mut part = vec![0.0; n * s.dim];
            s.fill(&offsets, first, &mut part);
            assert_eq!(part, whole[first * s.dim..(first + n) * s.dim]);
        }
    }

    #[test]
    fn lists_vary_and_add_up() {
        let s = spec();
        let o = s.offsets();
        assert_eq!(o.len(), s.nlist + 1);
        assert_eq!(*o.last().unwrap(), s.vectors as u64);
        let sizes: Vec<u64> = o.windows(2).map(|w| w[1] - w[0]).collect();
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        assert!(*max as f64 > 1.5 * *min as f64, "sizes {min}..{max}");
    }

    #[test]
    fn points_lie_around_their_centre() {
        let s = spec();
        let offsets = s.offsets();
        let mut v = vec![0.0; s.vectors * s.dim];
        s.fill(&offsets, 0, &mut v);
        let centres = s.centres();
        let (mut sum, mut sq, mut n) = (0.0f64, 0.0f64, 0.0f64);
        for l in 0..s.nlist {
            for i in offsets[l] as usize..offsets[l + 1] as usize {
                for d in 0..s.dim {
                    let e = (v[i * s.dim + d] - centres[l * s.dim + d]) as f64;
                    sum += e;
                    sq += e * e;
                    n += 1.0;
                }
            }
        }
        let (mean, sd) = (sum / n, (sq / n).sqrt());
        assert!(mean.abs() < 0.003, "mean {mean}");
        assert!((sd - 0.1).abs() < 0.003, "sd {sd}");
    }
}
