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

    /// The work of [`ivf_kernels::tile_bounds`] for a plan's `probed` lists with
    /// `counts[l]` (query, probe) pairs each, in work items of `chunk_rows` vectors.
    pub fn tile_work(&self, probed: &[u32], counts: &[u32], chunk_rows: u32) -> TileWork {
        let chunk = chunk_rows.max(1) as usize;
        let rows = chunk.min(ivf_kernels::UNIT_ROWS);
        let mut work = TileWork {
            units: Vec::new(),
            bound_off: vec![0],
        };
        let mut total = 0u64;
        for &l in probed {
            let (len, pairs) = (self.list_len(l as usize), counts[l as usize] as usize);
            for (c, start) in (0..len).step_by(chunk).enumerate() {
                let in_chunk = (len - start).min(chunk);
                for off in (0..in_chunk).step_by(rows) {
                    for g0 in (0..pairs).step_by(ivf_kernels::TILE_QUERIES) {
                        work.units.extend([l, c as u32, off as u32, g0 as u32]);
                    }
                }
                // The chunk's items: its pairs side by side, as the plan numbers them.
                for _ in 0..pairs {
                    total += in_chunk as u64;
                    work.bound_off.push(total);
                }
            }
        }
        work
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

/// `|x|^2` of each `dim`-float vector of `vectors` (at least one entry), as
/// [`ivf_kernels::tile_bounds`] takes them.
pub fn squared_norms(vectors: &[f32], dim: usize) -> Vec<f32> {
    let mut norms: Vec<f32> = (vectors.chunks_exact(dim.max(1)))
        .map(|v| v.iter().fold(0.0f32, |s, x| x.mul_add(*x, s)))
        .collect();
    norms.resize(norms.len().max(1), 0.0);
    norms
}

/// What [`IvfLayout::tile_work`] lists for a tiled scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TileWork {
    /// [`ivf_kernels::UNIT_WORDS`] words per unit of [`ivf_kernels::tile_bounds`] (list,
    /// chunk, first vector of the unit in the chunk, first pair of its tile): every
    /// [`ivf_kernels::UNIT_ROWS`] vectors of every chunk against every
    /// [`ivf_kernels::TILE_QUERIES`] of the list's pairs.
    pub units: Vec<u32>,
    /// Per work item, in the plan's order (list by list, chunk by chunk, pairs side by
    /// side): where its bounds start, one per vector of its chunk; then their total.
    pub bound_off: Vec<u64>,
}

impl TileWork {
    /// The work items in launches whose bounds fit `max_bounds` floats (at least one item
    /// each): `(first, count)` of each.
    pub fn pieces(&self, max_bounds: u64) -> Vec<(usize, usize)> {
        let items = self.bound_off.len().saturating_sub(1);
        let mut pieces = Vec::new();
        let mut first = 0;
        while first < items {
            let limit = self.bound_off[first] + max_bounds;
            let fit = self.bound_off[first + 1..].partition_point(|&o| o <= limit);
            let count = fit.clamp(1, items - first);
            pieces.push((first, count));
            first += count;
        }
        pieces
    }
}
