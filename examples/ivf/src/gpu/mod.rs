//! The IVF search on the GPU, with the lists in managed memory under a Unified Memory
//! [`Policy`] chosen per search: the lists are a [`PolicyBuffer`] whose ranges are the
//! lists, and `lookahead-uvm` carries the policy out.

#[macro_use]
mod views;
mod batch;
mod buffers;
mod search;
mod shard;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use ivf_kernels::{coarse_config, DEFAULT_CHUNK_ROWS, SCAN_THREADS};
use lookahead::{DriverContext, Error, Gpu, ManagedBuffer, Result};
use lookahead_uvm::{AccessPattern, Policy, PolicyBuffer};

pub use batch::{BatchSearch, Submit};
use buffers::{Buffers, Capacity};
pub use shard::{Reads, ShardIndex, ShardStats};

use crate::data::Vectors;
use crate::index::IvfLayout;

/// An index whose list vectors are in managed memory (written by the CPU, so they start on
/// the host) and whose small arrays are in device memory.
pub struct GpuIndex {
    gpu: Gpu,
    stream: Arc<CudaStream>,
    layout: IvfLayout,
    /// The list vectors, list-major, one range per list (its pull counter and request flag
    /// are the list's number). The lists never change after [`GpuIndex::new`], so what the
    /// pull cached stays valid until [`PolicyBuffer::evict_to_host`].
    lists: PolicyBuffer<f32>,
    offsets: CudaSlice<u64>,
    ids: CudaSlice<u32>,
    centroids_q: CudaSlice<f32>,
    /// Per stored vector (list-major): its squared norm, for the tiled scan's bounds.
    norms: CudaSlice<f32>,
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

/// Numbers each index, for [`BuffersId`].
static NEXT_INDEX_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
    /// How the scan computes distances.
    pub scan: ScanMethod,
}

/// How a search's scan computes distances. Both give the same neighbours, bit for bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScanMethod {
    /// [`ScanMethod::Tiles`] where it can run and the batch's queries share lists (at
    /// least [`TILE_PAIRS_PER_LIST`] pairs per list of the index), else the warp scan.
    #[default]
    Auto,
    /// A warp per work item computes every distance ([`ivf_kernels::scan`]).
    Warp,
    /// Lower bounds for every (query, vector) pair from tiles of dot products
    /// ([`ivf_kernels::tile_bounds`]), then exact distances only where a bound can still
    /// beat a query's `K`-th ([`ivf_kernels::bounded_scan`]). Needs lists read in place
    /// (no requests, mapping or pull), a dimension that is a multiple of 4, and sm_80.
    Tiles,
}

/// [`ScanMethod::Auto`] tiles a batch with at least this many (query, probe) pairs per
/// list of the index: the tiles cover [`ivf_kernels::TILE_QUERIES`] queries of a list at
/// once, and with fewer the warp scan's one pass over the rows is as fast.
pub const TILE_PAIRS_PER_LIST: usize = 4;

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
    /// Whether the scan ran as tiles ([`ScanMethod::Tiles`]).
    pub tiled: bool,
}

impl GpuIndex {
    /// Uploads an index: `vectors` in list-major order (as `layout.scatter` writes them).
    pub fn new(gpu: &Gpu, layout: IvfLayout, data: &Vectors) -> Result<Self> {
        let stream = gpu.context().new_stream().during("cuStreamCreate")?;
        let mut lists = ManagedBuffer::<f32>::zeroed(gpu, data.data.len().max(4))?;
        layout.scatter(data, &mut lists.as_mut_slice()?[..data.data.len()]);
        let norms =
            crate::index::squared_norms(&lists.as_mut_slice()?[..data.data.len()], layout.dim);
        let norms = stream.clone_htod(&norms).during("cuMemcpyHtoD")?;
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
        let lists = PolicyBuffer::new(lists, layout.nlist(), &stream)?;
        Ok(GpuIndex {
            gpu: gpu.clone(),
            stream,
            layout,
            lists,
            offsets,
            ids,
            centroids_q,
            norms,
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

    /// The list vectors under their policies.
    pub fn lists(&self) -> &PolicyBuffer<f32> {
        &self.lists
    }

    /// The list vectors under their policies: to set up a policy before the searches
    /// ([`PolicyBuffer::prepare`], [`PolicyBuffer::set_prefer_host`]), make them resident
    /// or move them back to the host.
    pub fn lists_mut(&mut self) -> &mut PolicyBuffer<f32> {
        &mut self.lists
    }

    /// The stream searches run on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
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
        self.lists.access_pattern(
            (fraction * total as f64) as u64,
            (nlist * fraction * (1.0 - fraction)).ceil().max(1.0) as u64,
            // A list probed by several queries of the batch is read once per query.
            passes * (draws / (nlist * fraction).max(1.0)).max(1.0),
        )
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

/// Seconds of each of `reps` launches of [`ivf_kernels::read_sum()`] over `bytes` of device
/// memory (after one warm-up), by CUDA events: the rate a streaming read gets on this GPU,
/// the yardstick for the scan's reads. The buffer is filled with ones and the sum checked,
/// so a launch that read nothing is an error, not a fast row.
pub fn time_read(gpu: &Gpu, bytes: usize, reps: usize) -> Result<Vec<f64>> {
    let stream = gpu.context().new_stream().during("cuStreamCreate")?;
    let floats = (bytes / 4).max(4);
    let data = stream
        .clone_htod(&vec![1.0f32; floats])
        .during("cuMemcpyHtoD")?;
    let mut sum = stream.alloc_zeros::<f32>(1).during("cuMemAlloc")?;
    let sms = gpu.capabilities()?.sm_count.max(1);
    // Enough blocks to fill every SM; each thread walks the buffer with the grid's stride.
    let cfg = lookahead::launch::LaunchConfig::new((sms * 8, 1, 1), (256, 1, 1));
    let mut seconds = Vec::with_capacity(reps);
    for rep in 0..=reps {
        stream.memset_zeros(&mut sum).during("cuMemsetD8Async")?;
        let ((), ms) = lookahead::timing::time_on_stream(&stream, || {
            ivf_kernels::read_sum::launch(&stream, cfg, &data, &mut sum)
        })?;
        let got = stream.clone_dtoh(&sum).during("cuMemcpyDtoH")?[0];
        // Ones summed in f32 partial sums: exact while each partial stays below 2^24.
        if (got as f64 - floats as f64).abs() > floats as f64 * 1e-3 {
            return Err(Error::UnwrittenOutput {
                kernel: "read_sum",
                what: format!("the sum of {floats} ones ({got})"),
            });
        }
        if rep > 0 {
            seconds.push(ms / 1e3);
        }
    }
    Ok(seconds)
}
