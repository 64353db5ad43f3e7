//! # ivf-kernels
//!
//! The kernels of an IVF-Flat search, in plain Rust with `#[kernel]`:
//!
//! 1. [`coarse`]: each query's `nprobe` nearest centroids;
//! 2. [`plan`]: inverts (query, probe) pairs into per-list query lists;
//! 3. [`compact`]: the probed lists, in list order;
//! 4. [`scan`]: one block per probed list at a time, reading each list once per group of
//!    16 queries through padded shared-memory tiles, a warp per query, lanes splitting the
//!    vectors, and a warp-shuffle merge of each query's top `K` (the lists live in managed memory;
//!    the block asks for the lists it will scan next through a request queue, and waits for
//!    its list or goes ahead on the fault path);
//! 5. [`merge`]: each query's top `K` over its probes.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_gpu_kernel, asm_experimental_arch)
)]

mod kernels;
pub use kernels::*;

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/ivf_kernels_ptx.rs"));

/// Neighbours kept per query.
pub const K: usize = 10;
/// Most probes per query.
pub const MAX_NPROBE: usize = 64;
/// Most dimensions per vector.
pub const MAX_DIM: usize = 128;
/// Floats of list data staged in shared memory per tile (32 KiB: 63 rows of 128 + 1 floats).
pub const TILE_FLOATS: usize = 8192;
/// Warps per block of [`scan`]: each takes one query of the list at a time.
pub const SCAN_WARPS: usize = 16;
/// Threads per block of [`scan`].
pub const SCAN_THREADS: u32 = SCAN_WARPS as u32 * 32;
/// `hints` value for [`scan`]: no in-kernel hint.
pub const HINT_NONE: u32 = 0;
/// `hints` value for [`scan`]: `prefetch.global.L2` over the block's next list (the seed
/// document's "design 5"; it does not migrate managed pages on the H100s we measured).
pub const HINT_L2: u32 = 1;
