//! The IVF search on the GPU, with the lists in managed memory and a Unified Memory
//! [`Policy`] chosen per search.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{sys, CudaEvent, CudaSlice, CudaStream};
use ivf_kernels::{
    coarse_config, DEFAULT_CHUNK_ROWS, HINT_L2, HINT_NONE, K, PLAN_THREADS, PULL_COPY_EVERY_NTH_SM,
    READY_ARRIVED, READY_TIMED_OUT, READY_WENT_AHEAD, SCAN_THREADS,
};
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

/// Bits written into every output word before a search; any left afterwards is a result
/// the kernels failed to write.
const POISON_ID: u32 = 0xFFFF_FFFE;
const POISON_DIST: u32 = 0x7FC0_0001; // a NaN

/// An index whose list vectors are in managed memory (written by the CPU, so they start on
/// the host) and whose small arrays are in device memory.
pub struct GpuIndex {
    gpu: Gpu,
    stream: Arc<CudaStream>,
    layout: IvfLayout,
    lists: ManagedBuffer<f32>,
    offsets: CudaSlice<u64>,
    ids: CudaSlice<u32>,
    centroids_t: CudaSlice<f32>,
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
    /// The pull kernel copies on every this-many-th SM (0: [`PULL_COPY_EVERY_NTH_SM`]).
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
/// prefetch engine, and the machine profile `Auto` decides from.
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
    /// prefetch-all policies) given.
    pub fn with_engine(
        gpu: &Gpu,
        nlist: usize,
        profile: MachineProfile,
        service: ServiceConfig,
        engine: PrefetchOptions,
    ) -> Result<Self> {
        let ring = Arc::new(RequestRing::new(gpu, (nlist as u32).max(64), nlist as u32)?);
        let service = Some(PrefetchService::start(ring.clone(), service)?);
        let engine = PrefetchEngine::new(gpu, engine)?;
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

/// Sizes a search's device buffers were allocated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Capacity {
    queries: usize,
    pairs: usize,
    items: usize,
}

/// The device buffers of a search, kept between searches and grown when a search needs
/// more (each search uses a prefix of each).
struct Buffers {
    cap: Capacity,
    queries: CudaSlice<f32>,
    probes: CudaSlice<u32>,
    counts: CudaSlice<u32>,
    slots: CudaSlice<u32>,
    probed: CudaSlice<u32>,
    wanted: CudaSlice<u32>,
    list_item_off: CudaSlice<u32>,
    pair_cand_off: CudaSlice<u32>,
    item_pair: CudaSlice<u32>,
    item_chunk: CudaSlice<u32>,
    totals: CudaSlice<u32>,
    copy_first: CudaSlice<u32>,
    work: CudaSlice<u64>,
    readiness: CudaSlice<u32>,
    cand_d: CudaSlice<f32>,
    cand_i: CudaSlice<u32>,
    out_d: CudaSlice<f32>,
    out_i: CudaSlice<u32>,
}

/// Stream-ordered allocation of `n` elements that a kernel writes before anything reads
/// them.
fn scratch<T: cudarc::driver::DeviceRepr>(s: &Arc<CudaStream>, n: usize) -> Result<CudaSlice<T>> {
    // SAFETY: every element a search reads is written first by a kernel of that search
    // (outputs are poisoned before and checked after).
    driver("cuMemAllocAsync", unsafe { s.alloc::<T>(n.max(1)) })
}

impl Buffers {
    fn new(s: &Arc<CudaStream>, cap: Capacity, dim: usize, nlist: usize) -> Result<Self> {
        Ok(Buffers {
            cap,
            queries: scratch(s, cap.queries * dim)?,
            probes: scratch(s, cap.pairs)?,
            counts: scratch(s, nlist)?,
            slots: scratch(s, cap.pairs)?,
            probed: scratch(s, nlist)?,
            wanted: scratch(s, nlist)?,
            list_item_off: scratch(s, nlist)?,
            pair_cand_off: scratch(s, cap.pairs + 1)?,
            item_pair: scratch(s, cap.items)?,
            item_chunk: scratch(s, cap.items)?,
            totals: scratch(s, 4)?,
            copy_first: scratch(s, nlist + 1)?,
            work: scratch(s, ivf_kernels::PULL_WORK_WORDS)?,
            readiness: scratch(s, nlist)?,
            cand_d: scratch(s, cap.items * K)?,
            cand_i: scratch(s, cap.items * K)?,
            out_d: scratch(s, cap.queries * K)?,
            out_i: scratch(s, cap.queries * K)?,
        })
    }
}

/// Fills the first `words` 32-bit words at `ptr` with `value` on `stream`.
fn fill32(ptr: u64, words: usize, value: u32, s: &CudaStream) -> Result<()> {
    // SAFETY: the caller's buffer holds `words` words at `ptr`; ordered on `s`.
    driver("cuMemsetD32Async", unsafe {
        sys::cuMemsetD32Async(ptr, value, words, s.cu_stream()).result()
    })
}

impl GpuIndex {
    /// Uploads an index: `vectors` in list-major order (as `layout.scatter` writes them).
    pub fn new(gpu: &Gpu, layout: IvfLayout, data: &Vectors) -> Result<Self> {
        let stream = driver("cuStreamCreate", gpu.context().new_stream())?;
        let mut lists = ManagedBuffer::<f32>::zeroed(gpu, data.data.len().max(4))?;
        layout.scatter(data, &mut lists.as_mut_slice()?[..data.data.len()]);
        let offsets = driver("cuMemcpyHtoD", stream.clone_htod(&layout.offsets))?;
        let ids = driver("cuMemcpyHtoD", stream.clone_htod(&layout.ids))?;
        let centroids_t = driver(
            "cuMemcpyHtoD",
            stream.clone_htod(&layout.centroids_transposed()),
        )?;
        let max_list_len = (0..layout.nlist())
            .map(|l| layout.list_len(l))
            .max()
            .unwrap_or(0);
        driver("cuStreamSynchronize", stream.synchronize())?;
        // The scan is a persistent kernel: exactly the blocks that are resident at once.
        // More would leave blocks waiting to be dispatched, and while a kernel's dispatch is
        // incomplete, work that the hardware queues behind it (streams share a few hardware
        // queues) cannot start: the prefetch service's flag writes among it, which the
        // resident blocks are waiting for.
        let per_sm = lookahead::launch::module_for(gpu.context(), ivf_kernels::PTX)?
            .function("scan")?
            .occupancy_max_active_blocks_per_multiprocessor(SCAN_THREADS, 0, None)
            .map_err(|source| Error::Driver {
                call: "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                source,
            })?;
        let sm_count = gpu.capabilities()?.sm_count.max(1);
        let scan_capacity = per_sm.max(1) * sm_count;
        let copied = driver(
            "cuMemAlloc",
            stream.alloc_zeros::<u32>(layout.nlist().max(1)),
        )?;
        Ok(GpuIndex {
            gpu: gpu.clone(),
            stream,
            layout,
            lists,
            offsets,
            ids,
            centroids_t,
            mapped_for_gpu: false,
            prefer_host: false,
            pull: PullCache { data: None, copied },
            chunk_rows: DEFAULT_CHUNK_ROWS,
            max_list_len,
            scan_capacity,
            buffers: None,
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
        driver("cuStreamSynchronize", self.stream.synchronize())?;
        mach.ring.forget_resident();
        Ok(())
    }

    /// Moves every list page to the GPU (the everything-resident baseline), unmapped.
    pub fn make_resident(&mut self) -> Result<()> {
        self.map_for_gpu(false)?;
        self.lists
            .prefetch(Location::Device(self.gpu.ordinal()), &self.stream)?;
        driver("cuStreamSynchronize", self.stream.synchronize())
    }

    /// Maps the lists for this GPU (accessed-by advice: the GPU reads host-resident pages
    /// over the interconnect instead of faulting them over), or removes the mapping.
    /// [`Policy::RemoteMap`] and [`Policy::GpuPull`] need it, the fault-driven policies
    /// need it off, and the others work either way; a search changes it when its policy
    /// needs, so call this once at set-up to keep its cost out of the searches. Mapping
    /// costs about 30-50 ms per GiB on the H100 we measured (the driver maps every
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
    /// memory with [`PULL_CACHE_HEADROOM`] to spare.
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
        let data = driver("cuMemAlloc", unsafe {
            self.stream.alloc::<f32>(self.lists.len())
        })?;
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
        let fits = self.buffers.as_ref().is_some_and(|b| {
            b.cap.queries >= need.queries && b.cap.pairs >= need.pairs && b.cap.items >= need.items
        });
        if !fits {
            let old = self.buffers.take().map(|b| b.cap);
            let grow = |n: usize, o: Option<usize>| n.max(o.map_or(0, |o| o + o / 2));
            let cap = Capacity {
                queries: grow(need.queries, old.map(|c| c.queries)),
                pairs: grow(need.pairs, old.map(|c| c.pairs)),
                items: grow(need.items, old.map(|c| c.items)),
            };
            self.buffers = Some(Buffers::new(
                &self.stream,
                cap,
                self.layout.dim,
                self.layout.nlist(),
            )?);
        }
        Ok(self.buffers.as_mut().expect("allocated above"))
    }

    /// Searches `queries` for their `K` nearest neighbours.
    ///
    /// Every kernel takes its buffers as [`lookahead::untracked`] arguments on the index's
    /// one stream: the scan may wait for flags other streams write, so nothing (not even
    /// cudarc's use-tracking events) may be queued behind it, and the others are ordered by
    /// the stream alone.
    pub fn search(
        &mut self,
        queries: &Vectors,
        params: SearchParams,
        mach: &mut Machinery,
    ) -> Result<SearchOutcome> {
        use lookahead::untracked::{Untracked as U, UntrackedManaged, UntrackedMut as UM};
        let dim = self.layout.dim;
        if queries.dim != dim {
            return Err(Error::InvalidRange {
                start: queries.dim as u64,
                len: 0,
                limit: dim as u64,
                reason: "queries have a different dimension than the index",
            });
        }
        let nq = queries.len();
        let nlist = self.layout.nlist();
        let nprobe = params.nprobe.clamp(1, ivf_kernels::MAX_NPROBE.min(nlist));
        let pairs = nq * nprobe;
        let stream = self.stream.clone();
        let s = &stream;
        let new_event = || {
            driver(
                "cuEventCreate",
                self.gpu
                    .context()
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)),
            )
        };
        let events: Vec<CudaEvent> = (0..4).map(|_| new_event()).collect::<Result<_>>()?;
        let need = Capacity {
            queries: nq,
            pairs,
            items: ivf_kernels::max_items(pairs, self.max_list_len, self.chunk_rows),
        };
        self.buffers(need)?;
        driver("cuStreamSynchronize", s.synchronize())?;
        let started = Instant::now();

