//! Page-locked host memory mapped into the GPU's address space (`cuMemHostAlloc` with
//! `CU_MEMHOSTALLOC_DEVICEMAP`): the host reads and writes it as a slice, kernels as a slice
//! argument, over the interconnect.
//!
//! For small inputs and results next to short kernels it replaces a copy: a kernel that
//! writes a batch's few hundred bytes of results straight into host memory saves the copy's
//! stream operation (a graph node or a driver call) and the wait for it. Large or repeatedly
//! read data belongs in device memory: every access crosses the interconnect.
//!
//! Not cudarc's `PinnedHostSlice`: its accessors synchronise an event, which the driver
//! refuses while a stream is being captured into a graph
//! (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`). Here the ordering is the caller's, which is why
//! the kernel views are `unsafe` to make.
//!
//! ```no_run
//! # fn f(gpu: &lookahead::Gpu) -> lookahead::Result<()> {
//! let mut out = lookahead::mapped::MappedBuffer::<u32>::new(gpu, 1024)?;
//! out.host_mut().fill(u32::MAX);
//! // SAFETY: the host touches `out` again only after the stream has finished the launch.
//! let mut view = unsafe { out.kernel_view_mut(1024)? };
//! // ... launch a kernel with `&mut view` for a `&mut [u32]` parameter, synchronise ...
//! # drop(view);
//! let results = out.host();
//! # let _ = results; Ok(()) }
//! ```

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::sys;

use crate::error::{byte_size, check, Error, Result};
use crate::launch::{GpuArgs, GpuMemory, KernelSlice, KernelSliceMut};
use crate::Gpu;

/// `len` elements of `T` in page-locked host memory that kernels on the GPU it was made for
/// can read and write.
pub struct MappedBuffer<T> {
    host: *mut T,
    device: u64,
    len: usize,
    gpu: Gpu,
}

// SAFETY: the buffer owns its allocation; shared access is through `&self` (reads) and
// exclusive through `&mut self`, as for a `Vec<T>`.
unsafe impl<T: Send> Send for MappedBuffer<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for MappedBuffer<T> {}

impl<T: Copy + Default> MappedBuffer<T> {
    /// `len` elements, each `T::default()`, mapped for `gpu`.
    pub fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        // At least one byte: the driver refuses empty allocations.
        let bytes = byte_size::<T>(len)?.max(1);
        gpu.bind_to_thread()?;
        let mut host: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one pointer; the allocation is freed in `drop`.
        let r = unsafe { sys::cuMemHostAlloc(&mut host, bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP) };
        r.result()
            .map_err(|source| Error::from_driver("cuMemHostAlloc", source, bytes))?;
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` was allocated with DEVICEMAP just above.
        let mapped = check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0)
        });
        if let Err(e) = mapped {
            // SAFETY: allocated above and not shared yet.
            unsafe { sys::cuMemFreeHost(host) };
            return Err(e);
        }
        let host = host as *mut T;
        // SAFETY: `len` elements were just allocated (page-aligned); `T: Copy` has no drop.
        unsafe { std::slice::from_raw_parts_mut(host, len).fill(T::default()) };
        Ok(MappedBuffer {
            host,
            device,
            len,
            gpu: gpu.clone(),
        })
    }
}

impl<T> MappedBuffer<T> {
    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, as the host sees them. Work that writes the buffer through a kernel
    /// view must have finished (the view's contract).
    pub fn host(&self) -> &[T] {
        // SAFETY: `len` initialised elements, alive as long as `self`; no kernel writes
        // them now (the views' safety contract).
        unsafe { std::slice::from_raw_parts(self.host, self.len) }
    }

    /// The elements, for the host to write. Work that reads or writes the buffer through a
    /// kernel view must have finished (the view's contract).
    pub fn host_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `host`, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.len) }
    }

    /// The GPU address of the first element (for driver calls such as copies).
    pub fn device_ptr(&self) -> u64 {
        self.device
    }

    /// The first `len` elements as a read-only kernel argument, or
    /// [`Error::InvalidRange`] when the buffer holds fewer.
    ///
    /// # Safety
    /// The launches that take the view read the buffer after this call returns, while
    /// nothing borrows it: until the stream they run on has finished them, the host must
    /// not write the buffer (through [`MappedBuffer::host_mut`]) nor drop it.
    pub unsafe fn kernel_view(&self, len: usize) -> Result<MappedView<'_, T>> {
        self.check_len(len)?;
        Ok(MappedView {
            ptr: self.device,
            len,
            _borrow: PhantomData,
        })
    }

    /// The first `len` elements as a writable kernel argument, or
    /// [`Error::InvalidRange`] when the buffer holds fewer.
    ///
    /// # Safety
    /// As for [`MappedBuffer::kernel_view`], and the host must not read the buffer either
    /// (through [`MappedBuffer::host`]) until the launches that write it have finished.
    pub unsafe fn kernel_view_mut(&mut self, len: usize) -> Result<MappedViewMut<'_, T>> {
        self.check_len(len)?;
        Ok(MappedViewMut {
            ptr: self.device,
            len,
            _borrow: PhantomData,
        })
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len > self.len {
            return Err(Error::InvalidRange {
                start: 0,
                len: len as u64,
                limit: self.len as u64,
                reason: "a kernel view longer than its mapped buffer",
            });
        }
        Ok(())
    }
}

impl<T> Drop for MappedBuffer<T> {
    fn drop(&mut self) {
        let _ = self.gpu.bind_to_thread();
        // SAFETY: allocated by `cuMemHostAlloc` in `new`; no work uses it any more (the
        // views' safety contract).
        unsafe { sys::cuMemFreeHost(self.host as *mut c_void) };
    }
}

impl<T> std::fmt::Debug for MappedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedBuffer")
            .field("len", &self.len)
            .field("device_ptr", &format_args!("{:#x}", self.device))
            .finish()
    }
}

/// A read-only kernel argument over a [`MappedBuffer`] (see [`MappedBuffer::kernel_view`]).
#[derive(Debug, Clone, Copy)]
pub struct MappedView<'a, T> {
    ptr: u64,
    len: usize,
    _borrow: PhantomData<&'a [T]>,
}

/// A writable kernel argument over a [`MappedBuffer`] (see
/// [`MappedBuffer::kernel_view_mut`]).
#[derive(Debug)]
pub struct MappedViewMut<'a, T> {
    ptr: u64,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: `len` elements of a live mapped allocation, which the GPU can address; the
// host-side ordering is the contract of `kernel_view`.
unsafe impl<T> KernelSlice<T, GpuMemory> for MappedView<'_, T> {
    fn kernel_len(&self) -> usize {
        self.len
    }
    fn bind<'b>(&'b self, _args: &mut GpuArgs<'b>) -> u64 {
        self.ptr
    }
}

// SAFETY: as for `MappedView`, borrowed mutably (the contract of `kernel_view_mut`).
unsafe impl<T> KernelSliceMut<T, GpuMemory> for MappedViewMut<'_, T> {
    fn kernel_len(&self) -> usize {
        self.len
    }
    fn bind_mut<'b>(&'b mut self, _args: &mut GpuArgs<'b>) -> u64 {
        self.ptr
    }
}
