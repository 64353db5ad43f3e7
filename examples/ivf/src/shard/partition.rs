//! Which rank holds which lists: contiguous runs of lists cut where the bytes before the cut
//! come nearest to an equal share, so every rank's part is one range of the list-major
//! vectors (one buffer per shard, the same as a slice of the whole index) and the shares
//! differ from the mean by less than one list's bytes. The cut depends on the list sizes
//! and the rank count alone, so every rank computes the same partition without talking.

use std::ops::Range;

use crate::index::IvfLayout;

/// The lists of an index split over `ranks` ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// `ranks + 1` list numbers: rank `r` holds lists `cuts[r]..cuts[r + 1]`.
    cuts: Vec<usize>,
    /// `nlist + 1` offsets of the lists, in vectors (the layout's).
    offsets: Vec<u64>,
    /// Bytes per vector.
    row_bytes: u64,
}

impl Partition {
    /// `layout`'s lists over `ranks` ranks (at least one), balanced by bytes.
    pub fn by_bytes(layout: &IvfLayout, ranks: usize) -> Partition {
        Self::of_offsets(&layout.offsets, (layout.dim * 4) as u64, ranks)
    }

    /// The same from the lists' `offsets` (`nlist + 1`, in vectors) and the bytes of one
    /// vector.
    pub fn of_offsets(offsets: &[u64], row_bytes: u64, ranks: usize) -> Partition {
        let ranks = ranks.max(1);
        let nlist = offsets.len().saturating_sub(1);
        let total = offsets.last().copied().unwrap_or(0);
        let mut cuts = vec![0usize; ranks + 1];
        cuts[ranks] = nlist;
        for (r, cut) in cuts.iter_mut().enumerate().take(ranks).skip(1) {
            // The list boundary whose vectors before it come nearest to r/ranks of all,
            // the earlier one on a tie (exact integer arithmetic: the same on every rank).
            let target = total as u128 * r as u128;
            let scaled = |l: usize| offsets[l] as u128 * ranks as u128;
            let after = offsets.partition_point(|&o| (o as u128 * ranks as u128) < target);
            let after = after.min(nlist);
            let best = if after > 0 && target - scaled(after - 1) <= scaled(after) - target {
                after - 1
            } else {
                after
            };
            *cut = best;
        }
        // Cuts never go backwards (equal cuts leave a rank without lists).
        for r in 1..=ranks {
            cuts[r] = cuts[r].max(cuts[r - 1]);
        }
        Partition {
            cuts,
            offsets: offsets.to_vec(),
            row_bytes,
        }
    }

    /// How many ranks.
    pub fn ranks(&self) -> usize {
        self.cuts.len() - 1
    }

    /// Rank `rank`'s lists.
    pub fn lists(&self, rank: usize) -> Range<usize> {
        self.cuts[rank]..self.cuts[rank + 1]
    }

    /// Rank `rank`'s vectors, as a range of the list-major array.
    pub fn vectors(&self, rank: usize) -> Range<usize> {
        let l = self.lists(rank);
        self.offsets[l.start] as usize..self.offsets[l.end] as usize
    }

    /// Rank `rank`'s vectors as a range of the list-major array's floats (what a
    /// `HostArray::view` of its lists takes).
    pub fn floats(&self, rank: usize) -> Range<usize> {
        let (v, dim) = (self.vectors(rank), (self.row_bytes / 4) as usize);
        v.start * dim..v.end * dim
    }

    /// Bytes of rank `rank`'s lists.
    pub fn bytes(&self, rank: usize) -> u64 {
        self.vectors(rank).len() as u64 * self.row_bytes
    }

    /// The rank that holds list `list`.
    pub fn owner(&self, list: usize) -> usize {
        // The last rank whose first list is at or before `list` and that holds lists.
        self.cuts[1..]
            .partition_point(|&c| c <= list)
            .min(self.ranks() - 1)
    }

    /// The largest share over the mean share (1.0: perfectly balanced).
    pub fn imbalance(&self) -> f64 {
        let total: u64 = (0..self.ranks()).map(|r| self.bytes(r)).sum();
        let most = (0..self.ranks()).map(|r| self.bytes(r)).max().unwrap_or(0);
        if total == 0 {
            1.0
        } else {
            most as f64 * self.ranks() as f64 / total as f64
        }
    }

    /// The (query, probe) pairs of `probes` (`nprobe` per query) that each rank scans: the
    /// pairs whose list it holds, in pair order.
    pub fn route(&self, probes: &[u32], nprobe: usize) -> Vec<Vec<(usize, u32)>> {
        let mut routes = vec![Vec::new(); self.ranks()];
        for (p, &list) in probes.iter().enumerate() {
            routes[self.owner(list as usize)].push((p / nprobe.max(1), list));
        }
        routes
    }

    /// Rank `rank`'s index: the whole index's centroids and list numbers, its own lists as
    /// they are and every other list empty, over its own vectors only (list `l`'s vectors
    /// start at `offsets[l]` of its part). A search of it finds exactly the candidates the
    /// whole index has in this rank's lists.
    pub fn shard_layout(&self, whole: &IvfLayout, rank: usize) -> IvfLayout {
        IvfLayout {
            dim: whole.dim,
            centroids: whole.centroids.clone(),
            offsets: self.shard_offsets(rank),
            ids: whole.ids[self.vectors(rank)].to_vec(),
        }
    }

    /// Rank `rank`'s list offsets (`nlist + 1`, in its own vectors): its lists as they are,
    /// every other list empty.
    pub fn shard_offsets(&self, rank: usize) -> Vec<u64> {
        let lists = self.lists(rank);
        let base = self.offsets[lists.start];
        self.offsets
            .iter()
            .enumerate()
            .map(|(l, _)| self.offsets[l.clamp(lists.start, lists.end)] - base)
            .collect()
    }
}
