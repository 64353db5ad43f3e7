//! The kernels' parameter structs: the index, a batch of queries, the scan's work plan, the
//! pull's cache and the candidates. Each is one `#[derive(KernelParams)]` parameter; the host
//! passes its `...Args` struct, whose views borrow the allocations for the launch.

use lookahead_device::prelude::*;

/// The index as the kernels read it: list `l` holds vectors `offsets[l]..offsets[l + 1]` of
/// `vectors` (list-major, `dim` floats each, in managed memory), with ids `ids[..]` in the
/// same order. The scan cuts lists into work items of `chunk_rows` vectors.
#[derive(KernelParams)]
#[repr(C)]
pub struct Index {
    /// The list vectors, list-major.
    pub vectors: ManagedSlice<f32>,
    /// `nlist + 1` offsets, in vectors.
    pub offsets: DeviceSlice<u64>,
    /// The original id of each stored vector.
    pub ids: DeviceSlice<u32>,
    /// Floats per vector.
    pub dim: u32,
    /// Vectors per scan work item.
    pub chunk_rows: u32,
}

/// A batch of queries and their probes: pair `p` is query `p / nprobe` with list
/// `probes[p]`.
#[derive(KernelParams)]
#[repr(C)]
pub struct Batch {
    /// `queries * dim` floats.
    pub queries: DeviceSlice<f32>,
    /// `queries * nprobe` list ids, from [`crate::coarse`].
    pub probes: DeviceSlice<u32>,
    /// Lists probed per query.
    pub nprobe: u32,
    /// [`crate::scan`]'s in-kernel hint: [`crate::HINT_NONE`] or [`crate::HINT_L2`] (not
    /// used by [`crate::pull_scan`]).
    pub hints: u32,
}

/// What [`crate::plan`] writes (see there for each array's meaning).
#[derive(KernelParams)]
#[repr(C)]
pub struct PlanOut {
    /// Per list: the pairs that probe it.
    pub counts: DeviceSliceMut<u32>,
    /// Per pair: its index among its list's pairs.
    pub slots: DeviceSliceMut<u32>,
    /// The probed lists, in list order ([`Total::ProbedLists`] of them).
    pub probed: DeviceSliceMut<u32>,
    /// The lists to ask for or to copy ([`Total::WantedLists`] of them).
    pub wanted: DeviceSliceMut<u32>,
    /// Per list: where its work items start.
    pub list_item_off: DeviceSliceMut<u32>,
    /// Per pair: where its candidate lists start (`pairs + 1` entries).
    pub pair_cand_off: DeviceSliceMut<u32>,
    /// Per work item: its pair.
    pub item_pair: DeviceSliceMut<u32>,
    /// Per work item: its chunk of the pair's list.
    pub item_chunk: DeviceSliceMut<u32>,
    /// [`TOTAL_WORDS`] counts, one per [`Total`].
    pub totals: DeviceSliceMut<u32>,
}

/// The words of [`PlanOut::totals`], by what each counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Total {
    /// The probed lists: the first entries of [`PlanOut::probed`].
    ProbedLists = 0,
    /// The scan's work items.
    WorkItems = 1,
    /// The lists asked for or to copy: the first entries of [`PlanOut::wanted`].
    WantedLists = 2,
    /// The pull's copy chunks.
    CopyChunks = 3,
}

impl Total {
    /// This count in `totals` (a copy of [`PlanOut::totals`]).
    pub fn of(self, totals: &[u32]) -> usize {
        totals[self as usize] as usize
    }
}

/// Words of [`PlanOut::totals`].
pub const TOTAL_WORDS: usize = 4;

/// What [`crate::plan_pairs`] writes (the work items of [`PlanOut`], in pair order).
#[derive(KernelParams)]
#[repr(C)]
pub struct PairPlanOut {
    /// Per pair: where its candidate lists start (`pairs + 1` entries).
    pub pair_cand_off: DeviceSliceMut<u32>,
    /// Per work item: its pair.
    pub item_pair: DeviceSliceMut<u32>,
    /// Per work item: its chunk of the pair's list.
    pub item_chunk: DeviceSliceMut<u32>,
    /// [`PlanOut::totals`]: the work items, and 0 for the rest.
    pub totals: DeviceSliceMut<u32>,
}

/// The work items [`crate::plan`] wrote, as the scans read them.
#[derive(KernelParams)]
#[repr(C)]
pub struct WorkPlan {
    /// Per work item: its pair.
    pub item_pair: DeviceSlice<u32>,
    /// Per work item: its chunk.
    pub item_chunk: DeviceSlice<u32>,
    /// [`PlanOut::totals`].
    pub totals: DeviceSlice<u32>,
    /// Per pair: where its candidate lists start.
    pub pair_cand_off: DeviceSlice<u32>,
}

/// What [`crate::tile_bounds`] reads of [`crate::plan`]'s output (see there), its units
/// of work, and every stored vector's squared norm.
#[derive(KernelParams)]
#[repr(C)]
pub struct TilePlan {
    /// Per list: the pairs that probe it.
    pub counts: DeviceSlice<u32>,
    /// Per list: where its work items start.
    pub list_item_off: DeviceSlice<u32>,
    /// Per work item: its pair.
    pub item_pair: DeviceSlice<u32>,
    /// The units, [`crate::UNIT_WORDS`] words each (see [`crate::tile_bounds`];
    /// [`crate::tile_work`] lists them from the plan's counts).
    pub units: DeviceSlice<u32>,
    /// Per stored vector (the order of [`Index::vectors`]): `|x|^2`.
    pub norms: DeviceSlice<f32>,
}

