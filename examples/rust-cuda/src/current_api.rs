//! Checks of the kernels on the API of Rust-CUDA's current `cuda_std`
//! (`rust_cuda_kernels::current_api`), each against a CPU reference.

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use rand::{rngs::StdRng, Rng};
use rust_cuda_kernels::current_api::FLOAT_EXT_RESULTS;
use rust_cuda_kernels::glam::{Mat3, Vec3};

use crate::{worst_error, Gpu, Result};

/// A `glam::Mat3` as a kernel argument (passed by value, as the kernel takes it).
#[repr(transparent)]
struct MatArg(Mat3);
// SAFETY: `Mat3` is plain `f32`s, laid out as the kernel reads it (same glam, same features).
unsafe impl DeviceRepr for MatArg {}

/// One thread per element of `n`, in blocks of 128: exactly `n` threads up to 128 (one block),
/// which the kernels without a bounds check rely on; above, the last block's extra threads
/// are left out by the kernel's own check.
fn one_d(n: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(128), 1, 1),
        block_dim: (n.min(128), 1, 1),
        shared_mem_bytes: 0,
    }
}

pub(crate) fn check_grid_transform(gpu: &Gpu, rng: &mut StdRng) -> Result<f64> {
    let (width, height) = (37u32, 23u32);
    let cols: [f32; 9] = std::array::from_fn(|_| rng.gen_range(-2.0f32..2.0));
    let matrix = Mat3::from_cols_array(&cols);
    let n = (width * height) as usize;
    let mut out = gpu.poisoned(n * 3, f32::NAN)?;
    let f = gpu.function("grid_transform")?;
    let cfg = LaunchConfig {
        grid_dim: (width.div_ceil(16), height.div_ceil(16), 1),
        block_dim: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    let arg = MatArg(matrix);
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&arg).arg(&mut out).arg(&width).arg(&height);
    // SAFETY: matches `grid_transform(matrix: Mat3, out: *mut Vec3, width: u32, height: u32)`;
    // `out` holds `width * height` `Vec3`s (12 bytes each, as `glam` lays them out).
    unsafe { launch.launch(cfg) }?;
    let cpu: Vec<f32> = (0..n as u32)
        .flat_map(|i| (matrix * Vec3::new((i % width) as f32, (i / width) as f32, 1.0)).to_array())
        .collect();
    Ok(worst_error(&gpu.download(&out)?, &cpu))
}

/// What `float_ext` computes for `x`, in its order, from the standard library and `libm`.
fn float_ext_reference(x: f32) -> [f32; FLOAT_EXT_RESULTS] {
    let d = x as f64;
    let pi = std::f64::consts::PI;
    let (fraction, exponent) = libm::frexpf(x);
    [
        (pi * d).cos() as f32,
        libm::erf(d) as f32,
        (0.5 * libm::erfc(-d / std::f64::consts::SQRT_2)) as f32,
        libm::j0(d) as f32,
        d.ln_1p() as f32,
        x * 8.0,
        fraction,
        exponent as f32,
        libm::ilogbf(x) as f32,
        (x - 1.5).clamp(0.0, 1.0),
        (pi * d).sin() as f32,
        (pi * d).cos() as f32,
    ]
}

pub(crate) fn check_float_ext(gpu: &Gpu, rng: &mut StdRng) -> Result<f64> {
    let n: usize = 4097;
    let input: Vec<f32> = (0..n).map(|_| rng.gen_range(0.1f32..2.0)).collect();
    let dinput = gpu.upload(&input)?;
    let mut out = gpu.poisoned(n * FLOAT_EXT_RESULTS, f32::NAN)?;
    let f = gpu.function("float_ext")?;
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&dinput).arg(&n).arg(&mut out);
    // SAFETY: matches `float_ext(input: &[f32], out: *mut f32)`; `out` holds
    // `FLOAT_EXT_RESULTS` floats per input.
    unsafe { launch.launch(one_d(n as u32)) }?;
    let cpu: Vec<f32> = input.iter().flat_map(|&x| float_ext_reference(x)).collect();
    Ok(worst_error(&gpu.download(&out)?, &cpu))
}

/// Whether `got` is `want`, as an error of 0 or infinity (for exact results).
fn exact<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> f64 {
    if got == want {
        0.0
    } else {
        eprintln!("{what}: got {got:?}, want {want:?}");
        f64::INFINITY
    }
}

