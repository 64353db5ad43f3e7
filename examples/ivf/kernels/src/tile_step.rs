//! The tiled first pass of a large batch's scan: for every (query, vector) pair the batch
//! scans, a lower bound on the distance [`crate::scan`] would compute, from
//! `|q|^2 + |x|^2 - 2 q.x` computed as a GEMM computes a product. [`crate::bounded_scan`]
//! then computes exact distances only where a bound can still beat a query's `K`-th.
//!
//! Why: in a large batch dozens of queries probe each list, and the warp scan reads and
//! subtracts a list's vectors once per query. Here a block stages a chunk's vectors in
//! shared memory once for up to [`TILE_QUERIES`] of its queries, and each warp multiplies
//! its 32 queries by 32 vectors on the tensor cores in TF32 (`mma.sync`, eight 16 x 8
//! tiles), whose rounding the bounds allow for ([`bound_slack`]).

use lookahead_device::mma::{m16n8k8_tf32, to_tf32};
use lookahead_device::pipeline::cp_async;
use lookahead_device::prelude::*;

use crate::params::{BoundItems, Index, TilePlan};
use crate::quad::{self, Quad};
use crate::MAX_DIM;

/// Queries of one list that a block's tile covers (the rest of the list's queries take
/// further passes over the chunk).
pub const TILE_QUERIES: usize = 32;
/// Vectors per row tile of a block.
pub const TILE_ROWS: usize = 128;
/// Most vectors of one unit of [`tile_bounds`]'s work: two row tiles (units cut a work
/// item's chunk into pieces of this many, so that hot lists spread over many blocks).
pub const UNIT_ROWS: usize = 2 * TILE_ROWS;
/// Words per unit of [`tile_bounds`]'s work ([`TilePlan::units`]).
pub const UNIT_WORDS: usize = 4;
/// Threads per block of [`tile_bounds`].
pub const TILE_THREADS: u32 = 128;

/// Quads of a k-tile: 16 dimensions of each vector per pipeline stage.
const K_QUADS: usize = 4;
/// Quads per staged vector: a k-tile, unpadded; [`staged_quad`] places its quads.
const ROW_PITCH: usize = K_QUADS;
/// Quads per staged query: all of it and one of padding (the same reason).
const QUERY_PITCH: usize = MAX_DIM / 4 + 1;
/// Stages in flight: three stages of 8 KiB and the queries' 16.5 KiB stay within the
/// 48 KiB of static shared memory (four blocks fit an SM).
const STAGES: usize = 3;
/// Quads per stage.
const STAGE_QUADS: usize = TILE_ROWS * ROW_PITCH;
const THREADS: usize = TILE_THREADS as usize;
/// Quads each thread copies per stage.
const COPIES: usize = TILE_ROWS * K_QUADS / THREADS;
/// Where quad `f` of a stage's row `r` sits in the stage: the row's quads in place, XOR
/// `(r / 2) % 4`. Each 8 threads of a copy instruction fill two whole rows (128 contiguous
/// bytes: one shared-memory wavefront), and the 8 rows `8n + g` a fragment load reads at
/// one column fall in 8 different groups of 4 banks. (Rows padded by a quad did the second
/// but not the first: Nsight Compute counted 15 wavefronts per copy instruction, 4 ideal.)
#[inline(always)]
fn staged_quad(r: usize, f: usize) -> usize {
    r * ROW_PITCH + (f ^ ((r >> 1) & 3))
}

/// 16 x 8 tensor-core tiles of a warp's 32 queries x 32 vectors.
const M_TILES: usize = TILE_QUERIES / 16;
const N_TILES: usize = 32 / 8;

// Each warp covers all the queries and 32 vectors; a stage is two k-steps of 8 dimensions.
const _: () = assert!(TILE_ROWS == 32 * (THREADS / 32) && TILE_QUERIES % 16 == 0);
const _: () = assert!(TILE_ROWS * K_QUADS == COPIES * THREADS && K_QUADS % 2 == 0);

/// A warp's dot products: the lane's fragment of each 16 x 8 accumulator tile.
type Acc = [[[f32; 4]; N_TILES]; M_TILES];

