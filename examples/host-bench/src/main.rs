//! Host-runtime benchmark: how fast the prefetch engine moves host-resident managed memory
//! to the GPU (against a naive one-thread 2 MiB prefetch loop and pinned `cuMemcpyHtoD`),
//! and how fast the VMM growable vector grows (against cudaMalloc+copy+free and a managed
//! vector). Writes `host_bench.md` and `host_bench.csv` into `--out` (`results`), a folder
//! checked for writing before the GPU is opened.
//!
//! Transfers are timed with CUDA events (start recorded on an idle timing stream, end
//! recorded after that stream waited for every prefetch), after one warm-up, as the median
//! of `--repeats` runs; before each run the buffer is prefetched back to the host so every
//! page starts host-resident. Grows are host API calls (`cuMemCreate`, `cuMemMap`,
//! `cuMemAlloc`), so they are timed with the host clock around the call and a context
//! synchronize. Managed allocations never exceed the GPU's free memory (the crate refuses).

use std::error::Error as StdError;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use cudarc::driver::{result, sys, CudaStream};
use lookahead::range::ByteRange;
use lookahead::DriverContext;
use lookahead::{
    Error, Gpu, GrowableVec, Location, ManagedBuffer, PrefetchEngine, PrefetchOptions, Result,
    VecOptions,
};
use lookahead_bench::args::{at_least, Validate};
use lookahead_bench::header::RunHeader;
use lookahead_bench::output::OutDir;
use lookahead_bench::stats::{gb_per_s, median, repeat_after_warmup, time_on_stream};
use lookahead_bench::table::{Align, Table};
use rand::seq::SliceRandom;
use rand::SeedableRng;

const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

#[derive(Parser, Debug)]
#[command(
    name = "host_bench",
    about = "Prefetch-engine and growable-vector benchmark (needs a CUDA GPU)"
)]
struct Args {
    /// Managed buffer size for the prefetch measurements, GiB.
    #[arg(long, default_value_t = 4, value_parser = at_least(1usize))]
    gib: usize,
    /// Timed repeats per configuration (after one warm-up); the median is reported.
    #[arg(long, default_value_t = 5, value_parser = at_least(1usize))]
    repeats: usize,
    /// Vector growth: largest size to try, GiB (doublings from 1 GiB).
    #[arg(long, default_value_t = 64, value_parser = at_least(1usize))]
    max_vec_gib: usize,
    /// Vector growth: the size whose time-to-reach is reported, GiB (a power of two, at
    /// most --max-vec-gib).
    #[arg(long, default_value_t = 32, value_parser = at_least(1usize))]
    report_vec_gib: usize,
    /// Growth repeats (after one warm-up; the median is reported).
    #[arg(long, default_value_t = 3, value_parser = at_least(1usize))]
    grow_repeats: usize,
    /// Output directory for host_bench.md / host_bench.csv.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

impl Validate for Args {
    /// The reported size must be one the doublings reach.
    fn validate(&self) -> std::result::Result<(), String> {
        let r = self.report_vec_gib;
        if !r.is_power_of_two() || r > self.max_vec_gib {
            return Err(format!(
                "--report-vec-gib {r}: the growth doubles from 1 GiB up to --max-vec-gib {}, \
                 so expected a power of two from 1 to {}",
                self.max_vec_gib, self.max_vec_gib
            ));
        }
        Ok(())
    }
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
        gb_per_s(self.bytes as f64, self.ms * 1e-3)
    }
}

fn main() -> ExitCode {
    let args: Args = lookahead_bench::args::parse();
    lookahead_bench::exit_code(start(&args), "This benchmark needs one.")
}

