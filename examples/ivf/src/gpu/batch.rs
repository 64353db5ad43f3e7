//! Small batches: one search of up to `capacity` queries as the same stream work, either
//! queued operation by operation ([`Submit::Launches`]) or replayed as one CUDA graph
//! ([`Submit::Graph`]): the queries' copy from pinned memory (and, pulling, the pull's
//! counters cleared), then the kernels (coarse, plan or plan_pairs, scan or pull-scan,
//! merge). The merge writes the neighbours straight into mapped host memory, which the host
//! poisons before each batch: no memsets or copies for the results.
//!
//! The graph is captured once per [`BatchSearch`], with its copy sized for the capacity;
//! when a batch has another size, the kernels' arguments and grids are updated in
//! the instantiated graph ([`lookahead::graph::Graph::update`]), not captured again. Only
//! policies whose search is stream work alone can be a graph: everything resident
//! ([`Policy::Faults`] after [`lookahead_uvm::PolicyBuffer::make_resident`]) and the
//! GPU-driven pull ([`Policy::GpuPull`]); the others need the host between kernels, and the
//! driver refuses prefetches and advice inside a capture
//! (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`, see `docs/graphs.md`).

use cudarc::driver::{result, sys, CudaStream};
use ivf_kernels::{HINT_NONE, K, PULL_COPY_EVERY_NTH_SM, SCAN_THREADS};
use lookahead::graph::Graph;
use lookahead::launch::LaunchConfig;
use lookahead::untracked::UntrackedMut as UM;
use lookahead::{DriverContext, Error, MappedBuffer, Result};
use lookahead_uvm::{Policy, RingQueue};

use super::buffers::Capacity;
use super::search::{Search, Shape, POISON_DIST, POISON_ID};
use super::{BuffersId, GpuIndex, SearchParams};
use crate::data::Vectors;

/// Rows of a scan work item in batches of at most [`FEW_PAIRS`] (query, list) pairs: the
/// largest of these that still gives about [`FEW_PAIRS_ITEMS`] items, else the last. The
/// full search's items (the index's `chunk_rows`, 512) suit large batches; a batch of a few
/// queries then has only a few dozen items, one warp each, and the scan takes as long as one
/// warp's walk through 512 rows (a dependent round trip to memory per 4 rows). Smaller items
/// spread the same rows over more warps; the neighbours do not change (candidates are
/// ordered by distance, then id), the merge has more candidate lists. Which sizes pay at
/// which batch size was measured with `ivf_latency` on an H100 (driver 580.159.04):
/// `docs/graphs.md` has the numbers, `results/ivf_latency.md` the run. The pull's batches
/// use them too: its cache counts copy chunks of 64 KiB per list and a list's scan waits
/// for the whole list, whatever the work items.
const FEW_PAIRS_CHUNK_ROWS: [u32; 3] = [64, 32, 16];

/// Work items a batch of few pairs aims for: about four warps per SM of an H100.
const FEW_PAIRS_ITEMS: usize = 512;

/// See [`FEW_PAIRS_CHUNK_ROWS`]; resident batches of at most this many pairs also plan with
/// `plan_pairs`, whose pair order gives up `plan`'s sharing of a list's reads between pairs.
const FEW_PAIRS: usize = 512;

/// How a batch's work reaches the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submit {
    /// Each copy, memset and kernel queued on its own (six or seven driver calls).
    Launches,
    /// One replay of the captured graph.
    Graph,
}

/// A captured graph, the buffers its addresses are of, and the batch size its kernel nodes
/// are set for.
struct Captured {
    graph: Graph,
    buffers: BuffersId,
    nq: usize,
}

/// The small-batch search of one index under one policy: mapped host buffers for queries
/// and results, and (after the first [`Submit::Graph`] batch) the captured graph.
pub struct BatchSearch {
    params: SearchParams,
    capacity: usize,
    dim: usize,
    queries: MappedBuffer<f32>,
    out_d: MappedBuffer<f32>,
    out_i: MappedBuffer<u32>,
    graph: Option<Captured>,
    queued_in: std::time::Duration,
}

impl BatchSearch {
    /// Batches of at most this many queries.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How long the host took to queue the last batch's work (its copies, memsets and
    /// launches, or the graph's replay, and a capture or update when there was one), before
    /// waiting for it.
    pub fn last_queue_time(&self) -> std::time::Duration {
        self.queued_in
    }

    /// Kernel nodes of the captured graph (empty before the first graph batch).
    pub fn graph_kernels(&self) -> Vec<&'static str> {
        self.graph
            .as_ref()
            .map_or_else(Vec::new, |c| c.graph.kernel_names())
    }
}

