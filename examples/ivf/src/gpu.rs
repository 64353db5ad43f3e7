//! The IVF search on the GPU, with the lists in managed memory and a Unified Memory
//! [`Policy`] chosen per search.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaSlice, CudaStream};
use ivf_kernels::{HINT_L2, HINT_NONE, K, SCAN_THREADS};
use lookahead::launch::LaunchConfig;
use lookahead::{
    Advice, ByteRange, Error, Gpu, Location, ManagedBuffer, PrefetchEngine, PrefetchOptions, Result,
};
use lookahead_device::requests::RequestQueue;
use lookahead_uvm::{
    policy, AccessPattern, MachineProfile, Policy, PrefetchService, RequestRing, ServiceConfig,
};

use crate::data::Vectors;
use crate::index::IvfLayout;

fn driver<T>(
    call: &'static str,
    r: std::result::Result<T, cudarc::driver::DriverError>,
) -> Result<T> {
    r.map_err(|source| Error::Driver { call, source })
}

/// An index whose list vectors are in managed memory (written by the CPU, so they start on
/// the host) and whose small arrays are in device memory.
pub struct GpuIndex {
    gpu: Gpu,
    stream: Arc<CudaStream>,
    layout: IvfLayout,
    lists: ManagedBuffer<f32>,
    offsets: CudaSlice<u64>,
    ids: CudaSlice<u32>,
    centroids: CudaSlice<f32>,
    remote_mapped: bool,
}

/// One search's knobs.
#[derive(Debug, Clone, Copy)]
pub struct SearchParams {
    /// Lists probed per query.
    pub nprobe: usize,
    /// The Unified Memory policy.
    pub policy: Policy,
    /// How many lists ahead each scan block asks for (GPU-driven requests).
    pub ahead: u32,
    /// For `Auto`: how many times the same lists will be searched.
    pub expected_passes: f64,
    /// Most blocks of the scan kernel (0: two per multiprocessor).
    pub max_blocks: u32,
}

/// What a search found and what it cost.
#[derive(Debug, Clone)]
pub struct SearchOutcome {
    /// `queries * K` distances, nearest first per query.
    pub dist: Vec<f32>,
    /// `queries * K` ids.
    pub ids: Vec<u32>,
    /// The policy that ran (what `Auto` chose).
    pub policy: Policy,
    /// Distinct lists probed.
    pub probed_lists: usize,
    /// Bytes of those lists.
    pub needed_bytes: u64,
    /// Wall time of the whole search, seconds (queries uploaded to results on the host).
    pub seconds: f64,
    /// Probed lists whose data arrived by request before the scan read them, went ahead
    /// on the fault path (request fell back or not waited for), or timed out waiting.
    pub arrived: usize,
    /// See `arrived`.
    pub went_ahead: usize,
    /// See `arrived`.
    pub timed_out: usize,
    /// Seconds from the coarse kernel's start to the scan's end, by CUDA events (the GPU
    /// part of the search, host-side policy work in between included).
    pub gpu_seconds: f64,
}

/// Long-lived machinery shared by searches: the request ring and its service, the
/// prefetch engine, and the machine profile `Auto` decides from.
pub struct Machinery {
    ring: Arc<RequestRing>,
    service: Option<PrefetchService>,
    engine: PrefetchEngine,
    /// The probe's measurements (for `Auto`).
    pub profile: MachineProfile,
    /// How long a scan block waits for its list before reading through faults.
    pub wait: Duration,
}

impl Machinery {
    /// Ring sized for `nlist` flags, the service started, the engine and the profile ready.
    pub fn new(
        gpu: &Gpu,
        nlist: usize,
        profile: MachineProfile,
        service: ServiceConfig,
    ) -> Result<Self> {
        let ring = Arc::new(RequestRing::new(gpu, (nlist as u32).max(64), nlist as u32)?);
        let service = Some(PrefetchService::start(ring.clone(), service)?);
        let engine = PrefetchEngine::new(gpu, PrefetchOptions::default())?;
        Ok(Machinery {
            ring,
            service,
            engine,
            profile,
            wait: Duration::from_secs(2),
        })
    }

    /// Stops the service (requests still in the ring are served first).
    pub fn stop_service(&mut self) -> Option<lookahead_uvm::ServiceReport> {
        self.service.take().map(PrefetchService::stop)
    }
}

impl GpuIndex {
    /// Uploads an index: `vectors` in list-major order (as `layout.scatter` writes them).
    pub fn new(gpu: &Gpu, layout: IvfLayout, data: &Vectors) -> Result<Self> {
        let stream = driver("cuStreamCreate", gpu.context().new_stream())?;
        let mut lists = ManagedBuffer::<f32>::zeroed(gpu, data.data.len().max(4))?;
        layout.scatter(data, &mut lists.as_mut_slice()?[..data.data.len()]);
        let offsets = driver("cuMemcpyHtoD", stream.clone_htod(&layout.offsets))?;
        let ids = driver("cuMemcpyHtoD", stream.clone_htod(&layout.ids))?;
        let centroids = driver("cuMemcpyHtoD", stream.clone_htod(&layout.centroids))?;
        Ok(GpuIndex {
            gpu: gpu.clone(),
            stream,
            layout,
            lists,
            offsets,
            ids,
            centroids,
            remote_mapped: false,
        })
    }

