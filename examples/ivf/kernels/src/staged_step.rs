//! The staged scan: a block streams a list chunk through shared memory, 32 rows a stage, by
//! bulk copies, and each warp computes the distances from the stage's rows to up to
//! [`STAGED_QUERIES_PER_WARP`] queries of the pairs that probe the chunk: a lane per row,
//! each row loaded once for all of them.

use lookahead_device::pipeline;
use lookahead_device::pipeline::CpAsync;
use lookahead_device::prelude::*;

use crate::params::{Batch, Candidates, Index, Total, WorkPlan};
use crate::quad;
use crate::scan_step::{item, usable};
use crate::topk::WarpBest;
use crate::{K, LANES_PER_ROW, MAX_DIM, RUN_PAIRS, STAGED_QUERIES_PER_WARP as QW, STAGED_THREADS};

/// Runs `$body` once for each `$q` in `0..QW`, `$q` a constant in each copy: indexing the
/// warp's per-query state by a loop variable put all of it in local memory.
macro_rules! each_query {
    ($q:ident => $body:block) => {{
        each_query!(@ $q 0 $body);
        each_query!(@ $q 1 $body);
        each_query!(@ $q 2 $body);
        each_query!(@ $q 3 $body);
        each_query!(@ $q 4 $body);
        each_query!(@ $q 5 $body);
        each_query!(@ $q 6 $body);
        each_query!(@ $q 7 $body);
    }};
    (@ $q:ident $n:literal $body:block) => {
        if $n < QW {
            let $q: usize = $n;
            $body
        }
    };
}

// `each_query!` writes out eight copies.
const _: () = assert!(QW <= 8);

/// [`each_query!`] for the four quads a group of [`crate::scan`]'s lanes holds of a row.
macro_rules! each_quad {
    ($j:ident => $body:block) => {{
        {
            let $j: usize = 0;
            $body
        }
        {
            let $j: usize = 1;
            $body
        }
        {
            let $j: usize = 2;
            $body
        }
        {
            let $j: usize = 3;
            $body
        }
    }};
}

// `each_quad!` covers a row of MAX_DIM floats in 8 groups of 4 quads.
const _: () = assert!(MAX_DIM == 4 * 4 * LANES_PER_ROW);

/// Warps per block.
const WARPS: usize = STAGED_THREADS as usize / 32;
// A run's pairs fit the block's warps.
const _: () = assert!(RUN_PAIRS == WARPS * QW);

/// Rows per stage: one per lane.
const STAGE_ROWS: usize = 32;
/// Floats per stage: 32 rows at a pitch of up to `MAX_DIM + 4`.
const STAGE_FLOATS: usize = STAGE_ROWS * (MAX_DIM + 4);
/// Stages: one in flight while the block computes on the other.
const STAGES: usize = 2;
/// Words per entry of the tile table ([`Entry`]).
const ENTRY_WORDS: usize = 6;
/// A tile entry's list past the plan's end.
const NO_LIST: u32 = u32::MAX;

/// A work item as the tile table holds it.
#[derive(Clone, Copy)]
struct Entry {
    list: u32,
    chunk: u32,
    /// The chunk's rows.
    a: u32,
    b: u32,
    /// The pair's query, and where its candidates for the chunk start.
    query: u32,
    cand: u32,
}

/// The block's shared tables: a tile's items and a run's queries.
#[derive(Clone, Copy)]
struct Tables {
    tile: SharedArray<u32, { RUN_PAIRS * ENTRY_WORDS }>,
    queries: SharedArray<f32, { RUN_PAIRS * MAX_DIM }>,
}

impl Tables {
    #[inline(always)]
    fn entry(&self, k: usize) -> Entry {
        let at = k * ENTRY_WORDS;
        let t = &self.tile;
        Entry {
            list: t.get(at),
            chunk: t.get(at + 1),
            a: t.get(at + 2),
            b: t.get(at + 3),
            query: t.get(at + 4),
            cand: t.get(at + 5),
        }
    }

    /// Loads tile `t` (items `t RUN_PAIRS ..`, thread `k` item `k`), between block barriers.
    #[inline(always)]
    fn load_tile(&self, work: &WorkPlan, index: &Index, batch: &Batch, t: usize, items: usize) {
        let k = thread_idx_x() as usize;
        let it = t * RUN_PAIRS + k;
        let e = if k < RUN_PAIRS && it < items {
            let w = item(work, index, batch, it);
            Entry {
                list: w.l as u32,
                chunk: w.ch as u32,
                a: w.a as u32,
                b: w.b as u32,
                query: w.q as u32,
                cand: ((work.pair_cand_off[w.p] as usize + w.ch) * K) as u32,
            }
        } else {
            Entry {
                list: NO_LIST,
                chunk: 0,
                a: 0,
                b: 0,
                query: 0,
                cand: 0,
            }
        };
        sync_threads(); // the last tile's entries are read
        if k < RUN_PAIRS {
            let (at, t) = (k * ENTRY_WORDS, &self.tile);
            t.set(at, e.list);
            t.set(at + 1, e.chunk);
            t.set(at + 2, e.a);
            t.set(at + 3, e.b);
            t.set(at + 4, e.query);
            t.set(at + 5, e.cand);
        }
        sync_threads();
    }

