//! Small-batch IVF search latency, with and without CUDA graphs: batches of 1, 4, 16 and 64
//! queries, arriving back to back and at a fixed rate, each batch's work queued launch by
//! launch or replayed as one captured graph (kernel arguments updated in place when the
//! size changes), for the everything-resident search and the GPU-driven pull (warm: its
//! lists cached). Prints p50/p99 latency and throughput per configuration, checks that every
//! graph batch returns the launched batch's neighbours (and the full search's, for a
//! sample), and writes Markdown and CSV into `--out`.
//!
//! `cargo run --release -p lookahead-ivf --bin ivf_latency -- --gib 1 --out results`

use std::error::Error as StdError;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use lookahead::Gpu;
use lookahead_bench::args::{at_least, at_most, float_range, in_range, Validate};
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::table::Table;
use lookahead_ivf::data::{Clusters, Vectors};
use lookahead_ivf::gpu::{
    assign_on_gpu, vectors_that_fit, BatchSearch, GpuIndex, Machinery, SearchParams, Submit,
};
use lookahead_ivf::{cpu, index::IvfLayout};
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig};
use rand::{rngs::StdRng, Rng, SeedableRng};

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
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64", value_parser = in_range(1usize, 4096))]
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

/// How batches arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Arrival {
    BackToBack,
    /// One batch every this long.
    Every(Duration),
}

/// Latencies of one configuration, seconds, sorted.
struct Latencies(Vec<f64>);

impl Latencies {
    fn quantile(&self, q: f64) -> f64 {
        let i = ((self.0.len() - 1) as f64 * q).round() as usize;
        self.0[i]
    }
}

/// One configuration's numbers, both ways of submitting.
struct Row {
    policy: Policy,
    size: usize,
    arrival: Arrival,
    launches: Latencies,
    graph: Latencies,
    launches_qps: f64,
    graph_qps: f64,
    /// Host time to queue a batch's work (p50, seconds), launched and as a graph.
    launches_queue: f64,
    graph_queue: f64,
    same: bool,
    /// Back to back only: the full `GpuIndex::search` (policy choice, per-step events,
    /// statistics read back) on the same batches.
    full: Option<Latencies>,
}

fn run(gpu: &Gpu, args: &Args, out: &OutDir) -> Res<bool> {
    let header = RunHeader::for_gpu(gpu)?;
    print!("{}", header.markdown());
    let (spec, mut index) = build_index(gpu, args)?;
    let mut mach = Machinery::new(
        gpu,
        args.nlist,
        MachineProfile::cached_or_probe(gpu)?,
        ServiceConfig::default(),
    )?;
    let max = args.sizes.iter().copied().max().unwrap_or(1);
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0x5eed);
    let pools: Vec<Vec<Vectors>> = args
        .sizes
        .iter()
        .map(|&n| {
            (0..args.batches + args.warmup)
                .map(|b| batch_queries(&spec, &mut rng, n, args.seed + b as u64))
                .collect()
        })
        .collect();
    let mut rows = Vec::new();
    for policy in [Policy::Faults, Policy::GpuPull] {
        match policy {
            Policy::Faults => index.make_resident()?,
            _ => index.evict_to_host(&mach)?,
        }
        let mut batch = index.batch_search(max, params(args, policy))?;
        for (pool, &size) in pools.iter().zip(&args.sizes) {
            let reference = references(
                &mut index,
                &mut batch,
                &mut mach,
                pool,
                params(args, policy),
            )?;
            let mut b2b = measure(
                &mut index,
                &mut batch,
                pool,
                &reference,
                Arrival::BackToBack,
                args,
            )?;
            b2b.full = Some(full_search(
                &mut index,
                &mut mach,
                pool,
                params(args, policy),
                args,
            )?);
            let period = Duration::from_secs_f64(b2b.launches.quantile(0.5) * args.rate_factor);
            let fixed = measure(
                &mut index,
                &mut batch,
                pool,
                &reference,
                Arrival::Every(period),
                args,
            )?;
            for mut row in [b2b, fixed] {
                (row.policy, row.size) = (policy, size);
                println!("{}", summary(&row));
                rows.push(row);
            }
        }
    }
    mach.stop_service();
    let md = markdown(&header, args, &rows);
    out.write("ivf_latency.md", format!("# Small-batch IVF latency with CUDA graphs\n\nWritten by `examples/ivf/src/bin/ivf_latency.rs`; explained in [docs/graphs.md](../docs/graphs.md).\n\n{md}"))?;
    out.write("ivf_latency.csv", table(&rows).to_csv()?)?;
    println!("\n{md}");
    Ok(rows.iter().all(|r| r.same))
}

