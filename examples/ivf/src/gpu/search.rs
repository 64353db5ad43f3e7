//! One search: coarse, plan, the policy's host work, scan, merge, each a step of [`Search`].
//!
//! Every kernel takes its buffers as [`lookahead::untracked`] arguments on the index's one
//! stream: the scan may wait for flags other streams write, so nothing (not even cudarc's
//! use-tracking events) may be queued behind it, and the others are ordered by the stream
//! alone.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{sys, CudaEvent, CudaSlice, CudaStream};
use ivf_kernels::{
    BoundItemsArgs, CandidatesArgs, IndexArgs, PairPlanOutArgs, PlanOutArgs, PullArgs,
    PullPlanArgs, PullWork, TilePlanArgs, TileWorkInArgs, TileWorkOutArgs, Total, HINT_L2,
    HINT_NONE, K, MAX_DIM, PLAN_THREADS, PULL_COPY_EVERY_NTH_SM, READY_ARRIVED, READY_TIMED_OUT,
    READY_WENT_AHEAD, SCAN_THREADS,
};
use lookahead::launch::{GpuMemory, KernelSliceMut, LaunchConfig};
use lookahead::untracked::{Untracked as U, UntrackedManaged, UntrackedMut as UM};
use lookahead::{DriverContext, Error, Result};
use lookahead_uvm::{Policy, PolicyBuffer, RingQueue, Staging, UvmRuntime};

use super::buffers::{fill32, grow, Buffers, Capacity};
use super::{GpuIndex, ScanMethod, SearchOutcome, SearchParams, TILE_PAIRS_PER_LIST};
use crate::data::Vectors;
use crate::index::{IvfLayout, TileLaunch};

/// Bits written into every output word before a search; any left afterwards is a result
/// the kernels failed to write.
pub(super) const POISON_ID: u32 = 0xFFFF_FFFE;
pub(super) const POISON_DIST: u32 = 0x7FC0_0001; // a NaN

/// The sizes one search works with.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    pub(super) nq: usize,
    pub(super) nprobe: usize,
    pub(super) pairs: usize,
    pub(super) items: usize,
    pub(super) nlist: usize,
    pub(super) dim: usize,
    /// Slices of the coarse step ([`ivf_kernels::coarse_slices`]).
    pub(super) slices: usize,
    /// The GPU's SMs (the merge's launch depends on them).
    pub(super) sms: usize,
    /// Rows of a scan work item.
    pub(super) chunk_rows: u32,
}

impl Shape {
    /// A search of `nq` queries with `nprobe` probes (at least 1, at most
    /// [`ivf_kernels::MAX_NPROBE`] and the lists) over `nlist` lists of at most `longest`
    /// vectors of `dim` floats, on `sms` SMs, with work items of `chunk_rows` rows.
    pub(super) fn new(
        nq: usize,
        nprobe: usize,
        nlist: usize,
        dim: usize,
        longest: usize,
        sms: usize,
        chunk_rows: u32,
    ) -> Shape {
        let nprobe = nprobe.clamp(1, ivf_kernels::MAX_NPROBE.min(nlist));
        let pairs = nq * nprobe;
        Shape {
            slices: ivf_kernels::coarse_slices(nq, nlist, nprobe, sms),
            sms,
            chunk_rows,
            nq,
            nprobe,
            pairs,
            items: ivf_kernels::max_items(pairs, longest, chunk_rows),
            nlist,
            dim,
        }
    }
}

/// What one search works on: the index's parts, borrowed each on its own, and the shape.
pub(super) struct Search<'a> {
    pub(super) s: &'a Arc<CudaStream>,
    layout: &'a IvfLayout,
    lists: &'a mut PolicyBuffer<f32>,
    offsets: &'a CudaSlice<u64>,
    ids: &'a CudaSlice<u32>,
    centroids_q: &'a CudaSlice<f32>,
    norms: &'a CudaSlice<f32>,
    pub(super) b: &'a mut Buffers,
    pub(super) shape: Shape,
}

/// The points of a search that its [`Timeline`] marks.
#[derive(Debug, Clone, Copy)]
enum Mark {
    BeforeCoarse = 0,
    /// After the policy's host work.
    BeforeScan = 1,
    AfterScan = 2,
    AfterMerge = 3,
}

