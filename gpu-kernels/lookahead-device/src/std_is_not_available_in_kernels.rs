//! What `Vec`, `String` and `Box` name inside `#[kernel]` and `#[device_fn]` bodies: kernel
//! code is `no_std` on the GPU, so the host check of a body (and the emulator) must refuse
//! the standard library's allocating types as the GPU build does. Their constructors
//! (`new`, `with_capacity`) fail with "... is not available in kernel code: GPU threads do not
//! allocate"; anything else names this module's types.
//!
//! In kernel code, use a fixed-size array `[T; N]`, a `shared_array!`, or a slice the host
//! allocates and passes in.

/// Kernel code cannot allocate: use an array `[T; N]`, a `shared_array!`, or a slice the host
/// allocates and passes in.
pub enum Vec<T> {
    #[doc(hidden)]
    Never(core::convert::Infallible, core::marker::PhantomData<T>),
}

/// Kernel code cannot allocate: write bytes into a `&mut [u8]` the host passes in.
pub enum String {
    #[doc(hidden)]
    Never(core::convert::Infallible),
}

/// Kernel code cannot allocate: keep the value on the stack or in a slice the host passes in.
pub enum Box<T: ?Sized> {
    #[doc(hidden)]
    Never(
        core::convert::Infallible,
        core::marker::PhantomData<*const T>,
    ),
}

/// The bound of the constructors below, never met: a call reports this message, which reads
/// the same whether rustc prints the type's path (a `std` build) or only `Vec<T>` (`no_std`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not available in kernel code: GPU threads do not allocate (kernel code is `no_std`)",
    label = "kernel code cannot allocate",
    note = "use a fixed-size array `[T; N]`, a `shared_array!`, or a slice the host allocates and passes in"
)]
pub trait KernelCodeCannotAllocate {}

// Higher-ranked bounds, so rustc checks them at the call, not here. Written out rather than
// by a macro: rustc's note under the error then points at a plain function, not at a macro
// invocation.
#[allow(clippy::new_without_default)]
impl<T> Vec<T> {
    #[doc(hidden)]
    pub fn new() -> Self
    where
        for<'a> Self: KernelCodeCannotAllocate,
    {
        unreachable!()
    }
    #[doc(hidden)]
    pub fn with_capacity(_: usize) -> Self
    where
        for<'a> Self: KernelCodeCannotAllocate,
    {
        unreachable!()
    }
}

#[allow(clippy::new_without_default)]
impl String {
    #[doc(hidden)]
    pub fn new() -> Self
    where
        for<'a> Self: KernelCodeCannotAllocate,
    {
        unreachable!()
    }
    #[doc(hidden)]
    pub fn with_capacity(_: usize) -> Self
    where
        for<'a> Self: KernelCodeCannotAllocate,
    {
        unreachable!()
    }
}

impl<T> Box<T> {
    #[doc(hidden)]
    pub fn new(_: T) -> Self
    where
        for<'a> Self: KernelCodeCannotAllocate,
    {
        unreachable!()
    }
}
