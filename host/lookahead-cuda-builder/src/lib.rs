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
//! crate's build, to give it what Rust-CUDA's builder and codegen give it:
//!
//! * every crate of the device build (the kernel crate's dependencies too) is `#![no_std]`
//!   and knows the `nvvm_internal` tool attributes (`-Zcrate-attr`, as Rust-CUDA passes
//!   them); rustc ignores those attributes, so the builder warns where the kernel crate
//!   uses one, and an `extern` static they would have placed (OptiX's launch parameters)
//!   is a link error;
//! * `#[cfg(target_feature = "compute_70")]` holds from that architecture on, as under
//!   Rust-CUDA's codegen (see [`NvvmArch::all_target_features`]), and `CUDA_ARCH` is set
//!   (`610` for sm_61);
//! * `alloc` is built (kernels may use `Box`, `Vec`, `String` through the driver's heap),
//!   and the PTX may call the driver's `vprintf`, `malloc`, `free` and `__assertfail`;
//! * the kernel crate gets the `gpu-kernel` ABI's feature gate when its root does not
//!   enable it itself.
//!
//! Shared-memory statics are moved to `.shared` at link time. The compiler's warnings are
//! shown as cargo shows a build script's (`cargo:warning=`).

mod arch;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use lookahead_builder::{Arch, BuildError, KernelBuilder};

pub use arch::NvvmArch;

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
}

/// The folder of the target directory the builds of crates written for `cuda_std` go to:
/// their flags differ from Lookahead kernel crates', so they keep their own `core`.
const BUILD_DIR: &str = "cuda";

/// Crate attributes every crate of the device build gets, as under Rust-CUDA's builder.
const ALL_CRATE_ATTRS: [&str; 3] = [
    "no_std",
    "feature(register_tool)",
    "register_tool(nvvm_internal)",
];

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
    build_args: Vec<String>,
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
            build_args: Vec::new(),
        }
    }

    /// The architecture to build for (default [`NvvmArch::Compute61`], as Rust-CUDA's). PTX
    /// built for one architecture also loads on later ones.
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

    /// Additional arguments for the nested `cargo` (`&["--features", "optix"]`).
    pub fn build_args(mut self, args: &[impl AsRef<str>]) -> Self {
        (self.build_args).extend(args.iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// The PTX ISA version to emit (default: 8.0, or the first version that knows the
    /// architecture, for sm_100 and later).
    pub fn ptx_isa(mut self, version: &str) -> Self {
        self.ptx_isa = Some(version.to_string());
        self
    }

    /// Builds the PTX and returns its path: the [`CudaBuilder::copy_to`] path when there
    /// is one, as Rust-CUDA's builder does. In a build script it also copies the PTX to
    /// `OUT_DIR/<crate>.ptx`, sets `KERNEL_PTX_PATH` to that file for the crate being built,
    /// and tells cargo to rerun when the kernel crate changes.
    pub fn build(self) -> Result<PathBuf, CudaBuilderError> {
        let builder = self.kernel_builder()?;
        let in_build_script = lookahead_builder::in_build_script();
        if in_build_script {
            builder.rerun_if_changed()?;
        }
        let built = builder.build()?;
        let ptx = &built[0].path;
        let out_dir = env::var_os("OUT_DIR").filter(|_| in_build_script);
        if let Some(out_dir) = out_dir.map(PathBuf::from) {
            let dest = out_dir.join(ptx.file_name().expect("the builder names PTX files"));
            copy(ptx, &dest)?;
            println!("cargo:rustc-env=KERNEL_PTX_PATH={}", dest.display());
        }
        let Some(path) = &self.copy_to else {
            return Ok(ptx.clone());
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(|source| CudaBuilderError::Copy {
                path: path.clone(),
                source,
            })?;
        }
        copy(ptx, path)?;
        Ok(path.clone())
    }

    /// The `lookahead-builder` configuration for this crate.
    pub fn kernel_builder(&self) -> Result<KernelBuilder, CudaBuilderError> {
        let arch: Arch = self.arch.target_cpu().parse()?;
        let isa = (self.ptx_isa.as_deref()).unwrap_or_else(|| min_ptx_isa(self.arch));
        let mut builder = KernelBuilder::new(&self.path_to_crate)
            .archs([arch])
            .ptx_isa(isa)
            .require_no_std(false)
            .with_alloc(true)
            .cuda_arch_env(true)
            .build_dir(BUILD_DIR);
        for name in DRIVER_FUNCTIONS {
            builder = builder.allow_extern(name);
        }
        for attr in ALL_CRATE_ATTRS {
            builder = builder.rustflag(&format!("-Zcrate-attr={attr}"));
        }
        builder = builder.arch_rustflags(arch::target_feature_flags);
        for arg in &self.build_args {
            builder = builder.cargo_arg(arg);
        }
        let root = builder.lib_root()?;
        let text = fs::read_to_string(&root).map_err(|source| CudaBuilderError::ReadRoot {
            path: root.clone(),
            source,
        })?;
        for attr in missing_crate_attrs(&text) {
            builder = builder.crate_attr(attr);
        }
        warn_about_nvvm_attributes(root.parent().unwrap_or(&root));
        Ok(builder)
    }
}

/// The PTX ISA version for `arch` when none is asked for: 8.0, or the first version that
/// knows the architecture.
fn min_ptx_isa(arch: NvvmArch) -> &'static str {
    match arch.capability() {
        ..=90 => "8.0",
        100 | 101 => "8.6",
        120 => "8.7",
        _ => "8.8",
    }
}

/// What the device build must add to a crate root written for Rust-CUDA's codegen, which
/// does not enable the `gpu-kernel` ABI (every crate gets `no_std` already).
fn missing_crate_attrs(root: &str) -> Vec<&'static str> {
    let code: String = root
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    let mut attrs = Vec::new();
    if !code.contains("abi_gpu_kernel") {
        attrs.push("feature(abi_gpu_kernel)");
    }
    attrs
}

/// `nvvm_internal::...` attributes tell Rust-CUDA's codegen something (an address space, a
/// kernel); rustc accepts them, registered as a tool, and ignores them. Each one in the
/// kernel crate's sources (the folder of its root) is a warning, so a different result is
/// never silent.
fn warn_about_nvvm_attributes(src_dir: &Path) {
    let mut todo = vec![src_dir.to_path_buf()];
    let mut files = Vec::new();
    while let Some(dir) = todo.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    for file in files {
        let text = fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if let Some(at) = code.find("nvvm_internal::") {
                let attr: String = (code[at..].chars())
                    .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '(' | ')'))
                    .collect();
                let message = format!(
                    "{}:{}: `{attr}` is an attribute of Rust-CUDA's codegen, which rustc ignores here",
                    file.display(),
                    n + 1
                );
                if lookahead_builder::in_build_script() {
                    println!("cargo:warning={message}");
                } else {
                    eprintln!("warning: {message}");
                }
            }
        }
    }
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
            ["feature(abi_gpu_kernel)"]
        );
        assert!(missing_crate_attrs("#![no_std]\n#![feature(abi_gpu_kernel)]\n").is_empty());
        // A comment is not an attribute.
        assert_eq!(missing_crate_attrs("// feature(abi_gpu_kernel)\n").len(), 1);
    }

    #[test]
    fn new_architectures_get_a_ptx_isa_that_knows_them() {
        assert_eq!(min_ptx_isa(NvvmArch::Compute90), "8.0");
        assert_eq!(min_ptx_isa(NvvmArch::Compute120), "8.7");
        assert_eq!(min_ptx_isa(NvvmArch::Compute121), "8.8");
    }
}
