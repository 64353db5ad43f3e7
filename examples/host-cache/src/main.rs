//! Data in host memory, read by kernels through Lookahead's GPU-driven cache
//! (`lookahead-cache`), against the other ways of reaching it, in one run:
//!
//! - **row gather** (an embedding or GNN feature gather): batches of rows drawn with Zipf
//!   popularity from a table of 4 KiB rows (`--row-floats`);
//! - **IVF list scan**: batches of queries, each probing lists drawn with Zipf popularity
//!   (cluster popularity), the smallest distance per (query, list).
//!
//! Each runs its batches one after another from a cold start in every mode: the cache,
//! zero-copy reads of the mapped host memory, host-driven copies of exactly what a batch
//! needs (row gather), and, where the data fits in GPU memory, a device copy and Unified
//! Memory (faults; the batch's ranges prefetched). Every batch's output in every mode must
//! equal the CPU reference's, computed from the host data (the data and queries lie on a
//! grid on which the scans' sums are exact). The pinned copy rate is measured in the same
//! run.
//!
//! `cargo run --release -p host-cache -- --gib 8 --out results`

mod data;
mod modes;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use cudarc::driver::sys;
use lookahead::{Gpu, ManagedBuffer};
use lookahead_bench::args::{at_least, float_range, Validate};
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_cache::{CacheConfig, Eviction, HostCache};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::data::Popularity;
use crate::modes::{run_mode, Mode, ModeRun, Places, Rows, Scans, Staged};
use host_cache_kernels::DIM;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Parser, Debug)]
#[command(
    about = "Host-memory data through the GPU-driven cache, against zero-copy, host copies, device memory and Unified Memory"
)]
struct Args {
    /// Folder for host_cache.md, host_cache.csv and a plot per workload (host_cache_*.svg).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// GiB of data in host memory.
    #[arg(long, default_value_t = 8.0, value_parser = float_range(0.0, None))]
    gib: f64,
    /// MiB of device memory for the cache.
    #[arg(long, default_value_t = 1024, value_parser = at_least(1usize))]
    cache_mib: usize,
    /// Floats per row of the gather's table (a power of two, at least 128: 512 bytes; GNN
    /// feature tables hold 128 to 1024, GIDS's IGB tables 1024: 4 KiB rows).
    #[arg(long, default_value_t = 1024, value_parser = at_least(128usize))]
    row_floats: usize,
    /// Bytes per cache page for the row gather (a power of two, at least a row; default: a
    /// row).
    #[arg(long)]
    row_page_bytes: Option<usize>,
    /// KiB per cache page for the list scan (a power of two).
    #[arg(long, default_value_t = 64, value_parser = at_least(1usize))]
    scan_page_kib: usize,
    /// The cache again at these page sizes (bytes, comma-separated; 0: none): those from a
    /// row to 64 KiB for the row gather, those from 16 KiB for the list scan.
    #[arg(long, value_delimiter = ',', default_values_t = [4096usize, 65536, 16384, 262144])]
    sweep: Vec<usize>,
    /// The cache's eviction policy: fifo, clock or counted:N (CLOCK counting up to N uses).
    #[arg(long, default_value = "counted:4")]
    eviction: Eviction,
    /// The cache again with these eviction policies, at each workload's page size
    /// (comma-separated; none: an empty list).
    #[arg(long, value_delimiter = ',', default_values = ["clock", "fifo"])]
    eviction_sweep: Vec<Eviction>,
    /// Batches per workload and mode.
    #[arg(long, default_value_t = 30, value_parser = at_least(2usize))]
    batches: usize,
    /// The Zipf exponent of row and list popularity.
    #[arg(long, default_value_t = 1.1, value_parser = float_range(0.0, None))]
    zipf: f64,
    /// Rows per gather batch.
    #[arg(long, default_value_t = 32768, value_parser = at_least(1usize))]
    batch_rows: usize,
    /// IVF lists.
    #[arg(long, default_value_t = 4096, value_parser = at_least(1usize))]
    lists: usize,
    /// Queries per IVF batch.
    #[arg(long, default_value_t = 32, value_parser = at_least(1usize))]
    queries: usize,
    /// Lists each query probes.
    #[arg(long, default_value_t = 16, value_parser = at_least(1usize))]
    nprobe: usize,
    /// Random seed (default: a fresh one each run).
    #[arg(long)]
    seed: Option<u64>,
}

