//! # lookahead-builder
//!
//! Compiles a `#![no_std]` Rust kernel crate to one self-contained PTX file per GPU
//! architecture, from a cargo build script: Lookahead's counterpart of Rust-CUDA's
//! `cuda_builder`, for rustc's own `nvptx64-nvidia-cuda` target instead of a custom backend.
//!
//! The pipeline, per architecture:
//! 1. find a device toolchain ([`DeviceToolchain::discover`]): a rustup nightly with
//!    `rust-src`, else Debian's `rustc-web` + `rust-web-src`;
//! 2. `cargo rustc --crate-type cdylib --target nvptx64-nvidia-cuda -Zbuild-std=core` with
//!    `-C target-cpu=sm_XX -C target-feature=+ptxNN`, a fat-LTO release profile, and a
//!    linker script that keeps the bitcode rustc hands it ([`link::LINKER_SCRIPT`]);
//! 3. once cargo has finished, link that bitcode to PTX with the LLVM tools matching
//!    rustc's LLVM ([`link`]), pulling in libdevice when kernels call `__nv_*` math;
//! 4. check the PTX is self-contained and, where `ptxas` is installed, that it assembles.
//!
//! ```no_run
//! // build.rs of a host crate (or of the kernel crate itself, for its host side):
//! // `fn main() {` ...
//! lookahead_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).build_for_cargo();
//! // ... `}`
//! // then, in the crate:
//! // include!(concat!(env!("OUT_DIR"), "/demo_kernels_ptx.rs"));
//! // which defines `PTX: &[(u32, &str)]` (compute capability, PTX text) and `PTX_TOOLCHAIN`.
//! ```
//!
//! Environment: `LOOKAHEAD_ARCHS` (`sm_80,sm_90` by default), `LOOKAHEAD_PTX_ISA`
//! (`8.0` by default), `LOOKAHEAD_PTX_TARGET_DIR`, `LOOKAHEAD_DEVICE_RUSTC`,
//! `LOOKAHEAD_LLVM_BIN`, `LOOKAHEAD_PTXAS`, `LOOKAHEAD_LIBDEVICE`.

pub mod addrspace;
mod arch;
mod error;
pub mod link;
mod metadata;
mod nested;
pub mod ptx;
mod tool;
mod toolchain;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use arch::Arch;
pub use error::BuildError;
pub use toolchain::{CudaTools, DeviceToolchain, ToolchainSource};

/// The rustc target the kernels are compiled for.
pub const TARGET: &str = "nvptx64-nvidia-cuda";

/// PTX ISA version used when nothing else is asked for: 8.0 is the first with
/// `cp.async.bulk.prefetch` and needs a CUDA 12.0+ driver.
pub const DEFAULT_PTX_ISA: &str = "8.0";

/// The rustc flag that turns off the MIR passes that may copy a barrier or a warp collective
/// into code that only some threads run (see [`KernelBuilder`]'s device flags).
pub const DISABLED_MIR_PASSES: &str = "-Zmir-enable-passes=-JumpThreading";

/// Whether this process is a cargo build script: cargo gives build scripts `OUT_DIR` and
/// `HOST` (tests get `OUT_DIR` too, but not `HOST`).
pub fn in_build_script() -> bool {
    env::var_os("OUT_DIR").is_some() && env::var_os("HOST").is_some()
}

/// One built PTX module.
#[derive(Debug, Clone)]
pub struct BuiltPtx {
    /// The architecture it was built for.
    pub arch: Arch,
    /// Where the PTX file is.
    pub path: PathBuf,
    /// How long the nested cargo build took.
    pub elapsed: Duration,
    /// The compiler's warnings for the crate graph (rendered), which the builder also shows.
    pub warnings: Vec<String>,
}

/// Builds a kernel crate to PTX. See the [crate docs](crate).
#[derive(Debug, Clone)]
pub struct KernelBuilder {
    crate_dir: PathBuf,
    archs: Option<Vec<Arch>>,
    ptx_isa: Option<String>,
    target_dir: Option<PathBuf>,
    validate: bool,
    device: DeviceOptions,
}