/// How far below the tiled distance the scan's own can be, per unit of `|q|^2 + |x|^2`.
/// TF32 rounds each input by at most 2^-11 of itself, so a product by at most 2^-10 of
/// `|q_i x_i|` and `2 q.x` by 2^-10 of `|q|^2 + |x|^2` (`2 |q.x| <= |q|^2 + |x|^2`): twice
/// that, 2^-9. The FP32 sums of both ways of computing a distance over `dim` terms round by
/// at most `(dim + 3)` units in the last place of the same magnitudes, `16 (dim + 16)`
/// units: four times that worst case.
#[inline(always)]
pub fn bound_slack(dim: usize) -> f32 {
    (dim as f32 + 16.0) * (8.0 / 8_388_608.0) + 1.0 / 512.0
}

/// The unit a block works on: vectors `a..b` of one chunk of a list, against the tile of
/// up to [`TILE_QUERIES`] of the list's pairs from `g0`.
#[derive(Clone, Copy)]
struct Unit {
    /// The chunk's first vector (row `start + r` is row `r` of the chunk's bounds).
    start: usize,
    a: usize,
    b: usize,
    /// The chunk's first work item (the one of the list's first pair).
    item0: usize,
    /// The tile's first pair among the list's.
    g0: usize,
    dim: usize,
    /// The tile's work items that are this launch's to write.
    lo: usize,
    hi: usize,
}

/// Writes, for each work item of `range`, a lower bound on the squared distance from the
/// item's query to each vector of its chunk: item `it`'s vector `start + r` (`start` the
/// chunk's first) at `bounds[offsets[it] - offsets[first] + r]`. Every bound is at most
/// what [`crate::scan`] computes for the pair (see [`bound_slack`]).
///
/// - Block `x` takes unit `x` of `plan.units` ([`UNIT_WORDS`] words each: list, chunk,
///   first vector of the unit within the chunk, first pair of the tile within the list's
///   pairs): the unit's at most [`UNIT_ROWS`] vectors against [`TILE_QUERIES`] of the list's
///   pairs. The list's work items are its pairs side by side, as [`crate::plan`] writes
///   them; a unit's items outside `range` are left to another launch.
/// - Needs `dim` a multiple of 4 (at most [`crate::MAX_DIM`]), 16-byte aligned vectors and
///   queries, and `plan.norms[v] = |x_v|^2` for every vector; otherwise it writes nothing
///   (the host checks before choosing this scan).
/// - sm_80 or newer (`cp.async`).
#[kernel(launch_bounds(threads = TILE_THREADS, blocks_per_sm = 4))]
pub fn tile_bounds(
    index: Index,
    queries: &[f32],
    nprobe: u32,
    plan: TilePlan,
    range: BoundItems,
    bounds: &mut [f32],
) {
    let dim = index.dim as usize;
    if dim == 0 || dim % 4 != 0 || dim > MAX_DIM || !quad::aligned(queries) {
        return;
    }
    if !quad::aligned(&index.vectors[..]) {
        return;
    }
    let Some(u) = unit_of(&index, &plan, &range) else {
        return;
    };
    let qs = shared_array!(Quad; TILE_QUERIES * QUERY_PITCH);
    let qn = shared_array!(f32; TILE_QUERIES);
    let stages = shared_array!(Quad; STAGES * STAGE_QUADS);
    stage_queries(queries, nprobe, &plan, u, qs, qn);
    tile_pass(&index, &plan, &range, u, (qs, qn, stages), bounds);
}

/// The end of the range's work items.
#[inline(always)]
fn hi_of(range: &BoundItems) -> usize {
    range.first as usize + range.count as usize
}

/// The block's unit, or `None` for one with no work item in `range` (or malformed).
#[inline(always)]
fn unit_of(index: &Index, plan: &TilePlan, range: &BoundItems) -> Option<Unit> {
    let x = block_idx_x() as usize * UNIT_WORDS;
    if x + UNIT_WORDS > plan.units.len() {
        return None;
    }
    let (l, ch) = (plan.units[x] as usize, plan.units[x + 1] as usize);
    let (off, g0) = (plan.units[x + 2] as usize, plan.units[x + 3] as usize);
    if l + 1 >= index.offsets.len() || l >= plan.counts.len() {
        return None;
    }
    let rows = (index.chunk_rows as usize).max(1);
    let end = index.offsets[l + 1] as usize;
    if end * (index.dim as usize) > index.vectors.len() {
        return None; // the copies read vectors `..end` without a bounds check
    }
    let start = index.offsets[l] as usize + ch * rows;
    let a = start + off;
    let count = plan.counts[l] as usize;
    let item0 = plan.list_item_off[l] as usize + ch * count;
    let lo = (item0 + g0).max(range.first as usize);
    if hi_of(range) > range.offsets.len().saturating_sub(1) {
        return None; // offsets too short for the range: malformed
    }
    let hi = (item0 + (g0 + TILE_QUERIES).min(count)).min(hi_of(range));
    if a >= end || off >= rows || lo >= hi {
        return None;
    }
    Some(Unit {
        start,
        a,
        b: end.min(start + rows).min(a + UNIT_ROWS),
        item0,
        g0,
        dim: index.dim as usize,
        lo,
        hi,
    })
}

