//! Finding a Rust toolchain that can build `core` for the GPU, and the LLVM and CUDA
//! tools the link and validation steps need.

use std::env;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tool::stdout_of;
use crate::BuildError;

/// Where a device toolchain came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolchainSource {
    /// `LOOKAHEAD_DEVICE_RUSTC` named it.
    Override,
    /// A rustup nightly with the `rust-src` component.
    RustupNightly,
    /// Debian's `rustc-web` + `rust-web-src` packages.
    Debian,
}

/// A rustc + cargo pair whose sysroot holds the library source `-Zbuild-std` needs,
/// and the LLVM tools built from the same LLVM major version.
#[derive(Debug, Clone)]
pub struct DeviceToolchain {
    /// How it was found.
    pub source: ToolchainSource,
    /// The compiler.
    pub rustc: PathBuf,
    /// The cargo that drives it.
    pub cargo: PathBuf,
    /// `rustc --print sysroot`.
    pub sysroot: PathBuf,
    /// `rustc -V`, for reports.
    pub version: String,
    /// LLVM major version rustc was built with.
    pub llvm_major: u32,
    /// Directory holding `llvm-link`, `opt`, `llc` and `llvm-ar` of that LLVM.
    pub llvm_bin: PathBuf,
}

impl fmt::Display for DeviceToolchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match self.source {
            ToolchainSource::Override => "LOOKAHEAD_DEVICE_RUSTC",
            ToolchainSource::RustupNightly => "rustup nightly + rust-src",
            ToolchainSource::Debian => "Debian rustc-web + rust-web-src",
        };
        write!(
            f,
            "{} ({source}, {}), LLVM {} tools in {}",
            self.version,
            self.rustc.display(),
            self.llvm_major,
            self.llvm_bin.display()
        )
    }
}

const LLVM_TOOLS: [&str; 5] = ["llvm-link", "opt", "llc", "llvm-ar", "llvm-nm"];

impl DeviceToolchain {
    /// Finds a toolchain: `LOOKAHEAD_DEVICE_RUSTC` if set, else a rustup nightly with
    /// `rust-src`, else Debian's `/usr/bin/rustc` with `rust-web-src`.
    pub fn discover() -> Result<Self, BuildError> {
        let mut tried = Vec::new();
        let mut candidates: Vec<(ToolchainSource, PathBuf, PathBuf)> = Vec::new();
        if let Some(rustc) = env::var_os("LOOKAHEAD_DEVICE_RUSTC").map(PathBuf::from) {
            let cargo = env::var_os("LOOKAHEAD_DEVICE_CARGO")
                .map(PathBuf::from)
                .unwrap_or_else(|| rustc.with_file_name("cargo"));
            candidates.push((ToolchainSource::Override, rustc, cargo));
        } else {
            match rustup_nightly() {
                Some((rustc, cargo)) => {
                    candidates.push((ToolchainSource::RustupNightly, rustc, cargo))
                }
                None => tried.push("  rustup nightly: not installed (or no rustup)".to_string()),
            }
            candidates.push((
                ToolchainSource::Debian,
                PathBuf::from("/usr/bin/rustc"),
                PathBuf::from("/usr/bin/cargo"),
            ));
        }

        for (source, rustc, cargo) in candidates {
            match Self::check(source.clone(), &rustc, &cargo) {
                Ok(Some(tc)) => return Ok(tc),
                Ok(None) => {}
                Err(CandidateRejected(why)) => {
                    tried.push(format!("  {}: {why}", rustc.display()));
                    continue;
                }
            }
        }
        Err(BuildError::NoDeviceToolchain {
            tried: tried.join("\n"),
        })
    }

    fn check(
        source: ToolchainSource,
        rustc: &Path,
        cargo: &Path,
    ) -> Result<Option<Self>, CandidateRejected> {
        if !rustc.exists() {
            return Err(CandidateRejected("not installed".into()));
        }
        if !cargo.exists() {
            return Err(CandidateRejected(format!(
                "no cargo beside it ({})",
                cargo.display()
            )));
        }
        let verbose = stdout_of(Command::new(rustc).arg("-vV"))
            .ok_or_else(|| CandidateRejected("`rustc -vV` failed".into()))?;
        let version = verbose.lines().next().unwrap_or_default().to_string();
        let llvm_major = verbose
            .lines()
            .find_map(|l| l.strip_prefix("LLVM version: "))
            .and_then(|v| v.split('.').next())
            .and_then(|m| m.trim().parse::<u32>().ok())
            .ok_or_else(|| CandidateRejected("rustc does not report its LLVM version".into()))?;
        let sysroot = stdout_of(Command::new(rustc).args(["--print", "sysroot"]))
            .map(|s| PathBuf::from(s.trim()))
            .ok_or_else(|| CandidateRejected("`rustc --print sysroot` failed".into()))?;
        let core_src = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
        if !core_src.exists() {
            return Err(CandidateRejected(format!(
                "no library source at {} (rust-src / rust-web-src missing)",
                core_src.display()
            )));
        }
        let targets =
            stdout_of(Command::new(rustc).args(["--print", "target-list"])).unwrap_or_default();
        if !targets.lines().any(|t| t == crate::TARGET) {
            return Err(CandidateRejected(format!(
                "does not know {}",
                crate::TARGET
            )));
        }
        let llvm_bin = find_llvm_bin(&sysroot, llvm_major).map_err(|looked| {
            CandidateRejected(format!(
                "LLVM {llvm_major} tools not found (looked in {looked}); install llvm-{llvm_major}"
            ))
        })?;
        Ok(Some(DeviceToolchain {
            source,
            rustc: rustc.to_path_buf(),
            cargo: cargo.to_path_buf(),
            sysroot,
            version,
            llvm_major,
            llvm_bin,
        }))
    }

