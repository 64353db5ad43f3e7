//! A growable device vector on the low-level virtual memory management (VMM) API:
//! `cuMemAddressReserve` a virtual range, back it with physical chunks from `cuMemCreate`,
//! `cuMemMap` them one after another and `cuMemSetAccess` for the owning device (and any
//! peers asked for). Growing maps a new chunk at the end: no copy, the address stays.
//!
//! When the reservation is full, the vector first tries to reserve the virtual range right
//! after it (a hint to `cuMemAddressReserve`); if the driver places it elsewhere, the vector
//! falls back to one larger reservation and *remaps* the existing physical chunks into it
//! (still no data copy), then frees the old range. Only a remap changes
//! [`GrowableVec::device_ptr`]; pointers taken before it become invalid. A failed grow
//! releases whatever it created and leaves the contents and address untouched.
//! [`GrowableVec::occupy_adjacent`] blocks the adjacent range, to force the fallback in tests.

use std::marker::PhantomData;

use cudarc::driver::{sys, DeviceRepr, LaunchArgs, PushKernelArg, ValidAsZeroBits};

use crate::error::{check, Capability, DriverContext, Error, Result};
use crate::gpu::Gpu;
use crate::launch::{DeviceMemory, GpuArgs, GpuMemory, KernelSlice, KernelSliceMut};

/// What a grow did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrowOutcome {
    /// The capacity already sufficed.
    Unchanged,
    /// A new chunk was mapped inside the existing reservation.
    InPlace,
    /// The reservation was extended with the adjacent virtual range, then a chunk mapped.
    Extended,
    /// The adjacent range was taken: a larger reservation was made elsewhere and the
    /// existing chunks remapped into it (no data copy; the base address changed).
    Remapped,
}

/// Options for a [`GrowableVec`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VecOptions {
    /// Virtual address space to reserve up front, in bytes (rounded up to the allocation
    /// granularity). Reserving generously is cheap and avoids remaps; 0 reserves just the
    /// initial capacity (at least one granule).
    pub reserve_bytes: usize,
    /// Peer device ordinals to grant read/write access too (the owner always has it).
    pub peers: Vec<usize>,
}

#[derive(Debug)]
struct Chunk {
    handle: sys::CUmemGenericAllocationHandle,
    size: usize,
}

/// A device-memory vector that grows without copying. See the module documentation.
#[derive(Debug)]
pub struct GrowableVec<T> {
    gpu: Gpu,
    prop: sys::CUmemAllocationProp,
    granularity: usize,
    base: u64,
    reservations: Vec<(u64, usize)>,
    reserved: usize,
    chunks: Vec<Chunk>,
    mapped: usize,
    len: usize,
    access: Vec<usize>,
    remaps: usize,
    _marker: PhantomData<T>,
}

// SAFETY: the vector owns its device memory; the raw handles are plain integers/pointers
// used only through `&mut self` or read-only queries.
unsafe impl<T: Send> Send for GrowableVec<T> {}
// SAFETY: `&self` methods only read device memory or metadata.
unsafe impl<T: Sync> Sync for GrowableVec<T> {}

fn round_up(x: usize, to: usize) -> Option<usize> {
    x.checked_add(to - 1).map(|v| v / to * to)
}

/// A reserved virtual range, freed on drop; see [`GrowableVec::occupy_adjacent`].
#[derive(Debug)]
pub struct VaBlocker {
    gpu: Gpu,
    ptr: u64,
    size: usize,
    adjacent: bool,
}

impl VaBlocker {
    /// Whether the driver honoured the hint, so the range right after the vector's
    /// reservation is now taken.
    pub fn is_adjacent(&self) -> bool {
        self.adjacent
    }
    /// The reserved range's start address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for VaBlocker {
    fn drop(&mut self) {
        let _ = self.gpu.bind_to_thread();
        // SAFETY: frees exactly the range reserved in `occupy_adjacent`.
        let _ = unsafe { sys::cuMemAddressFree(self.ptr, self.size) };
    }
}

fn reserve_va(size: usize, hint: u64) -> Result<u64> {
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: writes one pointer.
    unsafe { sys::cuMemAddressReserve(&mut ptr, size, 0, hint, 0) }
        .result()
        .during_alloc("cuMemAddressReserve", size)?;
    Ok(ptr)
}