/// How the kernel crate's device build differs from a Lookahead kernel crate's (set by
/// front ends for crates written for other toolchains, such as `lookahead-cuda-builder`).
#[derive(Debug, Clone)]
pub(crate) struct DeviceOptions {
    /// Refuse a crate root that is not `#![no_std]` on every target.
    require_no_std: bool,
    /// Build `alloc` too (`-Zbuild-std=core,alloc`), for kernels that allocate.
    with_alloc: bool,
    /// Crate attributes given to the kernel crate (`-Zcrate-attr`), not to its dependencies.
    crate_attrs: Vec<String>,
    /// Set `CUDA_ARCH` (`900` for sm_90) for the build, as `cuda_builder` does.
    cuda_arch_env: bool,
    /// Functions the PTX may leave to the driver (`vprintf`, `malloc`, `free`).
    allowed_externs: Vec<String>,
    /// rustc flags for every crate of the device build (dependencies and `core` too).
    rustflags: Vec<String>,
    /// More such flags, which depend on the architecture being built.
    arch_rustflags: Option<fn(Arch) -> Vec<String>>,
    /// Arguments for the nested cargo (`--features x`).
    cargo_args: Vec<String>,
    /// The folder under the target directory that holds one build folder per architecture
    /// (`None`: the target directory itself).
    build_dir: Option<String>,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            require_no_std: true,
            with_alloc: false,
            crate_attrs: Vec::new(),
            cuda_arch_env: false,
            allowed_externs: Vec::new(),
            rustflags: Vec::new(),
            arch_rustflags: None,
            cargo_args: Vec::new(),
            build_dir: None,
        }
    }
}

impl KernelBuilder {
    /// A builder for the kernel crate whose `Cargo.toml` is in `crate_dir`.
    pub fn new(crate_dir: impl AsRef<Path>) -> Self {
        KernelBuilder {
            crate_dir: crate_dir.as_ref().to_path_buf(),
            archs: None,
            ptx_isa: None,
            target_dir: None,
            validate: true,
            device: DeviceOptions::default(),
        }
    }

    /// Whether the crate root must be `#![no_std]` on every target (the default, so the host
    /// build of its kernels refuses what the GPU build refuses). Off for crates compiled for
    /// the GPU only, whose root may say `#![cfg_attr(target_os = "cuda", no_std)]`.
    pub fn require_no_std(mut self, yes: bool) -> Self {
        self.device.require_no_std = yes;
        self
    }

    /// Builds the `alloc` crate for the device too, for kernels that allocate (with a global
    /// allocator on the driver's `malloc`/`free`, such as `lookahead-cuda-std`'s).
    pub fn with_alloc(mut self, yes: bool) -> Self {
        self.device.with_alloc = yes;
        self
    }

    /// Gives the kernel crate (only it, not its dependencies) the crate attribute `attr` in
    /// its device build (`-Zcrate-attr`), for example `feature(abi_gpu_kernel)` for a crate
    /// whose root does not enable it.
    pub fn crate_attr(mut self, attr: &str) -> Self {
        self.device.crate_attrs.push(attr.to_string());
        self
    }

    /// Sets `CUDA_ARCH` for the device build to the architecture's compute capability
    /// times ten (`900` for sm_90), which kernels can read with `env!("CUDA_ARCH")`.
    pub fn cuda_arch_env(mut self, yes: bool) -> Self {
        self.device.cuda_arch_env = yes;
        self
    }

    /// Lets the PTX call `name`, a function the CUDA driver provides (`vprintf`, `malloc`,
    /// `free`, `__assertfail`), instead of refusing it as unresolved.
    pub fn allow_extern(mut self, name: &str) -> Self {
        self.device.allowed_externs.push(name.to_string());
        self
    }

    /// Gives every crate of the device build (its dependencies and `core` too) the rustc
    /// flag `flag`, as `RUSTFLAGS` would: `--cfg=...`, `-Zcrate-attr=no_std`.
    pub fn rustflag(mut self, flag: &str) -> Self {
        self.device.rustflags.push(flag.to_string());
        self
    }