/// The queries of the unit's tile into `qs` in TF32 (zeros outside `lo..hi` and past
/// `dim`) and their squared norms into `qn`.
#[inline(always)]
fn stage_queries(
    queries: &[f32],
    nprobe: u32,
    plan: &TilePlan,
    u: Unit,
    qs: SharedArray<Quad, { TILE_QUERIES * QUERY_PITCH }>,
    qn: SharedArray<f32, TILE_QUERIES>,
) {
    let t = thread_idx_x() as usize;
    let (dim, first, lo, hi) = (u.dim, u.item0 + u.g0, u.lo, u.hi);
    let quads = MAX_DIM / 4;
    let mut i = t;
    while i < TILE_QUERIES * quads {
        let (j, k) = (i / quads, i % quads);
        let it = first + j;
        let mut v = Quad([0.0; 4]);
        if it >= lo && it < hi && 4 * k < dim {
            let q = plan.item_pair[it] as usize / (nprobe as usize).max(1);
            if (q + 1) * dim <= queries.len() {
                // SAFETY: in bounds (checked), `dim` a multiple of 4 and `queries` aligned.
                v = Quad(unsafe { quad::load(queries, q * dim + 4 * k) });
            }
        }
        qs.set(j * QUERY_PITCH + k, v);
        i += THREADS;
    }
    sync_threads();
    if t < TILE_QUERIES {
        let mut s = 0.0f32;
        for k in 0..quads {
            let v = qs.get(t * QUERY_PITCH + k).0;
            s = v[0].mul_add(v[0], s);
            s = v[1].mul_add(v[1], s);
            s = v[2].mul_add(v[2], s);
            s = v[3].mul_add(v[3], s);
        }
        qn.set(t, s);
    }
    sync_threads();
    // The norms are of the queries as given; the products take them in TF32, rounded here
    // once instead of at every load of a fragment.
    let mut i = t;
    while i < TILE_QUERIES * quads {
        let at = (i / quads) * QUERY_PITCH + i % quads;
        qs.set(at, Quad(qs.get(at).0.map(|x| f32::from_bits(to_tf32(x)))));
        i += THREADS;
    }
    sync_threads();
}

type Staged = (
    SharedArray<Quad, { TILE_QUERIES * QUERY_PITCH }>,
    SharedArray<f32, TILE_QUERIES>,
    SharedArray<Quad, { STAGES * STAGE_QUADS }>,
);

/// A stage of the pipeline: k-tile `kt` of the row tile from the unit's vector `r0` (counted
/// from `u.a`), in stage buffer `buf`. Counted in `u32` and advanced by additions: a unit's
/// rows are at most [`UNIT_ROWS`], and 64-bit indices with a `% STAGES` per stage made
/// integer arithmetic most of the kernel's instructions.
#[derive(Clone, Copy)]
struct Stage {
    r0: u32,
    kt: u32,
    buf: u32,
}

impl Stage {
    /// The stage after this one, over `k_tiles` k-tiles per row tile.
    #[inline(always)]
    fn next(self, k_tiles: u32) -> Stage {
        let last_k = self.kt + 1 == k_tiles;
        Stage {
            r0: if last_k {
                self.r0 + TILE_ROWS as u32
            } else {
                self.r0
            },
            kt: if last_k { 0 } else { self.kt + 1 },
            buf: if self.buf + 1 == STAGES as u32 {
                0
            } else {
                self.buf + 1
            },
        }
    }
}

