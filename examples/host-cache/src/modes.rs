//! Running a workload's batches in each way of reaching host data: through the cache,
//! zero-copy, host-driven copies, all-resident, and Unified Memory.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaSlice, CudaStream, PinnedHostSlice};
use host_cache_kernels::reference;
use host_cache_kernels::{
    copy_pages, gather_rows, gather_rows_device, gather_rows_zero_copy, scan_lists,
    scan_lists_device, scan_lists_prefetched, scan_lists_zero_copy, BLOCK, DIM,
};
use lookahead::launch::LaunchConfig;
use lookahead::prefetch::{prefetch_range, prefetch_ranges};
use lookahead::timing::{repeat_on_stream, time_on_stream, Summary};
use lookahead::{ByteRange, Gpu, Location, ManagedBuffer};
use lookahead_cache::{CacheStats, HostCache};

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::data::ScanBatch;
use crate::Res;

/// A way of reaching the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A copy of the data in device memory (the lower bound).
    Resident,
    /// Through the GPU-driven cache.
    Cache,
    /// Through the cache, the host memory of pages not yet cached prefetched into L2 two
    /// pages ahead (`#[prefetch_next(cache = ..)]`; list scan only).
    CachePrefetch,
    /// Straight from host memory over the interconnect, nothing kept.
    ZeroCopy,
    /// The host gathers exactly what the batch needs (its rows; its distinct lists, with the
    /// batch's offsets renumbered) into pinned memory and copies it over.
    HostCopy,
    /// Unified Memory, pages migrating on first touch.
    UvmFaults,
    /// Unified Memory with the batch's ranges prefetched to the GPU before its kernel.
    UvmPrefetch,
}

impl Mode {
    /// Whether it reads through the cache.
    pub fn uses_cache(self) -> bool {
        matches!(self, Mode::Cache | Mode::CachePrefetch)
    }

    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Resident => "all-resident (device memory)",
            Mode::Cache => "GPU-driven cache",
            Mode::CachePrefetch => "GPU-driven cache, prefetch_next(cache)",
            Mode::ZeroCopy => "zero-copy (mapped host memory)",
            Mode::HostCopy => "host-driven copy per batch",
            Mode::UvmFaults => "Unified Memory, faults",
            Mode::UvmPrefetch => "Unified Memory, batch prefetch",
        }
    }
}

/// What one mode did, batch by batch.
pub struct ModeRun {
    pub mode: Mode,
    /// Milliseconds per batch (GPU time; wall time for the host-driven copy).
    pub ms: Vec<f64>,
    /// The cache's counters per batch (cache modes only).
    pub stats: Vec<CacheStats>,
    /// Batch 1 from a cold start, [`COLD_STARTS`] times (the last is the sequence's own):
    /// milliseconds and the cache's counters.
    pub cold: Vec<(f64, CacheStats)>,
    /// Whether every batch's output equalled the CPU reference's.
    pub identical: bool,
}

/// The data in every place a mode reads it from.
pub struct Places {
    pub gpu: Gpu,
    /// Streaming multiprocessors of the GPU.
    pub sms: u32,
    pub cache: HostCache<f32>,
    pub device: Option<CudaSlice<f32>>,
    pub managed: Option<ManagedBuffer<f32>>,
}

impl Places {
    fn stream(&self) -> &Arc<CudaStream> {
        self.gpu.stream()
    }

