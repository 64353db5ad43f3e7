//! The IVF search on the GPU, with the lists in managed memory and a Unified Memory
//! [`Policy`] chosen per search.

mod batch;
mod buffers;
mod search;
mod shard;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaSlice, CudaStream};
use ivf_kernels::{coarse_config, DEFAULT_CHUNK_ROWS, SCAN_THREADS};
use lookahead::prefetch::PrefetchPool;
use lookahead::{
    Advice, DriverContext, Error, Gpu, Location, ManagedBuffer, PrefetchEngine, PrefetchOptions,
    Result,
};
use lookahead_uvm::{
    AccessPattern, MachineProfile, Policy, PrefetchService, RequestRing, ServiceConfig,
};

pub use batch::{BatchSearch, Submit};
use buffers::{fill32, Buffers, Capacity};
pub use shard::{Reads, ShardIndex, ShardStats};

use crate::data::Vectors;
use crate::index::IvfLayout;

/// An index whose list vectors are in managed memory (written by the CPU, so they start on
/// the host) and whose small arrays are in device memory.
pub struct GpuIndex {
    gpu: Gpu,
    stream: Arc<CudaStream>,
    layout: IvfLayout,
    lists: ManagedBuffer<f32>,
    offsets: CudaSlice<u64>,
    ids: CudaSlice<u32>,
    centroids_q: CudaSlice<f32>,
    /// Whether the lists have accessed-by advice for this GPU (see [`GpuIndex::map_for_gpu`]).
    mapped_for_gpu: bool,
    /// Whether mapping also sets the preferred location to the host.
    prefer_host: bool,
    pull: PullCache,
    chunk_rows: u32,
    max_list_len: usize,
    /// Blocks of the scan that are resident on the GPU at once.
    scan_capacity: u32,
    buffers: Option<Buffers>,
    /// Which allocation of `buffers` (and which index) a captured graph's addresses are of.
    buffers_id: BuffersId,
}

/// One allocation of one index's search buffers: graphs captured on other buffers are not
/// replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BuffersId {
    index: u64,
    generation: u64,
}

/// The device-memory copy of the lists that [`Policy::GpuPull`] reads: `data` has the
/// layout of the managed lists (allocated at the first pull), and `copied[l]` counts list
/// `l`'s copied chunks; a list is cached when the count is complete. The lists never change
/// after [`GpuIndex::new`], so a cached list stays valid until
/// [`GpuIndex::evict_to_host`] empties the cache.
struct PullCache {
    data: Option<CudaSlice<f32>>,
    copied: CudaSlice<u32>,
}

/// Numbers each index, for [`BuffersId`].
static NEXT_INDEX_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Device memory left free beside the pull cache (for the search buffers and other work).
const PULL_CACHE_HEADROOM: usize = 1 << 30;

/// One search's knobs.
#[derive(Debug, Clone, Copy)]
pub struct SearchParams {
    /// Lists probed per query.
    pub nprobe: usize,
    /// The Unified Memory policy.
    pub policy: Policy,
    /// For `Auto`: how many times the same lists will be searched.
    pub expected_passes: f64,
    /// Most blocks of the scan kernel (0: as many as are resident at once).
    pub max_blocks: u32,
    /// The pull kernel copies on every this-many-th SM (0: [`ivf_kernels::PULL_COPY_EVERY_NTH_SM`]).
    pub pull_copy_every: u32,
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
    /// Probed lists the kernel asked the host for (not still resident from an earlier
    /// request) under GPU-driven requests, or copied into its cache (not cached by an
    /// earlier search) under the GPU-driven pull.
    pub requested: usize,
    /// Probed lists whose data arrived by request before the scan read them, went ahead
    /// on the fault path (request fell back), or timed out waiting (GPU-driven requests);
    /// under the pull, read from the cache or (timed out) over the interconnect.
    pub arrived: usize,
    /// See `arrived`.
    pub went_ahead: usize,
    /// See `arrived`.
    pub timed_out: usize,
    /// Seconds from the coarse kernel's start to the merge kernel's end, by CUDA events
    /// (the GPU part of the search, host-side policy work in between included).
    pub gpu_seconds: f64,
    /// Seconds of the scan kernel alone, by CUDA events (waits for data included).
    pub scan_seconds: f64,
    /// Work items (pair, chunk) the scan ran.
    pub items: usize,
    /// Per list: how many (query, probe) pairs scanned it (read after the timed part).
    pub list_queries: Vec<u32>,
    /// Under the GPU-driven pull: seconds from the first copy warp's start to the last
    /// one's end, by the GPU's clock (0 when nothing was copied).
    pub pull_copy_seconds: f64,
}