        let chosen = match params.policy {
            Policy::Auto => policy::choose(
                &self.expected_pattern(nq, nprobe, params.expected_passes),
                &mach.profile,
            ),
            p => p,
        };
        // The mapping and pull cache the chosen policy needs (nothing when set up already).
        self.prepare(chosen)?;
        let me = Location::Device(self.gpu.ordinal());
        // Prefetch-all starts before the coarse step, so the two overlap.
        let mut whole = match chosen {
            Policy::PrefetchAll => Some(mach.engine.prefetch(&[self.lists.byte_range()], me)?),
            _ => None,
        };
        let queue = match chosen {
            Policy::GpuRequests => mach.ring.queue(mach.wait),
            _ => RequestQueue::disabled(),
        };
        let hints = if chosen == Policy::KernelHints {
            HINT_L2
        } else {
            HINT_NONE
        };
        let (chunk_rows, scan_blocks) = (self.chunk_rows, self.scan_capacity);
        let pulling = chosen == Policy::GpuPull;
        let b = self.buffers.as_mut().expect("allocated above");
        {
            let mut q = b.queries.slice_mut(..nq * dim);
            driver("cuMemcpyHtoD", s.memcpy_htod(&queries.data, &mut q))?;
        }
        let out_d = UM::prefix(&mut b.out_d, nq * K, s)?;
        let out_i = UM::prefix(&mut b.out_i, nq * K, s)?;
        fill32(out_d.device_ptr(), nq * K, POISON_DIST, s)?;
        fill32(out_i.device_ptr(), nq * K, POISON_ID, s)?;
        let readiness = UM::prefix(&mut b.readiness, nlist, s)?;
        fill32(readiness.device_ptr(), nlist, 0, s)?;
        let (mut out_d, mut out_i, mut readiness) = (out_d, out_i, readiness);

