//! The inverted-file layout: centroids, and the vectors grouped by list, stored contiguously
//! so each list is one byte range (one request, one prefetch).

use crate::data::Vectors;

/// An IVF-Flat index on the host side: everything but the list vectors themselves, which
/// live wherever the caller puts them (a `Vec` for the CPU path, managed memory on the GPU).
#[derive(Debug, Clone, PartialEq)]
pub struct IvfLayout {
    /// Floats per vector.
    pub dim: usize,
    /// `nlist * dim` coarse centroids.
    pub centroids: Vec<f32>,
    /// `nlist + 1` offsets (in vectors) of each list in the list-major vector array.
    pub offsets: Vec<u64>,
    /// Original id of each stored vector, list-major.
    pub ids: Vec<u32>,
}

impl IvfLayout {
    /// Groups `assign` (the list of each vector) into lists (a stable counting sort).
    pub fn from_assignment(dim: usize, centroids: Vec<f32>, assign: &[u32]) -> Self {
        let nlist = centroids.len() / dim;
        let mut offsets = vec![0u64; nlist + 1];
        for &l in assign {
            offsets[l as usize + 1] += 1;
        }
        for l in 0..nlist {
            offsets[l + 1] += offsets[l];
        }
        let mut fill = offsets.clone();
        let mut ids = vec![0u32; assign.len()];
        for (i, &l) in assign.iter().enumerate() {
            ids[fill[l as usize] as usize] = i as u32;
            fill[l as usize] += 1;
        }
        IvfLayout {
            dim,
            centroids,
            offsets,
            ids,
        }
    }

    /// Number of lists.
    pub fn nlist(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Number of stored vectors.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Vectors in list `l`.
    pub fn list_len(&self, l: usize) -> usize {
        (self.offsets[l + 1] - self.offsets[l]) as usize
    }

    /// Bytes of list `l`'s vectors.
    pub fn list_bytes(&self, l: usize) -> u64 {
        (self.list_len(l) * self.dim * 4) as u64
    }

    /// Writes the vectors of `data` into `out` in list-major order
    /// (`out.len() == data.data.len()`).
    pub fn scatter(&self, data: &Vectors, out: &mut [f32]) {
        assert_eq!(out.len(), data.data.len(), "destination holds every vector");
        use rayon::prelude::*;
        out.par_chunks_mut(self.dim)
            .zip(self.ids.par_iter())
            .for_each(|(dst, &id)| dst.copy_from_slice(data.row(id as usize)));
    }

    /// The centroids in quads (see [`interleave_quads`]), the layout the coarse kernel reads.
    pub fn centroids_quads(&self) -> Vec<f32> {
        interleave_quads(&self.centroids, self.dim)
    }

    /// Total bytes of the lists in `lists` (each counted once).
    pub fn bytes_of(&self, lists: &[u32]) -> u64 {
        let mut seen = vec![false; self.nlist()];
        lists
            .iter()
            .filter(|&&l| !std::mem::replace(&mut seen[l as usize], true))
            .map(|&l| self.list_bytes(l as usize))
            .sum()
    }
}

/// `rows` (row-major, `cols` floats per row) as quads: `cols.div_ceil(4) x n x 4` for `n =
/// rows.len() / cols` rows, where quad `k` of row `r` (its columns `4k..4k + 4`, zero past
/// `cols`) is at `(k * n + r) * 4`. The coarse kernel reads it so that a warp's 32 lanes,
/// one row each, load 512 consecutive bytes, 4 columns each.
pub fn interleave_quads(rows: &[f32], cols: usize) -> Vec<f32> {
    let cols = cols.max(1);
    let n = rows.len() / cols;
    let mut out = vec![0.0; cols.div_ceil(4) * n * 4];
    for (r, row) in rows.chunks_exact(cols).enumerate() {
        for (c, &x) in row.iter().enumerate() {
            out[((c / 4) * n + r) * 4 + c % 4] = x;
        }
    }
    out
}
