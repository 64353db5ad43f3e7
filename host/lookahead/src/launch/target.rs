//! The two target memories a `#[kernel]` launcher builds its arguments for and launches in:
//! [`GpuMemory`] (GPU allocations, launched through the driver) and [`HostMemory`] (host
//! memory, run by the CPU emulator), behind the sealed [`TargetMemory`] trait.
//!
//! The GPU launch reads as its steps: make the stream's context current, lower the
//! arguments to one pointer per parameter, ask the graph recording where the launch goes
//! (`crate::graph::recording`), then set a graph's kernel node (`Graph::update`), queue the
//! kernel untimed (`Graph::capture`, or a plan that measures nothing: `super::driver`), or
//! queue it timed for the tuner that planned it (`super::measured`).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaStream, SyncOnDrop};

use super::autotune::Plan;
use super::driver::KernelLaunch;
use super::params::Params;
use super::{measured, LaunchConfig};
use crate::error::{DriverContext, Error, Result};
use crate::graph::recording::{self, Route};

mod sealed {
    pub trait Sealed {}
}

/// The memory a launch target's kernels take, and how a launch is made there: GPU allocations
/// launched through the driver ([`GpuMemory`]), or host memory run by the emulator
/// ([`HostMemory`]). A launch target ([`super::LaunchOn`]) names its memory, and a kernel's
/// slice arguments must be allocations of it ([`super::KernelSlice`]). `#[kernel]` launchers
/// use it; it is sealed.
pub trait TargetMemory: sealed::Sealed + 'static {
    /// What [`super::LaunchOn::prepare`] returns: the kernel and where it runs.
    type Prepared;
    /// An argument list being built.
    type Args<'a>
    where
        Self: 'a;
    /// An empty argument list for `prepared`.
    fn args(prepared: &Self::Prepared) -> Self::Args<'_>;
    /// Appends a parameter by value.
    ///
    /// # Safety
    /// As [`Params::push`]: `V` has no padding bytes.
    unsafe fn push<V>(args: &mut Self::Args<'_>, value: &V);
    /// Launches with `cfg`. The emulator runs `entry` once per thread, with the parameters;
    /// the GPU runs the PTX entry `kernel` and ignores it. When `plan` asks for a measurement,
    /// the GPU records a pair of timing events around the kernel on its stream and hands them
    /// to the tuner that made the plan (read later, never waited for here).
    fn launch(
        args: Self::Args<'_>,
        kernel: &'static str,
        cfg: LaunchConfig,
        entry: &(dyn Fn(&Params) + Sync),
        plan: &Plan<'_>,
    ) -> Result<()>;
}

/// GPU allocations (cudarc `CudaSlice`, `UnifiedSlice`, [`crate::ManagedBuffer`], ...): the
/// memory of the GPU launch targets.
#[derive(Debug)]
pub enum GpuMemory {}

/// Host memory (`Vec<T>`, `[T]`): the memory of the CPU emulator, where it stands for device
/// and managed memory alike.
#[derive(Debug)]
pub enum HostMemory {}

impl sealed::Sealed for GpuMemory {}
impl sealed::Sealed for HostMemory {}

/// The argument list of a GPU launch: the parameters, and the stream-ordering guards of the
/// allocations bound to it (dropped once the kernel is queued, which records its use).
#[derive(Debug)]
pub struct GpuArgs<'a> {
    function: &'a CudaFunction,
    stream: &'a Arc<CudaStream>,
    params: Params,
    uses: Vec<SyncOnDrop<'a>>,
}

impl<'a> GpuArgs<'a> {
    /// The launch stream.
    pub fn stream(&self) -> &'a Arc<CudaStream> {
        self.stream
    }

    /// Keeps `guard` until the kernel is queued (see [`cudarc::driver::DevicePtr`]).
    pub fn keep(&mut self, guard: SyncOnDrop<'a>) {
        self.uses.push(guard);
    }
}

impl TargetMemory for GpuMemory {
    type Prepared = (CudaFunction, Arc<CudaStream>);
    type Args<'a> = GpuArgs<'a>;
    fn args(prepared: &Self::Prepared) -> GpuArgs<'_> {
        GpuArgs {
            function: &prepared.0,
            stream: &prepared.1,
            params: Params::default(),
            uses: Vec::new(),
        }
    }
    unsafe fn push<V>(args: &mut GpuArgs<'_>, value: &V) {
        // SAFETY: as promised by the caller.
        unsafe { args.params.push(value) }
    }
    fn launch(
        mut args: GpuArgs<'_>,
        kernel: &'static str,
        cfg: LaunchConfig,
        _entry: &(dyn Fn(&Params) + Sync),
        plan: &Plan<'_>,
    ) -> Result<()> {
        let stream = args.stream;
        stream
            .context()
            .bind_to_thread()
            .during("cuCtxSetCurrent")?;
        let function = args.function.cu_function();
        // SAFETY: `#[kernel]` pushes one parameter per lowered parameter of the PTX entry it
        // generated, in order and with its type (an address and a length per slice); every
        // address is bound to an allocation borrowed for this launch.
        let mut launch =
            unsafe { KernelLaunch::new(kernel, function, cfg, stream, args.params.pointers()) };
        recording::route(stream, |route| match route {
            Route::Update(mut node) => node.set(&mut launch),
            // No timing events inside a capture: they would be captured, not recorded.
            Route::Capture(mut nodes) => {
                launch.queue()?;
                nodes.note(kernel, stream)
            }
            Route::Launch => match plan.measured() {
                Some(measure) => measured::launch(&mut launch, measure),
                None => launch.queue(),
            },
        })
        // Dropping `args` records every bound allocation's use, after the kernel.
    }
}

/// The argument list of an emulated launch.
#[derive(Debug)]
pub struct HostArgs<'a> {
    emulator: &'a crate::emu::Emulator,
    params: Params,
}

impl TargetMemory for HostMemory {
    type Prepared = crate::emu::Emulator;
    type Args<'a> = HostArgs<'a>;
    fn args(emulator: &crate::emu::Emulator) -> HostArgs<'_> {
        HostArgs {
            emulator,
            params: Params::default(),
        }
    }
    unsafe fn push<V>(args: &mut HostArgs<'_>, value: &V) {
        // SAFETY: as promised by the caller.
        unsafe { args.params.push(value) }
    }
    fn launch(
        args: HostArgs<'_>,
        kernel: &'static str,
        cfg: LaunchConfig,
        entry: &(dyn Fn(&Params) + Sync),
        _plan: &Plan<'_>,
    ) -> Result<()> {
        let params = &args.params;
        let (g, b) = (cfg.grid_dim, cfg.block_dim);
        let dynamic_shared = cfg.shared_mem_bytes as usize;
        args.emulator
            .run_with_dynamic_shared(
                kernel,
                [g.0, g.1, g.2],
                [b.0, b.1, b.2],
                dynamic_shared,
                &|| entry(params),
            )
            .map_err(|e| Error::Emulator(Box::new(e)))
    }
}
