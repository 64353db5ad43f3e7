//! Argument binding: which host values a kernel's parameters accept in each target memory,
//! and how each gives its address. An allocation passed for a slice is *bound* to the launch
//! being built: on a GPU it gives its address and a guard from cudarc
//! ([`cudarc::driver::DevicePtr`]) that orders the launch after the allocation's earlier
//! writes now and records the kernel's use on the launch stream once the kernel is queued, so
//! later frees and host reads wait for it; on the emulator it gives its address only.

use cudarc::driver::{
    CudaSlice, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, UnifiedSlice, UnifiedView,
    UnifiedViewMut,
};
use lookahead_device::DeviceCopy;

use super::target::{GpuArgs, GpuMemory, HostArgs, HostMemory, TargetMemory};

/// An allocation of `T` in memory `M` that a read-only kernel slice (`&[T]`, a read-only view)
/// accepts: cudarc's GPU allocations, [`crate::ManagedBuffer`] and its views for
/// [`GpuMemory`]; `Vec<T>` and `[T]` for the emulator's [`HostMemory`].
///
/// # Safety
/// `bind` must return the address of `kernel_len()` valid elements of `T`, addressable by the
/// launch target for as long as the borrow lasts, and order the launch after the
/// allocation's pending writes.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel slice of `{T}` in `{M}`",
    label = "expected a GPU allocation of `{T}` (cudarc CudaSlice/CudaView/UnifiedSlice, lookahead ManagedBuffer/...) for a GPU launch, or host memory (`Vec<{T}>`, `[{T}]`) for an emulator launch"
)]
pub unsafe trait KernelSlice<T, M: TargetMemory = GpuMemory> {
    /// Number of elements.
    fn kernel_len(&self) -> usize;
    /// The first element's address, with the allocation bound to the launch being built.
    fn bind<'a>(&'a self, args: &mut M::Args<'a>) -> u64;
}

/// An allocation a writable kernel slice (`&mut [T]`, a writable view) accepts.
///
/// # Safety
/// As [`KernelSlice`], for writes too, ordered after the allocation's pending reads as well.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a writable kernel slice of `{T}` in `{M}`",
    label = "expected `&mut` a GPU allocation of `{T}` (cudarc CudaSlice/CudaViewMut/UnifiedSlice, lookahead ManagedBuffer/...) for a GPU launch, or `&mut` host memory (`Vec<{T}>`, `[{T}]`) for an emulator launch"
)]
pub unsafe trait KernelSliceMut<T, M: TargetMemory = GpuMemory> {
    /// Number of elements.
    fn kernel_len(&self) -> usize;
    /// The first element's address, with the allocation bound to the launch for writing.
    fn bind_mut<'a>(&'a mut self, args: &mut M::Args<'a>) -> u64;
}

/// Marks allocations in device memory (`cuMemAlloc`): what `DeviceSlice<T>` parameters take.
/// Host memory has it too, for the emulator (a GPU launch still needs a GPU allocation).
///
/// # Safety
/// Only for types whose memory is device memory, or host memory.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not device memory",
    label = "a `DeviceSlice`/`DeviceSliceMut` parameter takes device memory (cudarc CudaSlice/CudaView)"
)]
pub unsafe trait DeviceMemory {}

/// Marks managed (Unified Memory) allocations: what `ManagedSlice<T>` parameters take.
/// Host memory has it too, for the emulator (a GPU launch still needs a GPU allocation).
///
/// # Safety
/// Only for types whose memory comes from `cuMemAllocManaged`, or host memory.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not managed memory",
    label = "a `ManagedSlice`/`ManagedSliceMut` parameter takes managed memory (lookahead ManagedBuffer, cudarc UnifiedSlice)"
)]
pub unsafe trait ManagedMemory {}

