//! Typed managed (Unified Memory) buffers on cudarc's [`UnifiedSlice`], sub-range views,
//! host access, kernel arguments, and the oversubscription guard.
//!
//! # Never oversubscribe by default
//! Every managed allocation first checks that it fits in the device's free memory less the
//! bytes already promised to live managed buffers of this process on that device (and a
//! 256 MiB headroom for the driver). Pages of a managed buffer that live on the host do not
//! show up in the device's used memory, so without the promise book-keeping two large
//! buffers could each pass a plain free-memory check and oversubscribe together once
//! prefetched. Resident pages are counted twice (as used and as promised): the guard errs
//! on the safe side. Opt in with [`Gpu::allow_oversubscription`] or
//! [`AllocOptions::allow_oversubscription`].

use std::ops::Range;
use std::sync::Mutex;

use cudarc::driver::{
    sys, DeviceRepr, LaunchArgs, PushKernelArg, UnifiedSlice, UnifiedView, UnifiedViewMut,
    ValidAsZeroBits,
};

use crate::error::{DriverContext, Error, Result};
use crate::gpu::Gpu;
use crate::launch::{
    bind_read, bind_write, GpuArgs, GpuMemory, KernelSlice, KernelSliceMut, ManagedMemory,
};
use crate::range::{element_range, ByteRange};

/// Bytes kept free for the driver and contexts when checking a managed allocation.
pub const OVERSUBSCRIPTION_HEADROOM: usize = 256 << 20;

/// Managed bytes promised to live buffers, per device ordinal.
static PROMISED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Where managed pages should go (prefetch) or prefer to live (advice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// GPU memory of the device with this ordinal.
    Device(usize),
    /// Host memory (the driver's default host location).
    Host,
}

impl Location {
    /// The driver's `CUmemLocation` for this location.
    pub fn to_cu(self) -> sys::CUmemLocation {
        match self {
            Location::Device(ordinal) => sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: ordinal as i32,
            },
            Location::Host => sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
                id: 0,
            },
        }
    }

    /// Decodes the legacy device-id encoding of range attributes: a device ordinal, `-1`
    /// (`CU_DEVICE_CPU`) for the host, `-2` (`CU_DEVICE_INVALID`) for none.
    pub fn from_device_id(id: i32) -> Option<Location> {
        match id {
            -1 => Some(Location::Host),
            id if id >= 0 => Some(Location::Device(id as usize)),
            _ => None,
        }
    }
}

/// Options for a managed allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AllocOptions {
    /// Allow the allocation even when it does not fit in the device's free memory. Off by
    /// default; also on when the [`Gpu`] handle has [`Gpu::allow_oversubscription`].
    pub allow_oversubscription: bool,
}

/// A promise of managed bytes on one device; returned to the pool on drop.
#[derive(Debug)]
struct Promise {
    ordinal: usize,
    bytes: usize,
}

impl Promise {
    fn take(gpu: &Gpu, bytes: usize, allow: bool) -> Result<Promise> {
        let mut promised = PROMISED.lock().unwrap_or_else(|p| p.into_inner());
        let ordinal = gpu.ordinal();
        if promised.len() <= ordinal {
            promised.resize(ordinal + 1, 0);
        }
        let (free, _) = gpu.memory_info()?;
        let available = free
            .saturating_sub(promised[ordinal])
            .saturating_sub(OVERSUBSCRIPTION_HEADROOM);
        if !allow && bytes > available {
            return Err(Error::OutOfMemory {
                during: "managed allocation (refused before cuMemAllocManaged)",
                requested: bytes,
                available,
            });
        }
        promised[ordinal] += bytes;
        Ok(Promise { ordinal, bytes })
    }
}

impl Drop for Promise {
    fn drop(&mut self) {
        let mut promised = PROMISED.lock().unwrap_or_else(|p| p.into_inner());
        promised[self.ordinal] = promised[self.ordinal].saturating_sub(self.bytes);
    }
}

/// Managed bytes currently promised to live [`ManagedBuffer`]s on device `ordinal`.
pub fn promised_managed_bytes(ordinal: usize) -> usize {
    let promised = PROMISED.lock().unwrap_or_else(|p| p.into_inner());
    promised.get(ordinal).copied().unwrap_or(0)
}

/// A typed managed-memory allocation (`cuMemAllocManaged`, attached globally): one pointer
/// valid on the host and on every GPU. Freed on drop.
///
/// A `#[kernel]` launcher takes `&buf` for a `&[T]` or `ManagedSlice<T>` parameter and
/// `&mut buf` for a `&mut [T]` or `ManagedSliceMut<T>` one (so do cudarc launches,
/// `.arg(&buf)`); such kernels are tracked: host access through [`ManagedBuffer::as_slice`]
/// waits for them. When you pass [`ManagedBuffer::device_ptr`] as a raw address instead,
/// synchronize before touching the data on the host.
#[derive(Debug)]
pub struct ManagedBuffer<T> {
    slice: UnifiedSlice<T>,
    ptr: u64,
    gpu: Gpu,
    _promise: Promise,
}

