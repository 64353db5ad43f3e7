//! The progress bar benchmarks show while they measure.

pub use indicatif::ProgressBar;
use indicatif::ProgressStyle;

/// A progress bar of `len` steps: `[bar] pos/len message`. It draws on stderr and only
/// when stderr is a terminal, so redirected output stays clean.
pub fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}