        driver("cuEventRecord", events[0].record(s))?;
        ivf_kernels::coarse::launch(
            s,
            coarse_config(nq),
            &U::prefix(&b.queries, nq * dim, s)?,
            &U::new(&self.centroids_t, s),
            dim as u32,
            nlist as u32,
            nprobe as u32,
            &mut UM::prefix(&mut b.probes, pairs, s)?,
        )?;
        ivf_kernels::plan::launch(
            s,
            LaunchConfig::new((1, 1, 1), (PLAN_THREADS, 1, 1)),
            &U::prefix(&b.probes, pairs, s)?,
            &U::new(&self.offsets, s),
            &UntrackedManaged::new(&self.lists),
            dim as u32,
            chunk_rows,
            queue,
            pulling as u32,
            &mut UM::new(&mut self.pull.copied, s),
            &mut UM::new(&mut b.copy_first, s),
            &mut UM::new(&mut b.counts, s),
            &mut UM::prefix(&mut b.slots, pairs, s)?,
            &mut UM::new(&mut b.probed, s),
            &mut UM::new(&mut b.wanted, s),
            &mut UM::new(&mut b.list_item_off, s),
            &mut UM::prefix(&mut b.pair_cand_off, pairs + 1, s)?,
            &mut UM::prefix(&mut b.item_pair, need.items, s)?,
            &mut UM::prefix(&mut b.item_chunk, need.items, s)?,
            &mut UM::new(&mut b.totals, s),
        )?;
        match chosen {
            Policy::HostSelected => {
                // The host learns the probed lists (one round trip), then prefetches them.
                let totals = driver("cuMemcpyDtoH", s.clone_dtoh(&b.totals))?;
                let probed = driver("cuMemcpyDtoH", s.clone_dtoh(&b.probed))?;
                let ranges: Vec<ByteRange> = probed[..totals[0] as usize]
                    .iter()
                    .filter(|&&l| self.layout.list_bytes(l as usize) > 0)
                    .map(|&l| ByteRange {
                        start: self.lists.device_ptr()
                            + self.layout.offsets[l as usize] * dim as u64 * 4,
                        len: self.layout.list_bytes(l as usize),
                    })
                    .collect();
                if !ranges.is_empty() {
                    mach.engine.prefetch(&ranges, me)?.wait_on(s)?;
                }
            }
            Policy::PrefetchAll => {
                if let Some(t) = whole.as_mut() {
                    t.wait_on(s)?;
                }
            }
            _ => {}
        }
        driver("cuEventRecord", events[1].record(s))?;
        let blocks = if params.max_blocks == 0 {
            scan_blocks
        } else {
            params.max_blocks.min(scan_blocks)
        };
        let grid = LaunchConfig::new((blocks.max(1), 1, 1), (SCAN_THREADS, 1, 1));
        if pulling {
            let work = UM::new(&mut b.work, s);
            fill32(work.device_ptr(), 2 * ivf_kernels::PULL_WORK_WORDS, 0, s)?;
            let cache = self.pull.data.as_mut().expect("allocated when chosen");
            ivf_kernels::pull_scan::launch(
                s,
                grid,
                &UntrackedManaged::new(&self.lists),
                &mut UM::new(cache, s),
                &mut UM::new(&mut self.pull.copied, s),
                &U::new(&b.wanted, s),
                &U::new(&b.copy_first, s),
                &U::new(&self.offsets, s),
                &U::new(&self.ids, s),
                &U::prefix(&b.queries, nq * dim, s)?,
                &U::prefix(&b.probes, pairs, s)?,
                &U::prefix(&b.item_pair, need.items, s)?,
                &U::prefix(&b.item_chunk, need.items, s)?,
                &U::new(&b.totals, s),
                &U::prefix(&b.pair_cand_off, pairs + 1, s)?,
                dim as u32,
                nprobe as u32,
                chunk_rows,
                if params.pull_copy_every == 0 {
                    PULL_COPY_EVERY_NTH_SM
                } else {
                    params.pull_copy_every
                },
                mach.wait.as_micros().min(u32::MAX as u128) as u32,
                &mut UM::new(&mut b.work, s),
                &mut readiness,
                &mut UM::prefix(&mut b.cand_d, need.items * K, s)?,
                &mut UM::prefix(&mut b.cand_i, need.items * K, s)?,
            )?;
        } else {
            ivf_kernels::scan::launch(
                s,
                grid,
                &UntrackedManaged::new(&self.lists),
                &U::new(&self.offsets, s),
                &U::new(&self.ids, s),
                &U::prefix(&b.queries, nq * dim, s)?,
                &U::prefix(&b.probes, pairs, s)?,
                &U::prefix(&b.item_pair, need.items, s)?,
                &U::prefix(&b.item_chunk, need.items, s)?,
                &U::new(&b.totals, s),
                &U::prefix(&b.pair_cand_off, pairs + 1, s)?,
                dim as u32,
                nprobe as u32,
                chunk_rows,
                hints,
                queue,
                &mut readiness,
                &mut UM::prefix(&mut b.cand_d, need.items * K, s)?,
                &mut UM::prefix(&mut b.cand_i, need.items * K, s)?,
            )?;
        }
        // Nothing is queued behind the scan until it is done (see above).
        driver("cuStreamSynchronize", s.synchronize())?;
        driver("cuEventRecord", events[2].record(s))?;
        ivf_kernels::merge::launch(
            s,
            LaunchConfig::for_len(nq * 32, SCAN_THREADS),
            &U::prefix(&b.cand_d, need.items * K, s)?,
            &U::prefix(&b.cand_i, need.items * K, s)?,
            &U::prefix(&b.pair_cand_off, pairs + 1, s)?,
            nprobe as u32,
            &mut out_d,
            &mut out_i,
        )?;
        driver("cuEventRecord", events[3].record(s))?;
        let mut dist = vec![0.0f32; nq * K];
        let mut ids = vec![0u32; nq * K];
        driver(
            "cuMemcpyDtoH",
            s.memcpy_dtoh(&b.out_d.slice(..nq * K), &mut dist),
        )?;
        driver(
            "cuMemcpyDtoH",
            s.memcpy_dtoh(&b.out_i.slice(..nq * K), &mut ids),
        )?;
        driver("cuStreamSynchronize", s.synchronize())?;
        let seconds = started.elapsed().as_secs_f64();
        drop(whole);

