//! The main demo: loads the PTX that `lookahead-builder` compiled from the Rust kernels in
//! `gpu-kernels`, runs saxpy, the atomic reduction and the three prefetch kernels on device
//! memory and on managed (Unified) memory, and checks every result against a CPU
//! reference on fresh random inputs.
//!
//! `cargo run --release -p lookahead-examples --bin demo [-- --n 16777216]`

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg, UnifiedSlice};
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

    fn push<'a>(&'a mut self, launch: &mut cudarc::driver::LaunchArgs<'a>) {
        match self {
            Buffer::Device(d) => launch.arg(d),
            Buffer::Managed(m) => launch.arg(m),
        };
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
    let module = gpu.load_ptx(gpu_kernels::PTX)?;
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
        let mut dx = Buffer::new(gpu, managed, &x)?;
        let mut dy = Buffer::new(gpu, managed, &y)?;
        let f = module.function("saxpy")?;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(&a);
        dx.push(&mut l);
        dy.push(&mut l);
        l.arg(&n);
        // SAFETY: (f32, *const f32, *mut f32, usize) as the kernel declares.
        finish(gpu, "saxpy", unsafe { l.launch(grid(n)) })?;
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
        let blocks = (gpu_kernels::BLOCK_SIZE * 4).min(grid(n).grid_dim.0);
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (gpu_kernels::BLOCK_SIZE, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = module.function("reduce_sum")?;
        let mut l = gpu.stream().launch_builder(&f);
        dx.push(&mut l);
        l.arg(&n);
        out.push(&mut l);
        // SAFETY: (*const f32, usize, *mut f32) as the kernel declares.
        finish(gpu, "reduce_sum", unsafe { l.launch(cfg) })?;
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
        for (kernel, ahead) in [
            ("copy_prefetch_l2", 4096usize),
            ("copy_prefetch_l2_evict_last", 4096),
            ("copy_prefetch_bulk", 2),
        ] {
            let mut dy = Buffer::new(gpu, managed, &vec![f32::NAN; n])?;
            let f = module.function(kernel)?;
            let mut l = gpu.stream().launch_builder(&f);
            dx.push(&mut l);
            dy.push(&mut l);
            l.arg(&n);
            l.arg(&ahead);
            // SAFETY: (*const f32, *mut f32, usize, usize) as the kernels declare.
            finish(gpu, kernel, unsafe { l.launch(grid(n)) })?;
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

fn grid(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u32).div_ceil(gpu_kernels::BLOCK_SIZE), 1, 1),
        block_dim: (gpu_kernels::BLOCK_SIZE, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Reports a failed launch by kernel name, then synchronises so a fault inside the
/// kernel is reported here too rather than at some later call.
fn finish<T>(
    gpu: &Gpu,
    kernel: &'static str,
    launched: Result<T, cudarc::driver::DriverError>,
) -> Result<(), Error> {
    launched.map_err(|source| Error::Driver {
        call: kernel,
        source,
    })?;
    gpu.synchronize()
}
