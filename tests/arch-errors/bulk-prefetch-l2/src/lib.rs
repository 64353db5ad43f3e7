//! A prefetch intrinsic called directly: a compile error naming the architecture it needs
//! when built for an older one, PTX with the instruction from that architecture on
//! (checked by `tests/tests/arch_errors.rs`).
#![cfg(target_arch = "nvptx64")]
#![no_std]
#![feature(abi_gpu_kernel)]

use lookahead_device::kernel;
use lookahead_device::prelude::*;

#[kernel]
pub fn call_bulk_prefetch_l2(x: &[u8]) {
    if x.len() >= 16 {
        // SAFETY: the kernel is launched on 16-byte-aligned device memory of >= 16 bytes.
        unsafe { prefetch::bulk_prefetch_l2(x.as_ptr(), 16) };
    }
}