impl<T> GrowableVec<T> {
    /// An empty vector on `gpu` (reserves one granule of address space, maps nothing).
    pub fn new(gpu: &Gpu) -> Result<Self> {
        Self::with_options(gpu, 0, VecOptions::default())
    }

    /// An empty vector with room for `capacity` elements mapped.
    pub fn with_capacity(gpu: &Gpu, capacity: usize) -> Result<Self> {
        Self::with_options(gpu, capacity, VecOptions::default())
    }

    /// An empty vector with room for `capacity` elements mapped, and `options`.
    pub fn with_options(gpu: &Gpu, capacity: usize, options: VecOptions) -> Result<Self> {
        if std::mem::size_of::<T>() == 0 {
            return Err(Error::InvalidRange {
                start: 0,
                len: 0,
                limit: 0,
                reason: "zero-sized element type",
            });
        }
        gpu.require(Capability::VirtualMemoryManagement, "GrowableVec")?;
        let count = Gpu::count()?;
        let mut access = vec![gpu.ordinal()];
        for &p in &options.peers {
            if p >= count {
                return Err(Error::NoDevice { ordinal: p, count });
            }
            if !access.contains(&p) {
                access.push(p);
            }
        }
        gpu.bind_to_thread()?;
        // SAFETY: an all-zero CUmemAllocationProp is valid (no flags, no handle types).
        let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location = sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: gpu.ordinal() as i32,
        };
        let mut granularity = 0usize;
        // SAFETY: reads `prop`, writes one usize.
        check("cuMemGetAllocationGranularity", unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        })?;
        let granularity = granularity.max(1);
        let bytes = Self::bytes_for(capacity)?;
        let reserve = round_up(bytes.max(options.reserve_bytes).max(1), granularity).ok_or(
            Error::InvalidRange {
                start: 0,
                len: options.reserve_bytes as u64,
                limit: usize::MAX as u64,
                reason: "reservation size overflows",
            },
        )?;
        let base = reserve_va(reserve, 0)?;
        let mut v = GrowableVec {
            gpu: gpu.clone(),
            prop,
            granularity,
            base,
            reservations: vec![(base, reserve)],
            reserved: reserve,
            chunks: Vec::new(),
            mapped: 0,
            len: 0,
            access,
            remaps: 0,
            _marker: PhantomData,
        };
        if bytes > 0 {
            v.grow_bytes(bytes)?;
        }
        Ok(v)
    }

    fn bytes_for(elems: usize) -> Result<usize> {
        crate::error::byte_size::<T>(elems)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the vector has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements that fit in the mapped memory.
    pub fn capacity(&self) -> usize {
        self.mapped / std::mem::size_of::<T>()
    }

    /// Bytes of physical memory mapped.
    pub fn mapped_bytes(&self) -> usize {
        self.mapped
    }

    /// Bytes of virtual address space reserved.
    pub fn reserved_bytes(&self) -> usize {
        self.reserved
    }

    /// The allocation granularity (physical chunks are multiples of it).
    pub fn granularity(&self) -> usize {
        self.granularity
    }

    /// Number of physical chunks mapped.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// How many grows took the remapping fallback.
    pub fn remap_count(&self) -> usize {
        self.remaps
    }

    /// Device address of the first element (changes only when a grow remaps).
    pub fn device_ptr(&self) -> u64 {
        self.base
    }

    /// The [`Gpu`] owning the memory.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Makes sure at least `capacity` elements are mapped (exactly, rounded up to the
    /// granularity; no over-allocation).
    pub fn grow_to(&mut self, capacity: usize) -> Result<GrowOutcome> {
        let bytes = Self::bytes_for(capacity)?;
        self.grow_bytes(bytes)
    }

    /// Makes room for `additional` more elements, growing by at least half the current
    /// capacity to keep repeated appends cheap.
    pub fn reserve(&mut self, additional: usize) -> Result<GrowOutcome> {
        let needed = self
            .len
            .checked_add(additional)
            .ok_or(Error::InvalidRange {
                start: self.len as u64,
                len: additional as u64,
                limit: usize::MAX as u64,
                reason: "length overflows",
            })?;
        if needed <= self.capacity() {
            return Ok(GrowOutcome::Unchanged);
        }
        let bytes = Self::bytes_for(needed)?.max(self.mapped.saturating_add(self.mapped / 2));
        self.grow_bytes(bytes)
    }

    fn access_descs(&self) -> Vec<sys::CUmemAccessDesc> {
        self.access
            .iter()
            .map(|&d| sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: d as i32,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            })
            .collect()
    }

    fn set_access(&self, ptr: u64, size: usize) -> Result<()> {
        let descs = self.access_descs();
        // SAFETY: `descs` holds `descs.len()` entries for a mapped range.
        check("cuMemSetAccess", unsafe {
            sys::cuMemSetAccess(ptr, size, descs.as_ptr(), descs.len())
        })
    }

    fn grow_bytes(&mut self, bytes: usize) -> Result<GrowOutcome> {
        let target = round_up(bytes, self.granularity).ok_or(Error::InvalidRange {
            start: 0,
            len: bytes as u64,
            limit: usize::MAX as u64,
            reason: "capacity in bytes overflows",
        })?;
        if target <= self.mapped {
            return Ok(GrowOutcome::Unchanged);
        }
        self.gpu.bind_to_thread()?;
        let need = target - self.mapped;
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: reads `prop`, writes one handle.
        unsafe { sys::cuMemCreate(&mut handle, need, &self.prop, 0) }
            .result()
            .during_alloc("cuMemCreate", need)?;
        let release = |h| {
            // SAFETY: releases a handle created above and not mapped anywhere.
            let _ = unsafe { sys::cuMemRelease(h) };
        };
        let outcome = match self.ensure_va(target) {
            Ok(o) => o,
            Err(e) => {
                release(handle);
                return Err(e);
            }
        };
        let at = self.base + self.mapped as u64;
        // SAFETY: `at..at+need` lies inside our reservation and is unmapped.
        if let Err(e) = check("cuMemMap", unsafe { sys::cuMemMap(at, need, 0, handle, 0) }) {
            release(handle);
            return Err(e);
        }
        if let Err(e) = self.set_access(at, need) {
            // SAFETY: unmaps the mapping made just above.
            let _ = unsafe { sys::cuMemUnmap(at, need) };
            release(handle);
            return Err(e);
        }
        self.chunks.push(Chunk { handle, size: need });
        self.mapped = target;
        Ok(outcome)
    }

    /// Makes the reservation at least `target` bytes, extending or remapping.
    fn ensure_va(&mut self, target: usize) -> Result<GrowOutcome> {
        if target <= self.reserved {
            return Ok(GrowOutcome::InPlace);
        }
        // Try the adjacent range, doubling the reservation (amortises future grows).
        let extra = round_up(
            (target - self.reserved).max(self.reserved),
            self.granularity,
        )
        .unwrap_or(target - self.reserved);
        let hint = self.base + self.reserved as u64;
        if let Ok(p) = reserve_va(extra, hint) {
            if p == hint {
                self.reservations.push((p, extra));
                self.reserved += extra;
                return Ok(GrowOutcome::Extended);
            }
            // SAFETY: frees the range just reserved (not where we wanted it).
            let _ = unsafe { sys::cuMemAddressFree(p, extra) };
        }
        self.remap(target)?;
        Ok(GrowOutcome::Remapped)
    }

    /// The fallback: a new, larger reservation; existing chunks mapped into it; the old
    /// mappings and reservations released. On failure nothing changes.
    fn remap(&mut self, target: usize) -> Result<()> {
        let size = round_up(
            target.max(self.reserved.saturating_mul(2)),
            self.granularity,
        )
        .unwrap_or(target);
        let new_base = reserve_va(size, 0)?;
        let mut off = 0usize;
        let mut failed = None;
        for c in &self.chunks {
            // SAFETY: maps an existing physical chunk into the new, empty reservation.
            if let Err(e) = check("cuMemMap", unsafe {
                sys::cuMemMap(new_base + off as u64, c.size, 0, c.handle, 0)
            }) {
                failed = Some(e);
                break;
            }
            off += c.size;
        }
        if failed.is_none() && self.mapped > 0 {
            if let Err(e) = self.set_access(new_base, self.mapped) {
                failed = Some(e);
            }
        }
        if let Some(e) = failed {
            let mut o = 0usize;
            for c in &self.chunks {
                if o >= off {
                    break;
                }
                // SAFETY: unmaps what this function mapped.
                let _ = unsafe { sys::cuMemUnmap(new_base + o as u64, c.size) };
                o += c.size;
            }
            // SAFETY: frees the reservation made above.
            let _ = unsafe { sys::cuMemAddressFree(new_base, size) };
            return Err(e);
        }
        // Work queued against the old addresses must finish before they are unmapped.
        self.gpu
            .context()
            .synchronize()
            .during("cuCtxSynchronize")?;
        self.unmap_and_free_va();
        self.base = new_base;
        self.reservations = vec![(new_base, size)];
        self.reserved = size;
        self.remaps += 1;
        Ok(())
    }

    /// Unmaps every chunk at the current base and frees the current reservations (the
    /// physical handles stay).
    fn unmap_and_free_va(&mut self) {
        let mut off = 0u64;
        for c in &self.chunks {
            // SAFETY: each chunk is mapped at base + its offset.
            let _ = unsafe { sys::cuMemUnmap(self.base + off, c.size) };
            off += c.size as u64;
        }
        for &(p, s) in &self.reservations {
            // SAFETY: frees exactly the ranges reserved earlier.
            let _ = unsafe { sys::cuMemAddressFree(p, s) };
        }
    }

    /// Reserves the virtual range right after this vector's reservation, so the next grow
    /// beyond it must take the remapping fallback. For tests; check
    /// [`VaBlocker::is_adjacent`] (the driver may ignore the hint).
    pub fn occupy_adjacent(&self, bytes: usize) -> Result<VaBlocker> {
        self.gpu.bind_to_thread()?;
        let size = round_up(bytes.max(1), self.granularity).unwrap_or(self.granularity);
        let hint = self.base + self.reserved as u64;
        let ptr = reserve_va(size, hint)?;
        Ok(VaBlocker {
            gpu: self.gpu.clone(),
            ptr,
            size,
            adjacent: ptr == hint,
        })
    }

    /// Shortens the vector to `len` elements (capacity stays mapped).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Removes all elements (capacity stays mapped).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl<T: DeviceRepr> GrowableVec<T> {
    /// Appends `data`, copied from the host, growing if needed.
    pub fn extend_from_host(&mut self, data: &[T]) -> Result<GrowOutcome> {
        let outcome = self.reserve(data.len())?;
        if !data.is_empty() {
            self.gpu.synchronize()?;
            let at = self.base + (self.len * std::mem::size_of::<T>()) as u64;
            // SAFETY: `at..` has room for `data.len()` elements (reserved above).
            unsafe { cudarc::driver::result::memcpy_htod_sync(at, data) }.during("cuMemcpyHtoD")?;
            self.len += data.len();
        }
        Ok(outcome)
    }

    /// Overwrites elements from `offset` with `data`.
    pub fn write_from_host(&mut self, offset: usize, data: &[T]) -> Result<()> {
        self.check_span(offset, data.len())?;
        self.gpu.synchronize()?;
        let at = self.base + (offset * std::mem::size_of::<T>()) as u64;
        // SAFETY: bounds checked above.
        unsafe { cudarc::driver::result::memcpy_htod_sync(at, data) }.during("cuMemcpyHtoD")
    }

    fn check_span(&self, offset: usize, count: usize) -> Result<()> {
        match offset.checked_add(count) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::InvalidRange {
                start: offset as u64,
                len: count as u64,
                limit: self.len as u64,
                reason: "span extends past the vector's length",
            }),
        }
    }
}

