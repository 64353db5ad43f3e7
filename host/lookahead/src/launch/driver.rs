//! The driver launch: one kernel with its configuration and a pointer to each parameter,
//! handed to the driver either as a launch on a stream (`cuLaunchKernel`) or as the new
//! parameters of a graph's kernel node (for `crate::graph::Graph::update`).

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUfunction};
use cudarc::driver::CudaStream;

use super::LaunchConfig;
use crate::error::{Error, Result};

/// Dynamic shared memory a kernel may take without opting in: 48 KiB.
const DEFAULT_SHARED_MEM_BYTES: u32 = 48 * 1024;

/// A kernel launch ready for the driver.
pub(crate) struct KernelLaunch<'a> {
    kernel: &'static str,
    function: CUfunction,
    cfg: LaunchConfig,
    stream: &'a CudaStream,
    params: Vec<*mut c_void>,
}

impl<'a> KernelLaunch<'a> {
    /// The launch of `function` (the PTX entry `kernel`) on `stream`, with `params`.
    ///
    /// # Safety
    /// `params` holds one pointer per parameter of `function`, in order, each to a value of
    /// the parameter's type that lives until the launch is queued; every device address among
    /// those values is of memory the kernel may use for as long as it runs.
    pub(crate) unsafe fn new(
        kernel: &'static str,
        function: CUfunction,
        cfg: LaunchConfig,
        stream: &'a CudaStream,
        params: Vec<*mut c_void>,
    ) -> Self {
        KernelLaunch {
            kernel,
            function,
            cfg,
            stream,
            params,
        }
    }

    /// The kernel's name (its PTX entry).
    pub(crate) fn kernel(&self) -> &'static str {
        self.kernel
    }

    /// The stream the launch is queued on.
    pub(crate) fn stream(&self) -> &'a CudaStream {
        self.stream
    }

    /// Lets the kernel take the launch's dynamic shared memory where it is more than the
    /// 48 KiB every kernel may have (`cuFuncSetAttribute` of
    /// `MAX_DYNAMIC_SHARED_SIZE_BYTES`, the opt-in CUDA requires); more than the GPU has per
    /// block is the driver's error, naming the kernel.
    pub(crate) fn opt_in_shared_mem(&self) -> Result<()> {
        let bytes = self.cfg.shared_mem_bytes;
        if bytes <= DEFAULT_SHARED_MEM_BYTES {
            return Ok(());
        }
        use sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as MAX;
        // SAFETY: `function` is a loaded kernel (`new`); the attribute only sets a limit.
        unsafe {
            cudarc::driver::result::function::set_function_attribute(
                self.function,
                MAX,
                bytes as i32,
            )
        }
        .map_err(|source| Error::Launch {
            kernel: self.kernel,
            source,
        })
    }

    /// Queues the kernel on its stream (`cuLaunchKernel`); the stream's context is current.
    pub(crate) fn queue(&mut self) -> Result<()> {
        self.opt_in_shared_mem()?;
        let cfg = self.cfg;
        // SAFETY: the parameters match the function, as `new` was promised.
        unsafe {
            cudarc::driver::result::launch_kernel(
                self.function,
                cfg.grid_dim,
                cfg.block_dim,
                cfg.shared_mem_bytes,
                self.stream.cu_stream(),
                &mut self.params,
            )
        }
        .map_err(|source| Error::Launch {
            kernel: self.kernel,
            source,
        })
    }

    /// The launch as a kernel node's parameters. They point into this launch: the driver
    /// copies the values when it is given them.
    pub(crate) fn node_params(&mut self) -> sys::CUDA_KERNEL_NODE_PARAMS {
        let cfg = self.cfg;
        sys::CUDA_KERNEL_NODE_PARAMS {
            func: self.function,
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            kernelParams: self.params.as_mut_ptr(),
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        }
    }
}