/// Opens the results folder, then the GPU, then measures and reports.
fn start(args: &Args) -> std::result::Result<bool, Box<dyn StdError>> {
    let out = OutDir::create(&args.out)?;
    let gpu = Gpu::new(0)?;
    let header = RunHeader::for_gpu(&gpu)?;
    let caps = gpu.capabilities()?.clone();
    let (free, total) = gpu.memory_info()?;
    print!("{}", header.markdown());
    println!("{}", caps.summary());
    println!("free {} MiB of {} MiB", free / MIB, total / MIB);
    let mut rows: Vec<Row> = Vec::new();
    prefetch_section(&gpu, args, &mut rows)?;
    growth_section(&gpu, args, &mut rows)?;
    report(&header, &caps, args, &rows, &out)?;
    Ok(true)
}

/// What every prefetch measurement needs: the managed buffer, the stream the events are
/// recorded on, and how many timed runs to take.
struct Prefetch<'a> {
    gpu: &'a Gpu,
    buf: ManagedBuffer<u8>,
    timing: Arc<CudaStream>,
    reps: usize,
}

impl Prefetch<'_> {
    /// Median milliseconds of `op` on the timing stream over the timed runs after a warm-up,
    /// every page of the buffer moved back to the host before each run.
    fn median_ms(&self, op: &mut dyn FnMut(&CudaStream) -> Result<()>) -> Result<f64> {
        let times = repeat_after_warmup(self.reps, || {
            evict(self.gpu, &self.buf)?;
            time_on_stream(&self.timing, || op(&self.timing)).map(|(_, ms)| ms)
        })?;
        Ok(median(&times).unwrap_or(f64::NAN))
    }
}

fn evict(gpu: &Gpu, buf: &ManagedBuffer<u8>) -> Result<()> {
    buf.prefetch(Location::Host, gpu.stream())?;
    gpu.context().synchronize().during("cuCtxSynchronize")
}

