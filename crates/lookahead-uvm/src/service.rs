//! The host prefetch service: drains a [`RequestRing`], groups requests, prefetches them from
//! several threads (one stream each) and marks each request ready on the same stream right
//! after its data, so kernels waiting on the flag never see it early.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Condvar;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cudarc::driver::{sys, CudaEvent, CudaStream};
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
    /// How long the poller sleeps when the ring is empty (after `spin`).
    pub poll_interval: Duration,
    /// How long the poller keeps checking the ring without sleeping after it last found a
    /// request: a kernel's requests come in bursts, and a sleeping poller adds the
    /// operating system's wake-up latency (tens of microseconds) to each.
    pub spin: Duration,
    /// Smallest batch of adjacent requests handed to one worker, in bytes (see
    /// [`batch_bytes`]).
    pub min_batch_bytes: u64,
    /// Most requests taken from the ring at once.
    pub max_drain: usize,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            threads: 32,
            piece_bytes: 32 << 20,
            batch: false,
            poll_interval: Duration::from_micros(20),
            spin: Duration::from_millis(2),
            min_batch_bytes: 8 << 20,
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

/// How many bytes of adjacent requests one worker takes at a time, for a drain of `total`
/// bytes: enough batches to keep every worker busy twice over, each between
/// `min_batch_bytes` and `piece_bytes` (large calls are what reach the interconnect's rate;
/// small first batches are what let a kernel start early).
pub fn batch_bytes(total: u64, config: &ServiceConfig) -> u64 {
    let per = total / (2 * config.threads.max(1) as u64);
    per.clamp(
        config.min_batch_bytes.min(config.piece_bytes.max(1)),
        config.piece_bytes.max(1),
    )
}

