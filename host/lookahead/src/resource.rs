//! Composable memory resources, after RMM: a plain managed allocator
//! ([`ManagedResource`]) and an adaptor that prefetches every new allocation to the device
//! ([`PrefetchResource`], like RMM's `PrefetchResourceAdaptor`). Use prefetch-on-allocate
//! when allocations are used by kernels right away; it saves the fault storm of first
//! touch on the GPU. Deallocation is `Drop` on the returned [`ManagedBuffer`].

use std::sync::Arc;

use cudarc::driver::{CudaStream, DeviceRepr};

use crate::error::Result;
use crate::gpu::Gpu;
use crate::managed::{AllocOptions, Location, ManagedBuffer};

/// Something that hands out managed buffers.
pub trait MemoryResource {
    /// Allocates `len` uninitialised elements of `T`.
    ///
    /// # Safety
    /// The contents are unspecified: `T` must be valid for any bytes, or be written first.
    unsafe fn allocate<T: DeviceRepr>(&self, len: usize) -> Result<ManagedBuffer<T>>;

    /// The GPU the resource allocates for.
    fn gpu(&self) -> &Gpu;
}

/// Plain managed memory (`cuMemAllocManaged`), with the crate's oversubscription guard.
#[derive(Debug, Clone)]
pub struct ManagedResource {
    gpu: Gpu,
    options: AllocOptions,
}

impl ManagedResource {
    /// A resource allocating on `gpu` with default options (never oversubscribe).
    pub fn new(gpu: &Gpu) -> Self {
        Self::with_options(gpu, AllocOptions::default())
    }

    /// A resource allocating on `gpu` with `options`.
    pub fn with_options(gpu: &Gpu, options: AllocOptions) -> Self {
        ManagedResource {
            gpu: gpu.clone(),
            options,
        }
    }
}

impl MemoryResource for ManagedResource {
    unsafe fn allocate<T: DeviceRepr>(&self, len: usize) -> Result<ManagedBuffer<T>> {
        ManagedBuffer::uninit_with(&self.gpu, len, self.options)
    }

    fn gpu(&self) -> &Gpu {
        &self.gpu
    }
}

/// Wraps a resource and prefetches every allocation it returns to the resource's device
/// on a stream (the GPU's default stream unless given), like RMM's
/// `PrefetchResourceAdaptor`. Kernels queued on that stream afterwards find the pages
/// resident; other streams should synchronise with it first.
#[derive(Debug, Clone)]
pub struct PrefetchResource<R> {
    inner: R,
    stream: Arc<CudaStream>,
}

impl<R: MemoryResource> PrefetchResource<R> {
    /// Prefetch-on-allocate over `inner`, on the GPU's default stream.
    pub fn new(inner: R) -> Self {
        let stream = inner.gpu().stream().clone();
        PrefetchResource { inner, stream }
    }

    /// Prefetch-on-allocate over `inner`, on `stream`.
    pub fn with_stream(inner: R, stream: Arc<CudaStream>) -> Self {
        PrefetchResource { inner, stream }
    }

    /// The wrapped resource.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// The stream prefetches are queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl<R: MemoryResource> MemoryResource for PrefetchResource<R> {
    unsafe fn allocate<T: DeviceRepr>(&self, len: usize) -> Result<ManagedBuffer<T>> {
        let buf = self.inner.allocate::<T>(len)?;
        let device = Location::Device(self.inner.gpu().ordinal());
        buf.prefetch(device, &self.stream)?;
        Ok(buf)
    }

    fn gpu(&self) -> &Gpu {
        self.inner.gpu()
    }
}
