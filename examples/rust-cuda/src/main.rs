//! Launches the Rust-CUDA-style kernels of `kernels/` with cudarc, as Rust-CUDA's newer
//! examples do, and checks each against a CPU reference on fresh random inputs, with the
//! outputs poisoned (NaN) before each launch. Prints one line per kernel and exits non-zero
//! when any differs.
//!
//! ```text
//! cargo run --release -p rust-cuda-example -- [--seed N]
//! ```

mod current_api;

use std::error::Error;
use std::sync::Arc;

use clap::Parser;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use lookahead_bench::exact_sum::{self, SumInput};
use rand::{rngs::StdRng, Rng, SeedableRng};
use rust_cuda_kernels::{GemmDims, API_WORDS, GEMM_TILE, TRANSPOSE_TILE};

/// The PTX `lookahead-cuda-builder` built from `kernels/` (sm_80, loads on later GPUs).
static PTX: &str = include_str!(env!("RUST_CUDA_KERNELS_PTX"));

#[derive(Parser)]
#[command(about = "Rust-CUDA-style kernels built by Lookahead, checked on the GPU")]
struct Args {
    /// Seed of the random inputs (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
}

/// `GemmDims` as a kernel argument (the kernel crate does not depend on cudarc).
#[repr(transparent)]
struct DimsArg(GemmDims);
// SAFETY: `GemmDims` is `#[repr(C)]` plain data, as the kernel reads it.
unsafe impl DeviceRepr for DimsArg {}

type Result<T> = std::result::Result<T, Box<dyn Error>>;

struct Gpu {
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
}

impl Gpu {
    fn function(&self, name: &str) -> Result<CudaFunction> {
        Ok(self.module.load_function(name)?)
    }

    /// A device copy of `host`.
    fn upload<T: DeviceRepr + Copy>(&self, host: &[T]) -> Result<CudaSlice<T>> {
        Ok(self.stream.clone_htod(host)?)
    }

    /// `len` elements of `poison`, so an element the kernel does not write shows.
    fn poisoned<T: DeviceRepr + Copy>(&self, len: usize, poison: T) -> Result<CudaSlice<T>> {
        self.upload(&vec![poison; len])
    }

    fn download<T: DeviceRepr + Copy + Default>(&self, dev: &CudaSlice<T>) -> Result<Vec<T>> {
        self.stream.synchronize()?;
        Ok(self.stream.clone_dtoh(dev)?)
    }
}

/// Largest |gpu - cpu| / max(1, |cpu|), NaN (never written) counting as infinite.
fn worst_error(gpu: &[f32], cpu: &[f32]) -> f64 {
    gpu.iter()
        .zip(cpu)
        .map(|(&g, &c)| {
            let e = ((g - c).abs() / c.abs().max(1.0)) as f64;
            if e.is_nan() {
                f64::INFINITY
            } else {
                e
            }
        })
        .fold(0.0, f64::max)
}

fn random(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

fn check_vecadd(gpu: &Gpu, rng: &mut StdRng) -> Result<f64> {
    let n: usize = 1_000_003;
    let (a, b) = (random(rng, n), random(rng, n));
    let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let mut dc = gpu.poisoned(n, f32::NAN)?;
    let f = gpu.function("vecadd")?;
    let cfg = LaunchConfig::for_num_elems(n as u32);
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&da).arg(&n).arg(&db).arg(&n).arg(&mut dc);
    // SAFETY: the argument list matches `vecadd(a: &[f32], b: &[f32], c: *mut f32)`, and
    // `c` holds `n` elements.
    unsafe { launch.launch(cfg) }?;
    let cpu: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    Ok(worst_error(&gpu.download(&dc)?, &cpu))
}

