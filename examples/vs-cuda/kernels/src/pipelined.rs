//! The pipelined kernels: global memory staged into shared memory by asynchronous copies
//! (`lookahead_device::pipeline`), several stages ahead of the block's computation, each in
//! both copy kinds (`cp.async`, `cp.async.bulk`) and at 2, 3 and 4 stages. Entries are
//! `<kernel>_<kind>_s<stages>`; `cuda/pipelined.cu` holds the CUDA C++ twin of each, with
//! the same names and launch shape. All take blocks of [`crate::BLOCK_SIZE`] threads.
//!
//! | kernel | what a block does per stage | stage |
//! | --- | --- | --- |
//! | `pipe_reduce` | sums a tile of [`REDUCE_TILE`] floats of `x` (tiles grid-stride), one atomic per warp at the end | one copy |
//! | `pipe_stencil` | a [`STENCIL_W`] x [`STENCIL_H`] tile of `dst = 4 c - n - s - e - w` over a zero-bordered grid, tiles down a column strip | the tile and its halo: 18 rows of 136 floats |
//! | `pipe_gemm` | one k-tile of 8 of a 128 x 128 block of `C = A B` (A given transposed), 8 x 8 outputs per thread | A's and B's k-tile: 8 rows of 128 floats each |
//! | `pipe_gather` | sums [`GATHER_BAGS`] bags of [`GATHER_BAG`] rows of [`GATHER_DIM`] floats picked by `idx` | the gathered rows |
//!
//! Each loop over a block's tiles is written with `#[prefetch_next(into = shared([T; N]),
//! stages = S, copy = K, of(name = target))]`, which expands it into the pipeline
//! (`lookahead_device::pipeline::Pipeline`): the first `S - 1` tiles issued before the loop,
//! then per tile a wait, the refill with tile `i + S - 1`, and the body reading the staged
//! copy by its name. The targets are a slice (reduction), rows at a pitch (stencil, and the
//! two k-tiles of the GEMM) and gathered rows.

use lookahead_device::kernel;
use lookahead_device::prelude::*;

use crate::BLOCK_SIZE;

const THREADS: usize = BLOCK_SIZE as usize;

/// Floats per tile of the pipelined reduction (8 KiB).
pub const REDUCE_TILE: usize = 2048;

/// Output columns of a stencil tile.
pub const STENCIL_W: usize = 128;
/// Output rows of a stencil tile.
pub const STENCIL_H: usize = 16;
/// Columns of zeros left and right of the stencil's input grid (16 bytes: every row of a
/// tile with its halo starts 16-byte aligned).
pub const STENCIL_PAD: usize = 4;
/// Floats per stencil stage: the tile and its halo.
pub const STENCIL_STAGE: usize = (STENCIL_H + 2) * (STENCIL_W + 2 * STENCIL_PAD);

/// Rows and columns of a GEMM block tile.
pub const GEMM_TILE: usize = 128;
/// The k-tile: rows of A (transposed) and B per stage.
pub const GEMM_K: usize = 8;

/// Floats per gathered row.
pub const GATHER_DIM: usize = 128;
/// Rows summed into one output row.
pub const GATHER_BAG: usize = 8;
/// Bags per stage.
pub const GATHER_BAGS: usize = 2;

/// Four floats, 16-byte aligned: the GEMM's element, loaded and stored with one
/// `ld/st.v4.f32` (CUDA's `float4`).
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
#[repr(C, align(16))]
pub struct F4(pub [f32; 4]);

/// The stencil's grid: `w` x `h` interior points (`w` a multiple of [`STENCIL_W`]); the
/// input has [`STENCIL_PAD`] zero columns left and right and one zero row above and below;
/// each block does `seg_rows` rows of one column strip.
#[derive(Clone, Copy, Debug, DeviceCopy)]
#[repr(C)]
pub struct StencilShape {
    pub w: u32,
    pub h: u32,
    pub seg_rows: u32,
    pub _pad: u32,
}

/// `C (m x n) = A (m x k) B (k x n)`, `A` given transposed (`k x m`, row-major): all
/// multiples of 128 (k of 8).
#[derive(Clone, Copy, Debug, DeviceCopy)]
#[repr(C)]
pub struct GemmDims {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub _pad: u32,
}