fn params(args: &Args, policy: Policy) -> SearchParams {
    SearchParams {
        nprobe: args.nprobe,
        policy,
        expected_passes: 2.0,
        max_blocks: 0,
        pull_copy_every: 0,
    }
}

/// `n` queries near 4 clusters drawn at random.
fn batch_queries(spec: &Clusters, rng: &mut StdRng, n: usize, stream: u64) -> Vectors {
    let hot: Vec<usize> = (0..4).map(|_| rng.gen_range(0..spec.clusters)).collect();
    spec.points(n, 1000 + stream, Some(&hot))
}

/// The launched batches' neighbours (warming the pull's cache too), each of the first ten
/// checked against the full search.
fn references(
    index: &mut GpuIndex,
    batch: &mut BatchSearch,
    mach: &mut Machinery,
    pool: &[Vectors],
    params: SearchParams,
) -> Res<Vec<Vec<u32>>> {
    let mut want = Vec::with_capacity(pool.len());
    for (i, q) in pool.iter().enumerate() {
        let (_, ids) = index.search_batch(batch, q, Submit::Launches)?;
        if i < 10 {
            let full = index.search(q, params, mach)?;
            if full.ids != ids {
                return Err(format!(
                    "batch {i} of {} queries: the batch search differs from the full search",
                    q.len()
                )
                .into());
            }
        }
        want.push(ids);
    }
    Ok(want)
}

/// Both ways of submitting, one configuration: latencies from arrival to results on the
/// host, throughput, and whether every batch gave the reference neighbours.
fn measure(
    index: &mut GpuIndex,
    batch: &mut BatchSearch,
    pool: &[Vectors],
    want: &[Vec<u32>],
    arrival: Arrival,
    args: &Args,
) -> lookahead::Result<Row> {
    let mut same = true;
    let mut one = |submit: Submit, same: &mut bool| -> lookahead::Result<(Latencies, f64, f64)> {
        for q in &pool[..args.warmup] {
            index.search_batch(batch, q, submit)?;
        }
        let mut lat = Vec::with_capacity(args.batches);
        let mut queue = Vec::with_capacity(args.batches);
        let start = Instant::now();
        for (i, q) in pool[args.warmup..].iter().enumerate() {
            let arrives = match arrival {
                Arrival::BackToBack => Instant::now(),
                Arrival::Every(p) => start + p * i as u32,
            };
            while Instant::now() < arrives {
                std::hint::spin_loop();
            }
            let (_, ids) = index.search_batch(batch, q, submit)?;
            lat.push(arrives.elapsed().as_secs_f64());
            queue.push(batch.last_queue_time().as_secs_f64());
            *same &= ids == want[args.warmup + i];
        }
        let queries: usize = pool[args.warmup..].iter().map(Vectors::len).sum();
        let qps = queries as f64 / start.elapsed().as_secs_f64();
        lat.sort_by(f64::total_cmp);
        queue.sort_by(f64::total_cmp);
        Ok((Latencies(lat), qps, Latencies(queue).quantile(0.5)))
    };
    let (launches, launches_qps, launches_queue) = one(Submit::Launches, &mut same)?;
    let (graph, graph_qps, graph_queue) = one(Submit::Graph, &mut same)?;
    Ok(Row {
        policy: Policy::Faults,
        size: 0,
        arrival,
        launches,
        graph,
        launches_qps,
        graph_qps,
        launches_queue,
        graph_queue,
        same,
        full: None,
    })
}

/// Back-to-back latencies of the full search on the timed batches.
fn full_search(
    index: &mut GpuIndex,
    mach: &mut Machinery,
    pool: &[Vectors],
    params: SearchParams,
    args: &Args,
) -> lookahead::Result<Latencies> {
    let mut lat = Vec::with_capacity(args.batches);
    for q in &pool[args.warmup..] {
        let t = Instant::now();
        index.search(q, params, mach)?;
        lat.push(t.elapsed().as_secs_f64());
    }
    lat.sort_by(f64::total_cmp);
    Ok(Latencies(lat))
}

fn arrival_name(a: Arrival) -> String {
    match a {
        Arrival::BackToBack => "back to back".into(),
        Arrival::Every(p) => format!("every {:.0} us", p.as_secs_f64() * 1e6),
    }
}

fn policy_name(p: Policy) -> &'static str {
    match p {
        Policy::Faults => "resident",
        _ => "gpu-pull (warm)",
    }
}

fn summary(r: &Row) -> String {
    format!(
        "{:<16} {:>3} queries, {:<16}: p50 {:.1} -> {:.1} us ({:.2}x), p99 {:.1} -> {:.1} us, queueing {:.1} -> {:.1} us{}",
        policy_name(r.policy),
        r.size,
        arrival_name(r.arrival),
        r.launches.quantile(0.5) * 1e6,
        r.graph.quantile(0.5) * 1e6,
        r.launches.quantile(0.5) / r.graph.quantile(0.5),
        r.launches.quantile(0.99) * 1e6,
        r.graph.quantile(0.99) * 1e6,
        r.launches_queue * 1e6,
        r.graph_queue * 1e6,
        if r.same { "" } else { "  RESULTS DIFFER" }
    )
}