/// The tile's queries against the unit's row tiles: the stages of each row tile's k-tiles
/// in turn, copied [`STAGES`]` - 1` stages ahead.
#[inline(always)]
fn tile_pass(
    index: &Index,
    plan: &TilePlan,
    range: &BoundItems,
    u: Unit,
    (qs, qn, stages): Staged,
    bounds: &mut [f32],
) {
    let k_tiles = (u.dim as u32 / 4).div_ceil(K_QUADS as u32);
    let total = ((u.b - u.a) as u32).div_ceil(TILE_ROWS as u32) * k_tiles;
    let copies = UnitCopies::new(index, u);
    let first = Stage {
        r0: 0,
        kt: 0,
        buf: 0,
    };
    let (mut copy, mut read) = (first, first);
    for s in 0..STAGES as u32 - 1 {
        if s < total {
            copies.stage(copy, stages);
            copy = copy.next(k_tiles);
        }
        cp_async::commit_group();
    }
    let mut acc: Acc = [[[0.0; 4]; N_TILES]; M_TILES];
    for s in 0..total {
        cp_async::wait_group::<{ STAGES as u32 - 2 }>();
        sync_threads(); // stage `s` complete for every thread; stage `s - 1` read by all
        if s + STAGES as u32 - 1 < total {
            copies.stage(copy, stages);
            copy = copy.next(k_tiles);
        }
        cp_async::commit_group();
        dot_stage(&mut acc, qs, stages, read);
        if read.kt + 1 == k_tiles {
            write_bounds(plan, range, u, read.r0, &acc, qn, bounds);
            acc = [[[0.0; 4]; N_TILES]; M_TILES];
        }
        read = read.next(k_tiles);
    }
    cp_async::wait_all();
}

/// What a thread copies of each stage: [`COPIES`] quads, of rows `row + 32 c` (`c <
/// COPIES`) of the row tile at quad `quad` of the k-tile.
struct UnitCopies {
    /// The unit's first vector.
    base: *const f32,
    /// The unit's vectors.
    rows: u32,
    dim: u32,
    row: u32,
    quad: u32,
}

// A thread's copies are one quad of rows 32 apart.
const _: () = assert!(THREADS % K_QUADS == 0 && THREADS / K_QUADS == 32);

impl UnitCopies {
    #[inline(always)]
    fn new(index: &Index, u: Unit) -> Self {
        let t = thread_idx_x();
        UnitCopies {
            base: index.vectors.as_ptr().wrapping_add(u.a * u.dim),
            rows: (u.b - u.a) as u32,
            dim: u.dim as u32,
            row: t / K_QUADS as u32,
            quad: t % K_QUADS as u32,
        }
    }

    /// This thread's quads of stage `at` (rows past the unit and dimensions past `dim`
    /// filled with zeros).
    #[inline(always)]
    fn stage(&self, at: Stage, stages: SharedArray<Quad, { STAGES * STAGE_QUADS }>) {
        let k = 4 * (at.kt * K_QUADS as u32 + self.quad);
        let buf = stages.as_ptr().wrapping_add(at.buf as usize * STAGE_QUADS);
        for c in 0..COPIES as u32 {
            let r = self.row + 32 * c;
            let row = at.r0 + r;
            let dst = buf.wrapping_add(staged_quad(r as usize, self.quad as usize)) as *mut u8;
            let inside = row < self.rows && k < self.dim;
            let src = if inside { row * self.dim + k } else { 0 };
            // SAFETY: `dst` is this thread's own quad of a stage no thread reads until the
            // stage's wait (`tile_pass`); `src` lies in the unit's vectors (`row < rows`
            // and `k + 4 <= dim`, or the unit's first vector, read for 0 bytes), which
            // `unit_of` checked lie in `index.vectors`, 16-byte aligned (`dim` a multiple
            // of 4 and the vectors aligned, checked in `tile_bounds`).
            unsafe {
                cp_async::copy_cg_zfill(
                    dst,
                    self.base.wrapping_add(src as usize) as *const u8,
                    if inside { 16 } else { 0 },
                )
            };
        }
    }
}

/// The lane's place in the tensor-core fragments: `g = lane / 4`, `t = lane % 4`, and the
/// warp's first vector of the block tile.
#[inline(always)]
fn fragment_slots() -> (usize, usize, usize) {
    let t = thread_idx_x() as usize;
    let lane = t % 32;
    (lane / 4, lane % 4, (t / 32) * 32)
}

/// The k-tile in stage buffer `buf` into the warp's dot products: two k-steps of 8
/// dimensions, each 2 x 4 tensor-core tiles.
#[inline(always)]
fn dot_stage(
    acc: &mut Acc,
    qs: SharedArray<Quad, { TILE_QUERIES * QUERY_PITCH }>,
    stages: SharedArray<Quad, { STAGES * STAGE_QUADS }>,
    at: Stage,
) {
    let (buf, kt) = (at.buf as usize, at.kt as usize);
    for step in 0..K_QUADS / 2 {
        dot_k8(
            acc,
            qs,
            stages,
            buf,
            (kt * K_QUADS + 2 * step) * 4,
            8 * step,
        );
    }
}