impl<T: DeviceRepr + ValidAsZeroBits + Copy> GrowableVec<T> {
    /// Resizes to `len` elements; new elements are zero (set on the GPU's stream).
    pub fn resize_zeroed(&mut self, len: usize) -> Result<GrowOutcome> {
        if len <= self.len {
            self.len = len;
            return Ok(GrowOutcome::Unchanged);
        }
        let outcome = self.reserve(len - self.len)?;
        let size = std::mem::size_of::<T>();
        let at = self.base + (self.len * size) as u64;
        // SAFETY: the new elements lie inside mapped memory.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                at,
                0,
                (len - self.len) * size,
                self.gpu.stream().cu_stream(),
            )
        }
        .during("cuMemsetD8Async")?;
        self.len = len;
        Ok(outcome)
    }

    /// Copies elements `offset..offset + out.len()` to the host (after synchronising the
    /// GPU's context, so kernels on any stream that wrote them have finished).
    pub fn copy_to_host(&self, offset: usize, out: &mut [T]) -> Result<()> {
        self.check_span(offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        self.gpu.bind_to_thread()?;
        self.gpu
            .context()
            .synchronize()
            .during("cuCtxSynchronize")?;
        let at = self.base + (offset * std::mem::size_of::<T>()) as u64;
        // SAFETY: bounds checked above.
        unsafe { cudarc::driver::result::memcpy_dtoh_sync(out, at) }.during("cuMemcpyDtoH")
    }

    /// All elements, copied to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        // SAFETY: all-zero bytes are a valid T (ValidAsZeroBits).
        let mut out = vec![unsafe { std::mem::zeroed::<T>() }; self.len];
        self.copy_to_host(0, &mut out)?;
        Ok(out)
    }
}