    /// Puts the data back where a mode starts cold: the cache empty, managed pages on the
    /// host.
    pub fn make_cold(&mut self, mode: Mode) -> Res<()> {
        match mode {
            Mode::Cache | Mode::CachePrefetch => self.cache.clear()?,
            Mode::UvmFaults | Mode::UvmPrefetch => {
                let m = self.managed.as_ref().ok_or("no managed copy")?;
                prefetch_range(&self.gpu, m.byte_range(), Location::Host, self.stream())?;
                self.gpu.synchronize()?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether `mode` can run here.
    pub fn has(&self, mode: Mode) -> bool {
        match mode {
            Mode::Resident => self.device.is_some(),
            Mode::UvmFaults | Mode::UvmPrefetch => self.managed.is_some(),
            _ => true,
        }
    }

    /// The managed copy (every Unified Memory mode checks [`Places::has`] first).
    fn managed(&self) -> &ManagedBuffer<f32> {
        self.managed
            .as_ref()
            .expect("a Unified Memory mode runs only with a managed copy")
    }

    /// Before a Unified Memory batch: its `ranges` of the managed copy prefetched to the GPU
    /// on `stream` (none under the fault-driven mode).
    fn prefetch_to_gpu(&self, ranges: &[ByteRange], stream: &CudaStream) -> lookahead::Result<()> {
        if ranges.is_empty() {
            return Ok(());
        }
        prefetch_ranges(
            &self.gpu,
            ranges,
            Location::Device(self.gpu.ordinal()),
            stream,
            true,
        )
    }

    /// The ranges of whole rows `rows` of the managed copy, sorted and merged.
    fn managed_rows(&self, rows: impl Iterator<Item = (usize, usize)>) -> Res<Vec<ByteRange>> {
        let m = self.managed.as_ref().ok_or("no managed copy")?;
        let base = m.device_ptr();
        let mut spans: Vec<(usize, usize)> = rows.collect();
        spans.sort_unstable();
        let mut out: Vec<ByteRange> = Vec::new();
        for (s, e) in spans {
            let (start, end) = (base + (s * DIM * 4) as u64, base + (e * DIM * 4) as u64);
            match out.last_mut() {
                Some(r) if r.start + r.len >= start => r.len = r.len.max(end - r.start),
                _ => out.push(ByteRange::new(start, end - start)?),
            }
        }
        Ok(out)
    }
}

/// Every batch of one mode from a cold start; `step(places, mode, b)` runs batch `b` and
/// returns its milliseconds and a digest of its output, which must equal `reference[b]`
/// (the CPU reference's digest, one per batch).
pub fn run_mode(
    places: &mut Places,
    mode: Mode,
    reference: &[u64],
    mut step: impl FnMut(&mut Places, Mode, usize) -> Res<(f64, u64)>,
) -> Res<ModeRun> {
    // Once untimed (the module's first launch, allocations).
    step(places, mode, 0)?;
    let mut run = ModeRun {
        mode,
        ms: Vec::new(),
        stats: Vec::new(),
        cold: Vec::new(),
        identical: true,
    };
    // Batch 1 from a cold start is one sample per start: take several.
    for _ in 1..COLD_STARTS {
        places.make_cold(mode)?;
        let (ms, _) = step(places, mode, 0)?;
        let stats = match mode.uses_cache() {
            true => places.cache.stats()?, // zeroed by the cold start: this batch's
            false => CacheStats::default(),
        };
        run.cold.push((ms, stats));
    }
    places.make_cold(mode)?;
    let mut before = places.cache.stats()?;
    for (b, want) in reference.iter().enumerate() {
        let (ms, digest) = step(places, mode, b)?;
        run.ms.push(ms);
        if mode.uses_cache() {
            let now = places.cache.stats()?;
            run.stats.push(now.since(&before));
            before = now;
        }
        run.identical &= *want == digest;
    }
    run.cold
        .push((run.ms[0], run.stats.first().copied().unwrap_or_default()));
    Ok(run)
}

/// Cold starts of every mode (batch 1 is timed from a cold start this many times).
pub const COLD_STARTS: usize = 3;

impl ModeRun {
    /// The median cold start: its milliseconds and the cache's counters.
    pub fn cold_median(&self) -> (f64, CacheStats) {
        let mut c = self.cold.clone();
        c.sort_by(|a, b| a.0.total_cmp(&b.0));
        c[c.len() / 2]
    }
}

/// FNV-1a of a device buffer's 32-bit words (after the GPU is done with it).
pub fn digest<T: cudarc::driver::DeviceRepr + Default + Clone>(
    p: &Places,
    buf: &CudaSlice<T>,
    bits: impl Fn(&T) -> u32,
) -> Res<u64> {
    p.gpu.synchronize()?;
    let host = p.gpu.stream().clone_dtoh(buf)?;
    Ok(digest_words(host.iter().map(bits)))
}

/// FNV-1a of 32-bit words (their little-endian bytes): what [`digest`] computes of a
/// buffer, for outputs made on the host.
pub fn digest_words(words: impl Iterator<Item = u32>) -> u64 {
    let bytes: Vec<u8> = words.flat_map(u32::to_le_bytes).collect();
    lookahead::launch::decisions::fnv64(&bytes)
}

/// The digest of each row-gather batch's output as the CPU computes it from the host data
/// ([`reference::rows`]), the host's cores taking batches in turn.
pub fn rows_reference(data: &[f32], batches: &[Vec<u32>], row_len: usize) -> Vec<u64> {
    per_batch(batches.len(), |b| {
        digest_words(
            reference::rows(data, &batches[b], row_len)
                .iter()
                .map(|v| v.to_bits()),
        )
    })
}

/// The digest of each list-scan batch's minima as the CPU computes them from the host data
/// ([`reference::scans`]; exact, the data and queries being on its grid).
pub fn scans_reference(data: &[f32], host_off: &[u32], batches: &[ScanBatch]) -> Vec<u64> {
    per_batch(batches.len(), |b| {
        let s = &batches[b];
        let pairs = (&s.pair_list[..], &s.pair_query[..]);
        let best = reference::scans(data, DIM, host_off, &s.queries, pairs);
        digest_words(best.iter().map(|v| v.to_bits()))
    })
}

/// `f(b)` for every batch `b < n`, on up to 8 of the host's cores (each batch's output is
/// held whole while it is digested).
fn per_batch(n: usize, f: impl Fn(usize) -> u64 + Sync) -> Vec<u64> {
    let threads = std::thread::available_parallelism()
        .map_or(4, |t| t.get())
        .min(8);
    let mut out = vec![0u64; n];
    std::thread::scope(|s| {
        for (k, part) in out.chunks_mut(n.div_ceil(threads).max(1)).enumerate() {
            let f = &f;
            let first = k * n.div_ceil(threads).max(1);
            s.spawn(move || {
                for (i, d) in part.iter_mut().enumerate() {
                    *d = f(first + i);
                }
            });
        }
    });
    out
}

/// The row gather's inputs and output on the device.
pub struct Rows {
    pub batches: Vec<CudaSlice<u32>>,
    pub host_batches: Vec<Vec<u32>>,
    pub out: CudaSlice<f32>,
    pub staging: PinnedHostSlice<f32>,
    /// Floats per row.
    pub row_len: usize,
}

/// One batch of the row gather in `mode`.
pub fn rows_batch(p: &mut Places, rows: &mut Rows, mode: Mode, b: usize) -> Res<f64> {
    let cfg = LaunchConfig::new((p.sms * 8, 1, 1), (BLOCK, 1, 1));
    let (ids, out, len) = (&rows.batches[b], &mut rows.out, rows.row_len as u32);
    // Rows in the managed copy's units (vectors of DIM floats).
    let per_row = rows.row_len / DIM;
    let stream = p.stream().clone();
    if mode == Mode::HostCopy {
        let t = Instant::now();
        let l = rows.row_len;
        let ranges: Vec<(usize, usize)> = (rows.host_batches[b].iter())
            .map(|&r| (r as usize * l, (r as usize + 1) * l))
            .collect();
        host_gather(p.cache.data(), &ranges, rows.staging.as_mut_slice()?);
        stream.memcpy_htod(&rows.staging, out)?;
        stream.synchronize()?;
        return Ok(t.elapsed().as_secs_f64() * 1e3);
    }
    let ranges = match mode {
        Mode::UvmPrefetch => p.managed_rows(
            rows.host_batches[b]
                .iter()
                .map(|&r| (r as usize * per_row, (r as usize + 1) * per_row)),
        )?,
        _ => Vec::new(),
    };
    let (_, ms) = time_on_stream(&stream, || match mode {
        Mode::Resident => {
            gather_rows_device::launch(&stream, cfg, p.device.as_ref().unwrap(), ids, len, out)
        }
        Mode::Cache => gather_rows::launch(&stream, cfg, p.cache.view(), ids, len, out),
        Mode::ZeroCopy => {
            gather_rows_zero_copy::launch(&stream, cfg, p.cache.view(), ids, len, out)
        }
        Mode::UvmFaults | Mode::UvmPrefetch => {
            p.prefetch_to_gpu(&ranges, &stream)?;
            gather_rows_device::launch(&stream, cfg, p.managed(), ids, len, out)
        }
        Mode::HostCopy | Mode::CachePrefetch => Err(not_for(mode, "the row gather")),
    })?;
    Ok(ms)
}

/// The error for a mode a workload does not have (the benchmark never asks for one).
fn not_for(mode: Mode, workload: &str) -> lookahead::Error {
    lookahead::Error::InvalidArgument {
        call: "host_cache_bench",
        reason: format!("{} is not a mode of {workload}", mode.name()),
    }
}

/// The host-driven baselines' gather: the elements `ranges` of `table`, one after another,
/// into the front of `staging`, the host's cores splitting the ranges.
fn host_gather(table: &[f32], ranges: &[(usize, usize)], staging: &mut [f32]) {
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let per = ranges.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let mut rest = staging;
        for part in ranges.chunks(per) {
            let n: usize = part.iter().map(|(a, b)| b - a).sum();
            let (out, tail) = rest.split_at_mut(n);
            rest = tail;
            s.spawn(move || {
                let mut at = 0;
                for &(a, b) in part {
                    out[at..at + b - a].copy_from_slice(&table[a..b]);
                    at += b - a;
                }
            });
        }
    });
}

/// Page-locked host memory of `len` floats for a host-driven baseline's batches.
pub fn pinned_staging(gpu: &Gpu, len: usize) -> Res<PinnedHostSlice<f32>> {
    // SAFETY: any bits are a valid f32, and each batch writes what it copies before copying.
    Ok(unsafe {
        gpu.context()
            .alloc_pinned_with_flags::<f32>(len.max(1), 0)?
    })
}

/// The list scans' index, batches and output on the device.
pub struct Scans {
    pub list_off: CudaSlice<u32>,
    pub host_off: Vec<u32>,
    pub batches: Vec<(CudaSlice<f32>, CudaSlice<u32>, CudaSlice<u32>)>,
    pub host_batches: Vec<ScanBatch>,
    pub best: CudaSlice<u32>,
    /// The host-driven baseline's batch in host and in device memory (the largest batch's
    /// distinct lists).
    pub staging: PinnedHostSlice<f32>,
    pub staged: CudaSlice<f32>,
}

/// A batch's distinct lists, renumbered in the order the batch first probes them: their
/// element ranges in the data, their offsets one after another (in vectors), and the batch's
/// pairs' lists in the new numbering.
pub struct Staged {
    pub ranges: Vec<(usize, usize)>,
    pub offsets: Vec<u32>,
    pub pair_list: Vec<u32>,
}

impl Staged {
    /// `batch`'s lists of the index `host_off` (list `l`: vectors `host_off[l]..host_off[l + 1]`).
    pub fn of(host_off: &[u32], batch: &ScanBatch) -> Staged {
        let mut index = vec![u32::MAX; host_off.len() - 1];
        let mut s = Staged {
            ranges: Vec::new(),
            offsets: vec![0],
            pair_list: Vec::new(),
        };
        for &l in &batch.pair_list {
            if index[l as usize] == u32::MAX {
                index[l as usize] = s.ranges.len() as u32;
                let (a, e) = (host_off[l as usize], host_off[l as usize + 1]);
                s.ranges.push((a as usize * DIM, e as usize * DIM));
                s.offsets.push(s.offsets[s.offsets.len() - 1] + e - a);
            }
            s.pair_list.push(index[l as usize]);
        }
        s
    }

