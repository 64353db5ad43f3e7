//! The two languages' modules: the PTX `lookahead-builder` compiled from Rust, and the CUDA
//! C++ twins compiled now by NVRTC for the device's architecture.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use lookahead::Gpu;

use crate::Res;

/// One language's compiled kernels.
pub enum Lang {
    Rust(lookahead::Module),
    Cuda(Arc<CudaModule>),
}

impl Lang {
    pub fn function(&self, name: &str) -> Res<CudaFunction> {
        Ok(match self {
            Lang::Rust(m) => m.function(name)?,
            Lang::Cuda(m) => m.load_function(name)?,
        })
    }
}

/// Both languages' modules, loaded, with the PTX text and how each was made.
pub struct Compiled {
    /// Rust, then CUDA C++.
    pub langs: [Lang; 2],
    pub rust_ptx: &'static str,
    pub cuda_ptx: String,
    /// `PTX ISA 8.0 for sm_90 by lookahead-builder (<toolchain>)`.
    pub rust_desc: String,
    /// `PTX ISA 9.0 by NVRTC 13.0, --gpu-architecture=compute_90 <options>`.
    pub cuda_desc: String,
    /// NVRTC's version, `13.0`.
    pub nvrtc: String,
}

/// Loads the Rust PTX for `gpu` and compiles and loads the CUDA C++ twins for the same
/// architecture.
pub fn compile(gpu: &Gpu) -> Res<Compiled> {
    let cc = gpu.compute_capability();
    let (rust_arch, rust_ptx) = lookahead::module::pick_ptx(vs_cuda_kernels::PTX, cc)?;
    let rust = gpu.load_ptx(vs_cuda_kernels::PTX)?;
    let arch: &'static str = Box::leak(format!("compute_{cc}").into_boxed_str());
    let (cuda_ptx, options) = compile_twins(arch)?;
    let cuda_src = cuda_ptx.to_src();
    let cuda = gpu.context().load_module(cuda_ptx)?;
    let nvrtc = nvrtc_version()?;
    Ok(Compiled {
        langs: [Lang::Rust(rust), Lang::Cuda(cuda)],
        rust_ptx,
        rust_desc: format!(
            "PTX ISA {} for sm_{rust_arch} by lookahead-builder ({})",
            ptx_version(rust_ptx),
            vs_cuda_kernels::PTX_TOOLCHAIN.lines().next().unwrap_or("")
        ),
        cuda_desc: format!(
            "PTX ISA {} by NVRTC {nvrtc}, --gpu-architecture={arch} {}",
            ptx_version(&cuda_src),
            options.join(" ")
        ),
        cuda_ptx: cuda_src,
        nvrtc,
    })
}

/// The CUDA twins compiled by NVRTC for `arch` at `-O3`, or with NVRTC's default options
/// where it does not take `-O3`; the PTX and the options used.
fn compile_twins(arch: &'static str) -> Res<(Ptx, Vec<String>)> {
    let options = vec!["-O3".to_string()];
    let with = |options: Vec<String>| {
        compile_ptx_with_opts(
            vs_cuda_kernels::CUDA_TWINS,
            CompileOptions {
                arch: Some(arch),
                options,
                ..Default::default()
            },
        )
    };
    match with(options.clone()) {
        Ok(p) => Ok((p, options)),
        Err(e) => {
            // NVRTC versions that do not take -O3 optimise fully by default.
            println!(
                "  NVRTC does not take -O3 ({e}); its default is full optimisation (-dopt on), \
                 used instead"
            );
            Ok((with(Vec::new())?, Vec::new()))
        }
    }
}

/// NVRTC's version as `major.minor`.
fn nvrtc_version() -> Res<String> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints; NVRTC was loaded by the compile before this call.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }.result()?;
    Ok(format!("{major}.{minor}"))
}

/// The `.version` of a PTX module (`8.0`), or `?`.
fn ptx_version(ptx: &str) -> String {
    ptx.lines()
        .find_map(|l| l.trim().strip_prefix(".version "))
        .unwrap_or("?")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_ptx_version() {
        assert_eq!(ptx_version("//\n.version 8.0\n.target sm_90\n"), "8.0");
        assert_eq!(ptx_version(".target sm_90\n"), "?");
    }
}
