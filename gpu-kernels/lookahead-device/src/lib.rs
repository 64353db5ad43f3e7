//! # lookahead-device
//!
//! The device-side runtime for Lookahead kernels, compiled for `nvptx64-nvidia-cuda`: thread,
//! block and grid coordinates, barriers and fences, `nanosleep`, atomics, ordered loads and
//! stores, warp shuffles and votes, static and dynamic shared memory, typed views of device
//! and managed (Unified) memory, the kernel parameter traits ([`DeviceCopy`], [`KernelParam`]), the
//! floating-point functions of the standard library ([`math`]: libdevice on the GPU), the
//! prefetch instructions behind `#[prefetch_next]`, asynchronous copies into shared memory
//! ([`mod@pipeline`]), TF32 tensor-core products ([`mma`]), the GPU half of the Unified Memory
//! protocol ([`uvm`]), and the GPU half of the cache over host memory ([`cache`]). Each intrinsic is a
//! thin safe (or clearly `unsafe`) wrapper over one PTX instruction, so kernel crates never
//! write `asm!` themselves.
//!
//! ## On the host
//! The same API exists when the crate is compiled for the host: `#[kernel]` bodies are
//! type-checked by a stable host compiler, and they run on the CPU emulator
//! (`lookahead-emu`, launched through `lookahead::emu::Emulator`), where every intrinsic has
//! its GPU meaning: per-thread indices, block barriers, per-block shared memory, warp
//! shuffles and votes (and the tensor-core products computed through them), host atomics,
//! and prefetches recorded in a trace. Calling an
//! intrinsic that needs a thread (an index, a barrier) outside an emulated launch panics
//! with a message saying so.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(asm_experimental_arch, stdarch_nvptx, link_llvm_intrinsics),
    allow(internal_features)
)]
#![warn(missing_docs)]

// The derives name this crate as `::lookahead_device`, also inside it.
extern crate self as lookahead_device;

/// `$gpu` on the GPU; `$host`, the CPU emulator's implementation, on the host.
macro_rules! gpu_or_host {
    ($gpu:expr, $host:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        let r = $gpu;
        #[cfg(not(target_arch = "nvptx64"))]
        let r = $host;
        r
    }};
}

/// A compile error with `$msg` when the crate is compiled for a GPU architecture without
/// `$feature` (an `sm_XX` target feature), raised where the calling function is compiled for
/// that architecture (so an instruction the GPU lacks never reaches `ptxas`). The check is a
/// generic function's constant: evaluated only when a kernel that uses the caller is
/// compiled, not when this crate is.
macro_rules! needs_arch {
    ($feature:literal, $msg:literal) => {
        #[cfg(all(target_arch = "nvptx64", not(target_feature = $feature)))]
        {
            struct Needs;
            impl crate::ArchMessage for Needs {
                const MSG: &'static str = $msg;
            }
            crate::arch_error::<Needs>();
        }
    };
}

/// The message of a [`needs_arch!`] error.
#[cfg(target_arch = "nvptx64")]
#[allow(dead_code)] // used only by builds for an architecture some instruction needs more than
trait ArchMessage {
    const MSG: &'static str;
}

/// A compile error with `M::MSG`, when instantiated.
#[cfg(target_arch = "nvptx64")]
#[allow(dead_code)] // as `ArchMessage`
#[inline(always)]
fn arch_error<M: ArchMessage>() {
    const { panic!("{}", M::MSG) }
}

pub mod atomic;
pub mod cache;
pub mod index;
pub mod math;
pub mod memory;
pub mod mma;
#[cfg(target_arch = "nvptx64")]
mod panic;
pub mod param;
pub mod pipeline;
pub mod prefetch;
pub mod shared;
pub mod std_is_not_available_in_kernels;
pub mod sync;
pub mod uvm;
pub mod view;
pub mod warp;

pub use shared::{dynamic_shared, DynamicShared, SharedArray};

/// The emulator hooks the host build calls (used by `shared_array!`'s expansion).
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub use lookahead_emu as __emu;

/// How a kernel's launchers find its crate's PTX table: `crate::PTX` when the crate root has
/// one, else this module's stand-in, whose type makes the launch fail to compile with a
/// message that says which line is missing.
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub mod kernel_crate_ptx {
    /// The stand-in for a crate root without `PTX` (a glob import the root's shadows).
    pub struct NoPtxInTheCrateRoot;

    /// Found when the kernel crate's root defines no `PTX`.
    pub static PTX: NoPtxInTheCrateRoot = NoPtxInTheCrateRoot;

    /// What `crate::PTX` must be: the table the builder's include file defines.
    #[diagnostic::on_unimplemented(
        message = "the kernel crate's root has no PTX table `PTX: &[(u32, &str)]` (found `{Self}`)",
        label = "this kernel's launchers read `crate::PTX`",
        note = "add `#[cfg(not(target_arch = \"nvptx64\"))] include!(concat!(env!(\"OUT_DIR\"), \"/<crate>_ptx.rs\"));` to the kernel crate's lib.rs (`<crate>`: its library name, `-` as `_`; the build script's `lookahead_builder` writes the file), or name another table with `#[kernel(ptx = path::TO_PTX)]`"
    )]
    pub trait KernelCratePtx {
        /// The table.
        fn table(&self) -> &'static [(u32, &'static str)];
    }

    #[diagnostic::do_not_recommend]
    impl KernelCratePtx for &'static [(u32, &'static str)] {
        fn table(&self) -> &'static [(u32, &'static str)] {
            self
        }
    }
}

/// What the derives implement on the host: cudarc's traits for allocating and copying
/// `DeviceCopy` types.
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
pub mod __host {
    pub use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
}

/// Device-side macros, re-exported so a kernel crate needs only this crate (see
/// `lookahead-macros` for their documentation).
pub use lookahead_macros::{
    device_fn, kernel, prefetch_next, shared_array, DeviceCopy, KernelParams,
};
pub use param::{DeviceCopy, KernelParam};
pub use view::{DeviceSlice, DeviceSliceMut, ManagedSlice, ManagedSliceMut};

/// Everything a kernel usually needs: `use lookahead_device::prelude::*;`.
pub mod prelude {
    pub use crate::atomic::{
        atomic_add, atomic_cas, atomic_max, warp_fetch_add, AtomicAdd, AtomicCas, AtomicMax,
        WarpFetchAdd,
    };
    pub use crate::index::*;
    pub use crate::math::GpuFloat;
    pub use crate::pipeline::StageRows;
    pub use crate::prefetch;
    pub use crate::prefetch::PrefetchPart;
    pub use crate::shared_array;
    pub use crate::sync::{
        fence_block, fence_gpu, fence_system, globaltimer_ns, nanosleep, sync_threads,
    };
    pub use crate::view::{DeviceSlice, DeviceSliceMut, ManagedSlice, ManagedSliceMut};
    pub use crate::warp;
    pub use crate::{device_fn, kernel, prefetch_next};
    pub use crate::{dynamic_shared, DynamicShared, SharedArray};
    pub use crate::{DeviceCopy, KernelParam, KernelParams};
}
