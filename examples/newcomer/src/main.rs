//! A newcomer's first Lookahead program, written from `docs/guide.md` alone (what was
//! missing there is in `docs/newcomer.md`): launches the two kernels of `newcomer-kernels`
//! (a moving average with `#[prefetch_next]`, a shared-memory histogram with atomics)
//! through their typed launchers on device memory and on managed memory, and checks both
//! against a CPU reference on fresh random inputs, the outputs poisoned first (NaN for the
//! average; random starting counts for the histogram, which adds to its bins).
//!
//! Without a GPU (or with `--emulator`) the same launchers run the same kernels on the CPU
//! emulator, on host memory, checked the same way; `--gpu` demands the GPU instead (no GPU
//! is an error). Exits non-zero on any mismatch or error.
//!
//! `cargo run --release -p lookahead-newcomer [-- --n 4194307] [--seed 7] [--emulator | --gpu]`

use std::error::Error as StdError;
use std::process::ExitCode;

use lookahead::emu::Emulator;
use lookahead::launch::LaunchConfig;
use lookahead::{DriverContext, Error, Gpu, ManagedBuffer};
use newcomer_kernels::{histogram, moving_average, BINS};
use rand::{Rng, SeedableRng};

type Result<T> = std::result::Result<T, Box<dyn StdError>>;

/// Threads per block.
const BLOCK: u32 = 256;

/// The command line: `clap`, with a range on each number so a bad one is refused with the
/// flag named before anything runs (negative numbers reach the check instead of being taken
/// for flags).
#[derive(clap::Parser, Debug)]
#[command(name = "lookahead-newcomer", allow_negative_numbers = true)]
#[command(about = "A moving average and a histogram on the GPU (or the CPU emulator), checked")]
struct Args {
    /// Elements of the input (at least 1; default 4194307 on a GPU, 262147 on the emulator).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    n: Option<u64>,
    /// Random seed (default: a fresh one each run).
    #[arg(long)]
    seed: Option<u64>,
    /// Run on the CPU emulator even if a GPU is present.
    #[arg(long)]
    emulator: bool,
    /// Run on GPU 0 or fail: no CUDA GPU is an error, never a fallback to the emulator.
    #[arg(long, conflicts_with = "emulator")]
    gpu: bool,
}

/// Host memory the program holds per element at its peak: the input floats and bytes, the
/// output, its CPU reference and a staging copy.
const HOST_BYTES_PER_ELEMENT: u64 = 21;

fn parse_args() -> Result<Args> {
    use clap::Parser;
    let args = Args::try_parse().unwrap_or_else(|e| e.exit());
    check_size(&args)?;
    Ok(args)
}

/// Refuses an `--n` whose vectors cannot fit in host memory before anything is allocated.
fn check_size(args: &Args) -> Result<()> {
    if let Some(n) = args.n {
        lookahead_bench::args::host_memory_for("--n", n, HOST_BYTES_PER_ELEMENT)?;
    }
    Ok(())
}

/// One run's inputs.
struct Inputs {
    radius: u32,
    x: Vec<f32>,
    data: Vec<u8>,
    /// The histogram's starting counts (it adds to them).
    start: Vec<u32>,
}

/// What the kernels produced.
struct Outputs {
    y: Vec<f32>,
    bins: Vec<u32>,
}

