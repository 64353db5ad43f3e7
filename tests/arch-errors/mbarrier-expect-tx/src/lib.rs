//! An mbarrier's transaction count called directly: a compile error naming sm_90 when
//! built for an older GPU, PTX with the instruction from sm_90 on (checked by
//! `tests/tests/arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;
use lookahead_device::pipeline::MBarrier;
use lookahead_device::prelude::*;

#[kernel(min_len(out = 1))]
pub fn call_arrive_expect_tx(out: &mut [u32]) {
    let words = shared_array!(u64; 1);
    let bar = MBarrier::in_shared(words, 0);
    if thread_idx_x() == 0 {
        bar.init(1);
        out[0] = bar.arrive_expect_tx(0) as u32;
    }
}