impl GpuIndex {
    /// A small-batch search of up to `capacity` queries under `params.policy`, which must
    /// be [`Policy::Faults`] (with the lists resident, see
    /// [`lookahead_uvm::PolicyBuffer::make_resident`]) or [`Policy::GpuPull`] (prepared
    /// here). Allocates the search buffers for `capacity`.
    pub fn batch_search(&mut self, capacity: usize, params: SearchParams) -> Result<BatchSearch> {
        if !matches!(params.policy, Policy::Faults | Policy::GpuPull) || capacity == 0 {
            return Err(Error::InvalidArgument {
                call: "GpuIndex::batch_search",
                reason: format!(
                    "small batches run under Faults (lists resident) or GpuPull, for 1 or more queries; got {} for {capacity}",
                    params.policy.name()
                ),
            });
        }
        self.lists.prepare(params.policy)?;
        let dim = self.layout.dim;
        // Room for every batch size: smaller ones scan smaller items (more of them) and
        // split the coarse step into more slices.
        let mut need = Capacity::of(&self.batch_shape(params, capacity)?);
        for nq in 1..capacity {
            need = need.covering(Capacity::of(&self.batch_shape(params, nq)?));
        }
        self.buffers(need)?;
        Ok(BatchSearch {
            params,
            capacity,
            dim,
            queries: MappedBuffer::new(&self.gpu, capacity * dim)?,
            out_d: MappedBuffer::new(&self.gpu, capacity * K)?,
            out_i: MappedBuffer::new(&self.gpu, capacity * K)?,
            graph: None,
            queued_in: std::time::Duration::ZERO,
        })
    }

    /// Searches `queries` (at most the capacity) with `batch`; returns `queries * K`
    /// distances and ids, nearest first per query, the same whichever way it is submitted.
    pub fn search_batch(
        &mut self,
        batch: &mut BatchSearch,
        queries: &Vectors,
        submit: Submit,
    ) -> Result<(Vec<f32>, Vec<u32>)> {
        let nq = queries.len();
        if nq == 0 || nq > batch.capacity || queries.dim != batch.dim {
            return Err(Error::InvalidArgument {
                call: "GpuIndex::search_batch",
                reason: format!(
                    "{nq} queries of dimension {} for a batch search of 1 to {} queries of dimension {}",
                    queries.dim, batch.capacity, batch.dim
                ),
            });
        }
        batch.queries.host_mut()[..queries.data.len()].copy_from_slice(&queries.data);
        batch.out_d.host_mut()[..nq * K].fill(f32::from_bits(POISON_DIST));
        batch.out_i.host_mut()[..nq * K].fill(POISON_ID);
        let queueing = std::time::Instant::now();
        match submit {
            Submit::Launches => self.batch_by_launches(batch, queries)?,
            Submit::Graph => self.batch_by_graph(batch, queries)?,
        }
        batch.queued_in = queueing.elapsed();
        self.stream.synchronize().during("cuStreamSynchronize")?;
        let (dist, ids) = (
            batch.out_d.host()[..nq * K].to_vec(),
            batch.out_i.host()[..nq * K].to_vec(),
        );
        if let Some(at) = ids.iter().position(|&i| i == POISON_ID) {
            return Err(Error::UnwrittenOutput {
                kernel: "merge",
                what: format!("neighbour {} of query {}", at % K, at / K),
            });
        }
        Ok((dist, ids))
    }

    /// The shape of a batch of `nq` queries: the index's work items, or smaller ones for few
    /// (query, list) pairs (see [`FEW_PAIRS_CHUNK_ROWS`]).
    fn batch_shape(&self, params: SearchParams, nq: usize) -> Result<Shape> {
        let shape = self.shape_of(nq, params, self.chunk_rows)?;
        self.few_pair_items(shape, params)
    }

    /// `shape` (with the index's work items) with smaller work items where it has few
    /// (query, list) pairs (see [`FEW_PAIRS_CHUNK_ROWS`]).
    pub(super) fn few_pair_items(&self, shape: Shape, params: SearchParams) -> Result<Shape> {
        if shape.pairs > FEW_PAIRS {
            return Ok(shape);
        }
        // The rows the batch probes, on average.
        let rows = shape.pairs * self.layout.len() / shape.nlist.max(1);
        let small = FEW_PAIRS_CHUNK_ROWS
            .into_iter()
            .find(|&r| rows / r as usize >= FEW_PAIRS_ITEMS)
            .unwrap_or(FEW_PAIRS_CHUNK_ROWS[FEW_PAIRS_CHUNK_ROWS.len() - 1]);
        if small >= self.chunk_rows {
            return Ok(shape);
        }
        self.shape_of(shape.nq, params, small)
    }

    fn batch_by_launches(&mut self, batch: &mut BatchSearch, queries: &Vectors) -> Result<()> {
        let shape = self.batch_shape(batch.params, queries.len())?;
        let scan_blocks = self.scan_capacity;
        let mut run = self.begin(shape);
        run.batch_inputs(&batch.queries, shape.nq, batch.params)?;
        // SAFETY: `search_batch` waits for the stream before the host touches the outputs.
        unsafe {
            run.batch_kernels(
                batch.params,
                scan_blocks,
                &mut batch.out_d,
                &mut batch.out_i,
            )
        }
    }