impl Inputs {
    fn random(n: usize, rng: &mut impl Rng) -> Self {
        Inputs {
            radius: rng.gen_range(1..=8),
            x: (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect(),
            data: (0..n).map(|_| rng.gen()).collect(),
            start: (0..BINS).map(|_| rng.gen_range(0..1 << 20)).collect(),
        }
    }

    /// The CPU reference, summing in the kernel's order so the average matches bit for bit.
    fn reference(&self) -> Outputs {
        let n = self.x.len();
        let r = self.radius as usize;
        let y = (0..n)
            .map(|i| {
                let (lo, hi) = (i.saturating_sub(r), (i + r + 1).min(n));
                let mut sum = 0.0f32;
                for v in &self.x[lo..hi] {
                    sum += v;
                }
                sum / (hi - lo) as f32
            })
            .collect();
        let mut bins = self.start.clone();
        for &b in &self.data {
            bins[b as usize] += 1;
        }
        Outputs { y, bins }
    }
}

/// Launch shapes: grid-stride loops over `n` with few enough blocks that each thread runs
/// at least 8 iterations (so `#[prefetch_next]` has iterations ahead to fetch), and at most
/// 1024 blocks for the average, 256 for the histogram (one global atomic per bin and block).
fn configs(n: usize) -> (LaunchConfig, LaunchConfig) {
    let blocks = |max: u32| (n.div_ceil(BLOCK as usize * 8) as u32).clamp(1, max);
    (
        LaunchConfig::grid_stride(n, BLOCK, blocks(1024)),
        LaunchConfig::grid_stride(n, BLOCK, blocks(256)),
    )
}

fn run_device_memory(gpu: &Gpu, inp: &Inputs) -> lookahead::Result<Outputs> {
    let n = inp.x.len();
    let (avg_cfg, hist_cfg) = configs(n);
    let s = gpu.stream();
    let x = s.clone_htod(&inp.x).during("cuMemcpyHtoD")?;
    let mut y = s.clone_htod(&vec![f32::NAN; n]).during("cuMemcpyHtoD")?;
    let data = s.clone_htod(&inp.data).during("cuMemcpyHtoD")?;
    let mut bins = s.clone_htod(&inp.start).during("cuMemcpyHtoD")?;
    moving_average::launch(gpu, avg_cfg, inp.radius, &x, &mut y)?;
    histogram::launch(gpu, hist_cfg, &data, &mut bins)?;
    gpu.synchronize()?;
    Ok(Outputs {
        y: s.clone_dtoh(&y).during("cuMemcpyDtoH")?,
        bins: s.clone_dtoh(&bins).during("cuMemcpyDtoH")?,
    })
}

fn run_managed_memory(gpu: &Gpu, inp: &Inputs) -> lookahead::Result<Outputs> {
    let n = inp.x.len();
    let (avg_cfg, hist_cfg) = configs(n);
    // Written by the CPU: every page starts on the host.
    let x = ManagedBuffer::from_slice(gpu, &inp.x)?;
    let mut y = ManagedBuffer::from_slice(gpu, &vec![f32::NAN; n])?;
    let data = ManagedBuffer::from_slice(gpu, &inp.data)?;
    let mut bins = ManagedBuffer::from_slice(gpu, &inp.start)?;
    moving_average::launch(gpu, avg_cfg, inp.radius, &x, &mut y)?;
    histogram::launch(gpu, hist_cfg, &data, &mut bins)?;
    // `to_vec` waits for the kernels that use the buffer.
    Ok(Outputs {
        y: y.to_vec()?,
        bins: bins.to_vec()?,
    })
}

/// Runs both kernels on the emulator (its prefetch trace on) and checks, besides the
/// results, that `moving_average` prefetched exactly `x[i + 2 * stride]` in iteration `i`
/// whenever that element exists: what the thread reads two iterations later.
fn run_emulator(emu: &Emulator, inp: &Inputs) -> Result<(Outputs, bool)> {
    let n = inp.x.len();
    let (avg_cfg, hist_cfg) = configs(n);
    let mut y = vec![f32::NAN; n];
    let mut bins = inp.start.clone();
    emu.take_prefetch_trace();
    moving_average::launch(emu, avg_cfg, inp.radius, &inp.x, &mut y)?;
    let trace = emu.take_prefetch_trace();
    histogram::launch(emu, hist_cfg, &inp.data, &mut bins)?;

    let stride = avg_cfg.threads() as usize;
    let base = inp.x.as_ptr() as usize;
    let expected = n.saturating_sub(2 * stride); // iterations i with i + 2 * stride < n
    let misplaced = trace
        .iter()
        .filter(|r| {
            let i = r.iteration.unwrap_or(usize::MAX);
            i >= expected || r.address != base + (i + 2 * stride) * size_of::<f32>()
        })
        .count();
    let ok = trace.len() == expected && misplaced == 0;
    println!(
        "  #[prefetch_next] in moving_average (emulator trace): {}  ({} prefetches, {expected} expected, {misplaced} not of x[i + 2 * stride])",
        if ok { "PASS" } else { "FAIL" },
        trace.len()
    );
    Ok((Outputs { y, bins }, ok))
}

/// Compares with the reference; prints one line per kernel; true when both match.
fn check(memory: &str, inp: &Inputs, got: &Outputs) -> bool {
    let want = inp.reference();
    let differ: Vec<usize> = (0..want.y.len())
        .filter(|&i| got.y[i].to_bits() != want.y[i].to_bits())
        .collect();
    let avg_ok = differ.is_empty();
    let first = differ
        .first()
        .map(|&i| format!(", first at {i}: got {}, want {}", got.y[i], want.y[i]))
        .unwrap_or_default();
    println!(
        "  moving_average (radius {}) on {memory} memory: {}  ({} of {} elements differ{first})",
        inp.radius,
        if avg_ok { "PASS" } else { "FAIL" },
        differ.len(),
        want.y.len()
    );
    let wrong_bins = (0..BINS).filter(|&b| got.bins[b] != want.bins[b]).count();
    let hist_ok = wrong_bins == 0;
    println!(
        "  histogram on {memory} memory: {}  ({wrong_bins} of {BINS} bins differ)",
        if hist_ok { "PASS" } else { "FAIL" }
    );
    avg_ok && hist_ok
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => {
            println!("all checks passed");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("MISMATCH: some checks failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool> {
    let args = parse_args()?;
    let built: Vec<String> = newcomer_kernels::PTX
        .iter()
        .map(|(cc, _)| format!("sm_{cc}"))
        .collect();
    println!("newcomer kernels, PTX built for {}", built.join(", "));
    println!("  device toolchain: {}", newcomer_kernels::PTX_TOOLCHAIN);

    let gpu = if args.emulator {
        println!("--emulator: running on the CPU emulator, not on a GPU");
        None
    } else {
        match Gpu::new(0) {
            Ok(gpu) => Some(gpu),
            Err(e @ (Error::NoDriver | Error::NoDevice { .. })) if args.gpu => {
                return Err(
                    format!("--gpu asks for a CUDA GPU, and there is none here: {e}").into(),
                );
            }
            Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
                println!("No CUDA GPU here ({e}): running the same kernels on the CPU EMULATOR");
                println!("(lookahead::emu); nothing below ran on a GPU.");
                None
            }
            Err(e) => return Err(e.into()),
        }
    };

    let seed = args.seed.unwrap_or_else(rand::random);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut all_ok = true;
    match &gpu {
        Some(gpu) => {
            let (major, minor) = gpu.driver_version()?;
            let module = lookahead::launch::module_for(gpu.context(), newcomer_kernels::PTX)?;
            println!(
                "device: GPU 0, {} (sm_{}), driver CUDA {major}.{minor}, running the sm_{} PTX",
                gpu.name(),
                gpu.compute_capability(),
                module.arch()
            );
            let n = args.n.map_or((1 << 22) + 3, |n| n as usize);
            println!("n = {n}, seed = {seed}");
            type Run = fn(&Gpu, &Inputs) -> lookahead::Result<Outputs>;
            let runs: [(&str, Run); 2] = [
                ("device", run_device_memory),
                ("managed", run_managed_memory),
            ];
            for (memory, run) in runs {
                let inp = Inputs::random(n, &mut rng);
                let got = run(gpu, &inp)?;
                all_ok &= check(memory, &inp, &got);
            }
        }
        None => {
            let emu = Emulator::new().prefetch_trace(true);
            println!(
                "device: CPU emulator ({} worker threads), no GPU",
                emu.worker_count()
            );
            let n = args.n.map_or((1 << 18) + 3, |n| n as usize);
            println!("n = {n}, seed = {seed}");
            let inp = Inputs::random(n, &mut rng);
            let (got, prefetch_ok) = run_emulator(&emu, &inp)?;
            all_ok &= prefetch_ok;
            all_ok &= check("host", &inp, &got);
        }
    }
    Ok(all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[test]
    fn arguments_are_checked_before_anything_runs() {
        Args::command().debug_assert();
        for bad in [["--n", "0"], ["--n", "-5"], ["--seed", "x"]] {
            let e = Args::try_parse_from(["lookahead-newcomer", bad[0], bad[1]])
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("'{} <", bad[0])), "{e}");
        }
        let ok = Args::try_parse_from(["lookahead-newcomer", "--n", "7", "--emulator"]).unwrap();
        assert_eq!((ok.n, ok.emulator, ok.gpu), (Some(7), true, false));
        assert!(Args::try_parse_from(["lookahead-newcomer", "--gpu", "--emulator"]).is_err());
    }

    #[test]
    fn a_size_too_large_for_host_memory_is_refused_with_the_flag_named() {
        for n in ["100000000000", "18446744073709551615"] {
            let args = Args::try_parse_from(["lookahead-newcomer", "--n", n]).unwrap();
            let e = check_size(&args).unwrap_err().to_string();
            assert!(
                e.contains(&format!("--n {n}: needs")) && e.contains("use a smaller --n"),
                "{e}"
            );
        }
        let args = Args::try_parse_from(["lookahead-newcomer", "--n", "1000"]).unwrap();
        assert!(check_size(&args).is_ok());
    }
}
