//! # lookahead-uvm
//!
//! Prefetch that pays for Unified Memory. On the H100 we measured (driver 580.159.04:
//! `results/ivf_bench.md`, explained in `docs/unified-memory.md`), in-kernel prefetch
//! instructions do not migrate managed pages, and faults move data at a fraction of the
//! interconnect's rate. This crate provides the mechanisms that reach the interconnect's
//! rate, chooses between them from measurements, and carries them out for any kernel:
//!
//! - [`Policy`]: faults, in-kernel hints, prefetch-all, host-selected ranges, GPU-driven
//!   requests, remote mapping, the GPU-driven pull (the kernel copies what it needs over
//!   the interconnect into a device cache, with
//!   [`lookahead_device::uvm::pull`]), and `Auto`, which [`policy::choose`]s from an
//!   [`AccessPattern`] and a [`MachineProfile`] measured by the start-up probe.
//! - [`PolicyBuffer`]: a managed allocation under the policies. It sets up what a policy
//!   needs (the GPU mapping, the preferred location, the pull's device cache: a plan of
//!   [`setup::Step`]s computed from the policy and what is set up), evicts to the host or
//!   makes everything resident, and hands kernels their views (the data, the pull's cache
//!   and counters). [`PolicyBuffer::stage`] starts a launch under a policy: its
//!   [`Staging`] holds the launch's request queue and, before the kernel that reads,
//!   prefetches the whole buffer or the ranges the host selected.
//! - [`UvmRuntime`]: what the buffers share: the request ring and its service, the host
//!   prefetch engine on the same threads, the machine profile.
//! - [`RequestRing`] + [`PrefetchService`]: GPU-driven migration requests. A kernel
//!   publishes the ranges it will need ([`lookahead_device::uvm::RequestQueue`]), a
//!   host service prefetches them from several threads and marks each ready in device
//!   memory on the prefetch's own stream; the kernel waits on the mark or goes ahead on the
//!   fault path. A full ring, a stopped or never-started service, or a slow host never
//!   lose a request, hang a kernel or change a result.
//!
//! ```no_run
//! # use lookahead::{Gpu, ManagedBuffer};
//! # use lookahead_uvm::{MachineProfile, Policy, PolicyBuffer, ServiceConfig, UvmRuntime};
//! # fn f() -> lookahead::Result<()> {
//! let gpu = Gpu::new(0)?;
//! let stream = gpu.context().new_stream()?;
//! let data = ManagedBuffer::<f32>::zeroed(&gpu, 1 << 24)?; // written by the host
//! let tiles = 256; // the ranges kernels ask for or pull: 64 Ki floats each
//! let profile = MachineProfile::cached_or_probe(&gpu)?;
//! let rt = UvmRuntime::new(&gpu, tiles, profile, ServiceConfig::default())?;
//! let mut table = PolicyBuffer::new(data, tiles, &stream)?;
//! table.prepare(Policy::HostSelected)?; // set-up, outside the timed launches
//! let mut staging = table.stage(Policy::HostSelected, &rt)?;
//! staging.before_read(&table, || Ok(vec![0..1 << 16, 5 << 16..6 << 16]))?;
//! let data = table.data_view(); // for a `ManagedSlice<f32>` parameter
//! # let _ = data;
//! # Ok(()) }
//! ```

pub mod buffer;
pub mod kernels;
pub mod policy;
pub mod probe;
pub mod ring;
pub mod runtime;
pub mod service;
pub mod setup;

pub use buffer::{PolicyBuffer, PullViews, Staging};
pub use kernels::UvmKernels;
pub use lookahead_uvm_kernels::WordRange;
pub use policy::{AccessPattern, Estimate, Policy};
pub use probe::MachineProfile;
pub use ring::{Request, RequestRing, RingQueue};
pub use runtime::UvmRuntime;
pub use service::{PrefetchService, ServiceConfig, ServiceReport};
pub use setup::Setup;
