//! The kernels themselves (device side only).

use lookahead_device::atomic::atomic_add_f32;
use lookahead_device::index::{global_index_x, grid_stride_x, lane_id};
use lookahead_device::prefetch;
use lookahead_device::warp::warp_sum_f32;

/// `y[i] = a * x[i] + y[i]` for `i < n`, one element per thread.
///
/// # Safety
/// `x` and `y` must point to `n` valid `f32` in device-accessible memory.
#[no_mangle]
pub unsafe extern "gpu-kernel" fn saxpy(a: f32, x: *const f32, y: *mut f32, n: usize) {
    let i = global_index_x();
    if i < n {
        *y.add(i) = a * *x.add(i) + *y.add(i);
    }
}

/// `*out += x[0] + ... + x[n-1]`: each thread sums a grid-stride slice, each warp adds its
/// lanes by shuffles, and lane 0 adds the warp's total atomically. The block size must be
/// a multiple of 32.
///
/// # Safety
/// `x` must point to `n` valid `f32`; `out` to one `f32` only updated atomically.
#[no_mangle]
pub unsafe extern "gpu-kernel" fn reduce_sum(x: *const f32, n: usize, out: *mut f32) {
    let mut acc = 0.0f32;
    let mut i = global_index_x();
    let stride = grid_stride_x();
    while i < n {
        acc += *x.add(i);
        i += stride;
    }
    let total = warp_sum_f32(acc);
    if lane_id() == 0 {
        atomic_add_f32(out, total);
    }
}

/// `y = x`, each thread prefetching the element `ahead` places past its own into L2.
///
/// # Safety
/// `x` and `y` must point to `n` valid `f32`.
#[no_mangle]
pub unsafe extern "gpu-kernel" fn copy_prefetch_l2(x: *const f32, y: *mut f32, n: usize, ahead: usize) {
    let i = global_index_x();
    if i + ahead < n {
        prefetch::prefetch_l2(x.add(i + ahead));
    }
    if i < n {
        *y.add(i) = *x.add(i);
    }
}

/// `y = x` with `prefetch.global.L2::evict_last` on sm_80 and later (plain L2 prefetch
/// before that).
///
/// # Safety
/// As [`copy_prefetch_l2`].
#[no_mangle]
pub unsafe extern "gpu-kernel" fn copy_prefetch_l2_evict_last(
    x: *const f32,
    y: *mut f32,
    n: usize,
    ahead: usize,
) {
    let i = global_index_x();
    if i + ahead < n {
        #[cfg(target_feature = "sm_80")]
        prefetch::prefetch_l2_evict_last(x.add(i + ahead));
        #[cfg(not(target_feature = "sm_80"))]
        prefetch::prefetch_l2(x.add(i + ahead));
    }
    if i < n {
        *y.add(i) = *x.add(i);
    }
}

/// `y = x`; thread 0 of each block prefetches the tile of `BULK_TILE` elements
/// `ahead_tiles` tiles past its own with one `cp.async.bulk.prefetch.L2.global` on sm_90,
/// or one `prefetch.global.L2` per 128-byte line of it on older GPUs.
///
/// # Safety
/// As [`copy_prefetch_l2`]; `x` must be 16-byte aligned.
#[no_mangle]
pub unsafe extern "gpu-kernel" fn copy_prefetch_bulk(
    x: *const f32,
    y: *mut f32,
    n: usize,
    ahead_tiles: usize,
) {
    let i = global_index_x();
    let tile = crate::BULK_TILE;
    if lookahead_device::index::thread_idx_x() == 0 {
        let start = (i / tile + ahead_tiles) * tile;
        if start < n {
            let len = core::cmp::min(tile, n - start);
            // Whole 16-byte units only: a partial tail is left to the ordinary loads.
            let bytes = (len * 4) & !15;
            if bytes > 0 {
                #[cfg(target_feature = "sm_90")]
                prefetch::bulk_prefetch_l2(x.add(start), bytes as u32);
                #[cfg(not(target_feature = "sm_90"))]
                {
                    let mut off = 0;
                    while off < bytes {
                        prefetch::prefetch_l2((x as *const u8).add(start * 4 + off));
                        off += 128;
                    }
                }
            }
        }
    }
    if i < n {
        *y.add(i) = *x.add(i);
    }
}
