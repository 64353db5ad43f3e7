//! A kernel that calls a plain helper using `format!`: the host build has `std` and accepts
//! it, the GPU build must fail with the builder's explanation (checked by `arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;

fn label_len(i: usize) -> usize {
    format!("item {i}").len()
}

#[kernel(min_len(out = 1))]
pub fn uses_a_std_helper(out: &mut [f32]) {
    out[0] = label_len(0) as f32;
}
