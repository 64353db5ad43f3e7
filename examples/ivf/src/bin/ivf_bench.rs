//! The IVF policy benchmark: for each Unified Memory policy and each probed fraction of a
//! multi-GiB index, a cold search (every list page on the host first) and a warm one (a
//! second batch of queries near the same clusters right after), each repeated, against the
//! same searches with everything resident and the pinned-memory copy rate measured in the
//! same run. Prints a table and the benchmark's targets met or missed, writes Markdown, CSV
//! and an SVG plot into `--out` (checked for writing before the GPU is opened), and records
//! device and driver.
//!
//! `cargo run --release -p lookahead-ivf --bin ivf_bench -- --gib 4 --out results`

use std::error::Error as StdError;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use lookahead::{Error, Gpu, PrefetchOptions};
use lookahead_bench::args::{at_least, at_most, float_range, in_range, Validate};
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::plot::{Line, LineChart};
use lookahead_bench::progress::{progress_bar, ProgressBar};
use lookahead_bench::stats::{gb_per_s, median, median_range, Summary};
use lookahead_bench::table::Table;
use lookahead_ivf::data::{Clusters, Vectors};
use lookahead_ivf::gpu::{
    assign_on_gpu, vectors_that_fit, GpuIndex, Machinery, SearchOutcome, SearchParams,
};
use lookahead_ivf::{cpu, index::IvfLayout};
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig, ServiceReport};

#[path = "shared/mod.rs"]
mod shared;

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

struct Row {
    target: f64,
    percent: f64,
    policy: Policy,
    chosen: Policy,
    needed_bytes: u64,
    cold: Summary,
    warm: Summary,
    resident: Summary,
    /// Lists the GPU asked for / probed (cold), and asked for in the warm batch.
    requested: (usize, usize, usize),
    /// Lists that arrived by request / timed out (cold, first repetition).
    arrived: (usize, usize),
    cold_scan_s: f64,
    /// Every repetition's cold time, in order.
    cold_reps: Vec<f64>,
    /// The pull kernel's in-kernel copy time, median over the cold repetitions (0 when the
    /// search did not pull).
    pull_copy_s: f64,
    /// The resident search's time on the GPU (coarse to merge) and in the scan kernel.
    resident_gpu_s: f64,
    resident_scan_s: f64,
    same_top_k: bool,
}

