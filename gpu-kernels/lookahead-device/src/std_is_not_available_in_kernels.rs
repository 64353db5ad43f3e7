//! What `Vec`, `String` and `Box` name inside `#[kernel]` and `#[device_fn]` bodies: kernel
//! code is `no_std` on the GPU, so the host check of a body (and the emulator) must refuse
//! the standard library's allocating types as the GPU build does. Using one is an error that
//! names this module, for example "no function or associated item named `new` found for enum
//! `lookahead_device::std_is_not_available_in_kernels::Vec<_>`".
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
