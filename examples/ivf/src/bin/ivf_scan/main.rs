//! # ivf_scan
//!
//! The scan kernel against the hardware's streaming read rate, in one run: resident
//! searches of small batches (queries near a few random clusters) and of one large warm
//! batch (dozens of queries per hot cluster), beside [`ivf_kernels::read_sum()`], a plain
//! read-only reduction over as many bytes.
//!
//! A scan's bytes are what its pairs read: for each (query, probed list) pair, the list's
//! vectors; pairs that share a list read it again, often from L2, so the scan can pass the
//! reduction's rate. Its FP32 rate counts 2 x dim flops per (pair, vector).
//!
//! ```text
//! ivf_scan --gib 1 --sizes 16,64 --warm-percent 50 --reps 20 --out results
//! ```

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

type Res<T> = Result<T, Box<dyn StdError>>;

#[derive(Parser, Debug)]
#[command(
    name = "ivf_scan",
    about = "The IVF scan kernel against a streaming read of as many bytes"
)]
struct Args {
    /// GiB of list vectors.
    #[arg(long, default_value_t = 1.0, value_parser = float_range(0.0, None))]
    gib: f64,
    /// Floats per vector.
    #[arg(long, default_value_t = 128, value_parser = in_range(1usize, ivf_kernels::MAX_DIM))]
    dim: usize,
    /// Lists.
    #[arg(long, default_value_t = 2048, value_parser = at_least(1usize))]
    nlist: usize,
    /// Lists probed per query.
    #[arg(long, default_value_t = 8, value_parser = at_least(1usize))]
    nprobe: usize,
    /// Small batch sizes (queries near 4 random clusters).
    #[arg(long, value_delimiter = ',', default_value = "16,64", value_parser = in_range(1usize, 65536))]
    sizes: Vec<usize>,
    /// The large warm batch probes this percentage of the lists.
    #[arg(long, default_value_t = 50.0, value_parser = float_range(0.0, Some(100.0)))]
    warm_percent: f64,
    /// No large warm batch.
    #[arg(long)]
    no_warm: bool,
    /// Queries per hot cluster of the large warm batch.
    #[arg(long, default_value_t = 32, value_parser = at_least(1usize))]
    per_cluster: usize,
    /// Timed searches per row (after one warm-up), and timed reads.
    #[arg(long, default_value_t = 20, value_parser = at_least(1usize))]
    reps: usize,
    /// Seed.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Where the Markdown and CSV go.
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

/// The run: the rows measured and written; whether every search found the first's
/// neighbours.
fn start(args: &Args) -> Res<bool> {
    let out = OutDir::create(&args.out)?;
    let gpu = Gpu::new(0)?;
    let header = RunHeader::for_gpu(&gpu)?;
    print!("{}", header.markdown());
    let rows = measure::run(&gpu, args)?;
    report::write(&out, &header, args, &rows)?;
    Ok(rows.iter().all(|r| r.same))
}