impl Row {
    /// Cold effective GB/s on the bytes the probed lists hold.
    fn cold_gbps(&self) -> f64 {
        gb_per_s(self.needed_bytes as f64, self.cold.median)
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

/// How many vectors make a `--gib` index, refused (with a message saying what to lower) when
/// it would not fit in the GPU's free memory with 2 GiB to spare.
fn index_vectors(gpu: &Gpu, args: &Args) -> lookahead::Result<usize> {
    vectors_that_fit(gpu, args.gib, args.dim, "ivf_bench").inspect_err(|e| {
        if let Error::OutOfMemory { available, .. } = e {
            eprintln!(
                "error: a {:.1} GiB index does not fit in {:.1} GiB of free GPU memory; lower --gib",
                args.gib,
                *available as f64 / GIB
            );
        }
    })
}

/// The data set and the index built from it in managed memory.
struct Built {
    spec: Clusters,
    data: Vectors,
    index: GpuIndex,
    /// Fewest and most vectors in a list.
    list_lens: (usize, usize),
}

fn build_index(gpu: &Gpu, args: &Args, n: usize) -> lookahead::Result<Built> {
    let t = Instant::now();
    let spec = Clusters {
        dim: args.dim,
        clusters: args.nlist,
        spread: 4.0,
        sigma: 1.0,
        seed: args.seed,
    };
    let data = spec.points(n, 0, None);
    let sample = Vectors {
        dim: args.dim,
        data: data.data[..args.dim * (args.nlist * 32).min(n)].to_vec(),
    };
    let centroids = cpu::kmeans_with(&sample, args.nlist, 8, args.seed, |c, v| {
        assign_on_gpu(gpu, c, v)
    })?;
    let assign = assign_on_gpu(gpu, &centroids, &data)?;
    let layout = IvfLayout::from_assignment(args.dim, centroids, &assign);
    let mut index = GpuIndex::new(gpu, layout, &data)?;
    index.set_prefer_host(args.prefer_host)?;
    let lens: Vec<usize> = (0..args.nlist)
        .map(|l| index.layout().list_len(l))
        .collect();
    let list_lens = (
        lens.iter().copied().min().unwrap_or(0),
        lens.iter().copied().max().unwrap_or(0),
    );
    println!(
        "index: {} vectors x {} dims, {} lists ({} to {} vectors), {:.2} GiB in managed memory (built in {:.1} s)",
        n,
        args.dim,
        args.nlist,
        list_lens.0,
        list_lens.1,
        index.index_bytes() as f64 / GIB,
        t.elapsed().as_secs_f64()
    );
    Ok(Built {
        spec,
        data,
        index,
        list_lens,
    })
}

/// The prefetch service and the host engine, configured from the flags.
fn machinery(gpu: &Gpu, args: &Args, profile: &MachineProfile) -> lookahead::Result<Machinery> {
    let config = ServiceConfig {
        threads: args.service_threads,
        min_batch_bytes: args.service_min_batch_kib << 10,
        piece_bytes: args.service_piece_mib << 20,
        ..ServiceConfig::default()
    };
    let engine = PrefetchOptions {
        piece_bytes: args.engine_piece_mib << 20,
        ..PrefetchOptions::default()
    };
    Machinery::with_engine(gpu, args.nlist, profile.clone(), config, engine)
}

/// What the run found, beside the rows.
#[derive(Default)]
struct Found {
    rows: Vec<Row>,
    /// Seconds each set-up of a GPU mapping took (accessed-by advice, pull cache).
    mapping_s: Vec<f64>,
    /// Recall against brute force, measured once at the first fraction from 6% up.
    recall_note: String,
}

/// The two batches of one probed fraction: cold queries from its hot clusters, and warm ones
/// whose lists the cold batch probes.
struct Batches {
    cold: Vectors,
    warm: Vectors,
}

fn params(args: &Args, policy: Policy) -> SearchParams {
    SearchParams {
        nprobe: args.nprobe,
        policy,
        expected_passes: 2.0,
        max_blocks: 0,
        pull_copy_every: args.pull_copy_every,
    }
}

/// The searches with every list resident: the reference answers every policy must
/// reproduce, and the warm batch's times (wall, GPU, scan).
struct Resident {
    cold_ref: SearchOutcome,
    warm_ref: SearchOutcome,
    wall: Summary,
    gpu_s: f64,
    scan_s: f64,
}

/// The measurements of one run: the index, the machinery, and what was found so far.
struct Session<'a> {
    args: &'a Args,
    built: &'a mut Built,
    mach: &'a mut Machinery,
    bar: ProgressBar,
    found: Found,
}

impl Session<'_> {
    /// Measures every probed fraction and policy, showing progress.
    fn measure_all(mut self) -> Res<Found> {
        let args = self.args;
        for (fi, &pct) in args.percent.iter().enumerate() {
            let hot = ((args.nlist as f64 * pct / 100.0 / args.nprobe as f64).round() as usize)
                .clamp(1, args.nlist);
            let hot_set: Vec<usize> = (0..hot).map(|i| (i * args.nlist) / hot).collect();
            let nq = hot * args.queries_per_cluster;
            let spec = &self.built.spec;
            let cold = spec.points(nq, 100 + fi as u64 * 2, Some(&hot_set));
            let warm = warm_batch(
                spec,
                self.built.index.layout(),
                &cold,
                &hot_set,
                args.nprobe,
                101 + fi as u64 * 2,
            );
            self.measure_fraction(pct, &Batches { cold, warm })?;
        }
        self.bar.finish_and_clear();
        Ok(self.found)
    }

    /// The resident baseline, then every policy, at one probed fraction.
    fn measure_fraction(&mut self, pct: f64, b: &Batches) -> Res<()> {
        self.bar.set_message(format!("{pct}%: resident baseline"));
        let resident = self.measure_resident(b)?;
        self.bar.inc(1);
        for &policy in &self.args.policies {
            self.bar.set_message(format!("{pct}%: {}", policy.name()));
            let row = self.measure_policy(pct, policy, b, &resident)?;
            self.found.rows.push(row);
            self.bar.inc(1);
        }
        if self.found.recall_note.is_empty() && pct >= 6.0 {
            let data = &self.built.data;
            self.found.recall_note = recall_note(self.args, pct, data, &b.cold, &resident.cold_ref);
        }
        Ok(())
    }

