//! IVF-Flat search over inverted lists in Unified Memory, end to end: generate (or load) a
//! data set, train coarse centroids, build the lists in managed memory, search with a
//! Unified Memory policy, and check recall@10 against exact brute force on a sample.
//!
//! `cargo run --release -p lookahead-ivf --bin ivf_search -- --vectors 1000000 --policy auto`

use std::process::ExitCode;

use clap::Parser;
use lookahead::{Error, Gpu};
use lookahead_ivf::data::{read_fvecs, Clusters, Vectors};
use lookahead_ivf::gpu::{assign_on_gpu, GpuIndex, Machinery, SearchParams};
use lookahead_ivf::{cpu, index::IvfLayout};
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig};

#[derive(Parser)]
#[command(
    about = "IVF-Flat search over lists in Unified Memory, with a selectable prefetch policy"
)]
struct Args {
    /// Vectors to generate (ignored with --fvecs).
    #[arg(long, default_value_t = 1_000_000)]
    vectors: usize,
    /// Dimensions (at most 128).
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Inverted lists.
    #[arg(long, default_value_t = 1024)]
    nlist: usize,
    /// Queries.
    #[arg(long, default_value_t = 1000)]
    queries: usize,
    /// Lists probed per query.
    #[arg(long, default_value_t = 8)]
    nprobe: usize,
    /// faults, kernel-hints, prefetch-all, host-selected, gpu-requests, remote-map or auto.
    #[arg(long, default_value = "auto")]
    policy: Policy,
    /// Load base vectors from a .fvecs file instead of generating them.
    #[arg(long)]
    fvecs: Option<std::path::PathBuf>,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Most blocks of the scan kernel (0: two per multiprocessor).
    #[arg(long, default_value_t = 0)]
    max_blocks: u32,
    /// Queries checked against brute force.
    #[arg(long, default_value_t = 20)]
    recall_sample: usize,
    /// Threads of the GPU-driven requests' prefetch service.
    #[arg(long, default_value_t = 32)]
    service_threads: usize,
    /// Searches to run with the same queries (the first finds the lists on the host, the
    /// later ones find what the policy left resident); each prints its own line.
    #[arg(long, default_value_t = 1)]
    runs: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(ok) if ok => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("No CUDA GPU here: {e}. The IVF search runs on a GPU; its CPU reference is tested by `cargo test -p lookahead-ivf`.");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<bool, Error> {
    let gpu = Gpu::new(0)?;
    let spec = Clusters {
        dim: args.dim,
        clusters: args.nlist,
        spread: 4.0,
        sigma: 1.0,
        seed: args.seed,
    };
    let data: Vectors = match &args.fvecs {
        Some(path) => read_fvecs(path, usize::MAX).map_err(|e| {
            eprintln!("error: reading {}: {e}", path.display());
            Error::InvalidRange {
                start: 0,
                len: 0,
                limit: 0,
                reason: "unreadable .fvecs file",
            }
        })?,
        None => spec.points(args.vectors, 0, None),
    };
    if data.dim == 0 || data.dim > ivf_kernels::MAX_DIM || data.len() < args.nlist {
        eprintln!(
            "error: need 1..={} dimensions and at least nlist vectors (got dim {}, {} vectors)",
            ivf_kernels::MAX_DIM,
            data.dim,
            data.len()
        );
        return Ok(false);
    }
    let sample = Vectors {
        dim: data.dim,
        data: data.data[..data.dim * (args.nlist * 32).min(data.len())].to_vec(),
    };
    let centroids = cpu::kmeans_with(&sample, args.nlist, 8, args.seed, |c, v| {
        assign_on_gpu(&gpu, c, v)
    })?;
    let assign = assign_on_gpu(&gpu, &centroids, &data)?;
    let layout = IvfLayout::from_assignment(data.dim, centroids, &assign);
    let mut index = GpuIndex::new(&gpu, layout, &data)?;
    let profile = MachineProfile::cached_or_probe(&gpu)?;
    let config = ServiceConfig {
        threads: args.service_threads,
        ..ServiceConfig::default()
    };
    let mut mach = Machinery::new(&gpu, args.nlist, profile, config)?;
    if !matches!(args.policy, Policy::GpuRequests | Policy::Auto) {
        // Only GPU-driven requests use the prefetch service.
        mach.stop_service();
    }
    // Set up once (mapping, pull cache), so that no search pays for it.
    let t = index.prepare(args.policy)?;
    println!(
        "set up for {} in {:.0} ms (mapped for the GPU: {})",
        args.policy.name(),
        t * 1e3,
        index.is_mapped_for_gpu()
    );
    let queries = match &args.fvecs {
        Some(_) => Vectors {
            dim: data.dim,
            data: data.data[..data.dim * args.queries.min(data.len())].to_vec(),
        },
        None => spec.points(args.queries, 1, None),
    };
    let params = SearchParams {
        nprobe: args.nprobe,
        policy: args.policy,
        expected_passes: args.runs as f64,
        max_blocks: args.max_blocks,
        pull_copy_every: 0,
    };
    let out = index.search(&queries, params, &mut mach)?;
    let mut consistent = true;
    for run in 1..args.runs {
        let again = index.search(&queries, params, &mut mach)?;
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
        "searched {} queries, nprobe {}: policy {} ({} asked), {} lists probed = {:.1} MB, {:.2} ms, {:.1} GB/s on needed bytes",
        queries.len(), args.nprobe, out.policy.name(), args.policy.name(), out.probed_lists,
        out.needed_bytes as f64 / 1e6, out.seconds * 1e3, out.needed_bytes as f64 / out.seconds / 1e9
    );
    println!(
        "lists: {} asked for (gpu-requests) or copied (gpu-pull) by the GPU, {} arrived before they were read, {} went ahead on the fault path, {} timed out waiting; GPU part {:.2} ms, scan {:.2} ms ({} work items)",
        out.requested, out.arrived, out.went_ahead, out.timed_out, out.gpu_seconds * 1e3, out.scan_seconds * 1e3, out.items
    );
    if out.pull_copy_seconds > 0.0 {
        println!(
            "gpu-pull: the kernel copied {:.1} MB in {:.2} ms = {:.1} GB/s (GPU clock)",
            out.needed_bytes as f64 / 1e6,
            out.pull_copy_seconds * 1e3,
            out.needed_bytes as f64 / out.pull_copy_seconds / 1e9
        );
    }
    let lens: Vec<u64> = (0..index.layout().nlist())
        .map(|l| index.layout().list_len(l) as u64)
        .collect();
    println!("vectors per list: {}", spread(&lens));
    let probed: Vec<u64> = out
        .list_queries
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| c as u64)
        .collect();
    println!("pairs per probed list: {}", spread(&probed));
    let n = args.recall_sample.min(queries.len());
    let found: Vec<Vec<cpu::Hit>> = (0..n)
        .map(|q| {
            (0..ivf_kernels::K)
                .map(|j| {
                    (
                        out.dist[q * ivf_kernels::K + j],
                        out.ids[q * ivf_kernels::K + j],
                    )
                })
                .collect()
        })
        .collect();
    let exact: Vec<Vec<cpu::Hit>> = (0..n)
        .map(|q| cpu::brute_force(&data, queries.row(q), ivf_kernels::K))
        .collect();
    let r = cpu::recall(&found, &exact, ivf_kernels::K);
    println!("recall@10 on {n} queries against brute force: {r:.3}");
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

/// `min / median / p99 / max (n values)` of `v`.
fn spread(v: &[u64]) -> String {
    let mut v = v.to_vec();
    v.sort_unstable();
    if v.is_empty() {
        return "none".into();
    }
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    format!(
        "min {} / median {} / p99 {} / max {} ({} values)",
        v[0],
        at(0.5),
        at(0.99),
        v[v.len() - 1],
        v.len()
    )
}
