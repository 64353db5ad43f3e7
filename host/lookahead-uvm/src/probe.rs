//! The start-up probe: measures, on this GPU and driver, how fast each mechanism moves
//! host-resident managed memory, and whether in-kernel prefetch instructions migrate pages
//! at all, so [`crate::policy::choose`] decides from numbers rather than assumptions.
//! Results are cached per device and driver.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaSlice, CudaStream};
use lookahead::{
    Advice, ByteRange, DriverContext, Gpu, Location, ManagedBuffer, ManagedView, PrefetchEngine,
    PrefetchOptions, Result,
};
use lookahead_uvm_kernels::{WordRange, ARRIVED, TIMED_OUT, WENT_AHEAD};
use serde::{Deserialize, Serialize};

use crate::kernels::UvmKernels;

/// What the probe measured. Rates are GB/s (1e9 bytes per second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineProfile {
    /// Device name.
    pub device: String,
    /// Driver CUDA version, e.g. "13.0".
    pub driver: String,
    /// Kernel reading host-resident pages, migrated by faults.
    pub fault_gbps: f64,
    /// One `cuMemPrefetchAsync` of a large range.
    pub bulk_prefetch_gbps: f64,
    /// Many 2 MiB ranges through the multi-threaded prefetch engine.
    pub range_prefetch_gbps: f64,
    /// Kernel reading host-resident pages in place, over the interconnect (the range has
    /// accessed-by advice for this GPU, so it maps the host pages instead of faulting).
    pub remote_gbps: f64,
    /// Kernel reading resident pages.
    pub device_gbps: f64,
    /// Extra cost per prefetch call beyond the bulk rate, seconds.
    pub prefetch_call_s: f64,
    /// A host round trip (tiny copy back plus synchronisation), seconds.
    pub host_round_trip_s: f64,
    /// Whether `prefetch.global.L2` over host-resident pages made a later read much faster.
    pub kernel_hints_migrate: bool,
    /// Read after the in-kernel hints, GB/s (compare with `fault_gbps`).
    pub after_hints_gbps: f64,
    /// The GPU-driven request path (a kernel asks a [`crate::PrefetchService`] for 2 MiB
    /// ranges through a [`crate::RequestRing`] and waits for each): GB/s of data delivered
    /// while the kernel waited; 0 when any request failed to arrive (the path does not work
    /// here, so `Auto` never picks it).
    #[serde(default)]
    pub request_gbps: f64,
    /// What the request probe saw: how many of its requests arrived, went ahead on the
    /// fault path, or timed out.
    #[serde(default)]
    pub request_outcome: String,
    /// Setting and then clearing the remote-mapping advice (accessed by this GPU) on
    /// managed memory, seconds per GiB of the advised range. (Setting is nearly all of it:
    /// the driver maps every host-resident page for the GPU.)
    #[serde(default)]
    pub remote_advice_s_per_gib: f64,
    /// How long the probe took, seconds.
    pub probe_s: f64,
}

impl Default for MachineProfile {
    /// Placeholder-free defaults used only by tests that build profiles by hand.
    fn default() -> Self {
        MachineProfile {
            device: String::new(),
            driver: String::new(),
            fault_gbps: 1.0,
            bulk_prefetch_gbps: 1.0,
            range_prefetch_gbps: 1.0,
            remote_gbps: 1.0,
            device_gbps: 1.0,
            prefetch_call_s: 0.0,
            host_round_trip_s: 0.0,
            kernel_hints_migrate: false,
            after_hints_gbps: 1.0,
            request_gbps: 0.0,
            request_outcome: String::new(),
            remote_advice_s_per_gib: 0.0,
            probe_s: 0.0,
        }
    }
}

/// Bytes per probe region; six regions are used.
const REGION: usize = 64 << 20;
const REGIONS: usize = 6;

/// Where the profile of `device` with `driver` is cached.
pub fn cache_path(device: &str, driver: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let name: String = format!("probe-v3-{device}-{driver}.json")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(base.join("lookahead").join(name))
}

