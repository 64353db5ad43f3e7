//! # gpu-kernels
//!
//! Lookahead's kernels, written in plain `#![no_std]` Rust. The crate is compiled twice:
//! for `nvptx64-nvidia-cuda` by its build script (through `lookahead-builder`), which
//! gives the PTX, and for the host, where it embeds that PTX ([`PTX`]) for the host
//! runtime to load.
//!
//! | kernel | what it does |
//! | --- | --- |
//! | `saxpy` | `y[i] = a * x[i] + y[i]` |
//! | `reduce_sum` | `*out += sum(x)`: grid-stride partial sums, warp shuffle, one atomic per warp |
//! | `copy_prefetch_l2` | `y = x`, prefetching `x[i + ahead]` with `prefetch.global.L2` |
//! | `copy_prefetch_l2_evict_last` | the same with `prefetch.global.L2::evict_last` (sm_80+; plain L2 below) |
//! | `copy_prefetch_bulk` | the same with `cp.async.bulk.prefetch.L2.global` of the next tile (sm_90; per-line L2 below) |
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

#[cfg(target_arch = "nvptx64")]
mod kernels;

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/gpu_kernels_ptx.rs"));

/// Names of the kernels in [`PTX`], as the host loads them.
pub const KERNELS: [&str; 5] = [
    "saxpy",
    "reduce_sum",
    "copy_prefetch_l2",
    "copy_prefetch_l2_evict_last",
    "copy_prefetch_bulk",
];

/// Threads per block the kernels are written for (a multiple of the warp size).
pub const BLOCK_SIZE: u32 = 256;

/// Elements each block of `copy_prefetch_bulk` bulk-prefetches ahead of itself.
pub const BULK_TILE: usize = 4096;

/// The PTX module best suited to a device of compute capability `cc` (major * 10 + minor):
/// the newest architecture built that is not newer than the device.
#[cfg(not(target_arch = "nvptx64"))]
pub fn ptx_for(cc: u32) -> Option<(u32, &'static str)> {
    PTX.iter().rev().find(|(arch, _)| *arch <= cc).copied()
}
