//! IVF-Flat search over inverted lists in Unified Memory, end to end: generate (or load) a
//! data set, train coarse centroids, build the lists in managed memory, search with a
//! Unified Memory policy, and check recall@10 against exact brute force on a sample.
//!
//! `cargo run --release -p lookahead-ivf --bin ivf_search -- --vectors 1000000 --policy auto`

use std::error::Error as StdError;
use std::process::ExitCode;

use clap::Parser;
use lookahead::Gpu;
use lookahead_bench::args::{at_least, at_most, in_range, readable_file, Validate};
use lookahead_bench::stats::{quantile, Summary};
use lookahead_ivf::data::{read_fvecs, Clusters, Vectors};
use lookahead_ivf::gpu::{GpuIndex, ScanMethod, SearchOutcome, SearchParams};
use lookahead_ivf::workload;
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig, UvmRuntime};

type Res<T> = Result<T, Box<dyn StdError>>;

#[derive(Parser, Debug)]
#[command(
    name = "ivf_search",
    about = "IVF-Flat search over lists in Unified Memory, with a selectable prefetch policy"
)]
struct Args {
    /// Vectors to generate (ignored with --fvecs).
    #[arg(long, default_value_t = 1_000_000, value_parser = at_least(1usize))]
    vectors: usize,
    /// Dimensions (1 to 128).
    #[arg(long, default_value_t = 128, value_parser = in_range(1usize, ivf_kernels::MAX_DIM))]
    dim: usize,
    /// Inverted lists.
    #[arg(long, default_value_t = 1024, value_parser = at_least(1usize))]
    nlist: usize,
    /// Queries.
    #[arg(long, default_value_t = 1000, value_parser = at_least(1usize))]
    queries: usize,
    /// Lists probed per query (at most --nlist).
    #[arg(long, default_value_t = 8, value_parser = at_least(1usize))]
    nprobe: usize,
    /// faults, kernel-hints, prefetch-all, host-selected, gpu-requests, remote-map, gpu-pull
    /// or auto.
    #[arg(long, default_value = "auto")]
    policy: Policy,
    /// Load base vectors from a .fvecs file instead of generating them.
    #[arg(long)]
    fvecs: Option<std::path::PathBuf>,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 42, value_parser = at_least(0u64))]
    seed: u64,
    /// Most blocks of the scan kernel (0: two per multiprocessor).
    #[arg(long, default_value_t = 0, value_parser = at_least(0u32))]
    max_blocks: u32,
    /// Queries checked against brute force.
    #[arg(long, default_value_t = 20, value_parser = at_least(0usize))]
    recall_sample: usize,
    /// Threads of the GPU-driven requests' prefetch service.
    #[arg(long, default_value_t = 32, value_parser = at_least(1usize))]
    service_threads: usize,
    /// Searches to run with the same queries (the first finds the lists on the host, the
    /// later ones find what the policy left resident); each prints its own line.
    #[arg(long, default_value_t = 1, value_parser = at_least(1usize))]
    runs: usize,
}

// Everything that can be checked without the GPU is, so a bad command line fails at once,
// on a machine with a GPU or without.
impl Validate for Args {
    fn validate(&self) -> Result<(), String> {
        at_most("--nprobe", self.nprobe, "--nlist", self.nlist)?;
        match &self.fvecs {
            Some(path) => readable_file("--fvecs", path),
            None => at_most("--nlist", self.nlist, "--vectors", self.vectors),
        }
    }
}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    lookahead_bench::exit_code(
        run(&args),
        "The IVF search runs on a GPU; its CPU reference is tested by \
         `cargo test -p lookahead-ivf`.",
    )
}

fn run(args: &Args) -> Res<bool> {
    let gpu = Gpu::new(0)?;
    let spec = workload::clustered(args.dim, args.nlist, args.seed);
    let data = load_data(args, &spec)?;
    let (mut index, mut mach) = build(&gpu, args, &data)?;
    let queries = match &args.fvecs {
        Some(_) => data.prefix(args.queries),
        None => spec.points(args.queries, 1, None),
    };
    let (out, consistent) = search(args, &mut index, &mut mach, &queries)?;
    print_outcome(&gpu, args, &data, &index, &queries, &out);
    let r = recall(args, &data, &queries, &out);
    if let Some(report) = mach.stop_service() {
        println!(
            "prefetch service: {} requests, {:.1} MB, {} failed",
            report.requests,
            report.bytes as f64 / 1e6,
            report.failed
        );
    }
    if !consistent {
        eprintln!("error: repeated searches returned different neighbours");
    }
    Ok(r >= 0.9 && consistent)
}