/// Every pipelined entry, `<kernel>_<kind>_s<stages>`.
pub const PIPELINED: &[&str] = &[
    "pipe_reduce_cp_async_s2",
    "pipe_reduce_cp_async_s3",
    "pipe_reduce_cp_async_s4",
    "pipe_reduce_bulk_s2",
    "pipe_reduce_bulk_s3",
    "pipe_reduce_bulk_s4",
    "pipe_stencil_cp_async_s2",
    "pipe_stencil_cp_async_s3",
    "pipe_stencil_cp_async_s4",
    "pipe_stencil_bulk_s2",
    "pipe_stencil_bulk_s3",
    "pipe_stencil_bulk_s4",
    "pipe_gemm_cp_async_s2",
    "pipe_gemm_cp_async_s3",
    "pipe_gemm_cp_async_s4",
    "pipe_gemm_bulk_s2",
    "pipe_gemm_bulk_s3",
    "pipe_gemm_bulk_s4",
    "pipe_gather_cp_async_s2",
    "pipe_gather_cp_async_s3",
    "pipe_gather_cp_async_s4",
    "pipe_gather_bulk_s2",
    "pipe_gather_bulk_s3",
    "pipe_gather_bulk_s4",
];

// ---------------------------------------------------------------------------------------
// Streaming reduction: out[0] += sum(x), the block's tiles grid-stride.

/// Tile `i` of `x` (the last one may be short).
#[inline(always)]
fn reduce_tile(x: &[f32], i: usize) -> &[f32] {
    let lo = i * REDUCE_TILE;
    &x[lo..(lo + REDUCE_TILE).min(x.len())]
}

/// Thread `t`'s elements of a staged tile into its four partial sums.
#[inline(always)]
fn reduce_add(acc: &mut [f32; 4], tile: &[f32], t: usize) {
    if tile.len() == REDUCE_TILE {
        for j in 0..REDUCE_TILE / THREADS {
            acc[j % 4] += tile[t + j * THREADS];
        }
    } else {
        for j in 0..REDUCE_TILE / THREADS {
            if let Some(v) = tile.get(t + j * THREADS) {
                acc[j % 4] += *v;
            }
        }
    }
}

/// The warp's partial sums into `out[0]`, one atomic per warp.
#[inline(always)]
fn reduce_finish(acc: [f32; 4], out: &mut [f32]) {
    let total = warp::warp_sum_f32((acc[0] + acc[1]) + (acc[2] + acc[3]));
    if lane_id() == 0 {
        atomic_add(&mut out[0], total);
    }
}

macro_rules! reduce_entry {
    ($name:ident, $copy:tt, $s:tt) => {
        /// The pipelined reduction (module docs).
        #[kernel(min_len(out = 1))]
        pub fn $name(x: &[f32], out: &mut [f32]) {
            let (b, grid) = (block_idx_x() as usize, grid_dim_x() as usize);
            let t = thread_idx_x() as usize % THREADS;
            let mut acc = [0.0f32; 4];
            #[prefetch_next(into = shared([f32; REDUCE_TILE]), stages = $s, copy = $copy, of(tile = reduce_tile(x, i)))]
            for i in (b..x.len().div_ceil(REDUCE_TILE)).step_by(grid) {
                reduce_add(&mut acc, tile, t);
            }
            reduce_finish(acc, out);
        }
    };
}

// ---------------------------------------------------------------------------------------
// 2-D stencil: dst = 4 c - n - s - e - w, tiles with halos down a column strip.

/// Floats per staged stencil row: the tile's width and both pads.
const STENCIL_ROW: usize = STENCIL_W + 2 * STENCIL_PAD;

