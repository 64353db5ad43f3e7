//! # newcomer-kernels
//!
//! Two kernels written from `docs/guide.md` alone (see `docs/newcomer.md` for what that
//! was like):
//!
//! | kernel | what it does |
//! | --- | --- |
//! | `moving_average(radius, x, y)` | `y[i]` = mean of `x[i - radius ..= i + radius]` (clipped to the slice), grid-stride, `#[prefetch_next]` on `x` |
//! | `histogram(data, bins)` | `bins[v] += number of bytes equal to v` (256 bins): per-block counts in shared memory, then one global atomic per non-empty bin and block |
#![no_std]
// The one crate-level line a kernel crate needs: the GPU target's kernel ABI and inline
// PTX (used by `shared_array!`). Only the GPU build sees it; the host build is stable Rust.
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

// The PTX the build script compiled, for the launchers (`PTX: &[(u32, &str)]`).
#[cfg(not(target_arch = "nvptx64"))]
include!(concat!(env!("OUT_DIR"), "/newcomer_kernels_ptx.rs"));

use lookahead_device::kernel;
use lookahead_device::prelude::*;

/// Number of histogram bins: one per byte value.
pub const BINS: usize = 256;

/// `y[i] = (x[lo] + ... + x[hi - 1]) / (hi - lo)` with `lo = i - radius` and
/// `hi = i + radius + 1`, both clipped to the slice. Each thread handles a grid-stride
/// set of `i` and prefetches (into L2) the element of `x` it will centre on two
/// iterations later.
#[kernel(same_len(x, y))]
pub fn moving_average(radius: u32, x: &[f32], y: &mut [f32]) {
    let r = radius as usize;
    let n = x.len();
    #[prefetch_next(distance = 2, level = l2, of(x))]
    for i in (global_index_x()..n).step_by(grid_stride_x()) {
        let lo = i.saturating_sub(r);
        let hi = core::cmp::min(i + r + 1, n);
        let mut sum = 0.0f32;
        for j in lo..hi {
            sum += x[j];
        }
        y[i] = sum / (hi - lo) as f32;
    }
}

/// `bins[v] += |{ i : data[i] == v }|` for every byte value `v`. Each block counts its
/// grid-stride share of `data` in a shared-memory histogram (shared atomics), then adds
/// its non-zero counts to `bins` with one global atomic each. `bins` is accumulated
/// into, not overwritten.
#[kernel(min_len(bins = 256))]
pub fn histogram(data: &[u8], bins: &mut [u32]) {
    let local = shared_array!(u32; 256);
    let t = thread_idx_x() as usize;
    let threads = block_dim_x() as usize;

    let mut b = t;
    while b < BINS {
        local.set(b, 0);
        b += threads;
    }
    sync_threads();

    for i in (global_index_x()..data.len()).step_by(grid_stride_x()) {
        local.atomic_add(data[i] as usize, 1);
    }
    sync_threads();

    let mut b = t;
    while b < BINS {
        let count = local.get(b);
        if count != 0 {
            atomic_add(&mut bins[b], count);
        }
        b += threads;
    }
}
