//! Data bigger than any GPU, in host memory that every GPU of the process reads: written in
//! parallel by the host's cores, then page-locked and mapped for all contexts
//! (`cuMemHostRegister` with `PORTABLE | DEVICEMAP`). Kernels on any GPU of the set take a
//! [`HostView`] of it where they take a slice, and read it over that GPU's own host link.
//!
//! Filling the memory before registering it lets every core take its share of the page
//! faults (transparent huge pages are asked for), where `cuMemHostAlloc` would fault and
//! zero every page on one thread; registering then only pins pages that exist.
//!
//! ```no_run
//! # fn f(gpus: &lookahead_multi::GpuSet) -> lookahead_multi::Result<()> {
//! // 1 Gi floats in rows of 128, row r filled with r.
//! let data = lookahead_multi::HostArray::<f32>::from_rows(gpus.gpus(), 1 << 23, 128, |first, rows| {
//!     for (i, row) in rows.chunks_mut(128).enumerate() {
//!         row.fill((first + i) as f32);
//!     }
//! })?;
//! let view = data.view(gpus.gpu(1), 0..data.len())?; // for a `&[f32]` or `ManagedSlice<f32>` parameter
//! # let _ = view; Ok(()) }
//! ```

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ops::Range;
use std::time::Instant;

use cudarc::driver::{sys, ValidAsZeroBits};
use lookahead::launch::{GpuArgs, GpuMemory, KernelSlice, ManagedMemory};
use lookahead::{DriverContext, Gpu};

use crate::error::{Error, Result};

/// The size of a transparent huge page on x86-64 and of the mapping's granules.
const HUGE_PAGE: usize = 2 << 20;

/// `len` elements of `T` in page-locked host memory, mapped for every GPU it was made for.
pub struct HostArray<T> {
    ptr: *mut T,
    len: usize,
    /// Bytes mapped (whole huge pages, at least one).
    mapped: usize,
    /// The GPU whose context registered the memory, once registered.
    registered: Option<Gpu>,
    /// The GPUs and the address of the first element in each one's context.
    devices: Vec<(Gpu, u64)>,
    /// Seconds the parallel fill and the registration took.
    times: (f64, f64),
}

// SAFETY: the array owns its memory; after construction the host only reads it.
unsafe impl<T: Send> Send for HostArray<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for HostArray<T> {}

impl<T: Copy + ValidAsZeroBits + Send + Sync> HostArray<T> {
    /// `rows * row_len` elements, filled by `fill(first_row, elements)` on every core at once
    /// (each call gets whole rows, starting zeroed), then registered for `gpus`.
    pub fn from_rows(
        gpus: &[Gpu],
        rows: usize,
        row_len: usize,
        fill: impl Fn(usize, &mut [T]) + Sync,
    ) -> Result<Self> {
        let first = gpus
            .first()
            .ok_or_else(|| Error::Invalid("host memory mapped for no GPU".into()))?;
        let len = rows
            .checked_mul(row_len)
            .ok_or_else(|| Error::Invalid(format!("{rows} rows of {row_len} elements")))?;
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::Invalid(format!("{len} elements")))?;
        // Whole huge pages: the mapping and its registration are page-aligned.
        let mapped = bytes.max(1).next_multiple_of(HUGE_PAGE);
        let ptr = map_anonymous(mapped)? as *mut T;
        let mut array = HostArray {
            ptr,
            len,
            mapped,
            registered: None,
            devices: Vec::new(),
            times: (0.0, 0.0),
        };
        let t = Instant::now();
        array.fill_rows(rows, row_len, &fill);
        let filled = t.elapsed().as_secs_f64();
        let t = Instant::now();
        array.register(first)?;
        for gpu in gpus {
            let device = device_address(gpu, ptr as *mut c_void)?;
            array.devices.push((gpu.clone(), device));
        }
        array.times = (filled, t.elapsed().as_secs_f64());
        Ok(array)
    }

    fn fill_rows(&mut self, rows: usize, row_len: usize, fill: &(impl Fn(usize, &mut [T]) + Sync)) {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        let per = rows.div_ceil(threads).max(1);
        let base = self.ptr as usize;
        std::thread::scope(|s| {
            for first in (0..rows).step_by(per) {
                let n = per.min(rows - first);
                s.spawn(move || {
                    let p = (base as *mut T).wrapping_add(first * row_len);
                    // SAFETY: rows `first..first + n` of the mapping, this thread's alone; the
                    // kernel zero-fills new mappings, and all zero bits are a valid `T`.
                    let chunk = unsafe { std::slice::from_raw_parts_mut(p, n * row_len) };
                    fill(first, chunk);
                });
            }
        });
    }

    fn register(&mut self, gpu: &Gpu) -> Result<()> {
        gpu.bind_to_thread()?;
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: `mapped` bytes at `ptr` are this array's mapping; unregistered in `drop`.
        let r = unsafe { sys::cuMemHostRegister_v2(self.ptr as *mut c_void, self.mapped, flags) };
        r.result().map_err(|source| {
            Error::Gpu(lookahead::Error::from_driver(
                "cuMemHostRegister",
                source,
                self.mapped,
            ))
        })?;
        self.registered = Some(gpu.clone());
        Ok(())
    }
}

