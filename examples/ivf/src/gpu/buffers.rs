//! The device buffers a search works in, kept between searches.

use std::sync::Arc;

use cudarc::driver::{sys, CudaSlice, CudaStream};
use ivf_kernels::K;
use lookahead::{DriverContext, Result};

/// Sizes a search's device buffers were allocated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Capacity {
    pub(super) queries: usize,
    pub(super) pairs: usize,
    pub(super) items: usize,
    /// Probe lists of the coarse step's slices (pairs times slices).
    pub(super) coarse: usize,
}

/// The device buffers of a search, kept between searches and grown when a search needs
/// more (each search uses a prefix of each).
pub(super) struct Buffers {
    pub(super) cap: Capacity,
    pub(super) queries: CudaSlice<f32>,
    pub(super) probes: CudaSlice<u32>,
    pub(super) coarse_partial: CudaSlice<u32>,
    pub(super) coarse_partial_d: CudaSlice<f32>,
    pub(super) counts: CudaSlice<u32>,
    pub(super) slots: CudaSlice<u32>,
    pub(super) probed: CudaSlice<u32>,
    pub(super) wanted: CudaSlice<u32>,
    pub(super) list_item_off: CudaSlice<u32>,
    pub(super) pair_cand_off: CudaSlice<u32>,
    pub(super) item_pair: CudaSlice<u32>,
    pub(super) item_chunk: CudaSlice<u32>,
    pub(super) totals: CudaSlice<u32>,
    pub(super) copy_first: CudaSlice<u32>,
    pub(super) work: CudaSlice<u64>,
    pub(super) readiness: CudaSlice<u32>,
    pub(super) cand_d: CudaSlice<f32>,
    pub(super) cand_i: CudaSlice<u32>,
    pub(super) out_d: CudaSlice<f32>,
    pub(super) out_i: CudaSlice<u32>,
    /// The tiled scan's bounds, units and bound offsets (each grown by the first tiled
    /// search that needs more), and what `tile_work` counted.
    pub(super) bounds: CudaSlice<f32>,
    pub(super) units: CudaSlice<u32>,
    pub(super) bound_off: CudaSlice<u64>,
    pub(super) tile_summary: CudaSlice<u64>,
}

/// Stream-ordered allocation of `n` elements that a kernel writes before anything reads
/// them.
pub(super) fn scratch<T: cudarc::driver::DeviceRepr>(
    s: &Arc<CudaStream>,
    n: usize,
) -> Result<CudaSlice<T>> {
    // SAFETY: every element a search reads is written first by a kernel of that search
    // (outputs are poisoned before and checked after).
    unsafe { s.alloc::<T>(n.max(1)) }.during("cuMemAllocAsync")
}

/// `buf` grown to at least `n` elements (its contents are not kept).
pub(super) fn grow<T: cudarc::driver::DeviceRepr>(
    s: &Arc<CudaStream>,
    buf: &mut CudaSlice<T>,
    n: usize,
) -> Result<()> {
    if buf.len() < n {
        *buf = scratch(s, n)?;
    }
    Ok(())
}

impl Buffers {
    pub(super) fn new(
        s: &Arc<CudaStream>,
        cap: Capacity,
        dim: usize,
        nlist: usize,
    ) -> Result<Self> {
        Ok(Buffers {
            cap,
            queries: scratch(s, cap.queries * dim)?,
            probes: scratch(s, cap.pairs)?,
            coarse_partial: scratch(s, cap.coarse)?,
            coarse_partial_d: scratch(s, cap.coarse)?,
            counts: scratch(s, nlist)?,
            slots: scratch(s, cap.pairs)?,
            probed: scratch(s, nlist)?,
            wanted: scratch(s, nlist)?,
            list_item_off: scratch(s, nlist)?,
            pair_cand_off: scratch(s, cap.pairs + 1)?,
            item_pair: scratch(s, cap.items)?,
            item_chunk: scratch(s, cap.items)?,
            totals: scratch(s, ivf_kernels::TOTAL_WORDS)?,
            copy_first: scratch(s, nlist + 1)?,
            work: scratch(s, ivf_kernels::PULL_WORK_WORDS)?,
            readiness: scratch(s, nlist)?,
            cand_d: scratch(s, cap.items * K)?,
            cand_i: scratch(s, cap.items * K)?,
            out_d: scratch(s, cap.queries * K)?,
            out_i: scratch(s, cap.queries * K)?,
            bounds: scratch(s, 1)?,
            units: scratch(s, 1)?,
            bound_off: scratch(s, 1)?,
            tile_summary: scratch(s, ivf_kernels::TILE_SUMMARY_WORDS)?,
        })
    }
}

/// Fills the first `words` 32-bit words at `ptr` with `value` on `stream`.
pub(super) fn fill32(ptr: u64, words: usize, value: u32, s: &CudaStream) -> Result<()> {
    // SAFETY: the caller's buffer holds `words` words at `ptr`; ordered on `s`.
    unsafe { sys::cuMemsetD32Async(ptr, value, words, s.cu_stream()) }
        .result()
        .during("cuMemsetD32Async")
}

impl Capacity {
    /// What a search of `shape` needs.
    pub(super) fn of(shape: &super::search::Shape) -> Capacity {
        Capacity {
            queries: shape.nq,
            pairs: shape.pairs,
            items: shape.items,
            coarse: shape.pairs * shape.slices,
        }
    }

    /// Room for both `self` and `other`: the larger of each size.
    pub(super) fn covering(self, other: Capacity) -> Capacity {
        Capacity {
            queries: self.queries.max(other.queries),
            pairs: self.pairs.max(other.pairs),
            items: self.items.max(other.items),
            coarse: self.coarse.max(other.coarse),
        }
    }

    /// Whether buffers of this capacity hold `need`.
    pub(super) fn holds(&self, need: &Capacity) -> bool {
        self.queries >= need.queries
            && self.pairs >= need.pairs
            && self.items >= need.items
            && self.coarse >= need.coarse
    }

    /// `need`, grown to half again the old capacity where that is larger, so a few
    /// sizes settle.
    pub(super) fn grown(need: Capacity, old: Option<Capacity>) -> Capacity {
        let grow = |n: usize, o: Option<usize>| n.max(o.map_or(0, |o| o + o / 2));
        Capacity {
            queries: grow(need.queries, old.map(|c| c.queries)),
            pairs: grow(need.pairs, old.map(|c| c.pairs)),
            items: grow(need.items, old.map(|c| c.items)),
            coarse: grow(need.coarse, old.map(|c| c.coarse)),
        }
    }
}