    fn measure_resident(&mut self, b: &Batches) -> Res<Resident> {
        let (index, mach, faults) = (
            &mut self.built.index,
            &mut *self.mach,
            params(self.args, Policy::Faults),
        );
        index.make_resident()?;
        // Warm-up, and the reference answers.
        let cold_ref = index.search(&b.cold, faults, mach)?;
        let warm_ref = index.search(&b.warm, faults, mach)?;
        let (mut wall, mut gpu, mut scan) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..self.args.reps {
            let r = index.search(&b.warm, faults, mach)?;
            wall.push(r.seconds);
            gpu.push(r.gpu_seconds);
            scan.push(r.scan_seconds);
        }
        Ok(Resident {
            cold_ref,
            warm_ref,
            wall: Summary::of(&wall).ok_or("no repetitions")?,
            gpu_s: median(&gpu).ok_or("no repetitions")?,
            scan_s: median(&scan).ok_or("no repetitions")?,
        })
    }

    /// `--reps` cold and warm searches under `policy`, each cold one after moving every list
    /// to the host; the row, with the resident baseline beside it.
    fn measure_policy(
        &mut self,
        pct: f64,
        policy: Policy,
        b: &Batches,
        resident: &Resident,
    ) -> Res<Row> {
        let (index, mach, p) = (
            &mut self.built.index,
            &mut *self.mach,
            params(self.args, policy),
        );
        let (mut cold, mut warm, mut copy) = (Vec::new(), Vec::new(), Vec::new());
        let mut first: Option<(SearchOutcome, SearchOutcome)> = None;
        let mut same = true;
        for _ in 0..self.args.reps {
            // What each policy needs set up (the mapping, the pull cache), before the timed
            // search: a per-index set-up (`GpuIndex::prepare`); Auto gets the index as one
            // set up for its pull would be.
            let was_mapped = index.is_mapped_for_gpu();
            let t = index.prepare(policy)?;
            if !was_mapped && index.is_mapped_for_gpu() {
                self.found.mapping_s.push(t);
            }
            index.evict_to_host(mach)?;
            let c = index.search(&b.cold, p, mach)?;
            let w = index.search(&b.warm, p, mach)?;
            same &= c.ids == resident.cold_ref.ids && w.ids == resident.warm_ref.ids;
            cold.push(c.seconds);
            warm.push(w.seconds);
            copy.push(c.pull_copy_seconds);
            first.get_or_insert((c, w));
        }
        let (c, w) = first.ok_or("no repetitions")?;
        Ok(Row {
            target: pct,
            percent: c.needed_bytes as f64 / index.index_bytes() as f64 * 100.0,
            policy,
            chosen: c.policy,
            needed_bytes: c.needed_bytes,
            pull_copy_s: median(&copy).ok_or("no repetitions")?,
            cold: Summary::of(&cold).ok_or("no repetitions")?,
            cold_reps: cold,
            warm: Summary::of(&warm).ok_or("no repetitions")?,
            resident: resident.wall,
            requested: (c.requested, c.probed_lists, w.requested),
            arrived: (c.arrived, c.timed_out),
            cold_scan_s: c.scan_seconds,
            resident_gpu_s: resident.gpu_s,
            resident_scan_s: resident.scan_s,
            same_top_k: same,
        })
    }
}

/// Recall@10 of the resident search's first ten cold queries against brute force.
fn recall_note(
    args: &Args,
    pct: f64,
    data: &Vectors,
    queries: &Vectors,
    out: &SearchOutcome,
) -> String {
    let s = 10.min(queries.len());
    format!(
        "recall@10 at {pct}% (nprobe {}), {s} queries against brute force: {:.3}",
        args.nprobe,
        shared::recall(data, queries, out, s)
    )
}

