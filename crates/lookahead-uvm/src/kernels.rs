//! Launches of the crate's own kernels (the `lookahead-uvm-kernels` crate).

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use lookahead::launch::ByValue;
use lookahead::{Error, Gpu, Module, Result};
use lookahead_device::requests::RequestQueue;

use lookahead_uvm_kernels as ptx;

/// The device toolchain that compiled this crate's kernels.
pub const KERNELS_TOOLCHAIN: &str = ptx::PTX_TOOLCHAIN;

/// The loaded kernels.
#[derive(Debug, Clone)]
pub struct UvmKernels {
    module: Module,
    sms: u32,
}

/// A one-dimensional launch of `blocks` blocks of `threads` threads, no shared memory.
fn blocks_of(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn launched(
    call: &'static str,
    r: std::result::Result<(), cudarc::driver::DriverError>,
) -> Result<()> {
    r.map_err(|source| Error::Driver { call, source })
}

impl UvmKernels {
    /// Loads the kernels on `gpu`.
    pub fn load(gpu: &Gpu) -> Result<Self> {
        let module = gpu.load_ptx(ptx::PTX)?;
        let sms = gpu.capabilities()?.sm_count.max(1);
        Ok(UvmKernels { module, sms })
    }

    fn grid(&self, blocks_per_sm: u32, threads: u32) -> LaunchConfig {
        blocks_of(self.sms * blocks_per_sm, threads)
    }

    /// Reads one byte every `stride` bytes of `[ptr, ptr + bytes)`; adds them into `sink`.
    pub fn touch_pages(
        &self,
        stream: &Arc<CudaStream>,
        ptr: u64,
        bytes: u64,
        stride: u64,
        sink: u64,
    ) -> Result<()> {
        let f = self.module.function("touch_pages")?;
        let mut l = stream.launch_builder(&f);
        l.arg(&ptr).arg(&bytes).arg(&stride).arg(&sink);
        // SAFETY: (u8*, u64, u64, u32*) as declared; the caller passes a readable range.
        launched(
            "touch_pages",
            unsafe { l.launch(self.grid(4, 256)) }.map(|_| ()),
        )
    }

    /// Streams `words` 32-bit words from `ptr` (16-byte aligned, multiple of 4 words).
    pub fn read_words(
        &self,
        stream: &Arc<CudaStream>,
        ptr: u64,
        words: u64,
        sink: u64,
    ) -> Result<()> {
        let f = self.module.function("read_words")?;
        let mut l = stream.launch_builder(&f);
        l.arg(&ptr).arg(&words).arg(&sink);
        // SAFETY: as declared in kernels/src/lib.rs.
        launched(
            "read_words",
            unsafe { l.launch(self.grid(8, 256)) }.map(|_| ()),
        )
    }

    /// Issues one `prefetch.global.L2` every `stride` bytes of the range.
    pub fn prefetch_sweep(
        &self,
        stream: &Arc<CudaStream>,
        ptr: u64,
        bytes: u64,
        stride: u64,
    ) -> Result<()> {
        let f = self.module.function("prefetch_sweep")?;
        let mut l = stream.launch_builder(&f);
        l.arg(&ptr).arg(&bytes).arg(&stride);
        // SAFETY: prefetches cannot fault.
        launched(
            "prefetch_sweep",
            unsafe { l.launch(self.grid(4, 256)) }.map(|_| ()),
        )
    }

    /// Copies pieces of `src` to the same word offsets of `dst` with the GPU-driven pull's
    /// copy loop: `pieces` holds `n` pairs (first word, words) in device memory, `next` one
    /// zeroed `u32`, `counters` `n` `u32`s that each end up one higher.
    #[allow(clippy::too_many_arguments)]
    pub fn pull_copy(
        &self,
        stream: &Arc<CudaStream>,
        src: u64,
        dst: u64,
        pieces: u64,
        n: u32,
        next: u64,
        counters: u64,
        blocks: u32,
    ) -> Result<()> {
        let f = self.module.function("pull_copy")?;
        let mut l = stream.launch_builder(&f);
        l.arg(&src)
            .arg(&dst)
            .arg(&pieces)
            .arg(&n)
            .arg(&next)
            .arg(&counters);
        let cfg = blocks_of(blocks.max(1), 256);
        // SAFETY: as declared in kernels/src/lib.rs; the caller passes valid pieces.
        launched("pull_copy", unsafe { l.launch(cfg) }.map(|_| ()))
    }

    /// Publishes ranges `(ptrs[i], lens[i])` with flags `i` (device arrays of `n`).
    pub fn publish_ranges(
        &self,
        stream: &Arc<CudaStream>,
        queue: RequestQueue,
        ptrs: u64,
        lens: u64,
        n: u32,
        outcomes: u64,
    ) -> Result<()> {
        let f = self.module.function("publish_ranges")?;
        let mut l = stream.launch_builder(&f);
        let q = ByValue(queue);
        l.arg(&q).arg(&ptrs).arg(&lens).arg(&n).arg(&outcomes);
        let cfg = LaunchConfig::for_num_elems(n.max(1));
        // SAFETY: as declared; arrays hold `n` entries.
        launched("publish_ranges", unsafe { l.launch(cfg) }.map(|_| ()))
    }

    /// Each block requests ranges `ahead` steps in advance, waits for its range, and sums it.
    #[allow(clippy::too_many_arguments)]
    pub fn request_and_sum(
        &self,
        stream: &Arc<CudaStream>,
        queue: RequestQueue,
        ptrs: u64,
        lens: u64,
        n: u32,
        ahead: u32,
        sums: u64,
        readiness: u64,
        blocks: u32,
    ) -> Result<()> {
        let f = self.module.function("request_and_sum")?;
        let mut l = stream.launch_builder(&f);
        let q = ByValue(queue);
        l.arg(&q)
            .arg(&ptrs)
            .arg(&lens)
            .arg(&n)
            .arg(&ahead)
            .arg(&sums)
            .arg(&readiness);
        let cfg = blocks_of(blocks.max(1), 256);
        // SAFETY: as declared; arrays hold `n` entries.
        launched("request_and_sum", unsafe { l.launch(cfg) }.map(|_| ()))
    }
}
