//! The errors of this crate.

use std::path::PathBuf;

/// What can go wrong while writing results.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A results folder or file could not be created or written.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done (`creating`, `writing`).
        action: &'static str,
        /// The folder or file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Rendering a plot failed.
    #[error("plotting {title:?}: {reason}")]
    Plot {
        /// The plot's title.
        title: String,
        /// What `plotters` reported.
        reason: String,
    },
    /// Writing CSV failed.
    #[error("writing CSV: {0}")]
    Csv(#[from] csv::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