    /// Loads the queries of entries `first..first + pairs`, between block barriers.
    #[inline(always)]
    fn load_queries(&self, batch: &Batch, first: usize, pairs: usize, dim: usize) {
        sync_threads(); // every warp is done with the last run's queries
        let mut i = thread_idx_x() as usize;
        while i < pairs * dim {
            let (p, d) = (i / dim, i % dim);
            let q = self.entry(first + p).query as usize;
            self.queries.set(p * dim + d, batch.queries[q * dim + d]);
            i += STAGED_THREADS as usize;
        }
        sync_threads();
    }
}

/// A warp's distances for one row (its lane's) of a stage, to each of its queries, summed
/// in the order [`crate::scan`]'s lanes and shuffles sum them, so that both give the same
/// floats: for each group `g` of that scan's 8 lanes per row, quads `g, g + 8, g + 16,
/// g + 24` of the row (each quad's terms fused in order, `distance::lane_part`), their
/// sums added pairwise; then the 8 groups added as the shuffles add them,
/// `((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7))`.
#[inline(always)]
fn row_distances(row: *const f32, queries: *const f32, dim: usize, live: usize) -> [f32; QW] {
    let mut total = [0.0f32; QW];
    let mut low = [0.0f32; QW]; // groups 0..4 of the tree, then 4..8
    let mut pair = [0.0f32; QW]; // the current pair of groups
    for g in 0..LANES_PER_ROW {
        let mut quads = [[0.0f32; 4]; QW];
        each_quad!(j => {
            let d = 4 * g + 4 * LANES_PER_ROW * j;
            if d < dim {
                // SAFETY: d + 4 <= dim (multiples of 4): the quad lies in the row, which
                // starts 16-byte aligned (pitch and stage are multiples of 16 bytes).
                let x = unsafe { quad::load_ptr(row.add(d)) };
                each_query!(q => {
                    if q < live {
                        // SAFETY: query q's quad at d, as above (rows of `dim` floats
                        // from a 16-byte-aligned array).
                        let v = unsafe { quad::load_ptr(queries.add(q * dim + d)) };
                        let t = |u: usize| v[u] - x[u];
                        let mut s = t(0) * t(0);
                        s = GpuFloat::mul_add(t(1), t(1), s);
                        s = GpuFloat::mul_add(t(2), t(2), s);
                        quads[q][j] = GpuFloat::mul_add(t(3), t(3), s);
                    }
                });
            }
        });
        each_query!(q => {
            let p = (quads[q][0] + quads[q][1]) + (quads[q][2] + quads[q][3]);
            match g % 4 {
                0 | 2 => pair[q] = p,
                1 => low[q] = pair[q] + p,
                _ => {
                    let half = low[q] + (pair[q] + p);
                    if g == 3 {
                        total[q] = half;
                    } else {
                        total[q] += half;
                    }
                }
            }
        });
    }
    total
}

