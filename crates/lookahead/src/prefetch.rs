//! Prefetching managed memory to a device or to the host (`cuMemPrefetchAsync_v2` with a
//! `CUmemLocation`, CUDA 12.2+), singly, as a list on one stream (optionally through
//! `cuMemPrefetchBatchAsync`, CUDA 12.8+), and through [`PrefetchEngine`]: many ranges
//! coalesced, cut into large pieces and issued from several host threads, each with its
//! own stream, with completion reported through CUDA events.
//!
//! Why an engine: the driver spends roughly 80-120 us of host time per prefetch call, so
//! one thread issuing 2 MiB pieces tops out near 17 GB/s on an H100 over PCIe Gen5, while
//! 32 MiB pieces from several threads reach about 50 GB/s (see `docs/host-runtime.md`).

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use cudarc::driver::{sys, CudaEvent, CudaStream};

use crate::error::{check, Capability, DriverContext, Error, Result};
use crate::gpu::Gpu;
use crate::managed::{Location, ManagedBuffer};
use crate::range::{chunk, coalesce_with_gap, split_across, total_bytes, ByteRange};

/// Whether `ptr` lies in a managed (`cuMemAllocManaged`) allocation. Unknown addresses
/// (host `malloc` memory, say) are reported as not managed.
pub fn is_managed(gpu: &Gpu, ptr: u64) -> Result<bool> {
    gpu.bind_to_thread()?;
    let mut managed: u32 = 0;
    // SAFETY: writes one unsigned int (the attribute's documented type).
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&mut managed as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
            ptr,
        )
    };
    match r {
        sys::cudaError_enum::CUDA_SUCCESS => Ok(managed != 0),
        sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE => Ok(false),
        e => Err(Error::Driver {
            call: "cuPointerGetAttribute",
            source: cudarc::driver::DriverError(e),
        }),
    }
}

/// Checks that the first and last byte of `range` are managed memory.
pub(crate) fn require_managed(gpu: &Gpu, range: ByteRange) -> Result<()> {
    for ptr in [range.start, range.end() - 1] {
        if !is_managed(gpu, ptr)? {
            return Err(Error::NotManagedMemory { ptr });
        }
    }
    Ok(())
}

fn require_location(gpu: &Gpu, location: Location, needed_by: &'static str) -> Result<()> {
    if let Location::Device(ordinal) = location {
        gpu.require(Capability::ConcurrentManagedAccess, needed_by)?;
        let count = Gpu::count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
    }
    Ok(())
}

/// Issues one `cuMemPrefetchAsync_v2` without checks. The context must be current.
fn issue(range: ByteRange, location: Location, stream: sys::CUstream) -> Result<()> {
    // SAFETY: plain driver call on an address range; the driver validates it.
    check("cuMemPrefetchAsync_v2", unsafe {
        sys::cuMemPrefetchAsync_v2(range.start, range.len as usize, location.to_cu(), 0, stream)
    })
}

/// Issues one `cuMemPrefetchBatchAsync` for all `ranges` to one location. The context
/// must be current and the driver CUDA 12.8 or newer.
fn issue_batch(ranges: &[ByteRange], location: Location, stream: sys::CUstream) -> Result<()> {
    if ranges.is_empty() {
        return Ok(());
    }
    let mut ptrs: Vec<sys::CUdeviceptr> = ranges.iter().map(|r| r.start).collect();
    let mut sizes: Vec<usize> = ranges.iter().map(|r| r.len as usize).collect();
    let mut locs = [location.to_cu()];
    let mut loc_idx = [0usize];
    // SAFETY: the arrays hold `ranges.len()` entries (pointers, sizes) and one location
    // applying from index 0, as the call documents; they outlive the call.
    check("cuMemPrefetchBatchAsync", unsafe {
        sys::cuMemPrefetchBatchAsync(
            ptrs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            ptrs.len(),
            locs.as_mut_ptr(),
            loc_idx.as_mut_ptr(),
            1,
            0,
            stream,
        )
    })
}

