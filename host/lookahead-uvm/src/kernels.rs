//! Launch shapes for the crate's own kernels (the typed launchers of `lookahead-uvm-kernels`):
//! grids sized to the GPU, one place for each kernel's configuration.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use lookahead::launch::{KernelSlice, KernelSliceMut, LaunchConfig};
use lookahead::{Gpu, Result};
use lookahead_device::uvm::RequestQueue;
use lookahead_uvm_kernels as k;
use lookahead_uvm_kernels::WordRange;

use crate::ring::RingQueue;

/// The device toolchain that compiled this crate's kernels.
pub const KERNELS_TOOLCHAIN: &str = k::PTX_TOOLCHAIN;

/// The kernels, loaded on one GPU, with grids sized to its multiprocessors.
#[derive(Debug, Clone)]
pub struct UvmKernels {
    sms: u32,
}

/// A read-only `u32` buffer on the GPU.
pub trait Words: KernelSlice<u32> {}
impl<T: KernelSlice<u32> + ?Sized> Words for T {}
/// A writable `u32` buffer on the GPU.
pub trait WordsMut: KernelSliceMut<u32> {}
impl<T: KernelSliceMut<u32> + ?Sized> WordsMut for T {}

impl UvmKernels {
    /// Loads the kernels on `gpu` (now, so no later launch pays for it).
    pub fn load(gpu: &Gpu) -> Result<Self> {
        lookahead::launch::module_for(gpu.context(), k::PTX)?;
        let sms = gpu.capabilities()?.sm_count.max(1);
        Ok(UvmKernels { sms })
    }

    fn grid(&self, blocks_per_sm: u32) -> LaunchConfig {
        LaunchConfig::new((self.sms * blocks_per_sm, 1, 1), (256, 1, 1))
    }

    /// Reads one word every `stride` words of `data`; adds them into `sink[0]`.
    pub fn touch_pages(
        &self,
        s: &Arc<CudaStream>,
        data: &(impl Words + ?Sized),
        stride: u32,
        sink: &mut (impl WordsMut + ?Sized),
    ) -> Result<()> {
        k::touch_pages::launch(s, self.grid(4), data, stride, sink)
    }

    /// Streams all of `data` with 16-byte loads; adds a checksum into `sink[0]`.
    pub fn read_words(
        &self,
        s: &Arc<CudaStream>,
        data: &(impl Words + ?Sized),
        sink: &mut (impl WordsMut + ?Sized),
    ) -> Result<()> {
        k::read_words::launch(s, self.grid(8), data, sink)
    }

    /// Issues one `prefetch.global.L2` every `stride` words of `data`.
    pub fn prefetch_sweep(
        &self,
        s: &Arc<CudaStream>,
        data: &(impl Words + ?Sized),
        stride: u32,
    ) -> Result<()> {
        k::prefetch_sweep::launch(s, self.grid(4), data, stride)
    }

    /// Copies `pieces` of `src` to the same words of `dst` with the GPU-driven pull's copy
    /// loop, in `blocks` blocks of 256 threads: `next` one zeroed word, `counters` one word
    /// per piece, each ending up one higher.
    #[allow(clippy::too_many_arguments)]
    pub fn pull_copy(
        &self,
        s: &Arc<CudaStream>,
        src: &(impl Words + ?Sized),
        dst: &mut (impl WordsMut + ?Sized),
        pieces: &(impl KernelSlice<WordRange> + ?Sized),
        next: &mut (impl WordsMut + ?Sized),
        counters: &mut (impl WordsMut + ?Sized),
        blocks: u32,
    ) -> Result<()> {
        let cfg = LaunchConfig::new((blocks.max(1), 1, 1), (256, 1, 1));
        k::pull_copy::launch(s, cfg, src, dst, pieces, next, counters)
    }

    /// Each block requests ranges `ahead` steps in advance, waits for its range and sums it
    /// (`sums` zeroed); `readiness` gets each range's outcome.
    ///
    /// The kernel waits for flags the prefetch service writes on its own streams: pass the
    /// buffers through `lookahead::untracked` and queue nothing on `s` until it has finished.
    /// A cudarc allocation passed as it is has cudarc record an event after the kernel, which
    /// can hold up a flag write that shares its hardware queue until the waits time out (seen
    /// on the H100, driver 580.159.04, as 1 of 96 requests timing out).
    #[allow(clippy::too_many_arguments)]
    pub fn request_and_sum(
        &self,
        s: &Arc<CudaStream>,
        queue: RingQueue<'_>,
        data: &(impl Words + ?Sized),
        ranges: &(impl KernelSlice<WordRange> + ?Sized),
        ahead: u32,
        sums: &mut (impl WordsMut + ?Sized),
        readiness: &mut (impl WordsMut + ?Sized),
        blocks: u32,
    ) -> Result<()> {
        let cfg = LaunchConfig::new((blocks.max(1), 1, 1), (256, 1, 1));
        k::request_and_sum::launch(s, cfg, queue, data, ranges, ahead, sums, readiness)
    }

    /// Thread `i` publishes range `i` of `data` with flag `i`; `outcomes[i]` gets what
    /// happened. A disabled queue ([`RequestQueue::disabled`]) may stand for `queue`.
    pub fn publish_ranges(
        &self,
        s: &Arc<CudaStream>,
        queue: impl lookahead::launch::KernelValue<RequestQueue, lookahead::launch::GpuMemory>,
        data: &(impl Words + ?Sized),
        ranges: &(impl KernelSlice<WordRange> + ?Sized),
        outcomes: &mut (impl WordsMut + ?Sized),
    ) -> Result<()> {
        let n = KernelSlice::<WordRange>::kernel_len(ranges);
        k::publish_ranges::launch(
            s,
            LaunchConfig::for_len(n, 256),
            queue,
            data,
            ranges,
            outcomes,
        )
    }
}
