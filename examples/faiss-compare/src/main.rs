//! Lookahead's IVF-Flat search beside FAISS's `GpuIndexIVFFlat` on the same data, in two
//! steps around FAISS's own program (`cpp/faiss_side.cpp`, built and run by
//! `scripts/faiss-baseline.sh`):
//!
//! - `faiss_compare run --dir D --csv ours.csv`: generates the data set, trains and builds our
//!   index (timed), writes the data set for FAISS into `D` (checksummed), and measures our
//!   side into `ours.csv` (and the run's device and driver into `D/run_header.md`);
//! - `faiss_compare report --ours ours.csv --faiss faiss.csv --header D/run_header.md --out
//!   results`: joins both sides into `faiss.md`, `faiss.csv` and `faiss.svg`.
//!
//! `scripts/faiss-baseline.sh` says the whole sequence; docs/faiss.md explains the numbers.

mod export;
mod measure;
mod report;
mod rows;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lookahead::Gpu;
use lookahead_bench::args::{at_least, float_range, in_range};
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_ivf::workload::{self, Batches};
use lookahead_uvm::{MachineProfile, ServiceConfig, UvmRuntime};

use crate::export::{exact_neighbours, DataSet};
use crate::measure::Ours;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Parser, Debug)]
#[command(
    name = "faiss_compare",
    about = "Lookahead's IVF search beside FAISS GPU on the same data"
)]
struct Cli {
    #[command(subcommand)]
    step: Step,
}