    /// The layout.
    pub fn layout(&self) -> &IvfLayout {
        &self.layout
    }

    /// Bytes of all list vectors.
    pub fn index_bytes(&self) -> u64 {
        self.lists.num_bytes() as u64
    }

    /// The stream searches run on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Moves every list page to the host (a cold start for the next search) and clears
    /// any remote-mapping advice.
    pub fn evict_to_host(&mut self) -> Result<()> {
        self.set_remote(false)?;
        self.lists.prefetch(Location::Host, &self.stream)?;
        driver("cuStreamSynchronize", self.stream.synchronize())
    }

    /// Moves every list page to the GPU (the everything-resident baseline).
    pub fn make_resident(&mut self) -> Result<()> {
        self.set_remote(false)?;
        self.lists
            .prefetch(Location::Device(self.gpu.ordinal()), &self.stream)?;
        driver("cuStreamSynchronize", self.stream.synchronize())
    }

    fn set_remote(&mut self, on: bool) -> Result<()> {
        if on == self.remote_mapped {
            return Ok(());
        }
        let me = Location::Device(self.gpu.ordinal());
        if on {
            self.lists
                .advise(Advice::SetPreferredLocation(Location::Host))?;
            self.lists.advise(Advice::SetAccessedBy(me))?;
        } else {
            self.lists.advise(Advice::UnsetAccessedBy(me))?;
            self.lists.advise(Advice::UnsetPreferredLocation)?;
        }
        self.remote_mapped = on;
        Ok(())
    }

