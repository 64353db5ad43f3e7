//! Graph capture and update, as a launch sees them: while [`super::Graph::capture`] or
//! [`super::Graph::update`] runs a closure on this thread, a typed launch on the graph's
//! stream asks [`route`] where it goes. During a capture it launches (the driver records the
//! launch as a node) untimed, and notes the node and the kernel's name; during an update it
//! sets the next captured kernel node's parameters instead of launching.
//!
//! Why a thread-local: the closure launches through the ordinary launchers, whose target is
//! the cudarc stream itself (`launch(&stream, cfg, ...)`), a type that carries no state of
//! ours; and a stream capture takes everything queued on the stream (copies, memsets, other
//! libraries' work), so the closure's code names the stream, not a recorder. The driver's
//! capture mode is per thread too (`CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`). So the recording
//! is found from the stream, on the thread that runs the closure, once per launch.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUgraphNode, CUstream};
use cudarc::driver::CudaStream;

use crate::error::{check, Error, Result};
use crate::launch::driver::KernelLaunch;

/// A kernel node of a captured graph: which kernel it runs.
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelNode {
    pub(super) kernel: &'static str,
    node: CUgraphNode,
}

/// What the launch path does while a closure of [`super::Graph`] runs on the current thread.
pub(super) enum Recording {
    Capture {
        stream: CUstream,
        kernels: Vec<KernelNode>,
        /// A stream outside the capture, where cudarc's use tracking of the captured
        /// launches' arguments goes (see [`tracking_stream`]).
        outside: Arc<CudaStream>,
    },
    Update {
        stream: CUstream,
        exec: sys::CUgraphExec,
        kernels: Vec<KernelNode>,
        next: usize,
    },
}

thread_local! {
    static RECORDING: RefCell<Option<Recording>> = const { RefCell::new(None) };
}

/// Starts `recording` on this thread; refused while another runs.
pub(super) fn start(recording: Recording) -> Result<()> {
    RECORDING.with(|r| {
        let mut r = r.borrow_mut();
        if r.is_some() {
            return Err(Error::InvalidArgument {
                call: "Graph::capture/update",
                reason: "a capture or update is already running on this thread; they do not nest"
                    .into(),
            });
        }
        *r = Some(recording);
        Ok(())
    })
}

/// Ends this thread's recording and returns it.
pub(super) fn finish() -> Option<Recording> {
    RECORDING.with(|r| r.borrow_mut().take())
}

/// Where a launch goes.
pub(crate) enum Route<'r> {
    /// No capture or update of the launch's stream runs on this thread: launch.
    Launch,
    /// A capture of the stream: launch untimed, then [`CapturedNodes::note`] the node.
    Capture(CapturedNodes<'r>),
    /// An update of a graph captured on the stream: [`NodeUpdate::set`] instead of launching.
    Update(NodeUpdate<'r>),
}

/// The kernel nodes a capture has noted so far.
pub(crate) struct CapturedNodes<'r> {
    kernels: &'r mut Vec<KernelNode>,
}

/// The next kernel node an update sets.
pub(crate) struct NodeUpdate<'r> {
    exec: sys::CUgraphExec,
    kernels: &'r [KernelNode],
    next: &'r mut usize,
}

/// Runs `launch` with the route of a launch on `stream` from this thread.
pub(crate) fn route<R>(stream: &CudaStream, launch: impl FnOnce(Route<'_>) -> R) -> R {
    RECORDING.with(|r| {
        let mut r = r.borrow_mut();
        match &mut *r {
            Some(Recording::Capture {
                stream: s, kernels, ..
            }) if *s == stream.cu_stream() => launch(Route::Capture(CapturedNodes { kernels })),
            Some(Recording::Update {
                stream: s,
                exec,
                kernels,
                next,
            }) if *s == stream.cu_stream() => launch(Route::Update(NodeUpdate {
                exec: *exec,
                kernels,
                next,
            })),
            _ => {
                drop(r);
                launch(Route::Launch)
            }
        }
    })
}

/// During a capture of `stream` on this thread, a stream outside the capture for cudarc's
/// use tracking of kernel arguments ([`crate::untracked`]): cudarc makes the launch stream
/// wait for an allocation's last write event, and a wait on an event recorded outside the
/// capture ends it (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`). Ordering the replay after those
/// writes is the caller's, as [`super::Graph::replay`] says.
pub(crate) fn tracking_stream(stream: &CudaStream) -> Option<Arc<CudaStream>> {
    RECORDING.with(|r| match &*r.borrow() {
        Some(Recording::Capture {
            stream: s, outside, ..
        }) if *s == stream.cu_stream() => Some(outside.clone()),
        _ => None,
    })
}

impl CapturedNodes<'_> {
    /// After a launch of `kernel` on `stream` was captured: notes the kernel node it added.
    pub(crate) fn note(&mut self, kernel: &'static str, stream: &CudaStream) -> Result<()> {
        let node = last_captured_node(stream.cu_stream())?;
        self.kernels.push(KernelNode { kernel, node });
        Ok(())
    }
}

/// The node the capture of `stream` added last (the one its next work will depend on).
fn last_captured_node(stream: CUstream) -> Result<CUgraphNode> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let (mut deps, mut edges, mut n): (*const CUgraphNode, *const sys::CUgraphEdgeData, usize) =
        (std::ptr::null(), std::ptr::null(), 0);
    // SAFETY: out-pointers to locals; the dependency array is the driver's, read at once.
    check("cuStreamGetCaptureInfo", unsafe {
        sys::cuStreamGetCaptureInfo_v3(
            stream,
            &mut status,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut deps,
            &mut edges,
            &mut n,
        )
    })?;
    if n != 1 || deps.is_null() {
        return Err(Error::InvalidArgument {
            call: "Graph::capture",
            reason: format!("the captured launch left {n} dependencies instead of one node"),
        });
    }
    // SAFETY: the driver returned `n` (= 1) nodes at `deps`.
    Ok(unsafe { *deps })
}

impl NodeUpdate<'_> {
    /// Sets the next kernel node's parameters to `launch`'s, which must run the node's
    /// kernel (`cuGraphExecKernelNodeSetParams`).
    pub(crate) fn set(&mut self, launch: &mut KernelLaunch<'_>) -> Result<()> {
        let (kernel, next) = (launch.kernel(), *self.next);
        let Some(node) = self.kernels.get(next) else {
            return Err(Error::InvalidArgument {
                call: "Graph::update",
                reason: format!(
                    "launch {} (`{kernel}`) has no kernel node: the graph has {}",
                    next + 1,
                    self.kernels.len()
                ),
            });
        };
        if node.kernel != kernel {
            return Err(Error::InvalidArgument {
                call: "Graph::update",
                reason: format!(
                    "launch {} runs `{kernel}`, but its node runs `{}`: launch the kernels in the captured order",
                    next + 1,
                    node.kernel
                ),
            });
        }
        launch.opt_in_shared_mem()?;
        let params = launch.node_params();
        // SAFETY: `node` is a kernel node of the graph `exec` was instantiated from; the
        // driver copies the parameter values before returning.
        check("cuGraphExecKernelNodeSetParams", unsafe {
            sys::cuGraphExecKernelNodeSetParams_v2(self.exec, node.node, &params)
        })
        .map_err(|e| match e {
            Error::Driver { source, .. } => Error::Launch { kernel, source },
            other => other,
        })?;
        *self.next += 1;
        Ok(())
    }
}
