//! # lookahead-bench
//!
//! Benchmark support for Lookahead programs: what every benchmark of the workspace shares,
//! each piece in one place.
//!
//! - [`stats`]: medians, [`Summary`](stats::Summary), quantiles and CUDA-event timers
//!   (from [`lookahead::timing`]), repeats after a warm-up, the `median [min, max]` cell.
//! - [`header`]: the [`RunHeader`](header::RunHeader) printed at the top of every table:
//!   device, compute capability, driver, host CPU, date and command line.
//! - [`table`]: a Markdown [`Table`](table::Table) with column alignment, which also
//!   writes itself as CSV.
//! - [`plot`]: SVG plots through `plotters`.
//! - [`progress`]: the progress bar.
//! - [`output`]: the results folder, checked for writing before a run starts.
//! - [`args`]: `clap` parsing and value parsers whose errors name the accepted range.
//! - [`exact_sum`]: reduction inputs whose f32 sum is exact in any order, and the exact
//!   check of a kernel's sum.
//!
//! A benchmark's `main` ends with [`exit_code`], which tells a machine without a GPU apart
//! from a failure.
//!
//! ```no_run
//! use lookahead_bench::{header::RunHeader, output::OutDir, table::{Align, Table}};
//!
//! let out = OutDir::create("results")?; // fails now if results/ cannot be written
//! let gpu = lookahead::Gpu::new(0)?;
//! let header = RunHeader::for_gpu(&gpu)?;
//! let mut table = Table::new(["kernel", "ms"]).align(1, Align::Right);
//! table.push(["saxpy", "0.291"]);
//! out.write("example.md", format!("{}\n{}", header.markdown(), table.to_markdown()))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

use std::process::ExitCode;

pub mod args;
pub mod error;
pub mod exact_sum;
pub mod header;
pub mod output;
pub mod plot;
pub mod progress;
pub mod stats;
pub mod table;

pub use error::{Error, Result};

/// The exit status of a benchmark whose run returned `result`: success when it returned
/// `Ok(true)` (every check passed), failure for `Ok(false)` or an error (printed to stderr as
/// `error: ...`), and 2 when the error is [`lookahead::Error::NoDriver`] or
/// [`lookahead::Error::NoDevice`]: then `No CUDA GPU here: <error>. <no_gpu>` goes to stdout.
pub fn exit_code(
    result: std::result::Result<bool, Box<dyn std::error::Error>>,
    no_gpu: &str,
) -> ExitCode {
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => match e.downcast_ref::<lookahead::Error>() {
            Some(e @ (lookahead::Error::NoDriver | lookahead::Error::NoDevice { .. })) => {
                println!("No CUDA GPU here: {e}. {no_gpu}");
                ExitCode::from(2)
            }
            _ => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_gpu_exits_with_2_and_failures_with_1() {
        assert_eq!(exit_code(Ok(true), ""), ExitCode::SUCCESS);
        assert_eq!(exit_code(Ok(false), ""), ExitCode::FAILURE);
        assert_eq!(
            exit_code(Err(Box::new(lookahead::Error::NoDriver)), "nothing ran"),
            ExitCode::from(2)
        );
        assert_eq!(exit_code(Err("broken".into()), ""), ExitCode::FAILURE);
    }
}
