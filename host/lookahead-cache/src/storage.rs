//! Where a cache's parts live: pinned host memory mapped for the GPU and device memory for a
//! GPU cache; host allocations for the CPU emulator.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64};

use cudarc::driver::sys;
use lookahead::Gpu;
use lookahead_device::cache::{CacheParts, ABSENT};

use crate::{CacheError, Result};

/// The tables' words: `page_slot[pages]`, then `slot_page`, `slot_pins`, `slot_used` (`slots`
/// each), then the CLOCK hand.
pub(crate) fn table_words(pages: usize, slots: u32) -> usize {
    pages + 3 * slots as usize + 1
}

/// The tables' initial words: every page and slot [`ABSENT`], no pins, no use, hand 0.
pub(crate) fn initial_tables(pages: usize, slots: u32) -> Vec<u32> {
    let s = slots as usize;
    let mut t = vec![ABSENT; pages + s];
    t.resize(pages + 3 * s + 1, 0);
    t
}

/// Counters: hits, misses, evictions, bytes loaded, waits.
pub(crate) const COUNTERS: usize = 5;

/// The counters' words: [`COUNTERS`] in each of the device's stripes.
pub(crate) const COUNTER_WORDS: usize = COUNTERS * lookahead_device::cache::COUNTER_STRIPES;

/// The counters summed over the stripes.
pub(crate) fn sum_stripes(words: &[u64]) -> [u64; COUNTERS] {
    std::array::from_fn(|i| words.iter().skip(i).step_by(COUNTERS).sum())
}

/// Device memory the cache takes: `data_bytes` of slots, the tables and the counters.
fn device_bytes(data_bytes: usize, tables: &[u32]) -> usize {
    data_bytes + tables.len() * 4 + COUNTER_WORDS * 8
}

/// Refuses `needed` bytes of device memory that do not fit in the GPU's free memory plus
/// `freed` (what the cache gives back first) while leaving `reserve` free.
fn check_fits(gpu: &Gpu, needed: usize, reserve: usize, freed: usize) -> Result<()> {
    let (free, _) = gpu.memory_info()?;
    if needed.saturating_add(reserve) > free + freed {
        return Err(CacheError::DoesNotFit {
            cache_bytes: needed,
            free_bytes: free + freed,
            reserve_bytes: reserve,
        });
    }
    Ok(())
}

/// A GPU cache's memory: the pinned data and the device allocations (raw, so that kernels
/// may update them concurrently from any stream; freed after the context is idle).
pub(crate) struct GpuStorage {
    pub gpu: Gpu,
    pub pinned: *mut c_void,
    /// The pinned data's device address (unified addressing maps it 1:1).
    pub backing: u64,
    /// Bytes the slots, tables and counters take in device memory.
    device_bytes: usize,
    pub data: sys::CUdeviceptr,
    pub tables: sys::CUdeviceptr,
    pub counters: sys::CUdeviceptr,
}

fn check(call: &'static str, r: sys::CUresult) -> Result<()> {
    r.result()
        .map_err(|source| CacheError::Gpu(lookahead::Error::Driver { call, source }))
}

