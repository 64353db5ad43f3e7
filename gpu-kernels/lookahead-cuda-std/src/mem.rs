//! Heap allocation in kernels (`cuda_std::mem`): [`GpuAllocator`] is a global allocator on
//! the driver's device-side `malloc` and `free`, so `Box`, `Vec` and `String` work in
//! kernels. The heap is `CU_LIMIT_MALLOC_HEAP_SIZE` (8 MiB by default, set on the host
//! before the first launch); an allocation that does not fit is an allocation failure,
//! which panics (a trap on the GPU).
//!
//! On the GPU this crate installs it as the `#[global_allocator]`.

use core::alloc::{GlobalAlloc, Layout};

#[cfg(target_arch = "nvptx64")]
extern "C" {
    // The CUDA driver's device heap; blocks are 16-byte aligned.
    fn malloc(size: usize) -> *mut u8;
    fn free(ptr: *mut u8);
}

/// The device-side `malloc`/`free` allocator. Alignments above 16 bytes are refused (the
/// allocation fails), since the driver's heap aligns blocks to 16.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuAllocator;

/// The largest alignment the driver's `malloc` guarantees.
pub const MAX_ALIGN: usize = 16;

unsafe impl GlobalAlloc for GpuAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() > MAX_ALIGN {
            return core::ptr::null_mut();
        }
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the driver's malloc takes any size; null means no memory.
        return unsafe { malloc(layout.size()) };
        #[cfg(not(target_arch = "nvptx64"))]
        core::ptr::null_mut()
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: `ptr` came from `alloc` above (the caller's contract).
        unsafe {
            free(ptr)
        };
        #[cfg(not(target_arch = "nvptx64"))]
        let _ = ptr;
    }
}

#[cfg(target_arch = "nvptx64")]
#[global_allocator]
static GLOBAL: GpuAllocator = GpuAllocator;