fn table(rows: &[Row]) -> Table {
    let mut t = Table::new([
        "search",
        "queries",
        "arrival",
        "launches p50 us",
        "graph p50 us",
        "p50 launches / graph",
        "launches p99 us",
        "graph p99 us",
        "p99 graph / launches",
        "launches queries/s",
        "graph queries/s",
        "launches queueing p50 us",
        "graph queueing p50 us",
        "same results",
        "full search p50 us",
    ]);
    for r in rows {
        let (lp50, gp50) = (r.launches.quantile(0.5), r.graph.quantile(0.5));
        let (lp99, gp99) = (r.launches.quantile(0.99), r.graph.quantile(0.99));
        t.push([
            policy_name(r.policy).to_string(),
            r.size.to_string(),
            arrival_name(r.arrival),
            format!("{:.1}", lp50 * 1e6),
            format!("{:.1}", gp50 * 1e6),
            format!("{:.2}", lp50 / gp50),
            format!("{:.1}", lp99 * 1e6),
            format!("{:.1}", gp99 * 1e6),
            format!("{:.2}", gp99 / lp99),
            format!("{:.0}", r.launches_qps),
            format!("{:.0}", r.graph_qps),
            format!("{:.1}", r.launches_queue * 1e6),
            format!("{:.1}", r.graph_queue * 1e6),
            (if r.same { "yes" } else { "NO" }).to_string(),
            r.full
                .as_ref()
                .map_or_else(|| "-".into(), |f| format!("{:.1}", f.quantile(0.5) * 1e6)),
        ]);
    }
    t
}

/// The report: header, set-up, the table, and the targets met or missed.
fn markdown(header: &RunHeader, args: &Args, rows: &[Row]) -> String {
    let small = rows.iter().filter(|r| r.size <= 16);
    let p50_met = small
        .clone()
        .all(|r| r.launches.quantile(0.5) / r.graph.quantile(0.5) >= 1.5);
    let p99_met = small
        .clone()
        .all(|r| r.graph.quantile(0.99) <= r.launches.quantile(0.99));
    let worst = small
        .map(|r| r.launches.quantile(0.5) / r.graph.quantile(0.5))
        .fold(f64::INFINITY, f64::min);
    format!(
        "{}\n- index: {:.2} GiB, {} dims, {} lists, nprobe {}; {} timed batches per row after {} warm-up; fixed rate: every {} x the launched back-to-back p50\n- latency: from a batch's arrival to its neighbours in host memory (outputs poisoned in mapped host memory, queries copied in, coarse, plan, scan, and the merge writing the neighbours into that host memory)\n- queueing: the host's time to queue a batch's work, before waiting for it (`BatchSearch::last_queue_time`)\n\n{}\n- target p50 of 1-16-query batches >= 1.5x lower with graphs: {} (lowest {:.2}x)\n- target p99 no worse with graphs (1-16 queries): {}\n- same results with and without graphs on every batch: {}\n",
        header.markdown(),
        args.gib,
        args.dim,
        args.nlist,
        args.nprobe,
        args.batches,
        args.warmup,
        args.rate_factor,
        table(rows).to_markdown(),
        if p50_met { "met" } else { "missed" },
        worst,
        if p99_met { "met" } else { "missed" },
        if rows.iter().all(|r| r.same) { "yes" } else { "NO" },
    )
}

/// The data set and the index (lists in managed memory), refused when it would not fit in
/// the GPU's free memory with 2 GiB to spare.
fn build_index(gpu: &Gpu, args: &Args) -> Res<(Clusters, GpuIndex)> {
    let n = vectors_that_fit(gpu, args.gib, args.dim, "ivf_latency")?;
    let spec = Clusters {
        dim: args.dim,
        clusters: args.nlist,
        spread: 4.0,
        sigma: 1.0,
        seed: args.seed,
    };
    let data = spec.points(n, 0, None);
    let sample = spec.points(args.nlist * 32, 1, None);
    let centroids = cpu::kmeans_with(&sample, args.nlist, 6, args.seed, |c, v| {
        assign_on_gpu(gpu, c, v)
    })?;
    let assign = assign_on_gpu(gpu, &centroids, &data)?;
    let layout = IvfLayout::from_assignment(args.dim, centroids, &assign);
    let index = GpuIndex::new(gpu, layout, &data)?;
    println!(
        "index: {} vectors x {} dims in {} lists",
        data.len(),
        args.dim,
        args.nlist
    );
    Ok((spec, index))
}