    /// Floats of the staged lists.
    pub fn floats(&self) -> usize {
        self.offsets[self.offsets.len() - 1] as usize * DIM
    }
}

/// The host-driven baseline's list scan of batch `b`: the host gathers the batch's distinct
/// lists into pinned memory, renumbers the batch's lists and offsets to match, copies both
/// over and scans them in device memory. Wall-clock milliseconds, host work included.
fn scans_by_host_copy(p: &Places, s: &mut Scans, b: usize) -> Res<f64> {
    let t = Instant::now();
    let stream = p.stream().clone();
    let staged = Staged::of(&s.host_off, &s.host_batches[b]);
    host_gather(p.cache.data(), &staged.ranges, s.staging.as_mut_slice()?);
    let floats = staged.floats();
    let mut dst = s.staged.slice_mut(0..floats.max(1));
    stream.memcpy_htod(&s.staging.as_slice()?[..floats], &mut dst)?;
    let off = stream.clone_htod(&staged.offsets)?;
    let lists = stream.clone_htod(&staged.pair_list)?;
    let (q, _, pq) = &s.batches[b];
    let pairs = lists.len();
    let mut best = s.best.slice_mut(0..pairs);
    stream.memcpy_htod(&vec![u32::MAX; pairs], &mut best)?;
    let cfg = LaunchConfig::new((pairs as u32, 1, 1), (BLOCK, 1, 1));
    scan_lists_device::launch(&stream, cfg, &s.staged, &off, q, &lists, pq, &mut best)?;
    stream.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// One batch of list scans in `mode`.
pub fn scans_batch(p: &mut Places, s: &mut Scans, mode: Mode, b: usize) -> Res<f64> {
    if mode == Mode::HostCopy {
        return scans_by_host_copy(p, s, b);
    }
    let stream = p.stream().clone();
    let (q, pl, pq) = &s.batches[b];
    let pairs = pl.len();
    let mut best = s.best.slice_mut(0..pairs);
    stream.memcpy_htod(&vec![u32::MAX; pairs], &mut best)?; // no minimum yet
    let cfg = LaunchConfig::new((pairs as u32, 1, 1), (BLOCK, 1, 1));
    let off = &s.list_off;
    let ranges = match mode {
        Mode::UvmPrefetch => {
            let h = &s.host_batches[b];
            p.managed_rows(h.pair_list.iter().map(|&l| {
                (
                    s.host_off[l as usize] as usize,
                    s.host_off[l as usize + 1] as usize,
                )
            }))?
        }
        _ => Vec::new(),
    };
    let (_, ms) = time_on_stream(&stream, || match mode {
        Mode::Resident => scan_lists_device::launch(
            &stream,
            cfg,
            p.device.as_ref().unwrap(),
            off,
            q,
            pl,
            pq,
            &mut best,
        ),
        Mode::Cache => scan_lists::launch(&stream, cfg, p.cache.view(), off, q, pl, pq, &mut best),
        Mode::CachePrefetch => {
            scan_lists_prefetched::launch(&stream, cfg, p.cache.view(), off, q, pl, pq, &mut best)
        }
        Mode::ZeroCopy => {
            scan_lists_zero_copy::launch(&stream, cfg, p.cache.view(), off, q, pl, pq, &mut best)
        }
        Mode::UvmFaults | Mode::UvmPrefetch => {
            p.prefetch_to_gpu(&ranges, &stream)?;
            scan_lists_device::launch(&stream, cfg, p.managed(), off, q, pl, pq, &mut best)
        }
        Mode::HostCopy => unreachable!("timed by scans_by_host_copy"),
    })?;
    Ok(ms)
}

/// GB/s of copying pages at random places of the data from host memory into device memory
/// with [`copy_pages()`] (the cache's miss copy without its table), at the cache's page size:
/// what the interconnect gives the cache's misses. Each of 5 timed runs (after an untimed
/// one) copies its own 64 MiB of distinct pages (when the data has that many), so none is
/// read from the L2 (50 MiB).
pub fn random_page_gbps(p: &Places, seed: u64) -> Res<f64> {
    let page = p.cache.config().page_bytes;
    let pages = p.cache.pages();
    let per_run = ((64usize << 20) / page).clamp(1, pages);
    let sets = 6.min(pages / per_run).max(1);
    let picks = rand::seq::index::sample(&mut StdRng::seed_from_u64(seed), pages, per_run * sets);
    let picks: Vec<u32> = picks.into_iter().map(|i| i as u32).collect();
    let stream = p.stream().clone();
    let sets = (picks.chunks(per_run))
        .map(|c| stream.clone_htod(c))
        .collect::<Result<Vec<_>, _>>()?;
    let mut scratch = stream.alloc_zeros::<f32>(per_run * page / 4)?;
    let cfg = LaunchConfig::new((p.sms * 8, 1, 1), (BLOCK, 1, 1));
    // The last set warms up; the others are timed (all of them again if there is one).
    let mut k = sets.len() - 1;
    let ms = repeat_on_stream(&stream, 1, 5, || {
        let ids = &sets[k % sets.len()];
        k += 1;
        copy_pages::launch(&stream, cfg, p.cache.view(), ids, &mut scratch)
    })?;
    let median = Summary::of(&ms).ok_or("no timings")?.median;
    Ok((per_run * page) as f64 / median / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{self, Popularity};
    use host_cache_kernels::gather_rows;
    use lookahead::emu::Emulator;
    use lookahead::launch::HostMemory;
    use lookahead_cache::CacheConfig;

    /// The benchmark's check with the real kernels on the emulator, over the benchmark's own
    /// data (`data::value`) and batches: the CPU reference's digests are the kernels' output,
    /// and a scan whose list offsets are off by one, or a gather of the next rows, gives
    /// another digest, which fails the run.
    #[test]
    fn the_cpu_reference_is_the_kernels_output_and_an_off_by_one_is_not() {
        let vectors = 96;
        let table: Vec<f32> = (0..vectors * DIM).map(data::value).collect();
        let cache =
            HostCache::<f32, HostMemory>::on_emulator(&table, CacheConfig::new(4096, 3)).unwrap();
        let emu = Emulator::new().workers(2);
        let mut rng = StdRng::seed_from_u64(8);
        let off = data::list_offsets(&mut rng, vectors, 12);
        let batch = data::scan_batches(&Popularity::new(12, 1.1), &mut rng, 1, 3, 4).remove(0);
        let want = scans_reference(&table, &off, std::slice::from_ref(&batch))[0];
        let scan = |off: &Vec<u32>| {
            let mut best = vec![u32::MAX; batch.pair_list.len()];
            let cfg = LaunchConfig::new((4, 1, 1), (64, 1, 1));
            let (q, pl, pq) = (&batch.queries, &batch.pair_list, &batch.pair_query);
            scan_lists::launch(&emu, cfg, cache.view(), off, q, pl, pq, &mut best).unwrap();
            digest_words(best.into_iter())
        };
        assert_eq!(scan(&off), want, "the kernel's minima are the CPU's");
        let end = off[off.len() - 1];
        let late: Vec<u32> = off.iter().map(|&o| (o + 1).min(end)).collect();
        assert_ne!(scan(&late), want, "offsets off by one pass the check");

        let rows = data::row_batches(&Popularity::new(vectors, 1.1), &mut rng, 1, 50);
        let want = rows_reference(&table, &rows, DIM)[0];
        let gather = |rows: &Vec<u32>| {
            let mut out = vec![f32::NAN; rows.len() * DIM];
            let cfg = LaunchConfig::new((2, 1, 1), (64, 1, 1));
            gather_rows::launch(&emu, cfg, cache.view(), rows, DIM as u32, &mut out).unwrap();
            digest_words(out.iter().map(|v| v.to_bits()))
        };
        assert_eq!(gather(&rows[0]), want, "the kernel's rows are the CPU's");
        let next: Vec<u32> = rows[0].iter().map(|&r| (r + 1) % vectors as u32).collect();
        assert_ne!(gather(&next), want, "rows off by one pass the check");
    }

    #[test]
    fn a_batch_stages_each_list_once_in_first_probe_order() {
        let host_off = [0, 2, 5, 5, 9];
        let batch = ScanBatch {
            queries: Vec::new(),
            pair_list: vec![3, 1, 3, 0, 1],
            pair_query: vec![0, 0, 1, 1, 1],
        };
        let s = Staged::of(&host_off, &batch);
        assert_eq!(
            s.ranges,
            [(5 * DIM, 9 * DIM), (2 * DIM, 5 * DIM), (0, 2 * DIM)]
        );
        assert_eq!(s.offsets, [0, 4, 7, 9]);
        assert_eq!(s.pair_list, [0, 1, 0, 2, 1]);
        assert_eq!(s.floats(), 9 * DIM);
    }
}
