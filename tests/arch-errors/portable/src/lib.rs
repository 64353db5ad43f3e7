//! The `portable` forms of the sm_80/sm_90 prefetches: they must build for every
//! architecture, falling back to `prefetch.global.L2` below the one that has the
//! instruction (checked by `arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;
use lookahead_device::prelude::*;

#[kernel(min_len(out = 1))]
pub fn loop_bulk_portable(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(distance = 1, level = bulk, portable)]
    for c in x.chunks(1024) {
        acc += c[0];
    }
    out[0] = acc;
}

#[kernel(same_len(x, y))]
pub fn loop_evict_last_portable(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = 4, level = l2_evict_last, portable)]
    for i in (global_index_x()..x.len()).step_by(grid_stride_x()) {
        y[i] = x[i];
    }
}

#[kernel]
pub fn call_bulk_prefetch_slice_portable(x: &[f32]) {
    prefetch::bulk_prefetch_slice_portable(x);
}