impl Validate for Args {
    fn validate(&self) -> Result<(), String> {
        if !self.row_floats.is_power_of_two() {
            return Err("--row-floats must be a power of two".into());
        }
        if self.row_page() < self.row_floats * 4 {
            return Err(format!(
                "--row-page-bytes {} is smaller than a row ({} bytes)",
                self.row_page(),
                self.row_floats * 4
            ));
        }
        let pages = [
            ("--row-page-bytes", self.row_page()),
            ("--scan-page-kib", self.scan_page_kib << 10),
        ];
        if let Some((flag, _)) = pages.iter().find(|(_, v)| !v.is_power_of_two()) {
            return Err(format!("{flag} must be a power of two"));
        }
        if let Some(v) =
            (self.sweep.iter()).find(|v| **v != 0 && (!v.is_power_of_two() || **v < 512))
        {
            return Err(format!(
                "--sweep {v}: page sizes are powers of two of at least 512 bytes"
            ));
        }
        if self.nprobe > self.lists {
            return Err(format!(
                "--nprobe {} is more than --lists {}",
                self.nprobe, self.lists
            ));
        }
        Ok(())
    }
}

impl Args {
    /// The row gather's cache page in bytes.
    fn row_page(&self) -> usize {
        self.row_page_bytes.unwrap_or(self.row_floats * 4)
    }
}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    lookahead_bench::exit_code(start(&args), "Nothing was measured.")
}

fn start(args: &Args) -> Res<bool> {
    let out = OutDir::create(&args.out)?;
    let gpu = Gpu::new(0)?;
    let header = RunHeader::for_gpu(&gpu)?;
    println!("host_cache_bench: host-memory data through the GPU-driven cache");
    print!("{}", header.markdown());
    let pinned = lookahead_bench::stats::pinned_htod_gbps(&gpu)?;
    println!("- pinned host-to-device copy: {pinned:.1} GB/s");
    let mut places = places(&gpu, args)?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let mut rng = StdRng::seed_from_u64(seed);
    let rows = rows_workload(&mut places, args, &mut rng)?;
    let scans = scans_workload(&mut places, args, &mut rng)?;
    let meta = report::Meta {
        header,
        pinned_gbps: pinned,
        seed,
        data_bytes: places.cache.len() * 4,
        cache_bytes: args.cache_mib << 20,
        eviction: args.eviction,
        args: format!(
            "{} batches, Zipf {}, {} rows of {} bytes per gather batch, {} lists, {} queries x {} probes per scan batch, {} eviction",
            args.batches, args.zipf, args.batch_rows, args.row_floats * 4, args.lists, args.queries, args.nprobe, args.eviction
        ),
    };
    let workloads = [
        ("row gather", args.row_page(), rows),
        ("IVF list scan", args.scan_page_kib << 10, scans),
    ];
    report::write(&out, &meta, &workloads)?;
    println!("\n{}", report::tables(&meta, &workloads));
    println!(
        "wrote {}/host_cache.{{md,csv}} and host_cache_*.svg",
        out.path().display()
    );
    Ok(workloads.iter().all(|(_, _, m)| m.all_identical()))
}

/// The data in host memory behind the cache, and a device and a managed copy where they fit.
fn places(gpu: &Gpu, args: &Args) -> Res<Places> {
    // Whole rows and whole vectors (both powers of two).
    let unit = args.row_floats.max(DIM);
    let len = ((args.gib * (1u64 << 30) as f64) as usize / 4 / unit).max(1) * unit;
    let started = std::time::Instant::now();
    let cache = HostCache::from_fn(gpu, len, cache_config(args, args.row_page()), data::fill)?;
    println!(
        "- {:.1} GiB in pinned host memory (made in {:.1} s), cache of {} MiB",
        (len * 4) as f64 / (1u64 << 30) as f64,
        started.elapsed().as_secs_f64(),
        args.cache_mib
    );
    let (free, _) = gpu.memory_info()?;
    let fits = 2 * len * 4 + (2usize << 30) < free;
    let (device, managed) = if fits {
        let mut m = ManagedBuffer::<f32>::zeroed(gpu, len)?;
        m.as_mut_slice()?.copy_from_slice(cache.data());
        (Some(gpu.stream().clone_htod(cache.data())?), Some(m))
    } else {
        println!(
            "- the data does not fit twice in GPU memory: no device or Unified Memory baselines"
        );
        (None, None)
    };
    let sms = gpu
        .context()
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    Ok(Places {
        gpu: gpu.clone(),
        sms: sms as u32,
        cache,
        device,
        managed,
    })
}

