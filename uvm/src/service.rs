//! The host prefetch service: drains a [`RequestRing`], groups requests, prefetches them from
//! several threads (one stream each) and marks each request ready on the same stream right
//! after its data, so kernels waiting on the flag never see it early.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use cudarc::driver::{sys, CudaStream};
use lookahead::{ByteRange, Error, Gpu, Location, Result};
use lookahead_device::requests::FALLBACK_BIT;

use crate::ring::{Request, RequestRing};

/// How a [`PrefetchService`] works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceConfig {
    /// Worker threads, each with its own stream.
    pub threads: usize,
    /// Largest prefetch call, in bytes; a longer group of adjacent requests is cut.
    pub piece_bytes: u64,
    /// Issue a worker's pieces of one group with one `cuMemPrefetchBatchAsync` (CUDA 12.8+).
    pub batch: bool,
    /// How long the poller sleeps when the ring is empty.
    pub poll_interval: Duration,
    /// Most requests taken from the ring at once.
    pub max_drain: usize,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            threads: 8,
            piece_bytes: 32 << 20,
            batch: false,
            poll_interval: Duration::from_micros(20),
            max_drain: 4096,
        }
    }
}

/// Counters of a running or stopped service.
#[derive(Debug, Default)]
pub struct ServiceStats {
    /// Requests taken from the ring.
    pub requests: AtomicU64,
    /// Bytes those requests asked for.
    pub bytes: AtomicU64,
    /// Requests whose flag was written (ready or fallen back).
    pub completed: AtomicU64,
    /// Requests that could not be prefetched (bad range, driver error): marked fallback.
    pub failed: AtomicU64,
}

/// What the service did, once stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceReport {
    /// Requests taken from the ring.
    pub requests: u64,
    /// Bytes requested.
    pub bytes: u64,
    /// Requests whose flag was written.
    pub completed: u64,
    /// Requests that fell back because their prefetch failed.
    pub failed: u64,
}

impl ServiceStats {
    fn report(&self) -> ServiceReport {
        ServiceReport {
            requests: self.requests.load(Ordering::Acquire),
            bytes: self.bytes.load(Ordering::Acquire),
            completed: self.completed.load(Ordering::Acquire),
            failed: self.failed.load(Ordering::Acquire),
        }
    }
}

/// A group of requests whose ranges follow each other in memory, issued together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The merged range.
    pub range: ByteRange,
    /// The requests it covers, in arrival order.
    pub requests: Vec<Request>,
}

/// Merges requests that arrive one after the other and touch or overlap in memory (arrival
/// order is kept: kernels usually wait on requests in the order they made them). Requests
/// of zero bytes get a group of their own with a zero-length range.
pub fn group(requests: &[Request]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for r in requests {
        if let Some(g) = groups.last_mut() {
            let end = g.range.start + g.range.len;
            if r.bytes > 0 && g.range.len > 0 && r.ptr >= g.range.start && r.ptr <= end {
                let new_end = end.max(r.ptr.saturating_add(r.bytes));
                g.range.len = new_end - g.range.start;
                g.requests.push(*r);
                continue;
            }
        }
        groups.push(Group {
            range: ByteRange {
                start: r.ptr,
                len: r.bytes,
            },
            requests: vec![*r],
        });
    }
    groups
}

/// Cuts `range` into pieces of at most `piece` bytes (0: one piece).
pub fn pieces(range: ByteRange, piece: u64) -> Vec<ByteRange> {
    if piece == 0 || range.len <= piece {
        return vec![range];
    }
    (0..range.len.div_ceil(piece))
        .map(|i| {
            let start = range.start + i * piece;
            ByteRange {
                start,
                len: piece.min(range.start + range.len - start),
            }
        })
        .collect()
}

/// Does the work of one group: prefetch, then write the flags. Implemented for the GPU and,
/// for tests and CPU runs, for host rings.
trait Executor: Send + 'static {
    fn run(&mut self, ring: &RequestRing, group: &Group, config: &ServiceConfig) -> bool;
    fn finish(&mut self) {}
}

struct CudaExecutor {
    gpu: Gpu,
    stream: Arc<CudaStream>,
}

