//! # lookahead-device
//!
//! The device-side runtime for Lookahead kernels, compiled for `nvptx64-nvidia-cuda`:
//! thread, block and grid coordinates, barriers and fences, `nanosleep`, atomics, warp
//! shuffles and votes, static shared memory, typed views of device and managed (Unified)
//! memory, and the prefetch instructions behind `#[prefetch_next]`. Each intrinsic is a thin
//! safe (or clearly `unsafe`) wrapper over one PTX instruction, so kernel crates never write
//! `asm!` themselves.
//!
//! ## On the host
//! The same API exists when the crate is compiled for the host, so that `#[kernel]` bodies
//! are type-checked by a stable host compiler too (the host side of a kernel crate gets its
//! typed launchers from the same source). The view types ([`DeviceSlice`], [`ManagedSlice`],
//! ...) are plain Rust and work everywhere; every instruction wrapper panics with
//! "runs only on the GPU" if a host program actually calls it.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch, stdarch_nvptx))]
#![warn(missing_docs)]

/// Evaluates `$gpu` on the GPU; on the host, marks `$used` as used and panics when called.
macro_rules! on_gpu {
    ($name:expr, [$($used:expr),*], $gpu:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        let r = $gpu;
        #[cfg(not(target_arch = "nvptx64"))]
        let r = {
            let _ = ($(&$used,)*);
            $crate::host_only($name)
        };
        r
    }};
}

pub mod atomic;
pub mod index;
#[cfg(target_arch = "nvptx64")]
mod panic;
pub mod prefetch;
pub mod requests;
pub mod shared;
pub mod sync;
pub mod view;
pub mod warp;

pub use shared::SharedArray;

#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub use shared::__host_only_shared;

/// Device-side macros, re-exported so a kernel crate needs only this crate (see
/// `lookahead-macros` for their documentation).
pub use lookahead_macros::{device_fn, kernel, prefetch_next, shared_array};
pub use view::{DeviceSlice, DeviceSliceMut, ManagedSlice, ManagedSliceMut};

/// Everything a kernel usually needs: `use lookahead_device::prelude::*;`.
pub mod prelude {
    pub use crate::atomic::{atomic_add, atomic_cas, atomic_max, AtomicAdd, AtomicCas, AtomicMax};
    pub use crate::index::*;
    pub use crate::prefetch;
    pub use crate::shared_array;
    pub use crate::sync::{fence_block, fence_gpu, fence_system, nanosleep, sync_threads};
    pub use crate::view::{DeviceSlice, DeviceSliceMut, ManagedSlice, ManagedSliceMut};
    pub use crate::warp;
    pub use crate::SharedArray;
}

/// Called by the host build of a device-only instruction wrapper.
#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[track_caller]
pub(crate) fn host_only<T>(name: &str) -> T {
    panic!("lookahead_device::{name} runs only on the GPU (nvptx64); on the host it exists so kernel bodies type-check")
}
