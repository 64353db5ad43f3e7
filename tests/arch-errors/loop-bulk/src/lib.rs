//! A `#[prefetch_next]` level without `portable`: a compile error naming the architecture it
//! needs when built for an older one, PTX with the instruction from that architecture on
//! (checked by `tests/tests/arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;
use lookahead_device::prelude::*;

#[kernel(min_len(out = 1))]
pub fn loop_bulk(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(distance = 1, level = bulk)]
    for c in x.chunks(1024) {
        acc += c[0];
    }
    out[0] = acc;
}
