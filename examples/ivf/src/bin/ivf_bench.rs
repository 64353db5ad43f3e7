//! The IVF policy benchmark: for each Unified Memory policy and each probed fraction of a
//! multi-GiB index, a cold search (every list page on the host first) and a warm one (a
//! second batch of queries right after), against the same search with everything resident
//! and the pinned-memory copy rate measured in the same run. Prints a table, writes CSV,
//! Markdown and an SVG plot, and records device and driver.
//!
//! `cargo run --release -p lookahead-ivf --bin ivf_bench -- --gib 4 --out results`

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use cudarc::driver::sys;
use indicatif::{ProgressBar, ProgressStyle};
use lookahead::{Error, Gpu};
use lookahead_ivf::data::{Clusters, Vectors};
use lookahead_ivf::gpu::{assign_on_gpu, GpuIndex, Machinery, SearchOutcome, SearchParams};
use lookahead_ivf::{cpu, index::IvfLayout};
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig};

#[derive(Parser)]
#[command(about = "Cold and warm IVF search under every Unified Memory policy")]
struct Args {
    /// Index size in GiB of list vectors (kept under the GPU's free memory).
    #[arg(long, default_value_t = 4.0)]
    gib: f64,
    /// Dimensions.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Inverted lists.
    #[arg(long, default_value_t = 2048)]
    nlist: usize,
    /// Lists probed per query.
    #[arg(long, default_value_t = 2)]
    nprobe: usize,
    /// Probed fractions, in percent of the lists.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1.0, 3.0, 6.0, 12.0, 25.0, 50.0, 100.0])]
    percent: Vec<f64>,
    /// Policies to measure.
    #[arg(long, value_delimiter = ',', default_values_t = vec![
        Policy::Faults, Policy::KernelHints, Policy::PrefetchAll, Policy::HostSelected,
        Policy::GpuRequests, Policy::RemoteMap, Policy::Auto])]
    policies: Vec<Policy>,
    /// Service threads for the GPU-driven policy.
    #[arg(long, default_value_t = 16)]
    service_threads: usize,
    /// Where the CSV, Markdown and SVG go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

struct Row {
    percent: f64,
    policy: Policy,
    chosen: Policy,
    needed_bytes: u64,
    cold_s: f64,
    warm_s: f64,
    resident_s: f64,
    same_as_faults: bool,
    /// Lists that arrived by request / were probed (GPU-driven requests).
    arrived: (usize, usize),
    gpu_s: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("No CUDA GPU here: {e}. This benchmark needs one.");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Host-to-device copy rate from pinned memory, GB/s (median of 5 copies of 1 GiB).
fn pinned_memcpy_gbps(gpu: &Gpu) -> Result<f64, Error> {
    let bytes = 1usize << 30;
    let check =
        |call, r: sys::CUresult| r.result().map_err(|source| Error::Driver { call, source });
    gpu.bind_to_thread()?;
    let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
    let mut dev: sys::CUdeviceptr = 0;
    // SAFETY: plain allocations, freed below.
    unsafe {
        check("cuMemHostAlloc", sys::cuMemHostAlloc(&mut host, bytes, 0))?;
        std::ptr::write_bytes(host as *mut u8, 1, bytes);
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut dev, bytes))?;
    }
    let mut times = Vec::new();
    for _ in 0..6 {
        let t = Instant::now();
        // SAFETY: both buffers hold `bytes`.
        unsafe { check("cuMemcpyHtoD", sys::cuMemcpyHtoD_v2(dev, host, bytes))? };
        times.push(t.elapsed().as_secs_f64());
    }
    // SAFETY: allocated above.
    unsafe {
        sys::cuMemFree_v2(dev);
        sys::cuMemFreeHost(host);
    }
    times.remove(0); // warm-up
    times.sort_by(f64::total_cmp);
    Ok(bytes as f64 / times[times.len() / 2] / 1e9)
}

