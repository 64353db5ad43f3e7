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

pub mod error;
pub mod gpu;
pub mod module;

pub use cudarc;
pub use error::{Error, Result};
pub use gpu::Gpu;
pub use module::Module;