fn run(gpu: &Gpu, args: &Args, out: &OutDir) -> Res<bool> {
    let n = index_vectors(gpu, args)?;
    let header = RunHeader::for_gpu(gpu)?;
    print!("{}", header.markdown());
    let mut built = build_index(gpu, args, n)?;
    let pinned = lookahead_bench::stats::pinned_htod_gbps(gpu)?;
    println!("pinned cudaMemcpy H2D: {pinned:.1} GB/s");
    let profile = MachineProfile::probe(gpu)?;
    println!("probe: {}", profile.summary());
    let mut mach = machinery(gpu, args, &profile)?;
    let bar = progress_bar((args.percent.len() * (args.policies.len() + 1)) as u64);
    let found = Session {
        args,
        built: &mut built,
        mach: &mut mach,
        bar,
        found: Found::default(),
    }
    .measure_all()?;
    let service = mach.stop_service();
    let ctx = ReportContext {
        args,
        header: &header,
        built: &built,
        pinned,
        profile: &profile,
        service,
    };
    let md = markdown(&ctx, &found);
    println!("\n{md}");
    out.write(
        "ivf_bench.md",
        format!(
            "# IVF policy benchmark\n\nWritten by `examples/ivf/src/bin/ivf_bench.rs`; explained in [docs/unified-memory.md](../docs/unified-memory.md).\n\n{md}"
        ),
    )?;
    out.write("ivf_bench.csv", results_csv(&found.rows, pinned)?)?;
    out.write(
        "ivf_bench.svg",
        plot(&found.rows, pinned, &header).to_svg()?,
    )?;
    if found.rows.iter().any(|r| !r.same_top_k) {
        eprintln!("error: a policy changed the search results");
        return Ok(false);
    }
    Ok(true)
}

/// What the report says beside the rows.
struct ReportContext<'a> {
    args: &'a Args,
    header: &'a RunHeader,
    built: &'a Built,
    pinned: f64,
    profile: &'a MachineProfile,
    service: Option<ServiceReport>,
}

/// `every 4th SM`.
fn every_nth_sm(n: u32) -> String {
    match n {
        1 => "every SM".to_string(),
        2 => "every 2nd SM".to_string(),
        3 => "every 3rd SM".to_string(),
        n => format!("every {n}th SM"),
    }
}

/// The run header and what else the numbers depend on, as Markdown list items.
fn setup_lines(c: &ReportContext, found: &Found) -> String {
    let (args, gib) = (c.args, c.built.index.index_bytes() as f64 / GIB);
    let mut md = c.header.markdown();
    md += &format!(
        "- index: {gib:.2} GiB of managed memory, {} lists ({} to {} vectors), dim {}, nprobe {}, {} queries per hot cluster\n",
        args.nlist, c.built.list_lens.0, c.built.list_lens.1, args.dim, args.nprobe, args.queries_per_cluster
    );
    md += &format!("- pinned cudaMemcpy H2D (same run): {:.1} GB/s\n", c.pinned);
    let copy_every = match args.pull_copy_every {
        0 => ivf_kernels::PULL_COPY_EVERY_NTH_SM,
        n => n,
    };
    md += &format!(
        "- gpu-pull: the warps on {} copy (and block 0's first warp); the mapping {} the host as preferred location\n",
        every_nth_sm(copy_every),
        if args.prefer_host { "sets" } else { "does not set" }
    );
    md += &format!("- probe (same run): {}\n", c.profile.summary());
    if let Some(m) = Summary::of(&found.mapping_s) {
        md += &format!(
            "- set-up for the policies that read through a GPU mapping (accessed-by advice on all {gib:.2} GiB, and for gpu-pull and auto the pull cache; once per index, before the cold searches of remote-map, gpu-pull and auto, not in their times): {:.0} ms [{:.0}, {:.0}]\n",
            m.median * 1e3,
            m.min * 1e3,
            m.max * 1e3
        );
    }
    if !found.recall_note.is_empty() {
        md += &format!("- {}\n", found.recall_note);
    }
    if let Some(r) = &c.service {
        md += &format!(
            "- prefetch service ({} threads): {} requests, {:.2} GB, {} failed\n",
            args.service_threads,
            r.requests,
            r.bytes as f64 / 1e9,
            r.failed
        );
    }
    md += &format!(
        "- each cell: median of {} (cold search after moving every list to the host and emptying the pull cache; warm search of a second batch right after); wall time of the whole search (queries up, results back)\n- lists asked: lists requested from the host (gpu-requests) or copied by the kernel (gpu-pull); arrived: of those, read after their data arrived (gpu-pull: read from the cache)\n",
        args.reps
    );
    md
}

