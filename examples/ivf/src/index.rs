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

    /// The work of [`ivf_kernels::tile_bounds`] (what [`ivf_kernels::tile_work`] lists on the
    /// GPU, here the CPU reference the emulator checks it against) for a plan's `probed` lists with
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
                    total += ivf_kernels::item_bounds(in_chunk);
                    work.bound_off.push(total);
                }
            }
        }
        work
    }

    /// Most units [`ivf_kernels::tile_work`] can list for `pairs` (query, probe) pairs in
    /// chunks of `chunk_rows` vectors, whatever lists they probe: what its buffer holds.
    pub fn tile_units_at_most(&self, pairs: usize, chunk_rows: u32) -> usize {
        let chunk = chunk_rows.max(1) as usize;
        let unit_rows: Vec<u32> = (0..self.nlist())
            .map(|l| ivf_kernels::ListWork::unit_rows(self.list_len(l), chunk))
            .collect();
        ivf_kernels::units_at_most(&unit_rows, pairs)
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
    /// side): where its bounds start, one per vector of its chunk
    /// ([`ivf_kernels::item_bounds`]); then their total.
    pub bound_off: Vec<u64>,
}

/// The work items whose bounds start at `bound_off[..items]` (`bound_off[items]` their
/// total) in launches whose bounds fit `max_bounds` floats (at least one item each):
/// `(first, count)` of each.
pub fn pieces(bound_off: &[u64], max_bounds: u64) -> Vec<(usize, usize)> {
    let items = bound_off.len().saturating_sub(1);
    let mut pieces = Vec::new();
    let mut first = 0;
    while first < items {
        let limit = bound_off[first] + max_bounds;
        let fit = bound_off[first + 1..].partition_point(|&o| o <= limit);
        let count = fit.clamp(1, items - first);
        pieces.push((first, count));
        first += count;
    }
    pieces
}

/// A tiled scan's launches, from what [`ivf_kernels::tile_work`] counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TileLaunch {
    /// Units of [`ivf_kernels::tile_bounds`].
    pub units: usize,
    /// Work items.
    pub items: usize,
    /// The work items by launch, `(first, count)`.
    pub pieces: Vec<(usize, usize)>,
    /// The most bounds one launch writes.
    pub most_bounds: u64,
}

impl TileLaunch {
    /// From `tile_work`'s summary (units, work items, bounds) for buffers of `max_units`
    /// units and `max_items` items: one launch when the bounds fit `max_bounds` floats, else
    /// launches cut by the bound offsets `offsets` reads back. A count beyond its buffer is
    /// an error naming the kernel.
    pub fn new(
        summary: &[u64],
        (max_units, max_items, max_bounds): (usize, usize, u64),
        offsets: impl FnOnce() -> lookahead::Result<Vec<u64>>,
    ) -> lookahead::Result<Self> {
        let (units, items, bounds) = (summary[0] as usize, summary[1] as usize, summary[2]);
        if units > max_units || items > max_items {
            return Err(lookahead::Error::UnwrittenOutput {
                kernel: "tile_work",
                what: format!(
                    "{units} units and {items} work items counted, for buffers of \
                     {max_units} and {max_items}"
                ),
            });
        }
        let (pieces, most_bounds) = if bounds <= max_bounds {
            (if items > 0 { vec![(0, items)] } else { vec![] }, bounds)
        } else {
            let off = offsets()?;
            let pieces = pieces(&off, max_bounds);
            let most = (pieces.iter())
                .map(|&(f, n)| off[f + n] - off[f])
                .max()
                .unwrap_or(0);
            (pieces, most)
        };
        Ok(TileLaunch {
            units,
            items,
            pieces,
            most_bounds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_keep_each_launch_within_the_bound_budget() {
        // Items of 10, 30, 5 and 50 bounds.
        let off = [0, 10, 40, 45, 95];
        assert_eq!(pieces(&off, 100), vec![(0, 4)]);
        assert_eq!(pieces(&off, 45), vec![(0, 3), (3, 1)]);
        // An item larger than the budget still gets a launch of its own.
        assert_eq!(pieces(&off, 20), vec![(0, 1), (1, 1), (2, 1), (3, 1)]);
        assert!(pieces(&[0], 20).is_empty());
    }

    #[test]
    fn a_tile_launch_reads_the_offsets_back_only_when_the_bounds_need_several() {
        let off = vec![0, 10, 40, 45, 95];
        let one = TileLaunch::new(&[7, 4, 95], (8, 4, 100), || panic!("not needed")).unwrap();
        assert_eq!((one.pieces, one.most_bounds), (vec![(0, 4)], 95));
        let split = TileLaunch::new(&[7, 4, 95], (8, 4, 45), || Ok(off.clone())).unwrap();
        assert_eq!(
            (split.pieces, split.most_bounds),
            (vec![(0, 3), (3, 1)], 50)
        );
        let none = TileLaunch::new(&[0, 0, 0], (8, 4, 45), || panic!("not needed")).unwrap();
        assert!(none.pieces.is_empty());
        // Counts beyond the buffers are the kernel's fault, named.
        let e = TileLaunch::new(&[9, 4, 95], (8, 4, 100), || Ok(off.clone())).unwrap_err();
        assert!(e.to_string().contains("tile_work"), "{e}");
    }
}