impl CudaExecutor {
    fn write_flag(&self, ring: &RequestRing, r: &Request, value: u32) -> Result<()> {
        if r.flag >= ring.num_flags() {
            return Ok(());
        }
        // SAFETY: the flag address lies in the ring's device allocation, alive while the
        // service holds the ring; the write is ordered after earlier work on this stream.
        unsafe {
            sys::cuStreamWriteValue32_v2(
                self.stream.cu_stream(),
                ring.ready_flag_address(r.flag),
                value,
                0,
            )
        }
        .result()
        .map_err(|source| Error::Driver {
            call: "cuStreamWriteValue32",
            source,
        })
    }
}

impl Executor for CudaExecutor {
    fn run(&mut self, ring: &RequestRing, group: &Group, config: &ServiceConfig) -> bool {
        let to = Location::Device(self.gpu.ordinal());
        let ok = group.range.len == 0
            || lookahead::prefetch::prefetch_ranges(
                &self.gpu,
                &pieces(group.range, config.piece_bytes),
                to,
                &self.stream,
                config.batch,
            )
            .is_ok();
        let mut written = true;
        for r in &group.requests {
            let value = if ok {
                r.generation
            } else {
                r.generation | FALLBACK_BIT
            };
            written &= self.write_flag(ring, r, value).is_ok();
        }
        ok && written
    }

    fn finish(&mut self) {
        let _ = self.stream.synchronize();
    }
}

/// Marks requests of a host ring ready, after an optional delay (a stand-in for a slow host).
struct HostExecutor {
    delay: Duration,
}

impl Executor for HostExecutor {
    fn run(&mut self, ring: &RequestRing, group: &Group, _config: &ServiceConfig) -> bool {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        for r in &group.requests {
            ring.mark_host(r, false);
        }
        true
    }
}

struct Worker {
    tx: Option<mpsc::Sender<Group>>,
    handle: Option<JoinHandle<()>>,
}

/// A running prefetch service. Start it with [`PrefetchService::start`]; stop it with
/// [`PrefetchService::stop`] (or by dropping it), which processes what is left in the ring.
pub struct PrefetchService {
    stop: Arc<AtomicBool>,
    poller: Option<JoinHandle<()>>,
    stats: Arc<ServiceStats>,
}

impl std::fmt::Debug for PrefetchService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefetchService")
            .field("stats", &self.stats.report())
            .finish()
    }
}

impl PrefetchService {
    /// Starts the service on `ring` (which must be a GPU ring from [`RequestRing::new`]).
    pub fn start(ring: Arc<RequestRing>, config: ServiceConfig) -> Result<Self> {
        let gpu = ring.gpu().cloned().ok_or(Error::InvalidRange {
            start: 0,
            len: 0,
            limit: 0,
            reason: "PrefetchService::start needs a GPU ring; use start_on_host for host rings",
        })?;
        let mut executors = Vec::new();
        for _ in 0..config.threads.max(1) {
            let stream = gpu.context().new_stream().map_err(|source| Error::Driver {
                call: "cuStreamCreate",
                source,
            })?;
            executors.push(CudaExecutor {
                gpu: gpu.clone(),
                stream,
            });
        }
        Self::spawn(ring, config, executors, Some(gpu))
    }

    /// Starts the service on a host ring ([`RequestRing::in_host_memory`]): requests are
    /// marked ready after `delay` each, with nothing to prefetch. Used to test producers
    /// and the protocol without a GPU, including a slow host.
    pub fn start_on_host(
        ring: Arc<RequestRing>,
        config: ServiceConfig,
        delay: Duration,
    ) -> Result<Self> {
        let executors = (0..config.threads.max(1))
            .map(|_| HostExecutor { delay })
            .collect();
        Self::spawn(ring, config, executors, None)
    }

