//! A set of GPUs of one process: every device, or chosen ones, each a [`lookahead::Gpu`]
//! (its own context and stream, so typed launches and allocations go to any device of the
//! set as they go to one), with peer access enabled between the pairs that support it.
//!
//! ```no_run
//! let mut gpus = lookahead_multi::GpuSet::all()?;
//! let enabled = gpus.enable_peer_access()?;
//! println!("{enabled} peer paths\n{}", gpus.topology()?.summary());
//! let names = gpus.on_each(|i, gpu| format!("{i}: {}", gpu.name()));
//! # Ok::<(), lookahead_multi::Error>(())
//! ```

use cudarc::driver::sys;
use lookahead::{DriverContext, Gpu};

use crate::error::{Error, Result};
use crate::topology::Topology;

/// GPUs of this process, by position in the set (not necessarily their ordinals).
#[derive(Debug, Clone)]
pub struct GpuSet {
    gpus: Vec<Gpu>,
    /// `peer[a][b]`: GPU `a` (position) may access GPU `b`'s memory.
    peer: Vec<Vec<bool>>,
}

impl GpuSet {
    /// Every device the driver reports.
    pub fn all() -> Result<Self> {
        let n = Gpu::count()?;
        Self::select(&(0..n).collect::<Vec<_>>())
    }

    /// The devices with these ordinals, in this order (each once).
    pub fn select(ordinals: &[usize]) -> Result<Self> {
        if ordinals.is_empty() {
            return Err(Error::Invalid("an empty set of GPUs".into()));
        }
        for (i, o) in ordinals.iter().enumerate() {
            if ordinals[..i].contains(o) {
                return Err(Error::Invalid(format!("GPU {o} is named twice")));
            }
        }
        let gpus = ordinals
            .iter()
            .map(|&o| Gpu::new(o))
            .collect::<lookahead::Result<Vec<_>>>()?;
        let n = gpus.len();
        Ok(GpuSet {
            gpus,
            peer: vec![vec![false; n]; n],
        })
    }

    /// How many GPUs.
    pub fn len(&self) -> usize {
        self.gpus.len()
    }