/// Long-lived machinery shared by searches: the request ring and its service, the
/// prefetch engine (both issuing from one pool of prefetch threads), and the machine profile
/// `Auto` decides from.
pub struct Machinery {
    ring: Arc<RequestRing>,
    service: Option<PrefetchService>,
    engine: PrefetchEngine,
    /// The probe's measurements (for `Auto`).
    pub profile: MachineProfile,
    /// How long a scan warp waits for its list before reading through faults.
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
        Self::with_engine(gpu, nlist, profile, service, PrefetchOptions::default())
    }

    /// [`Machinery::new`] with the host prefetch engine's options (host-selected and
    /// prefetch-all policies) given. The service and the engine share one pool of
    /// `max(service.threads, engine.threads)` threads.
    pub fn with_engine(
        gpu: &Gpu,
        nlist: usize,
        profile: MachineProfile,
        service: ServiceConfig,
        engine: PrefetchOptions,
    ) -> Result<Self> {
        let ring = Arc::new(RequestRing::new(gpu, (nlist as u32).max(64), nlist as u32)?);
        let threads = service.threads.max(engine.threads);
        let pool = Arc::new(PrefetchPool::new(gpu, threads)?);
        let service = Some(PrefetchService::start_with_pool(
            ring.clone(),
            pool.clone(),
            service,
        )?);
        let engine = PrefetchEngine::with_pool(pool, engine)?;
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
        let stream = gpu.context().new_stream().during("cuStreamCreate")?;
        let mut lists = ManagedBuffer::<f32>::zeroed(gpu, data.data.len().max(4))?;
        layout.scatter(data, &mut lists.as_mut_slice()?[..data.data.len()]);
        let offsets = stream.clone_htod(&layout.offsets).during("cuMemcpyHtoD")?;
        let ids = stream.clone_htod(&layout.ids).during("cuMemcpyHtoD")?;
        let centroids_q = stream
            .clone_htod(&layout.centroids_quads())
            .during("cuMemcpyHtoD")?;
        let max_list_len = (0..layout.nlist())
            .map(|l| layout.list_len(l))
            .max()
            .unwrap_or(0);
        stream.synchronize().during("cuStreamSynchronize")?;
        // The scan is a persistent kernel: exactly the blocks that are resident at once.
        // More would leave blocks waiting to be dispatched, and while a kernel's dispatch is
        // incomplete, work that the hardware queues behind it (streams share a few hardware
        // queues) cannot start: the prefetch service's flag writes among it, which the
        // resident blocks are waiting for.
        let per_sm = lookahead::launch::module_for(gpu.context(), ivf_kernels::PTX)?
            .function("scan")?
            .occupancy_max_active_blocks_per_multiprocessor(SCAN_THREADS, 0, None)
            .during("cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        let sm_count = gpu.capabilities()?.sm_count.max(1);
        let scan_capacity = per_sm.max(1) * sm_count;
        let copied = stream
            .alloc_zeros::<u32>(layout.nlist().max(1))
            .during("cuMemAlloc")?;
        Ok(GpuIndex {
            gpu: gpu.clone(),
            stream,
            layout,
            lists,
            offsets,
            ids,
            centroids_q,
            mapped_for_gpu: false,
            prefer_host: false,
            pull: PullCache { data: None, copied },
            chunk_rows: DEFAULT_CHUNK_ROWS,
            max_list_len,
            scan_capacity,
            buffers: None,
            buffers_id: BuffersId {
                index: NEXT_INDEX_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                generation: 0,
            },
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

    /// A cold start for the next search: moves every list page to the host, empties the
    /// pull cache, and tells `mach`'s ring that nothing it brought over is resident any
    /// more. The mapping ([`GpuIndex::map_for_gpu`]) stays as it is.
    pub fn evict_to_host(&mut self, mach: &Machinery) -> Result<()> {
        self.lists.prefetch(Location::Host, &self.stream)?;
        let copied = lookahead::untracked::UntrackedMut::new(&mut self.pull.copied, &self.stream);
        fill32(
            copied.device_ptr(),
            self.layout.nlist().max(1),
            0,
            &self.stream,
        )?;
        self.stream.synchronize().during("cuStreamSynchronize")?;
        mach.ring.forget_resident();
        Ok(())
    }

    /// Moves every list page to the GPU (the everything-resident baseline), unmapped.
    pub fn make_resident(&mut self) -> Result<()> {
        self.map_for_gpu(false)?;
        self.lists
            .prefetch(Location::Device(self.gpu.ordinal()), &self.stream)?;
        self.stream.synchronize().during("cuStreamSynchronize")
    }

    /// Maps the lists for this GPU (accessed-by advice: the GPU reads host-resident pages
    /// over the interconnect instead of faulting them over), or removes the mapping.
    /// [`Policy::RemoteMap`] and [`Policy::GpuPull`] need it, the fault-driven policies
    /// need it off, and the others work either way; a search changes it when its policy
    /// needs, so call this once at set-up to keep its cost out of the searches. Mapping
    /// costs about 30-50 ms per GiB on the H100 (driver 580.159.04) (the driver maps every
    /// host-resident page); unmapping is nearly free. Returns the seconds it took (0 when
    /// nothing changed).
    pub fn map_for_gpu(&mut self, on: bool) -> Result<f64> {
        if on == self.mapped_for_gpu {
            return Ok(0.0);
        }
        let t = Instant::now();
        let me = Location::Device(self.gpu.ordinal());
        if on {
            if self.prefer_host {
                self.lists
                    .advise(Advice::SetPreferredLocation(Location::Host))?;
            }
            self.lists.advise(Advice::SetAccessedBy(me))?;
        } else {
            self.lists.advise(Advice::UnsetAccessedBy(me))?;
            if self.prefer_host {
                self.lists.advise(Advice::UnsetPreferredLocation)?;
            }
        }
        self.mapped_for_gpu = on;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Whether [`GpuIndex::map_for_gpu`] also sets the host as the lists' preferred
    /// location (so the driver never moves mapped pages to the GPU on its own; clearing it
    /// again costs about as much as a migration's page-table work). When the lists are
    /// mapped, they are mapped again with the new setting; returns the seconds that took.
    pub fn set_prefer_host(&mut self, on: bool) -> Result<f64> {
        if on == self.prefer_host {
            return Ok(0.0);
        }
        let was = self.mapped_for_gpu;
        let mut t = self.map_for_gpu(false)?;
        self.prefer_host = on;
        if was {
            t += self.map_for_gpu(true)?;
        }
        Ok(t)
    }

    /// Sets up what `policy` needs before a search, so that the search does not pay for it:
    /// the mapping ([`GpuIndex::map_for_gpu`]: on for the policies that read through it,
    /// off for the fault-driven ones, unchanged for the others) and, for
    /// [`Policy::GpuPull`], its device-memory cache. For [`Policy::Auto`] it sets up what
    /// the pull needs (where the cache fits), which leaves `Auto` every policy to choose
    /// from at no set-up cost. Returns the seconds it took.
    pub fn prepare(&mut self, policy: Policy) -> Result<f64> {
        let t = Instant::now();
        let pull = policy == Policy::GpuPull || (policy == Policy::Auto && self.pull_cache_fits());
        if policy.maps_for_gpu() || pull {
            self.map_for_gpu(true)?;
        } else if policy.needs_faults() {
            self.map_for_gpu(false)?;
        }
        if pull {
            self.pull_cache()?;
        }
        Ok(t.elapsed().as_secs_f64())
    }

    /// Whether the lists are mapped for this GPU.
    pub fn is_mapped_for_gpu(&self) -> bool {
        self.mapped_for_gpu
    }

    /// Whether [`Policy::GpuPull`] can run: its cache is allocated, or fits in free device
    /// memory with `PULL_CACHE_HEADROOM` (1 GiB) to spare.
    pub fn pull_cache_fits(&self) -> bool {
        self.pull.data.is_some()
            || self
                .gpu
                .memory_info()
                .is_ok_and(|(free, _)| free >= self.lists.num_bytes() + PULL_CACHE_HEADROOM)
    }

    /// Allocates the pull cache if it is not yet, refusing (with
    /// [`Error::OutOfMemory`]) when it would leave less than [`PULL_CACHE_HEADROOM`] free.
    fn pull_cache(&mut self) -> Result<()> {
        if self.pull.data.is_some() {
            return Ok(());
        }
        let bytes = self.lists.num_bytes();
        let (free, _) = self.gpu.memory_info()?;
        if free < bytes + PULL_CACHE_HEADROOM {
            return Err(Error::OutOfMemory {
                during: "GpuIndex pull cache (device memory the size of the lists)",
                requested: bytes,
                available: free.saturating_sub(PULL_CACHE_HEADROOM),
            });
        }
        // SAFETY: `pull_scan` reads a list's part only after copying it there (`copied`).
        let data = unsafe { self.stream.alloc::<f32>(self.lists.len()) }.during("cuMemAlloc")?;
        self.pull.data = Some(data);
        Ok(())
    }

    /// What `Auto` is told before a search of `nq` queries with `nprobe` probes: the
    /// expected number of distinct lists if probes fell uniformly, times the mean list size,
    /// in the expected number of runs of adjacent lists (a run is one range to move), read
    /// `passes` times by searches and, within a search, once per probe of a list; and the
    /// index's mapping and pull cache.
    pub fn expected_pattern(&self, nq: usize, nprobe: usize, passes: f64) -> AccessPattern {
        let nlist = self.layout.nlist().max(1) as f64;
        let draws = (nq * nprobe) as f64;
        let fraction = 1.0 - (1.0 - 1.0 / nlist).powf(draws);
        let total = self.index_bytes();
        AccessPattern {
            total_bytes: total,
            needed_bytes: (fraction * total as f64) as u64,
            ranges: (nlist * fraction * (1.0 - fraction)).ceil().max(1.0) as u64,
            // A list probed by several queries of the batch is read once per query.
            expected_passes: passes * (draws / (nlist * fraction).max(1.0)).max(1.0),
            mapped_for_gpu: self.mapped_for_gpu,
            device_cache: self.pull_cache_fits(),
        }
    }

    /// The search buffers, grown (by half again, so a few sizes settle) when `need` does
    /// not fit.
    fn buffers(&mut self, need: Capacity) -> Result<&mut Buffers> {
        let old = self.buffers.as_ref().map(|b| b.cap);
        if !old.is_some_and(|c| c.holds(&need)) {
            self.buffers = None;
            let cap = Capacity::grown(need, old);
            let (dim, nlist) = (self.layout.dim, self.layout.nlist());
            self.buffers = Some(Buffers::new(&self.stream, cap, dim, nlist)?);
            self.buffers_id.generation += 1;
        }
        Ok(self.buffers.as_mut().expect("allocated above"))
    }
}

/// Device memory an index's benchmark leaves free beside its lists.
pub const INDEX_HEADROOM: usize = 2 << 30;

/// How many vectors of `dim` floats make an index of `gib` GiB of list vectors, or
/// [`Error::OutOfMemory`] (naming `during`) when that would leave less than
/// [`INDEX_HEADROOM`] of the GPU's free memory.
pub fn vectors_that_fit(gpu: &Gpu, gib: f64, dim: usize, during: &'static str) -> Result<usize> {
    let (free, _) = gpu.memory_info()?;
    let want = (gib * (1u64 << 30) as f64) as usize;
    if want + INDEX_HEADROOM > free {
        return Err(Error::OutOfMemory {
            during,
            requested: want,
            available: free,
        });
    }
    Ok(want / (dim * 4))
}

/// The list of every vector (its nearest centroid), computed on the GPU with the coarse
/// kernel, a million vectors at a time.
pub fn assign_on_gpu(gpu: &Gpu, centroids: &[f32], data: &Vectors) -> Result<Vec<u32>> {
    let stream = gpu.context().new_stream().during("cuStreamCreate")?;
    let nlist = centroids.len() / data.dim.max(1);
    let dc = stream
        .clone_htod(&crate::index::interleave_quads(centroids, data.dim))
        .during("cuMemcpyHtoD")?;
    let mut out = Vec::with_capacity(data.len());
    // One slice: the probes need no distances (a zero-length output skips them).
    let mut unused_dist = stream.alloc_zeros::<f32>(1).during("cuMemAlloc")?;
    for chunk in data.data.chunks(data.dim * (1 << 20)) {
        let n = chunk.len() / data.dim;
        let dq = stream.clone_htod(chunk).during("cuMemcpyHtoD")?;
        let mut probes = stream.alloc_zeros::<u32>(n).during("cuMemAlloc")?;
        let shape = ivf_kernels::CoarseShape {
            dim: data.dim as u32,
            nlist: nlist as u32,
            nprobe: 1,
            per_block: 0,
        };
        ivf_kernels::coarse::launch(
            &stream,
            coarse_config(n),
            &dq,
            &dc,
            shape,
            &mut probes,
            &mut unused_dist,
        )?;
        out.extend(stream.clone_dtoh(&probes).during("cuMemcpyDtoH")?);
    }
    Ok(out)
}