/// An event per [`Mark`].
struct Timeline([CudaEvent; 4]);

impl Timeline {
    fn new(s: &CudaStream) -> Result<Self> {
        let ctx = s.context();
        let e = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
        Ok(Timeline([
            e().during("cuEventCreate")?,
            e().during("cuEventCreate")?,
            e().during("cuEventCreate")?,
            e().during("cuEventCreate")?,
        ]))
    }
    fn mark(&self, at: Mark, s: &CudaStream) -> Result<()> {
        self.0[at as usize].record(s).during("cuEventRecord")
    }
    fn seconds(&self, from: Mark, to: Mark) -> Result<f64> {
        let ms = self.0[from as usize]
            .elapsed_ms(&self.0[to as usize])
            .during("cuEventElapsedTime")?;
        Ok(ms as f64 / 1e3)
    }
}

impl GpuIndex {
    /// Searches `queries` for their `K` nearest neighbours under `params.policy` (`Auto`
    /// chooses per search), with the ring, service and engine of `rt`.
    pub fn search(
        &mut self,
        queries: &Vectors,
        params: SearchParams,
        rt: &UvmRuntime,
    ) -> Result<SearchOutcome> {
        let mut shape = self.shape(queries, params)?;
        let chosen = rt.resolve(params.policy, || {
            self.expected_pattern(shape.nq, shape.nprobe, params.expected_passes)
        });
        let tiled = self.scans_tiles(&shape, params.scan, chosen)?;
        if tiled {
            shape = self.shape_of(shape.nq, params, TILE_CHUNK_ROWS)?;
        } else if reads_in_place(chosen) {
            // Few pairs scan smaller work items, as small batches do: nothing waits for a
            // list, so more items only spread the rows over more warps.
            shape = self.few_pair_items(shape, params)?;
        }
        self.buffers(Capacity::of(&shape))?;
        self.stream.synchronize().during("cuStreamSynchronize")?;
        let started = Instant::now();
        // The mapping and pull cache the chosen policy needs (nothing when set up already);
        // prefetch-all starts before the coarse step, so the two overlap.
        let mut staging = self.lists.stage(chosen, rt)?;
        let scan_blocks = match params.max_blocks {
            0 => self.scan_capacity,
            n => n.min(self.scan_capacity),
        };
        let mut run = self.begin(shape);
        let timeline = Timeline::new(run.s)?;
        let scan = ScanLaunch {
            blocks: scan_blocks,
            tiled,
        };
        let (dist, ids) = run.run(queries, &mut staging, params, &timeline, scan)?;
        let seconds = started.elapsed().as_secs_f64();
        let mut outcome = run.outcome(chosen, dist, ids, seconds, &timeline)?;
        outcome.tiled = tiled;
        Ok(outcome)
    }

    /// Whether a search of `shape` under `chosen` scans by tiles ([`ScanMethod`]), or why
    /// it cannot when asked to.
    fn scans_tiles(&self, shape: &Shape, method: ScanMethod, chosen: Policy) -> Result<bool> {
        let cc = self.gpu.capabilities()?.compute_capability;
        let dim = shape.dim;
        let possible = reads_in_place(chosen) && dim % 4 == 0 && dim <= MAX_DIM && cc >= 80;
        match method {
            ScanMethod::Warp => Ok(false),
            ScanMethod::Auto => Ok(possible && shape.pairs >= TILE_PAIRS_PER_LIST * shape.nlist),
            ScanMethod::Tiles if possible => Ok(true),
            ScanMethod::Tiles => Err(Error::InvalidArgument {
                call: "GpuIndex::search",
                reason: format!(
                    "ScanMethod::Tiles needs lists read in place (policy {chosen:?} is not one \
                     of faults, prefetch-all, host-selected), a dimension that is a multiple \
                     of 4 and at most {MAX_DIM} (the index has {dim}) and sm_80 or newer (this \
                     GPU is sm_{cc}); ScanMethod::Auto takes the warp scan where tiles cannot run"
                ),
            }),
        }
    }

    /// The shape of a search of `queries` with `params`, checked against the index.
    pub(super) fn shape(&self, queries: &Vectors, params: SearchParams) -> Result<Shape> {
        let dim = self.layout.dim;
        if queries.dim != dim {
            return Err(Error::InvalidRange {
                start: queries.dim as u64,
                len: 0,
                limit: dim as u64,
                reason: "queries have a different dimension than the index",
            });
        }
        self.shape_of(queries.len(), params, self.chunk_rows)
    }