/// Scans the work items [`crate::plan`] or [`crate::plan_pairs`] wrote
/// ([`Total::WorkItems`] of them), with the same results as [`crate::scan`] on resident
/// lists (no requests, no hints).
///
/// - Block `b` takes tiles of [`RUN_PAIRS`] items: `b`, `b + grid`, ... A run is a tile's
///   consecutive items on the same list chunk (pairs of different queries, side by side in
///   [`crate::plan`]'s order); its queries go to shared memory.
/// - The chunk streams through a pipeline of two stages of 32 rows (a bulk copy per row on
///   sm_90, `cp.async` before), at a pitch of `dim + 4` floats so that the lanes, each
///   reading its own row, hit different banks.
/// - Warp `w` computes the distances from every row of a stage (lane `r`: row `r`) to the
///   run's queries `QW w .. QW w + QW` (broadcast reads from shared memory), and offers each
///   query's 32 to that query's [`WarpBest`].
/// - Needs `dim` a multiple of 4 and 16-byte aligned vectors (the host then uses
///   [`crate::scan`]); otherwise it writes nothing, which the host finds poisoned.
/// - Keeps rows, not ids, while it scans, and looks up the ids of each pair's `K` nearest at
///   the end: the same candidates as [`crate::scan`] where ids ascend within each list (as
///   `IvfLayout::from_assignment` writes them); otherwise candidates that tie at the `K`-th
///   distance may be other rows of the same distance.
///
/// Why: [`crate::scan`] spends most of its instructions per distance on shuffles and its
/// warps wait on memory every 4 rows; here a lane sums a whole row with no shuffle, each
/// row load serves [`STAGED_QUERIES_PER_WARP`] queries, and the copy engine fetches the next
/// stage meanwhile.
#[kernel(launch_bounds(threads = STAGED_THREADS, blocks_per_sm = 4))]
pub fn staged_scan(index: Index, batch: Batch, work: WorkPlan, mut out: Candidates) {
    let dim = index.dim as usize;
    if !usable(&index) || dim % 4 != 0 || !quad::aligned(&index.vectors[..]) {
        return; // grid-uniform
    }
    let t = Tables {
        tile: shared_array!(u32; RUN_PAIRS * ENTRY_WORDS),
        queries: shared_array!(f32; RUN_PAIRS * MAX_DIM),
    };
    let mut pipe = pipeline!(f32; STAGE_FLOATS, stages = STAGES, copy = CpAsync);
    let items = (work.totals[Total::WorkItems as usize] as usize).min(work.item_pair.len());
    let mut tile = block_idx_x() as usize;
    while tile * RUN_PAIRS < items {
        t.load_tile(&work, &index, &batch, tile, items);
        let mut first = 0;
        while first < RUN_PAIRS && t.entry(first).list != NO_LIST {
            let e = t.entry(first);
            let mut end = first + 1;
            while end < RUN_PAIRS && t.entry(end).list == e.list && t.entry(end).chunk == e.chunk {
                end += 1;
            }
            t.load_queries(&batch, first, end - first, dim);
            scan_run(&mut pipe, &t, &index, first, end, dim, &mut out);
            first = end;
        }
        tile += grid_dim_x() as usize;
    }
}

/// One run (entries `first..end` of the tile, one chunk): its stages through the pipeline,
/// every row's distances offered, each pair's `K` nearest written.
#[inline(always)]
fn scan_run(
    pipe: &mut pipeline::Pipeline<f32, STAGE_FLOATS, STAGES, CpAsync>,
    t: &Tables,
    index: &Index,
    first: usize,
    end: usize,
    dim: usize,
    out: &mut Candidates,
) {
    let e = t.entry(first);
    let (a, b) = (e.a as usize, e.b as usize);
    let stages = (b - a).div_ceil(STAGE_ROWS);
    let vectors = &index.vectors[..];
    let fill = |s: usize, c: &mut pipeline::Copier<'_, f32, STAGE_FLOATS, CpAsync>| {
        let r0 = a + s * STAGE_ROWS;
        let rows = (b - r0).min(STAGE_ROWS);
        c.rows_at_pitch(0, dim, dim + 4, rows, vectors, |r| (r0 + r) * dim);
    };
    pipe.issue(|c| fill(0, c));
    let (warp, lane) = (warp_id() as usize, lane_id() as usize);
    let mine = first + warp * QW;
    let live = end.saturating_sub(mine).min(QW);
    let mut best = [WarpBest::new(); QW];
    for s in 0..stages {
        let ready = pipe.wait();
        if s + 1 < stages {
            ready.refill(|c| fill(s + 1, c));
        }
        let row = a + s * STAGE_ROWS + lane;
        if live > 0 {
            // Warp-uniform: `live` is the warp's.
            let d = if row < b {
                let data = ready.data();
                // SAFETY (of the pointer arithmetic): lane < 32 rows at a pitch of dim + 4
                // stay inside the stage (STAGE_FLOATS); the queries' offset stays inside
                // RUN_PAIRS * MAX_DIM floats (mine - first < RUN_PAIRS, live <= QW).
                let (row_at, queries) = unsafe {
                    (
                        data.as_ptr().add(lane * (dim + 4)),
                        t.queries.as_ptr().add((mine - first) * dim) as *const f32,
                    )
                };
                row_distances(row_at, queries, dim, live)
            } else {
                [f32::INFINITY; QW]
            };
            let id = if row < b { row as u32 } else { u32::MAX };
            each_query!(q => {
                if q < live {
                    best[q].offer((d[q], id));
                }
            });
        }
    }
    each_query!(q => {
        if q < live && lane < K {
            let at = t.entry(mine + q).cand as usize + lane;
            let (d, row) = best[q].entry();
            out.dist[at] = d;
            out.ids[at] = if row == u32::MAX { u32::MAX } else { index.ids[row as usize] };
        }
    });
}