/// A block's column strip: `(x0, first row, end row, tiles)`.
#[inline(always)]
fn stencil_strip(shape: StencilShape) -> (usize, usize, usize, usize) {
    let (w, h, seg) = (shape.w as usize, shape.h as usize, shape.seg_rows as usize);
    let b = block_idx_x() as usize;
    let strips = w / STENCIL_W;
    let (x0, y_begin) = (b % strips * STENCIL_W, b / strips * seg);
    let y_end = (y_begin + seg).min(h);
    let tiles = y_end.saturating_sub(y_begin).div_ceil(STENCIL_H);
    (x0, y_begin, y_end, tiles)
}

/// The padded input rows a tile starting at interior row `y0` reads: `STENCIL_H + 2`, or
/// fewer at the bottom of the grid.
#[inline(always)]
fn stencil_rows(h: usize, y0: usize) -> usize {
    (STENCIL_H + 2).min(h + 2 - y0)
}

/// Thread `t`'s half column of a staged tile whose first output row is `y0`.
#[inline(always)]
fn stencil_tile(
    d: &[f32],
    dst: &mut [f32],
    w: usize,
    (x0, y0, y_end): (usize, usize, usize),
    t: usize,
) {
    let (cx, half) = (t % STENCIL_W, t / STENCIL_W);
    let at = |r: usize, c: usize| d[r * STENCIL_ROW + c];
    let x = cx + STENCIL_PAD;
    let r0 = half * (STENCIL_H / 2);
    // The staged rows end two after the last output row (a short last tile has fewer).
    let rows = (STENCIL_H / 2).min(y_end.saturating_sub(y0 + r0));
    if rows == 0 {
        return;
    }
    let (mut n, mut c) = (at(r0, x), at(r0 + 1, x));
    for r in r0..r0 + rows {
        let s = at(r + 2, x);
        dst[(y0 + r) * w + x0 + cx] = 4.0 * c - n - s - at(r + 1, x - 1) - at(r + 1, x + 1);
        (n, c) = (c, s);
    }
}

macro_rules! stencil_entry {
    ($name:ident, $copy:tt, $s:tt) => {
        /// The pipelined stencil (module docs).
        #[kernel]
        pub fn $name(src: &[f32], dst: &mut [f32], shape: StencilShape) {
            let (w, h) = (shape.w as usize, shape.h as usize);
            let pitch = w + 2 * STENCIL_PAD;
            let (x0, y_begin, y_end, tiles) = stencil_strip(shape);
            let t = thread_idx_x() as usize % THREADS;
            #[prefetch_next(into = shared([f32; STENCIL_STAGE]), stages = $s, copy = $copy,
                of(tile = src.rows((y_begin + i * STENCIL_H) * pitch + x0, STENCIL_ROW, stencil_rows(h, y_begin + i * STENCIL_H), pitch)))]
            for i in 0..tiles {
                stencil_tile(tile, dst, w, (x0, y_begin + i * STENCIL_H, y_end), t);
            }
        }
    };
}

// ---------------------------------------------------------------------------------------
// Tiled FP32 GEMM: 128 x 128 per block, 8 x 8 per thread, k-tiles of 8 staged.

/// F4s per row of a block tile.
const GEMM_Q: usize = GEMM_TILE / 4;

/// `acc[i][j] += a[i] * b[j]`, with one `fma.rn.f32` each.
#[inline(always)]
fn outer(acc: &mut [[f32; 8]; 8], a: [f32; 8], b: [f32; 8]) {
    for i in 0..8 {
        for j in 0..8 {
            acc[i][j] = a[i].mul_add(b[j], acc[i][j]);
        }
    }
}

/// Row `k` of a staged k-tile into thread `(tx, ty)`'s 8 x 8 outputs: rows
/// `ty * 4 + {0..4, 64..68}` of A's tile, columns `tx * 4 + {0..4, 64..68}` of B's.
#[inline(always)]
fn gemm_row(acc: &mut [[f32; 8]; 8], a: &[F4], b: &[F4], k: usize, (tx, ty): (usize, usize)) {
    let (a0, a1) = (a[k * GEMM_Q + ty].0, a[k * GEMM_Q + ty + 16].0);
    let (b0, b1) = (b[k * GEMM_Q + tx].0, b[k * GEMM_Q + tx + 16].0);
    let av = [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]];
    let bv = [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]];
    outer(acc, av, bv);
}

