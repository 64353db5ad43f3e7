//! The IVF policy benchmark: for each Unified Memory policy and each probed fraction of a
//! multi-GiB index, a cold search (every list page on the host first) and a warm one (a
//! second batch of queries near the same clusters right after), each repeated, against the
//! same searches with everything resident and the pinned-memory copy rate measured in the
//! same run. Prints a table and the benchmark's targets met or missed, writes Markdown, CSV
//! and an SVG plot into `--out` (checked for writing before the GPU is opened), and records
//! device and driver.
//!
//! The program's parts: the flags and the run's order here, the searches and what they
//! find in `measure`, the table, targets, CSV and plot in `report`; the data set and the
//! query batches come from `lookahead_ivf::workload`.
//!
//! `cargo run --release -p lookahead-ivf --bin ivf_bench -- --gib 4 --out results`

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
use lookahead_uvm::{MachineProfile, Policy};

use crate::measure::Session;
use crate::report::ReportContext;

type Res<T> = Result<T, Box<dyn StdError>>;

const GIB: f64 = (1u64 << 30) as f64;

#[derive(Parser, Debug)]
#[command(
    name = "ivf_bench",
    about = "Cold and warm IVF search under every Unified Memory policy"
)]
struct Args {
    /// Index size in GiB of list vectors (kept under the GPU's free memory).
    #[arg(long, default_value_t = 4.0, value_parser = float_range(0.0, None))]
    gib: f64,
    /// Dimensions (1 to 128).
    #[arg(long, default_value_t = 128, value_parser = in_range(1usize, ivf_kernels::MAX_DIM))]
    dim: usize,
    /// Inverted lists.
    #[arg(long, default_value_t = 2048, value_parser = at_least(1usize))]
    nlist: usize,
    /// Lists probed per query (at most --nlist).
    #[arg(long, default_value_t = 2, value_parser = at_least(1usize))]
    nprobe: usize,
    /// Queries per hot cluster in each batch.
    #[arg(long, default_value_t = 4, value_parser = at_least(1usize))]
    queries_per_cluster: usize,
    /// Probed fractions to aim for, in percent of the lists: the queries come from
    /// `fraction * nlist / nprobe` clusters.
    #[arg(long, value_delimiter = ',', value_parser = float_range(0.0, Some(100.0)),
          default_values_t = vec![1.0, 3.0, 6.0, 12.0, 25.0, 50.0, 100.0])]
    percent: Vec<f64>,
    /// Policies to measure.
    #[arg(long, value_delimiter = ',', default_values_t = vec![
        Policy::Faults, Policy::KernelHints, Policy::PrefetchAll, Policy::HostSelected,
        Policy::GpuRequests, Policy::RemoteMap, Policy::GpuPull, Policy::Auto])]
    policies: Vec<Policy>,
    /// Cold + warm pairs per policy and fraction (the table shows medians).
    #[arg(long, default_value_t = 3, value_parser = at_least(1usize))]
    reps: usize,
    /// Threads of the GPU-driven policy's prefetch service.
    #[arg(long, default_value_t = 32, value_parser = at_least(1usize))]
    service_threads: usize,
    /// Smallest batch of adjacent requests a service thread takes, KiB.
    #[arg(long, default_value_t = 8192, value_parser = at_least(0u64))]
    service_min_batch_kib: u64,
    /// Largest prefetch call of the service, MiB.
    #[arg(long, default_value_t = 32, value_parser = at_least(1u64))]
    service_piece_mib: u64,
    /// Largest prefetch call of the host engine (host-selected, prefetch-all), MiB.
    #[arg(long, default_value_t = 32, value_parser = at_least(1u64))]
    engine_piece_mib: u64,
    /// The GPU-driven pull kernel copies on every this-many-th SM (0: every 4th).
    #[arg(long, default_value_t = 0, value_parser = at_least(0u32))]
    pull_copy_every: u32,
    /// Map the index for the GPU with the host as preferred location too (so the driver
    /// never migrates mapped pages by itself).
    #[arg(long)]
    prefer_host: bool,
    /// Where the CSV, Markdown and SVG go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Seed.
    #[arg(long, default_value_t = 42, value_parser = at_least(0u64))]
    seed: u64,
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

/// Opens the results folder, then the GPU, then runs.
fn start(args: &Args) -> Res<bool> {
    let out = OutDir::create(&args.out)?;
    let gpu = Gpu::new(0)?;
    run(&gpu, args, &out)
}

/// The index, the pinned copy rate and the machine profile, every fraction and policy
/// measured, the report written; whether every policy found the resident search's
/// neighbours.
fn run(gpu: &Gpu, args: &Args, out: &OutDir) -> Res<bool> {
    let n = measure::index_vectors(gpu, args)?;
    let header = RunHeader::for_gpu(gpu)?;
    print!("{}", header.markdown());
    let mut built = measure::build_index(gpu, args, n)?;
    let pinned = lookahead_bench::stats::pinned_htod_gbps(gpu)?;
    println!("pinned cudaMemcpy H2D: {pinned:.1} GB/s");
    let profile = MachineProfile::probe(gpu)?;
    println!("probe: {}", profile.summary());
    let mut mach = measure::machinery(gpu, args, &profile)?;
    let found = Session::new(args, &mut built, &mut mach).measure_all()?;
    let service = mach.stop_service();
    let ctx = ReportContext {
        args,
        header: &header,
        built: &built,
        pinned,
        profile: &profile,
        service,
    };
    report::write(out, &ctx, &found)?;
    if found.rows.iter().any(|r| !r.same_top_k) {
        eprintln!("error: a policy changed the search results");
        return Ok(false);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use lookahead_bench::args::try_parse;

    #[test]
    fn arguments_are_checked() {
        Args::command().debug_assert();
        let a = try_parse::<Args>(&["--percent", "1,50", "--policies", "faults,gpu-pull"]).unwrap();
        assert_eq!(a.percent, vec![1.0, 50.0]);
        assert_eq!(a.policies, vec![Policy::Faults, Policy::GpuPull]);
        for (args, want) in [
            (&["--gib", "-1"][..], "greater than 0"),
            (&["--gib", "0"], "greater than 0"),
            (&["--dim", "129"], "from 1 to 128"),
            (&["--reps", "0"], "at least 1"),
            (&["--percent", "5,150"], "at most 100"),
            (
                &["--nlist", "8", "--nprobe", "9"],
                "--nprobe 9: expected at most --nlist (8)",
            ),
        ] {
            let e = try_parse::<Args>(args).unwrap_err().to_string();
            assert!(e.contains(args[0]) && e.contains(want), "{args:?}: {e}");
        }
    }
}