impl MachineProfile {
    /// The cached profile of this GPU and driver, or a fresh probe (then cached).
    pub fn cached_or_probe(gpu: &Gpu) -> Result<Self> {
        let (major, minor) = gpu.driver_version()?;
        let driver = format!("{major}.{minor}");
        let path = cache_path(gpu.name(), &driver);
        if let Some(p) = &path {
            if let Ok(text) = std::fs::read_to_string(p) {
                if let Ok(profile) = serde_json::from_str::<MachineProfile>(&text) {
                    return Ok(profile);
                }
            }
        }
        let profile = Self::probe(gpu)?;
        if let Some(p) = &path {
            if let Some(dir) = p.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(
                p,
                serde_json::to_string_pretty(&profile).unwrap_or_default(),
            );
        }
        Ok(profile)
    }

    /// One line for logs and result files.
    pub fn summary(&self) -> String {
        format!(
            "faults {:.1} GB/s, bulk prefetch {:.1}, 2 MiB-range prefetch {:.1}, GPU-driven \
             requests {:.1} ({}), remote read {:.1} (advice {:.0} ms/GiB), resident read {:.0}; \
             in-kernel hints migrate: {} (read after hints {:.1} GB/s); probe took {:.0} ms",
            self.fault_gbps,
            self.bulk_prefetch_gbps,
            self.range_prefetch_gbps,
            self.request_gbps,
            self.request_outcome,
            self.remote_gbps,
            self.remote_advice_s_per_gib * 1e3,
            self.device_gbps,
            self.kernel_hints_migrate,
            self.after_hints_gbps,
            self.probe_s * 1e3
        )
    }

    /// Measures this machine now (about 0.4 GB of managed memory moved; the probe line of
    /// `results/ivf_bench.md` says how long it took there). Needs 384 MiB of free device
    /// memory.
    pub fn probe(gpu: &Gpu) -> Result<Self> {
        let started = Instant::now();
        gpu.require(
            lookahead::Capability::ConcurrentManagedAccess,
            "the Unified Memory probe",
        )?;
        let mut p = Probe::new(gpu)?;
        let gb = REGION as f64 / 1e9;
        p.warm_up()?;
        let fault_s = p.faults(0)?;
        // Resident read of region 0 (now on the GPU).
        let device_s = best_of(3, || p.timed_read(0))?;
        let bulk_s = p.bulk_prefetch(1)?;
        let range_s = p.range_prefetch(2)?;
        let (remote_s, advice_s) = p.remote_read(3)?;
        let region5 = p.region(5);
        let (request_gbps, request_outcome) = probe_requests(gpu, &p.kernels, &p.stream, &region5)?;
        p.kernels.prefetch_sweep(&p.stream, &p.region(4), 1024)?;
        p.sync()?;
        let after_hints_s = p.timed_read(4)?;
        let round_trip_s = p.round_trip()?;

        let fault_gbps = gb / fault_s;
        let after_hints_gbps = gb / after_hints_s;
        let (major, minor) = gpu.driver_version()?;
        Ok(MachineProfile {
            device: gpu.name().to_string(),
            driver: format!("{major}.{minor}"),
            fault_gbps,
            bulk_prefetch_gbps: gb / bulk_s,
            range_prefetch_gbps: gb / range_s,
            remote_gbps: gb / remote_s,
            device_gbps: gb / device_s,
            prefetch_call_s: ((range_s - bulk_s) / RANGE_PIECES as f64).max(0.0),
            host_round_trip_s: round_trip_s,
            // Migrated pages read at least 3x faster than faulting ones.
            kernel_hints_migrate: after_hints_gbps > 3.0 * fault_gbps,
            after_hints_gbps,
            request_gbps,
            request_outcome,
            remote_advice_s_per_gib: advice_s / (REGION as f64 / (1u64 << 30) as f64),
            probe_s: started.elapsed().as_secs_f64(),
        })
    }
}