impl<T> HostArray<T> {
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the elements.
    pub fn num_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The elements, as the host reads them.
    pub fn host(&self) -> &[T] {
        // SAFETY: `len` initialised elements, alive as long as `self`; nothing writes them
        // after construction.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Seconds the parallel fill took, and the registration.
    pub fn times(&self) -> (f64, f64) {
        self.times
    }

    /// Elements `range` as a read-only kernel argument for launches on `gpu` (one of the
    /// GPUs the array was made for): a slice parameter, or a `ManagedSlice` one (host memory
    /// the GPU reads over its link, as a kernel reads managed memory that stays on the
    /// host).
    pub fn view(&self, gpu: &Gpu, range: Range<usize>) -> Result<HostView<'_, T>> {
        let (_, base) = self
            .devices
            .iter()
            .find(|(g, _)| g.ordinal() == gpu.ordinal())
            .ok_or_else(|| {
                Error::Invalid(format!("host memory not mapped for GPU {}", gpu.ordinal()))
            })?;
        if range.start > range.end || range.end > self.len {
            return Err(Error::Gpu(lookahead::Error::InvalidRange {
                start: range.start as u64,
                len: range.len() as u64,
                limit: self.len as u64,
                reason: "a view outside its host array",
            }));
        }
        Ok(HostView {
            ptr: base + (range.start * std::mem::size_of::<T>()) as u64,
            len: range.len(),
            _borrow: PhantomData,
        })
    }
}

impl<T> Drop for HostArray<T> {
    fn drop(&mut self) {
        // Kernels that read the memory must be done before it is unmapped: wait for every
        // GPU it was mapped for.
        for (gpu, _) in &self.devices {
            let _ = gpu.bind_to_thread();
            let _ = gpu.context().synchronize();
        }
        if let Some(gpu) = &self.registered {
            let _ = gpu.bind_to_thread();
            // SAFETY: registered in `from_rows`; no work uses it any more (waited above).
            unsafe { sys::cuMemHostUnregister(self.ptr as *mut c_void) };
        }
        // SAFETY: mapped by `map_anonymous` with this length, unmapped once.
        unsafe { libc::munmap(self.ptr as *mut c_void, self.mapped) };
    }
}

impl<T> std::fmt::Debug for HostArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostArray")
            .field("len", &self.len)
            .field("gpus", &self.devices.len())
            .finish()
    }
}

/// Private, zero-filled, not reserved against swap, with transparent huge pages asked for.
fn map_anonymous(bytes: usize) -> Result<*mut c_void> {
    // SAFETY: a new private anonymous mapping; the kernel picks the address.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::io(
            format!("mapping {bytes} bytes of host memory"),
            std::io::Error::last_os_error(),
        ));
    }
    // Huge pages are a speed-up only: a kernel without them serves 4 KiB pages.
    // SAFETY: advice on the mapping just made.
    unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
    Ok(p)
}

/// The address of registered host memory `host` in `gpu`'s context.
fn device_address(gpu: &Gpu, host: *mut c_void) -> Result<u64> {
    gpu.bind_to_thread()?;
    let mut device: sys::CUdeviceptr = 0;
    // SAFETY: `host` was registered as PORTABLE and DEVICEMAP; writes one pointer.
    unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) }
        .result()
        .during("cuMemHostGetDevicePointer")?;
    Ok(device)
}

/// A read-only kernel argument over part of a [`HostArray`], for launches on one GPU.
#[derive(Debug, Clone, Copy)]
pub struct HostView<'a, T> {
    ptr: u64,
    len: usize,
    _borrow: PhantomData<&'a [T]>,
}

impl<T> HostView<'_, T> {
    /// The first element's address on the view's GPU.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

// SAFETY: `len` elements of registered host memory, mapped for the view's GPU, alive while
// the borrow lasts and never written after construction; `HostArray`'s drop waits for the
// GPUs before the memory goes, so no launch outlives it.
unsafe impl<T> KernelSlice<T, GpuMemory> for HostView<'_, T> {
    fn kernel_len(&self) -> usize {
        self.len
    }
    fn bind<'b>(&'b self, _args: &mut GpuArgs<'b>) -> u64 {
        self.ptr
    }
}

// SAFETY: host memory, which `ManagedMemory`'s contract admits: the GPU reads it in place
// over its link, as it reads managed pages that stay on the host (remote-mapped).
unsafe impl<T> ManagedMemory for HostView<'_, T> {}