#[derive(Subcommand, Debug)]
enum Step {
    /// Generate and write the data set, build our index, measure our side.
    Run(RunArgs),
    /// Join FAISS's rows and ours into the results.
    Report(ReportArgs),
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Where the data set for FAISS goes (about 1.1x the index's size).
    #[arg(long)]
    dir: PathBuf,
    /// Our rows' CSV.
    #[arg(long)]
    csv: PathBuf,
    /// Vectors in the index, in units of 2^20.
    #[arg(long, default_value_t = 2.0, value_parser = float_range(0.0, None))]
    mvectors: f64,
    /// Dimensions.
    #[arg(long, default_value_t = 128, value_parser = in_range(1usize, ivf_kernels::MAX_DIM))]
    dim: usize,
    /// Inverted lists (and generated clusters).
    #[arg(long, default_value_t = 2048, value_parser = at_least(1usize))]
    nlist: usize,
    /// Lists probed per query.
    #[arg(long, default_value_t = 8, value_parser = at_least(1usize))]
    nprobe: usize,
    /// Queries in the pool (the largest throughput search takes all of them).
    #[arg(long, default_value_t = 65536, value_parser = at_least(128usize))]
    pool: usize,
    /// Queries whose exact neighbours are found on the CPU for recall.
    #[arg(long, default_value_t = 1000, value_parser = at_least(1usize))]
    exact: usize,
    /// Probed fractions of the cold and warm searches, percent of the lists.
    #[arg(long, value_delimiter = ',', default_values_t = vec![6.0, 25.0], value_parser = float_range(0.0, Some(100.0)))]
    percent: Vec<f64>,
    /// Cold queries per hot cluster.
    #[arg(long, default_value_t = 4, value_parser = at_least(1usize))]
    queries_per_cluster: usize,
    /// Timed batches per latency row.
    #[arg(long, default_value_t = 300, value_parser = at_least(1usize))]
    batches: usize,
    /// Repetitions of each throughput, cold and warm search.
    #[arg(long, default_value_t = 5, value_parser = at_least(1usize))]
    reps: usize,
    /// Seed of the data set.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

impl RunArgs {
    /// `Err(message)` when the flags do not go together.
    fn validate(&self) -> Result<(), String> {
        lookahead_bench::args::at_most("--nprobe", self.nprobe, "--nlist", self.nlist)
    }
}

#[derive(clap::Args, Debug)]
struct ReportArgs {
    /// Our rows (from `run`).
    #[arg(long)]
    ours: PathBuf,
    /// FAISS's rows (from faiss_side).
    #[arg(long)]
    faiss: PathBuf,
    /// The run's header (device, driver, host), written by `run`.
    #[arg(long)]
    header: PathBuf,
    /// A line on FAISS's build (commit, settings) for the results.
    #[arg(long, default_value = "")]
    faiss_build: String,
    /// Where faiss.md, faiss.csv and faiss.svg go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.step {
        Step::Run(a) => match a.validate() {
            Ok(()) => run(&a),
            Err(e) => Err(e.into()),
        },
        Step::Report(a) => write_report(&a),
    };
    lookahead_bench::exit_code(result, "The comparison needs one.")
}

/// The data set: clustered vectors, the pool of queries (from its own random stream), the
/// exact neighbours of the pool's first queries; cold sets come once the index exists.
fn generate(a: &RunArgs) -> (lookahead_ivf::data::Clusters, DataSet) {
    let spec = workload::clustered(a.dim, a.nlist, a.seed);
    let n = (a.mvectors * (1 << 20) as f64).round().max(1.0) as usize;
    let base = spec.points(n, 0, None);
    let queries = spec.points(a.pool, 2, None);
    let exact = exact_neighbours(&base, &queries, a.exact, ivf_kernels::K);
    let ds = DataSet {
        base,
        centroids: lookahead_ivf::data::Vectors {
            dim: a.dim,
            data: Vec::new(),
        },
        queries,
        cold_sets: Vec::new(),
        exact,
        nprobe: a.nprobe,
        k: ivf_kernels::K,
    };
    (spec, ds)
}

fn run(a: &RunArgs) -> Res<bool> {
    std::fs::create_dir_all(&a.dir)?;
    let gpu = Gpu::new(0)?;
    let header = RunHeader::for_gpu(&gpu)?;
    print!("{}", header.markdown());
    std::fs::write(a.dir.join("run_header.md"), header.markdown())?;
    let (spec, mut ds) = generate(a);
    let sample = spec.points(a.nlist * 32, 1, None);
    let (mut index, mut rows) = measure::build(&gpu, &ds.base, &sample, a.nlist, a.seed)?;
    ds.centroids.data = index.layout().centroids.clone();
    for (round, &pct) in a.percent.iter().enumerate() {
        let b = Batches::aimed_at(
            &spec,
            index.layout(),
            pct,
            a.nprobe,
            a.queries_per_cluster,
            round as u64,
        );
        ds.cold_sets.push((format!("cold{pct}"), b));
    }
    ds.write(&a.dir)?;
    println!(
        "data set written to {} (checksums in meta.txt)",
        a.dir.display()
    );
    let rt = UvmRuntime::new(
        &gpu,
        a.nlist,
        MachineProfile::cached_or_probe(&gpu)?,
        ServiceConfig::default(),
    )?;
    let mut ours = Ours {
        index: &mut index,
        rt: &rt,
        ds: &ds,
        batches: a.batches,
        reps: a.reps,
    };
    rows.extend(ours.latency()?);
    rows.extend(ours.throughput()?);
    rows.extend(ours.cold_and_warm()?);
    let mut csv = String::from(rows::HEADER);
    for r in &rows {
        println!("{}", r.to_csv());
        csv += &format!("\n{}", r.to_csv());
    }
    std::fs::write(&a.csv, csv + "\n")?;
    Ok(true)
}

fn write_report(a: &ReportArgs) -> Res<bool> {
    let out = OutDir::create(&a.out)?;
    let faiss = rows::read(&a.faiss)?;
    let ours = rows::read(&a.ours)?;
    let header = std::fs::read_to_string(&a.header)?;
    let pairs = report::pairs(&faiss, &ours);
    if pairs.is_empty() {
        return Err("no row of FAISS's matches a row of ours".into());
    }
    let table = report::table(&pairs);
    println!("{}", table.to_markdown());
    let mut md = format!("# Lookahead beside FAISS GPU, same data\n\nWritten by `examples/faiss-compare` (`scripts/faiss-baseline.sh`); explained in [docs/faiss.md](../docs/faiss.md). Every row of both sides: [faiss.csv](faiss.csv); the ratios: [faiss.svg](faiss.svg).\n\n{header}");
    if !a.faiss_build.is_empty() {
        md += &format!("- FAISS: {}\n", a.faiss_build);
    }
    md += &format!("\n{}", table.to_markdown());
    out.write("faiss.md", md)?;
    let all: Vec<String> = faiss.iter().chain(&ours).map(rows::Row::to_csv).collect();
    out.write(
        "faiss.csv",
        format!("{}\n{}\n", rows::HEADER, all.join("\n")),
    )?;
    out.write("faiss.svg", report::chart(&pairs).to_svg()?)?;
    Ok(true)
}
