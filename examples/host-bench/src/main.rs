//! Host-runtime benchmark: how fast the prefetch engine moves host-resident managed memory
//! to the GPU (against a naive one-thread 2 MiB prefetch loop and pinned `cuMemcpyHtoD`),
//! and how fast the VMM growable vector grows (against cudaMalloc+copy+free and a managed
//! vector). Writes `results/host_bench.md` and `results/host_bench.csv`.
//!
//! Transfers are timed with CUDA events (start recorded on an idle timing stream, end
//! recorded after that stream waited for every prefetch), after one warm-up, as the median
//! of `--repeats` runs; before each run the buffer is prefetched back to the host so every
//! page starts host-resident. Grows are host API calls (`cuMemCreate`, `cuMemMap`,
//! `cuMemAlloc`), so they are timed with the host clock around the call and a context
//! synchronize. Managed allocations never exceed the GPU's free memory (the crate refuses).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use cudarc::driver::{result, sys, CudaStream};
use lookahead::range::ByteRange;
use lookahead::{
    Error, Gpu, GrowableVec, Location, ManagedBuffer, PrefetchEngine, PrefetchOptions, Result,
    VecOptions,
};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

#[derive(Parser, Debug)]
#[command(about = "Prefetch-engine and growable-vector benchmark (needs a CUDA GPU)")]
struct Args {
    /// Managed buffer size for the prefetch measurements, GiB.
    #[arg(long, default_value_t = 4)]
    gib: usize,
    /// Timed repeats per configuration (after one warm-up); the median is reported.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Vector growth: largest size to try, GiB (doublings from 1 GiB).
    #[arg(long, default_value_t = 64)]
    max_vec_gib: usize,
    /// Vector growth: the size whose time-to-reach is reported, GiB.
    #[arg(long, default_value_t = 32)]
    report_vec_gib: usize,
    /// Growth repeats (the median is reported).
    #[arg(long, default_value_t = 3)]
    grow_repeats: usize,
    /// Output directory for host_bench.md / host_bench.csv.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

struct Row {
    section: &'static str,
    case: String,
    method: String,
    bytes: u64,
    ms: f64,
    note: String,
}

impl Row {
    fn gbps(&self) -> f64 {
        if self.ms > 0.0 {
            self.bytes as f64 / (self.ms * 1e6)
        } else {
            0.0
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

fn drv(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |source| Error::Driver { call, source }
}

/// Times `op` with events on `timing`: `op` must make `timing` wait for its work.
fn time_events(
    gpu: &Gpu,
    timing: &CudaStream,
    op: &mut dyn FnMut(&CudaStream) -> Result<()>,
) -> Result<f64> {
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = gpu
        .context()
        .new_event(flags)
        .map_err(drv("cuEventCreate"))?;
    let end = gpu
        .context()
        .new_event(flags)
        .map_err(drv("cuEventCreate"))?;
    start.record(timing).map_err(drv("cuEventRecord"))?;
    op(timing)?;
    end.record(timing).map_err(drv("cuEventRecord"))?;
    end.synchronize().map_err(drv("cuEventSynchronize"))?;
    Ok(start.elapsed_ms(&end).map_err(drv("cuEventElapsedTime"))? as f64)
}

fn evict(gpu: &Gpu, buf: &ManagedBuffer<u8>) -> Result<()> {
    buf.prefetch(Location::Host, gpu.stream())?;
    gpu.context().synchronize().map_err(drv("cuCtxSynchronize"))
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("host_bench: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
    let gpu = Gpu::new(0)?;
    let caps = gpu.capabilities()?.clone();
    let (free, total) = gpu.memory_info()?;
    println!("{}", caps.summary());
    println!("free {} MiB of {} MiB", free / MIB, total / MIB);
    let mut rows: Vec<Row> = Vec::new();
    prefetch_section(&gpu, args, &mut rows)?;
    growth_section(&gpu, args, &mut rows)?;
    report(&gpu, &caps, args, &rows)
}

fn prefetch_section(gpu: &Gpu, args: &Args, rows: &mut Vec<Row>) -> Result<()> {
    let bytes = args.gib * GIB;
    // SAFETY: u8 is valid for any bytes; the CPU writes every byte next.
    let mut buf = unsafe { ManagedBuffer::<u8>::uninit(gpu, bytes)? };
    for (i, b) in buf.as_mut_slice()?.chunks_mut(4096).enumerate() {
        b.fill(i as u8);
    }
    let timing = gpu.context().new_stream().map_err(drv("cuStreamCreate"))?;
    let list = 2 * MIB;
    let lists = bytes / list;
    let base = buf.device_ptr();
    let range_of = |i: usize| ByteRange {
        start: base + (i * list) as u64,
        len: list as u64,
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut order: Vec<usize> = (0..lists).collect();
    order.shuffle(&mut rng);
    let all_shuffled: Vec<ByteRange> = order.iter().map(|&i| range_of(i)).collect();
    let quarter: Vec<ByteRange> = order[..lists / 4].iter().map(|&i| range_of(i)).collect();
    let cases: Vec<(String, Vec<ByteRange>)> = vec![
        (
            format!("(a) one {} GiB range", args.gib),
            vec![buf.byte_range()],
        ),
        (format!("(b) {lists} random 2 MiB ranges"), all_shuffled),
        (format!("(c) {} random 2 MiB ranges", lists / 4), quarter),
    ];
    let _ = rng.gen::<u8>();

    let configs: Vec<(&str, PrefetchOptions)> = vec![
        (
            "engine default (32 thr, 32 MiB pieces)",
            PrefetchOptions::default(),
        ),
        (
            "engine 8 thr, 32 MiB pieces",
            PrefetchOptions {
                threads: 8,
                ..PrefetchOptions::default()
            },
        ),
        (
            "engine 8 thr, 32 MiB pieces, batch call",
            PrefetchOptions {
                threads: 8,
                batch: true,
                ..PrefetchOptions::default()
            },
        ),
        (
            "engine 16 thr, 32 MiB pieces",
            PrefetchOptions {
                threads: 16,
                ..PrefetchOptions::default()
            },
        ),
        (
            "engine 16 thr, 32 MiB pieces, batch call",
            PrefetchOptions {
                threads: 16,
                batch: true,
                ..PrefetchOptions::default()
            },
        ),
        (
            "engine 4 thr, 32 MiB pieces",
            PrefetchOptions {
                threads: 4,
                ..PrefetchOptions::default()
            },
        ),
        (
            "engine 1 thr, 32 MiB pieces, batch call",
            PrefetchOptions {
                threads: 1,
                batch: true,
                ..PrefetchOptions::default()
            },
        ),
        (
            "engine 8 thr, 8 MiB pieces, batch call",
            PrefetchOptions {
                threads: 8,
                piece_bytes: 8 << 20,
                batch: true,
                ..PrefetchOptions::default()
            },
        ),
        (
            "engine 32 thr, 32 MiB pieces, bridge gaps <= 4 MiB",
            PrefetchOptions {
                max_gap: 4 << 20,
                ..PrefetchOptions::default()
            },
        ),
    ];
    let reps = args.repeats.max(1);
    for (case, ranges) in &cases {
        let useful = lookahead::range::total_bytes(&lookahead::range::coalesce(ranges));
        for (name, opts) in &configs {
            if opts.max_gap > 0 && ranges.len() == 1 {
                continue;
            }
            let engine = PrefetchEngine::new(gpu, *opts)?;
            let mut times = Vec::new();
            let mut moved = 0;
            let mut pieces = 0;
            for rep in 0..=reps {
                evict(gpu, &buf)?;
                let t = time_events(gpu, &timing, &mut |s| {
                    let mut ticket = engine.prefetch(ranges, Location::Device(0))?;
                    ticket.wait_on(s)?;
                    moved = ticket.bytes();
                    pieces = ticket.pieces();
                    Ok(())
                })?;
                if rep > 0 {
                    times.push(t);
                }
            }
            let ms = median(times);
            let note = format!(
                "{pieces} pieces, {} MiB moved{}",
                moved as usize / MIB,
                if engine.uses_batch() {
                    ", cuMemPrefetchBatchAsync"
                } else {
                    ""
                }
            );
            println!(
                "{case:32} {name:48} {ms:9.2} ms {:7.1} GB/s  {note}",
                useful as f64 / (ms * 1e6)
            );
            rows.push(Row {
                section: "prefetch",
                case: case.clone(),
                method: name.to_string(),
                bytes: useful,
                ms,
                note,
            });
        }
        // Naive: one thread, one stream, one cuMemPrefetchAsync per 2 MiB range as given.
        let naive: Vec<ByteRange> = if ranges.len() == 1 {
            (0..lists).map(range_of).collect()
        } else {
            ranges.clone()
        };
        let loc = Location::Device(0).to_cu();
        let mut times = Vec::new();
        for rep in 0..=reps {
            evict(gpu, &buf)?;
            let t = time_events(gpu, &timing, &mut |s| {
                for r in &naive {
                    // SAFETY: ranges inside the live managed buffer.
                    unsafe {
                        result::mem_prefetch_async(r.start, r.len as usize, loc, s.cu_stream())
                    }
                    .map_err(drv("cuMemPrefetchAsync_v2"))?;
                }
                Ok(())
            })?;
            if rep > 0 {
                times.push(t);
            }
        }
        let ms = median(times);
        println!(
            "{case:32} {:48} {ms:9.2} ms {:7.1} GB/s",
            "naive 1 thr, 2 MiB loop",
            useful as f64 / (ms * 1e6)
        );
        rows.push(Row {
            section: "prefetch",
            case: case.clone(),
            method: "naive 1 thread, 2 MiB cuMemPrefetchAsync loop".into(),
            bytes: useful,
            ms,
            note: format!("{} calls", naive.len()),
        });
        if ranges.len() == 1 {
            let mut times = Vec::new();
            for rep in 0..=reps {
                evict(gpu, &buf)?;
                let t = time_events(gpu, &timing, &mut |s| buf.prefetch(Location::Device(0), s))?;
                if rep > 0 {
                    times.push(t);
                }
            }
            let ms = median(times);
            rows.push(Row {
                section: "prefetch",
                case: case.clone(),
                method: "single cuMemPrefetchAsync call".into(),
                bytes: useful,
                ms,
                note: "1 call".into(),
            });
        }
    }
    drop(buf);

    // Pinned host memory -> device memory, same bytes.
    let ctx = gpu.context();
    // SAFETY: u8 is valid for any bytes.
    let mut pinned =
        unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes, 0) }.map_err(drv("cuMemHostAlloc"))?;
    pinned
        .as_mut_slice()
        .map_err(drv("cuEventSynchronize"))?
        .fill(7);
    let dev = unsafe { result::malloc_sync(bytes) }.map_err(drv("cuMemAlloc"))?;
    let src = pinned.as_ptr().map_err(drv("cuEventSynchronize"))?;
    for (label, piece) in [
        ("pinned cuMemcpyHtoDAsync, one call", bytes),
        ("pinned cuMemcpyHtoDAsync, 64 MiB pieces", 64 * MIB),
    ] {
        let mut times = Vec::new();
        for rep in 0..=reps {
            let t = time_events(gpu, &timing, &mut |s| {
                let mut off = 0;
                while off < bytes {
                    let n = piece.min(bytes - off);
                    // SAFETY: both buffers hold `bytes` bytes; the host one is pinned.
                    unsafe {
                        sys::cuMemcpyHtoDAsync_v2(
                            dev + off as u64,
                            src.add(off).cast(),
                            n,
                            s.cu_stream(),
                        )
                    }
                    .result()
                    .map_err(drv("cuMemcpyHtoDAsync"))?;
                    off += n;
                }
                Ok(())
            })?;
            if rep > 0 {
                times.push(t);
            }
        }
        let ms = median(times);
        println!(
            "{:32} {label:48} {ms:9.2} ms {:7.1} GB/s",
            "pinned baseline",
            bytes as f64 / (ms * 1e6)
        );
        rows.push(Row {
            section: "prefetch",
            case: format!("baseline {} GiB", args.gib),
            method: label.into(),
            bytes: bytes as u64,
            ms,
            note: String::new(),
        });
    }
    // SAFETY: allocated above, no work pending (events synchronised).
    unsafe { result::free_sync(dev) }.map_err(drv("cuMemFree"))?;
    drop(pinned);
    Ok(())
}

/// One growth strategy: grow from 1 GiB by doublings; returns (seconds to each size).
type Steps = Vec<(usize, f64)>;

fn grow_vmm(gpu: &Gpu, max: usize, reserve: usize) -> Result<(Steps, Option<String>)> {
    let t0 = Instant::now();
    let mut v: GrowableVec<u8> = GrowableVec::with_options(
        gpu,
        GIB,
        VecOptions {
            reserve_bytes: reserve,
            peers: vec![],
        },
    )?;
    v.resize_zeroed(GIB)?;
    gpu.synchronize()?;
    let mut steps = vec![(GIB, t0.elapsed().as_secs_f64())];
    let mut size = 2 * GIB;
    let mut stop = None;
    while size <= max {
        let t = Instant::now();
        match v.grow_to(size) {
            Ok(_) => {
                gpu.context()
                    .synchronize()
                    .map_err(drv("cuCtxSynchronize"))?;
                let prev = steps.last().map_or(0.0, |s| s.1);
                steps.push((size, prev + t.elapsed().as_secs_f64()));
            }
            Err(e) => {
                stop = Some(short(&e));
                break;
            }
        }
        size *= 2;
    }
    let remaps = v.remap_count();
    drop(v);
    Ok((steps, stop.or(Some(format!("{remaps} remaps")))))
}

fn grow_copy(gpu: &Gpu, max: usize) -> Result<(Steps, Option<String>)> {
    gpu.bind_to_thread()?;
    let s = gpu.stream().cu_stream();
    let t0 = Instant::now();
    let mut cur = unsafe { result::malloc_sync(GIB) }.map_err(drv("cuMemAlloc"))?;
    unsafe { result::memset_d8_async(cur, 1, GIB, s) }.map_err(drv("cuMemsetD8Async"))?;
    gpu.synchronize()?;
    let mut steps = vec![(GIB, t0.elapsed().as_secs_f64())];
    let mut size = 2 * GIB;
    let mut stop = None;
    while size <= max {
        let t = Instant::now();
        match unsafe { result::malloc_sync(size) } {
            Ok(new) => {
                let old = size / 2;
                unsafe { result::memcpy_dtod_async(new, cur, old, s) }
                    .map_err(drv("cuMemcpyDtoDAsync"))?;
                gpu.synchronize()?;
                unsafe { result::free_sync(cur) }.map_err(drv("cuMemFree"))?;
                cur = new;
                let prev = steps.last().map_or(0.0, |s| s.1);
                steps.push((size, prev + t.elapsed().as_secs_f64()));
            }
            Err(e) => {
                stop = Some(format!("cuMemAlloc: {e}"));
                break;
            }
        }
        size *= 2;
    }
    unsafe { result::free_sync(cur) }.map_err(drv("cuMemFree"))?;
    Ok((steps, stop))
}

fn grow_managed(gpu: &Gpu, max: usize) -> Result<(Steps, Option<String>)> {
    let s = gpu.stream();
    let t0 = Instant::now();
    // SAFETY: u8 is valid for any bytes.
    let mut cur = unsafe { ManagedBuffer::<u8>::uninit(gpu, GIB)? };
    cur.prefetch(Location::Device(0), s)?;
    unsafe { result::memset_d8_async(cur.device_ptr(), 1, GIB, s.cu_stream()) }
        .map_err(drv("cuMemsetD8Async"))?;
    gpu.synchronize()?;
    let mut steps = vec![(GIB, t0.elapsed().as_secs_f64())];
    let mut size = 2 * GIB;
    let mut stop = None;
    while size <= max {
        let t = Instant::now();
        // SAFETY: u8 is valid for any bytes.
        match unsafe { ManagedBuffer::<u8>::uninit(gpu, size) } {
            Ok(new) => {
                new.prefetch(Location::Device(0), s)?;
                unsafe {
                    result::memcpy_dtod_async(
                        new.device_ptr(),
                        cur.device_ptr(),
                        size / 2,
                        s.cu_stream(),
                    )
                }
                .map_err(drv("cuMemcpyDtoDAsync"))?;
                gpu.synchronize()?;
                cur = new;
                let prev = steps.last().map_or(0.0, |s| s.1);
                steps.push((size, prev + t.elapsed().as_secs_f64()));
            }
            Err(e) => {
                stop = Some(short(&e));
                break;
            }
        }
        size *= 2;
    }
    drop(cur);
    Ok((steps, stop))
}

fn short(e: &Error) -> String {
    match e {
        Error::OutOfMemory {
            during,
            requested,
            available,
        } => format!(
            "refused/OOM in {during}: {} GiB requested, {:.1} GiB available",
            requested / GIB,
            *available as f64 / GIB as f64
        ),
        other => other.to_string(),
    }
}

fn growth_section(gpu: &Gpu, args: &Args, rows: &mut Vec<Row>) -> Result<()> {
    let max = args.max_vec_gib * GIB;
    let report = args.report_vec_gib * GIB;
    type Strategy<'a> = (
        &'a str,
        Box<dyn Fn() -> Result<(Steps, Option<String>)> + 'a>,
    );
    let strategies: Vec<Strategy> = vec![
        (
            "VMM GrowableVec (reserve 1 GiB, extend VA)",
            Box::new(|| grow_vmm(gpu, max, 0)),
        ),
        (
            "VMM GrowableVec (reserve max up front)",
            Box::new(|| grow_vmm(gpu, max, max)),
        ),
        ("cudaMalloc + copy + free", Box::new(|| grow_copy(gpu, max))),
        (
            "managed vector (alloc + prefetch + copy)",
            Box::new(|| grow_managed(gpu, max)),
        ),
    ];
    for (name, f) in &strategies {
        let mut to_report = Vec::new();
        let mut largest = 0;
        let mut note = String::new();
        for _ in 0..=args.grow_repeats.max(1) {
            let (steps, stop) = f()?;
            largest = steps.last().map_or(0, |s| s.0);
            let base = steps.first().map_or(0.0, |s| s.1);
            if let Some(t) = steps.iter().find(|s| s.0 == report) {
                to_report.push((t.1 - base) * 1e3);
            }
            note = stop.unwrap_or_default();
        }
        // The first run is the warm-up.
        let ms = if to_report.len() > 1 {
            median(to_report[1..].to_vec())
        } else {
            f64::NAN
        };
        println!(
            "{name:48} 1 -> {} GiB: {ms:9.1} ms; largest reached {} GiB ({note})",
            args.report_vec_gib,
            largest / GIB
        );
        rows.push(Row {
            section: "grow",
            case: format!("1 GiB -> {} GiB in doublings", args.report_vec_gib),
            method: name.to_string(),
            bytes: largest as u64,
            ms,
            note: format!("largest {} GiB; {note}", largest / GIB),
        });
    }
    Ok(())
}

fn report(gpu: &Gpu, caps: &lookahead::Capabilities, args: &Args, rows: &[Row]) -> Result<()> {
    let (dmaj, dmin) = caps.driver_version;
    let mut md = String::new();
    let _ = writeln!(md, "# Host runtime benchmark (`host_bench`)\n");
    let _ = writeln!(
        md,
        "Device: {} (sm_{}, {} SMs, {} GiB), driver CUDA {dmaj}.{dmin}, link {:?}, \
         concurrentManagedAccess={}, pageableMemoryAccess={}, batch prefetch={}.\n",
        gpu.name(),
        caps.compute_capability,
        caps.sm_count,
        caps.total_memory >> 30,
        caps.interconnect,
        caps.concurrent_managed_access,
        caps.pageable_memory_access,
        caps.batch_prefetch
    );
    let _ = writeln!(
        md,
        "Command: `host_bench --gib {} --repeats {} --max-vec-gib {} --report-vec-gib {} --grow-repeats {}`. \
         Transfers: CUDA events, 1 warm-up, median of {} runs, pages prefetched back to the host \
         before every run; GB/s = bytes the ranges cover / time. Growth: host clock, median of {} runs after a warm-up.\n",
        args.gib, args.repeats, args.max_vec_gib, args.report_vec_gib, args.grow_repeats,
        args.repeats, args.grow_repeats
    );
    let _ = writeln!(md, "## Moving host-resident managed memory to the GPU\n");
    let _ = writeln!(
        md,
        "| case | method | ms | GB/s | note |\n| --- | --- | ---: | ---: | --- |"
    );
    let mut csv = String::from("section,case,method,bytes,median_ms,gb_per_s,note\n");
    for r in rows {
        let _ = writeln!(
            csv,
            "{},\"{}\",\"{}\",{},{:.3},{:.2},\"{}\"",
            r.section,
            r.case,
            r.method,
            r.bytes,
            r.ms,
            if r.section == "prefetch" {
                r.gbps()
            } else {
                0.0
            },
            r.note
        );
    }
    for r in rows.iter().filter(|r| r.section == "prefetch") {
        let _ = writeln!(
            md,
            "| {} | {} | {:.2} | {:.1} | {} |",
            r.case,
            r.method,
            r.ms,
            r.gbps(),
            r.note
        );
    }
    let _ = writeln!(md, "\n## Growing a vector\n");
    let _ = writeln!(
        md,
        "| growth | method | ms | largest / note |\n| --- | --- | ---: | --- |"
    );
    for r in rows.iter().filter(|r| r.section == "grow") {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} |",
            r.case, r.method, r.ms, r.note
        );
    }
    println!("\n{md}");
    std::fs::create_dir_all(&args.out).map_err(io_err)?;
    std::fs::write(args.out.join("host_bench.md"), md).map_err(io_err)?;
    std::fs::write(args.out.join("host_bench.csv"), csv).map_err(io_err)?;
    Ok(())
}

fn io_err(_: std::io::Error) -> Error {
    Error::Driver {
        call: "writing results",
        source: cudarc::driver::DriverError(sys::cudaError_enum::CUDA_ERROR_OPERATING_SYSTEM),
    }
}
