//! Kernels on the API of Rust-CUDA's current `cuda_std` (its main branch), written as its
//! examples and compile tests use it: `glam` values as kernel parameters and results,
//! `thread::index_2d()` as a `glam::UVec2`, `FloatExt`, the float atomics' bitwise
//! operations, shuffles of 8-, 16- and 128-bit values, `#[cfg(target_feature =
//! "compute_XX")]`, `vek::num_traits`, a dependency crate that does not say `#![no_std]`,
//! and a kernel behind a cargo feature (built with `CudaBuilder::build_args`).

use core::ops::Range;
use core::sync::atomic::Ordering;

use cuda_std::atomic::{AtomicF32, BlockAtomicF32};
use cuda_std::glam::{Mat3, Vec3};
use cuda_std::prelude::*;
use cuda_std::vek::num_traits::Num;
use cuda_std::warp::{warp_shuffle_down, warp_shuffle_idx, warp_shuffle_xor};
use cuda_std::FloatExt;

/// How many results [`float_ext`] writes per input.
pub const FLOAT_EXT_RESULTS: usize = 12;

/// `out[y * width + x] = matrix * (x, y, 1)` for each (x, y) of a 2-D launch.
#[kernel]
#[allow(
    improper_ctypes_definitions,
    improper_gpu_kernel_arg,
    clippy::missing_safety_doc
)]
pub unsafe fn grid_transform(matrix: Mat3, out: *mut Vec3, width: u32, height: u32) {
    let idx = thread::index_2d();
    if idx.x < width && idx.y < height {
        let point = Vec3::new(idx.x as f32, idx.y as f32, 1.0);
        *out.add((idx.y * width + idx.x) as usize) = matrix * point;
    }
}

/// For each `x` of `input`, [`FLOAT_EXT_RESULTS`] values of `FloatExt` functions of it, in
/// the order the host checks them.
#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn float_ext(input: &[f32], out: *mut f32) {
    let i = thread::index_1d() as usize;
    if i < input.len() {
        let x = input[i];
        let (fraction, exponent) = x.frexp();
        let (sin, cos) = x.sincospi();
        let results = [
            x.cospi(),
            x.error_function(),
            x.norm_cdf(),
            x.j0(),
            x.log1p(),
            x.ldexp(3),
            fraction,
            exponent as f32,
            x.unbiased_exp() as f32,
            (x - 1.5).saturate(),
            sin,
            cos,
        ];
        for (k, value) in results.into_iter().enumerate() {
            *out.add(i * FLOAT_EXT_RESULTS + k) = value;
        }
    }
}

/// Float atomics' bitwise operations, on the bits of `words[0..3]` (as `u32`): thread `t`
/// of the launch sets bit `t % 32` of `words[0]` (`fetch_or`), clears bit `t % 32` of
/// `words[1]` when `t` is odd (`fetch_and`), and flips bit `t % 3` of `words[2]`
/// (`fetch_xor`, block scope).
#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn float_bits(words: *mut u32) {
    let t = thread::index_1d();
    let or = &*(words as *const AtomicF32);
    let and = &*(words.add(1) as *const AtomicF32);
    let xor = &*(words.add(2) as *const BlockAtomicF32);
    or.fetch_or(f32::from_bits(1 << (t % 32)), Ordering::Relaxed);
    if t % 2 == 1 {
        and.fetch_and(f32::from_bits(!(1 << (t % 32))), Ordering::Relaxed);
    }
    xor.fetch_xor(f32::from_bits(1 << (t % 3)), Ordering::Relaxed);
}

/// Shuffles of wide and narrow values in each warp: `wide[t]` is lane `lane ^ 1`'s `u128`,
/// `bytes[t]` lane `lane + 1`'s `u8` (its own on lane 31), `halves[t]` lane 5's `i16`.
#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn wide_shuffles(wide: *mut u128, bytes: *mut u8, halves: *mut i16) {
    let t = thread::index_1d() as usize;
    let lane = cuda_std::warp::lane_id();
    let value = (lane as u128) << 100 | (lane as u128 * 3) << 40 | lane as u128;
    *wide.add(t) = warp_shuffle_xor(u32::MAX, value, 1, 32).0;
    *bytes.add(t) = warp_shuffle_down(u32::MAX, lane as u8 * 7, 1, 32).0;
    *halves.add(t) = warp_shuffle_idx(u32::MAX, -(lane as i16) * 100, 5, 32).0;
}

/// The sum of the architectures this PTX was built for, as Rust-CUDA's codegen sets them:
/// 60 + 70 + 80 (210) for sm_80, plus 90 (300) for sm_90.
#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn arch_features(out: *mut f32) {
    // On the host none of the cfgs holds.
    #[cfg_attr(not(target_os = "cuda"), allow(unused_mut))]
    let mut sum = 0.0f32;
    #[cfg(target_feature = "compute_60")]
    {
        sum += 60.0;
    }
    #[cfg(target_feature = "compute_70")]
    {
        sum += 70.0;
    }
    #[cfg(target_feature = "compute_80")]
    {
        sum += 80.0;
    }
    #[cfg(target_feature = "compute_90")]
    {
        sum += 90.0;
    }
    core::ptr::write_volatile(out, sum);
}

/// A range iterator over any `num_traits::Num` type.
struct NumRange<T>(Range<T>);

impl<T: Num + Ord + Copy> Iterator for NumRange<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        let x = self.0.start;
        if x >= self.0.end {
            return None;
        }
        self.0.start = x + T::one();
        Some(x)
    }
}

/// `*out = 0 + 1 + ... + (n - 1)`, through a range over any `num_traits::Num`; `*hash` is the
/// FNV-1a hash of `bytes`, from `rust-cuda-fnv` (a crate without `#![no_std]`). One thread.
#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn dependencies(n: i64, out: *mut i64, bytes: &[u8], hash: *mut u64) {
    if thread::first() {
        *out = NumRange(0..n).sum();
        *hash = rust_cuda_fnv::fnv1a(bytes);
    }
}

/// Writes `0xE7` (only in the PTX built with the `extra-kernel` feature).
#[cfg(feature = "extra-kernel")]
#[kernel]
#[allow(improper_ctypes_definitions, clippy::missing_safety_doc)]
pub unsafe fn extra_marker(out: *mut u32) {
    *out = 0xE7;
}
