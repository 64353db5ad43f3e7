//! # lookahead-uvm
//!
//! Prefetch that pays for Unified Memory. On the H100 we measured (driver 580.159.04:
//! `results/ivf_bench.md`, explained in `docs/unified-memory.md`), in-kernel prefetch
//! instructions do not migrate managed pages, and faults move data at a fraction of the
//! interconnect's rate. This crate provides the mechanisms that reach the interconnect's
//! rate, and chooses between them from measurements:
//!
//! - [`RequestRing`] + [`PrefetchService`]: GPU-driven migration requests. A kernel
//!   publishes the ranges it will need ([`lookahead_device::uvm::RequestQueue`]), a
//!   host service prefetches them from several threads and marks each ready in device
//!   memory on the prefetch's own stream; the kernel waits on the mark or goes ahead on the
//!   fault path. A full ring, a stopped or never-started service, or a slow host never
//!   lose a request, hang a kernel or change a result.
//! - [`Policy`]: faults, in-kernel hints, prefetch-all, host-selected ranges, GPU-driven
//!   requests, remote mapping, the GPU-driven pull (the kernel copies what it needs over
//!   the interconnect into a device cache, with
//!   [`lookahead_device::uvm::pull`]), and `Auto`, which [`policy::choose`]s from an
//!   [`AccessPattern`] and a [`MachineProfile`] measured by the start-up probe.

pub mod kernels;
pub mod policy;
pub mod probe;
pub mod ring;
pub mod service;

pub use kernels::UvmKernels;
pub use lookahead_uvm_kernels::WordRange;
pub use policy::{AccessPattern, Estimate, Policy};
pub use probe::MachineProfile;
pub use ring::{Request, RequestRing, RingQueue};
pub use service::{PrefetchService, ServiceConfig, ServiceReport};