/// One staged k-tile, its 8 rows written out (LLVM does not unroll a loop of 512 inline
/// `fma`s; the CUDA twin's `#pragma unroll` does), so the shared-memory loads of later rows
/// can be issued ahead of the FMAs of earlier ones.
#[inline(always)]
fn gemm_tile(acc: &mut [[f32; 8]; 8], a: &[F4], b: &[F4], txy: (usize, usize)) {
    const _: () = assert!(GEMM_K == 8, "gemm_tile writes out 8 rows");
    gemm_row(acc, a, b, 0, txy);
    gemm_row(acc, a, b, 1, txy);
    gemm_row(acc, a, b, 2, txy);
    gemm_row(acc, a, b, 3, txy);
    gemm_row(acc, a, b, 4, txy);
    gemm_row(acc, a, b, 5, txy);
    gemm_row(acc, a, b, 6, txy);
    gemm_row(acc, a, b, 7, txy);
}

/// Thread `(tx, ty)`'s outputs into `c` (`n4` F4s per row) for the block at F4 column `bn`
/// and row `bm * 4`.
#[inline(always)]
fn gemm_store(
    acc: &[[f32; 8]; 8],
    c: &mut [F4],
    n4: usize,
    (bm, bn): (usize, usize),
    (tx, ty): (usize, usize),
) {
    for (i, row) in acc.iter().enumerate() {
        let m = bm * 4 + (i / 4) * 64 + ty * 4 + i % 4;
        let at = m * n4 + bn + tx;
        c[at] = F4([row[0], row[1], row[2], row[3]]);
        c[at + 16] = F4([row[4], row[5], row[6], row[7]]);
    }
}

macro_rules! gemm_entry {
    ($name:ident, $copy:tt, $s:tt) => {
        /// The pipelined GEMM (module docs).
        #[kernel(launch_bounds(threads = 256, blocks_per_sm = 2))]
        pub fn $name(at: &[F4], b: &[F4], c: &mut [F4], dims: GemmDims) {
            let (m4, n4) = (dims.m as usize / 4, dims.n as usize / 4);
            let blocks_n = dims.n as usize / GEMM_TILE;
            let blk = block_idx_x() as usize;
            let (bm, bn) = (blk / blocks_n * GEMM_Q, blk % blocks_n * GEMM_Q);
            let t = thread_idx_x() as usize % THREADS;
            let txy = (t % 16, t / 16);
            let mut acc = [[0.0f32; 8]; 8];
            #[prefetch_next(into = shared([F4; GEMM_K * GEMM_Q]), stages = $s, copy = $copy,
                                of(a_tile = at.rows(kt * GEMM_K * m4 + bm, GEMM_Q, GEMM_K, m4),
                                   b_tile = b.rows(kt * GEMM_K * n4 + bn, GEMM_Q, GEMM_K, n4)))]
            for kt in 0..dims.k as usize / GEMM_K {
                gemm_tile(&mut acc, a_tile, b_tile, txy);
            }
            gemm_store(&acc, c, n4, (bm, bn), txy);
        }
    };
}

// ---------------------------------------------------------------------------------------
// Row gather: out[g] = sum of rows idx[g * BAG ..][..BAG] of src.

/// The bags of group `i` (`GATHER_BAGS` bags, fewer at the end): their row indices.
#[inline(always)]
fn gather_group(idx: &[u32], i: usize) -> &[u32] {
    let bags = idx.len() / GATHER_BAG;
    let g0 = i * GATHER_BAGS;
    &idx[g0 * GATHER_BAG..(g0 + GATHER_BAGS).min(bags) * GATHER_BAG]
}

/// Thread `t`'s column of its bag of a staged group into `out`.
#[inline(always)]
fn gather_sum(rows: &[f32], out: &mut [f32], g0: usize, t: usize) {
    let (bag, col) = (t / GATHER_DIM, t % GATHER_DIM);
    if (bag + 1) * GATHER_BAG * GATHER_DIM <= rows.len() {
        let mut sum = 0.0f32;
        for r in 0..GATHER_BAG {
            sum += rows[(bag * GATHER_BAG + r) * GATHER_DIM + col];
        }
        out[(g0 + bag) * GATHER_DIM + col] = sum;
    }
}

