//! The main demo: runs the Rust kernels of `demo-kernels` (compiled to PTX by
//! `lookahead-builder`) through their typed `#[kernel]` launchers: saxpy, the atomic
//! reduction and the three prefetch kernels, on device memory and on managed (Unified)
//! memory, checking every result against a CPU reference on fresh random inputs.
//! Without a GPU (or with `--emulator`) the same launchers run the same kernels on the CPU
//! emulator, on host memory, and the results are checked the same way.
//!
//! `--gpu` demands the GPU: without one the demo fails instead of falling back (what
//! `scripts/gpu-tests.sh` runs).
//!
//! `cargo run --release -p lookahead-demo --bin demo [-- --n 16777216] [--emulator | --gpu]`

use std::process::ExitCode;

use clap::Parser;
use cudarc::driver::CudaSlice;
use lookahead::emu::Emulator;
use lookahead::launch::LaunchConfig;
use lookahead::{DriverContext, Error, Gpu, ManagedBuffer};
use lookahead_bench::args::{at_least, host_memory_for, Validate};
use lookahead_bench::exact_sum::{self, SumInput};
use rand::{Rng, SeedableRng};

#[derive(Parser, Debug)]
#[command(about = "Run Lookahead's Rust kernels on the GPU and check them against the CPU")]
struct Args {
    /// Elements per vector, at least 1 (default: 16M on a GPU, 1M on the emulator).
    #[arg(long, value_parser = at_least(1usize))]
    n: Option<usize>,
    /// Random seed (default: a fresh one each run).
    #[arg(long, value_parser = at_least(0u64))]
    seed: Option<u64>,
    /// Run on the CPU emulator even if a GPU is present.
    #[arg(long)]
    emulator: bool,
    /// Run on GPU 0 or fail: no CUDA GPU is an error, never a fallback to the emulator.
    #[arg(long, conflicts_with = "emulator")]
    gpu: bool,
}

/// Host memory the demo holds per element at its peak: inputs, outputs read back and, on
/// the emulator, the buffers' own copies (ten `f32` vectors of `n`).
const HOST_BYTES_PER_ELEMENT: u64 = 40;

impl Validate for Args {
    fn validate(&self) -> Result<(), String> {
        match self.n {
            Some(n) => host_memory_for("--n", n as u64, HOST_BYTES_PER_ELEMENT),
            None => Ok(()),
        }
    }
}

/// Where the kernels run.
enum Device {
    Gpu(Gpu),
    Emulator(Emulator),
}

/// The memory the kernels run on: device or managed memory on a GPU, host memory on the
/// emulator.
enum Buffer {
    Device(CudaSlice<f32>),
    Managed(ManagedBuffer<f32>),
    Host(Vec<f32>),
}

/// Launches `$kernel` on `$dev` with buffers `$x`, `$y` of the same kind.
macro_rules! launch {
    ($dev:expr, $kernel:path, $cfg:expr, [$($scalar:expr),*], $x:expr, $y:expr) => {
        match ($dev, $x, $y) {
            (Device::Gpu(g), Buffer::Device(x), Buffer::Device(y)) => $kernel(g, $cfg, $($scalar,)* x, y),
            (Device::Gpu(g), Buffer::Managed(x), Buffer::Managed(y)) => $kernel(g, $cfg, $($scalar,)* x, y),
            (Device::Emulator(e), Buffer::Host(x), Buffer::Host(y)) => $kernel(e, $cfg, $($scalar,)* x, y),
            _ => unreachable!("the buffers match the device"),
        }
    };
}

impl Device {
    /// The memory kinds to run on: device and managed memory, or host memory.
    fn memories(&self) -> &'static [&'static str] {
        match self {
            Device::Gpu(_) => &["device", "managed"],
            Device::Emulator(_) => &["host"],
        }
    }

    fn synchronize(&self) -> Result<(), Error> {
        match self {
            Device::Gpu(g) => g.synchronize(),
            Device::Emulator(_) => Ok(()), // emulated launches finish before returning
        }
    }
}

impl Buffer {
    fn new(dev: &Device, memory: &str, data: &[f32]) -> Result<Self, Error> {
        let gpu = match dev {
            Device::Gpu(g) => g,
            Device::Emulator(_) => return Ok(Buffer::Host(data.to_vec())),
        };
        if memory == "managed" {
            // Written by the CPU, so every page starts on the host.
            Ok(Buffer::Managed(ManagedBuffer::from_slice(gpu, data)?))
        } else {
            Ok(Buffer::Device(
                gpu.stream().clone_htod(data).during("cuMemcpyHtoD")?,
            ))
        }
    }

    fn read(&self, dev: &Device) -> Result<Vec<f32>, Error> {
        dev.synchronize()?;
        match (dev, self) {
            (_, Buffer::Host(h)) => Ok(h.clone()),
            (Device::Gpu(g), Buffer::Device(d)) => Ok(g.stream().clone_dtoh(d)?),
            (Device::Gpu(_), Buffer::Managed(m)) => m.to_vec(),
            (Device::Emulator(_), _) => unreachable!("the emulator uses host memory"),
        }
    }
}

