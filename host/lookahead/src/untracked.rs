//! Kernel arguments that add no stream work after the launch, for kernels that wait on
//! other streams.
//!
//! A cudarc allocation passed to a launch has cudarc record an event on the launch stream
//! right after the kernel (its use tracking). That record, and any other work queued behind
//! a kernel, waits for the kernel to finish; and streams share a few hardware queues
//! (`CUDA_DEVICE_MAX_CONNECTIONS`, 8 by default), so work of *other* streams that lands in
//! the same hardware queue behind it waits too. For an ordinary kernel that is a short,
//! invisible delay. For a kernel that waits until another stream has done something (a
//! ready flag written by `lookahead-uvm`'s prefetch service), the other stream's work can
//! be stuck behind the very kernel that waits for it, until the kernel's waits time out:
//! measured on the H100 as GPU-driven requests that arrived only after the scan kernel of
//! an IVF search had finished.
//!
//! So a kernel that waits on other streams takes its slices through these wrappers, and
//! nothing is queued on its stream until it has finished (synchronize the stream first).
//! The wrappers pass the pointer and length only; ordering with other streams is the
//! caller's, as for every raw CUDA launch.
//!
//! ```no_run
//! # use lookahead::untracked::Untracked;
//! # fn f(s: &std::sync::Arc<cudarc::driver::CudaStream>, x: &cudarc::driver::CudaSlice<f32>) {
//! let x = Untracked::new(x, s); // then pass `&x` where the kernel takes `&[f32]`
//! # }
//! ```

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::error::{Error, Result};
use crate::launch::{DeviceMemory, GpuArgs, GpuMemory, KernelSlice, KernelSliceMut, ManagedMemory};
use crate::managed::ManagedBuffer;

fn check_prefix(len: usize, have: usize) -> Result<()> {
    if len > have {
        return Err(Error::InvalidRange {
            start: 0,
            len: len as u64,
            limit: have as u64,
            reason: "a kernel argument's prefix is longer than its allocation",
        });
    }
    Ok(())
}

/// A read-only device or managed allocation passed by pointer, with no event tracking.
#[derive(Debug, Clone, Copy)]
pub struct Untracked<'a, T> {
    ptr: u64,
    len: usize,
    _borrow: PhantomData<&'a [T]>,
}

/// A writable device allocation passed by pointer, with no event tracking.
#[derive(Debug)]
pub struct UntrackedMut<'a, T> {
    ptr: u64,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

/// A managed allocation passed by pointer, with no event tracking (for `ManagedSlice<T>`
/// parameters).
#[derive(Debug, Clone, Copy)]
pub struct UntrackedManaged<'a, T> {
    ptr: u64,
    len: usize,
    _borrow: PhantomData<&'a [T]>,
}

