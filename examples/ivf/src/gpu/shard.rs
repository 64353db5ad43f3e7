//! One shard of an index on one GPU, its lists in host memory that GPU reads
//! ([`lookahead_multi::HostArray`]; too big for managed memory, which Lookahead never
//! allocates beyond a GPU's free memory). The search is the same kernels as
//! [`GpuIndex::search`](super::GpuIndex::search) with one of two ways to read the lists:
//!
//! - [`Reads::Pull`], the GPU-driven pull: the scan's copy warps bring the probed lists that
//!   are not cached yet over the GPU's own host link into a device-memory copy of the shard
//!   (the fastest cold path of the IVF search on the H100, driver 580.159.04: 88-91% of the
//!   pinned copy rate from 8% of the index probed up, `results/ivf_bench.md`), and later
//!   searches read them there;
//! - [`Reads::ZeroCopy`]: the scan reads the host memory in place every time (for an index
//!   no GPU can hold, such as one GPU's reference search over every shard).
//!
//! A shard's layout has all the index's lists, the others' empty
//! ([`crate::shard::Partition::shard_layout`]), so the coarse step ranks every centroid and
//! the plan gives work only to this shard's lists. Searches are queued on the shard's stream
//! without waiting, so a collective can follow on the same stream.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView};
use ivf_kernels::{
    CandidatesArgs, IndexArgs, PlanOutArgs, PullArgs, PullPlanArgs, Total, HINT_NONE, K,
    PLAN_THREADS, PULL_COPY_EVERY_NTH_SM, SCAN_THREADS,
};
use lookahead::launch::LaunchConfig;
use lookahead::untracked::{Untracked as U, UntrackedMut as UM};
use lookahead::{DriverContext, Error, Gpu, Result};
use lookahead_multi::HostView;
use lookahead_uvm::RingQueue;

use super::buffers::{fill32, Buffers, Capacity};
use super::search::{copy_seconds, launch_coarse, launch_merge, Shape, POISON_DIST, POISON_ID};
use crate::index::IvfLayout;

/// How a shard's scan reads its lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Copied into device memory by the GPU the first time, read there after.
    Pull,
    /// Read in host memory every time.
    ZeroCopy,
}

/// How long a scan warp waits for its list's copy before reading the host memory itself.
const PULL_WAIT_US: u32 = 2_000_000;

/// A shard on one GPU (see the module docs).
pub struct ShardIndex<'a> {
    gpu: Gpu,
    stream: Arc<CudaStream>,
    layout: IvfLayout,
    lists: HostView<'a, f32>,
    reads: Reads,
    offsets: CudaSlice<u64>,
    ids: CudaSlice<u32>,
    centroids_q: CudaSlice<f32>,
    /// The pull's copy of the lists (their layout), with [`Reads::Pull`].
    cache: Option<CudaSlice<f32>>,
    /// Per list: copy chunks complete.
    copied: CudaSlice<u32>,
    buffers: Option<Buffers>,
    max_list_len: usize,
    scan_capacity: u32,
    sms: usize,
    /// The shape of the search last queued.
    last: Option<Shape>,
}

/// What a shard's search did (read after it finished).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardStats {
    /// This shard's lists that some query probed.
    pub probed_lists: usize,
    /// Their bytes.
    pub needed_bytes: u64,
    /// Lists the pull copied (not cached before).
    pub copied_lists: usize,
    /// Work items the scan ran.
    pub items: usize,
    /// The pull's copy, first copy warp's start to last one's end by the GPU clock.
    pub copy_seconds: f64,
}

/// Device memory a pull cache leaves free for the search's buffers and other work.
const CACHE_HEADROOM: usize = 2 << 30;

