//! The kernels. Each `#[kernel]` is a PTX `.entry` on the GPU and a module with a typed
//! `launch` on the host (`demo_kernels::saxpy::launch(&gpu, cfg, a, &x, &mut y)`).

use lookahead_device::kernel;
use lookahead_device::prelude::*;

/// `y[i] = a * x[i] + y[i]`, one element per thread.
#[kernel(same_len(x, y))]
pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_index_x();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}

/// `out[0] += x[0] + ... + x[n-1]`: each thread sums a grid-stride slice, each warp adds its
/// lanes by shuffles, and lane 0 adds the warp's total atomically. The block size must be
/// a multiple of 32.
#[kernel(min_len(out = 1))]
pub fn reduce_sum(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0f32;
    for i in (global_index_x()..x.len()).step_by(grid_stride_x()) {
        acc += x[i];
    }
    let total = warp::warp_sum_f32(acc);
    if lane_id() == 0 {
        atomic_add(&mut out[0], total);
    }
}

/// `y = x` in a grid-stride loop that prefetches, with `prefetch.global.L2`, the element
/// this thread will copy `PREFETCH_DISTANCE` iterations later.
#[kernel(same_len(x, y))]
pub fn copy_prefetch_l2(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = 4, level = l2, of(x))]
    for i in (global_index_x()..x.len()).step_by(grid_stride_x()) {
        y[i] = x[i];
    }
}

/// `y = x` like [`copy_prefetch_l2`], with `prefetch.global.L2::evict_last` on sm_80 and
/// later (`portable`: plain L2 prefetch before that).
#[kernel(same_len(x, y))]
pub fn copy_prefetch_l2_evict_last(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = 4, level = l2_evict_last, portable, of(x))]
    for i in (global_index_x()..x.len()).step_by(grid_stride_x()) {
        y[i] = x[i];
    }
}

/// `y = x` by tiles of `BULK_TILE` elements, blocks striding over tiles; before copying a
/// tile, thread 0 of the block prefetches the block's next tile with one
/// `cp.async.bulk.prefetch.L2.global` on sm_90, or one `prefetch.global.L2` per 128-byte
/// line on older GPUs (`bulk_prefetch_slice_portable` handles alignment and size).
#[kernel(same_len(x, y))]
pub fn copy_prefetch_bulk(x: &[f32], y: &mut [f32]) {
    let tile = crate::BULK_TILE;
    let tiles = x.len().div_ceil(tile);
    let mut t = block_idx_x() as usize;
    while t < tiles {
        let next = t + grid_dim_x() as usize;
        if thread_idx_x() == 0 && next < tiles {
            let end = core::cmp::min((next + 1) * tile, x.len());
            prefetch::bulk_prefetch_slice_portable(&x[next * tile..end]);
        }
        let end = core::cmp::min((t + 1) * tile, x.len());
        let mut i = t * tile + thread_idx_x() as usize;
        while i < end {
            y[i] = x[i];
            i += block_dim_x() as usize;
        }
        t = next;
    }
}
