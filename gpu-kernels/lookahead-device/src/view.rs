//! Typed views of GPU-visible memory, rebuilt by `#[kernel]` from the (pointer, length)
//! pairs a launch passes.
//!
//! | type | memory | access |
//! | --- | --- | --- |
//! | [`DeviceSlice<T>`] / [`DeviceSliceMut<T>`] | device memory (`cuMemAlloc`) | read / read-write |
//! | [`ManagedSlice<T>`] / [`ManagedSliceMut<T>`] | managed, Unified Memory (`cuMemAllocManaged`) | read / read-write |
//!
//! All four dereference to `[T]`, so indexing (`x[i]`) is bounds-checked (an out-of-bounds
//! index traps the kernel), `get` returns an `Option`, and `get_unchecked` is the explicit
//! unchecked path. The managed types tell `#[prefetch_next]` and the prefetch helpers that
//! the data is Unified Memory ([`MemoryKind::Managed`]), so they can pick the mechanism that
//! works for it. A launch hands the same allocation to every thread: threads must write
//! disjoint elements, or use the [`crate::atomic`] functions.
//!
//! The views are `#[repr(C)]` (an address, then a length), so they can be fields of kernel
//! parameter structs (`#[derive(KernelParams)]`). They are not [`crate::DeviceCopy`]: a view
//! is a right to memory, which only a launch (or `unsafe` code) may hand out, so it is never
//! an element of a slice or read back from the GPU.

use core::ops::{Deref, DerefMut};

/// Where a view's memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// Plain device memory (or memory whose kind the type does not say, as for `&[T]`).
    Device,
    /// Managed (Unified) memory: pages may be resident on the host.
    Managed,
}

macro_rules! view {
    ($(#[$doc:meta])* $name:ident, $ptr:ty, $kind:expr, $($mut_:ident)?) => {
        $(#[$doc])*
        #[derive(Debug)]
        #[repr(C)]
        pub struct $name<T> {
            ptr: $ptr,
            len: usize,
        }

        impl<T> $name<T> {
            /// Which memory the view points into.
            pub const KIND: MemoryKind = $kind;

            /// A view of `len` elements at `ptr` (`#[kernel]` calls this for you).
            ///
            /// # Safety
            /// `ptr` must be valid for `len` elements of `T` (reads, and writes for the
            /// mutable views) for as long as the view is used, or `len` must be 0.
            #[inline(always)]
            pub unsafe fn from_raw_parts(ptr: $ptr, len: usize) -> Self {
                $name { ptr, len }
            }

            /// The first element's address.
            #[inline(always)]
            pub fn as_ptr(&self) -> *const T {
                self.ptr as *const T
            }
        }

        impl<T> Deref for $name<T> {
            type Target = [T];
            #[inline(always)]
            fn deref(&self) -> &[T] {
                if self.len == 0 {
                    &[]
                } else {
                    // SAFETY: promised by `from_raw_parts`.
                    unsafe { core::slice::from_raw_parts(self.ptr as *const T, self.len) }
                }
            }
        }

        $(
        impl<T> DerefMut for $name<T> {
            #[inline(always)]
            fn deref_mut(&mut self) -> &mut [T] {
                let _ = stringify!($mut_);
                if self.len == 0 {
                    &mut []
                } else {
                    // SAFETY: promised by `from_raw_parts`.
                    unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) }
                }
            }
        }

        impl<T> $name<T> {
            /// The first element's address, for writing.
            #[inline(always)]
            pub fn as_mut_ptr(&mut self) -> *mut T {
                self.ptr
            }
        }
        )?
    };
}

view!(
    /// A read-only view of device memory (a kernel parameter of type `DeviceSlice<T>`; the
    /// typed launcher accepts only device allocations for it).
    DeviceSlice, *const T, MemoryKind::Device,
);
view!(
    /// A writable view of device memory (`DeviceSliceMut<T>` parameter).
    DeviceSliceMut, *mut T, MemoryKind::Device, mut
);
view!(
    /// A read-only view of managed (Unified) memory (`ManagedSlice<T>` parameter; the typed
    /// launcher accepts only managed allocations for it).
    ManagedSlice, *const T, MemoryKind::Managed,
);
view!(
    /// A writable view of managed (Unified) memory (`ManagedSliceMut<T>` parameter).
    ManagedSliceMut, *mut T, MemoryKind::Managed, mut
);

impl<T> Clone for DeviceSlice<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DeviceSlice<T> {}
impl<T> Clone for ManagedSlice<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for ManagedSlice<T> {}

/// A `&[T]` kernel parameter rebuilt from its pointer and length (`#[kernel]` calls this).
///
/// # Safety
/// As [`DeviceSlice::from_raw_parts`]; the slice must outlive `'a`.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn slice_from_raw<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        core::slice::from_raw_parts(ptr, len)
    }
}

/// A `&mut [T]` kernel parameter rebuilt from its pointer and length.
///
/// # Safety
/// As [`slice_from_raw`], for writes too.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn slice_from_raw_mut<'a, T>(ptr: *mut T, len: usize) -> &'a mut [T] {
    if len == 0 {
        &mut []
    } else {
        core::slice::from_raw_parts_mut(ptr, len)
    }
}