    fn spawn<E: Executor>(
        ring: Arc<RequestRing>,
        config: ServiceConfig,
        executors: Vec<E>,
        gpu: Option<Gpu>,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(ServiceStats::default());
        let mut workers = Vec::new();
        for (i, mut exec) in executors.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel::<Group>();
            let (ring, stats, gpu) = (ring.clone(), stats.clone(), gpu.clone());
            let handle = std::thread::Builder::new()
                .name(format!("lookahead-uvm-worker-{i}"))
                .spawn(move || {
                    if let Some(gpu) = &gpu {
                        let _ = gpu.bind_to_thread();
                    }
                    for group in rx {
                        let ok = exec.run(&ring, &group, &config);
                        let n = group.requests.len() as u64;
                        stats.completed.fetch_add(n, Ordering::AcqRel);
                        if !ok {
                            stats.failed.fetch_add(n, Ordering::AcqRel);
                        }
                    }
                    exec.finish();
                })
                .map_err(spawn_error)?;
            workers.push(Worker {
                tx: Some(tx),
                handle: Some(handle),
            });
        }
        let (stop2, stats2) = (stop.clone(), stats.clone());
        let poller = std::thread::Builder::new()
            .name("lookahead-uvm-poller".into())
            .spawn(move || poll_loop(ring, config, workers, stop2, stats2))
            .map_err(spawn_error)?;
        Ok(PrefetchService {
            stop,
            poller: Some(poller),
            stats,
        })
    }

    /// Counters so far.
    pub fn report(&self) -> ServiceReport {
        self.stats.report()
    }

    /// Stops the service after handing out what is still in the ring, waits for the
    /// workers, and returns the final counters.
    pub fn stop(mut self) -> ServiceReport {
        self.shutdown();
        self.stats.report()
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(p) = self.poller.take() {
            let _ = p.join();
        }
    }
}

impl Drop for PrefetchService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn_error(_: std::io::Error) -> Error {
    Error::Driver {
        call: "spawning a service thread",
        source: cudarc::driver::DriverError(sys::cudaError_enum::CUDA_ERROR_OPERATING_SYSTEM),
    }
}

fn poll_loop(
    ring: Arc<RequestRing>,
    config: ServiceConfig,
    mut workers: Vec<Worker>,
    stop: Arc<AtomicBool>,
    stats: Arc<ServiceStats>,
) {
    let mut next_worker = 0usize;
    loop {
        // Read the stop flag before draining, so requests published before `stop()` are
        // always handed out by the final pass.
        let stopping = stop.load(Ordering::Acquire);
        let requests = ring.drain(config.max_drain.max(1));
        if requests.is_empty() {
            if stopping {
                break;
            }
            std::thread::sleep(config.poll_interval);
            continue;
        }
        stats
            .requests
            .fetch_add(requests.len() as u64, Ordering::AcqRel);
        stats.bytes.fetch_add(
            requests.iter().map(|r| r.bytes).sum::<u64>(),
            Ordering::AcqRel,
        );
        for g in group(&requests) {
            if let Some(tx) = &workers[next_worker].tx {
                let _ = tx.send(g);
            }
            next_worker = (next_worker + 1) % workers.len();
        }
    }
    for w in &mut workers {
        w.tx.take();
    }
    for w in &mut workers {
        if let Some(h) = w.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(flag: u32, ptr: u64, bytes: u64) -> Request {
        Request {
            flag,
            generation: 1,
            ptr,
            bytes,
        }
    }

    #[test]
    fn groups_adjacent_requests_in_arrival_order() {
        let g = group(&[
            req(0, 0, 100),
            req(1, 100, 50),
            req(2, 120, 10), // overlaps the group
            req(3, 1000, 10),
            req(4, 0, 10), // before the previous group: new group
        ]);
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].range, ByteRange { start: 0, len: 150 });
        assert_eq!(g[0].requests.len(), 3);
        assert_eq!(
            g[1].range,
            ByteRange {
                start: 1000,
                len: 10
            }
        );
        assert_eq!(g[2].requests[0].flag, 4);
    }

    #[test]
    fn zero_byte_requests_stay_alone() {
        let g = group(&[req(0, 0, 0), req(1, 0, 8), req(2, 8, 0)]);
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn pieces_cover_the_range_exactly() {
        let r = ByteRange {
            start: 4096,
            len: 10 * 1024 + 5,
        };
        let p = pieces(r, 1024);
        assert_eq!(p.len(), 11);
        assert_eq!(p[0].start, 4096);
        assert_eq!(p.iter().map(|p| p.len).sum::<u64>(), r.len);
        assert_eq!(p.last().unwrap().len, 5);
        assert_eq!(pieces(r, 0), vec![r]);
    }
}