pub(crate) fn check_float_bits(gpu: &Gpu) -> Result<f64> {
    let mut words = gpu.upload(&[0u32, u32::MAX, 0])?;
    let f = gpu.function("float_bits")?;
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&mut words);
    // SAFETY: matches `float_bits(words: *mut u32)`; one block of 64 threads (the xor is
    // block-scoped), three words.
    unsafe {
        launch.launch(LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (64, 1, 1),
            shared_mem_bytes: 0,
        })
    }?;
    // 64 threads: every bit set; odd bits cleared; bit k flipped by the threads t % 3 == k
    // (22, 21 and 21 of them), so bits 1 and 2 are left set.
    Ok(exact(
        "float bits",
        gpu.download(&words)?,
        vec![u32::MAX, 0x5555_5555, 0b110],
    ))
}

pub(crate) fn check_wide_shuffles(gpu: &Gpu) -> Result<f64> {
    let n = 64usize;
    let mut wide = gpu.poisoned(2 * n, u64::MAX)?;
    let mut bytes = gpu.poisoned(n, 0xAAu8)?;
    let mut halves = gpu.poisoned(n, i16::MIN)?;
    let f = gpu.function("wide_shuffles")?;
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&mut wide).arg(&mut bytes).arg(&mut halves);
    // SAFETY: matches `wide_shuffles(wide: *mut u128, bytes: *mut u8, halves: *mut i16)`;
    // `wide` holds 64 `u128`s as pairs of `u64`s (the allocation is 256-byte aligned), and
    // `one_d(64)` is exactly 64 threads, one per element (the kernel has no bounds check).
    unsafe { launch.launch(one_d(n as u32)) }?;
    let value = |lane: u128| lane << 100 | (lane * 3) << 40 | lane;
    let want_wide: Vec<u64> = (0..n as u128)
        .map(|t| value((t % 32) ^ 1))
        .flat_map(|v| [v as u64, (v >> 64) as u64])
        .collect();
    let want_bytes: Vec<u8> = (0..n)
        .map(|t| (if t % 32 < 31 { t % 32 + 1 } else { 31 }) as u8 * 7)
        .collect();
    Ok(exact("u128 shuffle", gpu.download(&wide)?, want_wide)
        .max(exact("u8 shuffle", gpu.download(&bytes)?, want_bytes))
        .max(exact(
            "i16 shuffle",
            gpu.download(&halves)?,
            vec![-500i16; n],
        )))
}

pub(crate) fn check_arch_features(gpu: &Gpu) -> Result<f64> {
    let mut out = gpu.poisoned(1, f32::NAN)?;
    let f = gpu.function("arch_features")?;
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&mut out);
    // SAFETY: matches `arch_features(out: *mut f32)`.
    unsafe { launch.launch(one_d(1)) }?;
    // The PTX is built for sm_80: compute_60, compute_70 and compute_80 hold.
    Ok(exact("arch features", gpu.download(&out)?, vec![210.0f32]))
}

pub(crate) fn check_dependencies(gpu: &Gpu, rng: &mut StdRng) -> Result<f64> {
    let n: i64 = rng.gen_range(1000..2000);
    let bytes: Vec<u8> = (0..rng.gen_range(1..300)).map(|_| rng.gen()).collect();
    let dbytes = gpu.upload(&bytes)?;
    let mut sum = gpu.poisoned(1, -1i64)?;
    let mut hash = gpu.poisoned(1, 0u64)?;
    let f = gpu.function("dependencies")?;
    let len = bytes.len();
    let mut launch = gpu.stream.launch_builder(&f);
    launch
        .arg(&n)
        .arg(&mut sum)
        .arg(&dbytes)
        .arg(&len)
        .arg(&mut hash);
    // SAFETY: matches `dependencies(n: i64, out: *mut i64, bytes: &[u8], hash: *mut u64)`.
    unsafe { launch.launch(one_d(32)) }?;
    Ok(
        exact("range sum", gpu.download(&sum)?, vec![n * (n - 1) / 2]).max(exact(
            "fnv1a",
            gpu.download(&hash)?,
            vec![rust_cuda_fnv::fnv1a(&bytes)],
        )),
    )
}
