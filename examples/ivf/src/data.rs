//! Data sets: clustered Gaussian vectors from a fixed seed, or `.fvecs` files.

use std::io::{Read, Write};
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use rayon::prelude::*;

/// `n` vectors of `dim` floats, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    /// Floats per vector.
    pub dim: usize,
    /// `n * dim` floats.
    pub data: Vec<f32>,
}

impl Vectors {
    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.data.len() / self.dim.max(1)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Vector `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// A copy of the first `n` vectors (all of them when there are fewer).
    pub fn prefix(&self, n: usize) -> Vectors {
        Vectors {
            dim: self.dim,
            data: self.data[..self.dim * n.min(self.len())].to_vec(),
        }
    }
}

/// How to generate a clustered data set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clusters {
    /// Dimensions.
    pub dim: usize,
    /// Number of cluster centres.
    pub clusters: usize,
    /// Spread of the centres (per coordinate, uniform in `[-spread, spread]`).
    pub spread: f32,
    /// Standard deviation of points around their centre.
    pub sigma: f32,
    /// Seed; everything below derives from it.
    pub seed: u64,
}

impl Clusters {
    /// The cluster centres.
    pub fn centres(&self) -> Vectors {
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
        let data = (0..self.clusters * self.dim)
            .map(|_| rng.gen_range(-self.spread..self.spread))
            .collect();
        Vectors {
            dim: self.dim,
            data,
        }
    }

    /// `n` points, point `i` drawn around centre `i % clusters` unless `only` restricts the
    /// centres used (queries near a subset of clusters). Deterministic for a given `stream`.
    pub fn points(&self, n: usize, stream: u64, only: Option<&[usize]>) -> Vectors {
        let centres = self.centres();
        let normal = Normal::new(0.0f32, self.sigma).expect("sigma is finite and positive");
        let dim = self.dim;
        let mut data = vec![0.0f32; n * dim];
        data.par_chunks_mut(dim * 1024)
            .enumerate()
            .for_each(|(chunk, out)| {
                let mut rng = rand::rngs::StdRng::seed_from_u64(
                    self.seed ^ (stream << 40) ^ (chunk as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                );
                for (j, v) in out.chunks_mut(dim).enumerate() {
                    let i = chunk * 1024 + j;
                    let c = match only {
                        Some(set) => set[rng.gen_range(0..set.len())],
                        None => i % self.clusters,
                    };
                    for (x, m) in v.iter_mut().zip(centres.row(c)) {
                        *x = m + normal.sample(&mut rng);
                    }
                }
            });
        Vectors { dim, data }
    }
}

/// Reads a `.fvecs` file (each vector: little-endian `i32` dimension, then that many `f32`),
/// at most `limit` vectors.
pub fn read_fvecs(path: &Path, limit: usize) -> std::io::Result<Vectors> {
    let mut file = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut dim_bytes = [0u8; 4];
    let mut data = Vec::new();
    let mut dim = 0usize;
    let mut n = 0;
    while n < limit {
        match file.read_exact(&mut dim_bytes) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let d = i32::from_le_bytes(dim_bytes);
        if d <= 0 || (dim != 0 && d as usize != dim) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{}: vector {n} has dimension {d}, expected {dim}",
                    path.display()
                ),
            ));
        }
        dim = d as usize;
        let mut buf = vec![0u8; dim * 4];
        file.read_exact(&mut buf)?;
        data.extend(
            buf.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        n += 1;
    }
    Ok(Vectors { dim, data })
}

/// Writes `v` as `.fvecs`.
pub fn write_fvecs(path: &Path, v: &Vectors) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    for i in 0..v.len() {
        file.write_all(&(v.dim as i32).to_le_bytes())?;
        for x in v.row(i) {
            file.write_all(&x.to_le_bytes())?;
        }
    }
    file.flush()
}
