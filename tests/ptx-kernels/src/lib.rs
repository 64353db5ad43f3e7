//! Small kernels for the PTX tests in `lookahead-tests` (`tests/tests/ptx_dsl.rs`): one per
//! device intrinsic group and one per `#[prefetch_next]` form, the emulator's bug reports,
//! the user's own parameter types, and every parameter kind with its CPU reference (run on
//! the emulator and on a GPU). `lookahead-tests`' build script compiles them for sm_70,
//! sm_80 and sm_90; in the host build their launchers point at an empty PTX table ([`PTX`]),
//! so the tests launch them through a module loaded from `lookahead-tests`' PTX.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_gpu_kernel))]

// The CPU references are host code: a kernel crate is `no_std` on every target, so its
// host-only parts name what they take from the standard library.
#[cfg(not(target_arch = "nvptx64"))]
extern crate std;

/// Empty on the host: the PTX tests read the modules `lookahead-tests` builds.
#[cfg(not(target_arch = "nvptx64"))]
pub static PTX: &[(u32, &str)] = &[];

mod bugs;
mod intrinsics;
mod kinds;
mod prefetch;
mod user;

pub use bugs::*;
pub use intrinsics::*;
pub use kinds::*;
pub use prefetch::*;
pub use user::*;

pub mod pipeline;

/// Kernel names, as the PTX tests expect them on every architecture.
pub const KERNELS: &[&str] = &[
    "pf_range_l1",
    "pf_range_l2",
    "pf_range_inclusive",
    "pf_grid_stride",
    "pf_evict_last_portable",
    "pf_evict_normal_portable",
    "pf_iter",
    "pf_iter_mut",
    "pf_chunks_bulk_portable",
    "pf_chunks_l2",
    "pf_managed_bulk",
    "pf_device_fn",
    "pf_auto",
    "pf_auto__l2",
    "pf_auto__l2_evict_last",
    "pf_tuned",
    "pf_tuned__l2",
    "pf_tuned__bulk",
    "pf_of_loop_var",
    "pf_queue_chunks",
    "pf_queue_lists",
    "intr_indices",
    "intr_atomics",
    "intr_warp_claims",
    "intr_warp",
    "intr_sync",
    "intr_shared",
    "intr_prefetch_direct",
    "intr_bounds",
    "intr_unchecked",
    "intr_math",
    "user_chase",
    "user_axpy",
    "user_bounded",
    "kind_scalars",
    "kind_views",
    "kind_prefetch_forms",
    "kind_user_types",
    "kind_names",
    "kind_auto_sum",
    "kind_auto_sum__bulk",
    "kind_queued",
    "kind_gather",
];
