//! The main demo: runs the Rust kernels of `gpu-kernels` (compiled to PTX by
//! `lookahead-builder`) through their typed `#[kernel]` launchers: saxpy, the atomic
//! reduction and the three prefetch kernels, on device memory and on managed (Unified)
//! memory, checking every result against a CPU reference on fresh random inputs.
//!
//! `cargo run --release -p lookahead-examples --bin demo [-- --n 16777216]`

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use cudarc::driver::{CudaSlice, CudaStream, UnifiedSlice};
use lookahead::launch::LaunchConfig;
use lookahead::{Error, Gpu};
use rand::{Rng, SeedableRng};

#[derive(Parser)]
#[command(about = "Run Lookahead's Rust kernels on the GPU and check them against the CPU")]
struct Args {
    /// Elements per vector.
    #[arg(long, default_value_t = 1 << 24)]
    n: usize,
    /// Random seed (default: a fresh one each run).
    #[arg(long)]
    seed: Option<u64>,
}

/// Either kind of memory the kernels run on.
enum Buffer {
    Device(CudaSlice<f32>),
    Managed(UnifiedSlice<f32>),
}

impl Buffer {
    fn new(gpu: &Gpu, managed: bool, data: &[f32]) -> Result<Self, Error> {
        let during = |call| move |source| Error::Driver { call, source };
        if managed {
            // SAFETY: f32 is valid for any bit pattern; filled right below.
            let mut buf = unsafe { gpu.context().alloc_unified::<f32>(data.len(), true) }
                .map_err(during("cuMemAllocManaged"))?;
            buf.as_mut_slice()
                .map_err(during("host access"))?
                .copy_from_slice(data);
            Ok(Buffer::Managed(buf))
        } else {
            Ok(Buffer::Device(
                gpu.stream()
                    .clone_htod(data)
                    .map_err(during("cuMemcpyHtoD"))?,
            ))
        }
    }

    fn read(&self, stream: &Arc<CudaStream>) -> Result<Vec<f32>, Error> {
        let during = |call| move |source| Error::Driver { call, source };
        stream
            .synchronize()
            .map_err(during("cuStreamSynchronize"))?;
        match self {
            Buffer::Device(d) => stream.clone_dtoh(d).map_err(during("cuMemcpyDtoH")),
            Buffer::Managed(m) => Ok(m.as_slice().map_err(during("host access"))?.to_vec()),
        }
    }
}