impl<T: DeviceRepr> ManagedBuffer<T> {
    /// Allocates `len` elements without initialising them, refusing oversubscription
    /// unless `gpu` allows it.
    ///
    /// # Safety
    /// The contents are unspecified bytes (zero in practice, not guaranteed): `T` must be
    /// valid for them, or you must write before reading.
    pub unsafe fn uninit(gpu: &Gpu, len: usize) -> Result<Self> {
        Self::uninit_with(gpu, len, AllocOptions::default())
    }

    /// [`ManagedBuffer::uninit`] with options.
    ///
    /// # Safety
    /// As for [`ManagedBuffer::uninit`].
    pub unsafe fn uninit_with(gpu: &Gpu, len: usize, options: AllocOptions) -> Result<Self> {
        let bytes = crate::error::byte_size::<T>(len)?;
        if bytes == 0 {
            return Err(Error::InvalidRange {
                start: 0,
                len: 0,
                limit: 0,
                reason: "empty allocation (zero bytes)",
            });
        }
        gpu.require(
            crate::error::Capability::ManagedMemory,
            "ManagedBuffer allocation",
        )?;
        let allow = options.allow_oversubscription || gpu.oversubscription_allowed();
        let promise = Promise::take(gpu, bytes, allow)?;
        gpu.bind_to_thread()?;
        let slice = gpu
            .context()
            .alloc_unified::<T>(len, true)
            .during_alloc("cuMemAllocManaged", bytes)?;
        let ptr = unified_base(&slice);
        Ok(ManagedBuffer {
            slice,
            ptr,
            gpu: gpu.clone(),
            _promise: promise,
        })
    }
}

impl<T: DeviceRepr + ValidAsZeroBits> ManagedBuffer<T> {
    /// Allocates `len` zeroed elements. The zeroing is done by the CPU, so every page starts
    /// host-resident.
    pub fn zeroed(gpu: &Gpu, len: usize) -> Result<Self> {
        Self::zeroed_with(gpu, len, AllocOptions::default())
    }

    /// [`ManagedBuffer::zeroed`] with options.
    pub fn zeroed_with(gpu: &Gpu, len: usize, options: AllocOptions) -> Result<Self> {
        // SAFETY: every byte is written below before the buffer is handed out, and all-zero
        // bytes are a valid `T` (`ValidAsZeroBits`).
        let mut buf = unsafe { Self::uninit_with(gpu, len, options)? };
        let ptr = buf
            .slice
            .as_mut_slice()
            .during("cuEventSynchronize")?
            .as_mut_ptr();
        // SAFETY: `ptr` points to `len` elements of host-accessible managed memory.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(buf)
    }

    /// Allocates a buffer holding a copy of `data` (written by the CPU: pages start on the host).
    pub fn from_slice(gpu: &Gpu, data: &[T]) -> Result<Self>
    where
        T: Copy,
    {
        // SAFETY: every element is written before the buffer is handed out.
        let mut buf = unsafe { Self::uninit(gpu, data.len())? };
        buf.slice
            .as_mut_slice()
            .during("cuEventSynchronize")?
            .copy_from_slice(data);
        Ok(buf)
    }

    /// The contents, read on the host (waits for tracked kernels using the buffer). Reading
    /// device-resident pages migrates them back to the host.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.wait_for_kernels()?;
        self.slice.as_slice().during("cuEventSynchronize")
    }

    /// The contents, writable on the host (waits for tracked kernels using the buffer).
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.wait_for_kernels()?;
        self.slice.as_mut_slice().during("cuEventSynchronize")
    }

    /// cudarc records each launch's use of the buffer in its event only once the context
    /// has streams of its own; until then every launch is on the default stream and the
    /// event says nothing, so the host waits for the context (found on an H100: a histogram
    /// read back while its kernel still ran, every bin wrong).
    fn wait_for_kernels(&self) -> Result<()> {
        let ctx = self.gpu.context();
        if !ctx.is_managing_stream_synchronization() {
            ctx.synchronize().during("cuCtxSynchronize")?;
        }
        Ok(())
    }

    /// Copies `data` into the buffer from element `offset` on.
    pub fn copy_from_host(&mut self, offset: usize, data: &[T]) -> Result<()>
    where
        T: Copy,
    {
        let len = self.len();
        let end =
            offset
                .checked_add(data.len())
                .filter(|e| *e <= len)
                .ok_or(Error::InvalidRange {
                    start: offset as u64,
                    len: data.len() as u64,
                    limit: len as u64,
                    reason: "copy extends past the end of the buffer",
                })?;
        self.as_mut_slice()?[offset..end].copy_from_slice(data);
        Ok(())
    }

    /// A copy of the contents in a `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>>
    where
        T: Copy,
    {
        Ok(self.as_slice()?.to_vec())
    }
}