    /// Gives every crate of the device build for an architecture the rustc flags `flags`
    /// returns for it (`--cfg`s that say which architecture it is).
    pub fn arch_rustflags(mut self, flags: fn(Arch) -> Vec<String>) -> Self {
        self.device.arch_rustflags = Some(flags);
        self
    }

    /// Passes `arg` to the nested cargo (`--features`, `--no-default-features`, ...).
    pub fn cargo_arg(mut self, arg: &str) -> Self {
        self.device.cargo_args.push(arg.to_string());
        self
    }

    /// Builds in `<target dir>/<name>/sm_XX` instead of `<target dir>/sm_XX`: for builds
    /// whose rustc flags differ from other builds', which would otherwise make cargo
    /// rebuild `core` each time the two alternate in one folder.
    pub fn build_dir(mut self, name: &str) -> Self {
        self.device.build_dir = Some(name.to_string());
        self
    }

    /// Architectures to build; overrides `LOOKAHEAD_ARCHS` and the default `sm_80,sm_90`.
    pub fn archs(mut self, archs: impl IntoIterator<Item = Arch>) -> Self {
        let mut list: Vec<Arch> = archs.into_iter().collect();
        list.sort();
        list.dedup();
        self.archs = Some(list);
        self
    }

    /// PTX ISA version such as `"8.0"`; overrides `LOOKAHEAD_PTX_ISA`.
    pub fn ptx_isa(mut self, version: &str) -> Self {
        self.ptx_isa = Some(version.to_string());
        self
    }

    /// Where the nested cargo builds go (one sub-directory per architecture). By default
    /// `<cargo target dir>/lookahead-ptx`, shared by every build script of the workspace so
    /// `core` is compiled once per architecture.
    pub fn target_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.target_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Whether to run `ptxas` on each PTX file when `ptxas` is installed (default true).
    pub fn validate(mut self, yes: bool) -> Self {
        self.validate = yes;
        self
    }

    /// The kernel crate's library root (`src/lib.rs`, or what its `[lib] path` says).
    pub fn lib_root(&self) -> Result<PathBuf, BuildError> {
        metadata::lib_root(&self.crate_dir)
    }

    /// The architectures this builder will build.
    pub fn resolved_archs(&self) -> Result<Vec<Arch>, BuildError> {
        match (&self.archs, env::var("LOOKAHEAD_ARCHS")) {
            (Some(archs), _) => Ok(archs.clone()),
            (None, Ok(list)) if !list.trim().is_empty() => Arch::parse_list(&list),
            _ => Ok(Arch::DEFAULT.to_vec()),
        }
    }

    fn resolved_ptx_isa(&self) -> Result<String, BuildError> {
        let isa = self
            .ptx_isa
            .clone()
            .or_else(|| env::var("LOOKAHEAD_PTX_ISA").ok())
            .unwrap_or_else(|| DEFAULT_PTX_ISA.to_string());
        // "8.0" -> "ptx80"
        let digits: String = isa.chars().filter(char::is_ascii_digit).collect();
        if digits.len() < 2 || !isa.contains('.') {
            return Err(BuildError::BadArch {
                given: format!("PTX ISA `{isa}` (write it like 8.0)"),
            });
        }
        Ok(format!("ptx{digits}"))
    }

    /// Builds every architecture and returns the PTX files, showing the compiler's warnings
    /// (as `cargo:warning=` lines in a build script). Works anywhere; in a build script,
    /// [`KernelBuilder::build_for_cargo`] also embeds the PTX in the crate.
    pub fn build(&self) -> Result<Vec<BuiltPtx>, BuildError> {
        let toolchain = DeviceToolchain::discover()?;
        let cuda = CudaTools::discover();
        self.build_with(&toolchain, &cuda)
    }

