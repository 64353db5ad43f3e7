//! Opening a GPU: driver presence, device, context and a stream.

use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaStream};

use crate::capabilities::Capabilities;
use crate::error::{Capability, DriverContext, Error, Result};
use crate::launch::per_context::ReleaseOnDrop;
use crate::module::Module;

/// One GPU: its primary context and a default stream for work submitted through it.
#[derive(Debug, Clone)]
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    cc: u32,
    allow_oversubscription: bool,
    caps: Arc<OnceLock<Capabilities>>,
    /// Last, so it is dropped after the handles to the context above: it releases what the
    /// launches loaded for contexts nothing else holds any more.
    _release: ReleaseOnDrop,
}

impl Gpu {
    /// Opens device `ordinal`. Returns [`Error::NoDriver`] when no CUDA driver is
    /// installed and [`Error::NoDevice`] when the device does not exist.
    pub fn new(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(Error::NoDriver);
        }
        let count = Self::count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).during("cuCtxCreate")?;
        let (major, minor) = ctx.compute_capability().during("cuDeviceGetAttribute")?;
        let name = ctx.name().during("cuDeviceGetName")?;
        let stream = ctx.default_stream();
        Ok(Gpu {
            ctx,
            stream,
            name,
            cc: (major * 10 + minor) as u32,
            allow_oversubscription: false,
            caps: Arc::default(),
            _release: ReleaseOnDrop,
        })
    }

    /// This handle with managed-memory oversubscription allowed (`true`) or refused (`false`,
    /// the default). When refused, a managed allocation that does not fit in the device's
    /// free memory (less what live managed buffers already promised) fails with
    /// [`Error::OutOfMemory`] instead of letting the driver evict pages back and forth.
    /// Only the returned handle (and its clones) carries the setting.
    pub fn allow_oversubscription(mut self, allow: bool) -> Self {
        self.allow_oversubscription = allow;
        self
    }

    /// Whether managed allocations through this handle may oversubscribe the device.
    pub fn oversubscription_allowed(&self) -> bool {
        self.allow_oversubscription
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The device's capabilities, queried on first use and cached.
    pub fn capabilities(&self) -> Result<&Capabilities> {
        if let Some(c) = self.caps.get() {
            return Ok(c);
        }
        let c = Capabilities::query(self)?;
        Ok(self.caps.get_or_init(|| c))
    }

    /// `Ok(())` if the device has `capability`, else [`Error::CapabilityMissing`].
    pub fn require(&self, capability: Capability, needed_by: &'static str) -> Result<()> {
        self.capabilities()?.require(capability, needed_by)
    }

    /// Makes this GPU's context current on the calling thread (needed before raw driver calls
    /// from a new thread).
    pub fn bind_to_thread(&self) -> Result<()> {
        self.ctx.bind_to_thread().during("cuCtxSetCurrent")
    }

    /// Number of CUDA devices, or [`Error::NoDriver`].
    pub fn count() -> Result<usize> {
        if !driver_present() {
            return Err(Error::NoDriver);
        }
        cudarc::driver::result::init().during("cuInit")?;
        Ok(CudaContext::device_count().during("cuDeviceGetCount")? as usize)
    }

    /// The device's name, such as `NVIDIA H100 80GB HBM3`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compute capability as major * 10 + minor (`90` on an H100).
    pub fn compute_capability(&self) -> u32 {
        self.cc
    }

    /// The driver's CUDA version as (major, minor), for example (13, 0).
    pub fn driver_version(&self) -> Result<(u32, u32)> {
        let mut v = 0;
        // SAFETY: writes one int; the driver is loaded (checked in `new`).
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) }
            .result()
            .during("cuDriverGetVersion")?;
        Ok((v as u32 / 1000, (v as u32 % 1000) / 10))
    }

    /// The kernel-module version of the NVIDIA driver (such as `580.159.04`): the first
    /// dotted number in `/proc/driver/nvidia/version`, or `None` where Linux does not show it.
    /// [`Gpu::driver_version`] gives the CUDA version the driver supports.
    pub fn driver_release() -> Option<String> {
        let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
        text.split_whitespace()
            .find(|w| {
                w.split('.').count() >= 2
                    && w.split('.')
                        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(str::to_string)
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().during("cuMemGetInfo")
    }

    /// The cudarc context, for calls this crate does not wrap.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream work is submitted on by default.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Loads the module best suited to this device from a set of PTX modules built by
    /// `lookahead-builder` (`(compute capability, PTX)`, lowest first): the newest one not
    /// newer than the device.
    pub fn load_ptx(&self, modules: &[(u32, &str)]) -> Result<Module> {
        let (arch, ptx) = crate::module::pick_ptx(modules, self.cc)?;
        Module::load(&self.ctx, arch, ptx)
    }

    /// Waits for all work on the default stream.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().during("cuStreamSynchronize")
    }
}

/// Whether the CUDA driver library can be loaded (without panicking when it cannot).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opening a GPU that cannot be opened is a clean, typed error on any machine: without a
    /// driver (the CPU-only CI machines) `NoDriver`, which says so; with one, a device past
    /// the last is `NoDevice` naming the ordinal and the count.
    #[test]
    fn opening_what_is_not_there_is_a_typed_error() {
        if !driver_present() {
            assert!(matches!(Gpu::new(0), Err(Error::NoDriver)));
            assert!(matches!(Gpu::count(), Err(Error::NoDriver)));
            let msg = Gpu::new(0).unwrap_err().to_string();
            assert!(msg.contains("no CUDA driver"), "{msg}");
            return;
        }
        let count = Gpu::count().expect("a driver that loads answers cuDeviceGetCount");
        match Gpu::new(count) {
            Err(Error::NoDevice { ordinal, count: c }) => assert_eq!((ordinal, c), (count, count)),
            other => panic!("device {count} of {count}: {other:?}"),
        }
    }

    /// On a GPU machine: device 0 opens, its name and compute capability are filled in, and
    /// the device one past the last is `NoDevice`.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn a_gpu_opens_and_the_one_past_the_last_does_not() {
        let gpu = Gpu::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
        assert!(!gpu.name().is_empty() && gpu.compute_capability() >= 50);
        let count = Gpu::count().unwrap();
        assert!(count >= 1);
        assert!(matches!(Gpu::new(count), Err(Error::NoDevice { .. })));
    }
}
