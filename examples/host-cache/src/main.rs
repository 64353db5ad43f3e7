//! Data in host memory, read by kernels through Lookahead's GPU-driven cache
//! (`lookahead-cache`), against the other ways of reaching it, in one run:
//!
//! - **row gather** (an embedding or GNN feature gather): batches of rows drawn with Zipf
//!   popularity from a table of 512-byte rows;
//! - **IVF list scan**: batches of queries, each probing lists drawn with Zipf popularity
//!   (cluster popularity), the smallest distance per (query, list).
//!
//! Each runs its batches one after another from a cold start in every mode: the cache,
//! zero-copy reads of the mapped host memory, host-driven copies of exactly what a batch
//! needs (row gather), and, where the data fits in GPU memory, a device copy (the reference:
//! every batch's output must equal it) and Unified Memory (faults; the batch's ranges
//! prefetched). The pinned copy rate is measured in the same run.
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
use lookahead_cache::{CacheConfig, HostCache};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::data::Popularity;
use crate::modes::{run_mode, Mode, ModeRun, Places, Rows, Scans};
use host_cache_kernels::DIM;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Parser, Debug)]
#[command(
    about = "Host-memory data through the GPU-driven cache, against zero-copy, host copies, device memory and Unified Memory"
)]
struct Args {
    /// Folder for host_cache.{md,csv,svg}.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// GiB of data in host memory.
    #[arg(long, default_value_t = 8.0, value_parser = float_range(0.0, None))]
    gib: f64,
    /// MiB of device memory for the cache.
    #[arg(long, default_value_t = 1024, value_parser = at_least(1usize))]
    cache_mib: usize,
    /// KiB per cache page (a power of two, at least 1).
    #[arg(long, default_value_t = 64, value_parser = at_least(1usize))]
    page_kib: usize,
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
        if !(self.page_kib.is_power_of_two()) {
            return Err(format!(
                "--page-kib {} must be a power of two",
                self.page_kib
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
        cache_bytes: places.cache.capacity_bytes(),
        page_bytes: places.cache.config().page_bytes,
        args: format!("{} batches, Zipf {}, {} rows per gather batch, {} lists, {} queries x {} probes per scan batch", args.batches, args.zipf, args.batch_rows, args.lists, args.queries, args.nprobe),
    };
    let workloads = [("row gather", rows), ("IVF list scan", scans)];
    report::write(&out, &meta, &workloads)?;
    println!("\n{}", report::tables(&meta, &workloads));
    println!("wrote {}/host_cache.{{md,csv,svg}}", out.path().display());
    Ok(workloads
        .iter()
        .all(|(_, runs)| runs.iter().all(|r| r.identical)))
}

/// The data in host memory behind the cache, and a device and a managed copy where they fit.
fn places(gpu: &Gpu, args: &Args) -> Res<Places> {
    let len = ((args.gib * (1u64 << 30) as f64) as usize / 4 / DIM).max(1) * DIM;
    let config = CacheConfig::with_capacity(args.cache_mib << 20, args.page_kib << 10);
    let started = std::time::Instant::now();
    let cache = HostCache::from_fn(gpu, len, config, data::fill)?;
    println!(
        "- {:.1} GiB in pinned host memory (made in {:.1} s), cache of {} pages of {} KiB",
        (len * 4) as f64 / (1u64 << 30) as f64,
        started.elapsed().as_secs_f64(),
        config.slots,
        args.page_kib
    );
    let (free, _) = gpu.memory_info()?;
    let fits = 2 * len * 4 + (2usize << 30) < free;
    let device = if fits {
        Some(gpu.stream().clone_htod(cache.data())?)
    } else {
        None
    };
    let managed = if fits {
        let mut m = ManagedBuffer::<f32>::zeroed(gpu, len)?;
        m.as_mut_slice()?.copy_from_slice(cache.data());
        Some(m)
    } else {
        println!(
            "- the data does not fit twice in GPU memory: no device or Unified Memory baselines"
        );
        None
    };
    let sms = gpu
        .context()
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
        as u32;
    Ok(Places {
        gpu: gpu.clone(),
        sms,
        cache,
        device,
        managed,
    })
}

/// The modes that can run, the reference first.
fn modes(places: &Places, host_copy: bool) -> Vec<Mode> {
    [
        Mode::Resident,
        Mode::Cache,
        Mode::ZeroCopy,
        Mode::HostCopy,
        Mode::UvmFaults,
        Mode::UvmPrefetch,
    ]
    .into_iter()
    .filter(|m| places.has(*m) && (host_copy || *m != Mode::HostCopy))
    .collect()
}

fn rows_workload(p: &mut Places, args: &Args, rng: &mut StdRng) -> Res<Vec<ModeRun>> {
    let table_rows = p.cache.len() / DIM;
    let pop = Popularity::new(table_rows, args.zipf);
    let host_batches = data::row_batches(&pop, rng, args.batches, args.batch_rows);
    let batches = host_batches
        .iter()
        .map(|b| p.gpu.stream().clone_htod(b))
        .collect::<Result<_, _>>()?;
    let mut rows = Rows {
        batches,
        host_batches,
        out: p.gpu.stream().alloc_zeros::<f32>(args.batch_rows * DIM)?,
        staging: vec![0.0; args.batch_rows * DIM],
    };
    let mut reference: Vec<u64> = Vec::new();
    let mut runs = Vec::new();
    for mode in modes(p, true) {
        let run = run_mode(p, mode, args.batches, &mut reference, |p, m, b| {
            let ms = modes::rows_batch(p, &mut rows, m, b)?;
            Ok((ms, modes::digest(p, &rows.out, |v| v.to_bits())?))
        })?;
        println!(
            "row gather, {}: batch 1 {:.3} ms, last {:.3} ms, identical {}",
            mode.name(),
            run.ms[0],
            run.ms[run.ms.len() - 1],
            run.identical
        );
        runs.push(run);
    }
    Ok(runs)
}

fn scans_workload(p: &mut Places, args: &Args, rng: &mut StdRng) -> Res<Vec<ModeRun>> {
    let vectors = p.cache.len() / DIM;
    let host_off = data::list_offsets(rng, vectors, args.lists);
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
    let mut scans = Scans {
        list_off: s.clone_htod(&host_off)?,
        host_off,
        batches,
        host_batches,
        best: s.alloc_zeros::<u32>(args.queries * args.nprobe)?,
    };
    let mut reference: Vec<u64> = Vec::new();
    let mut runs = Vec::new();
    for mode in modes(p, false) {
        let run = run_mode(p, mode, args.batches, &mut reference, |p, m, b| {
            let ms = modes::scans_batch(p, &mut scans, m, b)?;
            Ok((ms, modes::digest(p, &scans.best, |v| *v)?))
        })?;
        println!(
            "IVF list scan, {}: batch 1 {:.3} ms, last {:.3} ms, identical {}",
            mode.name(),
            run.ms[0],
            run.ms[run.ms.len() - 1],
            run.identical
        );
        runs.push(run);
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use lookahead_bench::args::try_parse;

    #[test]
    fn arguments_are_checked_before_anything_runs() {
        Args::command().debug_assert();
        let a = try_parse::<Args>(&["--gib", "0.5", "--page-kib", "256"]).unwrap();
        assert_eq!((a.gib, a.page_kib), (0.5, 256));
        assert!(try_parse::<Args>(&["--page-kib", "48"])
            .unwrap_err()
            .to_string()
            .contains("power of two"));
        assert!(try_parse::<Args>(&["--nprobe", "9", "--lists", "8"]).is_err());
        assert!(try_parse::<Args>(&["--batches", "1"]).is_err());
    }
}