/// Dimensions `k..k + 8` (`k_in` of them into the staged k-tile) into the warp's dot
/// products: the fragments read from shared memory, the vectors' rounded to TF32 (the
/// queries are already).
#[inline(always)]
fn dot_k8(
    acc: &mut Acc,
    qs: SharedArray<Quad, { TILE_QUERIES * QUERY_PITCH }>,
    stages: SharedArray<Quad, { STAGES * STAGE_QUADS }>,
    buf: usize,
    k: usize,
    k_in: usize,
) {
    let (g, t, w0) = fragment_slots();
    let (q, x) = (qs.as_ptr() as *const f32, stages.as_ptr() as *const f32);
    // SAFETY: (below) q: rows below TILE_QUERIES, columns k + t + 4 < MAX_DIM <= 4 *
    // QUERY_PITCH; x: vectors w0 + 8n + g < TILE_ROWS, their quads (k_in + col) / 4 <
    // K_QUADS, in buffer `buf < STAGES`: all inside the shared arrays.
    let query = |m: usize, col: usize| unsafe { (*q.add(m * QUERY_PITCH * 4 + k + col)).to_bits() };
    let vector = |n: usize, col: usize| unsafe {
        let quad = buf * STAGE_QUADS + staged_quad(w0 + n, (k_in + col) / 4);
        *x.add(quad * 4 + col % 4)
    };
    let b: [[u32; 2]; N_TILES] = core::array::from_fn(|n| {
        [
            to_tf32(vector(8 * n + g, t)),
            to_tf32(vector(8 * n + g, t + 4)),
        ]
    });
    for (mt, tiles) in acc.iter_mut().enumerate() {
        let m = 16 * mt + g;
        let a = [
            query(m, t),
            query(m + 8, t),
            query(m, t + 4),
            query(m + 8, t + 4),
        ];
        for (c, bn) in tiles.iter_mut().zip(b.iter()) {
            *c = m16n8k8_tf32(a, *bn, *c);
        }
    }
}

/// The lane's 32 bounds of the row tile from the unit's vector `r0` (queries `g + 8h` for
/// `h < 4`, vectors `w0 + 8n + 2t + {0, 1}` for `n < 4`), for the items of `u.lo..u.hi`, a
/// query at a time by constant index (a loop over `acc` was left rolled, which put `acc` in
/// local memory).
#[inline(always)]
fn write_bounds(
    plan: &TilePlan,
    range: &BoundItems,
    u: Unit,
    r0: u32,
    acc: &Acc,
    qn: SharedArray<f32, TILE_QUERIES>,
    bounds: &mut [f32],
) {
    const _: () = assert!(
        M_TILES == 2 && N_TILES == 4,
        "write_bounds writes out 4 queries"
    );
    // The lane's 8 vectors' norms, loaded once for its 4 queries (each bound needs one; a
    // norm missing from a short `norms` makes its bounds NaN, which the bounded scan never
    // skips on).
    let (_, t, w0) = fragment_slots();
    let row0 = r0 + (w0 + 2 * t) as u32;
    let norm = |row: u32| match u.a + (row as usize) < plan.norms.len() {
        true => plan.norms[u.a + row as usize],
        false => f32::NAN,
    };
    let nx = [0, 1, 8, 9, 16, 17, 24, 25].map(|d| norm(row0 + d));
    let mut at = Bounds {
        range,
        u,
        row0,
        first: range.offsets[range.first as usize],
        nx,
        qn,
        bounds,
    };
    let row = |mt: usize, h: usize| -> [f32; 8] {
        let tiles = &acc[mt];
        [0, 1, 2, 3]
            .map(|n| [tiles[n][2 * h], tiles[n][2 * h + 1]])
            .concat_pairs()
    };
    at.query(0, row(0, 0));
    at.query(8, row(0, 1));
    at.query(16, row(1, 0));
    at.query(24, row(1, 1));
}

/// `[[a, b]; 4]` as `[a, b, a, b, ...]`.
trait ConcatPairs {
    fn concat_pairs(self) -> [f32; 8];
}

impl ConcatPairs for [[f32; 2]; 4] {
    #[inline(always)]
    fn concat_pairs(self) -> [f32; 8] {
        let [p0, p1, p2, p3] = self;
        [p0[0], p0[1], p1[0], p1[1], p2[0], p2[1], p3[0], p3[1]]
    }
}