/// Merges requests that arrive one after the other and touch or overlap in memory, into
/// groups of at most `max_bytes` (a single larger request is a group of its own; arrival
/// order is kept: kernels usually wait on requests in the order they made them). Requests
/// of zero bytes get a group of their own with a zero-length range.
pub fn group(requests: &[Request], max_bytes: u64) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for r in requests {
        if let Some(g) = groups.last_mut() {
            let end = g.range.start + g.range.len;
            let new_end = end.max(r.ptr.saturating_add(r.bytes));
            if r.bytes > 0
                && g.range.len > 0
                && r.ptr >= g.range.start
                && r.ptr <= end
                && new_end - g.range.start <= max_bytes
            {
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
    worker: usize,
    trace: Option<Arc<Trace>>,
}

/// A timeline of what the service did, kept when `LOOKAHEAD_UVM_TRACE` is set and printed
/// to stderr when the service stops: when each group was handed to a worker, how long its
/// prefetch calls took on the host, and when the GPU executed its flag write (a CUDA event
/// recorded right after the write, timed against one recorded at start-up).
struct Trace {
    start: Instant,
    t0: CudaEvent,
    drains: Mutex<Vec<(f64, usize)>>,
    groups: Mutex<Vec<TracedGroup>>,
}

struct TracedGroup {
    worker: usize,
    first_flag: u32,
    requests: usize,
    bytes: u64,
    received_us: f64,
    issued_us: f64,
    flags_done: Option<CudaEvent>,
}

impl Trace {
    fn new(gpu: &Gpu, stream: &CudaStream) -> Option<Arc<Self>> {
        std::env::var_os("LOOKAHEAD_UVM_TRACE")?;
        let t0 = gpu
            .context()
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .ok()?;
        t0.record(stream).ok()?;
        t0.synchronize().ok()?;
        Some(Arc::new(Trace {
            start: Instant::now(),
            t0,
            drains: Mutex::new(Vec::new()),
            groups: Mutex::new(Vec::new()),
        }))
    }

    fn now_us(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1e6
    }

    fn print(&self) {
        let drains = self.drains.lock().unwrap_or_else(|p| p.into_inner());
        let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        groups.sort_by(|a, b| a.received_us.total_cmp(&b.received_us));
        eprintln!(
            "uvm trace: {} drains, {} groups (times in us since the service started)",
            drains.len(),
            groups.len()
        );
        for (t, n) in drains.iter() {
            eprintln!("uvm trace: drain t={t:.0} requests={n}");
        }
        for g in groups.iter() {
            let gpu_us = g
                .flags_done
                .as_ref()
                .and_then(|e| self.t0.elapsed_ms(e).ok())
                .map(|ms| ms as f64 * 1e3);
            eprintln!(
                "uvm trace: worker={} flag={} requests={} bytes={} received={:.0} prefetch_returned={:.0} flags_on_gpu={}",
                g.worker,
                g.first_flag,
                g.requests,
                g.bytes,
                g.received_us,
                g.issued_us,
                gpu_us.map_or("?".to_string(), |t| format!("{t:.0}")),
            );
        }
    }
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
        let received_us = self.trace.as_ref().map_or(0.0, |t| t.now_us());
        // The driver validates the ranges; a bad one (a kernel's bug) fails the call and
        // its requests fall back.
        let ok = group.range.len == 0
            || if config.batch {
                lookahead::prefetch::prefetch_ranges(
                    &self.gpu,
                    &pieces(group.range, config.piece_bytes),
                    to,
                    &self.stream,
                    true,
                )
            } else {
                lookahead::prefetch::prefetch_ranges_unchecked(
                    &pieces(group.range, config.piece_bytes),
                    to,
                    &self.stream,
                )
            }
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
        if let Some(trace) = &self.trace {
            let issued_us = trace.now_us();
            let flags_done = self
                .gpu
                .context()
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .ok()
                .filter(|e| e.record(&self.stream).is_ok());
            trace
                .groups
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(TracedGroup {
                    worker: self.worker,
                    first_flag: group.requests.first().map_or(u32::MAX, |r| r.flag),
                    requests: group.requests.len(),
                    bytes: group.range.len,
                    received_us,
                    issued_us,
                    flags_done,
                });
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

/// The groups waiting for a worker, in the order the poller made them: each idle worker
/// takes the oldest, so the earliest requests are served first and a worker stuck on a
/// large group holds up nothing queued behind it.
#[derive(Default)]
struct WorkQueue {
    state: Mutex<(VecDeque<Group>, bool)>,
    ready: Condvar,
}

impl WorkQueue {
    fn push(&self, groups: impl IntoIterator<Item = Group>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.0.extend(groups);
        self.ready.notify_all();
    }

    /// The next group, or `None` once the queue is closed and empty.
    fn pop(&self) -> Option<Group> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(g) = st.0.pop_front() {
                return Some(g);
            }
            if st.1 {
                return None;
            }
            st = self.ready.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.ready.notify_all();
    }
}

/// A running prefetch service. Start it with [`PrefetchService::start`]; stop it with
/// [`PrefetchService::stop`] (or by dropping it), which processes what is left in the ring.
pub struct PrefetchService {
    stop: Arc<AtomicBool>,
    poller: Option<JoinHandle<()>>,
    stats: Arc<ServiceStats>,
    trace: Option<Arc<Trace>>,
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
        let mut trace = None;
        for worker in 0..config.threads.max(1) {
            let stream = gpu.context().new_stream().map_err(|source| Error::Driver {
                call: "cuStreamCreate",
                source,
            })?;
            if worker == 0 {
                trace = Trace::new(&gpu, &stream);
            }
            executors.push(CudaExecutor {
                gpu: gpu.clone(),
                stream,
                worker,
                trace: trace.clone(),
            });
        }
        let mut service = Self::spawn(ring, config, executors, Some(gpu), trace.clone())?;
        service.trace = trace;
        Ok(service)
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
        Self::spawn(ring, config, executors, None, None)
    }

    fn spawn<E: Executor>(
        ring: Arc<RequestRing>,
        config: ServiceConfig,
        executors: Vec<E>,
        gpu: Option<Gpu>,
        trace: Option<Arc<Trace>>,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(ServiceStats::default());
        let queue = Arc::new(WorkQueue::default());
        let mut workers = Vec::new();
        for (i, mut exec) in executors.into_iter().enumerate() {
            let (ring, stats, gpu, queue) =
                (ring.clone(), stats.clone(), gpu.clone(), queue.clone());
            let handle = std::thread::Builder::new()
                .name(format!("lookahead-uvm-worker-{i}"))
                .spawn(move || {
                    if let Some(gpu) = &gpu {
                        let _ = gpu.bind_to_thread();
                    }
                    while let Some(group) = queue.pop() {
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
            workers.push(handle);
        }
        let (stop2, stats2) = (stop.clone(), stats.clone());
        let poller = std::thread::Builder::new()
            .name("lookahead-uvm-poller".into())
            .spawn(move || poll_loop(ring, config, queue, workers, stop2, stats2, trace))
            .map_err(spawn_error)?;
        Ok(PrefetchService {
            stop,
            poller: Some(poller),
            stats,
            trace: None,
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
        if let Some(t) = self.trace.take() {
            t.print();
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
    queue: Arc<WorkQueue>,
    workers: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    stats: Arc<ServiceStats>,
    trace: Option<Arc<Trace>>,
) {
    let mut last_request = std::time::Instant::now();
    loop {
        // Read the stop flag before draining, so requests published before `stop()` are
        // always handed out by the final pass.
        let stopping = stop.load(Ordering::Acquire);
        let requests = ring.drain(config.max_drain.max(1));
        if requests.is_empty() {
            if stopping {
                break;
            }
            if last_request.elapsed() < config.spin {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(config.poll_interval);
            }
            continue;
        }
        last_request = std::time::Instant::now();
        if let Some(t) = &trace {
            let now = t.now_us();
            t.drains
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((now, requests.len()));
        }
        stats
            .requests
            .fetch_add(requests.len() as u64, Ordering::AcqRel);
        stats.bytes.fetch_add(
            requests.iter().map(|r| r.bytes).sum::<u64>(),
            Ordering::AcqRel,
        );
        let total = requests.iter().map(|r| r.bytes).sum::<u64>();
        queue.push(group(&requests, batch_bytes(total, &config)));
    }
    queue.close();
    for w in workers {
        let _ = w.join();
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
        let g = group(
            &[
                req(0, 0, 100),
                req(1, 100, 50),
                req(2, 120, 10), // overlaps the group
                req(3, 1000, 10),
                req(4, 0, 10), // before the previous group: new group
            ],
            u64::MAX,
        );
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
        let g = group(&[req(0, 0, 0), req(1, 0, 8), req(2, 8, 0)], u64::MAX);
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn groups_stop_at_the_batch_size_between_requests() {
        // Ten adjacent 3-byte requests in batches of at most 7 bytes: pairs of requests.
        let rs: Vec<Request> = (0..10).map(|i| req(i, i as u64 * 3, 3)).collect();
        let g = group(&rs, 7);
        assert_eq!(g.len(), 5);
        for (k, grp) in g.iter().enumerate() {
            assert_eq!(
                grp.range,
                ByteRange {
                    start: 6 * k as u64,
                    len: 6
                }
            );
            assert_eq!(grp.requests.len(), 2);
        }
        // A request larger than the batch is a group of its own, never split here.
        let g = group(&[req(0, 0, 4), req(1, 4, 100), req(2, 104, 4)], 7);
        assert_eq!(
            g.iter().map(|g| g.requests.len()).collect::<Vec<_>>(),
            [1, 1, 1]
        );
    }

    #[test]
    fn batches_keep_every_worker_busy_within_bounds() {
        let c = ServiceConfig {
            threads: 16,
            piece_bytes: 32 << 20,
            min_batch_bytes: 2 << 20,
            ..ServiceConfig::default()
        };
        // The default measured best on the H100 (results/ivf_bench.md's service settings).
        assert_eq!(ServiceConfig::default().min_batch_bytes, 8 << 20);
        assert_eq!(batch_bytes(4 << 30, &c), 32 << 20); // capped
        assert_eq!(batch_bytes(256 << 20, &c), 8 << 20); // 32 batches for 16 workers
        assert_eq!(batch_bytes(1 << 20, &c), 2 << 20); // floor
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
