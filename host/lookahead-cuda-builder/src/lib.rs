//! # cuda_builder, on rustc's own nvptx backend
//!
//! The build-script API of Rust-CUDA's `cuda_builder` ([`CudaBuilder`]), implemented on
//! `lookahead-builder`: the kernel crate compiles with rustc's `nvptx64-nvidia-cuda` LLVM
//! backend (Debian's rustc or a nightly with `rust-src`), not `rustc_codegen_nvvm`, so no
//! pinned nightly with `rustc-dev` and no LLVM 7 are needed.
//!
//! ```no_run
//! // build.rs of the host crate
//! use cuda_builder::{CudaBuilder, NvvmArch};
//!
//! CudaBuilder::new("kernels")
//!     .arch(NvvmArch::Compute80)
//!     .copy_to("resources/kernels.ptx")
//!     .build()
//!     .unwrap();
//! ```
//!
//! What the builder does for a crate written for `cuda_std`, beyond a Lookahead kernel
//! crate's build: it builds `alloc` (kernels may use `Box`, `Vec`, `String` through the
//! driver's heap), lets the PTX call the driver's `vprintf`, `malloc`, `free` and
//! `__assertfail`, sets `CUDA_ARCH` (`800` for sm_80) as Rust-CUDA's codegen does, and gives
//! the kernel crate the `gpu-kernel` ABI's feature gate (and `#![no_std]`) when its root
//! does not say so itself. Shared-memory statics are moved to `.shared` at link time.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use lookahead_builder::{link, Arch, BuildError, KernelBuilder};

/// A GPU architecture, named as Rust-CUDA names them (`Compute80` is sm_80).
///
/// rustc's backend and CUDA 12+'s `ptxas` support sm_50 and later; the `cuda_std` atomics
/// with orderings need sm_70 or later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum NvvmArch {
    /// sm_50
    Compute50,
    /// sm_52
    Compute52,
    /// sm_53
    Compute53,
    /// sm_60
    Compute60,
    /// sm_61
    Compute61,
    /// sm_62
    Compute62,
    /// sm_70
    Compute70,
    /// sm_72
    Compute72,
    /// sm_75
    Compute75,
    /// sm_80 (the default: the oldest architecture Lookahead's own kernels target)
    #[default]
    Compute80,
    /// sm_86
    Compute86,
    /// sm_87
    Compute87,
    /// sm_89
    Compute89,
    /// sm_90
    Compute90,
    /// sm_100
    Compute100,
    /// sm_120
    Compute120,
}

impl NvvmArch {
    /// The compute capability as major * 10 + minor (`80` for `Compute80`).
    pub fn capability(self) -> u32 {
        use NvvmArch::*;
        match self {
            Compute50 => 50,
            Compute52 => 52,
            Compute53 => 53,
            Compute60 => 60,
            Compute61 => 61,
            Compute62 => 62,
            Compute70 => 70,
            Compute72 => 72,
            Compute75 => 75,
            Compute80 => 80,
            Compute86 => 86,
            Compute87 => 87,
            Compute89 => 89,
            Compute90 => 90,
            Compute100 => 100,
            Compute120 => 120,
        }
    }

    /// The `sm_XX` name.
    pub fn target_cpu(self) -> String {
        format!("sm_{}", self.capability())
    }
}

