//! Kernel arguments: how the launchers `#[kernel]` generates turn host values into a kernel's
//! parameters, one protocol for the GPU and the emulator.
//!
//! A launch builds a [`Params`] list (each lowered parameter's bytes, aligned), the same for
//! both targets: the GPU launch hands the driver a pointer to each, the emulator's threads read
//! them back. An allocation passed for a slice is *bound*: it gives its address and, on a GPU,
//! a guard from cudarc ([`cudarc::driver::DevicePtr`]) that orders the launch after the
//! allocation's earlier writes now and records the kernel's use on the launch stream once the
//! kernel is queued, so later frees and host reads wait for it.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut,
    SyncOnDrop, UnifiedSlice, UnifiedView, UnifiedViewMut,
};
use lookahead_device::DeviceCopy;

use super::autotune::{AutoTuner, Plan};
use super::LaunchConfig;
use crate::error::{DriverContext, Error, Result};

/// The lowered parameters of one launch, as bytes: each parameter at an offset aligned for
/// its type. The GPU launch passes a pointer to each; the emulator's threads read them back
/// with [`Params::get`].
#[derive(Debug, Default, Clone)]
pub struct Params {
    // 16-byte units, so every offset aligned within the buffer is aligned in memory.
    words: Vec<u128>,
    len: usize,
    spans: Vec<(usize, usize)>,
}

impl Params {
    /// Appends `value`'s bytes.
    ///
    /// # Safety
    /// `V` has no padding bytes (every [`lookahead_device::KernelParam`] type; the `#[kernel]` launchers check
    /// that each parameter's type is one, with an error naming the parameter).
    ///
    /// # Panics
    /// When the type is aligned to more than 16 bytes (no kernel parameter type is).
    pub unsafe fn push<V>(&mut self, value: &V) {
        let (size, align) = (std::mem::size_of::<V>(), std::mem::align_of::<V>());
        assert!(
            align <= 16,
            "kernel parameters are aligned to at most 16 bytes"
        );
        let at = self.len.next_multiple_of(align);
        self.len = at + size;
        self.words.resize(self.len.div_ceil(16), 0);
        // SAFETY: `V` has no padding (the caller's promise), so all `size` bytes are
        // initialised; the buffer holds `at + size` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                value as *const V as *const u8,
                (self.words.as_mut_ptr() as *mut u8).add(at),
                size,
            )
        };
        self.spans.push((at, size));
    }

    /// Parameter `i` as a `V` (a copy of its bytes: each emulated thread gets its own, as each
    /// GPU thread does).
    ///
    /// # Safety
    /// Parameter `i` was pushed from a `V` (or from a value whose bytes are a valid `V`).
    ///
    /// # Panics
    /// When there is no parameter `i` or its size is not `V`'s: the launcher and the entry
    /// disagree, a bug in `#[kernel]`.
    pub unsafe fn get<V>(&self, i: usize) -> V {
        let (at, size) = self.spans[i];
        assert_eq!(
            size,
            std::mem::size_of::<V>(),
            "kernel parameter {i} has {size} bytes, read as {}",
            std::any::type_name::<V>()
        );
        // SAFETY: `size_of::<V>()` bytes pushed from a `V` (the caller's promise), at an
        // offset aligned for `V`.
        unsafe { ((self.words.as_ptr() as *const u8).add(at) as *const V).read() }
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// A pointer to each parameter, as `cuLaunchKernel` takes them.
    fn pointers(&mut self) -> Vec<*mut c_void> {
        let base = self.words.as_mut_ptr() as *mut u8;
        // SAFETY: every span lies inside the buffer.
        (self.spans.iter())
            .map(|&(at, _)| unsafe { base.add(at) } as *mut c_void)
            .collect()
    }
}

// SAFETY: the bytes include addresses, which the emulator's threads dereference exactly as the
// GPU would; the launcher borrows the memory they point to for the whole launch.
unsafe impl Sync for Params {}

mod sealed {
    pub trait Sealed {}
}

/// How arguments are bound and a launch made in one kind of memory: GPU allocations through
/// the driver, or host memory through the emulator. `#[kernel]` launchers use it; it is
/// sealed.
pub trait MemorySpace: sealed::Sealed + 'static {
    /// What [`super::LaunchOn::prepare`] returns: the kernel and where it runs.
    type Prepared;
    /// An argument list being built.
    type Args<'a>
    where
        Self: 'a;
    /// An empty argument list for `prepared`.
    fn args(prepared: &Self::Prepared) -> Self::Args<'_>;
    /// Appends a parameter by value.
    ///
    /// # Safety
    /// As [`Params::push`]: `V` has no padding bytes.
    unsafe fn push<V>(args: &mut Self::Args<'_>, value: &V);
    /// Launches with `cfg`. The emulator runs `entry` once per thread, with the parameters;
    /// the GPU runs the PTX entry `kernel` and ignores it. When `plan` asks for a measurement,
    /// the GPU records a pair of timing events around the kernel on its stream and hands them
    /// to [`AutoTuner::global`] (read later, never waited for here).
    fn launch(
        args: Self::Args<'_>,
        kernel: &'static str,
        cfg: LaunchConfig,
        entry: &(dyn Fn(&Params) + Sync),
        plan: &Plan,
    ) -> Result<()>;
}

