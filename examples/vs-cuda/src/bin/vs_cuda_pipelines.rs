//! The pipelined kernels (a streaming reduction, a 2-D stencil with halo tiles, a tiled
//! FP32 GEMM and a row gather, staged into shared memory by asynchronous copies) against
//! their CUDA C++ twins in one run: every copy kind the GPU has (`cp.async`; `cp.async.bulk`
//! from sm_90) at 2, 3 and 4 stages, each entry checked against a CPU reference in both
//! languages on poisoned outputs, then timed with CUDA events (the two alternating launch by
//! launch). The streaming kernels are compared with the run's own device-to-device copy
//! rate, the GEMM with the FP32 peak. Then each kernel written with `stages = auto, copy =
//! auto` tunes itself, and its choice is compared with every candidate measured exhaustively.
//!
//! Writes `vs_cuda_pipelines.md`, `vs_cuda_pipelines.csv` and `vs_cuda_pipelines_tuned.csv`
//! into `--out`.
//!
//! `cargo run --release -p vs-cuda --bin vs_cuda_pipelines -- --out results`

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::builder::PossibleValuesParser;
use clap::Parser;
use lookahead_bench::args::{at_least, float_range, Validate};
use rand::rngs::StdRng;
use rand::SeedableRng;

use vs_cuda::pipelines::{self, PipeMeta, PIPE_BENCHES};
use vs_cuda::run::Reps;
use vs_cuda::session::{self, Session};
use vs_cuda::Res;

#[derive(Parser, Debug)]
#[command(
    about = "Pipelined kernels: Rust-built PTX versus CUDA C++ (NVRTC), every copy kind and stage count"
)]
struct Args {
    /// Folder for vs_cuda_pipelines.{md,csv}.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Timed launches per entry and language.
    #[arg(long, default_value_t = 20, value_parser = at_least(1usize))]
    reps: usize,
    /// Untimed launches per entry and language before timing.
    #[arg(long, default_value_t = 3, value_parser = at_least(0usize))]
    warmup: usize,
    /// Random seed (default: a fresh one each run).
    #[arg(long, value_parser = at_least(0u64))]
    seed: Option<u64>,
    /// Multiplies every problem size (1.0: 1 GiB inputs, a 4096-cubed GEMM).
    #[arg(long, default_value_t = 1.0, value_parser = float_range(0.0, None))]
    scale: f64,
    /// Only these kernels (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = PossibleValuesParser::new(PIPE_BENCHES.map(|(name, _)| name)))]
    only: Vec<String>,
}

impl Validate for Args {}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    lookahead_bench::exit_code(
        run(&args).map(session::verdict),
        "Nothing was run, compiled by NVRTC or checked.",
    )
}

fn run(args: &Args) -> Res<bool> {
    let reps = Reps {
        timed: args.reps,
        warmup: args.warmup,
    };
    let mut s = Session::open(&args.out, args.seed, reps)?;
    let (cc, seed) = (s.gpu.compute_capability(), s.meta.seed);
    let m = PipeMeta {
        meta: s.meta.clone(),
        copy_gbps: pipelines::copy_rate(&s.env, reps)?,
        peak_gflops: pipelines::fp32_peak(s.gpu.context(), cc)?,
    };
    println!("vs_cuda_pipelines: pipelined kernels, Rust-built PTX versus CUDA C++ twins");
    print!("{}", m.meta.header.markdown());
    println!(
        "- copy {:.0} GB/s (read + written), FP32 peak {:.0} GFLOP/s, seed {seed}",
        m.copy_gbps, m.peak_gflops
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut rows, mut tuned) = (Vec::new(), Vec::new());
    for (name, make) in PIPE_BENCHES {
        if !session::selected(&args.only, name) {
            continue;
        }
        let started = Instant::now();
        let mut b = make(&s.env, &mut rng, args.scale)?;
        println!(
            "{name}: inputs ready in {:.1} s, {:.0} MB moved per launch at least",
            started.elapsed().as_secs_f64(),
            b.bytes() / 1e6
        );
        rows.extend(pipelines::run_pipe_bench(
            &mut s.env,
            b.as_mut(),
            &s.compiled.langs,
            reps,
            s.gpu.context(),
            cc,
        )?);
        tuned.push(pipelines::run_tuned(
            &mut s.env,
            b.as_mut(),
            &s.compiled.langs[0],
            reps,
            s.gpu.context(),
        )?);
    }
    pipelines::write_outputs(&s.out, &m, &rows, &tuned)?;
    println!(
        "wrote {}/vs_cuda_pipelines.{{md,csv}}; {} of {} entries pass their checks in both languages",
        s.out.path().display(),
        rows.iter().filter(|r| r.ok).count(),
        rows.len()
    );
    println!(
        "stages = auto: the tuned choice within 2% of the best candidate on {} of {} kernels",
        tuned.iter().filter(|r| r.meets_target()).count(),
        tuned.len()
    );
    Ok(rows.iter().all(|r| r.ok) && tuned.iter().all(|r| r.checks_ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use lookahead_bench::args::try_parse;

    #[test]
    fn arguments_are_checked_before_anything_runs() {
        Args::command().debug_assert();
        let a = try_parse::<Args>(&["--only", "pipe_gemm", "--scale", "0.01"]).unwrap();
        assert_eq!((a.only, a.scale), (vec!["pipe_gemm".to_string()], 0.01));
        let e = try_parse::<Args>(&["--only", "fft"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'fft'") && e.contains("pipe_reduce"), "{e}");
    }
}
