//! # lookahead-multi
//!
//! Past one GPU and past one machine, on Lookahead's host runtime:
//!
//! - [`GpuSet`]: the GPUs of a process (all, or chosen ones), each a [`lookahead::Gpu`] with
//!   its own context and stream (typed launches and allocations go to any of them as to one),
//!   peer access enabled where the driver allows it, and [`topology::Topology`]: what each
//!   device and each pair can do (peer access, native atomics, the link).
//! - [`HostArray`]: data bigger than a GPU, in host memory that every GPU of the process reads
//!   through a [`host::HostView`] kernel argument.
//! - [`launcher`]: rank processes started and supervised together; a rank that fails or hangs
//!   ends the run with an error naming it.
//! - [`rendezvous`]: how ranks find each other, on loopback or across hosts: rank 0 listens on
//!   a TCP address, the others connect, and rank 0 hands out a payload (an NCCL unique id),
//!   every wait bounded and every failure naming its rank.
//! - [`nccl`]: NCCL communicators that cannot hang (non-blocking, every wait with a deadline
//!   and aborted past it), one per rank process or one per GPU of this process.
//!
//! Every fallible call returns [`Error`]; the errors a rank can cause name the rank.

pub mod error;
pub mod host;
pub mod launcher;
pub mod nccl;
pub mod rendezvous;
pub mod set;
pub mod topology;

pub use error::{Error, Result};
pub use host::{HostArray, HostView};
pub use nccl::{Communicator, UniqueId};
pub use rendezvous::{Rendezvous, Session};
pub use set::GpuSet;
pub use topology::{Link, Topology};