/// A writable managed allocation passed by pointer, with no event tracking (for
/// `ManagedSliceMut<T>` and `&mut [T]` parameters): how a graph writes into managed memory.
/// Host reads through [`ManagedBuffer::as_slice`] do not wait for such launches: synchronize
/// their stream first.
#[derive(Debug)]
pub struct UntrackedManagedMut<'a, T> {
    ptr: u64,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T> Untracked<'a, T> {
    /// `slice`, for launches on `stream`. cudarc orders the slice's earlier writes before
    /// work queued on `stream` from now on; later launches are ordered by the caller.
    pub fn new(slice: &'a CudaSlice<T>, stream: &CudaStream) -> Self {
        let outside = crate::graph::recording::tracking_stream(stream);
        let (ptr, _sync) = slice.device_ptr(outside.as_deref().unwrap_or(stream));
        Untracked {
            ptr,
            len: slice.len(),
            _borrow: PhantomData,
        }
    }

    /// The first `len` elements of `slice` (a buffer reused at several sizes), or
    /// [`Error::InvalidRange`] when it holds fewer.
    pub fn prefix(slice: &'a CudaSlice<T>, len: usize, stream: &CudaStream) -> Result<Self> {
        check_prefix(len, slice.len())?;
        Ok(Untracked {
            len,
            ..Self::new(slice, stream)
        })
    }

    /// The device address of the first element (for driver calls such as copies).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl<'a, T> UntrackedMut<'a, T> {
    /// `slice`, for launches on `stream` that write it (see [`Untracked::new`]).
    pub fn new(slice: &'a mut CudaSlice<T>, stream: &CudaStream) -> Self {
        let len = slice.len();
        let outside = crate::graph::recording::tracking_stream(stream);
        let (ptr, _sync) = slice.device_ptr_mut(outside.as_deref().unwrap_or(stream));
        UntrackedMut {
            ptr,
            len,
            _borrow: PhantomData,
        }
    }

    /// The first `len` elements of `slice`, or [`Error::InvalidRange`] when it holds fewer.
    pub fn prefix(slice: &'a mut CudaSlice<T>, len: usize, stream: &CudaStream) -> Result<Self> {
        check_prefix(len, slice.len())?;
        Ok(UntrackedMut {
            len,
            ..Self::new(slice, stream)
        })
    }

    /// The device address of the first element (for driver calls such as memsets).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl<'a, T: cudarc::driver::DeviceRepr> UntrackedManaged<'a, T> {
    /// All of `buffer`.
    pub fn new(buffer: &'a ManagedBuffer<T>) -> Self {
        UntrackedManaged {
            ptr: buffer.device_ptr(),
            len: buffer.len(),
            _borrow: PhantomData,
        }
    }
}

impl<'a, T: cudarc::driver::DeviceRepr> UntrackedManagedMut<'a, T> {
    /// All of `buffer`, borrowed mutably while the wrapper lives.
    pub fn new(buffer: &'a mut ManagedBuffer<T>) -> Self {
        UntrackedManagedMut {
            ptr: buffer.device_ptr(),
            len: buffer.len(),
            _borrow: PhantomData,
        }
    }
}

// SAFETY: the pointer addresses `len` elements of a live device allocation borrowed for 'a.
unsafe impl<T> KernelSlice<T, GpuMemory> for Untracked<'_, T> {
    fn kernel_len(&self) -> usize {
        self.len
    }
    fn bind<'b>(&'b self, _args: &mut GpuArgs<'b>) -> u64 {
        self.ptr
    }
}
// SAFETY: only constructed from cudarc device allocations.
unsafe impl<T> DeviceMemory for Untracked<'_, T> {}

// SAFETY: as for `Untracked`, borrowed mutably.
unsafe impl<T> KernelSliceMut<T, GpuMemory> for UntrackedMut<'_, T> {
    fn kernel_len(&self) -> usize {
        self.len
    }
    fn bind_mut<'b>(&'b mut self, _args: &mut GpuArgs<'b>) -> u64 {
        self.ptr
    }
}
// SAFETY: only constructed from cudarc device allocations.
unsafe impl<T> DeviceMemory for UntrackedMut<'_, T> {}

// SAFETY: the pointer addresses `len` elements of a live managed allocation borrowed for 'a.
unsafe impl<T> KernelSlice<T, GpuMemory> for UntrackedManaged<'_, T> {
    fn kernel_len(&self) -> usize {
        self.len
    }
    fn bind<'b>(&'b self, _args: &mut GpuArgs<'b>) -> u64 {
        self.ptr
    }
}
// SAFETY: only constructed from `ManagedBuffer`, which is `cuMemAllocManaged` memory.
unsafe impl<T> ManagedMemory for UntrackedManaged<'_, T> {}

// SAFETY: the pointer addresses `len` elements of a live managed allocation borrowed
// mutably for 'a.
unsafe impl<T> KernelSliceMut<T, GpuMemory> for UntrackedManagedMut<'_, T> {
    fn kernel_len(&self) -> usize {
        self.len
    }
    fn bind_mut<'b>(&'b mut self, _args: &mut GpuArgs<'b>) -> u64 {
        self.ptr
    }
}
// SAFETY: only constructed from `ManagedBuffer`, which is `cuMemAllocManaged` memory.
unsafe impl<T> ManagedMemory for UntrackedManagedMut<'_, T> {}