        // Bookkeeping, outside the timed part.
        if let Some(q) = ids.iter().position(|&i| i == POISON_ID) {
            return Err(Error::UnwrittenOutput {
                kernel: "merge",
                what: format!("neighbour {} of query {}", q % K, q / K),
            });
        }
        let totals = driver("cuMemcpyDtoH", s.clone_dtoh(&b.totals))?;
        let m = totals[0] as usize;
        let pull_copy_seconds = if pulling {
            let w = driver("cuMemcpyDtoH", s.clone_dtoh(&b.work))?;
            w[4].saturating_sub(w[3]) as f64 / 1e9
        } else {
            0.0
        };
        let probed = driver("cuMemcpyDtoH", s.clone_dtoh(&b.probed))?;
        let probed_lists = &probed[..m.min(probed.len())];
        let ready = driver("cuMemcpyDtoH", s.clone_dtoh(&b.readiness))?;
        let count = |v| {
            probed_lists
                .iter()
                .filter(|&&l| ready[l as usize] == v)
                .count()
        };
        let elapsed = |a: usize, b: usize| -> Result<f64> {
            Ok(driver("cuEventElapsedTime", events[a].elapsed_ms(&events[b]))? as f64 / 1e3)
        };
        Ok(SearchOutcome {
            arrived: count(READY_ARRIVED),
            went_ahead: count(READY_WENT_AHEAD),
            timed_out: count(READY_TIMED_OUT),
            requested: totals[2] as usize,
            gpu_seconds: elapsed(0, 3)?,
            scan_seconds: elapsed(1, 2)?,
            items: totals[1] as usize,
            list_queries: driver("cuMemcpyDtoH", s.clone_dtoh(&b.counts))?,
            needed_bytes: self.layout.bytes_of(probed_lists),
            probed_lists: m,
            pull_copy_seconds,
            dist,
            ids,
            policy: chosen,
            seconds,
        })
    }
}

/// The list of every vector (its nearest centroid), computed on the GPU with the coarse
/// kernel, a million vectors at a time.
pub fn assign_on_gpu(gpu: &Gpu, centroids: &[f32], data: &Vectors) -> Result<Vec<u32>> {
    let stream = driver("cuStreamCreate", gpu.context().new_stream())?;
    let nlist = centroids.len() / data.dim.max(1);
    let dc = driver(
        "cuMemcpyHtoD",
        stream.clone_htod(&crate::index::transpose(centroids, data.dim)),
    )?;
    let mut out = Vec::with_capacity(data.len());
    for chunk in data.data.chunks(data.dim * (1 << 20)) {
        let n = chunk.len() / data.dim;
        let dq = driver("cuMemcpyHtoD", stream.clone_htod(chunk))?;
        let mut probes = driver("cuMemAlloc", stream.alloc_zeros::<u32>(n))?;
        ivf_kernels::coarse::launch(
            &stream,
            coarse_config(n),
            &dq,
            &dc,
            data.dim as u32,
            nlist as u32,
            1,
            &mut probes,
        )?;
        out.extend(driver("cuMemcpyDtoH", stream.clone_dtoh(&probes))?);
    }
    Ok(out)
}