impl<'a> ShardIndex<'a> {
    /// A shard with `layout` (the whole index's lists, the others' empty) whose list-major
    /// vectors are `lists`, searched on `gpu`'s `stream` (a collective may share it). With
    /// [`Reads::Pull`] its device copy is allocated now, or [`Error::OutOfMemory`] when it
    /// would leave less than 2 GiB free.
    pub fn new(
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        layout: IvfLayout,
        lists: HostView<'a, f32>,
        reads: Reads,
    ) -> Result<Self> {
        if lists.len() != layout.len() * layout.dim {
            return Err(Error::InvalidRange {
                start: 0,
                len: lists.len() as u64,
                limit: (layout.len() * layout.dim) as u64,
                reason: "a shard's host memory holds another number of floats than its lists",
            });
        }
        gpu.bind_to_thread()?;
        let stream = stream.clone();
        let cache = match reads {
            Reads::Pull => Some(device_copy_of(gpu, &stream, lists.len())?),
            Reads::ZeroCopy => None,
        };
        let per_sm = lookahead::launch::module_for(gpu.context(), ivf_kernels::PTX)?
            .function("scan")?
            .occupancy_max_active_blocks_per_multiprocessor(SCAN_THREADS, 0, None)
            .during("cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        let sms = gpu.capabilities()?.sm_count.max(1);
        let shard = ShardIndex {
            offsets: stream.clone_htod(&layout.offsets).during("cuMemcpyHtoD")?,
            ids: stream.clone_htod(&layout.ids).during("cuMemcpyHtoD")?,
            centroids_q: stream
                .clone_htod(&layout.centroids_quads())
                .during("cuMemcpyHtoD")?,
            copied: stream
                .alloc_zeros::<u32>(layout.nlist().max(1))
                .during("cuMemAlloc")?,
            max_list_len: (0..layout.nlist())
                .map(|l| layout.list_len(l))
                .max()
                .unwrap_or(0),
            scan_capacity: per_sm.max(1) * sms,
            sms: sms as usize,
            gpu: gpu.clone(),
            stream,
            layout,
            lists,
            reads,
            cache,
            buffers: None,
            last: None,
        };
        shard.stream.synchronize().during("cuStreamSynchronize")?;
        Ok(shard)
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The stream searches are queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The shard's layout.
    pub fn layout(&self) -> &IvfLayout {
        &self.layout
    }

    /// Bytes of the shard's lists.
    pub fn bytes(&self) -> u64 {
        (self.lists.len() * 4) as u64
    }

    /// A cold start: the pull's copy counts as empty (the next search copies what it
    /// probes). Waits for the stream.
    pub fn evict(&mut self) -> Result<()> {
        let n = self.layout.nlist().max(1);
        fill32(
            UM::new(&mut self.copied, &self.stream).device_ptr(),
            n,
            0,
            &self.stream,
        )?;
        self.stream.synchronize().during("cuStreamSynchronize")
    }

    /// Buffers for a search of `nq` queries with `nprobe` probes (grown when needed).
    pub fn reserve(&mut self, nq: usize, nprobe: usize) -> Result<()> {
        let shape = self.shape(nq, nprobe);
        let need = Capacity::of(&shape);
        if !self.buffers.as_ref().is_some_and(|b| b.cap.holds(&need)) {
            self.buffers = None;
            let (dim, nlist) = (self.layout.dim, self.layout.nlist());
            self.buffers = Some(Buffers::new(&self.stream, need, dim, nlist)?);
        }
        Ok(())
    }

    fn shape(&self, nq: usize, nprobe: usize) -> Shape {
        let (nlist, dim) = (self.layout.nlist(), self.layout.dim);
        let chunk_rows = ivf_kernels::DEFAULT_CHUNK_ROWS;
        Shape::new(
            nq,
            nprobe,
            nlist,
            dim,
            self.max_list_len,
            self.sms,
            chunk_rows,
        )
    }

    fn bufs(&mut self) -> Result<&mut Buffers> {
        self.buffers.as_mut().ok_or(Error::InvalidRange {
            start: 0,
            len: 0,
            limit: 0,
            reason: "a shard searched before `reserve` sized its buffers",
        })
    }

    /// The first `nq` queries' place in device memory (after [`ShardIndex::reserve`]), for
    /// a collective to write them.
    pub fn queries_mut(&mut self, nq: usize) -> Result<cudarc::driver::CudaViewMut<'_, f32>> {
        let dim = self.layout.dim;
        Ok(self.bufs()?.queries.slice_mut(..nq * dim))
    }

    /// Copies `queries` (`dim` floats each, no more than [`ShardIndex::reserve`] made room
    /// for) to the device, queued on the stream.
    pub fn upload(&mut self, queries: &[f32]) -> Result<()> {
        let s = self.stream.clone();
        let dim = self.layout.dim;
        let room = self.bufs()?.queries.len();
        if queries.len() % dim != 0 || queries.len() > room {
            return Err(Error::InvalidRange {
                start: 0,
                len: queries.len() as u64,
                limit: room as u64,
                reason:
                    "queries that are not whole vectors, or more than the buffers were sized for",
            });
        }
        let mut q = self.bufs()?.queries.slice_mut(..queries.len());
        s.memcpy_htod(queries, &mut q).during("cuMemcpyHtoD")
    }

    /// One whole search of `queries` (`dim` floats each) with `nprobe` probes, waited for:
    /// each query's `K` nearest (distances, ids).
    pub fn search(&mut self, queries: &[f32], nprobe: usize) -> Result<(Vec<f32>, Vec<u32>)> {
        let nq = queries.len() / self.layout.dim.max(1);
        self.reserve(nq, nprobe)?;
        self.upload(queries)?;
        self.enqueue(nq, nprobe)?;
        self.download()
    }

    /// Queues the search of the `nq` queries in device memory with `nprobe` probes: the
    /// outputs poisoned, coarse, plan, the scan (pulling or zero-copy as the shard reads),
    /// merge. Nothing waits.
    pub fn enqueue(&mut self, nq: usize, nprobe: usize) -> Result<()> {
        self.reserve(nq, nprobe)?;
        let sh = self.shape(nq, nprobe);
        self.last = Some(sh);
        self.gpu.bind_to_thread()?;
        self.poison(sh)?;
        let b = self.buffers.as_mut().expect("reserved");
        launch_coarse(&self.stream, sh, b, &self.centroids_q)?;
        self.plan(sh)?;
        let blocks = self.scan_capacity.max(1);
        let grid = LaunchConfig::new((blocks, 1, 1), (SCAN_THREADS, 1, 1));
        match self.reads {
            Reads::Pull => self.pull_scan(sh, grid)?,
            Reads::ZeroCopy => self.scan(sh, grid)?,
        }
        self.merge(sh)
    }

    fn poison(&mut self, sh: Shape) -> Result<()> {
        let s = self.stream.clone();
        let b = self.bufs()?;
        let words = sh.nq * K;
        fill32(
            UM::prefix(&mut b.out_d, words, &s)?.device_ptr(),
            words,
            POISON_DIST,
            &s,
        )?;
        fill32(
            UM::prefix(&mut b.out_i, words, &s)?.device_ptr(),
            words,
            POISON_ID,
            &s,
        )?;
        fill32(
            UM::prefix(&mut b.readiness, sh.nlist, &s)?.device_ptr(),
            sh.nlist,
            0,
            &s,
        )
    }

    fn index_args<'v>(
        &self,
        vectors: &'v HostView<'a, f32>,
        offsets: &'v U<'v, u64>,
        ids: &'v U<'v, u32>,
    ) -> IndexArgs<'v> {
        IndexArgs {
            vectors,
            offsets,
            ids,
            dim: self.layout.dim as u32,
            chunk_rows: ivf_kernels::DEFAULT_CHUNK_ROWS,
        }
    }

    fn plan(&mut self, sh: Shape) -> Result<()> {
        let s = self.stream.clone();
        let (offsets, ids) = (U::new(&self.offsets, &s), U::new(&self.ids, &s));
        let index = self.index_args(&self.lists, &offsets, &ids);
        let b = self.buffers.as_mut().expect("reserved");
        let pull = PullPlanArgs {
            copied: &mut UM::new(&mut self.copied, &s),
            copy_first: &mut UM::new(&mut b.copy_first, &s),
        };
        let out = PlanOutArgs {
            counts: &mut UM::new(&mut b.counts, &s),
            slots: &mut UM::prefix(&mut b.slots, sh.pairs, &s)?,
            probed: &mut UM::new(&mut b.probed, &s),
            wanted: &mut UM::new(&mut b.wanted, &s),
            list_item_off: &mut UM::new(&mut b.list_item_off, &s),
            pair_cand_off: &mut UM::prefix(&mut b.pair_cand_off, sh.pairs + 1, &s)?,
            item_pair: &mut UM::prefix(&mut b.item_pair, sh.items, &s)?,
            item_chunk: &mut UM::prefix(&mut b.item_chunk, sh.items, &s)?,
            totals: &mut UM::new(&mut b.totals, &s),
        };
        let probes = U::prefix(&b.probes, sh.pairs, &s)?;
        let cfg = LaunchConfig::new((1, 1, 1), (PLAN_THREADS, 1, 1));
        let pulling = (self.reads == Reads::Pull) as u32;
        ivf_kernels::plan::launch(
            &s,
            cfg,
            &probes,
            index,
            RingQueue::disabled(),
            pulling,
            pull,
            out,
        )
    }

    fn pull_scan(&mut self, sh: Shape, grid: LaunchConfig) -> Result<()> {
        let s = self.stream.clone();
        let (offsets, ids) = (U::new(&self.offsets, &s), U::new(&self.ids, &s));
        let index = self.index_args(&self.lists, &offsets, &ids);
        let b = self.buffers.as_mut().expect("reserved");
        let mut work = UM::new(&mut b.work, &s);
        fill32(work.device_ptr(), 2 * ivf_kernels::PULL_WORK_WORDS, 0, &s)?;
        let (batch, plan) = scan_views!(b, sh, &s);
        let cache = self.cache.as_mut().expect("a pulling shard has its copy");
        ivf_kernels::pull_scan::launch(
            &s,
            grid,
            index,
            batch.args(sh, HINT_NONE),
            plan.args(),
            PullArgs {
                cache: &mut UM::new(cache, &s),
                copied: &mut UM::new(&mut self.copied, &s),
                wanted: &U::new(&b.wanted, &s),
                copy_first: &U::new(&b.copy_first, &s),
                work: &mut work,
                copy_every: PULL_COPY_EVERY_NTH_SM,
                wait_us: PULL_WAIT_US,
            },
            CandidatesArgs {
                readiness: &mut UM::prefix(&mut b.readiness, sh.nlist, &s)?,
                dist: &mut UM::prefix(&mut b.cand_d, sh.items * K, &s)?,
                ids: &mut UM::prefix(&mut b.cand_i, sh.items * K, &s)?,
            },
        )
    }

    fn scan(&mut self, sh: Shape, grid: LaunchConfig) -> Result<()> {
        let s = self.stream.clone();
        let (offsets, ids) = (U::new(&self.offsets, &s), U::new(&self.ids, &s));
        let index = self.index_args(&self.lists, &offsets, &ids);
        let b = self.buffers.as_mut().expect("reserved");
        let (batch, plan) = scan_views!(b, sh, &s);
        ivf_kernels::scan::launch(
            &s,
            grid,
            index,
            batch.args(sh, HINT_NONE),
            plan.args(),
            RingQueue::disabled(),
            CandidatesArgs {
                readiness: &mut UM::prefix(&mut b.readiness, sh.nlist, &s)?,
                dist: &mut UM::prefix(&mut b.cand_d, sh.items * K, &s)?,
                ids: &mut UM::prefix(&mut b.cand_i, sh.items * K, &s)?,
            },
        )
    }

    fn merge(&mut self, sh: Shape) -> Result<()> {
        let b = self.buffers.as_mut().expect("reserved");
        let mut out_d = UM::prefix(&mut b.out_d, sh.nq * K, &self.stream)?;
        let mut out_i = UM::prefix(&mut b.out_i, sh.nq * K, &self.stream)?;
        let cand = (&b.cand_d, &b.cand_i, &b.pair_cand_off);
        launch_merge(&self.stream, sh, cand, &mut out_d, &mut out_i)
    }

    /// The last search's `K` nearest per query (distances, ids), in device memory: what a
    /// collective gathers. Valid once the stream has run the search.
    pub fn results(&self) -> Result<(CudaView<'_, f32>, CudaView<'_, u32>)> {
        let (sh, b) = self.searched()?;
        Ok((b.out_d.slice(..sh.nq * K), b.out_i.slice(..sh.nq * K)))
    }

    fn searched(&self) -> Result<(Shape, &Buffers)> {
        match (self.last, self.buffers.as_ref()) {
            (Some(sh), Some(b)) => Ok((sh, b)),
            _ => Err(Error::InvalidRange {
                start: 0,
                len: 0,
                limit: 0,
                reason: "a shard's results read before any search",
            }),
        }
    }

    /// Waits for the stream, then copies the last search's results to the host; a result
    /// left poisoned is [`Error::UnwrittenOutput`].
    pub fn download(&self) -> Result<(Vec<f32>, Vec<u32>)> {
        let (sh, b) = self.searched()?;
        let n = sh.nq * K;
        let s = &self.stream;
        let dist = s.clone_dtoh(&b.out_d.slice(..n)).during("cuMemcpyDtoH")?;
        let ids = s.clone_dtoh(&b.out_i.slice(..n)).during("cuMemcpyDtoH")?;
        if let Some(q) = ids.iter().position(|&i| i == POISON_ID) {
            return Err(Error::UnwrittenOutput {
                kernel: "merge",
                what: format!("neighbour {} of query {}", q % K, q / K),
            });
        }
        Ok((dist, ids))
    }

    /// What the last search did (waits for the stream).
    pub fn stats(&self) -> Result<ShardStats> {
        let (_, b) = self.searched()?;
        let s = &self.stream;
        let totals = s.clone_dtoh(&b.totals).during("cuMemcpyDtoH")?;
        let probed = s.clone_dtoh(&b.probed).during("cuMemcpyDtoH")?;
        let probed = &probed[..Total::ProbedLists.of(&totals).min(probed.len())];
        let copy_seconds = if self.reads == Reads::Pull {
            copy_seconds(&s.clone_dtoh(&b.work).during("cuMemcpyDtoH")?)
        } else {
            0.0
        };
        Ok(ShardStats {
            probed_lists: probed
                .iter()
                .filter(|&&l| self.layout.list_len(l as usize) > 0)
                .count(),
            needed_bytes: self.layout.bytes_of(probed),
            copied_lists: if self.reads == Reads::Pull {
                Total::WantedLists.of(&totals)
            } else {
                0
            },
            items: Total::WorkItems.of(&totals),
            copy_seconds,
        })
    }
}

/// Device memory for a copy of `floats` floats, leaving [`CACHE_HEADROOM`] free. Memory
/// that earlier searches freed stream-ordered goes back to the device first (the pool keeps
/// it otherwise, and the device's free memory does not count it).
fn device_copy_of(gpu: &Gpu, stream: &Arc<CudaStream>, floats: usize) -> Result<CudaSlice<f32>> {
    let bytes = floats * 4;
    lookahead_multi::set::release_freed_memory(gpu)?;
    let (free, _) = gpu.memory_info()?;
    if free < bytes + CACHE_HEADROOM {
        return Err(Error::OutOfMemory {
            during: "ShardIndex pull copy (device memory the size of the shard's lists)",
            requested: bytes,
            available: free.saturating_sub(CACHE_HEADROOM),
        });
    }
    // SAFETY: `pull_scan` reads a list's part only after copying it there (`copied`).
    unsafe { stream.alloc::<f32>(floats.max(1)) }.during("cuMemAlloc")
}
