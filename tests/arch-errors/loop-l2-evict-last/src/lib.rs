//! A `#[prefetch_next]` level without `portable`: a compile error naming the architecture it
//! needs when built for an older one, PTX with the instruction from that architecture on
//! (checked by `tests/tests/arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;
use lookahead_device::prelude::*;

#[kernel(same_len(x, y))]
pub fn loop_evict_last(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = 4, level = l2_evict_last)]
    for i in (global_index_x()..x.len()).step_by(grid_stride_x()) {
        y[i] = x[i];
    }
}