fn prefetch_section(gpu: &Gpu, args: &Args, rows: &mut Vec<Row>) -> Result<()> {
    let bytes = args.gib * GIB;
    // SAFETY: u8 is valid for any bytes; the CPU writes every byte next.
    let mut buf = unsafe { ManagedBuffer::<u8>::uninit(gpu, bytes)? };
    for (i, b) in buf.as_mut_slice()?.chunks_mut(4096).enumerate() {
        b.fill(i as u8);
    }
    let p = Prefetch {
        gpu,
        buf,
        timing: gpu.context().new_stream().during("cuStreamCreate")?,
        reps: args.repeats,
    };
    for (case, ranges) in &cases(&p.buf, args.gib) {
        let useful = lookahead::range::total_bytes(&lookahead::range::coalesce(ranges));
        for (name, opts) in engine_configs() {
            if opts.max_gap > 0 && ranges.len() == 1 {
                continue;
            }
            rows.push(time_engine(&p, case, ranges, useful, name, opts)?);
        }
        rows.push(time_naive(&p, case, ranges, useful)?);
        if ranges.len() == 1 {
            let ms = p.median_ms(&mut |s| p.buf.prefetch(Location::Device(0), s))?;
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
    let timing = p.timing.clone();
    drop(p);
    pinned_baseline(gpu, &timing, args, rows)
}

/// 2 MiB lists of the buffer, in order (`i`th list).
fn list_range(buf: &ManagedBuffer<u8>, i: usize) -> ByteRange {
    ByteRange {
        start: buf.device_ptr() + (i * 2 * MIB) as u64,
        len: 2 * MIB as u64,
    }
}

/// The cases: (a) the whole buffer as one range, (b) every 2 MiB list in a random order,
/// (c) a random quarter of them.
fn cases(buf: &ManagedBuffer<u8>, gib: usize) -> Vec<(String, Vec<ByteRange>)> {
    let lists = buf.len() / (2 * MIB);
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut order: Vec<usize> = (0..lists).collect();
    order.shuffle(&mut rng);
    let all_shuffled: Vec<ByteRange> = order.iter().map(|&i| list_range(buf, i)).collect();
    let quarter: Vec<ByteRange> = all_shuffled[..lists / 4].to_vec();
    vec![
        (format!("(a) one {gib} GiB range"), vec![buf.byte_range()]),
        (format!("(b) {lists} random 2 MiB ranges"), all_shuffled),
        (format!("(c) {} random 2 MiB ranges", lists / 4), quarter),
    ]
}

/// The prefetch-engine configurations measured, by name.
fn engine_configs() -> Vec<(&'static str, PrefetchOptions)> {
    let d = PrefetchOptions::default();
    let threads = |threads, batch| PrefetchOptions {
        threads,
        batch,
        ..d
    };
    vec![
        ("engine default (32 thr, 32 MiB pieces)", d),
        ("engine 8 thr, 32 MiB pieces", threads(8, false)),
        ("engine 8 thr, 32 MiB pieces, batch call", threads(8, true)),
        ("engine 16 thr, 32 MiB pieces", threads(16, false)),
        (
            "engine 16 thr, 32 MiB pieces, batch call",
            threads(16, true),
        ),
        ("engine 4 thr, 32 MiB pieces", threads(4, false)),
        ("engine 1 thr, 32 MiB pieces, batch call", threads(1, true)),
        (
            "engine 8 thr, 8 MiB pieces, batch call",
            PrefetchOptions {
                piece_bytes: 8 << 20,
                ..threads(8, true)
            },
        ),
        (
            "engine 32 thr, 32 MiB pieces, bridge gaps <= 4 MiB",
            PrefetchOptions {
                max_gap: 4 << 20,
                ..d
            },
        ),
    ]
}

/// The prefetch engine configured as `opts`, moving `ranges` to the GPU.
fn time_engine(
    p: &Prefetch,
    case: &str,
    ranges: &[ByteRange],
    useful: u64,
    name: &str,
    opts: PrefetchOptions,
) -> Result<Row> {
    let engine = PrefetchEngine::new(p.gpu, opts)?;
    let (mut moved, mut pieces) = (0, 0);
    let ms = p.median_ms(&mut |s| {
        let mut ticket = engine.prefetch(ranges, Location::Device(0))?;
        ticket.wait_on(s)?;
        moved = ticket.bytes();
        pieces = ticket.pieces();
        Ok(())
    })?;
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
    Ok(Row {
        section: "prefetch",
        case: case.to_string(),
        method: name.to_string(),
        bytes: useful,
        ms,
        note,
    })
}

/// Naive: one thread, one stream, one `cuMemPrefetchAsync` per 2 MiB range as given (the
/// whole buffer as its 2 MiB lists in order).
fn time_naive(p: &Prefetch, case: &str, ranges: &[ByteRange], useful: u64) -> Result<Row> {
    let naive: Vec<ByteRange> = if ranges.len() == 1 {
        (0..p.buf.len() / (2 * MIB))
            .map(|i| list_range(&p.buf, i))
            .collect()
    } else {
        ranges.to_vec()
    };
    let loc = Location::Device(0).to_cu();
    let ms = p.median_ms(&mut |s| {
        for r in &naive {
            // SAFETY: ranges inside the live managed buffer.
            unsafe { result::mem_prefetch_async(r.start, r.len as usize, loc, s.cu_stream()) }
                .during("cuMemPrefetchAsync_v2")?;
        }
        Ok(())
    })?;
    println!(
        "{case:32} {:48} {ms:9.2} ms {:7.1} GB/s",
        "naive 1 thr, 2 MiB loop",
        useful as f64 / (ms * 1e6)
    );
    Ok(Row {
        section: "prefetch",
        case: case.to_string(),
        method: "naive 1 thread, 2 MiB cuMemPrefetchAsync loop".into(),
        bytes: useful,
        ms,
        note: format!("{} calls", naive.len()),
    })
}

/// Pinned host memory to device memory, the same bytes, in one call and in 64 MiB pieces.
fn pinned_baseline(
    gpu: &Gpu,
    timing: &Arc<CudaStream>,
    args: &Args,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let bytes = args.gib * GIB;
    let ctx = gpu.context();
    // SAFETY: u8 is valid for any bytes.
    let mut pinned =
        unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes, 0) }.during("cuMemHostAlloc")?;
    pinned.as_mut_slice().during("cuEventSynchronize")?.fill(7);
    // SAFETY: a plain allocation, freed below.
    let dev = unsafe { result::malloc_sync(bytes) }.during("cuMemAlloc")?;
    let src = pinned.as_ptr().during("cuEventSynchronize")?;
    for (label, piece) in [
        ("pinned cuMemcpyHtoDAsync, one call", bytes),
        ("pinned cuMemcpyHtoDAsync, 64 MiB pieces", 64 * MIB),
    ] {
        let copy = || {
            let mut off = 0;
            while off < bytes {
                let n = piece.min(bytes - off);
                // SAFETY: both buffers hold `bytes` bytes; the host one is pinned.
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        dev + off as u64,
                        src.add(off).cast(),
                        n,
                        timing.cu_stream(),
                    )
                }
                .result()
                .during("cuMemcpyHtoDAsync")?;
                off += n;
            }
            Ok(())
        };
        let times = repeat_after_warmup(args.repeats, || {
            time_on_stream(timing, copy).map(|(_, ms)| ms)
        })?;
        let ms = median(&times).unwrap_or(f64::NAN);
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
    unsafe { result::free_sync(dev) }.during("cuMemFree")?;
    drop(pinned);
    Ok(())
}

