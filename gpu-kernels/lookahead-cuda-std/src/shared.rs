//! Block-shared memory (`cuda_std::shared`): static arrays per call site, and the dynamic
//! shared memory a launch asks for.

/// `shared_array![T; N]`: a `*mut T` to `N` elements of `T` in shared memory, one array per
/// call site and block, uninitialised (as CUDA's `__shared__ T a[N]`). Calling it again at
/// the same site (in a loop) gives the same array.
///
/// ```ignore
/// let tile = shared_array![f32; 256];
/// unsafe { *tile.add(thread::thread_idx_x() as usize) = 1.0 };
/// ```
#[macro_export]
macro_rules! shared_array {
    [$t:ty; $n:expr] => {{
        #[$crate::address_space(shared)]
        static mut SHARED_ARRAY: ::core::mem::MaybeUninit<[$t; $n]> = ::core::mem::MaybeUninit::uninit();
        #[allow(unused_unsafe)]
        let array = unsafe { &raw mut SHARED_ARRAY };
        array as *mut $t
    }};
}

#[cfg(target_arch = "nvptx64")]
extern "C" {
    /// The launch's dynamic shared memory (`extern __shared__`); the builder moves the
    /// symbol to shared memory (`.extern .shared .align 16 .b8 ...[]`).
    #[link_name = "__lookahead_addrspace_shared__dynamic"]
    static mut DYNAMIC_SHARED: [u8; 0];
}

/// The dynamic shared memory of the launch (`extern __shared__ T smem[]`): as many bytes as
/// the launch's `shared_mem_bytes`, aligned to 16, the same pointer on every call.
#[inline(always)]
pub fn dynamic_shared_mem<T>() -> *mut T {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: only the address is taken (safe for an extern static since Rust 1.82's
        // `&raw`, unsafe before: the block is for older device toolchains).
        #[allow(unused_unsafe)]
        let shared = unsafe { &raw mut DYNAMIC_SHARED };
        shared as *mut T
    }
    #[cfg(not(target_arch = "nvptx64"))]
    unimplemented!("`dynamic_shared_mem` can only be used on the GPU")
}