/// The whole Markdown report.
fn markdown(c: &ReportContext, found: &Found) -> String {
    let rows = &found.rows;
    let mut md = setup_lines(c, found);
    md += "\n";
    md += &results_table(rows, c.pinned).to_markdown();
    md += &resident_lines(rows);
    md += &pull_lines(rows);
    md += &format!("\n## Targets, from this run\n\n{}", targets(rows, c.pinned));
    md
}

/// The cold median of the faults policy at the same aimed fraction.
fn faults_at(rows: &[Row], target: f64) -> Option<f64> {
    rows.iter()
        .find(|x| x.policy == Policy::Faults && x.target == target)
        .map(|x| x.cold.median)
}

fn results_table(rows: &[Row], pinned: f64) -> Table {
    let mut t = Table::new([
        "aimed %",
        "probed %",
        "policy",
        "ran",
        "needed MB",
        "cold ms [min, max]",
        "cold GB/s",
        "% of pinned",
        "x faults",
        "warm ms",
        "resident ms",
        "warm / resident",
        "lists asked (cold / warm)",
        "arrived / timed out",
        "same top-k",
    ]);
    for r in rows {
        let g = r.cold_gbps();
        t.push([
            r.target.to_string(),
            format!("{:.1}", r.percent),
            r.policy.name().to_string(),
            r.chosen.name().to_string(),
            format!("{:.0}", r.needed_bytes as f64 / 1e6),
            median_range(&r.cold, 1e3, 1),
            format!("{g:.1}"),
            format!("{:.0}%", g / pinned * 100.0),
            faults_at(rows, r.target)
                .map_or_else(|| "-".into(), |f| format!("{:.1}", f / r.cold.median)),
            format!("{:.2}", r.warm.median * 1e3),
            format!("{:.2}", r.resident.median * 1e3),
            format!("{:.2}", r.warm.median / r.resident.median),
            format!("{} / {}", r.requested.0, r.requested.2),
            format!("{} / {}", r.arrived.0, r.arrived.1),
            (if r.same_top_k { "yes" } else { "NO" }).to_string(),
        ]);
    }
    t
}

fn results_csv(rows: &[Row], pinned: f64) -> lookahead_bench::Result<String> {
    let mut t = Table::new([
        "aimed_percent",
        "probed_percent",
        "policy",
        "ran",
        "needed_bytes",
        "cold_s",
        "cold_min_s",
        "cold_max_s",
        "cold_gbps",
        "pinned_gbps",
        "warm_s",
        "resident_s",
        "resident_gpu_s",
        "resident_scan_s",
        "asked_cold",
        "probed_lists",
        "asked_warm",
        "arrived",
        "timed_out",
        "cold_scan_s",
        "same_topk",
        "pull_copy_s",
        "cold_reps_s",
    ]);
    let s6 = |x: f64| format!("{x:.6}");
    for r in rows {
        let reps: Vec<String> = r.cold_reps.iter().map(|x| s6(*x)).collect();
        t.push([
            r.target.to_string(),
            format!("{:.3}", r.percent),
            r.policy.name().to_string(),
            r.chosen.name().to_string(),
            r.needed_bytes.to_string(),
            s6(r.cold.median),
            s6(r.cold.min),
            s6(r.cold.max),
            format!("{:.3}", r.cold_gbps()),
            format!("{pinned:.3}"),
            s6(r.warm.median),
            s6(r.resident.median),
            s6(r.resident_gpu_s),
            s6(r.resident_scan_s),
            r.requested.0.to_string(),
            r.requested.1.to_string(),
            r.requested.2.to_string(),
            r.arrived.0.to_string(),
            r.arrived.1.to_string(),
            s6(r.cold_scan_s),
            r.same_top_k.to_string(),
            s6(r.pull_copy_s),
            reps.join(";"),
        ]);
    }
    t.to_csv()
}

