//! One error type for the host runtime, with variants a caller can act on.

use cudarc::driver::{sys, DriverError};

/// How to opt in to oversubscription; appended to every [`Error::OutOfMemory`] message.
pub const OVERSUBSCRIPTION_HELP: &str = "Managed memory larger than the GPU's free memory is \
oversubscribed: the driver evicts and re-migrates pages on every pass, which is slow and, on a \
shared GPU, can stall every process using it. Lookahead refuses such allocations by default. \
Free memory first, allocate less, or opt in explicitly with `Gpu::allow_oversubscription(true)` \
or `AllocOptions { allow_oversubscription: true, .. }`.";

/// A capability of the device or driver that some API needs (see [`crate::Capabilities`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// `CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY`: the device can allocate managed memory at all.
    ManagedMemory,
    /// `CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS`: page-fault driven migration, needed
    /// for prefetching to the device and for most memory advice.
    ConcurrentManagedAccess,
    /// `CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS`: the GPU can read plain `malloc` memory
    /// (HMM or ATS).
    PageableMemoryAccess,
    /// `CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED`: `cuMemCreate`/`cuMemMap` and
    /// friends.
    VirtualMemoryManagement,
    /// `CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED`: a cache-coherent link (NVLink-C2C).
    HostNativeAtomics,
    /// `cuMemPrefetchBatchAsync`: a CUDA 12.8 or newer driver.
    BatchPrefetch,
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Capability::ManagedMemory => "managed memory (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)",
            Capability::ConcurrentManagedAccess => {
                "concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)"
            }
            Capability::PageableMemoryAccess => {
                "pageable memory access / HMM (CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)"
            }
            Capability::VirtualMemoryManagement => {
                "virtual memory management \
                 (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)"
            }
            Capability::HostNativeAtomics => {
                "host-native atomics / NVLink-C2C \
                 (CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)"
            }
            Capability::BatchPrefetch => {
                "batched prefetch (cuMemPrefetchBatchAsync, driver >= 12.8)"
            }
        })
    }
}