macro_rules! view_arg {
    ($(#[$doc:meta])* $name:ident: $slice:ident + $marker:ident, $message:literal, $label:literal) => {
        $(#[$doc])*
        #[diagnostic::on_unimplemented(message = $message, label = $label)]
        pub trait $name<T, M: TargetMemory>: $slice<T, M> + $marker {}
        impl<T, M: TargetMemory, X: $slice<T, M> + $marker + ?Sized> $name<T, M> for X {}
    };
}

view_arg!(
    /// What a `DeviceSlice<T>` field of a `#[derive(KernelParams)]` struct takes on the host.
    DeviceSliceArg: KernelSlice + DeviceMemory,
    "`{Self}` cannot be passed for a `DeviceSlice<{T}>` field in `{M}`",
    "expected `&` device memory of `{T}` (cudarc CudaSlice/CudaView, lookahead Untracked/GrowableVec; host memory on the emulator)"
);
view_arg!(
    /// What a `DeviceSliceMut<T>` field of a `#[derive(KernelParams)]` struct takes.
    DeviceSliceArgMut: KernelSliceMut + DeviceMemory,
    "`{Self}` cannot be passed for a `DeviceSliceMut<{T}>` field in `{M}`",
    "expected `&mut` device memory of `{T}` (cudarc CudaSlice/CudaViewMut, lookahead UntrackedMut/GrowableVec; host memory on the emulator)"
);
view_arg!(
    /// What a `ManagedSlice<T>` field of a `#[derive(KernelParams)]` struct takes.
    ManagedSliceArg: KernelSlice + ManagedMemory,
    "`{Self}` cannot be passed for a `ManagedSlice<{T}>` field in `{M}`",
    "expected `&` managed memory of `{T}` (lookahead ManagedBuffer/ManagedView, or UntrackedManaged in a graph; cudarc UnifiedSlice; host memory on the emulator)"
);
view_arg!(
    /// What a `ManagedSliceMut<T>` field of a `#[derive(KernelParams)]` struct takes.
    ManagedSliceArgMut: KernelSliceMut + ManagedMemory,
    "`{Self}` cannot be passed for a `ManagedSliceMut<{T}>` field in `{M}`",
    "expected `&mut` managed memory of `{T}` (lookahead ManagedBuffer/ManagedViewMut, or UntrackedManagedMut in a graph; cudarc UnifiedSlice; host memory on the emulator)"
);

/// A host value a by-value kernel parameter of type `P` accepts in memory `M`: a
/// [`DeviceCopy`] value itself, or the `<Name>Args` struct `#[derive(KernelParams)]`
/// generates for `P`, whose views are bound here.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter of type `{P}`",
    label = "expected a `{P}` value (a DeviceCopy type), or the `{P}Args` struct of a #[derive(KernelParams)] `{P}`"
)]
pub trait KernelValue<P, M: TargetMemory> {
    /// The parameter's value, with any allocations it names bound to the launch.
    fn bind<'b>(self, args: &mut M::Args<'b>) -> P
    where
        Self: 'b;
}

impl<P: DeviceCopy, M: TargetMemory> KernelValue<P, M> for P {
    fn bind<'b>(self, _args: &mut M::Args<'b>) -> P
    where
        Self: 'b,
    {
        self
    }
}

/// Binds a cudarc allocation for reading: waits for its writes now, records the read after
/// the kernel.
pub fn bind_read<'a, T>(slice: &'a impl DevicePtr<T>, args: &mut GpuArgs<'a>) -> u64 {
    let (ptr, used) = slice.device_ptr(args.stream());
    args.keep(used);
    ptr
}

/// Binds a cudarc allocation for writing: waits for its reads and writes now, records the
/// write after the kernel.
pub fn bind_write<'a, T>(slice: &'a mut impl DevicePtrMut<T>, args: &mut GpuArgs<'a>) -> u64 {
    let (ptr, used) = slice.device_ptr_mut(args.stream());
    args.keep(used);
    ptr
}

