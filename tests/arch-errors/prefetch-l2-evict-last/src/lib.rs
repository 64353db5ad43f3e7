//! A prefetch intrinsic called directly: a compile error naming the architecture it needs
//! when built for an older one, PTX with the instruction from that architecture on
//! (checked by `tests/tests/arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;
use lookahead_device::prelude::*;

#[kernel]
pub fn call_prefetch_l2_evict_last(x: &[f32]) {
    prefetch::prefetch_l2_evict_last(x.as_ptr());
}