/// GPU allocations (cudarc `CudaSlice`, `UnifiedSlice`, [`crate::ManagedBuffer`], ...): the
/// memory of the GPU launch targets.
#[derive(Debug)]
pub enum GpuMemory {}

/// Host memory (`Vec<T>`, `[T]`): the memory of the CPU emulator, where it stands for device
/// and managed memory alike.
#[derive(Debug)]
pub enum HostMemory {}

impl sealed::Sealed for GpuMemory {}
impl sealed::Sealed for HostMemory {}

/// The argument list of a GPU launch: the parameters, and the stream-ordering guards of the
/// allocations bound to it (dropped once the kernel is queued, which records its use).
#[derive(Debug)]
pub struct GpuArgs<'a> {
    function: &'a CudaFunction,
    stream: &'a Arc<CudaStream>,
    params: Params,
    uses: Vec<SyncOnDrop<'a>>,
}

impl<'a> GpuArgs<'a> {
    /// The launch stream.
    pub fn stream(&self) -> &'a Arc<CudaStream> {
        self.stream
    }

    /// Keeps `guard` until the kernel is queued (see [`cudarc::driver::DevicePtr`]).
    pub fn keep(&mut self, guard: SyncOnDrop<'a>) {
        self.uses.push(guard);
    }
}

impl MemorySpace for GpuMemory {
    type Prepared = (CudaFunction, Arc<CudaStream>);
    type Args<'a> = GpuArgs<'a>;
    fn args(prepared: &Self::Prepared) -> GpuArgs<'_> {
        GpuArgs {
            function: &prepared.0,
            stream: &prepared.1,
            params: Params::default(),
            uses: Vec::new(),
        }
    }
    unsafe fn push<V>(args: &mut GpuArgs<'_>, value: &V) {
        // SAFETY: as promised by the caller.
        unsafe { args.params.push(value) }
    }
    fn launch(
        mut args: GpuArgs<'_>,
        kernel: &'static str,
        cfg: LaunchConfig,
        _entry: &(dyn Fn(&Params) + Sync),
        plan: &Plan,
    ) -> Result<()> {
        let stream = args.stream;
        stream
            .context()
            .bind_to_thread()
            .during("cuCtxSetCurrent")?;
        let mut pointers = args.params.pointers();
        // While a graph is updated, the launch sets its kernel node instead.
        let function = args.function.cu_function();
        if let Some(set) = crate::graph::redirect(stream, kernel, function, cfg, &mut pointers) {
            return set;
        }
        // No timing events inside a graph capture: they would be captured, not recorded.
        let measure = plan.measure.filter(|_| !crate::graph::capturing(stream));
        let events = match measure {
            Some(_) => Some(timing_events(stream)?),
            None => None,
        };
        if let Some((start, _)) = &events {
            if plan.flush_l2 {
                // Outside the timed events: each candidate is timed from a cold L2.
                AutoTuner::global().flush_l2(stream)?;
            }
            start.record(stream).during("cuEventRecord")?;
        }
        // SAFETY: `#[kernel]` pushes one parameter per lowered parameter of the PTX entry it
        // generated, in order and with its type (an address and a length per slice); every
        // address is bound to an allocation borrowed for this launch.
        unsafe {
            cudarc::driver::result::launch_kernel(
                function,
                cfg.grid_dim,
                cfg.block_dim,
                cfg.shared_mem_bytes,
                stream.cu_stream(),
                &mut pointers,
            )
        }
        .map_err(|source| Error::Launch { kernel, source })?;
        if let Some((_, end)) = &events {
            end.record(stream).during("cuEventRecord")?;
        }
        if let Some(key) = measure {
            AutoTuner::global().launched(key, plan.variant, events);
        }
        crate::graph::launched(stream, kernel)?;
        // Dropping `args` records every bound allocation's use, after the kernel.
        Ok(())
    }
}

fn timing_events(
    stream: &CudaStream,
) -> Result<(cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)> {
    let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let ctx = stream.context();
    Ok((
        ctx.new_event(flags).during("cuEventCreate")?,
        ctx.new_event(flags).during("cuEventCreate")?,
    ))
}

/// The argument list of an emulated launch.
#[derive(Debug)]
pub struct HostArgs<'a> {
    emulator: &'a crate::emu::Emulator,
    params: Params,
}

