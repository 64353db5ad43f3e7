//! Shared memory: [`shared_array!`](crate::shared_array) declares a block-wide array in
//! PTX's `.shared` state space and returns a [`SharedArray`] handle to it;
//! [`dynamic_shared`] is the launch's dynamic shared memory, sized by its `LaunchConfig`.
//!
//! ```ignore
//! let tile = shared_array!(f32; 256);     // one 1 KiB array per block
//! tile.set(thread_idx_x() as usize, x[i]);
//! sync_threads();
//! let left = tile.get(((thread_idx_x() + 255) % 256) as usize);
//! ```
//!
//! Each `shared_array!` call site is one array, shared by all threads of a block (calling
//! it in a loop returns the same array each time). On the GPU it is a static that the
//! builder moves into `.shared` at link time, so LLVM knows its accesses are to shared
//! memory and emits `ld.shared`/`st.shared` (`LDS`/`STS`) rather than generic accesses.

/// A handle to a block-wide array of `N` elements of `T` in shared memory. Copy it freely;
/// every copy names the same memory. Accesses are bounds-checked (an out-of-range index
/// traps); the `_unchecked` forms are the explicit unchecked path. Threads must separate
/// conflicting accesses with [`crate::sync::sync_threads`] or use [`SharedArray::atomic_add`].
#[derive(Debug)]
pub struct SharedArray<T, const N: usize> {
    ptr: *mut T,
}

impl<T, const N: usize> Clone for SharedArray<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for SharedArray<T, N> {}

// Without the `Copy` bound, so that `shared_array!` of another type fails only on the
// macro's own check, which names the element type.
impl<T, const N: usize> SharedArray<T, N> {
    /// Wraps the generic address of a `.shared` array (`shared_array!` calls this).
    ///
    /// # Safety
    /// `ptr` must be the generic address of `N` elements of shared memory, aligned for `T`.
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn from_generic_ptr(ptr: *mut T) -> Self {
        SharedArray { ptr }
    }
}

impl<T: Copy, const N: usize> SharedArray<T, N> {
    /// Number of elements, `N`.
    #[inline(always)]
    pub const fn len(&self) -> usize {
        N
    }

    /// Whether `N` is 0.
    #[inline(always)]
    pub const fn is_empty(&self) -> bool {
        N == 0
    }

    /// Reads element `i` (bounds-checked).
    #[inline(always)]
    pub fn get(&self, i: usize) -> T {
        check_index(i, N);
        // SAFETY: in bounds of the array `from_generic_ptr` was given.
        unsafe { self.get_unchecked(i) }
    }

    /// Writes element `i` (bounds-checked).
    #[inline(always)]
    pub fn set(&self, i: usize, value: T) {
        check_index(i, N);
        // SAFETY: as in `get`.
        unsafe { self.set_unchecked(i, value) }
    }

    /// Reads element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < N`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        // SAFETY: promised by the caller.
        unsafe { read(self.ptr, N, i) }
    }

    /// Writes element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < N`.
    #[inline(always)]
    pub unsafe fn set_unchecked(&self, i: usize, value: T) {
        // SAFETY: promised by the caller.
        unsafe { write(self.ptr, N, i, value) }
    }

    /// Atomically adds `value` to element `i` (bounds-checked) and returns the old value.
    #[inline(always)]
    pub fn atomic_add(&self, i: usize, value: T) -> T
    where
        T: crate::atomic::AtomicAdd,
    {
        atomic_add(self.ptr, N, i, value)
    }

    /// The generic address of element 0.
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
        self.ptr
    }
}

/// The launch's dynamic shared memory as a block-wide array of `T`: as many whole elements
/// as the launch's `LaunchConfig::with_shared_mem(bytes)` gives it (`bytes /
/// size_of::<T>()`, none without it), 16-byte aligned. Above 48 KiB the launch opts the
/// kernel in (up to 227 KiB per block on the H100, less the block's static shared memory).
/// Accesses are bounds-checked against the launch's size, as [`SharedArray`]'s.
///
/// ```ignore
/// let tile = dynamic_shared::<f32>();   // launched with .with_shared_mem(64 * 1024)
/// tile.set(thread_idx_x() as usize, x[i]);
/// ```
#[inline(always)]
pub fn dynamic_shared<T: Copy>() -> DynamicShared<T> {
    gpu_or_host!(
        {
            let bytes: u32;
            // SAFETY: reads a special register.
            unsafe {
                core::arch::asm!(
                    "mov.u32 {b}, %dynamic_smem_size;",
                    b = out(reg32) bytes,
                    options(pure, nomem, nostack)
                )
            };
            DynamicShared {
                // Only the address is taken (safe for an extern static).
                ptr: (&raw mut DYNAMIC_SHARED) as *mut T,
                len: bytes as usize / size_of::<T>().max(1),
            }
        },
        {
            let (ptr, bytes) =
                crate::__emu::hooks::dynamic_shared("dynamic_shared()", size_of::<T>());
            DynamicShared {
                ptr: ptr as *mut T,
                len: bytes / size_of::<T>().max(1),
            }
        }
    )
}