struct Check {
    name: String,
    ok: bool,
    detail: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    println!("Lookahead demo: Rust kernels compiled to PTX by lookahead-builder");
    println!("  device toolchain: {}", gpu_kernels::PTX_TOOLCHAIN);
    let built: Vec<String> = gpu_kernels::PTX
        .iter()
        .map(|(a, _)| format!("sm_{a}"))
        .collect();
    println!("  PTX built for: {}", built.join(", "));

    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("\nNo CUDA GPU here: {e}.");
            println!("Nothing was run on a GPU and nothing was checked. The kernels were compiled");
            println!(
                "and validated (see `bash scripts/test.sh`); run this demo on a machine with an"
            );
            println!("NVIDIA GPU and driver to execute them.");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&gpu, &args) {
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

fn run(gpu: &Gpu, args: &Args) -> Result<Vec<Check>, Error> {
    let (major, minor) = gpu.driver_version()?;
    let module = lookahead::launch::module_for(gpu.context(), gpu_kernels::PTX)?;
    println!(
        "  GPU: {} (sm_{}), driver CUDA {major}.{minor}, loaded the sm_{} module",
        gpu.name(),
        gpu.compute_capability(),
        module.arch()
    );
    let seed = args.seed.unwrap_or_else(rand::random);
    println!("  n = {}, seed = {seed}", args.n);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let n = args.n;
    let mut checks = Vec::new();
    for managed in [false, true] {
        let memory = if managed { "managed" } else { "device" };
        let x: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let y: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let a: f32 = rng.gen_range(-4.0..4.0);

        // saxpy
        let dx = Buffer::new(gpu, managed, &x)?;
        let mut dy = Buffer::new(gpu, managed, &y)?;
        let cfg = LaunchConfig::for_len(n, gpu_kernels::BLOCK_SIZE);
        match (&dx, &mut dy) {
            (Buffer::Device(dx), Buffer::Device(dy)) => {
                gpu_kernels::saxpy::launch(gpu, cfg, a, dx, dy)
            }
            (Buffer::Managed(dx), Buffer::Managed(dy)) => {
                gpu_kernels::saxpy::launch(gpu, cfg, a, dx, dy)
            }
            _ => unreachable!("both buffers have the same kind"),
        }?;
        gpu.synchronize()?;
        let got = dy.read(gpu.stream())?;
        let worst = (0..n)
            .map(|i| (got[i] - a.mul_add(x[i], y[i])).abs())
            .fold(0.0f32, f32::max);
        checks.push(Check {
            name: format!("saxpy on {memory} memory"),
            ok: worst <= 1e-6,
            detail: format!("max |err| = {worst:.2e}"),
        });

        // reduction with atomics
        let mut out = Buffer::new(gpu, managed, &[0.0f32])?;
        let cfg =
            LaunchConfig::grid_stride(n, gpu_kernels::BLOCK_SIZE, gpu_kernels::BLOCK_SIZE * 4);
        match (&dx, &mut out) {
            (Buffer::Device(dx), Buffer::Device(o)) => {
                gpu_kernels::reduce_sum::launch(gpu, cfg, dx, o)
            }
            (Buffer::Managed(dx), Buffer::Managed(o)) => {
                gpu_kernels::reduce_sum::launch(gpu, cfg, dx, o)
            }
            _ => unreachable!("both buffers have the same kind"),
        }?;
        gpu.synchronize()?;
        let got = out.read(gpu.stream())?[0] as f64;
        let want: f64 = x.iter().map(|&v| v as f64).sum();
        let scale: f64 = x.iter().map(|&v| v.abs() as f64).sum();
        let rel = (got - want).abs() / scale;
        checks.push(Check {
            name: format!("reduce_sum (atomics) on {memory} memory"),
            ok: rel <= 1e-5,
            detail: format!("got {got:.4}, want {want:.4}, |err|/sum|x| = {rel:.1e}"),
        });

        // prefetching copies: y is poisoned with NaN first, so an unwritten element fails.
        type Copy = fn(&Gpu, LaunchConfig, &Buffer, &mut Buffer) -> Result<(), Error>;
        let copies: [(&str, Copy, LaunchConfig); 3] = [
            (
                "copy_prefetch_l2",
                |g, c, x, y| match (x, y) {
                    (Buffer::Device(x), Buffer::Device(y)) => {
                        gpu_kernels::copy_prefetch_l2::launch(g, c, x, y)
                    }
                    (Buffer::Managed(x), Buffer::Managed(y)) => {
                        gpu_kernels::copy_prefetch_l2::launch(g, c, x, y)
                    }
                    _ => unreachable!("both buffers have the same kind"),
                },
                LaunchConfig::grid_stride(n, gpu_kernels::BLOCK_SIZE, 1024),
            ),
            (
                "copy_prefetch_l2_evict_last",
                |g, c, x, y| match (x, y) {
                    (Buffer::Device(x), Buffer::Device(y)) => {
                        gpu_kernels::copy_prefetch_l2_evict_last::launch(g, c, x, y)
                    }
                    (Buffer::Managed(x), Buffer::Managed(y)) => {
                        gpu_kernels::copy_prefetch_l2_evict_last::launch(g, c, x, y)
                    }
                    _ => unreachable!("both buffers have the same kind"),
                },
                LaunchConfig::grid_stride(n, gpu_kernels::BLOCK_SIZE, 1024),
            ),
            (
                "copy_prefetch_bulk",
                |g, c, x, y| match (x, y) {
                    (Buffer::Device(x), Buffer::Device(y)) => {
                        gpu_kernels::copy_prefetch_bulk::launch(g, c, x, y)
                    }
                    (Buffer::Managed(x), Buffer::Managed(y)) => {
                        gpu_kernels::copy_prefetch_bulk::launch(g, c, x, y)
                    }
                    _ => unreachable!("both buffers have the same kind"),
                },
                LaunchConfig::grid_stride(n, gpu_kernels::BLOCK_SIZE, 264),
            ),
        ];
        for (kernel, launch, cfg) in copies {
            let mut dy = Buffer::new(gpu, managed, &vec![f32::NAN; n])?;
            launch(gpu, cfg, &dx, &mut dy)?;
            gpu.synchronize()?;
            let got = dy.read(gpu.stream())?;
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
    }
    Ok(checks)
}