/// The cache's shape for `page_bytes` pages.
fn cache_config(args: &Args, page_bytes: usize) -> CacheConfig {
    CacheConfig::with_capacity(args.cache_mib << 20, page_bytes).evicting(args.eviction)
}

/// What a workload measured: every mode, and the cache at the sweep's page sizes.
pub struct Measured {
    pub runs: Vec<ModeRun>,
    pub sweep: Vec<(usize, ModeRun)>,
    /// The cache at the main page size with the other eviction policies.
    pub by_eviction: Vec<(Eviction, ModeRun)>,
    /// GB/s of copying pages (the main page size) at random places of the host memory, with
    /// no cache: the ceiling of the cache's misses ([`modes::random_page_gbps`]).
    pub random_page_gbps: f64,
}

impl Measured {
    fn all_identical(&self) -> bool {
        let others = (self.sweep.iter().map(|s| &s.1)).chain(self.by_eviction.iter().map(|e| &e.1));
        self.runs.iter().chain(others).all(|r| r.identical)
    }
}

/// The modes that can run (device and Unified Memory where the data fits twice); the cache
/// with `#[prefetch_next(cache = ..)]` for the list scan only.
fn modes(places: &Places, rows: bool) -> Vec<Mode> {
    let all = [
        Mode::Resident,
        Mode::Cache,
        Mode::CachePrefetch,
        Mode::ZeroCopy,
        Mode::HostCopy,
        Mode::UvmFaults,
        Mode::UvmPrefetch,
    ];
    let fits = |m: &Mode| match m {
        Mode::CachePrefetch => !rows,
        _ => true,
    };
    all.into_iter()
        .filter(|m| places.has(*m) && fits(m))
        .collect()
}

/// Runs every mode with `page`-byte cache pages, then the cache at the `sweep` page sizes,
/// checking every batch's output against its digest in `reference` (the CPU's).
fn measure(
    p: &mut Places,
    args: &Args,
    (name, page, sweep, host_copy): (&str, usize, &[usize], bool),
    reference: &[u64],
    mut step: impl FnMut(&mut Places, Mode, usize) -> Res<(f64, u64)>,
) -> Res<Measured> {
    p.cache.reshape(cache_config(args, page))?;
    let random_page_gbps = modes::random_page_gbps(p, page as u64)?;
    println!(
        "{name}: pages of {page} bytes copied from random places at {random_page_gbps:.1} GB/s"
    );
    let say = |what: &str, r: &ModeRun| {
        let last = r.ms[r.ms.len() - 1];
        println!(
            "{name}, {what}: batch 1 {:.3} ms, last {last:.3} ms, same output {}",
            r.ms[0], r.identical
        );
    };
    let mut runs = Vec::new();
    for mode in modes(p, host_copy) {
        let run = run_mode(p, mode, reference, &mut step)?;
        say(mode.name(), &run);
        runs.push(run);
    }
    let mut swept = Vec::new();
    for &bytes in sweep.iter().filter(|b| **b != 0 && **b != page) {
        p.cache.reshape(cache_config(args, bytes))?;
        let run = run_mode(p, Mode::Cache, reference, &mut step)?;
        say(&format!("cache with {bytes}-byte pages"), &run);
        swept.push((bytes, run));
    }
    let mut by_eviction = Vec::new();
    for &eviction in args.eviction_sweep.iter().filter(|e| **e != args.eviction) {
        p.cache
            .reshape(cache_config(args, page).evicting(eviction))?;
        let run = run_mode(p, Mode::Cache, reference, &mut step)?;
        say(&format!("cache evicting by {eviction}"), &run);
        by_eviction.push((eviction, run));
    }
    Ok(Measured {
        runs,
        sweep: swept,
        by_eviction,
        random_page_gbps,
    })
}