/// Prefetches one byte range of managed memory to `location` on `stream`, after checking
/// it is managed memory and the device can take it.
pub fn prefetch_range(
    gpu: &Gpu,
    range: ByteRange,
    location: Location,
    stream: &CudaStream,
) -> Result<()> {
    ByteRange::new(range.start, range.len)?;
    require_location(gpu, location, "prefetch to a device")?;
    require_managed(gpu, range)?;
    issue(range, location, stream.cu_stream())
}

/// Prefetches several ranges on one stream: one call per range, or one
/// `cuMemPrefetchBatchAsync` when `batch` is true (needs a 12.8+ driver). The batch call
/// rejects the legacy NULL stream (`CUDA_ERROR_INVALID_VALUE`, measured on driver 580), so
/// on the NULL stream (cudarc's default stream) the ranges go out one call each. Ranges are
/// issued as given (no coalescing; see [`PrefetchEngine`] for that).
pub fn prefetch_ranges(
    gpu: &Gpu,
    ranges: &[ByteRange],
    location: Location,
    stream: &CudaStream,
    batch: bool,
) -> Result<()> {
    require_location(gpu, location, "prefetch to a device")?;
    for r in ranges {
        ByteRange::new(r.start, r.len)?;
        require_managed(gpu, *r)?;
    }
    if batch && !stream.cu_stream().is_null() {
        gpu.require(Capability::BatchPrefetch, "prefetch_ranges(batch = true)")?;
        issue_batch(ranges, location, stream.cu_stream())
    } else {
        ranges
            .iter()
            .try_for_each(|r| issue(*r, location, stream.cu_stream()))
    }
}

/// [`prefetch_ranges`] (one call per range) without the per-range checks, each of which
/// costs two pointer-attribute queries: for callers on a hot path whose ranges the driver
/// may as well validate, such as a service serving kernels' requests. A range that is not
/// managed memory gets the driver's error. The context must be current on this thread.
pub fn prefetch_ranges_unchecked(
    ranges: &[ByteRange],
    location: Location,
    stream: &CudaStream,
) -> Result<()> {
    ranges
        .iter()
        .try_for_each(|r| issue(*r, location, stream.cu_stream()))
}

impl<T> ManagedBuffer<T> {
    /// Prefetches the whole buffer to `location` on `stream`.
    pub fn prefetch(&self, location: Location, stream: &CudaStream) -> Result<()> {
        prefetch_range(self.gpu(), self.byte_range(), location, stream)
    }

    /// Prefetches elements `range` to `location` on `stream`.
    pub fn prefetch_elements(
        &self,
        range: std::ops::Range<usize>,
        location: Location,
        stream: &CudaStream,
    ) -> Result<()> {
        prefetch_range(self.gpu(), self.elements(range)?, location, stream)
    }
}

/// How a [`PrefetchEngine`] cuts and issues work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchOptions {
    /// Host threads, each with its own stream (at least 1).
    pub threads: usize,
    /// Largest piece per prefetch call, in bytes (0: never cut).
    pub piece_bytes: u64,
    /// Ranges separated by at most this many bytes are merged (the gap is moved too).
    pub max_gap: u64,
    /// Issue each thread's pieces with one `cuMemPrefetchBatchAsync` instead of one call
    /// per piece. Ignored (per-piece calls) when the driver is older than 12.8.
    pub batch: bool,
}

impl Default for PrefetchOptions {
    /// 32 threads, 32 MiB pieces, no gap bridging, per-piece calls: the configuration the
    /// H100 (PCIe) measurements in `docs/host-runtime.md` favour. The driver does most of a
    /// prefetch's work inside the issuing call, so scattered ranges need many threads in
    /// flight; `cuMemPrefetchBatchAsync` measured slower than per-piece calls there.
    fn default() -> Self {
        PrefetchOptions {
            threads: 32,
            piece_bytes: 32 << 20,
            max_gap: 0,
            batch: false,
        }
    }
}

/// The plan an engine would issue for a set of ranges: pure arithmetic, no GPU.
pub fn plan(ranges: &[ByteRange], options: &PrefetchOptions) -> Vec<Vec<ByteRange>> {
    let merged = coalesce_with_gap(ranges, options.max_gap);
    let pieces = chunk(&merged, options.piece_bytes);
    split_across(&pieces, options.threads.max(1))
}

