//! # lookahead-ivf
//!
//! A FAISS-style IVF-Flat search whose inverted lists live in CUDA Unified Memory, written with the
//! Lookahead DSL (`ivf-kernels`), with every Unified Memory policy of `lookahead-uvm` selectable
//! per search. The CPU reference in [`cpu`] implements the same algorithm, which is how recall is
//! checked without a GPU; [`check`] compares a search's results with it exactly, on data whose
//! distances do not round. [`shard`] splits an index over several GPUs and processes (its lists in
//! host memory, a shard per GPU, NCCL for the merge).

pub mod check;
pub mod cpu;
pub mod data;
pub mod emulated;
pub mod gpu;
pub mod index;
pub mod shard;
pub mod workload;
