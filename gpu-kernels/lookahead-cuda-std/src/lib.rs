//! # cuda_std, on rustc's own nvptx backend
//!
//! The API of Rust-CUDA's `cuda_std` 0.2.2 (names and meaning, from its documentation),
//! implemented on Lookahead's device runtime (`lookahead-device`), so kernels written for
//! Rust-CUDA build with rustc's `nvptx64-nvidia-cuda` LLVM backend instead of
//! `rustc_codegen_nvvm`: a kernel crate changes its dependency to
//! `cuda_std = { package = "lookahead-cuda-std", version = "0.1" }`, and its host crate's
//! build script uses `lookahead-cuda-builder` (`cuda_builder`'s `CudaBuilder`).
//!
//! Modules as in `cuda_std` (Rust-CUDA's main branch): [`thread`] (indices as [`glam`]
//! vectors), [`warp`], [`shared`], [`atomic`], [`GpuFloat`] and [`FloatExt`] (libdevice),
//! [`io`] (`println!` through the driver's `vprintf`), [`mem`] (a global allocator on the
//! driver's `malloc`/`free`, so `Box`, `Vec` and `String` work in kernels), [`misc`],
//! [`cfg`](mod@cfg), [`ptr`], the re-exported [`glam`] and [`vek`] crates and the
//! [`prelude`]; the attributes [`macro@kernel`], [`macro@gpu_only`],
//! [`macro@address_space`] and [`macro@externally_visible`]. What is not covered is listed
//! in the repository's README ("Coming from Rust-CUDA").
//!
//! On the host the crate compiles too (so a kernel crate can be part of a workspace); most
//! functions then need an emulated launch or panic, as Rust-CUDA's do.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch))]
#![warn(missing_docs)]

extern crate alloc;

pub mod atomic;
pub mod cfg;
pub mod io;
pub mod mem;
pub mod misc;
pub mod ptr;
pub mod shared;
pub mod thread;
pub mod warp;

mod float_ext;

pub use float_ext::FloatExt;
/// The vector and matrix types of kernels (`glam` 0.30, with its `cuda` alignments), as in
/// Rust-CUDA's `cuda_std`.
pub use glam;
/// The `vek` crate (0.17), which Rust-CUDA's `cuda_std` re-exports too (deprecated there in
/// favour of [`glam`]); `vek::num_traits` is `num-traits`.
pub use vek;

/// Floating-point functions for `f32` and `f64` in kernels (libdevice on the GPU):
/// `cuda_std::GpuFloat` is `lookahead_device::math::GpuFloat`.
pub mod float {
    pub use lookahead_device::math::GpuFloat;
}

pub use float::GpuFloat;
pub use lookahead_cuda_std_macros::{address_space, externally_visible, gpu_only, kernel};

/// Used by the expansion of [`macro@kernel`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    /// A kernel parameter is copied to the GPU as its bytes, so it must be `Copy`.
    #[diagnostic::on_unimplemented(
        message = "kernel parameter type `{Self}` is not `Copy`",
        label = "a #[kernel] parameter is copied to the GPU as its bytes",
        note = "pass data through a raw pointer or a slice (`&[T]`, `&mut [T]`), or derive `Clone, Copy` on a `#[repr(C)]` struct of plain values"
    )]
    pub trait KernelParameter {}
    impl<T: Copy> KernelParameter for T {}
}

/// What kernels usually need: `use cuda_std::prelude::*;`.
pub mod prelude {
    pub use crate::kernel;
    pub use crate::thread;
    pub use crate::GpuFloat;
    // Only on the GPU: on the host, `std`'s macros of the same names are in scope and a glob
    // import of these would make every use ambiguous (E0659).
    #[cfg(target_arch = "nvptx64")]
    pub use crate::{assert_eq, assert_ne, print, println};
    pub use alloc::{
        borrow::ToOwned,
        boxed::Box,
        format,
        rc::Rc,
        string::{String, ToString},
        vec::Vec,
    };
}

/// One PTX instruction that reads a special register into a `u32` on the GPU, `$host` on
/// the host.
macro_rules! sreg32 {
    ($reg:literal, $host:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            let v: u32;
            // SAFETY: reads a special register.
            unsafe {
                core::arch::asm!(concat!("mov.u32 {v}, ", $reg, ";"), v = out(reg32) v, options(nostack, nomem, pure))
            };
            v
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            $host
        }
    }};
}
pub(crate) use sreg32;
