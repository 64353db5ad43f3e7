//! # demo-kernels
//!
//! Lookahead's kernels, written in plain `#![no_std]` Rust with `#[kernel]`. The crate is
//! compiled twice: for `nvptx64-nvidia-cuda` by its build script (through
//! `lookahead-builder`), which gives the PTX, and for the host, where it embeds that PTX
//! ([`PTX`]) and provides each kernel's typed launcher (`demo_kernels::saxpy::launch`).
//!
//! | kernel | what it does |
//! | --- | --- |
//! | `saxpy(a, x, y)` | `y[i] = a * x[i] + y[i]` |
//! | `reduce_sum(x, out)` | `out[0] += sum(x)`: grid-stride partial sums, warp shuffle, one atomic per warp |
//! | `copy_prefetch_l2(x, y)` | `y = x`, grid-stride, `#[prefetch_next(level = l2)]` 4 iterations ahead |
//! | `copy_prefetch_l2_evict_last(x, y)` | the same with `level = l2_evict_last, portable` (sm_80+; plain L2 below) |
//! | `copy_prefetch_bulk(x, y)` | `y = x` by tiles, bulk-prefetching the next tile (sm_90; per-line L2 below) |
#![no_std]
// The nightly feature a kernel crate names (on the GPU target only, where the builder's
// toolchain accepts it): the kernel ABI.
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

mod kernels;
pub use kernels::*;

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/demo_kernels_ptx.rs"));

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