struct Check {
    name: String,
    ok: bool,
    detail: String,
}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    println!("Lookahead demo: Rust kernels compiled to PTX by lookahead-builder");
    println!("  device toolchain: {}", demo_kernels::PTX_TOOLCHAIN);
    let built: Vec<String> = demo_kernels::PTX
        .iter()
        .map(|(a, _)| format!("sm_{a}"))
        .collect();
    println!("  PTX built for: {}", built.join(", "));

    let dev = if args.emulator {
        println!("\n--emulator: running the kernels on the CPU emulator (lookahead::emu).");
        Device::Emulator(Emulator::new())
    } else {
        match Gpu::new(0) {
            Ok(gpu) => Device::Gpu(gpu),
            Err(e @ (Error::NoDriver | Error::NoDevice { .. })) if args.gpu => {
                eprintln!("error: --gpu asks for a CUDA GPU, and there is none here: {e}");
                return ExitCode::FAILURE;
            }
            Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
                println!("\nNo CUDA GPU here ({e}).");
                println!("Running the same kernels on the CPU EMULATOR instead (lookahead::emu):");
                println!(
                    "every GPU thread runs on the host, with GPU semantics; results are checked"
                );
                println!("against the CPU reference as on a GPU, but nothing ran on a GPU and the");
                println!("timings say nothing about GPU speed.");
                Device::Emulator(Emulator::new())
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    };
    match run(&dev, &args) {
        Ok(checks) => {
            println!("\n{:<46} {:<6} detail", "check", "result");
            for c in &checks {
                println!(
                    "{:<46} {:<6} {}",
                    c.name,
                    if c.ok { "PASS" } else { "FAIL" },
                    c.detail
                );
            }
            let failed = checks.iter().filter(|c| !c.ok).count();
            println!("\n{} passed, {} failed", checks.len() - failed, failed);
            if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(dev: &Device, args: &Args) -> Result<Vec<Check>, Error> {
    let n = match dev {
        Device::Gpu(gpu) => {
            let (major, minor) = gpu.driver_version()?;
            let module = lookahead::launch::module_for(gpu.context(), demo_kernels::PTX)?;
            println!(
                "  GPU: {} (sm_{}), driver CUDA {major}.{minor}, loaded the sm_{} module",
                gpu.name(),
                gpu.compute_capability(),
                module.arch()
            );
            args.n.unwrap_or(1 << 24)
        }
        Device::Emulator(emu) => {
            println!(
                "  device: CPU emulator, {} worker thread(s), no GPU",
                emu.worker_count()
            );
            args.n.unwrap_or(1 << 20)
        }
    };
    let seed = args.seed.unwrap_or_else(rand::random);
    println!("  n = {n}, seed = {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let started = std::time::Instant::now();
    let mut checks = Vec::new();
    for &memory in dev.memories() {
        checks.extend(check_memory(dev, memory, n, &mut rng)?);
    }
    if let Device::Emulator(_) = dev {
        println!(
            "  emulated {} kernel launches in {:.2} s",
            5 * dev.memories().len(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(checks)
}

/// Runs every kernel on `memory` (fresh random inputs) and checks it against the CPU.
fn check_memory(
    dev: &Device,
    memory: &str,
    n: usize,
    rng: &mut rand::rngs::StdRng,
) -> Result<Vec<Check>, Error> {
    let mut checks = Vec::new();
    let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let a: f32 = rng.gen_range(-4.0..4.0);

    // saxpy
    let dx = Buffer::new(dev, memory, &x)?;
    let mut dy = Buffer::new(dev, memory, &y)?;
    let cfg = LaunchConfig::for_len(n, demo_kernels::BLOCK_SIZE);
    launch!(dev, demo_kernels::saxpy::launch, cfg, [a], &dx, &mut dy)?;
    dev.synchronize()?;
    let got = dy.read(dev)?;
    let worst = (0..n)
        .map(|i| (got[i] - a.mul_add(x[i], y[i])).abs())
        .fold(0.0f32, f32::max);
    checks.push(Check {
        name: format!("saxpy on {memory} memory"),
        ok: worst <= 1e-6,
        detail: format!("max |err| = {worst:.2e}"),
    });

    // reduction with atomics, on inputs whose f32 sum is exact in any order
    let sum_input = reduction_input(n, rng);
    let dsum = Buffer::new(dev, memory, &sum_input.values)?;
    let mut out = Buffer::new(dev, memory, &[0.0f32])?;
    launch!(
        dev,
        demo_kernels::reduce_sum::launch,
        reduction_config(n),
        [],
        &dsum,
        &mut out
    )?;
    dev.synchronize()?;
    let (ok, detail) = exact_sum::check(out.read(dev)?[0], sum_input.sum);
    checks.push(Check {
        name: format!("reduce_sum (atomics) on {memory} memory"),
        ok,
        detail,
    });

    // prefetching copies: y is poisoned with NaN first, so an unwritten element fails.
    type Copy = fn(&Device, LaunchConfig, &Buffer, &mut Buffer) -> Result<(), Error>;
    let copies: [(&str, Copy, LaunchConfig); 3] = [
        (
            "copy_prefetch_l2",
            |d, c, x, y| launch!(d, demo_kernels::copy_prefetch_l2::launch, c, [], x, y),
            LaunchConfig::grid_stride(n, demo_kernels::BLOCK_SIZE, 1024),
        ),
        (
            "copy_prefetch_l2_evict_last",
            |d, c, x, y| {
                launch!(
                    d,
                    demo_kernels::copy_prefetch_l2_evict_last::launch,
                    c,
                    [],
                    x,
                    y
                )
            },
            LaunchConfig::grid_stride(n, demo_kernels::BLOCK_SIZE, 1024),
        ),
        (
            "copy_prefetch_bulk",
            |d, c, x, y| launch!(d, demo_kernels::copy_prefetch_bulk::launch, c, [], x, y),
            LaunchConfig::grid_stride(n, demo_kernels::BLOCK_SIZE, 264),
        ),
    ];
    for (kernel, launch, cfg) in copies {
        let mut dy = Buffer::new(dev, memory, &vec![f32::NAN; n])?;
        launch(dev, cfg, &dx, &mut dy)?;
        dev.synchronize()?;
        let got = dy.read(dev)?;
        let wrong = got
            .iter()
            .zip(&x)
            .filter(|(g, w)| g.to_bits() != w.to_bits())
            .count();
        checks.push(Check {
            name: format!("{kernel} on {memory} memory"),
            ok: wrong == 0,
            detail: format!("{wrong} of {n} elements differ"),
        });
    }
    Ok(checks)
}

/// `reduce_sum`'s input: `n` small non-negative integers whose f32 sum is exact in any order
/// of additions ([`exact_sum`]), so the kernel's result must equal it bit for bit.
fn reduction_input(n: usize, rng: &mut rand::rngs::StdRng) -> SumInput {
    exact_sum::input(n, |k| rng.gen_range(0..k))
}

/// `reduce_sum`'s launch: a grid-stride loop over `n` on at most 1024 blocks.
fn reduction_config(n: usize) -> LaunchConfig {
    LaunchConfig::grid_stride(n, demo_kernels::BLOCK_SIZE, demo_kernels::BLOCK_SIZE * 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use lookahead_bench::args::try_parse;

    #[test]
    fn arguments_are_checked_before_anything_runs() {
        Args::command().debug_assert();
        for bad in [["--n", "0"], ["--n", "-5"], ["--seed", "-1"]] {
            let e = try_parse::<Args>(&bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("'{} <", bad[0])) && e.contains("expected a whole number"),
                "{e}"
            );
        }
        let ok = try_parse::<Args>(&["--n", "1000", "--emulator"]).unwrap();
        assert_eq!((ok.n, ok.emulator, ok.gpu), (Some(1000), true, false));
        assert!(try_parse::<Args>(&["--gpu", "--emulator"]).is_err());
    }

    #[test]
    fn a_size_too_large_for_host_memory_is_refused_with_the_flag_named() {
        for n in ["100000000000", "18446744073709551615"] {
            let e = try_parse::<Args>(&["--n", n]).unwrap_err().to_string();
            assert!(
                e.contains(&format!("--n {n}: needs")) && e.contains("use a smaller --n"),
                "{e}"
            );
        }
        let e = try_parse::<Args>(&["--n", "18446744073709551616"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("is too large for this option"), "{e}");
    }

    /// On the emulator's default size (1M) and the reduction's grid (1024 blocks of 256
    /// threads: 4 grid-stride passes), the sum in the kernel's order passes the check and the
    /// same sum without one block's 256 elements of one pass, or one warp, fails it.
    #[test]
    fn the_reduction_check_is_exact_and_catches_a_missing_block() {
        let n = 1 << 20;
        let data = reduction_input(n, &mut rand::rngs::StdRng::seed_from_u64(3));
        let threads = reduction_config(n).threads() as usize;
        let sum = |left_out: &dyn Fn(usize) -> bool| {
            exact_sum::grid_stride_sum(&data.values, threads, left_out)
        };
        assert!(exact_sum::check(sum(&|_| false), data.sum).0);
        let (ok, detail) = exact_sum::check(sum(&|i| i / 256 == 3000), data.sum);
        assert!(!ok, "a missing block of 256 passed: {detail}");
        let (ok, detail) = exact_sum::check(sum(&|i| (i % threads) / 32 == 11), data.sum);
        assert!(!ok, "a missing warp passed: {detail}");
    }
}