struct Job {
    pieces: Vec<ByteRange>,
    location: Location,
    batch: bool,
    reply: mpsc::Sender<Result<CudaEvent>>,
}

struct Worker {
    tx: Option<mpsc::Sender<Job>>,
    handle: Option<JoinHandle<()>>,
}

/// Issues prefetches of many ranges from a pool of host threads, one stream each.
///
/// A call to [`PrefetchEngine::prefetch`] coalesces the ranges, cuts them into pieces of
/// [`PrefetchOptions::piece_bytes`], hands each thread a contiguous share, and returns a
/// [`PrefetchTicket`] at once; the ticket's events complete when the data has arrived.
pub struct PrefetchEngine {
    gpu: Gpu,
    options: PrefetchOptions,
    batch_ok: bool,
    workers: Vec<Worker>,
}

impl std::fmt::Debug for PrefetchEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefetchEngine")
            .field("options", &self.options)
            .field("batch_ok", &self.batch_ok)
            .field("threads", &self.workers.len())
            .finish()
    }
}

impl PrefetchEngine {
    /// Starts `options.threads` worker threads on `gpu`, each with a new stream.
    pub fn new(gpu: &Gpu, options: PrefetchOptions) -> Result<Self> {
        gpu.require(Capability::ManagedMemory, "PrefetchEngine")?;
        let batch_ok = gpu.capabilities()?.batch_prefetch;
        let mut workers = Vec::new();
        for i in 0..options.threads.max(1) {
            let stream = gpu.context().new_stream().during("cuStreamCreate")?;
            let (tx, rx) = mpsc::channel::<Job>();
            let g = gpu.clone();
            let handle = std::thread::Builder::new()
                .name(format!("lookahead-prefetch-{i}"))
                .spawn(move || worker_loop(g, stream, rx))
                .map_err(|_| Error::Driver {
                    call: "spawning a prefetch thread",
                    source: cudarc::driver::DriverError(
                        sys::cudaError_enum::CUDA_ERROR_OPERATING_SYSTEM,
                    ),
                })?;
            workers.push(Worker {
                tx: Some(tx),
                handle: Some(handle),
            });
        }
        Ok(PrefetchEngine {
            gpu: gpu.clone(),
            options,
            batch_ok,
            workers,
        })
    }

    /// The engine's options.
    pub fn options(&self) -> &PrefetchOptions {
        &self.options
    }

    /// Whether pieces go out through `cuMemPrefetchBatchAsync`.
    pub fn uses_batch(&self) -> bool {
        self.options.batch && self.batch_ok
    }

    /// Prefetches `ranges` (any order, overlaps allowed) to `location`. Validates every
    /// coalesced range (managed memory, device capability) before issuing anything.
    pub fn prefetch(&self, ranges: &[ByteRange], location: Location) -> Result<PrefetchTicket> {
        require_location(&self.gpu, location, "PrefetchEngine::prefetch to a device")?;
        for r in ranges {
            ByteRange::new(r.start, r.len)?;
        }
        let merged = coalesce_with_gap(ranges, self.options.max_gap);
        for r in &merged {
            require_managed(&self.gpu, *r)?;
        }
        let pieces = chunk(&merged, self.options.piece_bytes);
        let bytes = total_bytes(&pieces);
        let piece_count = pieces.len();
        let groups = split_across(&pieces, self.workers.len());
        let mut pending = Vec::with_capacity(groups.len());
        for (worker, group) in self.workers.iter().zip(groups) {
            let (reply, rx) = mpsc::channel();
            let job = Job {
                pieces: group,
                location,
                batch: self.uses_batch(),
                reply,
            };
            let sent = worker.tx.as_ref().map(|tx| tx.send(job).is_ok());
            if sent != Some(true) {
                return Err(worker_gone());
            }
            pending.push(rx);
        }
        Ok(PrefetchTicket {
            pending,
            events: Vec::new(),
            bytes,
            pieces: piece_count,
        })
    }
}

impl Drop for PrefetchEngine {
    fn drop(&mut self) {
        for w in &mut self.workers {
            w.tx.take();
        }
        for w in &mut self.workers {
            if let Some(h) = w.handle.take() {
                let _ = h.join();
            }
        }
    }
}

