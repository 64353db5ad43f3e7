//! What the benchmark programs of `examples/vs-cuda` share: the suite's benchmarks (inputs,
//! launches, CPU references, checks), the two languages' modules, checking and timing, the
//! `vs_cuda` report, and the prefetch tuner's measurements.
//!
//! Programs: `vs_cuda` (Rust versus CUDA C++ on every variant), `vs_cuda_pipelines` (the
//! pipelined kernels, every copy kind and stage count, against their twins, the copy rate
//! and the FP32 peak) and `prefetch_tuner` (`level = auto, distance = auto` against every
//! candidate measured exhaustively).

pub mod bench;
pub mod lang;
pub mod pipelines;
pub mod report;
pub mod run;
pub mod session;
pub mod tuner;

/// What the programs return.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;