macro_rules! gpu_slice {
    ($([$($lt:lifetime)?] $ty:ty, $marker:ident, $mutable:tt;)*) => {$(
        // SAFETY: cudarc's allocation, bound with its own stream ordering.
        unsafe impl<$($lt,)? T> KernelSlice<T, GpuMemory> for $ty {
            fn kernel_len(&self) -> usize {
                self.len()
            }
            fn bind<'a>(&'a self, args: &mut GpuArgs<'a>) -> u64 {
                bind_read(self, args)
            }
        }
        // SAFETY: the type's memory is of the marker's kind.
        unsafe impl<$($lt,)? T> $marker for $ty {}
        gpu_slice!(@mut $mutable [$($lt)?] $ty);
    )*};
    (@mut yes [$($lt:lifetime)?] $ty:ty) => {
        // SAFETY: as above, for writing.
        unsafe impl<$($lt,)? T> KernelSliceMut<T, GpuMemory> for $ty {
            fn kernel_len(&self) -> usize {
                self.len()
            }
            fn bind_mut<'a>(&'a mut self, args: &mut GpuArgs<'a>) -> u64 {
                bind_write(self, args)
            }
        }
    };
    (@mut no [$($lt:lifetime)?] $ty:ty) => {};
}

gpu_slice! {
    [] CudaSlice<T>, DeviceMemory, yes;
    ['c] CudaView<'c, T>, DeviceMemory, no;
    [] UnifiedSlice<T>, ManagedMemory, yes;
    ['c] UnifiedView<'c, T>, ManagedMemory, no;
    ['c] UnifiedViewMut<'c, T>, ManagedMemory, yes;
}

// A `CudaViewMut` has no read-only address in cudarc: it is passed for writable slices only.
// SAFETY: as for the types above.
unsafe impl<T> KernelSliceMut<T, GpuMemory> for CudaViewMut<'_, T> {
    fn kernel_len(&self) -> usize {
        self.len()
    }
    fn bind_mut<'a>(&'a mut self, args: &mut GpuArgs<'a>) -> u64 {
        bind_write(self, args)
    }
}
// SAFETY: device memory.
unsafe impl<T> DeviceMemory for CudaViewMut<'_, T> {}

// A reference to an allocation is the allocation (so `&&[T]` and `&Vec<T>` coerce to the
// `dyn` argument traits, which need a sized type).
// SAFETY: forwards to `S`.
unsafe impl<T, M: TargetMemory, S: KernelSlice<T, M> + ?Sized> KernelSlice<T, M> for &S {
    fn kernel_len(&self) -> usize {
        (**self).kernel_len()
    }
    fn bind<'a>(&'a self, args: &mut M::Args<'a>) -> u64 {
        (**self).bind(args)
    }
}
// SAFETY: as above.
unsafe impl<S: DeviceMemory + ?Sized> DeviceMemory for &S {}
// SAFETY: as above.
unsafe impl<S: ManagedMemory + ?Sized> ManagedMemory for &S {}

// Host memory for the emulator: the address is the kernel's lowered pointer parameter.
macro_rules! host_slice {
    ($($ty:ty),*) => {$(
        // SAFETY: host memory borrowed for the (synchronous) emulated launch.
        unsafe impl<T> KernelSlice<T, HostMemory> for $ty {
            fn kernel_len(&self) -> usize {
                self.len()
            }
            fn bind<'a>(&'a self, _args: &mut HostArgs<'a>) -> u64 {
                self.as_ptr() as u64
            }
        }
        // SAFETY: as above.
        unsafe impl<T> KernelSliceMut<T, HostMemory> for $ty {
            fn kernel_len(&self) -> usize {
                self.len()
            }
            fn bind_mut<'a>(&'a mut self, _args: &mut HostArgs<'a>) -> u64 {
                self.as_mut_ptr() as u64
            }
        }
        // SAFETY: host memory stands for both kinds on the emulator.
        unsafe impl<T> DeviceMemory for $ty {}
        // SAFETY: as above.
        unsafe impl<T> ManagedMemory for $ty {}
    )*};
}
host_slice!([T], Vec<T>);