impl GpuStorage {
    /// Pinned, device-mapped host memory of `backing_bytes`, and device memory for
    /// `data_bytes` of slots and the tables; refuses a cache that does not fit in free
    /// device memory (leaving `reserve` bytes free).
    pub fn new(
        gpu: &Gpu,
        backing_bytes: usize,
        data_bytes: usize,
        tables: &[u32],
        reserve: usize,
    ) -> Result<GpuStorage> {
        gpu.bind_to_thread()?;
        check_fits(gpu, device_bytes(data_bytes, tables), reserve, 0)?;
        let mut pinned: *mut c_void = std::ptr::null_mut();
        // SAFETY: allocates pinned, device-mapped host memory; freed in Drop.
        let r = unsafe {
            sys::cuMemHostAlloc(
                &mut pinned,
                backing_bytes.max(1),
                sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE,
            )
        };
        r.result().map_err(|source| CacheError::PinnedRefused {
            bytes: backing_bytes,
            source,
        })?;
        let mut s = GpuStorage {
            gpu: gpu.clone(),
            pinned,
            backing: 0,
            device_bytes: 0,
            data: 0,
            tables: 0,
            counters: 0,
        };
        // SAFETY: `pinned` was allocated with DEVICEMAP.
        check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut s.backing, pinned, 0)
        })?;
        s.alloc_device(data_bytes, tables)?;
        Ok(s)
    }

    /// Allocates the slots, tables and counters (none allocated before) and resets them.
    fn alloc_device(&mut self, data_bytes: usize, tables: &[u32]) -> Result<()> {
        for (ptr, bytes) in [
            (&mut self.data, data_bytes),
            (&mut self.tables, tables.len() * 4),
            (&mut self.counters, COUNTER_WORDS * 8),
        ] {
            // SAFETY: a device allocation, freed in Drop (a failure drops what came before).
            check("cuMemAlloc", unsafe {
                sys::cuMemAlloc_v2(ptr, bytes.max(4))
            })?;
        }
        self.device_bytes = device_bytes(data_bytes, tables);
        self.reset(tables)
    }

    /// Frees the slots, tables and counters once every kernel is done, and allocates them
    /// anew for `data_bytes` of slots and `tables` (the pinned data stays). Refuses, keeping
    /// the old ones, what does not fit beside `reserve` bytes.
    pub fn reshape(&mut self, data_bytes: usize, tables: &[u32], reserve: usize) -> Result<()> {
        self.gpu.synchronize()?;
        let needed = device_bytes(data_bytes, tables);
        check_fits(&self.gpu, needed, reserve, self.device_bytes)?;
        self.free_device();
        self.alloc_device(data_bytes, tables)
    }

    fn free_device(&mut self) {
        for p in [&mut self.data, &mut self.tables, &mut self.counters] {
            if *p != 0 {
                // SAFETY: allocated by `alloc_device`, used by no kernel (the caller waited).
                unsafe { sys::cuMemFree_v2(*p) };
                *p = 0;
            }
        }
    }

    /// Waits for every kernel, then writes `tables` and zeroes the counters.
    pub fn reset(&self, tables: &[u32]) -> Result<()> {
        self.gpu.synchronize()?;
        // SAFETY: synchronous copies into allocations of these sizes.
        check("cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(
                self.tables,
                tables.as_ptr() as *const c_void,
                tables.len() * 4,
            )
        })?;
        check("cuMemsetD32", unsafe {
            sys::cuMemsetD32_v2(self.counters, 0, COUNTER_WORDS * 2)
        })
    }

    /// Waits for every kernel, then reads the counters (summed over the stripes).
    pub fn counters(&self) -> Result<[u64; COUNTERS]> {
        self.gpu.synchronize()?;
        let mut c = [0u64; COUNTER_WORDS];
        // SAFETY: a synchronous copy out of the counters' allocation.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(
                c.as_mut_ptr() as *mut c_void,
                self.counters,
                COUNTER_WORDS * 8,
            )
        })?;
        Ok(sum_stripes(&c))
    }

    /// Waits for every kernel, then reads the tables.
    pub fn tables(&self, words: usize) -> Result<Vec<u32>> {
        self.gpu.synchronize()?;
        let mut t = vec![0u32; words];
        // SAFETY: a synchronous copy out of the tables' allocation.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(t.as_mut_ptr() as *mut c_void, self.tables, words * 4)
        })?;
        Ok(t)
    }
}

impl Drop for GpuStorage {
    fn drop(&mut self) {
        // Kernels still running may use every part: wait for them first.
        let _ = self.gpu.synchronize();
        self.free_device();
        // SAFETY: allocated in `new`, used by nothing now.
        unsafe { sys::cuMemFreeHost(self.pinned) };
    }
}

/// An emulated cache's memory, in host allocations the emulated kernels update through
/// pointers (interior mutability: the view is made from `&self`).
pub(crate) struct HostStorage<T> {
    pub backing: Vec<T>,
    pub data: Vec<UnsafeCell<T>>,
    pub tables: Vec<AtomicU32>,
    pub counters: Vec<AtomicU64>,
}

/// The parts of a cache whose tables start at `tables` (see [`table_words`]).
pub(crate) fn parts<T>(
    backing: *const T,
    len: usize,
    data: *mut T,
    tables: *mut u32,
    counters: *mut u64,
    (pages, slots, page_shift): (usize, u32, u32),
    eviction: crate::Eviction,
) -> CacheParts<T> {
    let s = slots as usize;
    // Pointer arithmetic inside the tables' allocation of `table_words(pages, slots)`.
    let at = |k: usize| tables.wrapping_add(k);
    CacheParts {
        backing,
        len,
        data,
        page_slot: at(0),
        slot_page: at(pages),
        slot_pins: at(pages + s),
        slot_used: at(pages + 2 * s),
        hand: at(pages + 3 * s),
        counters: counters as *mut lookahead_device::cache::CacheCounters,
        page_shift,
        slots,
        max_uses: eviction.max_uses(),
    }
}
