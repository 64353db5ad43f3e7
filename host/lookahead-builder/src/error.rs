//! The builder's error type: each variant names what is missing and how to get it.

use std::path::PathBuf;

/// Why a kernel build failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No Rust compiler that can build `core` for `nvptx64-nvidia-cuda` was found.
    #[error(
        "no Rust toolchain that can build `core` for nvptx64-nvidia-cuda was found.\n\
         Tried:\n{tried}\n\
         Install one of:\n  \
         - Debian: apt-get install -y --no-install-recommends rustc-web cargo-web rust-web-src llvm-22\n  \
         - rustup: rustup toolchain install nightly --component rust-src llvm-tools\n\
         or point LOOKAHEAD_DEVICE_RUSTC at a rustc whose sysroot has library sources."
    )]
    NoDeviceToolchain {
        /// One line per candidate and why it was rejected.
        tried: String,
    },
    /// The LLVM tools (`llvm-link`, `opt`, `llc`, `llvm-ar`) matching rustc's LLVM are missing.
    #[error(
        "the LLVM {major} tools (llvm-link, opt, llc, llvm-ar) that match {rustc}'s LLVM were not found.\n\
         Looked in: {looked}\n\
         Install them with: apt-get install -y --no-install-recommends llvm-{major}\n\
         (or `rustup component add llvm-tools` for a rustup toolchain), or set LOOKAHEAD_LLVM_BIN."
    )]
    NoLlvmTools {
        /// LLVM major version rustc was built with.
        major: u32,
        /// The rustc whose LLVM must be matched.
        rustc: String,
        /// Directories searched.
        looked: String,
    },
    /// Kernels call libdevice math (`__nv_*`) but `libdevice.10.bc` was not found.
    #[error(
        "the kernels call libdevice functions ({symbols}) but libdevice.10.bc was not found.\n\
         Install it with: python3 -m pip install nvidia-cuda-nvcc-cu12==12.9.86\n\
         or set LOOKAHEAD_LIBDEVICE to the file."
    )]
    NoLibdevice {
        /// Some of the `__nv_*` symbols referenced.
        symbols: String,
    },
    /// An architecture string could not be understood.
    #[error("`{given}` is not a GPU architecture this builder supports; write it like `sm_80` or `sm_90` (sm_50 to sm_121), comma-separated in LOOKAHEAD_ARCHS")]
    BadArch {
        /// What was given.
        given: String,
    },
    /// A tool ran and failed.
    #[error("`{command}` failed with {status}:\n{stderr}")]
    ToolFailed {
        /// The command line.
        command: String,
        /// Exit status, as text.
        status: String,
        /// What it printed on standard error (or output, for cargo).
        stderr: String,
    },
    /// `ptxas` rejected the PTX the pipeline produced.
    #[error("ptxas rejected {ptx} for {arch}:\n{stderr}")]
    PtxasRejected {
        /// The PTX file.
        ptx: PathBuf,
        /// The architecture.
        arch: String,
        /// What ptxas printed.
        stderr: String,
    },
    /// The produced PTX still needs symbols from elsewhere (an `.extern .func`, or an
    /// `.extern .global`/`.const` variable).
    #[error("{ptx} has unresolved symbols: {symbols}. Kernels may only call code and use statics that are compiled into the same crate graph (or libdevice); statics declared in an `extern` block for another runtime (OptiX's launch parameters) are not supported.")]
    UnresolvedSymbols {
        /// The PTX file.
        ptx: PathBuf,
        /// The unresolved names.
        symbols: String,
    },
    /// The kernel crate's root is not `#![no_std]` on every target.
    #[error("{root} is not `#![no_std]`: a kernel crate is `no_std` on the host too, so the host build of its kernels (and the CPU emulator) refuses what the GPU build refuses (`println!`, `Vec`, `format!`, `f32::sin` without `GpuFloat`). Write `#![no_std]` instead of `#![cfg_attr(target_arch = \"nvptx64\", no_std)]`; host-only code in the crate names the standard library with `extern crate std;`")]
    NotNoStd {
        /// The crate root.
        root: PathBuf,
    },
    /// A `#[kernel(launch_bounds(..))]` export could not be turned into its entry's
    /// directives (a bug in `#[kernel]` or the builder, not in the kernel).
    #[error("launch bounds: {0}")]
    LaunchBounds(String),
    /// A static marked for shared or constant memory could not be moved there.
    #[error("moving a static to its address space: {0}")]
    AddressSpace(String),
    /// A file could not be read or written.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The builder was run outside a cargo build script.
    #[error("{0} is not set: KernelBuilder::build_for_cargo must run inside a build script")]
    NotInBuildScript(&'static str),
}

impl BuildError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BuildError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
