//! Kernels written as for Rust-CUDA's `cuda_std`, unchanged but for the dependency line in
//! `Cargo.toml` (`cuda_std = { package = "lookahead-cuda-std", ... }`):
//!
//! | kernel | what it does | `cuda_std` pieces |
//! | --- | --- | --- |
//! | `vecadd(a, b, c)` | `c[i] = a[i] + b[i]` | `thread::index_1d`, slices |
//! | `transpose(input, output, width, height)` | `output = inputᵀ` through 32x33 tiles | `shared_array!`, `sync_threads`, 2-D indices |
//! | `reduce_sum(input, out)` | `*out += Σ input` | warp shuffles, dynamic shared memory, `AtomicF32` |
//! | `gemm_tile(a, b, c, dims)` | `C = A·B` (row-major) through 16x16 shared tiles | `shared_array!` twice, a `#[repr(C)]` parameter |
//! | `heap_sum(n, out)` | `*out = 0 + 1 + … + (n-1)` in a `Vec`, and one `println!` | `Vec` on the device heap, `vprintf` |
#![cfg_attr(target_os = "cuda", no_std)]

use core::sync::atomic::Ordering;
use cuda_std::atomic::AtomicF32;
use cuda_std::prelude::*;
use cuda_std::shared::dynamic_shared_mem;
use cuda_std::shared_array;
use cuda_std::warp::warp_shuffle_down;

/// The matrix shapes of [`gemm_tile`]: `A` is `m x k`, `B` is `k x n`, `C` is `m x n`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct GemmDims {
    /// Rows of `A` and `C`.
    pub m: u32,
    /// Columns of `B` and `C`.
    pub n: u32,
    /// Columns of `A`, rows of `B`.
    pub k: u32,
}

/// The tile edge of [`transpose`] (blocks of 32 x 8 threads).
pub const TRANSPOSE_TILE: u32 = 32;
/// The tile edge of [`gemm_tile`] (blocks of 16 x 16 threads).
pub const GEMM_TILE: u32 = 16;

#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn vecadd(a: &[f32], b: &[f32], c: *mut f32) {
    let idx = thread::index_1d() as usize;
    if idx < a.len() {
        let elem = &mut *c.add(idx);
        *elem = a[idx] + b[idx];
    }
}

#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn transpose(input: &[f32], output: *mut f32, width: u32, height: u32) {
    // One column of padding keeps the column reads free of bank conflicts.
    let tile = shared_array![f32; 32 * 33];
    let (x0, y0) = (thread::block_idx_x() * 32, thread::block_idx_y() * 32);
    let (tx, ty) = (thread::thread_idx_x(), thread::thread_idx_y());
    let mut j = ty;
    while j < 32 {
        let (x, y) = (x0 + tx, y0 + j);
        if x < width && y < height {
            *tile.add((j * 33 + tx) as usize) = input[(y * width + x) as usize];
        }
        j += thread::block_dim_y();
    }
    thread::sync_threads();
    let mut j = ty;
    while j < 32 {
        // Output row `x0 + j` holds input column `x0 + j`.
        let (col, row) = (y0 + tx, x0 + j);
        if col < height && row < width {
            *output.add((row * height + col) as usize) = *tile.add((tx * 33 + j) as usize);
        }
        j += thread::block_dim_y();
    }
}

/// The sum of `value` over the warp, in lane 0.
#[inline(always)]
unsafe fn warp_sum(mut value: f32) -> f32 {
    let mut offset = 16;
    while offset > 0 {
        value += warp_shuffle_down(u32::MAX, value, offset, 32).0;
        offset /= 2;
    }
    value
}

/// Needs `block_dim / 32` floats of dynamic shared memory and a block of a multiple of 32
/// threads.
#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn reduce_sum(input: &[f32], out: *mut f32) {
    let partials = dynamic_shared_mem::<f32>();
    let stride = (thread::grid_dim_x() * thread::block_dim_x()) as usize;
    let mut i = thread::index_1d() as usize;
    let mut sum = 0.0f32;
    while i < input.len() {
        sum += input[i];
        i += stride;
    }
    let sum = warp_sum(sum);
    let (warp, lane) = (thread::thread_idx_x() / 32, thread::thread_idx_x() % 32);
    if lane == 0 {
        *partials.add(warp as usize) = sum;
    }
    thread::sync_threads();
    if warp == 0 {
        let warps = thread::block_dim_x() / 32;
        let partial = if lane < warps {
            *partials.add(lane as usize)
        } else {
            0.0
        };
        let block_sum = warp_sum(partial);
        if lane == 0 {
            (*(out as *const AtomicF32)).fetch_add(block_sum, Ordering::Relaxed);
        }
    }
}

#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn gemm_tile(a: &[f32], b: &[f32], c: *mut f32, dims: GemmDims) {
    let a_tile = shared_array![f32; 16 * 16];
    let b_tile = shared_array![f32; 16 * 16];
    let (tx, ty) = (thread::thread_idx_x(), thread::thread_idx_y());
    let row = thread::block_idx_y() * 16 + ty;
    let col = thread::block_idx_x() * 16 + tx;
    let mut acc = 0.0f32;
    let mut t = 0;
    while t < dims.k {
        let (a_col, b_row) = (t + tx, t + ty);
        *a_tile.add((ty * 16 + tx) as usize) = if row < dims.m && a_col < dims.k {
            a[(row * dims.k + a_col) as usize]
        } else {
            0.0
        };
        *b_tile.add((ty * 16 + tx) as usize) = if b_row < dims.k && col < dims.n {
            b[(b_row * dims.n + col) as usize]
        } else {
            0.0
        };
        thread::sync_threads();
        for kk in 0..16 {
            acc += *a_tile.add((ty * 16 + kk) as usize) * *b_tile.add((kk * 16 + tx) as usize);
        }
        thread::sync_threads();
        t += 16;
    }
    if row < dims.m && col < dims.n {
        *c.add((row * dims.n + col) as usize) = acc;
    }
}

#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn heap_sum(n: u32, out: *mut u64) {
    if thread::index_1d() == 0 {
        let values: Vec<u64> = (0..n as u64).collect();
        let sum: u64 = values.iter().sum();
        println!(
            "heap_sum: {} values on the device heap, sum {}",
            values.len(),
            sum
        );
        *out = sum;
    }
}
