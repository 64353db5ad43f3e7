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
//!    `-C target-cpu=sm_XX -C target-feature=+ptxNN`, a fat-LTO release profile, and this
//!    build script as the "linker";
//! 3. link the bitcode to PTX with the LLVM tools matching rustc's LLVM ([`link`]),
//!    pulling in libdevice when kernels call `__nv_*` math;
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
pub mod ptx;
mod tool;
mod toolchain;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
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

/// One built PTX module.
#[derive(Debug, Clone)]
pub struct BuiltPtx {
    /// The architecture it was built for.
    pub arch: Arch,
    /// Where the PTX file is.
    pub path: PathBuf,
    /// How long the nested cargo build took.
    pub elapsed: Duration,
}

/// Builds a kernel crate to PTX. See the [crate docs](crate).
#[derive(Debug, Clone)]
pub struct KernelBuilder {
    crate_dir: PathBuf,
    archs: Option<Vec<Arch>>,
    ptx_isa: Option<String>,
    target_dir: Option<PathBuf>,
    linker_exe: Option<PathBuf>,
    validate: bool,
    device: DeviceOptions,
}

/// How the kernel crate's device build differs from a Lookahead kernel crate's (set by
/// front ends for crates written for other toolchains, such as `lookahead-cuda-builder`).
#[derive(Debug, Clone)]
struct DeviceOptions {
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
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            require_no_std: true,
            with_alloc: false,
            crate_attrs: Vec::new(),
            cuda_arch_env: false,
            allowed_externs: Vec::new(),
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
            linker_exe: None,
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

    /// The executable rustc runs as the nvptx linker. It must call
    /// [`link::link_from_args`] when [`link::in_link_mode`] is true.
    /// [`KernelBuilder::build_for_cargo`] uses the running build script.
    pub fn linker_exe(mut self, exe: impl AsRef<Path>) -> Self {
        self.linker_exe = Some(exe.as_ref().to_path_buf());
        self
    }

    /// Whether to run `ptxas` on each PTX file when `ptxas` is installed (default true).
    pub fn validate(mut self, yes: bool) -> Self {
        self.validate = yes;
        self
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

    /// Builds every architecture and returns the PTX files. Runs the nested cargo, so it
    /// needs a linker executable: inside a build script use
    /// [`KernelBuilder::build_for_cargo`]; elsewhere set [`KernelBuilder::linker_exe`].
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
        let linker_exe = match &self.linker_exe {
            Some(exe) => exe.clone(),
            None => env::current_exe().map_err(|e| BuildError::io("locating", "current_exe", e))?,
        };
        let target_root = self.target_root()?;
        let crate_dir = fs::canonicalize(&self.crate_dir)
            .map_err(|e| BuildError::io("opening kernel crate", &self.crate_dir, e))?;
        let crate_name = lib_name(&crate_dir, self.device.require_no_std)?;
        let shim = write_linker_shim(&target_root)?;
        let ptx_feature = self.resolved_ptx_isa()?;

        let mut built = Vec::new();
        for arch in self.resolved_archs()? {
            let dir = target_root.join(arch.target_cpu());
            let started = Instant::now();
            let mut cmd = self.nested_cargo(toolchain, &crate_dir, &dir);
            let rustflags = self.rustflags(arch, &ptx_feature, &shim);
            cmd.env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"))
                .env(link::LINK_MODE_VAR, "1")
                .env(link::LINK_EXE_VAR, &linker_exe)
                .env(link::LLVM_BIN_VAR, &toolchain.llvm_bin)
                .env(
                    link::ALLOWED_EXTERNS_VAR,
                    self.device.allowed_externs.join(","),
                );
            if let Some(libdevice) = &cuda.libdevice {
                cmd.env(link::LIBDEVICE_VAR, libdevice);
            }
            if self.device.cuda_arch_env {
                cmd.env("CUDA_ARCH", (arch.compute_capability() * 10).to_string());
            }
            tool::run(&mut cmd)?;
            let path = dir
                .join(TARGET)
                .join("release")
                .join(format!("{crate_name}.ptx"));
            if !path.exists() {
                return Err(BuildError::io(
                    "cargo finished but did not produce",
                    &path,
                    std::io::ErrorKind::NotFound.into(),
                ));
            }
            if self.validate {
                if let Some(ptxas) = &cuda.ptxas {
                    ptx::validate_with_ptxas(ptxas, &path, &arch.target_cpu())?;
                }
            }
            built.push(BuiltPtx {
                arch,
                path,
                elapsed: started.elapsed(),
            });
        }
        Ok(built)
    }

