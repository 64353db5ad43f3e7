//! A `cp.async` called directly: a compile error naming sm_80 when built for an older GPU,
//! PTX with the instruction from sm_80 on (checked by `tests/tests/arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;
use lookahead_device::pipeline::cp_async;
use lookahead_device::prelude::*;

#[kernel(min_len(x = 4, out = 4))]
pub fn call_copy_cg(x: &[u32], out: &mut [u32]) {
    let tile = shared_array!(u32; 4);
    if thread_idx_x() == 0 {
        // SAFETY: 16 bytes of a 16-byte-aligned launch allocation and of the tile, read
        // only after the wait.
        unsafe { cp_async::copy_cg(tile.as_ptr() as *mut u8, x.as_ptr() as *const u8) };
        cp_async::wait_all();
        out[0] = tile.get(0);
    }
}