    fn build_with(
        &self,
        toolchain: &DeviceToolchain,
        cuda: &CudaTools,
    ) -> Result<Vec<BuiltPtx>, BuildError> {
        let target_root = self.target_root()?;
        let crate_dir = fs::canonicalize(&self.crate_dir)
            .map_err(|e| BuildError::io("opening kernel crate", &self.crate_dir, e))?;
        metadata::lib_name(&crate_dir, self.device.require_no_std)?;
        let linker = link::write_linker_script(&target_root)?;
        let ptx_feature = self.resolved_ptx_isa()?;
        let settings = link::LinkSettings {
            llvm_bin: toolchain.llvm_bin.clone(),
            libdevice: cuda.libdevice.clone(),
            allowed_externs: self.device.allowed_externs.clone(),
        };

        let mut built = Vec::new();
        for arch in self.resolved_archs()? {
            let mut dir = target_root.clone();
            dir.extend(&self.device.build_dir);
            let dir = dir.join(arch.target_cpu());
            let started = Instant::now();
            let mut cmd = nested::command(toolchain, &self.device, &crate_dir, &dir);
            let rustflags = self.rustflags(arch, &ptx_feature, &linker);
            cmd.env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"));
            if self.device.cuda_arch_env {
                cmd.env("CUDA_ARCH", (arch.compute_capability() * 10).to_string());
            }
            let outcome = nested::run(&mut cmd)?;
            let artifact = outcome.artifact.ok_or_else(|| {
                BuildError::io(
                    "cargo finished but reported no PTX for",
                    &crate_dir,
                    std::io::ErrorKind::NotFound.into(),
                )
            })?;
            let path = link::link_artifact(&artifact, &settings)?;
            if self.validate {
                if let Some(ptxas) = &cuda.ptxas {
                    ptx::validate_with_ptxas(ptxas, &path, &arch.target_cpu())?;
                }
            }
            built.push(BuiltPtx {
                arch,
                path,
                elapsed: started.elapsed(),
                warnings: outcome.warnings,
            });
        }
        nested::show_warnings(built.iter().flat_map(|b| &b.warnings));
        Ok(built)
    }

    /// The device build's rustc flags for `arch`.
    fn rustflags(&self, arch: Arch, ptx_feature: &str, linker: &Path) -> Vec<String> {
        let mut flags = vec![
            format!("-Ctarget-cpu={}", arch.target_cpu()),
            format!("-Ctarget-feature=+{ptx_feature}"),
            format!("-Clinker={}", linker.display()),
            // MIR's jump threading copies a call into both arms of a branch; when the
            // call holds a barrier and the branch differs between threads, the threads
            // of one warp reach two `bar.sync`s and the block deadlocks
            // (rust-lang/rust#137086). LLVM's passes respect `convergent`; MIR has no
            // such notion, so the pass is off for device code.
            DISABLED_MIR_PASSES.to_string(),
        ];
        flags.extend(self.device.rustflags.iter().cloned());
        flags.extend(
            self.device
                .arch_rustflags
                .map(|f| f(arch))
                .unwrap_or_default(),
        );
        flags
    }

    /// Builds from a build script: does nothing while the crate itself is compiled for the
    /// GPU, otherwise builds every architecture, copies the PTX into `OUT_DIR`, writes
    /// `OUT_DIR/<lib name>_ptx.rs`, and tells cargo when to rerun. On failure it prints
    /// the error and exits, so cargo shows the message as it is.
    pub fn build_for_cargo(&self) {
        if let Err(e) = self.try_build_for_cargo() {
            eprintln!("error: lookahead kernel build failed: {e}");
            std::process::exit(1);
        }
    }

    /// Prints the `cargo:rerun-if-*` lines of a build script that builds this crate: its
    /// sources and its path dependencies, and the settings the build reads.
    pub fn rerun_if_changed(&self) -> Result<(), BuildError> {
        for var in [
            "LOOKAHEAD_ARCHS",
            "LOOKAHEAD_PTX_ISA",
            "LOOKAHEAD_PTX_TARGET_DIR",
            "LOOKAHEAD_DEVICE_RUSTC",
            "LOOKAHEAD_DEVICE_CARGO",
            "LOOKAHEAD_LLVM_BIN",
            "LOOKAHEAD_PTXAS",
            "LOOKAHEAD_LIBDEVICE",
        ] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        let crate_dir = fs::canonicalize(&self.crate_dir)
            .map_err(|e| BuildError::io("opening kernel crate", &self.crate_dir, e))?;
        for watched in metadata::source_paths(&crate_dir) {
            println!("cargo:rerun-if-changed={}", watched.display());
        }
        Ok(())
    }