    /// The nested `cargo rustc` that compiles the crate for `arch` into `dir`.
    fn nested_cargo(&self, toolchain: &DeviceToolchain, crate_dir: &Path, dir: &Path) -> Command {
        let build_std = if self.device.with_alloc {
            "-Zbuild-std=core,alloc"
        } else {
            "-Zbuild-std=core"
        };
        let mut cmd = Command::new(&toolchain.cargo);
        cmd.current_dir(crate_dir)
            .args(["rustc", "--lib", "--crate-type", "cdylib", "--release"])
            .args(["--target", TARGET, build_std])
            .arg("--manifest-path")
            .arg(crate_dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(dir)
            // One fat-LTO'd bitcode module, whatever the crate's own release profile says.
            .args(["--config", "profile.release.lto=\"fat\""])
            .args(["--config", "profile.release.codegen-units=1"])
            .args(["--config", "profile.release.panic=\"abort\""])
            .args(["--config", "profile.release.opt-level=3"])
            .args(["--config", "profile.release.debug=false"])
            .args(["--config", "profile.release.incremental=false"])
            .args(["--config", "profile.release.debug-assertions=false"])
            .args(["--config", "profile.release.overflow-checks=false"]);
        // After `--`, `cargo rustc` gives the flags to the kernel crate alone: a dependency
        // that enables the same feature itself would otherwise fail (E0636).
        cmd.arg("--")
            .args((self.device.crate_attrs.iter()).map(|a| format!("-Zcrate-attr={a}")));
        clean_nested_env(&mut cmd, toolchain);
        cmd
    }

    /// The device build's rustc flags for `arch`.
    fn rustflags(&self, arch: Arch, ptx_feature: &str, shim: &Path) -> Vec<String> {
        vec![
            format!("-Ctarget-cpu={}", arch.target_cpu()),
            format!("-Ctarget-feature=+{ptx_feature}"),
            format!("-Clinker={}", shim.display()),
            // MIR's jump threading copies a call into both arms of a branch; when the
            // call holds a barrier and the branch differs between threads, the threads
            // of one warp reach two `bar.sync`s and the block deadlocks
            // (rust-lang/rust#137086). LLVM's passes respect `convergent`; MIR has no
            // such notion, so the pass is off for device code.
            DISABLED_MIR_PASSES.to_string(),
        ]
    }

    /// Builds from a build script: links instead when rustc runs this script as the
    /// linker, does nothing while the crate itself is compiled for the GPU, otherwise
    /// builds every architecture, copies the PTX into `OUT_DIR`, writes
    /// `OUT_DIR/<lib name>_ptx.rs`, and tells cargo when to rerun. On failure it prints
    /// the error and exits, so cargo shows the message as it is.
    pub fn build_for_cargo(&self) {
        if link::in_link_mode() {
            std::process::exit(link::link_from_args());
        }
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
        for watched in source_paths(&crate_dir) {
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
        let crate_name = lib_name(&crate_dir, self.device.require_no_std)?;

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

/// A stable path for rustc's `-C linker`, so the flags (and cargo's fingerprints) do not
/// change when the build script's own path does; it forwards to `$LOOKAHEAD_PTX_LINK_EXE`.
fn write_linker_shim(target_root: &Path) -> Result<PathBuf, BuildError> {
    let shim = target_root.join("lookahead-ptx-link");
    let text = format!("#!/bin/sh\nexec \"${}\" \"$@\"\n", link::LINK_EXE_VAR);
    if fs::read_to_string(&shim).ok().as_deref() != Some(text.as_str()) {
        let tmp = target_root.join(format!("lookahead-ptx-link.{}", std::process::id()));
        fs::write(&tmp, &text).map_err(|e| BuildError::io("writing", &tmp, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))
                .map_err(|e| BuildError::io("making executable", &tmp, e))?;
        }
        fs::rename(&tmp, &shim).map_err(|e| BuildError::io("installing", &shim, e))?;
    }
    Ok(shim)
}

/// The environment of a build script carries the outer build's settings; keep the ones
/// that are not about this build (jobserver, CARGO_HOME, PATH) and drop the rest.
fn clean_nested_env(cmd: &mut Command, toolchain: &DeviceToolchain) {
    for var in [
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTDOC",
        "RUSTDOCFLAGS",
        "CARGO_ENCODED_RUSTDOCFLAGS",
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "CARGO_MANIFEST_DIR",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_INCREMENTAL",
        "OUT_DIR",
        "TARGET",
        "HOST",
        "NUM_JOBS",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "RUSTC_LINKER",
    ] {
        cmd.env_remove(var);
    }
    // Build-script variables describing the outer (host) build.
    for (var, _) in env::vars_os() {
        let name = var.to_string_lossy();
        if ["CARGO_CFG_", "CARGO_FEATURE_", "CARGO_PKG_", "DEP_"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            cmd.env_remove(&var);
        }
    }
    cmd.env("RUSTC", &toolchain.rustc)
        // Debian's stable rustc needs this for -Zbuild-std and the nightly-only kernel
        // features (abi_gpu_kernel, asm_experimental_arch); a nightly ignores it.
        .env("RUSTC_BOOTSTRAP", "1");
    if toolchain.source == ToolchainSource::RustupNightly {
        cmd.env("RUSTUP_TOOLCHAIN", "nightly");
    }
}

/// The crate's library name (`[lib] name`, else the package name with `-` as `_`).
/// The kernel crate's library name, after checking (with `require_no_std`) that its root is
/// `#![no_std]`.
fn lib_name(crate_dir: &Path, require_no_std: bool) -> Result<String, BuildError> {
    let meta = package_metadata(crate_dir)?;
    let pkg = meta
        .iter()
        .find(|p| p.manifest_dir == crate_dir)
        .ok_or_else(|| BuildError::ToolFailed {
            command: "cargo metadata".into(),
            status: "no package".into(),
            stderr: format!("no package with its manifest in {}", crate_dir.display()),
        })?;
    if require_no_std {
        check_no_std(&pkg.lib_root)?;
    }
    Ok(pkg.lib_name.clone())
}

/// A kernel crate is `#![no_std]` on every target, not only on the GPU: then its host build
/// (the type check of every kernel, and the emulator) refuses what the GPU build refuses
/// (`println!`, `Vec`, `String`, `format!`), instead of running code the GPU cannot.
fn check_no_std(root: &Path) -> Result<(), BuildError> {
    let text = fs::read_to_string(root).map_err(|e| BuildError::io("reading", root, e))?;
    let no_std = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or("").replace(' ', ""))
        .any(|l| l.starts_with("#![no_std]"));
    if no_std {
        Ok(())
    } else {
        Err(BuildError::NotNoStd {
            root: root.to_path_buf(),
        })
    }
}

#[derive(Debug)]
struct LocalPackage {
    manifest_dir: PathBuf,
    lib_name: String,
    lib_root: PathBuf,
    path_deps: Vec<PathBuf>,
}

/// Workspace packages seen from `crate_dir` (`cargo metadata --no-deps`).
fn package_metadata(crate_dir: &Path) -> Result<Vec<LocalPackage>, BuildError> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = tool::run(
        Command::new(cargo)
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--offline",
            ])
            .arg("--manifest-path")
            .arg(crate_dir.join("Cargo.toml")),
    )?;
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| BuildError::ToolFailed {
            command: "cargo metadata".into(),
            status: "unreadable output".into(),
            stderr: e.to_string(),
        })?;
    let mut packages = Vec::new();
    for pkg in json["packages"].as_array().into_iter().flatten() {
        let manifest = PathBuf::from(pkg["manifest_path"].as_str().unwrap_or_default());
        let manifest_dir = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
        let lib = pkg["targets"].as_array().into_iter().flatten().find(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "lib" || k == "cdylib" || k == "rlib"))
        });
        let lib_name = lib
            .and_then(|t| t["name"].as_str())
            .unwrap_or_else(|| pkg["name"].as_str().unwrap_or_default())
            .replace('-', "_");
        let lib_root = lib
            .and_then(|t| t["src_path"].as_str())
            .map(PathBuf::from)
            .unwrap_or_else(|| manifest_dir.join("src").join("lib.rs"));
        let path_deps = pkg["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["path"].as_str().map(PathBuf::from))
            .collect();
        packages.push(LocalPackage {
            manifest_dir,
            lib_name,
            lib_root,
            path_deps,
        });
    }
    Ok(packages)
}