    /// Path of one LLVM tool of this toolchain.
    pub fn llvm_tool(&self, name: &str) -> PathBuf {
        self.llvm_bin.join(name)
    }
}

struct CandidateRejected(String);

fn rustup_nightly() -> Option<(PathBuf, PathBuf)> {
    let which = |tool: &str| {
        stdout_of(Command::new("rustup").args(["which", "--toolchain", "nightly", tool]))
            .map(|s| PathBuf::from(s.trim()))
    };
    Some((which("rustc")?, which("cargo")?))
}

/// Looks for a directory with all of `LLVM_TOOLS` for LLVM `major`; on failure returns
/// the list of places searched.
fn find_llvm_bin(sysroot: &Path, major: u32) -> Result<PathBuf, String> {
    let mut dirs = Vec::new();
    if let Some(dir) = env::var_os("LOOKAHEAD_LLVM_BIN") {
        dirs.push(PathBuf::from(dir));
    }
    // rustup's llvm-tools component ships exactly rustc's LLVM.
    dirs.push(sysroot.join(format!("lib/rustlib/{}/bin", host_triple())));
    dirs.push(PathBuf::from(format!("/usr/lib/llvm-{major}/bin")));
    for dir in &dirs {
        if LLVM_TOOLS.iter().all(|t| dir.join(t).exists()) && llvm_major_of(dir) == Some(major) {
            return Ok(dir.clone());
        }
    }
    Err(dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", "))
}

fn llvm_major_of(dir: &Path) -> Option<u32> {
    let out = stdout_of(Command::new(dir.join("llc")).arg("--version"))?;
    out.lines()
        // "LLVM version 22.1.8", or "Debian LLVM version 22.1.8"
        .find_map(|l| l.split_once("LLVM version ").map(|(_, v)| v.trim()))
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse().ok())
}

fn host_triple() -> &'static str {
    // The builder runs in build scripts, which are compiled for the host.
    if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        "x86_64-unknown-linux-gnu"
    } else if cfg!(all(target_arch = "aarch64", target_os = "linux")) {
        "aarch64-unknown-linux-gnu"
    } else {
        "unknown"
    }
}

/// The CUDA pieces the builder uses when present: `ptxas` to validate PTX and
/// `libdevice.10.bc` for math functions.
#[derive(Debug, Clone, Default)]
pub struct CudaTools {
    /// `ptxas`, if found.
    pub ptxas: Option<PathBuf>,
    /// `libdevice.10.bc`, if found.
    pub libdevice: Option<PathBuf>,
}

impl CudaTools {
    /// Looks in `LOOKAHEAD_PTXAS` / `LOOKAHEAD_LIBDEVICE`, `CUDA_HOME`, `/usr/local/cuda`,
    /// `PATH`, and the `nvidia-cuda-nvcc-cu12` Python wheel.
    pub fn discover() -> Self {
        let mut roots: Vec<PathBuf> = Vec::new();
        for var in ["CUDA_HOME", "CUDA_PATH"] {
            if let Some(v) = env::var_os(var) {
                roots.push(PathBuf::from(v));
            }
        }
        roots.push(PathBuf::from("/usr/local/cuda"));
        if let Some(wheel) = nvcc_wheel_dir() {
            roots.push(wheel);
        }
        let ptxas = env::var_os("LOOKAHEAD_PTXAS")
            .map(PathBuf::from)
            .or_else(|| {
                roots
                    .iter()
                    .map(|r| r.join("bin/ptxas"))
                    .find(|p| p.exists())
            })
            .or_else(|| find_on_path("ptxas"));
        let libdevice = env::var_os("LOOKAHEAD_LIBDEVICE")
            .map(PathBuf::from)
            .or_else(|| {
                roots
                    .iter()
                    .map(|r| r.join("nvvm/libdevice/libdevice.10.bc"))
                    .find(|p| p.exists())
            });
        CudaTools { ptxas, libdevice }
    }
}

/// The directory of the `nvidia-cuda-nvcc-cu12` wheel (`.../site-packages/nvidia/cuda_nvcc`).
fn nvcc_wheel_dir() -> Option<PathBuf> {
    let script = "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])";
    for python in ["python3", "python"] {
        if let Some(out) = stdout_of(Command::new(python).args(["-c", script])) {
            let dir = PathBuf::from(out.trim());
            if dir.is_dir() {
                return Some(dir);
            }
        }
    }
    None
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