/// Seconds from the start to reach each size, (bytes, seconds), from 1 GiB by doublings.
type Steps = Vec<(usize, f64)>;

/// Grows from 1 GiB (reached at `t0`'s elapsed time) by doublings up to `max`: `grow(size)`
/// makes the vector `size` bytes and synchronises, or returns `Ok(Err(reason))` when it
/// cannot, which ends the growth. The steps and why the growth stopped early.
fn doublings(
    max: usize,
    t0: Instant,
    mut grow: impl FnMut(usize) -> Result<std::result::Result<(), String>>,
) -> Result<(Steps, Option<String>)> {
    let mut steps = vec![(GIB, t0.elapsed().as_secs_f64())];
    let mut size = 2 * GIB;
    while size <= max {
        let t = Instant::now();
        if let Err(reason) = grow(size)? {
            return Ok((steps, Some(reason)));
        }
        let prev = steps.last().map_or(0.0, |s| s.1);
        steps.push((size, prev + t.elapsed().as_secs_f64()));
        size *= 2;
    }
    Ok((steps, None))
}

fn grow_vmm(gpu: &Gpu, max: usize, reserve: usize) -> Result<(Steps, Option<String>)> {
    let t0 = Instant::now();
    let options = VecOptions {
        reserve_bytes: reserve,
        peers: vec![],
    };
    let mut v: GrowableVec<u8> = GrowableVec::with_options(gpu, GIB, options)?;
    v.resize_zeroed(GIB)?;
    gpu.synchronize()?;
    let (steps, stop) = doublings(max, t0, |size| match v.grow_to(size) {
        Ok(_) => gpu
            .context()
            .synchronize()
            .during("cuCtxSynchronize")
            .map(Ok),
        Err(e) => Ok(Err(short(&e))),
    })?;
    let remaps = v.remap_count();
    drop(v);
    Ok((steps, stop.or(Some(format!("{remaps} remaps")))))
}

fn grow_copy(gpu: &Gpu, max: usize) -> Result<(Steps, Option<String>)> {
    gpu.bind_to_thread()?;
    let s = gpu.stream().cu_stream();
    let t0 = Instant::now();
    // SAFETY: a plain allocation, freed below; the memset covers it.
    let mut cur = unsafe { result::malloc_sync(GIB) }.during("cuMemAlloc")?;
    unsafe { result::memset_d8_async(cur, 1, GIB, s) }.during("cuMemsetD8Async")?;
    gpu.synchronize()?;
    let grown = doublings(max, t0, |size| {
        // SAFETY: a plain allocation; the old half is copied in, then the old one freed.
        let new = match unsafe { result::malloc_sync(size) } {
            Ok(new) => new,
            Err(e) => return Ok(Err(format!("cuMemAlloc: {e}"))),
        };
        unsafe { result::memcpy_dtod_async(new, cur, size / 2, s) }.during("cuMemcpyDtoDAsync")?;
        gpu.synchronize()?;
        unsafe { result::free_sync(cur) }.during("cuMemFree")?;
        cur = new;
        Ok(Ok(()))
    });
    // SAFETY: the live allocation; no work pending.
    unsafe { result::free_sync(cur) }.during("cuMemFree")?;
    grown
}