/// Why a kernel build failed.
#[derive(Debug, thiserror::Error)]
pub enum CudaBuilderError {
    /// The PTX build itself failed (toolchain, compile, link or `ptxas` error).
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The kernel crate's root could not be read.
    #[error("could not read the kernel crate's root {path}: {source}")]
    ReadRoot {
        /// The crate root (`src/lib.rs`).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The PTX could not be copied where it was asked for.
    #[error("could not copy the PTX to {path}: {source}")]
    Copy {
        /// Where it was to go.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `build` ran outside a build script and without `OUT_DIR`.
    #[error("CudaBuilder::build runs in a build script (OUT_DIR is not set)")]
    NotInBuildScript,
}

/// Functions the CUDA driver provides that `cuda_std` kernels call.
const DRIVER_FUNCTIONS: [&str; 4] = ["vprintf", "malloc", "free", "__assertfail"];

/// Builds a kernel crate written for `cuda_std` into PTX, from a build script.
#[derive(Debug, Clone)]
pub struct CudaBuilder {
    path_to_crate: PathBuf,
    arch: NvvmArch,
    copy_to: Option<PathBuf>,
    release: bool,
    ptx_isa: Option<String>,
}

impl CudaBuilder {
    /// A builder for the kernel crate whose `Cargo.toml` is in `path_to_crate_root`
    /// (relative to the build script's crate).
    pub fn new(path_to_crate_root: impl AsRef<Path>) -> Self {
        CudaBuilder {
            path_to_crate: path_to_crate_root.as_ref().to_path_buf(),
            arch: NvvmArch::default(),
            copy_to: None,
            release: true,
            ptx_isa: None,
        }
    }

    /// The architecture to build for (default [`NvvmArch::Compute80`]). PTX built for one
    /// architecture also loads on later ones.
    pub fn arch(mut self, arch: NvvmArch) -> Self {
        self.arch = arch;
        self
    }

    /// Also copies the PTX to `path` (relative to the build script's crate).
    pub fn copy_to(mut self, path: impl AsRef<Path>) -> Self {
        self.copy_to = Some(path.as_ref().to_path_buf());
        self
    }

    /// Accepted for compatibility. Device code is always optimised (one fat-LTO'd module
    /// at `opt-level=3`): rustc's nvptx backend needs LTO to leave no calls into `core`.
    pub fn release(mut self, release: bool) -> Self {
        self.release = release;
        self
    }

    /// The PTX ISA version to emit (default 8.0, which CUDA 12 and later drivers load).
    pub fn ptx_isa(mut self, version: &str) -> Self {
        self.ptx_isa = Some(version.to_string());
        self
    }

    /// Builds the PTX into `OUT_DIR/<crate>.ptx`, copies it where [`CudaBuilder::copy_to`]
    /// said, and sets `KERNEL_PTX_PATH` for the crate being built. When rustc runs the
    /// build script as the device linker, this links and exits instead.
    pub fn build(self) -> Result<(), CudaBuilderError> {
        if link::in_link_mode() {
            std::process::exit(link::link_from_args());
        }
        if env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "nvptx64") {
            return Ok(());
        }
        let out_dir =
            PathBuf::from(env::var_os("OUT_DIR").ok_or(CudaBuilderError::NotInBuildScript)?);
        let builder = self.kernel_builder()?;
        builder.rerun_if_changed()?;
        let built = builder.build()?;
        let ptx = &built[0].path;
        let dest = out_dir.join(ptx.file_name().expect("the builder names PTX files"));
        copy(ptx, &dest)?;
        println!("cargo:rustc-env=KERNEL_PTX_PATH={}", dest.display());
        if let Some(path) = &self.copy_to {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::create_dir_all(parent).map_err(|source| CudaBuilderError::Copy {
                    path: path.clone(),
                    source,
                })?;
            }
            copy(ptx, path)?;
        }
        Ok(())
    }

    /// The `lookahead-builder` configuration for this crate.
    pub fn kernel_builder(&self) -> Result<KernelBuilder, CudaBuilderError> {
        let arch: Arch = self.arch.target_cpu().parse()?;
        let mut builder = KernelBuilder::new(&self.path_to_crate)
            .archs([arch])
            .require_no_std(false)
            .with_alloc(true)
            .cuda_arch_env(true);
        for name in DRIVER_FUNCTIONS {
            builder = builder.allow_extern(name);
        }
        if let Some(isa) = &self.ptx_isa {
            builder = builder.ptx_isa(isa);
        }
        let root = crate_root(&self.path_to_crate);
        let text = fs::read_to_string(&root).map_err(|source| CudaBuilderError::ReadRoot {
            path: root.clone(),
            source,
        })?;
        for attr in missing_crate_attrs(&text) {
            builder = builder.crate_attr(attr);
        }
        Ok(builder)
    }
}

/// `src/lib.rs` of the crate (kernel crates for Rust-CUDA keep the default layout).
fn crate_root(crate_dir: &Path) -> PathBuf {
    crate_dir.join("src").join("lib.rs")
}

/// What the device build must add to a crate root written for Rust-CUDA's codegen, which
/// neither enables the `gpu-kernel` ABI nor always says `no_std`.
fn missing_crate_attrs(root: &str) -> Vec<&'static str> {
    let code: String = root
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    let mut attrs = Vec::new();
    if !code.contains("abi_gpu_kernel") {
        attrs.push("feature(abi_gpu_kernel)");
    }
    if !code.contains("no_std") {
        attrs.push("no_std");
    }
    attrs
}

fn copy(from: &Path, to: &Path) -> Result<(), CudaBuilderError> {
    fs::copy(from, to).map_err(|source| CudaBuilderError::Copy {
        path: to.to_path_buf(),
        source,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_only_what_the_root_lacks() {
        assert_eq!(
            missing_crate_attrs("use cuda_std::prelude::*;\n"),
            ["feature(abi_gpu_kernel)", "no_std"]
        );
        assert_eq!(
            missing_crate_attrs("#![cfg_attr(target_os = \"cuda\", no_std)]\n"),
            ["feature(abi_gpu_kernel)"]
        );
        assert!(missing_crate_attrs("#![no_std]\n#![feature(abi_gpu_kernel)]\n").is_empty());
        // A comment is not an attribute.
        assert_eq!(missing_crate_attrs("// no_std\n").len(), 2);
    }

    #[test]
    fn arch_names_match_ptx() {
        assert_eq!(NvvmArch::Compute90.target_cpu(), "sm_90");
        assert_eq!(NvvmArch::default(), NvvmArch::Compute80);
    }
}