    /// Searches `queries` for their `K` nearest neighbours.
    pub fn search(
        &mut self,
        queries: &Vectors,
        params: SearchParams,
        mach: &mut Machinery,
    ) -> Result<SearchOutcome> {
        let dim = self.layout.dim;
        let nq = queries.len();
        let nprobe = params
            .nprobe
            .clamp(1, ivf_kernels::MAX_NPROBE.min(self.layout.nlist()));
        let nlist = self.layout.nlist();
        let stream = self.stream.clone();
        let s = &stream;
        driver("cuStreamSynchronize", s.synchronize())?;
        let started = Instant::now();

        let dq = driver("cuMemcpyHtoD", s.clone_htod(&queries.data))?;
        let ev_start = driver(
            "cuEventCreate",
            self.gpu
                .context()
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)),
        )?;
        let ev_end = driver(
            "cuEventCreate",
            self.gpu
                .context()
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)),
        )?;
        driver("cuEventRecord", ev_start.record(s))?;
        let mut probes = driver("cuMemAlloc", s.alloc_zeros::<u32>(nq * nprobe))?;
        ivf_kernels::coarse::launch(
            s,
            LaunchConfig::for_len(nq * 32, 128),
            &dq,
            &self.centroids,
            dim as u32,
            nprobe as u32,
            &mut probes,
        )?;
        let max_per_list = nq as u32;
        let mut counts = driver("cuMemAlloc", s.alloc_zeros::<u32>(nlist))?;
        let mut pairs = driver("cuMemAlloc", s.alloc_zeros::<u32>(nlist * nq))?;
        ivf_kernels::plan::launch(
            s,
            LaunchConfig::for_len(nq * nprobe, 256),
            &probes,
            max_per_list,
            &mut counts,
            &mut pairs,
        )?;
        let mut probed = driver("cuMemAlloc", s.alloc_zeros::<u32>(nlist))?;
        let mut m = driver("cuMemAlloc", s.alloc_zeros::<u32>(1))?;
        ivf_kernels::compact::launch(
            s,
            LaunchConfig::for_len(1, 32),
            &counts,
            &mut probed,
            &mut m,
        )?;

        // The probed lists, back on the host: a round trip every policy but the GPU-driven
        // ones pays (faults and hints need nothing, but the benchmark reports needed bytes).
        let m_host = driver("cuMemcpyDtoH", s.clone_dtoh(&m))?[0] as usize;
        let probed_host = driver("cuMemcpyDtoH", s.clone_dtoh(&probed))?;
        let probed_lists = &probed_host[..m_host];
        let needed_bytes = self.layout.bytes_of(probed_lists);

        let chosen = match params.policy {
            Policy::Auto => policy::choose(
                &AccessPattern {
                    total_bytes: self.index_bytes(),
                    needed_bytes,
                    ranges: m_host as u64,
                    expected_passes: params.expected_passes,
                },
                &mach.profile,
            ),
            p => p,
        };
        self.set_remote(chosen == Policy::RemoteMap)?;
        let me = Location::Device(self.gpu.ordinal());
        let mut queue = RequestQueue::disabled();
        let mut hints = HINT_NONE;
        match chosen {
            Policy::Faults | Policy::RemoteMap | Policy::Auto => {}
            Policy::KernelHints => hints = HINT_L2,
            Policy::PrefetchAll => {
                mach.engine
                    .prefetch(&[self.lists.byte_range()], me)?
                    .wait()?;
            }
            Policy::HostSelected => {
                let ranges: Vec<ByteRange> = probed_lists
                    .iter()
                    .filter(|&&l| self.layout.list_bytes(l as usize) > 0)
                    .map(|&l| ByteRange {
                        start: self.lists.device_ptr()
                            + self.layout.offsets[l as usize] * dim as u64 * 4,
                        len: self.layout.list_bytes(l as usize),
                    })
                    .collect();
                if !ranges.is_empty() {
                    mach.engine.prefetch(&ranges, me)?.wait()?;
                }
            }
            Policy::GpuRequests => queue = mach.ring.queue(mach.wait),
        }

        let pairs_total = nq * nprobe;
        let mut cand_d = driver("cuMemAlloc", s.alloc_zeros::<f32>(pairs_total * K))?;
        let mut cand_i = driver("cuMemAlloc", s.alloc_zeros::<u32>(pairs_total * K))?;
        let sms = self.gpu.capabilities()?.sm_count.max(1);
        let cap = if params.max_blocks == 0 {
            sms * 2
        } else {
            params.max_blocks
        };
        let blocks = (m_host as u32).clamp(1, cap);
        let mut readiness = driver("cuMemAlloc", s.alloc_zeros::<u32>(nlist.max(1)))?;
        ivf_kernels::scan::launch(
            s,
            LaunchConfig::new((blocks, 1, 1), (SCAN_THREADS, 1, 1)),
            self.lists.as_unified(),
            &self.offsets,
            &self.ids,
            &dq,
            &probed,
            &m,
            &counts,
            &pairs,
            dim as u32,
            nprobe as u32,
            max_per_list,
            params.ahead,
            hints,
            queue,
            &mut readiness,
            &mut cand_d,
            &mut cand_i,
        )?;
        driver("cuEventRecord", ev_end.record(s))?;
        let mut out_d = driver("cuMemAlloc", s.alloc_zeros::<f32>(nq * K))?;
        let mut out_i = driver("cuMemAlloc", s.alloc_zeros::<u32>(nq * K))?;
        ivf_kernels::merge::launch(
            s,
            LaunchConfig::for_len(nq, 128),
            &cand_d,
            &cand_i,
            nprobe as u32,
            &mut out_d,
            &mut out_i,
        )?;
        // Wait with cuStreamSynchronize before copying back: a copy into pageable host
        // memory issued while the scan runs can hold up the prefetch service's driver calls
        // (and with them the ready flags the scan is waiting for).
        driver("cuStreamSynchronize", s.synchronize())?;
        let dist = driver("cuMemcpyDtoH", s.clone_dtoh(&out_d))?;
        let ids = driver("cuMemcpyDtoH", s.clone_dtoh(&out_i))?;
        driver("cuStreamSynchronize", s.synchronize())?;
        let seconds = started.elapsed().as_secs_f64();
        let ready = driver("cuMemcpyDtoH", s.clone_dtoh(&readiness))?;
        let count = |v| ready[..m_host].iter().filter(|&&r| r == v).count();
        let gpu_seconds = driver("cuEventElapsedTime", ev_start.elapsed_ms(&ev_end))? as f64 / 1e3;
        Ok(SearchOutcome {
            arrived: count(1),
            went_ahead: count(2),
            timed_out: count(3),
            gpu_seconds,
            dist,
            ids,
            policy: chosen,
            probed_lists: m_host,
            needed_bytes,
            seconds,
        })
    }
}

/// The list of every vector (its nearest centroid), computed on the GPU with the coarse
/// kernel, a million vectors at a time.
pub fn assign_on_gpu(gpu: &Gpu, centroids: &[f32], data: &Vectors) -> Result<Vec<u32>> {
    let stream = driver("cuStreamCreate", gpu.context().new_stream())?;
    let dc = driver("cuMemcpyHtoD", stream.clone_htod(centroids))?;
    let mut out = Vec::with_capacity(data.len());
    for chunk in data.data.chunks(data.dim * (1 << 20)) {
        let n = chunk.len() / data.dim;
        let dq = driver("cuMemcpyHtoD", stream.clone_htod(chunk))?;
        let mut probes = driver("cuMemAlloc", stream.alloc_zeros::<u32>(n))?;
        ivf_kernels::coarse::launch(
            &stream,
            LaunchConfig::for_len(n * 32, 128),
            &dq,
            &dc,
            data.dim as u32,
            1,
            &mut probes,
        )?;
        out.extend(driver("cuMemcpyDtoH", stream.clone_dtoh(&probes))?);
    }
    Ok(out)
}
