//! The tiled scan's work, listed on the GPU from the plan: the units of
//! [`crate::tile_bounds`] and where each work item's bounds go. Listing them here, not on
//! the host, spares the search the round trip of the plan's counts down and the lists up
//! between the plan and the scan.

use lookahead_device::prelude::*;

use crate::block::{exclusive_sum, SCRATCH_WORDS};
use crate::params::{Index, TileWorkIn, TileWorkOut, Total};
use crate::tile_step::{TILE_QUERIES, UNIT_ROWS, UNIT_WORDS};

/// Words of [`TileWorkOut::summary`]: units, work items, bounds.
pub const TILE_SUMMARY_WORDS: usize = 3;

/// Lists the tiled scan's work in one block of [`crate::PLAN_THREADS`] threads, from
/// [`crate::plan`]'s probed lists and per-list pair counts. For each probed list (in list
/// order), chunk by chunk:
///
/// - the units of [`crate::tile_bounds`], `[list, chunk, first vector in the chunk, first
///   pair of the tile]`: every [`UNIT_ROWS`] vectors of the chunk (fewer where the chunk
///   is shorter) against every [`TILE_QUERIES`] of the list's pairs;
/// - per work item (the chunk's pairs side by side, numbered as the plan numbers them, from
///   the list's `list_item_off`), the end of its bounds, one per vector of its chunk
///   ([`item_bounds`]): `bound_off[item + 1]`, with `bound_off[0] = 0`.
///
/// `summary` gets the units, the work items and the bounds ([`TILE_SUMMARY_WORDS`]).
/// `units` must hold every unit (the host sizes it by [`units_at_most`]).
#[kernel]
pub fn tile_work(index: Index, plan: TileWorkIn, mut out: TileWorkOut) {
    let lists = (plan.totals[Total::ProbedLists as usize] as usize).min(plan.probed.len());
    let scratch = shared_array!(u32; SCRATCH_WORDS);
    let scratch64 = shared_array!(u64; SCRATCH_WORDS);
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let (mut unit_base, mut bound_base) = (0u32, 0u64);
    // Tiles of one list per thread; the sums carry from tile to tile.
    let mut first = 0;
    while first < lists {
        let j = first + tid;
        let shape = match j < lists {
            true => ListWork::of(&index, &plan, plan.probed[j] as usize),
            false => ListWork::NONE,
        };
        let (units_before, units) = exclusive_sum(shape.units(), scratch);
        let (bounds_before, bounds) = exclusive_sum(shape.bounds(), scratch64);
        if j < lists {
            shape.write(
                &mut out,
                unit_base + units_before,
                bound_base + bounds_before,
            );
        }
        unit_base += units;
        bound_base += bounds;
        first += threads;
    }
    if tid == 0 {
        out.bound_off[0] = 0;
        out.summary[0] = unit_base as u64;
        out.summary[1] = plan.totals[Total::WorkItems as usize] as u64;
        out.summary[2] = bound_base;
    }
}

/// The bounds a work item of `rows` vectors keeps: one per vector, rounded up to a multiple
/// of 4 so that every item's bounds start a multiple of 16 bytes from the first item's
/// ([`crate::tile_bounds`] writes them in pairs, [`crate::bounded_scan`] reads them in
/// quads).
#[inline(always)]
pub fn item_bounds(rows: usize) -> u64 {
    rows.next_multiple_of(4) as u64
}

/// Most units [`tile_work`] lists for `pairs` (query, probe) pairs over lists of `unit_rows`
/// unit row-ranges each (`unit_rows[l]`: [`ListWork::unit_rows`] of list `l`): each list's
/// row-ranges times its pairs' tiles, `ceil(pairs_l / TILE_QUERIES) <= pairs_l /
/// TILE_QUERIES + 1`, summed and bounded over every split of `pairs` among the lists.
pub fn units_at_most(unit_rows: &[u32], pairs: usize) -> usize {
    let most = unit_rows.iter().copied().max().unwrap_or(0) as usize;
    let all: usize = unit_rows.iter().map(|&u| u as usize).sum();
    most * pairs.div_ceil(TILE_QUERIES) + all
}

/// One probed list's share of the tiled scan's work.
#[derive(Clone, Copy)]
pub struct ListWork {
    list: usize,
    /// Vectors in the list.
    len: usize,
    /// Pairs probing it.
    pairs: usize,
    /// Its first work item.
    first_item: usize,
    /// Vectors per chunk.
    chunk: usize,
}

impl ListWork {
    const NONE: ListWork = ListWork {
        list: 0,
        len: 0,
        pairs: 0,
        first_item: 0,
        chunk: 1,
    };

    #[inline(always)]
    fn of(index: &Index, plan: &TileWorkIn, l: usize) -> ListWork {
        ListWork {
            list: l,
            len: (index.offsets[l + 1] - index.offsets[l]) as usize,
            pairs: plan.counts[l] as usize,
            first_item: plan.list_item_off[l] as usize,
            chunk: (index.chunk_rows as usize).max(1),
        }
    }

    /// Row ranges of at most [`UNIT_ROWS`] vectors in a list of `len` vectors cut into
    /// chunks of `chunk`: full chunks, then the last.
    #[inline(always)]
    pub fn unit_rows(len: usize, chunk: usize) -> u32 {
        let rows = chunk.min(UNIT_ROWS);
        let (full, last) = (len / chunk, len % chunk);
        (full * chunk.div_ceil(rows) + last.div_ceil(rows)) as u32
    }

    #[inline(always)]
    fn units(&self) -> u32 {
        Self::unit_rows(self.len, self.chunk) * self.pairs.div_ceil(TILE_QUERIES) as u32
    }

    #[inline(always)]
    fn bounds(&self) -> u64 {
        let (full, last) = (self.len / self.chunk, self.len % self.chunk);
        self.pairs as u64 * (full as u64 * item_bounds(self.chunk) + item_bounds(last))
    }

    /// Its units from `units[unit * UNIT_WORDS]` and its items' bound ends, counting from
    /// `bound` bounds before it.
    #[inline(always)]
    fn write(&self, out: &mut TileWorkOut, mut unit: u32, mut bound: u64) {
        let rows = self.chunk.min(UNIT_ROWS);
        let mut item = self.first_item;
        let mut start = 0;
        while start < self.len {
            let in_chunk = (self.len - start).min(self.chunk);
            let c = (start / self.chunk) as u32;
            for off in (0..in_chunk).step_by(rows) {
                for g0 in (0..self.pairs).step_by(TILE_QUERIES) {
                    let at = unit as usize * UNIT_WORDS;
                    out.units[at] = self.list as u32;
                    out.units[at + 1] = c;
                    out.units[at + 2] = off as u32;
                    out.units[at + 3] = g0 as u32;
                    unit += 1;
                }
            }
            for _ in 0..self.pairs {
                bound += item_bounds(in_chunk);
                item += 1;
                out.bound_off[item] = bound;
            }
            start += self.chunk;
        }
    }
}