/// One line per aimed fraction: the resident searches' wall, GPU and scan times.
fn resident_lines(rows: &[Row]) -> String {
    let mut md = "\nResident searches (batch two, every list on the GPU), median: wall time, of which GPU time from the coarse kernel to the merge, of which the scan kernel:\n\n".to_string();
    let mut seen = Vec::new();
    for r in rows {
        if !seen.contains(&r.target) {
            seen.push(r.target);
            md += &format!(
                "- aimed {}%: {:.2} ms wall, {:.2} ms GPU, {:.2} ms scan\n",
                r.target,
                r.resident.median * 1e3,
                r.resident_gpu_s * 1e3,
                r.resident_scan_s * 1e3
            );
        }
    }
    md
}

/// One line per cold search that pulled: the kernel's own copy against the whole search.
fn pull_lines(rows: &[Row]) -> String {
    let pulls: Vec<&Row> = rows.iter().filter(|r| r.pull_copy_s > 0.0).collect();
    if pulls.is_empty() {
        return String::new();
    }
    let mut md = "\nGPU-driven pull, cold: the kernel's own copy (first copy warp's start to last one's end, GPU clock, median) against the whole search, and every repetition's search time:\n\n".to_string();
    for r in pulls {
        let reps: Vec<String> = r
            .cold_reps
            .iter()
            .map(|x| format!("{:.2}", x * 1e3))
            .collect();
        md += &format!(
            "- {}% {}: copy {:.2} ms = {:.1} GB/s, search {:.2} ms; repetitions {}\n",
            r.target,
            r.policy.name(),
            r.pull_copy_s * 1e3,
            gb_per_s(r.needed_bytes as f64, r.pull_copy_s),
            r.cold.median * 1e3,
            reps.join(", ")
        );
    }
    md
}
/// A second batch of as many queries as `first`, near the same clusters, whose `nprobe`
/// lists are all among the lists `first` probes: different queries over data the first
/// batch made warm. Candidates are drawn in rounds and kept when they qualify (the lists
/// are found on the CPU with the same arithmetic as the coarse kernel).
fn warm_batch(
    spec: &Clusters,
    layout: &IvfLayout,
    first: &Vectors,
    hot: &[usize],
    nprobe: usize,
    stream: u64,
) -> Vectors {
    use rayon::prelude::*;
    let dim = layout.dim;
    let lists_of = |q: &[f32]| cpu::nearest(&layout.centroids, dim, q, nprobe);
    let mut probed = vec![false; layout.nlist()];
    for l in (0..first.len())
        .into_par_iter()
        .flat_map_iter(|i| lists_of(first.row(i)))
        .collect::<Vec<u32>>()
    {
        probed[l as usize] = true;
    }
    let mut out = Vec::with_capacity(first.data.len());
    for round in 0..64 {
        let candidates = spec.points(first.len(), stream + 1000 * round, Some(hot));
        let keep: Vec<usize> = (0..candidates.len())
            .into_par_iter()
            .filter(|&i| {
                lists_of(candidates.row(i))
                    .iter()
                    .all(|&l| probed[l as usize])
            })
            .collect();
        for i in keep {
            if out.len() < first.data.len() {
                out.extend_from_slice(candidates.row(i));
            }
        }
        if out.len() == first.data.len() {
            break;
        }
    }
    // Top up with the first batch's own queries if too few candidates qualified.
    let mut i = 0;
    while out.len() < first.data.len() {
        out.extend_from_slice(first.row(i));
        i += 1;
    }
    Vectors { dim, data: out }
}

