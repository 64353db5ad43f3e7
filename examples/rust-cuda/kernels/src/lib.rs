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
//! | `api_check(words, wide, floats)` | each of `atomic::mid`'s operations at each scope, float atomics, votes, shuffles, barrier counts, address spaces | the rest of the API, checked by the host |
//!
//! [`current_api`] has the kernels on the API of Rust-CUDA's current `cuda_std` (glam,
//! `FloatExt`, wide shuffles, `compute_XX` cfgs, ...).
#![cfg_attr(target_os = "cuda", no_std)]

pub mod current_api;

pub use cuda_std::glam;

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

// rustc warns that a struct passed to a "gpu-kernel" function may be passed unexpectedly;
// a `#[repr(C)]` struct of `u32`s is one `.param .align 4 .b8 [12]`, as CUDA C passes it, and
// the GPU run checks the product.
#[kernel]
#[allow(
    improper_ctypes_definitions,
    improper_gpu_kernel_arg,
    clippy::missing_safety_doc
)]
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

/// Words of [`api_check`]'s `words` output, and what each holds after one launch of
/// `blocks x threads` threads (`n` of them); the host checks them.
pub const API_WORDS: usize = 16;

/// Exercises `cuda_std`'s atomics, votes, shuffles, barrier reductions and address-space
/// queries; every thread updates `words[..API_WORDS]`, `wide[0..2]` and `floats[0]` (the host
/// sets the start values and checks the results).
#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn api_check(words: *mut u32, wide: *mut u64, floats: *mut f32) {
    use cuda_std::atomic::mid::*;
    use cuda_std::atomic::SystemAtomicF64;
    use cuda_std::ptr::{is_in_address_space, AddressSpace};
    use cuda_std::warp::{
        lane_id, warp_shuffle_idx, warp_shuffle_up, warp_shuffle_xor, warp_vote_all, warp_vote_any,
        warp_vote_ballot,
    };
    let tid = thread::index_1d();
    let lane = lane_id();
    // words[0..10]: one read-modify-write each, at every scope and ordering.
    atomic_fetch_add_u32_device(words, Ordering::Relaxed, 1);
    atomic_fetch_max_u32_device(words.add(1), Ordering::AcqRel, tid);
    atomic_fetch_min_u32_system(words.add(2), Ordering::SeqCst, tid);
    atomic_fetch_or_u32_device(words.add(3), Ordering::Release, 1 << lane);
    atomic_fetch_sub_u32_device(words.add(4), Ordering::Acquire, 1);
    atomic_fetch_and_u32_system(words.add(5), Ordering::Relaxed, !(1 << lane));
    atomic_fetch_xor_u32_device(words.add(6), Ordering::Relaxed, 1);
    let old = atomic_fetch_exch_u32_device(words.add(7), Ordering::AcqRel, tid);
    atomic_fetch_max_u32_device(words.add(8), Ordering::Relaxed, old);
    // words[9]: each thread moves it from its own id's predecessor count by CAS.
    let mut seen = atomic_load_32_device(words.add(9), Ordering::Acquire);
    loop {
        let was =
            atomic_compare_and_swap_u32_device(words.add(9), seen, seen + 1, Ordering::AcqRel);
        if was == seen {
            break;
        }
        seen = was;
    }
    // words[10]: block-scope adds into shared memory, then one device add per block.
    let block_sum = cuda_std::shared_array![u32; 1];
    if thread::thread_idx_x() == 0 {
        atomic_store_32_block(block_sum, Ordering::Relaxed, 0);
    }
    thread::sync_threads();
    atomic_fetch_add_u32_block(block_sum, Ordering::Relaxed, 2);
    let counted = thread::sync_threads_count(1);
    if thread::thread_idx_x() == 0 {
        block_thread_fence(Ordering::AcqRel);
        let v = atomic_load_32_block(block_sum, Ordering::Relaxed);
        atomic_fetch_add_u32_device(words.add(10), Ordering::Relaxed, v);
        // words[11]: sync_threads_count saw every thread of the block.
        atomic_fetch_add_u32_device(words.add(11), Ordering::Relaxed, counted);
        // words[12]: the shared array is shared memory, the output global memory.
        let ok = is_in_address_space(block_sum, AddressSpace::Shared)
            && is_in_address_space(words, AddressSpace::Global)
            && !is_in_address_space(words, AddressSpace::Shared);
        atomic_fetch_add_u32_device(words.add(12), Ordering::Relaxed, ok as u32);
    }
    // words[13..16]: votes and shuffles, checked per warp by lane 0.
    let all = warp_vote_all(u32::MAX, true);
    let any = warp_vote_any(u32::MAX, lane == 5);
    let ballot = warp_vote_ballot(u32::MAX, lane % 2 == 0);
    let (from7, _) = warp_shuffle_idx(u32::MAX, lane * 3, 7, 32);
    let (up, _) = warp_shuffle_up(u32::MAX, lane as u64 * 1_000_000_000, 1, 32);
    let (x, _) = warp_shuffle_xor(u32::MAX, lane as f32, 1, 32);
    let lanes_ok =
        (x == (lane ^ 1) as f32) && (lane == 0 || up == (lane as u64 - 1) * 1_000_000_000);
    let all_lanes_ok = warp_vote_all(u32::MAX, lanes_ok);
    if lane == 0 {
        let votes_ok = all && any && ballot == 0x5555_5555 && from7 == 21;
        atomic_fetch_add_u32_device(words.add(13), Ordering::Relaxed, votes_ok as u32);
        atomic_fetch_add_u32_device(words.add(14), Ordering::Relaxed, all_lanes_ok as u32);
        atomic_fetch_add_u32_device(words.add(15), Ordering::Relaxed, 1);
    }
    device_thread_fence(Ordering::SeqCst);
    system_thread_fence(Ordering::Release);
    // wide[0] += thread id; floats[0] += 0.5 and the f64 in wide[1] -= 0.25 per thread (exact).
    atomic_fetch_add_u64_device(wide, Ordering::Relaxed, tid as u64);
    (*(floats as *const AtomicF32)).fetch_add(0.5, Ordering::Relaxed);
    (*(wide.add(1) as *const SystemAtomicF64)).fetch_sub(0.25, Ordering::Relaxed);
}
