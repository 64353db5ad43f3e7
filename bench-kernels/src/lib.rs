//! # bench-kernels
//!
//! The kernels of the Rust-versus-CUDA benchmark (`examples/src/bin/vs_cuda.rs`, issue 7),
//! in plain `#![no_std]` Rust compiled to PTX by `lookahead-builder`, each in every
//! prefetch-hint variant the benchmark compares, plus the CUDA C++ twin of every one
//! ([`CUDA_TWINS`], compiled at run time with NVRTC by the benchmark).
//!
//! | kernel | what it computes | arguments |
//! | --- | --- | --- |
//! | `saxpy` | `out[i] = a * x[i] + y[i]`, grid-stride | `a: f32, x, y: *const f32, out: *mut f32, n: usize` |
//! | `reduce` | `*out += sum(x)`: grid-stride, warp shuffles, one atomic per warp | `x: *const f32, n: usize, out: *mut f32` |
//! | `gather` | `out[i] = src[idx[i]]`, grid-stride | `src: *const f32, idx: *const u32, out: *mut f32, n: usize` |
//! | `spmv` | CSR `y = A x`, one warp per row, warps grid-stride over rows | `rows: usize, row_ptr, col: *const u32, val, x: *const f32, y: *mut f32` |
//! | `ivf` | per list (one block each): squared L2 distance of each [`DIM`]-float vector to the query into `dist`, the list's minimum (float bits) into `list_min` with `red.min` | `lists: usize, list_off: *const u32, vecs, query: *const f32, dist: *mut f32, list_min: *mut u32` |
//! | `chase` | thread `t` follows `steps` links from `starts[t]` through [`Node`]s, writing the sum of their values | `nodes: *const Node, starts: *const u32, chains: usize, steps: u32, out: *mut f32` |
//!
//! Variants ([`SUITE`] lists which each kernel has; the entry is `<kernel>_<variant>`):
//! `none`; `l2_dD`: `prefetch.global.L2` of what loop iteration `i + D` loads, bounded by
//! the loop's end (the expansion `#[prefetch_next(distance = D, level = L2)]` will
//! generate); `el_d4`: the same with `prefetch.global.L2::evict_last`; `bulk_d4`: one
//! `cp.async.bulk.prefetch.L2.global` per block (saxpy, reduce), warp (ivf) or row (spmv)
//! of what iteration `i + 4` loads (sm_90; per-line `prefetch.global.L2` below). Bulk
//! variants may read up to 15 bytes past a range: the host pads those buffers by 16 bytes.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_gpu_kernel, asm_experimental_arch)
)]

#[cfg(target_arch = "nvptx64")]
mod kernels;

#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/bench_kernels_ptx.rs"));

/// The CUDA C++ twins of every entry, with the same names (`extern "C"`), for NVRTC.
#[cfg(not(target_arch = "nvptx64"))]
pub const CUDA_TWINS: &str = include_str!("../cuda/twins.cu");

/// No prefetch.
pub const HINT_NONE: u8 = 0;
/// `prefetch.global.L2` per line.
pub const HINT_L2: u8 = 1;
/// `prefetch.global.L2::evict_last` per line (sm_80+).
pub const HINT_EVICT_LAST: u8 = 2;
/// `cp.async.bulk.prefetch.L2.global` per range (sm_90).
pub const HINT_BULK: u8 = 3;

/// Floats per vector in the IVF scan (a warp's 32 lanes load 4 each).
pub const DIM: usize = 128;

/// Threads per block every kernel is launched with (a multiple of the warp size).
pub const BLOCK_SIZE: u32 = 256;

/// A node of the pointer chase: the index of the next node and a value to sum.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Node {
    /// Index of the next node.
    pub next: u32,
    /// Value added to the chain's sum.
    pub val: f32,
}

/// Every kernel and the variants it has; the entry names are `<kernel>_<variant>`.
pub const SUITE: &[(&str, &[&str])] = &[
    (
        "saxpy",
        &["none", "l2_d1", "l2_d4", "l2_d16", "el_d4", "bulk_d4"],
    ),
    (
        "reduce",
        &["none", "l2_d1", "l2_d4", "l2_d16", "el_d4", "bulk_d4"],
    ),
    ("gather", &["none", "l2_d1", "l2_d4", "l2_d16", "el_d4"]),
    (
        "spmv",
        &["none", "l2_d1", "l2_d4", "l2_d16", "el_d4", "bulk_d4"],
    ),
    (
        "ivf",
        &["none", "l2_d1", "l2_d4", "l2_d16", "el_d4", "bulk_d4"],
    ),
    ("chase", &["none", "l2_d1", "el_d1"]),
];

/// The PTX module best suited to a device of compute capability `cc` (major * 10 + minor):
/// the newest architecture built that is not newer than the device.
#[cfg(not(target_arch = "nvptx64"))]
pub fn ptx_for(cc: u32) -> Option<(u32, &'static str)> {
    PTX.iter().rev().find(|(arch, _)| *arch <= cc).copied()
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_in_the_ptx_and_the_cuda_twins() {
        for (kernel, variants) in SUITE {
            for v in *variants {
                let entry = format!("{kernel}_{v}");
                for (arch, ptx) in PTX {
                    assert!(
                        ptx.contains(&format!(".entry {entry}(")),
                        "{entry} missing from sm_{arch} PTX"
                    );
                }
                assert!(
                    CUDA_TWINS.contains(&format!("({entry}, ")),
                    "{entry} missing from cuda/twins.cu"
                );
            }
        }
    }
}