impl MemorySpace for HostMemory {
    type Prepared = crate::emu::Emulator;
    type Args<'a> = HostArgs<'a>;
    fn args(emulator: &crate::emu::Emulator) -> HostArgs<'_> {
        HostArgs {
            emulator,
            params: Params::default(),
        }
    }
    unsafe fn push<V>(args: &mut HostArgs<'_>, value: &V) {
        // SAFETY: as promised by the caller.
        unsafe { args.params.push(value) }
    }
    fn launch(
        args: HostArgs<'_>,
        kernel: &'static str,
        cfg: LaunchConfig,
        entry: &(dyn Fn(&Params) + Sync),
        _plan: &Plan,
    ) -> Result<()> {
        let params = &args.params;
        let (g, b) = (cfg.grid_dim, cfg.block_dim);
        args.emulator
            .run(kernel, [g.0, g.1, g.2], [b.0, b.1, b.2], &|| entry(params))
            .map_err(|e| Error::Emulator(Box::new(e)))
    }
}

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
pub unsafe trait KernelSlice<T, M: MemorySpace = GpuMemory> {
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
pub unsafe trait KernelSliceMut<T, M: MemorySpace = GpuMemory> {
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
        pub trait $name<T, M: MemorySpace>: $slice<T, M> + $marker {}
        impl<T, M: MemorySpace, X: $slice<T, M> + $marker + ?Sized> $name<T, M> for X {}
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
    "expected `&` managed memory of `{T}` (lookahead ManagedBuffer/ManagedView, cudarc UnifiedSlice; host memory on the emulator)"
);
view_arg!(
    /// What a `ManagedSliceMut<T>` field of a `#[derive(KernelParams)]` struct takes.
    ManagedSliceArgMut: KernelSliceMut + ManagedMemory,
    "`{Self}` cannot be passed for a `ManagedSliceMut<{T}>` field in `{M}`",
    "expected `&mut` managed memory of `{T}` (lookahead ManagedBuffer/ManagedViewMut, cudarc UnifiedSlice; host memory on the emulator)"
);

/// A host value a by-value kernel parameter of type `P` accepts in memory `M`: a
/// [`DeviceCopy`] value itself, or the `<Name>Args` struct `#[derive(KernelParams)]`
/// generates for `P`, whose views are bound here.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter of type `{P}`",
    label = "expected a `{P}` value (a DeviceCopy type), or the `{P}Args` struct of a #[derive(KernelParams)] `{P}`"
)]
pub trait KernelValue<P, M: MemorySpace> {
    /// The parameter's value, with any allocations it names bound to the launch.
    fn bind<'b>(self, args: &mut M::Args<'b>) -> P
    where
        Self: 'b;
}

impl<P: DeviceCopy, M: MemorySpace> KernelValue<P, M> for P {
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
    let (ptr, used) = slice.device_ptr(args.stream);
    args.keep(used);
    ptr
}

/// Binds a cudarc allocation for writing: waits for its reads and writes now, records the
/// write after the kernel.
pub fn bind_write<'a, T>(slice: &'a mut impl DevicePtrMut<T>, args: &mut GpuArgs<'a>) -> u64 {
    let stream = args.stream;
    let (ptr, used) = slice.device_ptr_mut(stream);
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
unsafe impl<T, M: MemorySpace, S: KernelSlice<T, M> + ?Sized> KernelSlice<T, M> for &S {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_keep_each_value_aligned_and_read_back() {
        let mut p = Params::default();
        // SAFETY: padding-free values, read back as their own types.
        unsafe {
            p.push(&1u8);
            p.push(&2.5f64);
            p.push(&[7u32, 8, 9]);
            p.push(&0xdead_beef_u64);
            assert_eq!(p.get::<u8>(0), 1);
            assert_eq!(p.get::<f64>(1), 2.5);
            assert_eq!(p.get::<[u32; 3]>(2), [7, 8, 9]);
            assert_eq!(p.get::<u64>(3), 0xdead_beef);
        }
        assert_eq!(p.len(), 4);
        assert_eq!(p.spans, [(0, 1), (8, 8), (16, 12), (32, 8)]);
        let spans = p.spans.clone();
        let base = p.words.as_ptr() as usize;
        for (ptr, (at, _)) in p.pointers().iter().zip(&spans) {
            assert_eq!(*ptr as usize - base, *at);
            assert_eq!(
                *ptr as usize % 8,
                0,
                "aligned for the widest parameter here"
            );
        }
    }

    #[test]
    #[should_panic(expected = "has 4 bytes, read as u64")]
    fn reading_a_parameter_as_another_size_is_a_bug_report() {
        let mut p = Params::default();
        // SAFETY: a padding-free value; the read is refused before it happens.
        unsafe {
            p.push(&1u32);
            let _: u64 = p.get(0);
        }
    }
}