fn check_transpose(gpu: &Gpu, rng: &mut StdRng) -> Result<f64> {
    let (width, height) = (1000u32, 777u32);
    let len = (width * height) as usize;
    let input = random(rng, len);
    let din = gpu.upload(&input)?;
    let mut dout = gpu.poisoned(len, f32::NAN)?;
    let f = gpu.function("transpose")?;
    let cfg = LaunchConfig {
        grid_dim: (
            width.div_ceil(TRANSPOSE_TILE),
            height.div_ceil(TRANSPOSE_TILE),
            1,
        ),
        block_dim: (TRANSPOSE_TILE, 8, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = gpu.stream.launch_builder(&f);
    launch
        .arg(&din)
        .arg(&len)
        .arg(&mut dout)
        .arg(&width)
        .arg(&height);
    // SAFETY: matches `transpose(input: &[f32], output: *mut f32, width: u32, height: u32)`;
    // `output` holds width * height elements.
    unsafe { launch.launch(cfg) }?;
    let mut cpu = vec![0.0f32; len];
    for y in 0..height as usize {
        for x in 0..width as usize {
            cpu[x * height as usize + y] = input[y * width as usize + x];
        }
    }
    Ok(worst_error(&gpu.download(&dout)?, &cpu))
}

/// `reduce_sum`'s launch: 264 blocks of 256 threads, a grid-stride loop over its input.
const REDUCE_BLOCKS: u32 = 264;
const REDUCE_THREADS: u32 = 256;
/// Not a multiple of the grid: the last pass is partial, and the last 37 elements a tail.
const REDUCE_LEN: usize = 4_000_037;

/// `reduce_sum`'s input: integers whose f32 sum is exact in any order of additions
/// ([`exact_sum`]), so the kernel's result must equal the reference bit for bit.
fn reduce_input(rng: &mut StdRng) -> SumInput {
    exact_sum::input(REDUCE_LEN, |k| rng.gen_range(0..k))
}

fn check_reduce(gpu: &Gpu, rng: &mut StdRng) -> Result<f64> {
    let n = REDUCE_LEN;
    let data = reduce_input(rng);
    let din = gpu.upload(&data.values)?;
    let mut dout = gpu.upload(&[0.0f32])?;
    let f = gpu.function("reduce_sum")?;
    let cfg = LaunchConfig {
        grid_dim: (REDUCE_BLOCKS, 1, 1),
        block_dim: (REDUCE_THREADS, 1, 1),
        shared_mem_bytes: REDUCE_THREADS / 32 * 4,
    };
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&din).arg(&n).arg(&mut dout);
    // SAFETY: matches `reduce_sum(input: &[f32], out: *mut f32)`, with one float of dynamic
    // shared memory per warp.
    unsafe { launch.launch(cfg) }?;
    let (ok, detail) = exact_sum::check(gpu.download(&dout)?[0], data.sum);
    if !ok {
        eprintln!("reduce_sum: {detail}");
    }
    Ok(if ok { 0.0 } else { f64::INFINITY })
}

fn check_gemm(gpu: &Gpu, rng: &mut StdRng) -> Result<f64> {
    let dims = GemmDims {
        m: 200,
        n: 150,
        k: 130,
    };
    let (m, n, k) = (dims.m as usize, dims.n as usize, dims.k as usize);
    let (a, b) = (random(rng, m * k), random(rng, k * n));
    let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let mut dc = gpu.poisoned(m * n, f32::NAN)?;
    let f = gpu.function("gemm_tile")?;
    let cfg = LaunchConfig {
        grid_dim: (dims.n.div_ceil(GEMM_TILE), dims.m.div_ceil(GEMM_TILE), 1),
        block_dim: (GEMM_TILE, GEMM_TILE, 1),
        shared_mem_bytes: 0,
    };
    let (alen, blen, dims_arg) = (a.len(), b.len(), DimsArg(dims));
    let mut launch = gpu.stream.launch_builder(&f);
    launch
        .arg(&da)
        .arg(&alen)
        .arg(&db)
        .arg(&blen)
        .arg(&mut dc)
        .arg(&dims_arg);
    // SAFETY: matches `gemm_tile(a: &[f32], b: &[f32], c: *mut f32, dims: GemmDims)`; `c`
    // holds m * n elements.
    unsafe { launch.launch(cfg) }?;
    let mut cpu = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            cpu[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    Ok(worst_error(&gpu.download(&dc)?, &cpu))
}

fn check_heap(gpu: &Gpu) -> Result<f64> {
    let n = 1000u32;
    let mut dout = gpu.upload(&[u64::MAX])?;
    let f = gpu.function("heap_sum")?;
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&n).arg(&mut dout);
    // SAFETY: matches `heap_sum(n: u32, out: *mut u64)`.
    unsafe { launch.launch(LaunchConfig::for_num_elems(1)) }?;
    let got = gpu.download(&dout)?[0];
    let want = (n as u64) * (n as u64 - 1) / 2;
    Ok(if got == want { 0.0 } else { f64::INFINITY })
}

/// `api_check` on 4 blocks of 256 threads: every word it updates has the value the
/// operations imply.
fn check_api(gpu: &Gpu) -> Result<f64> {
    let (blocks, threads) = (4u32, 256u32);
    let n = (blocks * threads) as u64;
    let n32 = n as u32;
    let mut start = [0u32; API_WORDS];
    (start[2], start[4], start[5], start[7]) = (u32::MAX, n32, u32::MAX, n32);
    let mut words = gpu.upload(&start)?;
    let mut wide = gpu.upload(&[0u64, (n as f64 * 0.25).to_bits()])?;
    let mut floats = gpu.upload(&[0.0f32])?;
    let f = gpu.function("api_check")?;
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = gpu.stream.launch_builder(&f);
    launch.arg(&mut words).arg(&mut wide).arg(&mut floats);
    // SAFETY: matches `api_check(words: *mut u32, wide: *mut u64, floats: *mut f32)` with
    // API_WORDS, 2 and 1 elements.
    unsafe { launch.launch(cfg) }?;
    let w = gpu.download(&words)?;
    let (wide, floats) = (gpu.download(&wide)?, gpu.download(&floats)?);
    let warps = n32 / 32;
    let want = [
        n32,
        n32 - 1,
        0,
        u32::MAX,
        0,
        0,
        0,
        w[7],
        n32,
        n32,
        2 * n32,
        n32,
        blocks,
        warps,
        warps,
        warps,
    ];
    let mut wrong: Vec<String> = (0..API_WORDS)
        .filter(|&i| w[i] != want[i])
        .map(|i| format!("words[{i}] = {} (want {})", w[i], want[i]))
        .collect();
    if w[7] >= n32 {
        wrong.push(format!("words[7] = {} is not a thread id", w[7]));
    }
    if wide[0] != n * (n - 1) / 2 || f64::from_bits(wide[1]) != 0.0 || floats[0] != n as f32 * 0.5 {
        wrong.push(format!("wide {wide:?}, floats {floats:?}"));
    }
    for w in &wrong {
        eprintln!("api_check: {w}");
    }
    Ok(if wrong.is_empty() { 0.0 } else { f64::INFINITY })
}

fn main() -> Result<()> {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    // cudarc panics when it cannot load the driver library: say what is missing instead,
    // with the exit status Lookahead's programs give for "no GPU".
    // SAFETY: only tries to dlopen the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        println!(
            "No CUDA GPU here: no CUDA driver found (libcuda.so could not be loaded). These \
             kernels run on a GPU; the checks that need none run with `cargo test -p \
             rust-cuda-example`."
        );
        std::process::exit(2);
    }
    let ctx = CudaContext::new(0)?;
    let gpu = Gpu {
        stream: ctx.default_stream(),
        module: ctx.load_module(Ptx::from_src(PTX))?,
    };
    println!("device: {} (seed {seed})", ctx.name()?);
    let mut rng = StdRng::seed_from_u64(seed);
    type Check = fn(&Gpu, &mut StdRng) -> Result<f64>;
    let checks: [(&str, Check, f64); 12] = [
        ("vecadd", check_vecadd, 0.0),
        ("transpose", check_transpose, 0.0),
        ("reduce_sum", check_reduce, 0.0),
        ("gemm_tile", check_gemm, 1e-5),
        ("heap_sum", |gpu, _| check_heap(gpu), 0.0),
        ("api_check", |gpu, _| check_api(gpu), 0.0),
        ("grid_transform", current_api::check_grid_transform, 1e-5),
        // libdevice's erf, normcdf and j0 are within a few ulp of the f64 reference.
        ("float_ext", current_api::check_float_ext, 1e-5),
        (
            "float_bits",
            |gpu, _| current_api::check_float_bits(gpu),
            0.0,
        ),
        (
            "wide_shuffles",
            |gpu, _| current_api::check_wide_shuffles(gpu),
            0.0,
        ),
        (
            "arch_features",
            |gpu, _| current_api::check_arch_features(gpu),
            0.0,
        ),
        ("dependencies", current_api::check_dependencies, 0.0),
    ];
    let mut failed = 0;
    for (name, check, tolerance) in checks {
        let error = check(&gpu, &mut rng)?;
        let ok = error <= tolerance;
        failed += usize::from(!ok);
        println!(
            "{name:<14} worst relative error {error:.2e} (allowed {tolerance:.0e}): {}",
            if ok { "ok" } else { "MISMATCH" }
        );
    }
    if failed > 0 {
        return Err(format!("{failed} kernel(s) differ from the CPU reference").into());
    }
    println!("all {} kernels agree with the CPU reference", checks.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The negative control of `check_reduce` (no GPU needed): on its input and grid, the
    /// sum in a grid-stride kernel's order passes the check, and the same sum without one
    /// block, or without the 37-element tail, fails it.
    #[test]
    fn the_reduce_check_catches_a_missing_block_or_tail() {
        let data = reduce_input(&mut StdRng::seed_from_u64(9));
        let threads = (REDUCE_BLOCKS * REDUCE_THREADS) as usize;
        let sum = |left_out: &dyn Fn(usize) -> bool| {
            exact_sum::grid_stride_sum(&data.values, threads, left_out)
        };
        assert!(exact_sum::check(sum(&|_| false), data.sum).0);
        let (ok, detail) = exact_sum::check(sum(&|i| (i % threads) / 256 == 200), data.sum);
        assert!(!ok, "a missing block passed: {detail}");
        let (ok, detail) = exact_sum::check(sum(&|i| i >= REDUCE_LEN - 37), data.sum);
        assert!(!ok, "a missing tail passed: {detail}");
    }
}