/// What went wrong in a host-runtime call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `libcuda.so` could not be loaded: no NVIDIA driver on this machine.
    #[error(
        "no CUDA driver found (libcuda.so could not be loaded): this machine has no NVIDIA \
             GPU driver installed"
    )]
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
    #[error(
        "no PTX for compute capability {device_cc}: modules were built for {built:?}; rebuild \
             with LOOKAHEAD_ARCHS including sm_{device_cc}"
    )]
    NoPtxForDevice {
        /// The device's compute capability (major * 10 + minor).
        device_cc: u32,
        /// The architectures available.
        built: Vec<u32>,
    },
    /// A range (of elements or bytes) is empty, overflows, or lies outside its allocation.
    #[error("invalid range: start {start}, length {len}, limit {limit}: {reason}")]
    InvalidRange {
        /// First element (or byte address) of the range.
        start: u64,
        /// Length of the range, in the same unit.
        len: u64,
        /// The bound it was checked against (allocation length or end address).
        limit: u64,
        /// Why it was refused.
        reason: &'static str,
    },
    /// An address given to a managed-memory call (prefetch, advice, range attributes) does
    /// not belong to a managed (`cuMemAllocManaged`) allocation.
    #[error(
        "address {ptr:#x} is not managed memory: prefetch, advice and range attributes work \
             only on cuMemAllocManaged allocations"
    )]
    NotManagedMemory {
        /// The offending address.
        ptr: u64,
    },
    /// The device or driver lacks something the called API needs.
    #[error("{needed_by} needs {capability}, which this device/driver does not provide")]
    CapabilityMissing {
        /// The missing capability.
        capability: Capability,
        /// The API that needed it.
        needed_by: &'static str,
    },
    /// An allocation was refused: it does not fit in the GPU's free memory.
    #[error(
        "out of memory in {during}: {requested} bytes requested, {available} bytes available. {}",
        OVERSUBSCRIPTION_HELP
    )]
    OutOfMemory {
        /// Where: `ManagedBuffer::new` (refused before asking the driver), or the driver call.
        during: &'static str,
        /// Bytes asked for.
        requested: usize,
        /// Bytes that were available (device free memory minus managed memory already
        /// promised to live buffers, for managed allocations).
        available: usize,
    },
    /// A kernel launch was refused before reaching the driver: its configuration breaks a
    /// CUDA limit (block size, grid size, ...).
    #[error("invalid launch of kernel `{kernel}`: {reason}")]
    InvalidLaunch {
        /// The kernel's name.
        kernel: &'static str,
        /// What is wrong with the configuration.
        reason: String,
    },
    /// A kernel launch was refused before reaching the driver: the slices passed break a
    /// length rule the kernel declares (`#[kernel(same_len(..), min_len(..))]`).
    #[error("kernel `{kernel}`: slice lengths break its `{rule}` rule: {lengths}")]
    LengthMismatch {
        /// The kernel's name.
        kernel: &'static str,
        /// The rule: `same_len` or `min_len`.
        rule: &'static str,
        /// The lengths involved, as `name = len`.
        lengths: String,
    },
    /// An emulated launch found a deadlock or a data race in the kernel.
    #[error(transparent)]
    Emulator(Box<lookahead_emu::EmuError>),
    /// A kernel finished but left part of its output unwritten (outputs are filled with a
    /// poison pattern before the launch and checked afterwards): a bug in the kernel or in
    /// the sizes it was given.
    #[error("kernel `{kernel}` left its output unwritten: {what}")]
    UnwrittenOutput {
        /// The kernel's name.
        kernel: &'static str,
        /// Which output, and where.
        what: String,
    },
    /// The driver refused to launch a kernel.
    #[error("launching kernel `{kernel}` failed: {source}")]
    Launch {
        /// The kernel's name.
        kernel: &'static str,
        /// The driver's error code.
        #[source]
        source: DriverError,
    },
    /// An operating-system operation failed (a thread, a file).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A call was given something it cannot use; `reason` says what and what to do instead.
    #[error("{call}: {reason}")]
    InvalidArgument {
        /// The call.
        call: &'static str,
        /// What is wrong.
        reason: String,
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

impl Error {
    /// Maps a failed driver call to the most specific variant: `CUDA_ERROR_NO_DEVICE` to
    /// [`Error::NoDevice`], `CUDA_ERROR_OUT_OF_MEMORY` to [`Error::OutOfMemory`] (with
    /// `requested` bytes when known), everything else to [`Error::Driver`].
    pub fn from_driver(call: &'static str, source: DriverError, requested: usize) -> Error {
        match source.0 {
            sys::cudaError_enum::CUDA_ERROR_NO_DEVICE => Error::NoDevice {
                ordinal: 0,
                count: 0,
            },
            sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfMemory {
                during: call,
                requested,
                available: if crate::gpu::driver_present() {
                    cudarc::driver::result::mem_get_info()
                        .map(|(free, _)| free)
                        .unwrap_or(0)
                } else {
                    0
                },
            },
            _ => Error::Driver { call, source },
        }
    }

    /// The driver's error code, for [`Error::Driver`].
    pub fn driver_code(&self) -> Option<sys::CUresult> {
        match self {
            Error::Driver { source, .. } => Some(source.0),
            _ => None,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a bare `?` on a cudarc call gives: [`Error::Driver`] with the call named generically.
/// Name the call with [`DriverContext::during`] where it helps the reader.
impl From<DriverError> for Error {
    fn from(source: DriverError) -> Self {
        Error::Driver {
            call: "a CUDA driver call",
            source,
        }
    }
}

/// Names the driver call behind a cudarc error, so programs mixing cudarc and Lookahead calls
/// keep one error type:
///
/// ```no_run
/// use lookahead::DriverContext;
/// # fn f(gpu: &lookahead::Gpu) -> lookahead::Result<()> {
/// let x = gpu.stream().clone_htod(&[1.0f32; 4]).during("cuMemcpyHtoD")?;
/// # let _ = x; Ok(()) }
/// ```
pub trait DriverContext<T> {
    /// Wraps the error as [`Error::Driver`] naming `call`.
    fn during(self, call: &'static str) -> Result<T>;
    /// Like [`DriverContext::during`], but maps out-of-memory to [`Error::OutOfMemory`]
    /// (`requested` bytes).
    fn during_alloc(self, call: &'static str, requested: usize) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, DriverError> {
    fn during(self, call: &'static str) -> Result<T> {
        self.map_err(|source| Error::Driver { call, source })
    }
    fn during_alloc(self, call: &'static str, requested: usize) -> Result<T> {
        self.map_err(|source| Error::from_driver(call, source, requested))
    }
}

/// Bytes of `len` elements of `T`, or [`Error::InvalidRange`] when that overflows `usize`.
pub(crate) fn byte_size<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or(Error::InvalidRange {
            start: 0,
            len: len as u64,
            limit: usize::MAX as u64,
            reason: "a size in bytes that overflows usize",
        })
}

/// Turns a raw `CUresult` into a `Result` naming the call.
pub(crate) fn check(call: &'static str, r: sys::CUresult) -> Result<()> {
    r.result().during(call)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_errors_map_to_specific_variants() {
        let e = Error::from_driver(
            "cuMemCreate",
            DriverError(sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE),
            8,
        );
        assert!(matches!(
            e,
            Error::Driver {
                call: "cuMemCreate",
                ..
            }
        ));
        assert_eq!(
            e.driver_code(),
            Some(sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE)
        );
        let e = Error::from_driver(
            "cuInit",
            DriverError(sys::cudaError_enum::CUDA_ERROR_NO_DEVICE),
            0,
        );
        assert!(matches!(e, Error::NoDevice { .. }));
        let e = Error::from_driver(
            "cuMemAlloc",
            DriverError(sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY),
            1 << 40,
        );
        assert!(matches!(
            e,
            Error::OutOfMemory {
                requested: 1099511627776,
                ..
            }
        ));
    }

    #[test]
    fn question_mark_on_a_cudarc_call_gives_a_driver_error() {
        fn run() -> Result<()> {
            Err(DriverError(sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE))?
        }
        let e = run().unwrap_err();
        assert_eq!(
            e.driver_code(),
            Some(sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE)
        );
        assert!(matches!(
            e,
            Error::Driver {
                call: "a CUDA driver call",
                ..
            }
        ));
        // (Displaying a driver error asks the driver for its text: not on a machine without.)
        let named: Result<()> =
            Err(DriverError(sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE)).during("cuMemcpyHtoD");
        assert!(matches!(
            named,
            Err(Error::Driver {
                call: "cuMemcpyHtoD",
                ..
            })
        ));
    }

    #[test]
    fn out_of_memory_explains_oversubscription() {
        let e = Error::OutOfMemory {
            during: "ManagedBuffer::new",
            requested: 100,
            available: 10,
        };
        let msg = e.to_string();
        assert!(msg.contains("oversubscribed"), "{msg}");
        assert!(msg.contains("allow_oversubscription"), "{msg}");
        assert!(msg.contains("100 bytes requested"), "{msg}");
    }

    #[test]
    fn capability_missing_names_the_capability() {
        let e = Error::CapabilityMissing {
            capability: Capability::ConcurrentManagedAccess,
            needed_by: "prefetch to device",
        };
        let msg = e.to_string();
        assert!(msg.contains("CONCURRENT_MANAGED_ACCESS"), "{msg}");
        assert!(msg.contains("prefetch to device"), "{msg}");
    }
}