/// Where [`write_bounds`] writes a row tile's bounds.
struct Bounds<'a> {
    range: &'a BoundItems,
    u: Unit,
    /// The lane's first vector, counted from the unit's (its others: `row0 + {1, 8, 9,
    /// 16, 17, 24, 25}`).
    row0: u32,
    /// The launch's first bound, counted over the batch.
    first: u64,
    /// The norms of the lane's 8 vectors.
    nx: [f32; 8],
    qn: SharedArray<f32, TILE_QUERIES>,
    bounds: &'a mut [f32],
}

impl Bounds<'_> {
    /// The bounds of the lane's query `g + dq`, from its dot products with vectors
    /// `w0 + 8n + 2t + j` at `dots[2n + j]` (written out by constant index, as above).
    #[inline(always)]
    fn query(&mut self, dq: usize, dots: [f32; 8]) {
        let (g, _, _) = fragment_slots();
        let (u, q) = (self.u, g + dq);
        let it = u.item0 + u.g0 + q;
        if it < u.lo || it >= u.hi {
            return;
        }
        let nq = self.qn.get(q);
        // The item's bounds of the unit's vectors, checked once for the 8 stores.
        let out = (self.range.offsets[it] - self.first) as usize;
        let unit = &mut self.bounds[out + (u.a - u.start)..out + (u.b - u.start)];
        // The lane's rows all inside the unit (all but a list's last row tile) take a store
        // per two rows, without a check each: scalar stores, each checked, were a branch
        // around every store, and 4 bytes a lane every other 4 bytes, so that each store
        // instruction wrote 8 half-used sectors. (Items' bounds start 16 bytes apart,
        // [`crate::item_bounds`], and `row0` is even.)
        let values = (nq, bound_slack(u.dim), &self.nx, dots);
        let paired = unit.as_ptr() as usize % core::mem::align_of::<Pair>() == 0;
        if paired && (self.row0 + 26) as usize <= unit.len() {
            store_pairs(unit, self.row0, values);
        } else {
            store_each(unit, self.row0, values);
        }
    }
}

/// Two bounds of adjacent vectors: one 8-byte store.
#[repr(C, align(8))]
struct Pair([f32; 2]);

/// One query's bounds (its norm, the slack, the lane's vectors' norms and dot products).
type RowValues<'a> = (f32, f32, &'a [f32; 8], [f32; 8]);

/// The bound of a vector of norm `nx` against a query of norm `nq`.
#[inline(always)]
fn bound(nq: f32, slack: f32, nx: f32, dot: f32) -> f32 {
    let n = nq + nx;
    (n - 2.0 * dot) - slack * n
}

/// One query's bounds against the lane's 8 vectors, rows `row + {0, 1, 8, 9, 16, 17, 24,
/// 25}` of `unit`, in 4 stores of a [`Pair`]: `row` even, `row + 25 < unit.len()` and
/// `unit` aligned for a `Pair`.
#[inline(always)]
fn store_pairs(unit: &mut [f32], row: u32, (nq, slack, nx, dots): RowValues) {
    debug_assert!(row % 2 == 0 && ((row + 25) as usize) < unit.len());
    let mut store = |j: usize| {
        let pair = Pair([
            bound(nq, slack, nx[2 * j], dots[2 * j]),
            bound(nq, slack, nx[2 * j + 1], dots[2 * j + 1]),
        ]);
        // SAFETY: rows `row + 8j` and the next are inside `unit` (the caller's
        // `row + 25 < unit.len()`), and 8-byte aligned (`unit` is and `row` is even).
        unsafe {
            let at = unit.as_mut_ptr().add(row as usize + 8 * j);
            at.cast::<Pair>().write(pair);
        }
    };
    store(0);
    store(1);
    store(2);
    store(3);
}

/// [`store_pairs`] for any `unit`: each bound checked against its length.
#[inline(always)]
fn store_each(unit: &mut [f32], row: u32, (nq, slack, nx, dots): RowValues) {
    let mut store = |d: u32, j: usize| {
        if let Some(b) = unit.get_mut((row + d) as usize) {
            *b = bound(nq, slack, nx[j], dots[j]);
        }
    };
    store(0, 0);
    store(1, 1);
    store(8, 2);
    store(9, 3);
    store(16, 4);
    store(17, 5);
    store(24, 6);
    store(25, 7);
}