fn worker_gone() -> Error {
    Error::Driver {
        call: "prefetch worker thread (exited)",
        source: cudarc::driver::DriverError(sys::cudaError_enum::CUDA_ERROR_UNKNOWN),
    }
}

fn worker_loop(gpu: Gpu, stream: Arc<CudaStream>, rx: mpsc::Receiver<Job>) {
    let bound = gpu.bind_to_thread();
    while let Ok(job) = rx.recv() {
        let result = match &bound {
            Err(_) => gpu.bind_to_thread().map(|_| ()),
            Ok(()) => Ok(()),
        }
        .and_then(|_| {
            if job.batch {
                issue_batch(&job.pieces, job.location, stream.cu_stream())?;
            } else {
                for p in &job.pieces {
                    issue(*p, job.location, stream.cu_stream())?;
                }
            }
            stream.record_event(None).during("cuEventRecord")
        });
        let _ = job.reply.send(result);
    }
}

/// Completion of one [`PrefetchEngine::prefetch`] call: one event per worker thread used.
#[derive(Debug)]
pub struct PrefetchTicket {
    pending: Vec<mpsc::Receiver<Result<CudaEvent>>>,
    events: Vec<CudaEvent>,
    bytes: u64,
    pieces: usize,
}

impl PrefetchTicket {
    /// Bytes being moved (after coalescing).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Number of prefetch pieces issued.
    pub fn pieces(&self) -> usize {
        self.pieces
    }

    /// Blocks until every worker has issued its pieces; returns the first error.
    pub fn issued(&mut self) -> Result<&[CudaEvent]> {
        let mut first_err = None;
        for rx in self.pending.drain(..) {
            match rx.recv() {
                Ok(Ok(ev)) => self.events.push(ev),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(worker_gone());
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(&self.events),
        }
    }

    /// Makes `stream` wait (on the GPU) for the prefetches, so a kernel queued there next
    /// finds the data in place. Blocks the host only until the pieces are issued.
    pub fn wait_on(&mut self, stream: &CudaStream) -> Result<()> {
        self.issued()?;
        for ev in &self.events {
            stream.wait(ev).during("cuStreamWaitEvent")?;
        }
        Ok(())
    }

    /// Whether all prefetches have completed (issues are awaited first).
    pub fn is_complete(&mut self) -> Result<bool> {
        self.issued()?;
        for ev in &self.events {
            if !ev.try_is_complete().during("cuEventQuery")? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Blocks until all prefetches have completed.
    pub fn wait(mut self) -> Result<()> {
        self.issued()?;
        for ev in &self.events {
            ev.synchronize().during("cuEventSynchronize")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_coalesces_chunks_and_splits() {
        let mib = 1u64 << 20;
        // 2048 shuffled 2 MiB ranges covering 4 GiB -> one range -> 128 pieces of 32 MiB.
        let mut ranges: Vec<ByteRange> = (0..2048u64)
            .map(|i| ByteRange {
                start: (1 << 40) + ((i * 1237) % 2048) * 2 * mib,
                len: 2 * mib,
            })
            .collect();
        ranges.reverse();
        let opts = PrefetchOptions {
            threads: 8,
            ..PrefetchOptions::default()
        };
        let groups = plan(&ranges, &opts);
        assert_eq!(groups.len(), 8);
        let pieces: Vec<_> = groups.iter().flatten().copied().collect();
        assert_eq!(pieces.len(), 128);
        assert!(pieces.iter().all(|p| p.len == 32 * mib));
        assert_eq!(total_bytes(&pieces), 4 << 30);
        for g in &groups {
            assert_eq!(total_bytes(g), 512 * mib);
        }
        // Bridging gaps merges separate lists.
        let sparse = [
            ByteRange {
                start: 0,
                len: 2 * mib,
            },
            ByteRange {
                start: 4 * mib,
                len: 2 * mib,
            },
        ];
        let opts = PrefetchOptions {
            max_gap: 2 * mib,
            threads: 1,
            ..PrefetchOptions::default()
        };
        assert_eq!(
            plan(&sparse, &opts),
            vec![vec![ByteRange {
                start: 0,
                len: 6 * mib
            }]]
        );
    }
}