    /// The shape of a search of `nq` queries of the index's dimension, with work items of
    /// `chunk_rows` rows.
    pub(super) fn shape_of(
        &self,
        nq: usize,
        params: SearchParams,
        chunk_rows: u32,
    ) -> Result<Shape> {
        let sms = self.gpu.capabilities()?.sm_count as usize;
        let (nlist, dim) = (self.layout.nlist(), self.layout.dim);
        let longest = self.max_list_len;
        Ok(Shape::new(
            nq,
            params.nprobe,
            nlist,
            dim,
            longest,
            sms,
            chunk_rows,
        ))
    }

    pub(super) fn begin(&mut self, shape: Shape) -> Search<'_> {
        let GpuIndex {
            stream,
            layout,
            lists,
            offsets,
            ids,
            centroids_q,
            norms,
            buffers,
            ..
        } = self;
        Search {
            s: stream,
            layout,
            lists,
            offsets,
            ids,
            centroids_q,
            norms,
            b: buffers.as_mut().expect("allocated before the search"),
            shape,
        }
    }
}

/// Rows of a work item of the tiled scan: the bounded scan computes the exact distances of
/// 32 vectors per item before its bounds pass, so longer items leave less of that.
const TILE_CHUNK_ROWS: u32 = 4096;

/// Most floats of bounds one launch of the tiled scan writes (512 MiB); a batch with more
/// work items runs in several launches.
const MAX_BOUND_FLOATS: usize = 128 << 20;

/// How the scan launches: its blocks, and whether by tiles.
#[derive(Debug, Clone, Copy)]
struct ScanLaunch {
    blocks: u32,
    tiled: bool,
}

/// Whether the scan of a search under `policy` reads the lists where they are, with no
/// requests, hints, mapping or pull (nothing in it waits for a list).
pub(super) fn reads_in_place(policy: Policy) -> bool {
    matches!(
        policy,
        Policy::Faults | Policy::PrefetchAll | Policy::HostSelected
    )
}

/// The index's arrays as untracked kernel arguments (their stream tracking would end a
/// graph capture, see `lookahead::untracked`), for [`IndexArgs`].
struct IndexViews<'a> {
    vectors: UntrackedManaged<'a, f32>,
    offsets: U<'a, u64>,
    ids: U<'a, u32>,
    dim: u32,
    chunk_rows: u32,
}

impl<'a> IndexViews<'a> {
    fn new(
        vectors: UntrackedManaged<'a, f32>,
        offsets: &'a CudaSlice<u64>,
        ids: &'a CudaSlice<u32>,
        s: &CudaStream,
        shape: Shape,
    ) -> Self {
        IndexViews {
            vectors,
            offsets: U::new(offsets, s),
            ids: U::new(ids, s),
            dim: shape.dim as u32,
            chunk_rows: shape.chunk_rows,
        }
    }

    fn args(&self) -> IndexArgs<'_> {
        IndexArgs {
            vectors: &self.vectors,
            offsets: &self.offsets,
            ids: &self.ids,
            dim: self.dim,
            chunk_rows: self.chunk_rows,
        }
    }
}