#[cfg(target_arch = "nvptx64")]
unsafe extern "C" {
    /// The launch's dynamic shared memory; the builder declares it in `.shared` (`.extern
    /// .shared .align 16 .b8 ...[]`), sized at launch.
    #[link_name = "__lookahead_addrspace_shared__dynamic"]
    static mut DYNAMIC_SHARED: [u8; 0];
}

/// A handle to the launch's dynamic shared memory as `len()` elements of `T`
/// ([`dynamic_shared`]). Copy it freely; every copy names the same memory. Threads must
/// separate conflicting accesses with [`crate::sync::sync_threads`] or use
/// [`DynamicShared::atomic_add`].
#[derive(Debug)]
pub struct DynamicShared<T> {
    ptr: *mut T,
    len: usize,
}

impl<T> Clone for DynamicShared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DynamicShared<T> {}

impl<T: Copy> DynamicShared<T> {
    /// Number of elements: the launch's dynamic shared bytes over `size_of::<T>()`.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the launch gave no dynamic shared memory (or less than one `T`).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads element `i` (bounds-checked).
    #[inline(always)]
    pub fn get(&self, i: usize) -> T {
        check_index(i, self.len);
        // SAFETY: in bounds of the launch's dynamic shared memory.
        unsafe { read(self.ptr, self.len, i) }
    }

    /// Writes element `i` (bounds-checked).
    #[inline(always)]
    pub fn set(&self, i: usize, value: T) {
        check_index(i, self.len);
        // SAFETY: as in `get`.
        unsafe { write(self.ptr, self.len, i, value) }
    }

    /// Reads element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        // SAFETY: promised by the caller.
        unsafe { read(self.ptr, self.len, i) }
    }

    /// Writes element `i` without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn set_unchecked(&self, i: usize, value: T) {
        // SAFETY: promised by the caller.
        unsafe { write(self.ptr, self.len, i, value) }
    }

    /// Atomically adds `value` to element `i` (bounds-checked) and returns the old value.
    #[inline(always)]
    pub fn atomic_add(&self, i: usize, value: T) -> T
    where
        T: crate::atomic::AtomicAdd,
    {
        atomic_add(self.ptr, self.len, i, value)
    }

    /// The generic address of element 0.
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
        self.ptr
    }
}

/// Element `i` of the `len` elements of shared memory at `ptr` (on the emulator, checked
/// for races and uninitialised reads).
///
/// # Safety
/// `i < len`, and `ptr` is a shared array of `len` elements.
#[inline(always)]
unsafe fn read<T: Copy>(ptr: *mut T, len: usize, i: usize) -> T {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::__emu::hooks::shared_access(ptr as *const u8, len, i, false);
    let _ = len;
    // SAFETY: promised by the caller.
    unsafe { ptr.add(i).read() }
}

/// Writes element `i` of the `len` elements of shared memory at `ptr`.
///
/// # Safety
/// As [`read`].
#[inline(always)]
unsafe fn write<T: Copy>(ptr: *mut T, len: usize, i: usize, value: T) {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::__emu::hooks::shared_access(ptr as *const u8, len, i, true);
    let _ = len;
    // SAFETY: promised by the caller.
    unsafe { ptr.add(i).write(value) }
}

/// Atomically adds `value` to element `i` (bounds-checked) of the `len` elements of shared
/// memory at `ptr` and returns the old value.
#[inline(always)]
fn atomic_add<T: crate::atomic::AtomicAdd>(ptr: *mut T, len: usize, i: usize, value: T) -> T {
    check_index(i, len);
    #[cfg(not(target_arch = "nvptx64"))]
    crate::__emu::hooks::shared_atomic(ptr as *const u8, len, i);
    // SAFETY: in bounds (checked) of an array the handle was made for, aligned.
    unsafe { T::atomic_add_ptr(ptr.add(i), value) }
}

#[inline(always)]
fn check_index(i: usize, len: usize) {
    // The GPU's trapping panic handler prints nothing, so it gets no formatting code.
    #[cfg(target_arch = "nvptx64")]
    assert!(i < len, "shared array index out of bounds");
    #[cfg(not(target_arch = "nvptx64"))]
    assert!(
        i < len,
        "shared array index out of bounds: the len is {len} but the index is {i}"
    );
}

/// The storage of a `shared_array!` on the GPU: uninitialised (shared memory has no initial
/// value) and 16-byte aligned, so vector and asynchronous copies may target any array.
#[doc(hidden)]
#[repr(C, align(16))]
pub struct SharedStorage<T, const N: usize>(core::mem::MaybeUninit<[T; N]>);

impl<T, const N: usize> SharedStorage<T, N> {
    /// The only value: nothing written.
    pub const UNINIT: Self = SharedStorage(core::mem::MaybeUninit::uninit());
}

/// The emulated block's array for this `shared_array!` call site (used by `shared_array!`
/// on the host).
#[doc(hidden)]
#[macro_export]
macro_rules! __shared_host_ptr {
    ($sym:literal, $site:expr, $ty:ty, $len:expr) => {
        $crate::__emu::hooks::shared_array(
            $sym,
            $site,
            ::core::mem::size_of::<[$ty; $len]>(),
            ::core::mem::align_of::<$ty>(),
            ::core::mem::size_of::<$ty>(),
        ) as *mut $ty
    };
}