macro_rules! gather_entry {
    ($name:ident, $copy:tt, $s:tt) => {
        /// The pipelined row gather (module docs).
        #[kernel]
        pub fn $name(src: &[f32], idx: &[u32], out: &mut [f32]) {
            let (b, grid) = (block_idx_x() as usize, grid_dim_x() as usize);
            let groups = (idx.len() / GATHER_BAG).div_ceil(GATHER_BAGS);
            let t = thread_idx_x() as usize % THREADS;
            #[prefetch_next(into = shared([f32; GATHER_BAGS * GATHER_BAG * GATHER_DIM]), stages = $s, copy = $copy,
                of(rows = src.gather_rows(gather_group(idx, i), GATHER_DIM)))]
            for i in (b..groups).step_by(grid) {
                gather_sum(rows, out, i * GATHER_BAGS, t);
            }
        }
    };
}

// ---------------------------------------------------------------------------------------
// The entries.

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
mod cp_async_entries {
    use super::*;
    reduce_entry!(pipe_reduce_cp_async_s2, cp_async, 2);
    reduce_entry!(pipe_reduce_cp_async_s3, cp_async, 3);
    reduce_entry!(pipe_reduce_cp_async_s4, cp_async, 4);
    stencil_entry!(pipe_stencil_cp_async_s2, cp_async, 2);
    stencil_entry!(pipe_stencil_cp_async_s3, cp_async, 3);
    stencil_entry!(pipe_stencil_cp_async_s4, cp_async, 4);
    gemm_entry!(pipe_gemm_cp_async_s2, cp_async, 2);
    gemm_entry!(pipe_gemm_cp_async_s3, cp_async, 3);
    gemm_entry!(pipe_gemm_cp_async_s4, cp_async, 4);
    gather_entry!(pipe_gather_cp_async_s2, cp_async, 2);
    gather_entry!(pipe_gather_cp_async_s3, cp_async, 3);
    gather_entry!(pipe_gather_cp_async_s4, cp_async, 4);
}
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
pub use cp_async_entries::*;

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
mod bulk_entries {
    use super::*;
    reduce_entry!(pipe_reduce_bulk_s2, bulk, 2);
    reduce_entry!(pipe_reduce_bulk_s3, bulk, 3);
    reduce_entry!(pipe_reduce_bulk_s4, bulk, 4);
    stencil_entry!(pipe_stencil_bulk_s2, bulk, 2);
    stencil_entry!(pipe_stencil_bulk_s3, bulk, 3);
    stencil_entry!(pipe_stencil_bulk_s4, bulk, 4);
    gemm_entry!(pipe_gemm_bulk_s2, bulk, 2);
    gemm_entry!(pipe_gemm_bulk_s3, bulk, 3);
    gemm_entry!(pipe_gemm_bulk_s4, bulk, 4);
    gather_entry!(pipe_gather_bulk_s2, bulk, 2);
    gather_entry!(pipe_gather_bulk_s3, bulk, 3);
    gather_entry!(pipe_gather_bulk_s4, bulk, 4);
}
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
pub use bulk_entries::*;

/// The kernels tuned by measurement (`stages = auto, copy = auto`: 2, 3 or 4 stages by
/// `cp.async` or `cp.async.bulk` where the GPU has it, and the plain entry staging through
/// registers), each with its own entries (`<name>__cp_async_s3`, ...), compared by
/// `vs_cuda_pipelines` with every candidate measured exhaustively.
pub const TUNED: &[&str] = &[
    "pipe_reduce_tuned",
    "pipe_stencil_tuned",
    "pipe_gemm_tuned",
    "pipe_gather_tuned",
];

#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
mod tuned_entries {
    use super::*;
    reduce_entry!(pipe_reduce_tuned, auto, auto);
    stencil_entry!(pipe_stencil_tuned, auto, auto);
    gemm_entry!(pipe_gemm_tuned, auto, auto);
    gather_entry!(pipe_gather_tuned, auto, auto);
}
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
pub use tuned_entries::*;