impl Search<'_> {
    /// Every step, from uploading the queries to the results back on the host.
    fn run(
        &mut self,
        queries: &Vectors,
        staging: &mut Staging<'_>,
        params: SearchParams,
        timeline: &Timeline,
        scan: ScanLaunch,
    ) -> Result<(Vec<f32>, Vec<u32>)> {
        let (queue, pulling) = (staging.queue(), staging.pulls());
        self.upload(queries)?;
        timeline.mark(Mark::BeforeCoarse, self.s)?;
        self.coarse()?;
        self.plan(queue, pulling)?;
        self.host_work(staging)?;
        // The tiled scan's work is listed (on the GPU, from the plan's counts) and its size
        // read back before the scan's time starts (the search's time has it).
        let tiles = match scan.tiled {
            true => Some(self.tile_work()?),
            false => None,
        };
        timeline.mark(Mark::BeforeScan, self.s)?;
        let grid = LaunchConfig::new((scan.blocks.max(1), 1, 1), (SCAN_THREADS, 1, 1));
        if let Some(work) = tiles {
            self.tile_scan(grid, &work)?;
        } else if pulling {
            let copy_every = match params.pull_copy_every {
                0 => PULL_COPY_EVERY_NTH_SM,
                n => n,
            };
            self.pull_scan(grid, copy_every, staging.wait_us())?;
        } else {
            let hints = if staging.kernel_hints() {
                HINT_L2
            } else {
                HINT_NONE
            };
            self.scan(grid, hints, queue)?;
        }
        // Nothing is queued behind a scan that waits for requests until it is done (see the
        // module docs); behind the others the event times the scan alone, without the
        // host's wake-up.
        if !staging.queue().is_enabled() {
            timeline.mark(Mark::AfterScan, self.s)?;
            self.s.synchronize().during("cuStreamSynchronize")?;
        } else {
            self.s.synchronize().during("cuStreamSynchronize")?;
            timeline.mark(Mark::AfterScan, self.s)?;
        }
        self.merge()?;
        timeline.mark(Mark::AfterMerge, self.s)?;
        self.download()
    }

    /// The queries up, the outputs poisoned, the readiness codes cleared (the search's
    /// statistics read them).
    fn upload(&mut self, queries: &Vectors) -> Result<()> {
        let (s, sh) = (self.s, self.shape);
        let mut q = self.b.queries.slice_mut(..sh.nq * sh.dim);
        s.memcpy_htod(&queries.data, &mut q)
            .during("cuMemcpyHtoD")?;
        self.poison_outputs(sh.nq)?;
        let readiness = UM::prefix(&mut self.b.readiness, sh.nlist, s)?;
        fill32(readiness.device_ptr(), sh.nlist, 0, s)
    }

    /// The first `rows` queries' outputs poisoned (a word left so is one the kernels did not
    /// write).
    fn poison_outputs(&mut self, rows: usize) -> Result<()> {
        let (s, words) = (self.s, rows * K);
        let out_d = UM::prefix(&mut self.b.out_d, words, s)?;
        fill32(out_d.device_ptr(), words, POISON_DIST, s)?;
        let out_i = UM::prefix(&mut self.b.out_i, words, s)?;
        fill32(out_i.device_ptr(), words, POISON_ID, s)
    }

    /// The probes: one coarse launch, or a sliced one and the merge of its slices.
    pub(super) fn coarse(&mut self) -> Result<()> {
        launch_coarse(self.s, self.shape, self.b, self.centroids_q)
    }

    /// The plan: probed lists, requests (through `queue`) or the pull's copy list, work items.
    pub(super) fn plan(&mut self, queue: RingQueue<'_>, pulling: bool) -> Result<()> {
        let (s, sh, b) = (self.s, self.shape, &mut *self.b);
        let (vectors, mut copied) = self.lists.counter_views();
        let views = IndexViews::new(vectors, self.offsets, self.ids, s, sh);
        let index = views.args();
        let pull = PullPlanArgs {
            copied: &mut copied,
            copy_first: &mut UM::new(&mut b.copy_first, s),
        };
        let out = PlanOutArgs {
            counts: &mut UM::new(&mut b.counts, s),
            slots: &mut UM::prefix(&mut b.slots, sh.pairs, s)?,
            probed: &mut UM::new(&mut b.probed, s),
            wanted: &mut UM::new(&mut b.wanted, s),
            list_item_off: &mut UM::new(&mut b.list_item_off, s),
            pair_cand_off: &mut UM::prefix(&mut b.pair_cand_off, sh.pairs + 1, s)?,
            item_pair: &mut UM::prefix(&mut b.item_pair, sh.items, s)?,
            item_chunk: &mut UM::prefix(&mut b.item_chunk, sh.items, s)?,
            totals: &mut UM::new(&mut b.totals, s),
        };
        let probes = U::prefix(&b.probes, sh.pairs, s)?;
        let cfg = LaunchConfig::new((1, 1, 1), (PLAN_THREADS, 1, 1));
        ivf_kernels::plan::launch(s, cfg, &probes, index, queue, pulling as u32, pull, out)
    }

    /// The plan of a small resident batch ([`ivf_kernels::plan_pairs`]): work items pair by
    /// pair, nothing counted per list, asked for or copied.
    pub(super) fn plan_pairs(&mut self) -> Result<()> {
        let (s, sh, b) = (self.s, self.shape, &mut *self.b);
        let views = IndexViews::new(self.lists.data_view(), self.offsets, self.ids, s, sh);
        let index = views.args();
        let out = PairPlanOutArgs {
            pair_cand_off: &mut UM::prefix(&mut b.pair_cand_off, sh.pairs + 1, s)?,
            item_pair: &mut UM::prefix(&mut b.item_pair, sh.items, s)?,
            item_chunk: &mut UM::prefix(&mut b.item_chunk, sh.items, s)?,
            totals: &mut UM::new(&mut b.totals, s),
        };
        let probes = U::prefix(&b.probes, sh.pairs, s)?;
        let cfg = LaunchConfig::new((1, 1, 1), (PLAN_THREADS, 1, 1));
        ivf_kernels::plan_pairs::launch(s, cfg, &probes, index, out)
    }

    /// What the chosen policy does on the host between the plan and the scan: host-selected
    /// learns the probed lists (one round trip) and has them prefetched; prefetch-all waits
    /// for its prefetch.
    fn host_work(&mut self, staging: &mut Staging<'_>) -> Result<()> {
        let (s, b, layout, dim) = (self.s, &*self.b, self.layout, self.shape.dim);
        staging.before_read(self.lists, || {
            let totals = s.clone_dtoh(&b.totals).during("cuMemcpyDtoH")?;
            let probed = s.clone_dtoh(&b.probed).during("cuMemcpyDtoH")?;
            let list = |l: u32| layout.offsets[l as usize] as usize * dim;
            Ok(probed[..Total::ProbedLists.of(&totals)]
                .iter()
                .map(|&l| list(l)..list(l + 1))
                .collect())
        })
    }

    pub(super) fn scan(
        &mut self,
        grid: LaunchConfig,
        hints: u32,
        queue: RingQueue<'_>,
    ) -> Result<()> {
        let (s, sh, b) = (self.s, self.shape, &mut *self.b);
        let views = IndexViews::new(self.lists.data_view(), self.offsets, self.ids, s, sh);
        let (batch, plan) = scan_views!(b, sh, s);
        ivf_kernels::scan::launch(
            s,
            grid,
            views.args(),
            batch.args(sh, hints),
            plan.args(),
            queue,
            CandidatesArgs {
                readiness: &mut UM::prefix(&mut b.readiness, sh.nlist, s)?,
                dist: &mut UM::prefix(&mut b.cand_d, sh.items * K, s)?,
                ids: &mut UM::prefix(&mut b.cand_i, sh.items * K, s)?,
            },
        )
    }

    /// The work of [`ivf_kernels::tile_bounds`], listed on the GPU from the plan
    /// ([`ivf_kernels::tile_work`]), the buffers grown for it, and its pieces: the work
    /// items in launches whose bounds fit [`MAX_BOUND_FLOATS`]. One small read-back (the
    /// counts); the bound offsets come back only when the bounds need several launches.
    fn tile_work(&mut self) -> Result<TileLaunch> {
        let (s, sh) = (self.s, self.shape);
        let most_units = self.layout.tile_units_at_most(sh.pairs, sh.chunk_rows);
        let b = &mut *self.b;
        grow(s, &mut b.units, most_units * ivf_kernels::UNIT_WORDS)?;
        grow(s, &mut b.bound_off, sh.items + 1)?;
        let views = IndexViews::new(self.lists.data_view(), self.offsets, self.ids, s, sh);
        let plan = TileWorkInArgs {
            probed: &U::new(&b.probed, s),
            counts: &U::new(&b.counts, s),
            list_item_off: &U::new(&b.list_item_off, s),
            totals: &U::new(&b.totals, s),
        };
        let out = TileWorkOutArgs {
            units: &mut UM::prefix(&mut b.units, most_units * ivf_kernels::UNIT_WORDS, s)?,
            bound_off: &mut UM::prefix(&mut b.bound_off, sh.items + 1, s)?,
            summary: &mut UM::new(&mut b.tile_summary, s),
        };
        let cfg = LaunchConfig::new((1, 1, 1), (PLAN_THREADS, 1, 1));
        ivf_kernels::tile_work::launch(s, cfg, views.args(), plan, out)?;
        let summary = s.clone_dtoh(&b.tile_summary).during("cuMemcpyDtoH")?;
        let limits = (most_units, sh.items, MAX_BOUND_FLOATS as u64);
        let work = TileLaunch::new(&summary, limits, || {
            s.clone_dtoh(&b.bound_off.slice(..=summary[1] as usize))
                .during("cuMemcpyDtoH")
        })?;
        grow(s, &mut b.bounds, work.most_bounds as usize)?;
        Ok(work)
    }

    /// The tiled scan of `work` ([`Search::tile_work`]): for each of its pieces,
    /// [`ivf_kernels::tile_bounds`] then [`ivf_kernels::bounded_scan`] on `grid`.
    fn tile_scan(&mut self, grid: LaunchConfig, work: &TileLaunch) -> Result<()> {
        let tiles = LaunchConfig::new((work.units as u32, 1, 1), (ivf_kernels::TILE_THREADS, 1, 1));
        let words = work.units * ivf_kernels::UNIT_WORDS;
        for &(first, count) in &work.pieces {
            let piece = (first as u32, count as u32);
            if work.units > 0 {
                self.launch_tile_bounds(tiles, piece, (words, work.items + 1))?;
            }
            self.launch_bounded_scan(grid, piece, work.items + 1)?;
        }
        Ok(())
    }

    fn launch_tile_bounds(
        &mut self,
        cfg: LaunchConfig,
        (first, count): (u32, u32),
        (words, offsets): (usize, usize),
    ) -> Result<()> {
        let (s, sh, b) = (self.s, self.shape, &mut *self.b);
        let views = IndexViews::new(self.lists.data_view(), self.offsets, self.ids, s, sh);
        let queries = U::prefix(&b.queries, sh.nq * sh.dim, s)?;
        let (counts, list_item_off) = (U::new(&b.counts, s), U::new(&b.list_item_off, s));
        let (item_pair, units, norms) = (
            U::prefix(&b.item_pair, sh.items, s)?,
            U::prefix(&b.units, words, s)?,
            U::new(self.norms, s),
        );
        let plan = TilePlanArgs {
            counts: &counts,
            list_item_off: &list_item_off,
            item_pair: &item_pair,
            units: &units,
            norms: &norms,
        };
        let bound_off = U::prefix(&b.bound_off, offsets, s)?;
        let range = BoundItemsArgs {
            offsets: &bound_off,
            first,
            count,
        };
        let mut bounds = UM::new(&mut b.bounds, s);
        let nprobe = sh.nprobe as u32;
        ivf_kernels::tile_bounds::launch(
            s,
            cfg,
            views.args(),
            &queries,
            nprobe,
            plan,
            range,
            &mut bounds,
        )
    }

    fn launch_bounded_scan(
        &mut self,
        grid: LaunchConfig,
        (first, count): (u32, u32),
        offsets: usize,
    ) -> Result<()> {
        let (s, sh, b) = (self.s, self.shape, &mut *self.b);
        let views = IndexViews::new(self.lists.data_view(), self.offsets, self.ids, s, sh);
        let (batch, plan) = scan_views!(b, sh, s);
        let (bounds, bound_off) = (U::new(&b.bounds, s), U::prefix(&b.bound_off, offsets, s)?);
        let range = BoundItemsArgs {
            offsets: &bound_off,
            first,
            count,
        };
        ivf_kernels::bounded_scan::launch(
            s,
            grid,
            views.args(),
            batch.args(sh, HINT_NONE),
            plan.args(),
            range,
            &bounds,
            CandidatesArgs {
                readiness: &mut UM::prefix(&mut b.readiness, sh.nlist, s)?,
                dist: &mut UM::prefix(&mut b.cand_d, sh.items * K, s)?,
                ids: &mut UM::prefix(&mut b.cand_i, sh.items * K, s)?,
            },
        )
    }

    /// Clears the pull's work counters, which `pull_scan` starts from.
    pub(super) fn clear_pull_work(&mut self) -> Result<()> {
        let s = self.s;
        fill32(
            UM::new(&mut self.b.work, s).device_ptr(),
            2 * ivf_kernels::PULL_WORK_WORDS,
            0,
            s,
        )
    }

    fn pull_scan(&mut self, grid: LaunchConfig, copy_every: u32, wait_us: u32) -> Result<()> {
        self.clear_pull_work()?;
        self.launch_pull_scan(grid, copy_every, wait_us)
    }

    pub(super) fn launch_pull_scan(
        &mut self,
        grid: LaunchConfig,
        copy_every: u32,
        wait_us: u32,
    ) -> Result<()> {
        let (s, sh, b) = (self.s, self.shape, &mut *self.b);
        let mut lists = self.lists.pull_views()?;
        let views = IndexViews::new(lists.data, self.offsets, self.ids, s, sh);
        let (batch, plan) = scan_views!(b, sh, s);
        let (wanted, copy_first) = (U::new(&b.wanted, s), U::new(&b.copy_first, s));
        ivf_kernels::pull_scan::launch(
            s,
            grid,
            views.args(),
            batch.args(sh, HINT_NONE),
            plan.args(),
            PullArgs {
                cache: &mut lists.cache,
                copied: &mut lists.counters,
                wanted: &wanted,
                copy_first: &copy_first,
                work: &mut UM::new(&mut b.work, s),
                copy_every,
                wait_us,
            },
            CandidatesArgs {
                readiness: &mut UM::prefix(&mut b.readiness, sh.nlist, s)?,
                dist: &mut UM::prefix(&mut b.cand_d, sh.items * K, s)?,
                ids: &mut UM::prefix(&mut b.cand_i, sh.items * K, s)?,
            },
        )
    }

    pub(super) fn merge(&mut self) -> Result<()> {
        let (s, sh, b) = (self.s, self.shape, &mut *self.b);
        let mut out_d = UM::prefix(&mut b.out_d, sh.nq * K, s)?;
        let mut out_i = UM::prefix(&mut b.out_i, sh.nq * K, s)?;
        let cand = (&b.cand_d, &b.cand_i, &b.pair_cand_off);
        launch_merge(s, sh, cand, &mut out_d, &mut out_i)
    }

    /// The merge, writing each query's `K` nearest to `out_d` and `out_i` (a small batch's
    /// mapped host memory).
    pub(super) fn merge_into(
        &mut self,
        out_d: &mut impl KernelSliceMut<f32, GpuMemory>,
        out_i: &mut impl KernelSliceMut<u32, GpuMemory>,
    ) -> Result<()> {
        let b = &*self.b;
        let cand = (&b.cand_d, &b.cand_i, &b.pair_cand_off);
        launch_merge(self.s, self.shape, cand, out_d, out_i)
    }

    /// The results back on the host, after the stream's work is done.
    fn download(&mut self) -> Result<(Vec<f32>, Vec<u32>)> {
        let (s, n) = (self.s, self.shape.nq * K);
        let mut dist = vec![0.0f32; n];
        let mut ids = vec![0u32; n];
        s.memcpy_dtoh(&self.b.out_d.slice(..n), &mut dist)
            .during("cuMemcpyDtoH")?;
        s.memcpy_dtoh(&self.b.out_i.slice(..n), &mut ids)
            .during("cuMemcpyDtoH")?;
        s.synchronize().during("cuStreamSynchronize")?;
        Ok((dist, ids))
    }

    /// The search's outcome, from what the kernels left in the buffers (outside the timed
    /// part).
    fn outcome(
        &mut self,
        chosen: Policy,
        dist: Vec<f32>,
        ids: Vec<u32>,
        seconds: f64,
        timeline: &Timeline,
    ) -> Result<SearchOutcome> {
        if let Some(q) = ids.iter().position(|&i| i == POISON_ID) {
            return Err(Error::UnwrittenOutput {
                kernel: "merge",
                what: format!("neighbour {} of query {}", q % K, q / K),
            });
        }
        let s = self.s;
        let totals = s.clone_dtoh(&self.b.totals).during("cuMemcpyDtoH")?;
        let m = Total::ProbedLists.of(&totals);
        let pull_copy_seconds = if chosen == Policy::GpuPull {
            copy_seconds(&s.clone_dtoh(&self.b.work).during("cuMemcpyDtoH")?)
        } else {
            0.0
        };
        let probed = s.clone_dtoh(&self.b.probed).during("cuMemcpyDtoH")?;
        let probed_lists = &probed[..m.min(probed.len())];
        let ready = s.clone_dtoh(&self.b.readiness).during("cuMemcpyDtoH")?;
        let count = |v| {
            probed_lists
                .iter()
                .filter(|&&l| ready[l as usize] == v)
                .count()
        };
        Ok(SearchOutcome {
            arrived: count(READY_ARRIVED),
            went_ahead: count(READY_WENT_AHEAD),
            timed_out: count(READY_TIMED_OUT),
            requested: Total::WantedLists.of(&totals),
            gpu_seconds: timeline.seconds(Mark::BeforeCoarse, Mark::AfterMerge)?,
            scan_seconds: timeline.seconds(Mark::BeforeScan, Mark::AfterScan)?,
            items: Total::WorkItems.of(&totals),
            list_queries: s.clone_dtoh(&self.b.counts).during("cuMemcpyDtoH")?,
            needed_bytes: self.layout.bytes_of(probed_lists),
            probed_lists: m,
            pull_copy_seconds,
            dist,
            ids,
            policy: chosen,
            seconds,
            tiled: false,
        })
    }
}