    /// Whether the set is empty (never, once made).
    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }

    /// The GPUs, by position.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// The GPU at `position`.
    pub fn gpu(&self, position: usize) -> &Gpu {
        &self.gpus[position]
    }

    /// Enables peer access from every GPU to every other that the driver says it can
    /// access (`cuDeviceCanAccessPeer`, then `cuCtxEnablePeerAccess`; already enabled counts
    /// as enabled). Returns how many ordered pairs have it.
    pub fn enable_peer_access(&mut self) -> Result<usize> {
        let mut enabled = 0;
        for a in 0..self.len() {
            for b in 0..self.len() {
                if a == b || !can_access_peer(&self.gpus[a], &self.gpus[b])? {
                    continue;
                }
                self.gpus[a].bind_to_thread()?;
                let peer_ctx = self.gpus[b].context().cu_ctx();
                // SAFETY: both contexts are alive (held by the set); the flags must be 0.
                let r = unsafe { sys::cuCtxEnablePeerAccess(peer_ctx, 0) };
                if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
                    r.result().during("cuCtxEnablePeerAccess")?;
                }
                self.peer[a][b] = true;
                enabled += 1;
            }
        }
        Ok(enabled)
    }

    /// Whether GPU `a` has peer access to GPU `b`'s memory (positions in the set), as
    /// [`GpuSet::enable_peer_access`] left it.
    pub fn peer_enabled(&self, a: usize, b: usize) -> bool {
        self.peer[a][b]
    }

    /// What each device and each pair can do, and how they are linked.
    pub fn topology(&self) -> Result<Topology> {
        Topology::query(self)
    }

    /// Runs `f(position, gpu)` for every GPU at once, one thread each with that GPU's
    /// context current, and returns the results by position.
    pub fn on_each<R: Send>(&self, f: impl Fn(usize, &Gpu) -> R + Sync) -> Vec<R> {
        std::thread::scope(|s| {
            let handles: Vec<_> = self
                .gpus
                .iter()
                .enumerate()
                .map(|(i, gpu)| {
                    let f = &f;
                    s.spawn(move || {
                        // A failed bind shows in the first call `f` makes.
                        let _ = gpu.bind_to_thread();
                        f(i, gpu)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }
}

/// Waits for `gpu`'s work, then hands the device memory its pool keeps from stream-ordered
/// frees back to the device (`cuMemPoolTrimTo`), so that its free memory counts it again:
/// for this process's next large allocation, or another process's.
pub fn release_freed_memory(gpu: &Gpu) -> lookahead::Result<()> {
    gpu.bind_to_thread()?;
    gpu.context().synchronize().during("cuCtxSynchronize")?;
    let mut pool = std::ptr::null_mut();
    // SAFETY: writes the device's current pool; trimming releases only unused memory.
    unsafe {
        sys::cuDeviceGetMemPool(&mut pool, gpu.context().cu_device())
            .result()
            .during("cuDeviceGetMemPool")?;
        sys::cuMemPoolTrimTo(pool, 0)
            .result()
            .during("cuMemPoolTrimTo")?;
    }
    Ok(())
}

/// Whether `a` can map `b`'s memory (`cuDeviceCanAccessPeer`).
pub(crate) fn can_access_peer(a: &Gpu, b: &Gpu) -> Result<bool> {
    let mut can = 0;
    // SAFETY: writes one int; both devices exist.
    unsafe {
        sys::cuDeviceCanAccessPeer(&mut can, a.context().cu_device(), b.context().cu_device())
    }
    .result()
    .during("cuDeviceCanAccessPeer")?;
    Ok(can != 0)
}

/// Copies `bytes` bytes from `src` (memory of `from`) to `dst` (memory of `to`) on `stream`
/// (`cuMemcpyPeerAsync`: over NVLink or PCIe as the pair is linked, through the host when
/// peer access is not possible).
///
/// # Safety
/// `src` and `dst` are allocations of `from` and `to` holding `bytes` bytes, not written by
/// other work until the copy has finished on `stream`.
pub unsafe fn copy_peer(
    dst: u64,
    to: &Gpu,
    src: u64,
    from: &Gpu,
    bytes: usize,
    stream: &cudarc::driver::CudaStream,
) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        sys::cuMemcpyPeerAsync(
            dst,
            to.context().cu_ctx(),
            src,
            from.context().cu_ctx(),
            bytes,
            stream.cu_stream(),
        )
    }
    .result()
    .during("cuMemcpyPeerAsync")?;
    Ok(())
}

/// [`copy_peer`] between cudarc allocations: all of `src` (an allocation of `from`) into the
/// start of `dst` (an allocation of `to`), on `stream` (a stream of `to`). Each allocation's
/// address is taken on a stream of its own GPU: cudarc records a slice's use as events of
/// its own context, and recording them on another context's stream leaves the context in
/// error.
///
/// # Safety
/// `src` is not written by other work until the copy has finished on `stream`.
pub unsafe fn copy_peer_slices<T>(
    dst: &mut impl cudarc::driver::DevicePtrMut<T>,
    to: &Gpu,
    src: &impl cudarc::driver::DevicePtr<T>,
    from: &Gpu,
    stream: &cudarc::driver::CudaStream,
) -> Result<()> {
    if dst.len() < src.len() {
        return Err(Error::Invalid(format!(
            "a peer copy of {} elements into {}",
            src.len(),
            dst.len()
        )));
    }
    let bytes = src.len() * std::mem::size_of::<T>();
    let (s, _src_use) = src.device_ptr(from.stream());
    let (d, _dst_use) = dst.device_ptr_mut(stream);
    // SAFETY: `bytes` bytes at each address, both allocations alive while their guards
    // record the copy's use; `src` unwritten until it finishes is the caller's contract.
    unsafe { copy_peer(d, to, s, from, bytes, stream) }
}
