//! A prefetch intrinsic called directly: a compile error naming the architecture it needs
//! when built for an older one, PTX with the instruction from that architecture on
//! (checked by `tests/tests/arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;
use lookahead_device::prelude::*;

#[kernel]
pub fn call_apply_priority_evict_normal(x: &[f32]) {
    prefetch::apply_priority_evict_normal(x.as_ptr());
}