/// What [`crate::tile_work`] reads of [`crate::plan`]'s output.
#[derive(KernelParams)]
#[repr(C)]
pub struct TileWorkIn {
    /// The probed lists, in list order.
    pub probed: DeviceSlice<u32>,
    /// Per list: the pairs that probe it.
    pub counts: DeviceSlice<u32>,
    /// Per list: where its work items start.
    pub list_item_off: DeviceSlice<u32>,
    /// [`PlanOut::totals`].
    pub totals: DeviceSlice<u32>,
}

/// What [`crate::tile_work`] writes (see there).
#[derive(KernelParams)]
#[repr(C)]
pub struct TileWorkOut {
    /// The units of [`crate::tile_bounds`], [`crate::UNIT_WORDS`] words each.
    pub units: DeviceSliceMut<u32>,
    /// Per work item, then one past the last: where its bounds start ([`BoundItems`]).
    pub bound_off: DeviceSliceMut<u64>,
    /// Units, work items, bounds ([`crate::TILE_SUMMARY_WORDS`]).
    pub summary: DeviceSliceMut<u64>,
}

/// Work items `first..first + count`, the part of a batch's scan that one launch of
/// [`crate::tile_bounds`] and [`crate::bounded_scan`] covers, and where each item's bounds
/// are: item `it`'s, one per vector of its chunk, from `offsets[it] - offsets[first]` in
/// the launch's bounds buffer (`offsets` has an entry past the last item).
#[derive(KernelParams)]
#[repr(C)]
pub struct BoundItems {
    /// Per work item: its first bound, counted over the whole batch.
    pub offsets: DeviceSlice<u64>,
    /// The first work item.
    pub first: u32,
    /// Work items.
    pub count: u32,
}

/// The pull cache as [`crate::plan`] updates it: per list, the copy chunks complete
/// (`copied`), and where each wanted list's copy chunks are numbered from (`copy_first`,
/// `nlist + 1` entries).
#[derive(KernelParams)]
#[repr(C)]
pub struct PullPlan {
    /// Per list: copy chunks complete.
    pub copied: DeviceSliceMut<u32>,
    /// Per wanted list: its first copy chunk's number; after the last, their total.
    pub copy_first: DeviceSliceMut<u32>,
}

/// The GPU-driven pull as [`crate::pull_scan`] runs it: the device-memory `cache` (the
/// layout of [`Index::vectors`]), its per-list counts, the plan's wanted lists and chunk
/// numbering, and `work`, the kernel's counters ([`crate::PULL_WORK_WORDS`], zero at launch).
#[derive(KernelParams)]
#[repr(C)]
pub struct Pull {
    /// The copy of the lists, in device memory.
    pub cache: DeviceSliceMut<f32>,
    /// Per list: copy chunks complete (kept across launches).
    pub copied: DeviceSliceMut<u32>,
    /// The lists to copy (from [`PlanOut::wanted`]).
    pub wanted: DeviceSlice<u32>,
    /// Their chunk numbering (from [`PullPlan::copy_first`]).
    pub copy_first: DeviceSlice<u32>,
    /// Claim counters and the copy's GPU clock times, one word per [`PullWork`].
    pub work: DeviceSliceMut<u64>,
    /// The warps of every this-many-th SM copy.
    pub copy_every: u32,
    /// How long a warp waits for a list's copy before reading it over the interconnect.
    pub wait_us: u32,
}

/// The words of [`Pull::work`], by what each holds; the kernel needs them zero at launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum PullWork {
    /// Copy warps started: the first to claim it records [`PullWork::CopyStartNs`].
    CopyWarps = 0,
    /// The next copy chunk to claim.
    NextChunk = 1,
    /// The next work item to claim.
    NextItem = 2,
    /// The GPU's nanosecond clock when the first copy warp started.
    CopyStartNs = 3,
    /// The GPU's nanosecond clock when the last copy warp finished.
    CopyEndNs = 4,
}

/// What a scan writes: each list's readiness code, and the `K` nearest of each work item.
#[derive(KernelParams)]
#[repr(C)]
pub struct Candidates {
    /// Per list: [`crate::READY_ARRIVED`], [`crate::READY_WENT_AHEAD`] or
    /// [`crate::READY_TIMED_OUT`] (0 when not waited for).
    pub readiness: DeviceSliceMut<u32>,
    /// `items * K` distances.
    pub dist: DeviceSliceMut<f32>,
    /// `items * K` ids.
    pub ids: DeviceSliceMut<u32>,
}

/// The coarse step's sizes: floats per vector, centroids, probes per query, and queries per
/// block.
#[derive(Clone, Copy, Debug, DeviceCopy)]
#[repr(C)]
pub struct CoarseShape {
    /// Floats per vector.
    pub dim: u32,
    /// Centroids (lists).
    pub nlist: u32,
    /// Probes per query.
    pub nprobe: u32,
    /// Queries per block, 1 to [`crate::COARSE_QUERIES_PER_BLOCK`] (0 means that many): the
    /// grid's `x` must be the queries divided by it, rounded up ([`crate::coarse_grid`]).
    pub per_block: u32,
}

/// How [`crate::merge`] splits its work: probes per query, and whether each query gets a
/// block (non-zero) or a warp.
#[derive(Clone, Copy, Debug, DeviceCopy)]
#[repr(C)]
pub struct MergeShape {
    /// Probes per query.
    pub nprobe: u32,
    /// Non-zero: one block of up to [`crate::MERGE_WARPS`] warps per query.
    pub per_block: u32,
}