/// The benchmark's targets, each with the numbers that decide it: from 6% probed up, the
/// fastest GPU-driven policy (gpu-requests, gpu-pull, auto) moves the cold batch's lists at
/// 85% of the pinned rate or more, and 3x as fast as faults; auto is within 5% of the best
/// single policy cold and warm, and its warm batch within 10% of the all-resident time.
fn targets(rows: &[Row], pinned: f64) -> String {
    let mut out = String::new();
    let mut aims: Vec<f64> = rows.iter().map(|r| r.target).collect();
    aims.dedup();
    let row = |aim: f64, p: Policy| rows.iter().find(|r| r.target == aim && r.policy == p);
    let gb = Row::cold_gbps;
    for aim in &aims {
        let (Some(f), best) = (
            row(*aim, Policy::Faults),
            [Policy::GpuRequests, Policy::GpuPull, Policy::Auto]
                .iter()
                .filter_map(|&p| row(*aim, p))
                .max_by(|a, b| gb(a).total_cmp(&gb(b))),
        ) else {
            continue;
        };
        let Some(b) = best else { continue };
        let share = gb(b) / pinned;
        let speedup = f.cold.median / b.cold.median;
        let applies = b.percent >= 6.0;
        let _ = writeln!(
            out,
            "- {:.1}% probed: {} cold {:.1} GB/s = {:.0}% of pinned (target 85% from 6% up: {}), {:.1}x faults (target 3x: {})",
            b.percent,
            b.policy.name(),
            gb(b),
            share * 100.0,
            if !applies { "n/a" } else if share >= 0.85 { "met" } else { "MISSED" },
            speedup,
            if speedup >= 3.0 { "met" } else { "MISSED" }
        );
        if let Some(a) = row(*aim, Policy::Auto) {
            let concrete = rows
                .iter()
                .filter(|r| r.target == *aim && r.policy != Policy::Auto);
            let best_cold = concrete
                .clone()
                .map(|r| r.cold.median)
                .fold(f64::INFINITY, f64::min);
            let best_warm = concrete
                .map(|r| r.warm.median)
                .fold(f64::INFINITY, f64::min);
            let (c, w) = (a.cold.median / best_cold, a.warm.median / best_warm);
            let _ = writeln!(
                out,
                "  - auto ran {}: cold {:.2}x the best single policy, warm {:.2}x (target at most 1.05: {})",
                a.chosen.name(),
                c,
                w,
                if c <= 1.05 && w <= 1.05 { "met" } else { "MISSED" }
            );
            let warm = a.warm.median / a.resident.median;
            let _ = writeln!(
                out,
                "  - auto's warm batch {:.2}x the all-resident time (target at most 1.10: {})",
                warm,
                if warm <= 1.10 { "met" } else { "MISSED" }
            );
        }
        if let Some(h) = row(*aim, Policy::KernelHints) {
            let _ = writeln!(
                out,
                "  - kernel-hints (in-kernel hints only): cold {:.1} GB/s, {:.2}x faults",
                gb(h),
                f.cold.median / h.cold.median
            );
        }
    }
    out
}