impl<T> Drop for GrowableVec<T> {
    fn drop(&mut self) {
        let _ = self.gpu.bind_to_thread();
        let _ = self.gpu.context().synchronize();
        self.unmap_and_free_va();
        for c in &self.chunks {
            // SAFETY: every handle was created by this vector and is unmapped now.
            let _ = unsafe { sys::cuMemRelease(c.handle) };
        }
    }
}

// Kernel arguments. The vector synchronizes its context before it unmaps or remaps memory
// (on drop and on a remapping grow), so a kernel queued with its address never outlives the
// mapping; host writes are synchronous.

// SAFETY: `len` elements of mapped device memory at `base`, kept mapped as said above.
unsafe impl<T> KernelSlice<T, GpuMemory> for GrowableVec<T> {
    fn kernel_len(&self) -> usize {
        self.len
    }
    fn bind<'a>(&'a self, _args: &mut GpuArgs<'a>) -> u64 {
        self.base
    }
}

// SAFETY: as above; `&mut self` excludes host access during the borrow.
unsafe impl<T> KernelSliceMut<T, GpuMemory> for GrowableVec<T> {
    fn kernel_len(&self) -> usize {
        self.len
    }
    fn bind_mut<'a>(&'a mut self, _args: &mut GpuArgs<'a>) -> u64 {
        self.base
    }
}

