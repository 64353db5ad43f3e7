//! # lookahead
//!
//! The host runtime of Lookahead, built on [`cudarc`]: open a GPU ([`Gpu`]), load the PTX
//! that `lookahead-builder` embedded in a kernel crate ([`Gpu::load_ptx`]), and launch.
//! Every fallible call returns [`Error`]; a machine without a CUDA driver or GPU gets
//! [`Error::NoDriver`] / [`Error::NoDevice`], never a panic.
//!
//! ```no_run
//! let gpu = match lookahead::Gpu::new(0) {
//!     Ok(gpu) => gpu,
//!     Err(e) => { eprintln!("{e}"); return; }
//! };
//! println!("{} (sm_{})", gpu.name(), gpu.compute_capability());
//! ```

pub mod advice;
pub mod capabilities;
/// The CPU emulator (the `lookahead-emu` crate): pass an [`emu::Emulator`] to a `#[kernel]`
/// launcher instead of a GPU to run the kernel on the host, with host memory.
pub use lookahead_emu as emu;
pub mod error;
pub mod gpu;
pub mod graph;
pub mod launch;
pub mod managed;
pub mod mapped;
pub mod module;
pub mod prefetch;
pub mod range;
pub mod resource;
pub mod timing;
pub mod untracked;
pub mod vmm;

pub use advice::{Advice, RangeAttributes};
pub use capabilities::{Capabilities, Interconnect};
pub use cudarc;
pub use error::{Capability, DriverContext, Error, Result};
pub use gpu::Gpu;
pub use managed::{AllocOptions, Location, ManagedBuffer, ManagedView, ManagedViewMut};
pub use mapped::MappedBuffer;
pub use module::Module;
pub use prefetch::{PrefetchEngine, PrefetchOptions, PrefetchTicket};
pub use range::ByteRange;
pub use resource::{ManagedResource, MemoryResource, PrefetchResource};
pub use vmm::{GrowOutcome, GrowableVec, VaBlocker, VecOptions};
