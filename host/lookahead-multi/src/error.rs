//! One error type for work over several GPUs and processes. Every error that a rank can cause
//! names the rank, so a run of several processes never ends with an error that does not say
//! which of them failed.

/// What went wrong on a set of GPUs or between ranks.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A host-runtime call failed (driver, allocation, launch).
    #[error(transparent)]
    Gpu(#[from] lookahead::Error),
    /// The TCP rendezvous failed: a rank did not connect in time, rank 0 could not be
    /// reached, a peer spoke another protocol or claimed a rank twice.
    #[error("rank {rank}: rendezvous at {addr}: {detail}")]
    Rendezvous {
        /// The rank that reports the failure.
        rank: usize,
        /// Where rank 0 listens.
        addr: String,
        /// What happened, naming the ranks concerned.
        detail: String,
    },
    /// A rank process exited with a failure, was killed, or ran past its time.
    #[error("rank {rank} failed: {detail}")]
    RankFailed {
        /// The rank.
        rank: usize,
        /// Its exit status or what it was doing, and the last lines it printed.
        detail: String,
    },
    /// An NCCL call returned an error, or the communicator reported one while its work ran.
    #[error("rank {rank}: {call} failed: {code}")]
    Nccl {
        /// The rank whose communicator failed.
        rank: usize,
        /// The NCCL function.
        call: &'static str,
        /// NCCL's result code, by name.
        code: String,
    },
    /// A collective (or the communicator's set-up) did not finish in time: a peer died or
    /// hangs. The communicator was aborted, so no kernel of it is left waiting.
    #[error(
        "rank {rank}: {op} did not finish within {seconds:.1} s (a peer rank exited or hangs); \
         the communicator was aborted"
    )]
    Timeout {
        /// The rank that waited.
        rank: usize,
        /// What it waited for.
        op: String,
        /// How long it waited.
        seconds: f64,
    },
    /// `libnccl.so` could not be loaded.
    #[error(
        "the NCCL library could not be loaded (looked for libnccl.so and its versioned names on \
         the library path): install NCCL, or point LD_LIBRARY_PATH at a folder with libnccl.so \
         (PyTorch's wheel ships libnccl.so.2 in site-packages/nvidia/nccl/lib: link it there \
         as libnccl.so)"
    )]
    NcclMissing,
    /// An argument that cannot work (an empty GPU set, a rank beyond the world, ...).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Io`] for `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Error {
        Error::Gpu(e.into())
    }
}