    fn try_build_for_cargo(&self) -> Result<(), BuildError> {
        if env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "nvptx64") {
            // This is the device-side compile of a crate that builds itself: nothing to do.
            return Ok(());
        }
        let out_dir =
            PathBuf::from(env::var_os("OUT_DIR").ok_or(BuildError::NotInBuildScript("OUT_DIR"))?);
        self.rerun_if_changed()?;
        let crate_dir = fs::canonicalize(&self.crate_dir)
            .map_err(|e| BuildError::io("opening kernel crate", &self.crate_dir, e))?;

        let toolchain = DeviceToolchain::discover()?;
        let cuda = CudaTools::discover();
        let started = Instant::now();
        let built = self.build_with(&toolchain, &cuda)?;
        let crate_name = metadata::lib_name(&crate_dir, self.device.require_no_std)?;

        let mut entries = String::new();
        let mut report = format!(
            "kernel crate: {}\ntoolchain: {toolchain}\n",
            crate_dir.display()
        );
        for b in &built {
            let dest = out_dir.join(format!("{crate_name}.{}.ptx", b.arch));
            fs::copy(&b.path, &dest).map_err(|e| BuildError::io("copying PTX to", &dest, e))?;
            entries.push_str(&format!(
                "    ({}, include_str!({:?})),\n",
                b.arch.compute_capability(),
                dest.display().to_string()
            ));
            report.push_str(&format!(
                "{}: {} ({:.1} s)\n",
                b.arch,
                dest.display(),
                b.elapsed.as_secs_f64()
            ));
        }
        report.push_str(&format!(
            "ptxas validation: {}\ntotal: {:.1} s\n",
            match (&cuda.ptxas, self.validate) {
                (Some(p), true) => format!("passed ({})", p.display()),
                (None, true) => "skipped: ptxas not found".into(),
                (_, false) => "off".into(),
            },
            started.elapsed().as_secs_f64()
        ));
        eprint!("{report}");
        let generated = format!(
            "/// PTX of `{crate_name}` built by lookahead-builder: (compute capability, PTX text),\n\
             /// lowest architecture first.\n\
             pub static PTX: &[(u32, &str)] = &[\n{entries}];\n\n\
             /// The device toolchain that built [`PTX`].\n\
             pub const PTX_TOOLCHAIN: &str = {:?};\n",
            toolchain.to_string()
        );
        let file = out_dir.join(format!("{crate_name}_ptx.rs"));
        fs::write(&file, generated).map_err(|e| BuildError::io("writing", &file, e))?;
        let file = out_dir.join(format!("{crate_name}_build_report.txt"));
        fs::write(&file, report).map_err(|e| BuildError::io("writing", &file, e))?;
        Ok(())
    }

    fn target_root(&self) -> Result<PathBuf, BuildError> {
        let root = if let Some(dir) = &self.target_dir {
            dir.clone()
        } else if let Some(dir) = env::var_os("LOOKAHEAD_PTX_TARGET_DIR") {
            PathBuf::from(dir)
        } else if let Some(out_dir) = env::var_os("OUT_DIR") {
            // cargo marks its target directory with CACHEDIR.TAG; share one PTX build
            // directory per workspace so every build script reuses the same `core`.
            let out_dir = PathBuf::from(out_dir);
            out_dir
                .ancestors()
                .find(|a| a.join("CACHEDIR.TAG").exists())
                .map(|t| t.join("lookahead-ptx"))
                .unwrap_or_else(|| out_dir.join("lookahead-ptx"))
        } else {
            env::temp_dir().join("lookahead-ptx")
        };
        fs::create_dir_all(&root).map_err(|e| BuildError::io("creating", &root, e))?;
        Ok(root)
    }
}
