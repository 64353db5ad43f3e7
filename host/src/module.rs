//! A loaded PTX module and its kernels.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::error::{DriverContext, Result};

/// A PTX module loaded into a context; functions are looked up once and cached.
#[derive(Debug, Clone)]
pub struct Module {
    module: Arc<CudaModule>,
    arch: u32,
    functions: Arc<Mutex<HashMap<String, CudaFunction>>>,
}

impl Module {
    /// JIT-compiles and loads `ptx` (built for `sm_<arch>`) into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>, arch: u32, ptx: &str) -> Result<Self> {
        let module = ctx
            .load_module(Ptx::from_src(ptx))
            .during("cuModuleLoadData")?;
        Ok(Module {
            module,
            arch,
            functions: Arc::default(),
        })
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
