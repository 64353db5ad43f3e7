//! Prefetching managed memory to a device or to the host (`cuMemPrefetchAsync_v2` with a
//! `CUmemLocation`, CUDA 12.2+), singly, as a list on one stream (optionally through
//! `cuMemPrefetchBatchAsync`, CUDA 12.8+), and through [`PrefetchEngine`]: many ranges
//! coalesced, cut into large pieces and issued from the threads of a [`PrefetchPool`], each
//! with its own stream, with completion reported through CUDA events.
//!
//! Why an engine: the driver does most of a prefetch's work inside the issuing call, on the
//! host, so one thread issuing small pieces moves data at a fraction of the interconnect's
//! rate, while large pieces from several threads reach it (H100 over PCIe Gen5, CUDA 13.0
//! driver: `results/host_bench.md`, explained in `docs/host-runtime.md`).

mod engine;
mod pool;

pub use engine::{plan, PrefetchEngine, PrefetchOptions, PrefetchTicket};
pub use pool::{PrefetchPool, Worker};

use cudarc::driver::{sys, CudaStream};

use crate::error::{check, Capability, Error, Result};
use crate::gpu::Gpu;
use crate::managed::{Location, ManagedBuffer};
use crate::range::ByteRange;

/// Whether `ptr` lies in a managed (`cuMemAllocManaged`) allocation. Unknown addresses
/// (host `malloc` memory, say) are reported as not managed.
pub fn is_managed(gpu: &Gpu, ptr: u64) -> Result<bool> {
    gpu.bind_to_thread()?;
    let mut managed: u32 = 0;
    // SAFETY: writes one unsigned int (the attribute's documented type).
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&mut managed as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
            ptr,
        )
    };
    match r {
        sys::cudaError_enum::CUDA_SUCCESS => Ok(managed != 0),
        sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE => Ok(false),
        e => Err(Error::Driver {
            call: "cuPointerGetAttribute",
            source: cudarc::driver::DriverError(e),
        }),
    }
}

/// Checks that the first and last byte of `range` are managed memory.
pub(crate) fn require_managed(gpu: &Gpu, range: ByteRange) -> Result<()> {
    for ptr in [range.start, range.end() - 1] {
        if !is_managed(gpu, ptr)? {
            return Err(Error::NotManagedMemory { ptr });
        }
    }
    Ok(())
}

pub(crate) fn require_location(
    gpu: &Gpu,
    location: Location,
    needed_by: &'static str,
) -> Result<()> {
    if let Location::Device(ordinal) = location {
        gpu.require(Capability::ConcurrentManagedAccess, needed_by)?;
        let count = Gpu::count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
    }
    Ok(())
}

/// Issues one `cuMemPrefetchAsync_v2` without checks. The context must be current.
pub(crate) fn issue(range: ByteRange, location: Location, stream: sys::CUstream) -> Result<()> {
    // SAFETY: plain driver call on an address range; the driver validates it.
    check("cuMemPrefetchAsync_v2", unsafe {
        sys::cuMemPrefetchAsync_v2(range.start, range.len as usize, location.to_cu(), 0, stream)
    })
}

/// Issues one `cuMemPrefetchBatchAsync` for all `ranges` to one location. The context
/// must be current and the driver CUDA 12.8 or newer.
pub(crate) fn issue_batch(
    ranges: &[ByteRange],
    location: Location,
    stream: sys::CUstream,
) -> Result<()> {
    if ranges.is_empty() {
        return Ok(());
    }
    let mut ptrs: Vec<sys::CUdeviceptr> = ranges.iter().map(|r| r.start).collect();
    let mut sizes: Vec<usize> = ranges.iter().map(|r| r.len as usize).collect();
    let mut locs = [location.to_cu()];
    let mut loc_idx = [0usize];
    // SAFETY: the arrays hold `ranges.len()` entries (pointers, sizes) and one location
    // applying from index 0, as the call documents; they outlive the call.
    check("cuMemPrefetchBatchAsync", unsafe {
        sys::cuMemPrefetchBatchAsync(
            ptrs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            ptrs.len(),
            locs.as_mut_ptr(),
            loc_idx.as_mut_ptr(),
            1,
            0,
            stream,
        )
    })
}

/// Prefetches one byte range of managed memory to `location` on `stream`, after checking
/// it is managed memory and the device can take it.
pub fn prefetch_range(
    gpu: &Gpu,
    range: ByteRange,
    location: Location,
    stream: &CudaStream,
) -> Result<()> {
    ByteRange::new(range.start, range.len)?;
    require_location(gpu, location, "prefetch to a device")?;
    require_managed(gpu, range)?;
    issue(range, location, stream.cu_stream())
}

/// Prefetches several ranges on one stream: one call per range, or one
/// `cuMemPrefetchBatchAsync` when `batch` is true (needs a 12.8+ driver). The batch call
/// rejects the legacy NULL stream (`CUDA_ERROR_INVALID_VALUE`, measured on driver 580), so
/// on the NULL stream (cudarc's default stream) the ranges go out one call each. Ranges are
/// issued as given (no coalescing; see [`PrefetchEngine`] for that).
pub fn prefetch_ranges(
    gpu: &Gpu,
    ranges: &[ByteRange],
    location: Location,
    stream: &CudaStream,
    batch: bool,
) -> Result<()> {
    require_location(gpu, location, "prefetch to a device")?;
    for r in ranges {
        ByteRange::new(r.start, r.len)?;
        require_managed(gpu, *r)?;
    }
    if batch && !stream.cu_stream().is_null() {
        gpu.require(Capability::BatchPrefetch, "prefetch_ranges(batch = true)")?;
        issue_batch(ranges, location, stream.cu_stream())
    } else {
        ranges
            .iter()
            .try_for_each(|r| issue(*r, location, stream.cu_stream()))
    }
}

/// [`prefetch_ranges`] (one call per range) without the per-range checks, each of which
/// costs two pointer-attribute queries: for callers on a hot path whose ranges the driver
/// may as well validate, such as a service serving kernels' requests. A range that is not
/// managed memory gets the driver's error. The context must be current on this thread.
pub fn prefetch_ranges_unchecked(
    ranges: &[ByteRange],
    location: Location,
    stream: &CudaStream,
) -> Result<()> {
    ranges
        .iter()
        .try_for_each(|r| issue(*r, location, stream.cu_stream()))
}

impl<T> ManagedBuffer<T> {
    /// Prefetches the whole buffer to `location` on `stream`.
    pub fn prefetch(&self, location: Location, stream: &CudaStream) -> Result<()> {
        prefetch_range(self.gpu(), self.byte_range(), location, stream)
    }

    /// Prefetches elements `range` to `location` on `stream`.
    pub fn prefetch_elements(
        &self,
        range: std::ops::Range<usize>,
        location: Location,
        stream: &CudaStream,
    ) -> Result<()> {
        prefetch_range(self.gpu(), self.elements(range)?, location, stream)
    }
}
