//! The tuner's measured launch: a launch of a `level = auto` kernel that the autotuner times
//! (`super::autotune`). The L2 is flushed first, outside the timing, so each candidate
//! starts from a cold cache whatever ran before it; a pair of CUDA events brackets the kernel
//! on its stream; the events go to the tuner that planned the launch, which reads them once
//! they have completed and never waits for them.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE;
use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

use super::autotune::Measure;
use super::driver::KernelLaunch;
use super::per_context;
use crate::error::{DriverContext, Result};

/// Queues `launch` timed for `measure`'s tuner: flush, start event, kernel, end event.
pub(super) fn launch(launch: &mut KernelLaunch<'_>, measure: Measure<'_>) -> Result<()> {
    let stream = launch.stream();
    let (start, end) = timing_events(stream)?;
    if measure.flush_l2 {
        flush_l2(stream)?;
    }
    start.record(stream).during("cuEventRecord")?;
    launch.queue()?;
    end.record(stream).during("cuEventRecord")?;
    (measure.tuner).launched(measure.key, measure.variant, Some((start, end)));
    Ok(())
}

/// Writes the L2 flush buffer of `stream`'s context on `stream` (made on first use), so
/// the next kernel there starts from a cold L2.
pub(super) fn flush_l2(stream: &CudaStream) -> Result<()> {
    per_context::with_flush_buffer(stream.context(), FlushBuffer::new, |buffer| {
        buffer.write(stream)
    })
}

fn timing_events(stream: &CudaStream) -> Result<(CudaEvent, CudaEvent)> {
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let ctx = stream.context();
    Ok((
        ctx.new_event(flags).during("cuEventCreate")?,
        ctx.new_event(flags).during("cuEventCreate")?,
    ))
}

/// Twice the L2's size of device memory, written before a measured launch so the kernel
/// starts from a cold L2; one per context (`super::per_context`), allocated at its first
/// measured launch. Plain `cuMemAlloc` memory rather than a cudarc `CudaSlice`, so that it
/// holds its context exactly once (the per-context store counts those references), written
/// on whichever stream the launch is on: what it holds never matters.
pub(super) struct FlushBuffer {
    ctx: Arc<CudaContext>,
    ptr: CUdeviceptr,
    bytes: usize,
}

impl FlushBuffer {
    fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let l2 = ctx
            .attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .during("cuDeviceGetAttribute(L2_CACHE_SIZE)")?;
        let bytes = 2 * (l2.max(1) as usize);
        ctx.bind_to_thread().during("cuCtxSetCurrent")?;
        // SAFETY: `ctx` is current; the memory is only ever written, by `write`.
        let ptr = unsafe { cudarc::driver::result::malloc_sync(bytes) }
            .during_alloc("cuMemAlloc (L2 flush buffer)", bytes)?;
        Ok(FlushBuffer {
            ctx: ctx.clone(),
            ptr,
            bytes,
        })
    }

    /// Queues a write of the whole buffer on `stream`, a stream of the buffer's context.
    fn write(&self, stream: &CudaStream) -> Result<()> {
        // SAFETY: `ptr` is `bytes` bytes of the stream's context, freed only on drop, after
        // the context's queued work is done.
        unsafe {
            cudarc::driver::result::memset_d8_async(self.ptr, 0, self.bytes, stream.cu_stream())
        }
        .during("cuMemsetD8Async (L2 flush)")
    }
}

impl Drop for FlushBuffer {
    fn drop(&mut self) {
        // Errors are kept in the context, as cudarc's own frees keep theirs.
        let ctx = &self.ctx;
        ctx.record_err(ctx.bind_to_thread());
        ctx.record_err(ctx.synchronize());
        // SAFETY: allocated by `new`, freed once, with no write of it still queued.
        ctx.record_err(unsafe { cudarc::driver::result::free_sync(self.ptr) });
    }
}