/// Cold effective GB/s against probed fraction, one line per policy, and the pinned rate.
fn plot(rows: &[Row], pinned: f64, header: &RunHeader) -> LineChart {
    let min_x = rows
        .iter()
        .map(|r| r.percent)
        .fold(100.0, f64::min)
        .max(0.05)
        * 0.8;
    let max_x = rows.iter().map(|r| r.percent).fold(1.0, f64::max) * 1.2;
    let max_y = rows.iter().map(Row::cold_gbps).fold(pinned, f64::max) * 1.1;
    let series = Policy::CONCRETE
        .iter()
        .chain([Policy::Auto].iter())
        .map(|policy| Line {
            label: policy.name().to_string(),
            points: rows
                .iter()
                .filter(|r| r.policy == *policy)
                .map(|r| (r.percent, r.cold_gbps()))
                .collect(),
        })
        .collect();
    let device = header.device.as_ref().map_or_else(
        || "unknown device".into(),
        |d| format!("{}, driver {}", d.name, d.driver()),
    );
    LineChart {
        title: format!("IVF cold search, effective GB/s on needed bytes ({device})"),
        x_desc: "probed fraction of the index (%)".into(),
        y_desc: "GB/s".into(),
        x_range: min_x..max_x,
        y_range: 0.0..max_y,
        references: [(1.0, "pinned memcpy"), (0.85, "85% of pinned")]
            .iter()
            .map(|(level, label)| {
                (
                    format!("{label} {:.1} GB/s", pinned * level),
                    pinned * level,
                )
            })
            .collect(),
        series,
        size: (900, 560),
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

    fn summary(ms: f64) -> Summary {
        Summary::of(&[ms * 0.9e-3, ms * 1e-3, ms * 1.2e-3]).unwrap()
    }

    fn row(target: f64, policy: Policy, cold_ms: f64) -> Row {
        Row {
            target,
            percent: target + 0.5,
            policy,
            chosen: if policy == Policy::Auto {
                Policy::GpuPull
            } else {
                policy
            },
            needed_bytes: 1_000_000_000,
            cold: summary(cold_ms),
            warm: summary(cold_ms / 4.0),
            resident: summary(10.0),
            requested: (5, 6, 1),
            arrived: (4, 0),
            cold_scan_s: 0.01,
            cold_reps: vec![cold_ms * 1e-3; 3],
            pull_copy_s: if policy == Policy::GpuPull {
                0.015
            } else {
                0.0
            },
            resident_gpu_s: 0.008,
            resident_scan_s: 0.005,
            same_top_k: true,
        }
    }

    fn rows() -> Vec<Row> {
        vec![
            row(12.0, Policy::Faults, 100.0),
            row(12.0, Policy::GpuPull, 20.0),
            row(12.0, Policy::Auto, 20.5),
        ]
    }

    #[test]
    fn table_and_csv_have_a_line_per_row() {
        let rows = rows();
        let md = results_table(&rows, 50.0).to_markdown();
        // 1 GB in 20 ms: 50 GB/s, all of pinned, 5x faults.
        assert!(
            md.contains("| 12 | 12.5 | gpu-pull | gpu-pull | 1000 | 20.0 [18.0, 24.0] | 50.0 | 100% | 5.0 | 5.00 | 10.00 | 0.50 | 5 / 1 | 4 / 0 | yes |"),
            "{md}"
        );
        let csv = results_csv(&rows, 50.0).unwrap();
        assert_eq!(csv.lines().count(), 1 + rows.len());
        assert!(
            csv.lines()
                .nth(2)
                .unwrap()
                .ends_with(",true,0.015000,0.020000;0.020000;0.020000"),
            "{csv}"
        );
        assert!(pull_lines(&rows).contains("- 12% gpu-pull: copy 15.00 ms = 66.7 GB/s"));
        assert!(
            resident_lines(&rows).contains("- aimed 12%: 10.00 ms wall, 8.00 ms GPU, 5.00 ms scan")
        );
    }

    #[test]
    fn targets_say_met_or_missed() {
        let t = targets(&rows(), 50.0);
        assert!(t.contains("- 12.5% probed: gpu-pull cold 50.0 GB/s = 100% of pinned (target 85% from 6% up: met), 5.0x faults (target 3x: met)"), "{t}");
        assert!(
            t.contains("auto ran gpu-pull: cold 1.02x the best single policy"),
            "{t}"
        );
        assert!(
            t.contains("auto's warm batch 0.51x the all-resident time (target at most 1.10: met)"),
            "{t}"
        );
        assert!(targets(&rows(), 100.0).contains("50% of pinned (target 85% from 6% up: MISSED)"));
    }

    #[test]
    fn plot_names_every_measured_policy() {
        let header = RunHeader::host_only();
        let svg = plot(&rows(), 50.0, &header).to_svg().unwrap();
        assert!(svg.contains("gpu-pull") && svg.contains("pinned memcpy 50.0 GB/s"));
        assert!(
            !svg.contains("remote-map"),
            "policies without rows stay out of the legend"
        );
        assert_eq!(every_nth_sm(4), "every 4th SM");
        assert_eq!(every_nth_sm(1), "every SM");
    }

    #[test]
    fn the_warm_batch_probes_only_lists_the_cold_batch_probes() {
        let spec = Clusters {
            dim: 8,
            clusters: 16,
            spread: 4.0,
            sigma: 1.0,
            seed: 3,
        };
        let data = spec.points(2000, 0, None);
        let centroids = cpu::kmeans(&data, 16, 4, 3);
        let layout =
            IvfLayout::from_assignment(8, centroids.clone(), &cpu::assign(&centroids, &data));
        let hot = [0, 5];
        let cold = spec.points(20, 100, Some(&hot));
        let warm = warm_batch(&spec, &layout, &cold, &hot, 2, 101);
        assert_eq!(warm.data.len(), cold.data.len());
        let lists = |q: &[f32]| cpu::nearest(&layout.centroids, 8, q, 2);
        let probed: Vec<u32> = (0..cold.len()).flat_map(|i| lists(cold.row(i))).collect();
        for i in 0..warm.len() {
            assert!(lists(warm.row(i)).iter().all(|l| probed.contains(l)));
        }
    }
}