    fn batch_by_graph(&mut self, batch: &mut BatchSearch, queries: &Vectors) -> Result<()> {
        let shape = self.batch_shape(batch.params, queries.len())?;
        let (scan_blocks, id, cap) = (self.scan_capacity, self.buffers_id, batch.capacity);
        if batch.graph.as_ref().is_some_and(|c| c.buffers != id) {
            // The buffers were reallocated by a larger search: capture again.
            batch.graph = None;
        }
        let stream = self.stream.clone();
        let mut run = self.begin(shape);
        match &mut batch.graph {
            None => {
                let (out_d, out_i) = (&mut batch.out_d, &mut batch.out_i);
                let (graph, ()) = Graph::capture(&stream, || {
                    run.batch_inputs(&batch.queries, cap, batch.params)?;
                    // SAFETY: replays run before `search_batch` waits for the stream and
                    // reads the outputs; the graph is dropped with `batch`, its buffers'
                    // owner.
                    unsafe { run.batch_kernels(batch.params, scan_blocks, out_d, out_i) }
                })?;
                graph.upload()?;
                batch.graph = Some(Captured {
                    graph,
                    buffers: id,
                    nq: shape.nq,
                });
            }
            Some(c) if c.nq != shape.nq => {
                let (out_d, out_i) = (&mut batch.out_d, &mut batch.out_i);
                // SAFETY: the same buffers (checked above), with the new batch's prefixes;
                // the outputs as in the capture.
                let updated = unsafe {
                    c.graph
                        .update(|| run.batch_kernels(batch.params, scan_blocks, out_d, out_i))
                };
                if updated.is_err() {
                    // Another kernel sequence (the coarse step sliced or not): capture again.
                    batch.graph = None;
                    return self.batch_by_graph(batch, queries);
                }
                c.nq = shape.nq;
            }
            Some(_) => {}
        }
        let captured = batch.graph.as_ref().expect("captured above");
        // SAFETY: the graph's device addresses are of this index's current buffers (its
        // `BuffersId` matched) and its host addresses of `batch`'s pinned buffers, which
        // outlive the replay: `search_batch` waits for the stream before returning, and no
        // other stream writes these buffers.
        unsafe { captured.graph.replay() }
    }
}

impl Search<'_> {
    /// The first `rows` queries up from pinned memory; pulling, the pull's counters cleared.
    fn batch_inputs(
        &mut self,
        queries: &MappedBuffer<f32>,
        rows: usize,
        params: SearchParams,
    ) -> Result<()> {
        let (s, sh) = (self.s, self.shape);
        let q = UM::prefix(&mut self.b.queries, rows * sh.dim, s)?;
        copy_to_device(q.device_ptr(), &queries.host()[..rows * sh.dim], s)?;
        if params.policy == Policy::GpuPull {
            self.clear_pull_work()?;
        }
        Ok(())
    }

    /// Coarse, plan, scan (or pull-scan) and merge for the current shape; the merge writes
    /// the first `nq * K` entries of `out_d` and `out_i`.
    ///
    /// # Safety
    /// The host must not touch `out_d` and `out_i` until the stream (or the graph this is
    /// captured into, each replay) has finished this work.
    unsafe fn batch_kernels(
        &mut self,
        params: SearchParams,
        scan_blocks: u32,
        out_d: &mut MappedBuffer<f32>,
        out_i: &mut MappedBuffer<u32>,
    ) -> Result<()> {
        let pulling = params.policy == Policy::GpuPull;
        self.coarse()?;
        if pulling || self.shape.pairs > FEW_PAIRS {
            self.plan(RingQueue::disabled(), pulling)?;
        } else {
            self.plan_pairs()?;
        }
        let blocks = match params.max_blocks {
            0 => scan_blocks,
            n => n.min(scan_blocks),
        };
        let grid = LaunchConfig::new((blocks.max(1), 1, 1), (SCAN_THREADS, 1, 1));
        if pulling {
            let copy_every = match params.pull_copy_every {
                0 => PULL_COPY_EVERY_NTH_SM,
                n => n,
            };
            // A pull batch never waits for the host: lists it did not copy it reads over
            // the mapping at once.
            self.launch_pull_scan(grid, copy_every, 0)?;
        } else {
            self.scan(grid, HINT_NONE, RingQueue::disabled())?;
        }
        let words = self.shape.nq * K;
        // SAFETY: the caller's contract.
        let (mut d, mut i) =
            unsafe { (out_d.kernel_view_mut(words)?, out_i.kernel_view_mut(words)?) };
        self.merge_into(&mut d, &mut i)
    }
}

fn copy_to_device<T>(dst: sys::CUdeviceptr, src: &[T], s: &CudaStream) -> Result<()> {
    // SAFETY: the caller's device buffer holds `src.len()` elements; `src` is pinned memory
    // that outlives the copy (the batch search waits for its stream).
    unsafe { result::memcpy_htod_async(dst, src, s.cu_stream()) }.during("cuMemcpyHtoDAsync")
}
