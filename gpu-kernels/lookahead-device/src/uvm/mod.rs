//! The GPU half of Lookahead's Unified Memory protocol: how a kernel gets managed (Unified)
//! memory that lives on the host, fast. The host half is the `lookahead-uvm` crate.
//!
//! In-kernel prefetch instructions do not migrate Unified Memory pages on the H100 (driver
//! 580.159.04), so a kernel that knows what it will read next uses one of two mechanisms:
//!
//! * [`requests`]: GPU-driven migration requests. The kernel publishes the ranges it will
//!   read on a [`RequestQueue`] (a ring in pinned host memory); a host service prefetches
//!   them and sets a ready flag per range, which the kernel waits on (or goes ahead through
//!   the fault path). `#[prefetch_next(queue = q)]` loops do this for you ([`loops`]).
//! * [`pull`]: the GPU-driven pull. Some warps copy ranges the GPU reads over the
//!   interconnect (managed memory mapped for the GPU) into device memory, and the others
//!   wait per range and read the copy.

pub mod loops;
pub mod pull;
pub mod requests;

pub use requests::{Readiness, RequestQueue, RequestSlot, Requested};
