//! A cp.async pipeline: a compile error naming sm_80 when built for an older GPU, PTX
//! with `cp.async.cg` inside the loop from sm_80 on (checked by
//! `tests/tests/arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;
use lookahead_device::pipeline;
use lookahead_device::pipeline::CpAsync;
use lookahead_device::prelude::*;

#[kernel(min_len(out = 1))]
pub fn pipeline_cp_async(x: &[u32], out: &mut [u32]) {
    let mut p = pipeline!(u32; 256, stages = 2, copy = CpAsync);
    let chunks = x.len() / 256;
    if chunks > 0 {
        p.issue(|c| c.slice(0, &x[..256]));
    }
    let mut acc = 0u32;
    for k in 0..chunks {
        let stage = p.wait();
        if k + 1 < chunks {
            stage.refill(|c| c.slice(0, &x[(k + 1) * 256..(k + 2) * 256]));
        }
        acc = acc.wrapping_add(stage.data()[thread_idx_x() as usize % 256]);
    }
    out[0] = acc;
}