impl<T> ManagedBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// Whether the buffer has no elements (never true: empty allocations are refused).
    pub fn is_empty(&self) -> bool {
        self.slice.is_empty()
    }

    /// Size in bytes.
    pub fn num_bytes(&self) -> usize {
        self.slice.num_bytes()
    }

    /// The unified address of the first element (valid on host and device).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    fn base(&self) -> u64 {
        self.ptr
    }

    /// The whole buffer as a byte range.
    pub fn byte_range(&self) -> ByteRange {
        ByteRange {
            start: self.base(),
            len: self.num_bytes() as u64,
        }
    }

    /// Elements `range` as a byte range, bounds-checked.
    pub fn elements(&self, range: Range<usize>) -> Result<ByteRange> {
        if range.end < range.start {
            return Err(Error::InvalidRange {
                start: range.start as u64,
                len: 0,
                limit: self.len() as u64,
                reason: "range end before its start",
            });
        }
        element_range(
            self.base(),
            self.len(),
            std::mem::size_of::<T>(),
            range.start,
            range.end - range.start,
        )
    }

    /// The [`Gpu`] the buffer was allocated through.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The cudarc slice, for cudarc APIs (memcpy, launches) this crate does not wrap.
    pub fn as_unified(&self) -> &UnifiedSlice<T> {
        &self.slice
    }

    /// The cudarc slice, mutably.
    pub fn as_unified_mut(&mut self) -> &mut UnifiedSlice<T> {
        &mut self.slice
    }

    /// A shared view of elements `range` (bounds-checked).
    pub fn view(&self, range: Range<usize>) -> Result<ManagedView<'_, T>> {
        let bytes = self.elements(range.clone())?;
        let inner = self
            .slice
            .try_slice(range.clone())
            .ok_or(Error::InvalidRange {
                start: range.start as u64,
                len: range.len() as u64,
                limit: self.len() as u64,
                reason: "view outside the buffer",
            })?;
        Ok(ManagedView {
            inner,
            bytes,
            len: range.len(),
        })
    }

    /// A mutable view of elements `range` (bounds-checked).
    pub fn view_mut(&mut self, range: Range<usize>) -> Result<ManagedViewMut<'_, T>> {
        let bytes = self.elements(range.clone())?;
        let limit = self.len() as u64;
        let inner = self
            .slice
            .try_slice_mut(range.clone())
            .ok_or(Error::InvalidRange {
                start: range.start as u64,
                len: range.len() as u64,
                limit,
                reason: "view outside the buffer",
            })?;
        Ok(ManagedViewMut {
            inner,
            bytes,
            len: range.len(),
        })
    }
}

/// The base address of a `UnifiedSlice`, read once (at allocation) through cudarc's public
/// `DevicePtr` on the slice's own stream: that only orders the slice's event after work
/// already queued there, which is none for a fresh allocation.
fn unified_base<T>(slice: &UnifiedSlice<T>) -> u64 {
    use cudarc::driver::{DevicePtr, DeviceSlice};
    let stream = slice.stream().clone();
    let (ptr, _sync) = slice.device_ptr(&stream);
    ptr
}

/// A shared view of part of a [`ManagedBuffer`]: a pointer and a length.
#[derive(Debug, Clone, Copy)]
pub struct ManagedView<'a, T> {
    inner: UnifiedView<'a, T>,
    bytes: ByteRange,
    len: usize,
}

impl<'a, T> ManagedView<'a, T> {
    /// Unified address of the first element.
    pub fn device_ptr(&self) -> u64 {
        self.bytes.start
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the view is empty (never: empty views are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The view's bytes.
    pub fn byte_range(&self) -> ByteRange {
        self.bytes
    }
    /// The cudarc view.
    pub fn as_unified(&self) -> &UnifiedView<'a, T> {
        &self.inner
    }
}

/// A mutable view of part of a [`ManagedBuffer`]: a pointer and a length.
#[derive(Debug)]
pub struct ManagedViewMut<'a, T> {
    inner: UnifiedViewMut<'a, T>,
    bytes: ByteRange,
    len: usize,
}