/// The sources a kernel build depends on: the crate and its path dependencies
/// (device runtime, proc-macros), so editing any of them rebuilds the PTX.
fn source_paths(crate_dir: &Path) -> Vec<PathBuf> {
    let packages = package_metadata(crate_dir).unwrap_or_default();
    let mut todo = vec![crate_dir.to_path_buf()];
    let mut seen: Vec<PathBuf> = Vec::new();
    while let Some(dir) = todo.pop() {
        if seen.contains(&dir) {
            continue;
        }
        if let Some(pkg) = packages.iter().find(|p| p.manifest_dir == dir) {
            todo.extend(pkg.path_deps.iter().cloned());
        }
        seen.push(dir);
    }
    seen.iter()
        .flat_map(|d| [d.join("Cargo.toml"), d.join("src"), d.join("build.rs")])
        .filter(|p| p.exists())
        .collect()
}

#[cfg(test)]
mod no_std_tests {
    use super::*;

    fn root_with(text: &str) -> PathBuf {
        let dir = env::temp_dir().join(format!("lookahead-no-std-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("lib{}.rs", text.len()));
        fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_crate_root_must_be_no_std_on_every_target() {
        assert!(check_no_std(&root_with("//! k\n#![no_std]\n")).is_ok());
        assert!(check_no_std(&root_with(
            "#![cfg(target_arch = \"nvptx64\")]\n#![no_std]\n"
        ))
        .is_ok());
        let gpu_only = root_with("#![cfg_attr(target_arch = \"nvptx64\", no_std)]\n");
        let err = check_no_std(&gpu_only).unwrap_err().to_string();
        assert!(
            err.contains("is not `#![no_std]`") && err.contains("extern crate std"),
            "{err}"
        );
        assert!(check_no_std(&root_with("// #![no_std]\nfn f() {}\n")).is_err());
    }
}