/// Seconds from the pull's first copy warp's start to its last one's end, by the GPU's
/// clock, from the pull's work words.
pub(super) fn copy_seconds(work: &[u64]) -> f64 {
    let (start, end) = (
        work[PullWork::CopyStartNs as usize],
        work[PullWork::CopyEndNs as usize],
    );
    end.saturating_sub(start) as f64 / 1e9
}

/// The coarse step of `sh` on `s`: the probes into `b.probes`, from one coarse launch, or a
/// sliced one and the merge of its slices.
pub(super) fn launch_coarse(
    s: &Arc<CudaStream>,
    sh: Shape,
    b: &mut Buffers,
    centroids_q: &CudaSlice<f32>,
) -> Result<()> {
    let queries = U::prefix(&b.queries, sh.nq * sh.dim, s)?;
    let centroids = U::new(centroids_q, s);
    let per_block = ivf_kernels::coarse_per_block(sh.nq, sh.sms);
    let shape = ivf_kernels::CoarseShape {
        dim: sh.dim as u32,
        nlist: sh.nlist as u32,
        nprobe: sh.nprobe as u32,
        per_block: per_block as u32,
    };
    let cfg = ivf_kernels::coarse_grid(sh.nq, per_block, sh.slices);
    if sh.slices == 1 {
        let mut probes = UM::prefix(&mut b.probes, sh.pairs, s)?;
        let mut no_dist = UM::prefix(&mut b.coarse_partial_d, 0, s)?;
        return ivf_kernels::coarse::launch(
            s,
            cfg,
            &queries,
            &centroids,
            shape,
            &mut probes,
            &mut no_dist,
        );
    }
    let n = sh.pairs * sh.slices;
    let (mut ids, mut dist) = (
        UM::prefix(&mut b.coarse_partial, n, s)?,
        UM::prefix(&mut b.coarse_partial_d, n, s)?,
    );
    ivf_kernels::coarse::launch(s, cfg, &queries, &centroids, shape, &mut ids, &mut dist)?;
    let merge_cfg = LaunchConfig::for_len(sh.nq * 32, ivf_kernels::COARSE_THREADS);
    ivf_kernels::coarse_merge::launch(
        s,
        merge_cfg,
        &U::prefix(&b.coarse_partial_d, n, s)?,
        &U::prefix(&b.coarse_partial, n, s)?,
        shape.nprobe,
        &mut UM::prefix(&mut b.probes, sh.pairs, s)?,
    )
}

/// The merge of the candidates (`cand`: distances, ids, each pair's first candidate list)
/// for `sh`, into `out_d` and `out_i`.
pub(super) fn launch_merge(
    s: &Arc<CudaStream>,
    sh: Shape,
    (cand_d, cand_i, pair_cand_off): (&CudaSlice<f32>, &CudaSlice<u32>, &CudaSlice<u32>),
    out_d: &mut impl KernelSliceMut<f32, GpuMemory>,
    out_i: &mut impl KernelSliceMut<u32, GpuMemory>,
) -> Result<()> {
    let (cfg, shape) = ivf_kernels::merge_config(sh.nq, sh.nprobe, sh.sms);
    ivf_kernels::merge::launch(
        s,
        cfg,
        &U::prefix(cand_d, sh.items * K, s)?,
        &U::prefix(cand_i, sh.items * K, s)?,
        &U::prefix(pair_cand_off, sh.pairs + 1, s)?,
        shape,
        out_d,
        out_i,
    )
}
