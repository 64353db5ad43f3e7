//! Small-batch IVF search latency, with and without CUDA graphs: batches of 1, 4, 16 and 64
//! queries, arriving back to back and at a fixed rate, each batch's work queued launch by
//! launch or replayed as one captured graph (kernel arguments updated in place when the
//! size changes), for the everything-resident search and the GPU-driven pull (warm: its
//! lists cached). Prints p50/p99 latency and throughput per configuration, checks that every
//! graph batch returns the launched batch's neighbours (and the full search's, for a
//! sample), and writes Markdown and CSV into `--out`.
//!
//! The program's parts: the flags and the run's order here, the timed batches in
//! `measure`, the table and targets in `report`; the data set and the batches come from
//! `lookahead_ivf::workload`.
//!
//! `cargo run --release -p lookahead-ivf --bin ivf_latency -- --gib 1 --out results`

mod measure;
mod report;

use std::error::Error as StdError;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use lookahead::Gpu;
use lookahead_bench::args::{at_least, at_most, float_range, in_range, Validate};
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_ivf::workload;
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig, UvmRuntime};
use rand::{rngs::StdRng, SeedableRng};

type Res<T> = Result<T, Box<dyn StdError>>;

#[derive(Parser, Debug)]
#[command(
    name = "ivf_latency",
    about = "Small-batch IVF search latency with and without CUDA graphs"
)]
struct Args {
    /// Index size in GiB of list vectors (kept under the GPU's free memory).
    #[arg(long, default_value_t = 1.0, value_parser = float_range(0.0, None))]
    gib: f64,
    /// Dimensions (1 to 128).
    #[arg(long, default_value_t = 128, value_parser = in_range(1usize, ivf_kernels::MAX_DIM))]
    dim: usize,
    /// Inverted lists.
    #[arg(long, default_value_t = 2048, value_parser = at_least(1usize))]
    nlist: usize,
    /// Lists probed per query (at most --nlist).
    #[arg(long, default_value_t = 8, value_parser = at_least(1usize))]
    nprobe: usize,
    /// Batch sizes, in queries.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,4,16,64",
        value_parser = in_range(1usize, 4096)
    )]
    sizes: Vec<usize>,
    /// Timed batches per configuration.
    #[arg(long, default_value_t = 400, value_parser = at_least(10usize))]
    batches: usize,
    /// Untimed batches before each configuration.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Fixed-rate arrivals come every this many times the launched batches' back-to-back
    /// median latency of the same size.
    #[arg(long, default_value_t = 2.0, value_parser = float_range(1.0, None))]
    rate_factor: f64,
    /// Seed of the data set and the queries.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Folder for ivf_latency.md and ivf_latency.csv.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

impl Validate for Args {
    fn validate(&self) -> Result<(), String> {
        at_most("--nprobe", self.nprobe, "--nlist", self.nlist)
    }
}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    lookahead_bench::exit_code(start(&args), "This benchmark needs one.")
}

fn start(args: &Args) -> Res<bool> {
    let out = OutDir::create(&args.out)?;
    let gpu = Gpu::new(0)?;
    run(&gpu, args, &out)
}

/// The index and every batch, both searches at every size, the report written; whether
/// every batch found the reference neighbours.
fn run(gpu: &Gpu, args: &Args, out: &OutDir) -> Res<bool> {
    let header = RunHeader::for_gpu(gpu)?;
    print!("{}", header.markdown());
    let (spec, mut index) = measure::build_index(gpu, args)?;
    let mut mach = UvmRuntime::new(
        gpu,
        args.nlist,
        MachineProfile::cached_or_probe(gpu)?,
        ServiceConfig::default(),
    )?;
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0x5eed);
    let pools: Vec<Vec<_>> = args
        .sizes
        .iter()
        .map(|&n| {
            (0..args.batches + args.warmup)
                .map(|b| workload::near_random_clusters(&spec, &mut rng, n, args.seed + b as u64))
                .collect()
        })
        .collect();
    let mut rows = Vec::new();
    for policy in [Policy::Faults, Policy::GpuPull] {
        rows.extend(measure::policy(
            &mut index, &mut mach, &pools, policy, args,
        )?);
    }
    mach.stop_service();
    report::write(out, &header, args, &rows)?;
    Ok(rows.iter().all(|r| r.same))
}