impl<'a, T> ManagedViewMut<'a, T> {
    /// Unified address of the first element.
    pub fn device_ptr(&self) -> u64 {
        self.bytes.start
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the view is empty (never: empty views are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The view's bytes.
    pub fn byte_range(&self) -> ByteRange {
        self.bytes
    }
    /// The cudarc view.
    pub fn as_unified(&mut self) -> &mut UnifiedViewMut<'a, T> {
        &mut self.inner
    }
}

// Kernel arguments of `#[kernel]` launchers: a buffer or view is bound through the cudarc
// `UnifiedSlice` underneath, with its stream ordering.

macro_rules! managed_arg {
    ($([$($lt:lifetime)?] $ty:ty, $field:ident, $mutable:tt;)*) => {$(
        // SAFETY: managed memory of `len()` elements, bound with cudarc's ordering.
        unsafe impl<$($lt,)? T> KernelSlice<T, GpuMemory> for $ty {
            fn kernel_len(&self) -> usize {
                self.len()
            }
            fn bind<'a>(&'a self, args: &mut GpuArgs<'a>) -> u64 {
                bind_read(&self.$field, args)
            }
        }
        // SAFETY: `cuMemAllocManaged` memory.
        unsafe impl<$($lt,)? T> ManagedMemory for $ty {}
        managed_arg!(@mut $mutable [$($lt)?] $ty, $field);
    )*};
    (@mut yes [$($lt:lifetime)?] $ty:ty, $field:ident) => {
        // SAFETY: as above, for writing.
        unsafe impl<$($lt,)? T> KernelSliceMut<T, GpuMemory> for $ty {
            fn kernel_len(&self) -> usize {
                self.len()
            }
            fn bind_mut<'a>(&'a mut self, args: &mut GpuArgs<'a>) -> u64 {
                bind_write(&mut self.$field, args)
            }
        }
    };
    (@mut no [$($lt:lifetime)?] $ty:ty, $field:ident) => {};
}

managed_arg! {
    [] ManagedBuffer<T>, slice, yes;
    ['c] ManagedView<'c, T>, inner, no;
    ['c] ManagedViewMut<'c, T>, inner, yes;
}

// cudarc launches (`stream.launch_builder(..).arg(&buf)`): the same ordering through cudarc.

// SAFETY: delegates to cudarc's impl for `&UnifiedSlice<T>`, which pushes a pointer to the
// slice's device pointer, alive for 'b.
unsafe impl<'a, 'b: 'a, T> PushKernelArg<&'b ManagedBuffer<T>> for LaunchArgs<'a> {
    fn arg(&mut self, arg: &'b ManagedBuffer<T>) -> &mut Self {
        <Self as PushKernelArg<&'b UnifiedSlice<T>>>::arg(self, &arg.slice)
    }
}

// SAFETY: as above, for `&mut UnifiedSlice<T>`.
unsafe impl<'a, 'b: 'a, T> PushKernelArg<&'b mut ManagedBuffer<T>> for LaunchArgs<'a> {
    fn arg(&mut self, arg: &'b mut ManagedBuffer<T>) -> &mut Self {
        <Self as PushKernelArg<&'b mut UnifiedSlice<T>>>::arg(self, &mut arg.slice)
    }
}

// SAFETY: delegates to cudarc's impl for `&UnifiedView<T>`.
unsafe impl<'a, 'b: 'a, 'c: 'b, T> PushKernelArg<&'b ManagedView<'c, T>> for LaunchArgs<'a> {
    fn arg(&mut self, arg: &'b ManagedView<'c, T>) -> &mut Self {
        <Self as PushKernelArg<&'b UnifiedView<'c, T>>>::arg(self, &arg.inner)
    }
}

// SAFETY: delegates to cudarc's impl for `&mut UnifiedViewMut<T>`.
unsafe impl<'a, 'b: 'a, 'c: 'b, T> PushKernelArg<&'b mut ManagedViewMut<'c, T>> for LaunchArgs<'a> {
    fn arg(&mut self, arg: &'b mut ManagedViewMut<'c, T>) -> &mut Self {
        <Self as PushKernelArg<&'b mut UnifiedViewMut<'c, T>>>::arg(self, &mut arg.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_encode_and_decode() {
        assert_eq!(Location::from_device_id(-1), Some(Location::Host));
        assert_eq!(Location::from_device_id(-2), None);
        assert_eq!(Location::from_device_id(3), Some(Location::Device(3)));
        let l = Location::Device(2).to_cu();
        assert_eq!(l.id, 2);
        assert_eq!(l.type_, sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE);
        assert_eq!(
            Location::Host.to_cu().type_,
            sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST
        );
    }

    #[test]
    fn nothing_promised_without_buffers() {
        assert_eq!(promised_managed_bytes(7), 0);
    }
}
