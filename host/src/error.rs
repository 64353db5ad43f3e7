//! One error type for the host runtime, with variants a caller can act on.

use cudarc::driver::DriverError;

/// What went wrong in a host-runtime call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `libcuda.so` could not be loaded: no NVIDIA driver on this machine.
    #[error("no CUDA driver found (libcuda.so could not be loaded): this machine has no NVIDIA GPU driver installed")]
    NoDriver,
    /// The driver loaded but reports no device at this ordinal.
    #[error("no CUDA device {ordinal}: the driver reports {count} device(s)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver sees.
        count: usize,
    },
    /// The PTX set has no module old enough for this device.
    #[error("no PTX for compute capability {device_cc}: modules were built for {built:?}; rebuild with LOOKAHEAD_ARCHS including sm_{device_cc}")]
    NoPtxForDevice {
        /// The device's compute capability (major * 10 + minor).
        device_cc: u32,
        /// The architectures available.
        built: Vec<u32>,
    },
    /// A CUDA driver call failed.
    #[error("{call} failed: {source}")]
    Driver {
        /// The operation, for example `cuModuleLoadData`.
        call: &'static str,
        /// The driver's error code.
        #[source]
        source: DriverError,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Adds the name of the failed call to a driver error.
pub(crate) trait DriverContext<T> {
    fn during(self, call: &'static str) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, DriverError> {
    fn during(self, call: &'static str) -> Result<T> {
        self.map_err(|source| Error::Driver { call, source })
    }
}
