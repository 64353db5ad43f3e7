//! A loaded PTX module and its kernels.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::error::{DriverContext, Error, Result};

/// The module of a PTX set built by `lookahead-builder` (`(compute capability, PTX)`, lowest
/// first) that a device of compute capability `cc` (major * 10 + minor) runs best: the newest
/// one not newer than the device. [`Error::NoPtxForDevice`] when every module is newer.
pub fn pick_ptx<'p>(modules: &[(u32, &'p str)], cc: u32) -> Result<(u32, &'p str)> {
    modules
        .iter()
        .rev()
        .find(|(arch, _)| *arch <= cc)
        .copied()
        .ok_or_else(|| Error::NoPtxForDevice {
            device_cc: cc,
            built: modules.iter().map(|(a, _)| *a).collect(),
        })
}

/// A PTX module loaded into a context; functions are looked up once and cached.
#[derive(Debug, Clone)]
pub struct Module {
    module: Arc<CudaModule>,
    arch: u32,
    functions: Arc<Mutex<HashMap<String, CudaFunction>>>,
}

impl Module {
    /// JIT-compiles and loads `ptx` (built for `sm_<arch>`) into `ctx`, with every kernel of
    /// it loaded onto the GPU now: with CUDA's lazy loading a kernel's first launch waits
    /// until no kernel runs in the context, which deadlocks a kernel waiting on another
    /// stream's work.
    pub fn load(ctx: &Arc<CudaContext>, arch: u32, ptx: &str) -> Result<Self> {
        let module = ctx
            .load_module(Ptx::from_src(ptx))
            .during("cuModuleLoadData")?;
        let m = Module {
            module,
            arch,
            functions: Arc::default(),
        };
        m.load_all_kernels(ptx)?;
        Ok(m)
    }

    /// Loads the code of every `.entry` of `ptx` onto the GPU.
    ///
    /// Why: with CUDA's lazy loading (the default since CUDA 12.2) a kernel's code is
    /// uploaded at its first launch, and that upload waits until no kernel is running in the
    /// context. A kernel that waits for work another stream does (the ready flags the
    /// prefetch service of `lookahead-uvm` writes) then holds up that work, and with it
    /// itself, until its waits time out: measured on the H100 as every GPU-driven request
    /// of an IVF search arriving only after the scan kernel ended, because the next
    /// kernel's first launch (queued behind the scan) was a lazy load. Loading everything
    /// when the module is loaded costs a few milliseconds once.
    fn load_all_kernels(&self, ptx: &str) -> Result<()> {
        let (major, minor) = {
            let mut v = 0;
            // SAFETY: writes one int.
            unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) }
                .result()
                .during("cuDriverGetVersion")?;
            (v / 1000, (v % 1000) / 10)
        };
        for name in entry_names(ptx) {
            let f = self.function(name)?;
            if (major, minor) >= (12, 4) {
                // SAFETY: `f` is a live function of this module.
                unsafe { cudarc::driver::sys::cuFuncLoad(f.cu_function()) }
                    .result()
                    .during("cuFuncLoad")?;
            } else {
                // Older drivers have no cuFuncLoad; answering an attribute query needs the
                // loaded function.
                f.get_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
                )
                .during("cuFuncGetAttribute")?;
            }
        }
        Ok(())
    }

    /// The architecture the loaded PTX was built for.
    pub fn arch(&self) -> u32 {
        self.arch
    }

    /// The kernel named `name` (its `.entry` in the PTX).
    pub fn function(&self, name: &str) -> Result<CudaFunction> {
        let mut cache = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = cache.get(name) {
            return Ok(f.clone());
        }
        let f = self
            .module
            .load_function(name)
            .during("cuModuleGetFunction")?;
        cache.insert(name.to_string(), f.clone());
        Ok(f)
    }
}

/// The names of the kernels (`.entry` directives) of a PTX module.
pub fn entry_names(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = line.strip_prefix(".visible").map_or(line, str::trim_start);
            let rest = line.strip_prefix(".entry")?.trim_start();
            let name = rest.split(|c: char| c == '(' || c.is_whitespace()).next()?;
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{entry_names, pick_ptx};

    #[test]
    fn picks_the_newest_module_the_device_runs() {
        let set = [(70, "a"), (80, "b"), (90, "c")];
        assert_eq!(pick_ptx(&set, 90).unwrap(), (90, "c"));
        assert_eq!(pick_ptx(&set, 89).unwrap(), (80, "b"));
        assert_eq!(pick_ptx(&set, 120).unwrap(), (90, "c"));
        let e = pick_ptx(&set, 61).unwrap_err().to_string();
        assert!(e.contains("no PTX for compute capability 61"), "{e}");
    }

    #[test]
    fn finds_every_entry_and_nothing_else() {
        let ptx = "\n.version 8.0\n.target sm_90\n.visible .entry saxpy(\n\t.param .f32 a\n)\n\
                   {\n}\n.entry plain (\n)\n.func helper()\n// .entry commented(\n\
                   .visible .entry last(\n";
        assert_eq!(entry_names(ptx), ["saxpy", "plain", "last"]);
    }
}