fn rows_workload(p: &mut Places, args: &Args, rng: &mut StdRng) -> Res<Measured> {
    let pop = Popularity::new(p.cache.len() / args.row_floats, args.zipf);
    let host_batches = data::row_batches(&pop, rng, args.batches, args.batch_rows);
    let s = p.gpu.stream().clone();
    let batches = host_batches
        .iter()
        .map(|b| s.clone_htod(b))
        .collect::<Result<_, _>>()?;
    let mut rows = Rows {
        batches,
        host_batches,
        out: s.alloc_zeros::<f32>(args.batch_rows * args.row_floats)?,
        staging: modes::pinned_staging(&p.gpu, args.batch_rows * args.row_floats)?,
        row_len: args.row_floats,
    };
    let row_bytes = args.row_floats * 4;
    let sweep: Vec<usize> = (args.sweep.iter().copied())
        .filter(|b| (row_bytes..=65536).contains(b))
        .collect();
    let reference = modes::rows_reference(p.cache.data(), &rows.host_batches, args.row_floats);
    measure(
        p,
        args,
        ("row gather", args.row_page(), &sweep, true),
        &reference,
        |p, m, b| {
            let ms = modes::rows_batch(p, &mut rows, m, b)?;
            Ok((ms, modes::digest(p, &rows.out, |v| v.to_bits())?))
        },
    )
}

fn scans_workload(p: &mut Places, args: &Args, rng: &mut StdRng) -> Res<Measured> {
    let host_off = data::list_offsets(rng, p.cache.len() / DIM, args.lists);
    let pop = Popularity::new(args.lists, args.zipf);
    let host_batches = data::scan_batches(&pop, rng, args.batches, args.queries, args.nprobe);
    let s = p.gpu.stream().clone();
    let batches = (host_batches.iter())
        .map(|b| {
            Ok((
                s.clone_htod(&b.queries)?,
                s.clone_htod(&b.pair_list)?,
                s.clone_htod(&b.pair_query)?,
            ))
        })
        .collect::<Res<_>>()?;
    let most = (host_batches.iter())
        .map(|b| Staged::of(&host_off, b).floats())
        .max()
        .unwrap_or(0)
        .max(1);
    let mut scans = Scans {
        list_off: s.clone_htod(&host_off)?,
        host_off,
        batches,
        host_batches,
        best: s.alloc_zeros::<u32>(args.queries * args.nprobe)?,
        staging: modes::pinned_staging(&p.gpu, most)?,
        staged: s.alloc_zeros::<f32>(most)?,
    };
    let sweep: Vec<usize> = args.sweep.iter().copied().filter(|b| *b >= 16384).collect();
    let reference = modes::scans_reference(p.cache.data(), &scans.host_off, &scans.host_batches);
    measure(
        p,
        args,
        ("IVF list scan", args.scan_page_kib << 10, &sweep, false),
        &reference,
        |p, m, b| {
            let ms = modes::scans_batch(p, &mut scans, m, b)?;
            Ok((ms, modes::digest(p, &scans.best, |v| *v)?))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use lookahead_bench::args::try_parse;

    /// The error `args` give, which must name `what`.
    fn refused(args: &[&str], what: &str) {
        let e = try_parse::<Args>(args).unwrap_err().to_string();
        assert!(e.contains(what), "{args:?}: {e}");
    }

    #[test]
    fn arguments_are_checked_before_anything_runs() {
        Args::command().debug_assert();
        let a =
            try_parse::<Args>(&["--gib", "0.5", "--scan-page-kib", "256", "--sweep", "0"]).unwrap();
        assert_eq!((a.gib, a.scan_page_kib, a.sweep), (0.5, 256, vec![0]));
        let a = try_parse::<Args>(&["--row-floats", "1024"]).unwrap();
        assert_eq!(a.row_page(), 4096, "a page is a row unless told");
        let a =
            try_parse::<Args>(&["--eviction", "counted:8", "--eviction-sweep", "fifo"]).unwrap();
        assert_eq!(a.eviction, Eviction::CountedClock { max: 8 });
        assert_eq!(a.eviction_sweep, vec![Eviction::Fifo]);
        let small_page = ["--row-floats", "1024", "--row-page-bytes", "2048"];
        refused(&small_page, "smaller than a row");
        refused(&["--row-floats", "384"], "power of two");
        refused(&["--eviction", "lru"], "fifo, clock or counted:N");
        refused(&["--scan-page-kib", "48"], "power of two");
        refused(&["--sweep", "1000"], "--sweep 1000");
        assert!(try_parse::<Args>(&["--nprobe", "9", "--lists", "8"]).is_err());
        assert!(try_parse::<Args>(&["--batches", "1"]).is_err());
    }
}
