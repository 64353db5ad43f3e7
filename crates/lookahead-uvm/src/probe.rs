//! The start-up probe: measures, on this GPU and driver, how fast each mechanism moves
//! host-resident managed memory, and whether in-kernel prefetch instructions migrate pages
//! at all, so [`crate::policy::choose`] decides from numbers rather than assumptions.
//! Results are cached per device and driver.

use std::path::PathBuf;
use std::time::Instant;

use cudarc::driver::sys;
use lookahead::{
    Advice, ByteRange, Error, Gpu, Location, ManagedBuffer, PrefetchEngine, PrefetchOptions, Result,
};
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
            "faults {:.1} GB/s, bulk prefetch {:.1}, 2 MiB-range prefetch {:.1}, GPU-driven requests {:.1} ({}), remote read {:.1} (advice {:.0} ms/GiB), resident read {:.0}; in-kernel hints migrate: {} (read after hints {:.1} GB/s); probe took {:.0} ms",
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

    /// Measures this machine now (about 0.4 GB of managed memory moved; well under a
    /// second on a PCIe Gen5 H100). Needs 384 MiB of free device memory.
    pub fn probe(gpu: &Gpu) -> Result<Self> {
        let started = Instant::now();
        gpu.require(
            lookahead::Capability::ConcurrentManagedAccess,
            "the Unified Memory probe",
        )?;
        let kernels = UvmKernels::load(gpu)?;
        let stream = gpu.context().new_stream().map_err(|source| Error::Driver {
            call: "cuStreamCreate",
            source,
        })?;
        // Every page starts on the host: the buffer is written by the CPU.
        let mut buf = ManagedBuffer::<u32>::zeroed(gpu, REGIONS * REGION / 4)?;
        {
            let host = buf.as_mut_slice()?;
            for (i, w) in host.iter_mut().enumerate().step_by(1024) {
                *w = i as u32;
            }
        }
        // Four words: the warm-up below streams one 16-byte vector out of it.
        let sink = ManagedBuffer::<u32>::zeroed(gpu, 4)?;
        let sink_ptr = sink.device_ptr();
        let region = |i: usize| ByteRange {
            start: buf.device_ptr() + (i * REGION) as u64,
            len: REGION as u64,
        };
        let gb = REGION as f64 / 1e9;
        let timed = |f: &dyn Fn() -> Result<()>| -> Result<f64> {
            let t = Instant::now();
            f()?;
            stream.synchronize().map_err(|source| Error::Driver {
                call: "cuStreamSynchronize",
                source,
            })?;
            Ok(t.elapsed().as_secs_f64())
        };

        // Warm-up: module load, first launch.
        kernels.read_words(&stream, sink_ptr, 4, sink_ptr)?; // the 4 words of `sink`
        stream.synchronize().map_err(|source| Error::Driver {
            call: "cuStreamSynchronize",
            source,
        })?;

        // 0: fault path.
        let r0 = region(0);
        let fault_s = timed(&|| kernels.touch_pages(&stream, r0.start, r0.len, 4096, sink_ptr))?;
        // Resident read of region 0 (now on the GPU), best of three.
        let mut device_s = f64::MAX;
        for _ in 0..3 {
            device_s = device_s.min(timed(&|| {
                kernels.read_words(&stream, r0.start, r0.len / 4, sink_ptr)
            })?);
        }
        // 1: one bulk prefetch.
        let r1 = region(1);
        let to_gpu = Location::Device(gpu.ordinal());
        let bulk_s = timed(&|| lookahead::prefetch::prefetch_range(gpu, r1, to_gpu, &stream))?;
        // 2: 32 ranges of 2 MiB through the engine.
        let r2 = region(2);
        let pieces: Vec<ByteRange> = (0..32u64)
            .map(|i| ByteRange {
                start: r2.start + i * (2 << 20),
                len: 2 << 20,
            })
            .collect();
        let engine = PrefetchEngine::new(
            gpu,
            PrefetchOptions {
                piece_bytes: 2 << 20,
                ..PrefetchOptions::default()
            },
        )?;
        let t = Instant::now();
        engine.prefetch(&pieces, to_gpu)?.wait()?;
        let range_s = t.elapsed().as_secs_f64();
        // 3: remote reads, no migration (and what the advice itself costs).
        let r3 = region(3);
        let t = Instant::now();
        lookahead::advice::advise(gpu, r3, Advice::SetAccessedBy(to_gpu))?;
        let mut advice_s = t.elapsed().as_secs_f64();
        let remote_s = timed(&|| kernels.read_words(&stream, r3.start, r3.len / 4, sink_ptr))?;
        let t = Instant::now();
        lookahead::advice::advise(gpu, r3, Advice::UnsetAccessedBy(to_gpu))?;
        advice_s += t.elapsed().as_secs_f64();
        // 5: GPU-driven requests: 32 blocks each ask for a 2 MiB range and wait for it.
        let (request_gbps, request_outcome) = probe_requests(gpu, &kernels, &stream, region(5))?;
        // 4: in-kernel prefetch hints, then a read.
        let r4 = region(4);
        timed(&|| kernels.prefetch_sweep(&stream, r4.start, r4.len, 4096))?;
        let after_hints_s = timed(&|| kernels.read_words(&stream, r4.start, r4.len / 4, sink_ptr))?;
        // Host round trip: a 4-byte copy back and a synchronisation, best of five.
        let mut round_trip_s = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            let mut v = 0u32;
            // SAFETY: copies one word of the sink to the host.
            unsafe { sys::cuMemcpyDtoH_v2(&mut v as *mut u32 as *mut _, sink_ptr, 4) }
                .result()
                .map_err(|source| Error::Driver {
                    call: "cuMemcpyDtoH",
                    source,
                })?;
            round_trip_s = round_trip_s.min(t.elapsed().as_secs_f64());
        }

        let fault_gbps = gb / fault_s;
        let bulk_prefetch_gbps = gb / bulk_s;
        let range_prefetch_gbps = gb / range_s;
        let after_hints_gbps = gb / after_hints_s;
        let (major, minor) = gpu.driver_version()?;
        Ok(MachineProfile {
            device: gpu.name().to_string(),
            driver: format!("{major}.{minor}"),
            fault_gbps,
            bulk_prefetch_gbps,
            range_prefetch_gbps,
            remote_gbps: gb / remote_s,
            device_gbps: gb / device_s,
            prefetch_call_s: ((range_s - bulk_s) / pieces.len() as f64).max(0.0),
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

/// GB/s the request path delivers to a kernel that waits: `request_and_sum` over 32 ranges
/// of 2 MiB, each block asking for its range and waiting for it; 0 if any did not arrive.
fn probe_requests(
    gpu: &Gpu,
    kernels: &UvmKernels,
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    region: ByteRange,
) -> Result<(f64, String)> {
    const N: usize = 32;
    let piece = region.len / N as u64;
    let ring = std::sync::Arc::new(crate::RequestRing::new(gpu, N as u32, N as u32)?);
    let service = crate::PrefetchService::start(ring.clone(), crate::ServiceConfig::default())?;
    let ptrs: Vec<u64> = (0..N as u64).map(|i| region.start + i * piece).collect();
    let lens = vec![piece; N];
    let d = |call| move |source| Error::Driver { call, source };
    let dptrs = stream.clone_htod(&ptrs).map_err(d("cuMemcpyHtoD"))?;
    let dlens = stream.clone_htod(&lens).map_err(d("cuMemcpyHtoD"))?;
    let sums = stream.alloc_zeros::<u32>(N).map_err(d("cuMemAlloc"))?;
    let ready = stream.alloc_zeros::<u32>(N).map_err(d("cuMemAlloc"))?;
    fn addr<T>(s: &cudarc::driver::CudaSlice<T>, stream: &cudarc::driver::CudaStream) -> u64 {
        use cudarc::driver::DevicePtr;
        let (p, _sync) = s.device_ptr(stream);
        p
    }
    let (p, l) = (addr(&dptrs, stream), addr(&dlens, stream));
    let (su, re) = (addr(&sums, stream), addr(&ready, stream));
    stream.synchronize().map_err(d("cuStreamSynchronize"))?;
    let t = Instant::now();
    kernels.request_and_sum(
        stream,
        ring.queue(std::time::Duration::from_secs(1)),
        p,
        l,
        N as u32,
        0,
        su,
        re,
        N as u32,
    )?;
    stream.synchronize().map_err(d("cuStreamSynchronize"))?;
    let seconds = t.elapsed().as_secs_f64();
    service.stop();
    let codes = stream.clone_dtoh(&ready).map_err(d("cuMemcpyDtoH"))?;
    let count = |v| codes.iter().filter(|&&c| c == v).count();
    let outcome = format!(
        "{} of {N} arrived, {} went ahead, {} timed out, in {:.2} ms",
        count(1),
        count(2),
        count(3),
        seconds * 1e3
    );
    let gbps = if count(1) == N {
        region.len as f64 / seconds / 1e9
    } else {
        0.0
    };
    Ok((gbps, outcome))
}