/// 2 MiB ranges the engine prefetches in region 2.
const RANGE_PIECES: usize = 32;

/// What the probe measures with: six host-resident regions of one managed buffer, a sink for
/// the read kernels' checksums, a stream.
struct Probe<'g> {
    gpu: &'g Gpu,
    kernels: UvmKernels,
    stream: Arc<CudaStream>,
    buf: ManagedBuffer<u32>,
    sink: CudaSlice<u32>,
}

impl<'g> Probe<'g> {
    fn new(gpu: &'g Gpu) -> Result<Self> {
        let kernels = UvmKernels::load(gpu)?;
        let stream = gpu.context().new_stream().during("cuStreamCreate")?;
        // Every page starts on the host: the buffer is written by the CPU.
        let mut buf = ManagedBuffer::<u32>::zeroed(gpu, REGIONS * REGION / 4)?;
        for (i, w) in buf.as_mut_slice()?.iter_mut().enumerate().step_by(1024) {
            *w = i as u32;
        }
        let sink = stream.alloc_zeros::<u32>(4).during("cuMemAlloc")?;
        Ok(Probe {
            gpu,
            kernels,
            stream,
            buf,
            sink,
        })
    }

    fn region(&self, i: usize) -> ManagedView<'_, u32> {
        let words = REGION / 4;
        self.buf
            .view(i * words..(i + 1) * words)
            .expect("the buffer holds every region")
    }

    fn bytes(&self, i: usize) -> Result<ByteRange> {
        let words = REGION / 4;
        self.buf.elements(i * words..(i + 1) * words)
    }

    /// The first launch, off the clock: reads four words of device memory.
    fn warm_up(&mut self) -> Result<()> {
        let words = self.stream.alloc_zeros::<u32>(4).during("cuMemAlloc")?;
        self.kernels
            .read_words(&self.stream, &words, &mut self.sink)?;
        self.sync()
    }

    fn sync(&self) -> Result<()> {
        self.stream.synchronize().during("cuStreamSynchronize")
    }

    /// Seconds to stream region `i` through a kernel.
    fn timed_read(&mut self, i: usize) -> Result<f64> {
        let t = Instant::now();
        let region = self.buf.view(i * REGION / 4..(i + 1) * REGION / 4)?;
        self.kernels
            .read_words(&self.stream, &region, &mut self.sink)?;
        self.stream.synchronize().during("cuStreamSynchronize")?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Seconds for a kernel to fault region `i` over, a word per 4 KiB page.
    fn faults(&mut self, i: usize) -> Result<f64> {
        let t = Instant::now();
        let region = self.buf.view(i * REGION / 4..(i + 1) * REGION / 4)?;
        self.kernels
            .touch_pages(&self.stream, &region, 1024, &mut self.sink)?;
        self.sync()?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Seconds for one `cuMemPrefetchAsync` of region `i`.
    fn bulk_prefetch(&self, i: usize) -> Result<f64> {
        let to = Location::Device(self.gpu.ordinal());
        let t = Instant::now();
        lookahead::prefetch::prefetch_range(self.gpu, self.bytes(i)?, to, &self.stream)?;
        self.sync()?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Seconds for the engine to prefetch region `i` as 2 MiB ranges.
    fn range_prefetch(&self, i: usize) -> Result<f64> {
        let r = self.bytes(i)?;
        let piece = r.len / RANGE_PIECES as u64;
        let pieces: Vec<ByteRange> = (0..RANGE_PIECES as u64)
            .map(|k| ByteRange {
                start: r.start + k * piece,
                len: piece,
            })
            .collect();
        let options = PrefetchOptions {
            piece_bytes: piece,
            ..PrefetchOptions::default()
        };
        let engine = PrefetchEngine::new(self.gpu, options)?;
        let t = Instant::now();
        engine
            .prefetch(&pieces, Location::Device(self.gpu.ordinal()))?
            .wait()?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Seconds to read region `i` over the interconnect (mapped, not migrated), and seconds
    /// to set and clear the mapping advice.
    fn remote_read(&mut self, i: usize) -> Result<(f64, f64)> {
        let (r, to) = (self.bytes(i)?, Location::Device(self.gpu.ordinal()));
        let t = Instant::now();
        lookahead::advice::advise(self.gpu, r, Advice::SetAccessedBy(to))?;
        let mut advice_s = t.elapsed().as_secs_f64();
        // Best of three, as the resident read: the pages stay on the host under the advice,
        // and one read alone measured 44 GB/s on an H100 whose searches then read at 50,
        // enough for `Auto` to pick GPU-driven requests over the pull at 63% probed.
        let read_s = best_of(3, || self.timed_read(i))?;
        let t = Instant::now();
        lookahead::advice::advise(self.gpu, r, Advice::UnsetAccessedBy(to))?;
        advice_s += t.elapsed().as_secs_f64();
        Ok((read_s, advice_s))
    }

    /// A host round trip: a 4-byte copy back and a synchronisation, best of five.
    fn round_trip(&self) -> Result<f64> {
        best_of(5, || {
            let t = Instant::now();
            let mut v = [0u32];
            self.stream
                .memcpy_dtoh(&self.sink.slice(0..1), &mut v)
                .during("cuMemcpyDtoH")?;
            self.sync()?;
            Ok(t.elapsed().as_secs_f64())
        })
    }
}

/// The least of `times` measurements (seconds) by `measure`: one run alone is noisier
/// than the machine.
fn best_of(times: usize, mut measure: impl FnMut() -> Result<f64>) -> Result<f64> {
    let mut best = f64::MAX;
    for _ in 0..times {
        best = best.min(measure()?);
    }
    Ok(best)
}

/// GB/s the request path delivers to a kernel that waits: `request_and_sum` over 32 ranges
/// of 2 MiB, each block asking for its range and waiting for it; 0 if any did not arrive.
fn probe_requests(
    gpu: &Gpu,
    kernels: &UvmKernels,
    stream: &Arc<CudaStream>,
    region: &ManagedView<'_, u32>,
) -> Result<(f64, String)> {
    const N: usize = 32;
    let words = (region.len() / N) as u64;
    let ring = Arc::new(crate::RequestRing::new(gpu, N as u32, N as u32)?);
    let service = crate::PrefetchService::start(ring.clone(), crate::ServiceConfig::default())?;
    let ranges: Vec<WordRange> = (0..N as u64)
        .map(|i| WordRange {
            first: i * words,
            words,
        })
        .collect();
    let ranges = stream.clone_htod(&ranges).during("cuMemcpyHtoD")?;
    let mut sums = stream.alloc_zeros::<u32>(N).during("cuMemAlloc")?;
    let mut ready = stream.alloc_zeros::<u32>(N).during("cuMemAlloc")?;
    stream.synchronize().during("cuStreamSynchronize")?;
    let t = Instant::now();
    let queue = ring.queue(std::time::Duration::from_secs(1));
    kernels.request_and_sum(
        stream, queue, region, &ranges, 0, &mut sums, &mut ready, N as u32,
    )?;
    stream.synchronize().during("cuStreamSynchronize")?;
    let seconds = t.elapsed().as_secs_f64();
    service.stop();
    let codes = stream.clone_dtoh(&ready).during("cuMemcpyDtoH")?;
    let count = |v| codes.iter().filter(|&&c| c == v).count();
    let outcome = format!(
        "{} of {N} arrived, {} went ahead, {} timed out, in {:.2} ms",
        count(ARRIVED),
        count(WENT_AHEAD),
        count(TIMED_OUT),
        seconds * 1e3
    );
    let bytes = region.len() as f64 * 4.0;
    let gbps = if count(ARRIVED) == N {
        bytes / seconds / 1e9
    } else {
        0.0
    };
    Ok((gbps, outcome))
}