/// The base vectors: read from `--fvecs`, or generated from `spec`.
fn load_data(args: &Args, spec: &Clusters) -> Res<Vectors> {
    let data = match &args.fvecs {
        Some(path) => {
            read_fvecs(path, usize::MAX).map_err(|e| format!("reading {}: {e}", path.display()))?
        }
        None => spec.points(args.vectors, 0, None),
    };
    if data.dim == 0 || data.dim > ivf_kernels::MAX_DIM || data.len() < args.nlist {
        return Err(format!(
            "need 1..={} dimensions and at least nlist vectors (got dim {}, {} vectors)",
            ivf_kernels::MAX_DIM,
            data.dim,
            data.len()
        )
        .into());
    }
    Ok(data)
}

/// Trains the centroids on a sample, builds the index in managed memory, and sets it up
/// once for the policy (mapping, pull cache), so that no search pays for it.
fn build(gpu: &Gpu, args: &Args, data: &Vectors) -> Res<(GpuIndex, UvmRuntime)> {
    let sample = data.prefix(args.nlist * 32);
    let mut index = workload::build_index(gpu, data, &sample, args.nlist, 8, args.seed)?;
    let profile = MachineProfile::cached_or_probe(gpu)?;
    let config = ServiceConfig {
        threads: args.service_threads,
        ..ServiceConfig::default()
    };
    let mut mach = UvmRuntime::new(gpu, args.nlist, profile, config)?;
    if !matches!(args.policy, Policy::GpuRequests | Policy::Auto) {
        // Only GPU-driven requests use the prefetch service.
        mach.stop_service();
    }
    let t = index.lists_mut().prepare(args.policy)?;
    println!(
        "set up for {} in {:.0} ms (mapped for the GPU: {})",
        args.policy.name(),
        t * 1e3,
        index.lists().is_mapped_for_gpu()
    );
    Ok((index, mach))
}

/// `--runs` searches of the same queries; the first one's outcome, and whether every later
/// one found the same neighbours.
fn search(
    args: &Args,
    index: &mut GpuIndex,
    mach: &mut UvmRuntime,
    queries: &Vectors,
) -> Res<(SearchOutcome, bool)> {
    let params = SearchParams {
        nprobe: args.nprobe,
        policy: args.policy,
        expected_passes: args.runs as f64,
        max_blocks: args.max_blocks,
        pull_copy_every: 0,
        scan: ScanMethod::Auto,
    };
    let out = index.search(queries, params, mach)?;
    let mut consistent = true;
    for run in 1..args.runs {
        let again = index.search(queries, params, mach)?;
        println!(
            "run {}: {:.2} ms ({} asked for by the GPU, scan {:.2} ms), same results: {}",
            run + 1,
            again.seconds * 1e3,
            again.requested,
            again.scan_seconds * 1e3,
            again.ids == out.ids
        );
        consistent &= again.ids == out.ids;
    }
    Ok((out, consistent))
}