fn grow_managed(gpu: &Gpu, max: usize) -> Result<(Steps, Option<String>)> {
    let s = gpu.stream();
    let t0 = Instant::now();
    // SAFETY: u8 is valid for any bytes.
    let mut cur = unsafe { ManagedBuffer::<u8>::uninit(gpu, GIB)? };
    cur.prefetch(Location::Device(0), s)?;
    unsafe { result::memset_d8_async(cur.device_ptr(), 1, GIB, s.cu_stream()) }
        .during("cuMemsetD8Async")?;
    gpu.synchronize()?;
    doublings(max, t0, |size| {
        // SAFETY: u8 is valid for any bytes.
        let new = match unsafe { ManagedBuffer::<u8>::uninit(gpu, size) } {
            Ok(new) => new,
            Err(e) => return Ok(Err(short(&e))),
        };
        new.prefetch(Location::Device(0), s)?;
        // SAFETY: both buffers are live; the old one holds size / 2 bytes.
        unsafe {
            result::memcpy_dtod_async(new.device_ptr(), cur.device_ptr(), size / 2, s.cu_stream())
        }
        .during("cuMemcpyDtoDAsync")?;
        gpu.synchronize()?;
        cur = new;
        Ok(Ok(()))
    })
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
        let mut largest = 0;
        let mut note = String::new();
        // Milliseconds from 1 GiB to the reported size; NaN where it was not reached.
        let times = repeat_after_warmup(args.grow_repeats, || {
            let (steps, stop) = f()?;
            largest = steps.last().map_or(0, |s| s.0);
            note = stop.unwrap_or_default();
            let base = steps.first().map_or(0.0, |s| s.1);
            let reached = steps.iter().find(|s| s.0 == report);
            Ok::<f64, Error>(reached.map_or(f64::NAN, |t| (t.1 - base) * 1e3))
        })?;
        let reached: Vec<f64> = times.into_iter().filter(|t| !t.is_nan()).collect();
        let ms = median(&reached).unwrap_or(f64::NAN);
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

/// The Markdown report: the run header, the device's memory capabilities, how it was
/// measured, and one table per section.
fn markdown(
    header: &RunHeader,
    caps: &lookahead::Capabilities,
    args: &Args,
    rows: &[Row],
) -> String {
    let mut md = format!(
        "# Host runtime benchmark (`host_bench`)\n\n{}",
        header.markdown()
    );
    md += &format!(
        "- memory: {} GiB, link {:?}, concurrentManagedAccess={}, pageableMemoryAccess={}, batch \
         prefetch={}\n\n",
        caps.total_memory >> 30,
        caps.interconnect,
        caps.concurrent_managed_access,
        caps.pageable_memory_access,
        caps.batch_prefetch
    );
    md += &format!(
        "Transfers: CUDA events, 1 warm-up, median of {} runs, pages prefetched back to the host \
         before every run; GB/s = bytes the ranges cover / time. Growth: host clock, median of {} \
         runs after a warm-up.\n\n",
        args.repeats, args.grow_repeats
    );
    let mut prefetch = Table::new(["case", "method", "ms", "GB/s", "note"])
        .align(2, Align::Right)
        .align(3, Align::Right);
    for r in rows.iter().filter(|r| r.section == "prefetch") {
        prefetch.push([
            r.case.clone(),
            r.method.clone(),
            format!("{:.2}", r.ms),
            format!("{:.1}", r.gbps()),
            r.note.clone(),
        ]);
    }
    let mut grow = Table::new(["growth", "method", "ms", "largest / note"]).align(2, Align::Right);
    for r in rows.iter().filter(|r| r.section == "grow") {
        grow.push([
            r.case.clone(),
            r.method.clone(),
            format!("{:.1}", r.ms),
            r.note.clone(),
        ]);
    }
    md += "## Moving host-resident managed memory to the GPU\n\n";
    md += &prefetch.to_markdown();
    md += "\n## Growing a vector\n\n";
    md += &grow.to_markdown();
    md
}

/// Every row as CSV.
fn csv(rows: &[Row]) -> lookahead_bench::Result<String> {
    let mut csv = Table::new([
        "section",
        "case",
        "method",
        "bytes",
        "median_ms",
        "gb_per_s",
        "note",
    ]);
    for r in rows {
        let gbps = if r.section == "prefetch" {
            r.gbps()
        } else {
            0.0
        };
        csv.push([
            r.section.to_string(),
            r.case.clone(),
            r.method.clone(),
            r.bytes.to_string(),
            format!("{:.3}", r.ms),
            format!("{gbps:.2}"),
            r.note.clone(),
        ]);
    }
    csv.to_csv()
}

fn report(
    header: &RunHeader,
    caps: &lookahead::Capabilities,
    args: &Args,
    rows: &[Row],
    out: &OutDir,
) -> std::result::Result<(), Box<dyn StdError>> {
    let md = markdown(header, caps, args, rows);
    println!("\n{md}");
    out.write("host_bench.md", md)?;
    out.write("host_bench.csv", csv(rows)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use lookahead_bench::args::try_parse;

    #[test]
    fn arguments_are_checked() {
        Args::command().debug_assert();
        let a = try_parse::<Args>(&[]).unwrap();
        assert_eq!((a.gib, a.report_vec_gib, a.max_vec_gib), (4, 32, 64));
        let e = try_parse::<Args>(&["--gib", "-1"]).unwrap_err().to_string();
        assert!(
            e.contains("'--gib <GIB>'") && e.contains("at least 1"),
            "{e}"
        );
        let e = try_parse::<Args>(&["--repeats", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'--repeats <REPEATS>'"), "{e}");
        let e = try_parse::<Args>(&["--report-vec-gib", "48"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("a power of two from 1 to 64"), "{e}");
        let e = try_parse::<Args>(&["--max-vec-gib", "16"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--report-vec-gib 32"), "{e}");
        assert!(try_parse::<Args>(&["--max-vec-gib", "16", "--report-vec-gib", "16"]).is_ok());
    }

    fn row(section: &'static str, case: &str, ms: f64) -> Row {
        Row {
            section,
            case: case.into(),
            method: "engine, 8 thr".into(),
            bytes: 4 << 30,
            ms,
            note: "128 pieces".into(),
        }
    }

    #[test]
    fn csv_has_every_row_and_rates_only_for_transfers() {
        let rows = [
            row("prefetch", "(a) one 4 GiB range", 85.0),
            row("grow", "1 GiB -> 32 GiB", 900.0),
        ];
        let csv = csv(&rows).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "section,case,method,bytes,median_ms,gb_per_s,note"
        );
        assert_eq!(
            lines[1],
            "prefetch,(a) one 4 GiB range,\"engine, 8 thr\",4294967296,85.000,50.53,128 pieces"
        );
        assert!(
            lines[2].ends_with(",900.000,0.00,128 pieces"),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn the_doublings_stop_at_max_or_when_refused() {
        let (steps, stop) = doublings(8 * GIB, Instant::now(), |_| Ok(Ok(()))).unwrap();
        let sizes: Vec<usize> = steps.iter().map(|s| s.0 / GIB).collect();
        assert_eq!((sizes, stop), (vec![1, 2, 4, 8], None));
        let (steps, stop) = doublings(8 * GIB, Instant::now(), |size| {
            Ok(if size > 2 * GIB {
                Err("full".into())
            } else {
                Ok(())
            })
        })
        .unwrap();
        assert_eq!((steps.len(), stop.as_deref()), (2, Some("full")));
    }
}