// SAFETY: `cuMemCreate` device memory.
unsafe impl<T> DeviceMemory for GrowableVec<T> {}

// SAFETY: pushes a pointer to the vector's base address (a u64 alive for 'b); the kernel
// receives the device pointer by value.
unsafe impl<'a, 'b: 'a, T> PushKernelArg<&'b GrowableVec<T>> for LaunchArgs<'a> {
    fn arg(&mut self, arg: &'b GrowableVec<T>) -> &mut Self {
        <Self as PushKernelArg<&'b u64>>::arg(self, &arg.base)
    }
}

// SAFETY: as above.
unsafe impl<'a, 'b: 'a, T> PushKernelArg<&'b mut GrowableVec<T>> for LaunchArgs<'a> {
    fn arg(&mut self, arg: &'b mut GrowableVec<T>) -> &mut Self {
        <Self as PushKernelArg<&'b u64>>::arg(self, &arg.base)
    }
}

#[cfg(test)]
mod tests {
    use super::round_up;

    #[test]
    fn rounding_to_granularity() {
        assert_eq!(round_up(0, 2 << 20), Some(0));
        assert_eq!(round_up(1, 2 << 20), Some(2 << 20));
        assert_eq!(round_up(2 << 20, 2 << 20), Some(2 << 20));
        assert_eq!(round_up(usize::MAX, 2 << 20), None);
    }
}