fn run(args: &Args) -> Result<(), Error> {
    let gpu = Gpu::new(0)?;
    let (major, minor) = gpu.driver_version()?;
    let (free, _) = gpu.memory_info()?;
    let vector_bytes = args.dim * 4;
    let want = (args.gib * (1u64 << 30) as f64) as usize;
    if want + (2usize << 30) > free {
        eprintln!(
            "error: a {:.1} GiB index does not fit in {:.1} GiB of free GPU memory; lower --gib",
            args.gib,
            free as f64 / (1u64 << 30) as f64
        );
        return Err(Error::OutOfMemory {
            during: "ivf_bench",
            requested: want,
            available: free,
        });
    }
    let n = want / vector_bytes;
    println!("# IVF policy benchmark\n");
    println!(
        "device: {} (sm_{}), driver CUDA {major}.{minor}",
        gpu.name(),
        gpu.compute_capability()
    );

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
        data: data.data[..args.dim * args.nlist * 8].to_vec(),
    };
    let centroids = cpu::kmeans(&sample, args.nlist, 4, args.seed);
    let assign = assign_on_gpu(&gpu, &centroids, &data)?;
    let layout = IvfLayout::from_assignment(args.dim, centroids, &assign);
    let mut index = GpuIndex::new(&gpu, layout, &data)?;
    println!(
        "index: {} vectors x {} dims, {} lists, {:.2} GiB in managed memory (built in {:.1} s)",
        n,
        args.dim,
        args.nlist,
        index.index_bytes() as f64 / (1u64 << 30) as f64,
        t.elapsed().as_secs_f64()
    );
    let pinned = pinned_memcpy_gbps(&gpu)?;
    println!("pinned cudaMemcpy H2D: {pinned:.1} GB/s");
    let t = Instant::now();
    let profile = MachineProfile::probe(&gpu)?;
    println!(
        "probe ({:.0} ms): faults {:.1} GB/s, bulk prefetch {:.1}, 2 MiB-range prefetch {:.1}, remote read {:.1}, resident read {:.0}; in-kernel hints migrate: {} (read after hints {:.1} GB/s)",
        t.elapsed().as_secs_f64() * 1e3, profile.fault_gbps, profile.bulk_prefetch_gbps, profile.range_prefetch_gbps,
        profile.remote_gbps, profile.device_gbps, profile.kernel_hints_migrate, profile.after_hints_gbps
    );
    let config = ServiceConfig {
        threads: args.service_threads,
        ..ServiceConfig::default()
    };
    let mut mach = Machinery::new(&gpu, args.nlist, profile.clone(), config)?;

    let bar = ProgressBar::new((args.percent.len() * (args.policies.len() + 1)) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut rows = Vec::new();
    let mut recall_note = String::new();
    for (fi, &pct) in args.percent.iter().enumerate() {
        let hot = ((args.nlist as f64 * pct / 100.0).round() as usize).clamp(1, args.nlist);
        let hot_set: Vec<usize> = (0..hot).map(|i| (i * args.nlist) / hot).collect();
        let nq = (2 * hot).max(512);
        let batch1 = spec.points(nq, 100 + fi as u64 * 2, Some(&hot_set));
        let batch2 = spec.points(nq, 101 + fi as u64 * 2, Some(&hot_set));
        let params = |policy| SearchParams {
            nprobe: args.nprobe,
            policy,
            ahead: 1,
            expected_passes: 2.0,
            max_blocks: 0,
        };

        bar.set_message(format!("{pct}%: resident baseline"));
        index.make_resident()?;
        let _ = index.search(&batch1, params(Policy::Faults), &mut mach)?; // warm-up
        let resident = index.search(&batch2, params(Policy::Faults), &mut mach)?;
        bar.inc(1);
        let mut reference: Option<SearchOutcome> = None;
        for &policy in &args.policies {
            bar.set_message(format!("{pct}%: {}", policy.name()));
            index.evict_to_host()?;
            let cold = index.search(&batch1, params(policy), &mut mach)?;
            let warm = index.search(&batch2, params(policy), &mut mach)?;
            let same = match &reference {
                Some(r) => r.ids == cold.ids,
                None => true,
            };
            if reference.is_none() {
                reference = Some(cold.clone());
            }
            rows.push(Row {
                percent: cold.needed_bytes as f64 / index.index_bytes() as f64 * 100.0,
                policy,
                chosen: cold.policy,
                needed_bytes: cold.needed_bytes,
                cold_s: cold.seconds,
                warm_s: warm.seconds,
                resident_s: resident.seconds,
                same_as_faults: same,
                arrived: (cold.arrived, cold.probed_lists),
                gpu_s: cold.gpu_seconds,
            });
            bar.inc(1);
        }
        if fi == args.percent.iter().position(|&p| p >= 6.0).unwrap_or(0) {
            if let Some(r) = &reference {
                let k = ivf_kernels::K;
                let s = 10.min(nq);
                let found: Vec<Vec<cpu::Hit>> = (0..s)
                    .map(|q| {
                        (0..k)
                            .map(|j| (r.dist[q * k + j], r.ids[q * k + j]))
                            .collect()
                    })
                    .collect();
                let exact: Vec<Vec<cpu::Hit>> = (0..s)
                    .map(|q| cpu::brute_force(&data, batch1.row(q), k))
                    .collect();
                recall_note = format!(
                    "recall@10 at {pct}% (nprobe {}), {s} queries against brute force: {:.3}",
                    args.nprobe,
                    cpu::recall(&found, &exact, k)
                );
            }
        }
    }
    bar.finish_and_clear();
    let report = mach.stop_service();

    // Table.
    let gbps = |bytes: u64, s: f64| bytes as f64 / s / 1e9;
    let mut md = String::new();
    let _ = writeln!(md, "device: {} (sm_{}), driver CUDA {major}.{minor}; index {:.2} GiB, {} lists, dim {}, nprobe {}", gpu.name(), gpu.compute_capability(), index.index_bytes() as f64 / (1u64 << 30) as f64, args.nlist, args.dim, args.nprobe);
    let _ = writeln!(md, "pinned cudaMemcpy H2D (same run): {pinned:.1} GB/s; probe: faults {:.1}, bulk prefetch {:.1}, range prefetch {:.1}, remote {:.1} GB/s, hints migrate: {}", profile.fault_gbps, profile.bulk_prefetch_gbps, profile.range_prefetch_gbps, profile.remote_gbps, profile.kernel_hints_migrate);
    if !recall_note.is_empty() {
        let _ = writeln!(md, "{recall_note}");
    }
    if let Some(r) = report {
        let _ = writeln!(
            md,
            "prefetch service: {} requests, {:.2} GB, {} failed",
            r.requests,
            r.bytes as f64 / 1e9,
            r.failed
        );
    }
    let _ = writeln!(md);
    let _ = writeln!(md, "| probed % | policy | ran | needed MB | cold ms | cold GB/s | % of pinned | x faults | warm ms | resident ms | warm / resident | cold GPU ms | lists arrived by request | same top-k |");
    let _ = writeln!(
        md,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let mut csv = String::from("probed_percent,policy,ran,needed_bytes,cold_s,cold_gbps,pinned_gbps,warm_s,resident_s,same_topk\n");
    for r in &rows {
        let faults = rows
            .iter()
            .find(|x| x.policy == Policy::Faults && (x.percent - r.percent).abs() < 1e-9)
            .map(|x| x.cold_s);
        let g = gbps(r.needed_bytes, r.cold_s);
        let _ = writeln!(
            md,
            "| {:.1} | {} | {} | {:.0} | {:.1} | {:.1} | {:.0}% | {} | {:.1} | {:.1} | {:.2} | {:.1} | {}/{} | {} |",
            r.percent, r.policy.name(), r.chosen.name(), r.needed_bytes as f64 / 1e6, r.cold_s * 1e3, g, g / pinned * 100.0,
            faults.map(|f| format!("{:.2}", f / r.cold_s)).unwrap_or_else(|| "-".into()),
            r.warm_s * 1e3, r.resident_s * 1e3, r.warm_s / r.resident_s, r.gpu_s * 1e3, r.arrived.0, r.arrived.1, if r.same_as_faults { "yes" } else { "NO" }
        );
        let _ = writeln!(
            csv,
            "{:.3},{},{},{},{:.6},{:.3},{:.3},{:.6},{:.6},{}",
            r.percent,
            r.policy.name(),
            r.chosen.name(),
            r.needed_bytes,
            r.cold_s,
            g,
            pinned,
            r.warm_s,
            r.resident_s,
            r.same_as_faults
        );
    }
    println!("\n{md}");
    std::fs::create_dir_all(&args.out).map_err(|e| io_error(&args.out, e))?;
    let write = |name: &str, text: &str| {
        let p = args.out.join(name);
        std::fs::write(&p, text).map_err(|e| io_error(&p, e))
    };
    write("ivf_bench.md", &format!("# IVF policy benchmark\n\n{md}"))?;
    write("ivf_bench.csv", &csv)?;
    write(
        "ivf_bench.svg",
        &plot(
            &rows,
            pinned,
            &format!("{} / CUDA {major}.{minor}", gpu.name()),
        ),
    )?;
    if rows.iter().any(|r| !r.same_as_faults) {
        eprintln!("error: a policy changed the search results");
        return Err(Error::InvalidRange {
            start: 0,
            len: 0,
            limit: 0,
            reason: "a policy changed the top-k",
        });
    }
    Ok(())
}

fn io_error(path: &std::path::Path, e: std::io::Error) -> Error {
    eprintln!("error: writing {}: {e}", path.display());
    Error::InvalidRange {
        start: 0,
        len: 0,
        limit: 0,
        reason: "could not write results",
    }
}

/// Cold effective GB/s against probed fraction, one line per policy, and the pinned rate.
fn plot(rows: &[Row], pinned: f64, title: &str) -> String {
    use plotters::prelude::*;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 560)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let max_x = rows.iter().map(|r| r.percent).fold(1.0, f64::max) * 1.1;
        let max_y = rows
            .iter()
            .map(|r| r.needed_bytes as f64 / r.cold_s / 1e9)
            .fold(pinned, f64::max)
            * 1.1;
        let mut chart = match ChartBuilder::on(&root)
            .caption(
                format!("IVF cold search, effective GB/s on needed bytes ({title})"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d((0.5f64..max_x).log_scale(), 0.0..max_y)
        {
            Ok(c) => c,
            Err(_) => return svg_fallback(),
        };
        let _ = chart
            .configure_mesh()
            .x_desc("probed fraction of the index (%)")
            .y_desc("GB/s")
            .draw();
        let _ = chart
            .draw_series(LineSeries::new(
                [(0.5, pinned), (max_x, pinned)],
                BLACK.stroke_width(1),
            ))
            .map(|s| {
                s.label(format!("pinned memcpy {pinned:.1} GB/s"))
                    .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK))
            });
        for (i, policy) in Policy::CONCRETE
            .iter()
            .chain([Policy::Auto].iter())
            .enumerate()
        {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.policy == *policy)
                .map(|r| (r.percent, r.needed_bytes as f64 / r.cold_s / 1e9))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let color = Palette99::pick(i).to_rgba();
            let _ = chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map(|s| {
                    s.label(policy.name())
                        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color))
                });
            let _ = chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())));
        }
        let _ = chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw();
        let _ = root.present();
    }
    svg
}

fn svg_fallback() -> String {
    "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">plot failed</text></svg>"
        .into()
}
