//! CUDA graphs of typed launches: capture what a closure queues on a stream (typed
//! `#[kernel]` launches, copies, memsets, prefetches) into a graph, replay it with one driver
//! call, and change its kernels' arguments between replays without capturing again.
//!
//! ```no_run
//! # fn demo(gpu: &lookahead::Gpu) -> lookahead::Result<()> {
//! use lookahead::graph::Graph;
//! let stream = gpu.context().new_stream().map_err(|e| lookahead::Error::Driver { call: "cuStreamCreate", source: e })?;
//! let (mut graph, ()) = Graph::capture(&stream, || {
//!     // typed launches on `stream`, e.g. kernels::step::launch(&stream, cfg, ...)?;
//!     Ok(())
//! })?;
//! // SAFETY: every allocation the captured work uses outlives the graph.
//! unsafe { graph.replay()? };
//! // The same launches, new arguments: each sets its kernel node instead of launching.
//! unsafe { graph.update(|| Ok(()))? };
//! # Ok(()) }
//! ```
//!
//! How the pieces meet: while a closure runs inside [`Graph::capture`] or [`Graph::update`],
//! the GPU launch path ([`crate::launch`]) asks `graph::recording` where each launch on the
//! graph's stream goes. During a capture it launches as usual (the driver records the launch
//! as a node) and notes the node and the kernel's name; the autotuner takes no measurement
//! then (its timing events would be captured too). During an update it launches nothing:
//! the *n*-th typed launch on the graph's stream sets the parameters (arguments, grid,
//! block, shared memory) of the *n*-th captured kernel node, which must run the same kernel
//! (`cuGraphExecKernelNodeSetParams`; the instantiated graph is kept).
//!
//! Which memory operations a graph can hold on CUDA 13 is in `docs/graphs.md`, measured.

pub(crate) mod recording;

use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{CudaGraph, CudaStream};

use crate::error::{check, DriverContext, Error, Result};
use recording::{finish, start, KernelNode, Recording};

/// An instantiated CUDA graph of the work queued on one stream during [`Graph::capture`].
///
/// The graph holds the device addresses its launches and copies were given, not borrows:
/// replaying it after one of those allocations was freed is undefined behaviour, which is
/// why [`Graph::replay`] is `unsafe`. Wrap a graph together with the memory it uses (as the
/// IVF example's `BatchSearch` does) to give callers a safe replay.
pub struct Graph {
    graph: CudaGraph,
    stream: Arc<CudaStream>,
    kernels: Vec<KernelNode>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("kernels", &self.kernel_names())
            .finish_non_exhaustive()
    }
}

impl Graph {
    /// Captures what `record` queues on `stream` (in thread-local capture mode, so other
    /// threads' driver calls are not affected) into a graph and instantiates it. `stream`
    /// must be one made with `CudaContext::new_stream`: the driver cannot capture the legacy
    /// default stream. Nothing
    /// runs on the GPU during the capture. Returns the graph and what `record` returned.
    ///
    /// Pass launch arguments through [`crate::untracked`]: their cudarc use tracking then
    /// goes to a stream outside the capture. A tracked `CudaSlice` argument makes the
    /// captured stream wait on an event recorded outside the capture, and the driver ends the
    /// capture with `CUDA_ERROR_STREAM_CAPTURE_ISOLATION` (returned here as an error).
    pub fn capture<R>(
        stream: &Arc<CudaStream>,
        record: impl FnOnce() -> Result<R>,
    ) -> Result<(Graph, R)> {
        if stream.cu_stream().is_null() {
            return Err(Error::InvalidArgument {
                call: "Graph::capture",
                reason: "the legacy default stream (Gpu::stream, CudaContext::default_stream) cannot be captured: capture a stream from CudaContext::new_stream".into(),
            });
        }
        let outside = stream.context().new_stream().during("cuStreamCreate")?;
        start(Recording::Capture {
            stream: stream.cu_stream(),
            kernels: Vec::new(),
            outside,
        })?;
        let began = stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .during("cuStreamBeginCapture");
        let recorded = began.and_then(|()| record());
        // End the capture whatever happened, so the stream is usable again.
        let ended = stream
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .during("cuStreamEndCapture/cuGraphInstantiate");
        let kernels = match finish() {
            Some(Recording::Capture { kernels, .. }) => kernels,
            _ => Vec::new(),
        };
        let value = recorded?;
        let empty = || Error::InvalidArgument {
            call: "Graph::capture",
            reason: "nothing was queued on the stream during the capture".into(),
        };
        let graph = Graph {
            graph: ended?.ok_or_else(empty)?,
            stream: stream.clone(),
            kernels,
        };
        if graph.node_count()? == 0 {
            return Err(empty());
        }
        Ok((graph, value))
    }

    /// Queues the whole graph on its stream (one `cuGraphLaunch`).
    ///
    /// # Safety
    /// Every allocation the captured work uses (kernel arguments, copy sources and
    /// destinations, memset targets) is still allocated, no host code reads or writes it
    /// until the stream is done with the replay, and work of other streams that writes it
    /// is ordered before the replay (the graph's launches carry no cudarc use tracking).
    pub unsafe fn replay(&self) -> Result<()> {
        self.graph.launch().during("cuGraphLaunch")
    }

    /// Uploads the graph's resources to the GPU now, so the first replay does not pay for it.
    pub fn upload(&self) -> Result<()> {
        self.graph.upload().during("cuGraphUpload")
    }

    /// The stream the graph was captured on and replays on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The kernels of the graph's kernel nodes, in the order they were launched.
    pub fn kernel_names(&self) -> Vec<&'static str> {
        self.kernels.iter().map(|k| k.kernel).collect()
    }

    /// Number of nodes of every kind (kernels, copies, memsets, ...).
    pub fn node_count(&self) -> Result<usize> {
        let mut n = 0usize;
        // SAFETY: a null node array asks only for the count.
        check("cuGraphGetNodes", unsafe {
            sys::cuGraphGetNodes(self.graph.cu_graph(), std::ptr::null_mut(), &mut n)
        })?;
        Ok(n)
    }

    /// Runs `record`, in which the same typed launches as during the capture, in the same
    /// order and on the graph's stream, set the parameters of the graph's kernel nodes
    /// instead of launching: new arguments, grid, block and shared memory for each, the
    /// instantiated graph kept. Nothing else `record` queues is affected, so memory
    /// operations keep their captured addresses and sizes.
    ///
    /// Fails, leaving the nodes updated so far changed, when a launch runs a different
    /// kernel than its node or when `record` launches fewer or more kernels than were
    /// captured.
    ///
    /// # Safety
    /// The new arguments obey [`Graph::replay`]'s contract for every later replay.
    pub unsafe fn update<R>(&mut self, record: impl FnOnce() -> Result<R>) -> Result<R> {
        start(Recording::Update {
            stream: self.stream.cu_stream(),
            exec: self.graph.cu_graph_exec(),
            kernels: self.kernels.clone(),
            next: 0,
        })?;
        let value = record();
        let updated = match finish() {
            Some(Recording::Update { next, .. }) => next,
            _ => 0,
        };
        let value = value?;
        if updated != self.kernels.len() {
            return Err(Error::InvalidArgument {
                call: "Graph::update",
                reason: format!(
                    "the update launched {updated} kernel(s); the graph has {} ({:?})",
                    self.kernels.len(),
                    self.kernel_names()
                ),
            });
        }
        Ok(value)
    }
}