/// What the first search did: the index, the policy, the bytes, the lists and the times.
fn print_outcome(
    gpu: &Gpu,
    args: &Args,
    data: &Vectors,
    index: &GpuIndex,
    queries: &Vectors,
    out: &SearchOutcome,
) {
    println!(
        "{} (sm_{}): {} vectors x {} dims in {} lists ({:.2} GiB of managed memory)",
        gpu.name(),
        gpu.compute_capability(),
        data.len(),
        data.dim,
        args.nlist,
        index.index_bytes() as f64 / (1u64 << 30) as f64
    );
    println!(
        "searched {} queries, nprobe {}: policy {} ({} asked), {} lists probed = {:.1} MB, \
         {:.2} ms, {:.1} GB/s on needed bytes",
        queries.len(),
        args.nprobe,
        out.policy.name(),
        args.policy.name(),
        out.probed_lists,
        out.needed_bytes as f64 / 1e6,
        out.seconds * 1e3,
        out.needed_bytes as f64 / out.seconds / 1e9
    );
    println!(
        "lists: {} asked for (gpu-requests) or copied (gpu-pull) by the GPU, {} arrived before \
         they were read, {} went ahead on the fault path, {} timed out waiting; GPU part \
         {:.2} ms, scan {:.2} ms ({} work items)",
        out.requested,
        out.arrived,
        out.went_ahead,
        out.timed_out,
        out.gpu_seconds * 1e3,
        out.scan_seconds * 1e3,
        out.items
    );
    if out.pull_copy_seconds > 0.0 {
        println!(
            "gpu-pull: the kernel copied {:.1} MB in {:.2} ms = {:.1} GB/s (GPU clock)",
            out.needed_bytes as f64 / 1e6,
            out.pull_copy_seconds * 1e3,
            out.needed_bytes as f64 / out.pull_copy_seconds / 1e9
        );
    }
    let lens: Vec<f64> = (0..index.layout().nlist())
        .map(|l| index.layout().list_len(l) as f64)
        .collect();
    println!("vectors per list: {}", distribution(&lens));
    let probed: Vec<f64> = out
        .list_queries
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| c as f64)
        .collect();
    println!("pairs per probed list: {}", distribution(&probed));
}

/// Recall@10 of the first `--recall-sample` queries against brute force, printed.
fn recall(args: &Args, data: &Vectors, queries: &Vectors, out: &SearchOutcome) -> f64 {
    let n = args.recall_sample.min(queries.len());
    let r = workload::recall(data, queries, out, n);
    println!("recall@10 on {n} queries against brute force: {r:.3}");
    r
}

/// `min / median / p99 / max (n values)` of `v` (median and p99 interpolated between
/// ranks), or `none`.
fn distribution(v: &[f64]) -> String {
    match (Summary::of(v), quantile(v, 0.99)) {
        (Some(s), Some(p99)) => format!(
            "min {} / median {} / p99 {:.1} / max {} ({} values)",
            s.min, s.median, p99, s.max, s.count
        ),
        _ => "none".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use lookahead_bench::args::try_parse;

    #[test]
    fn arguments_are_checked() {
        Args::command().debug_assert();
        assert_eq!(try_parse::<Args>(&["--runs", "3"]).unwrap().runs, 3);
        let e = try_parse::<Args>(&["--runs", "0"]).unwrap_err().to_string();
        assert!(
            e.contains("'--runs <RUNS>'") && e.contains("at least 1"),
            "{e}"
        );
        let e = try_parse::<Args>(&["--dim", "0"]).unwrap_err().to_string();
        assert!(e.contains("from 1 to 128"), "{e}");
        let e = try_parse::<Args>(&["--vectors", "-10"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'--vectors <VECTORS>'"), "{e}");
        let e = try_parse::<Args>(&["--nlist", "4"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--nprobe 8: expected at most --nlist (4)"),
            "{e}"
        );
    }

    #[test]
    fn arguments_are_checked_before_the_gpu_is_looked_for() {
        for (args, want) in [
            (
                &["--fvecs", "/nonexistent"][..],
                "--fvecs /nonexistent: cannot be read (",
            ),
            (
                &["--vectors", "10", "--nlist", "1000"],
                "--nlist 1000: expected at most --vectors (10)",
            ),
            (
                &["--nlist", "8", "--nprobe", "9"],
                "--nprobe 9: expected at most --nlist (8)",
            ),
        ] {
            let e = try_parse::<Args>(args).unwrap_err().to_string();
            assert!(e.contains(want), "{args:?}: {e}");
        }
        // --fvecs gives the vectors, so --vectors does not bound --nlist then.
        let file = std::env::temp_dir().join(format!("ivf_search_args_{}", std::process::id()));
        std::fs::write(&file, b"").unwrap();
        let fvecs = file.to_str().unwrap();
        let a = try_parse::<Args>(&["--fvecs", fvecs, "--vectors", "10", "--nlist", "1000"]);
        std::fs::remove_file(&file).unwrap();
        assert!(a.is_ok(), "{a:?}");
    }

    #[test]
    fn distribution_of_counts() {
        let v: Vec<f64> = (1..=101).map(|x| x as f64).collect();
        assert_eq!(
            distribution(&v),
            "min 1 / median 51 / p99 100.0 / max 101 (101 values)"
        );
        assert_eq!(distribution(&[]), "none");
    }
}
