//! The host prefetch service: drains a [`RequestRing`], groups adjacent requests, and has the
//! threads of a [`PrefetchPool`] prefetch each group on their own streams and mark its
//! requests ready on the same stream right after the data, so kernels waiting on a flag
//! never see it early. The pool may be shared with a [`lookahead::PrefetchEngine`].

mod group;
mod trace;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use lookahead::launch::{GpuMemory, HostMemory, TargetMemory};
use lookahead::prefetch::{PrefetchPool, Worker};
use lookahead::{DriverContext, Error, Location, Result};
use lookahead_device::uvm::requests::FALLBACK_BIT;

pub use group::{batch_bytes, group, pieces, Group};
use trace::Trace;

use crate::ring::{Request, RequestRing};

/// How a [`PrefetchService`] works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceConfig {
    /// Threads of the pool the service starts for itself ([`PrefetchService::start`]), each
    /// with its own stream; a service on a given pool uses that pool's.
    pub threads: usize,
    /// Largest prefetch call, in bytes; a longer group of adjacent requests is cut.
    pub piece_bytes: u64,
    /// Issue a group's pieces with one `cuMemPrefetchBatchAsync` (CUDA 12.8+).
    pub batch: bool,
    /// How long the poller sleeps when the ring is empty (after `spin`).
    pub poll_interval: Duration,
    /// How long the poller keeps checking the ring without sleeping after it last found a
    /// request: a kernel's requests come in bursts, and a sleeping poller adds the
    /// operating system's wake-up latency (tens of microseconds) to each.
    pub spin: Duration,
    /// Smallest batch of adjacent requests handed to one thread, in bytes (see
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
struct ServiceStats {
    requests: AtomicU64,
    bytes: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
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

    fn drained(&self, requests: &[Request]) {
        let bytes = requests.iter().map(|r| r.bytes).sum::<u64>();
        self.requests
            .fetch_add(requests.len() as u64, Ordering::AcqRel);
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    fn done(&self, group: &Group, ok: bool) {
        let n = group.requests.len() as u64;
        self.completed.fetch_add(n, Ordering::AcqRel);
        if !ok {
            self.failed.fetch_add(n, Ordering::AcqRel);
        }
    }
}

/// Groups handed to the pool and not finished yet.
#[derive(Default)]
struct Outstanding {
    count: Mutex<usize>,
    zero: Condvar,
}

impl Outstanding {
    fn add(&self) {
        *self.count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    }
    fn done(&self) {
        let mut c = self.count.lock().unwrap_or_else(|p| p.into_inner());
        *c -= 1;
        if *c == 0 {
            self.zero.notify_all();
        }
    }
    fn wait(&self) {
        let mut c = self.count.lock().unwrap_or_else(|p| p.into_inner());
        while *c > 0 {
            c = self.zero.wait(c).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A running prefetch service. Start it with [`PrefetchService::start`] (or
/// [`PrefetchService::start_with_pool`]); stop it with [`PrefetchService::stop`] (or by
/// dropping it), which first serves what is left in the ring.
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
    /// Starts the service on a GPU ring, with a pool of `config.threads` threads of its own.
    pub fn start(ring: Arc<RequestRing<GpuMemory>>, config: ServiceConfig) -> Result<Self> {
        let pool = Arc::new(PrefetchPool::new(ring.gpu(), config.threads)?);
        Self::start_with_pool(ring, pool, config)
    }

    /// Starts the service on a GPU ring, prefetching from `pool`'s threads (which a
    /// [`lookahead::PrefetchEngine`] may share).
    pub fn start_with_pool(
        ring: Arc<RequestRing<GpuMemory>>,
        pool: Arc<PrefetchPool>,
        config: ServiceConfig,
    ) -> Result<Self> {
        let gpu = ring.gpu().clone();
        let stream = gpu.context().new_stream().during("cuStreamCreate")?;
        let trace = Trace::new(&gpu, &stream);
        let (stats, outstanding) = (
            Arc::new(ServiceStats::default()),
            Arc::<Outstanding>::default(),
        );
        let (s, o, t) = (stats.clone(), outstanding.clone(), trace.clone());
        let to = Location::Device(gpu.ordinal());
        let dispatch = move |ring: &Arc<RequestRing<GpuMemory>>, group: Group| {
            let (ring, stats, outstanding, trace) = (ring.clone(), s.clone(), o.clone(), t.clone());
            let received_us = trace.as_ref().map_or(0.0, |t| t.now_us());
            outstanding.add();
            pool.submit(move |w| {
                let ok = prefetch_and_mark(w, &ring, &group, to, &config);
                if let Some(t) = &trace {
                    t.group_issued(w.index(), &group, received_us, w.stream());
                }
                stats.done(&group, ok);
                outstanding.done();
            });
        };
        let finish = move || {
            outstanding.wait();
            // The flag writes are queued on the pool's streams: let them execute.
            let _ = gpu.context().synchronize();
        };
        let mut service = Self::spawn(ring, config, stats, trace.clone(), dispatch, finish)?;
        service.trace = trace;
        Ok(service)
    }

    /// Starts the service on a host ring ([`RequestRing::in_host_memory`]): the poller marks
    /// each group ready itself, after `delay` (a stand-in for a slow host), with nothing to
    /// prefetch. Tests producers and the protocol without a GPU.
    pub fn start_on_host(
        ring: Arc<RequestRing<HostMemory>>,
        config: ServiceConfig,
        delay: Duration,
    ) -> Result<Self> {
        let stats = Arc::new(ServiceStats::default());
        let s = stats.clone();
        let dispatch = move |ring: &Arc<RequestRing<HostMemory>>, group: Group| {
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            for r in &group.requests {
                ring.mark_host(r, false);
            }
            s.done(&group, true);
        };
        Self::spawn(ring, config, stats, None, dispatch, || {})
    }

    fn spawn<M: TargetMemory>(
        ring: Arc<RequestRing<M>>,
        config: ServiceConfig,
        stats: Arc<ServiceStats>,
        trace: Option<Arc<Trace>>,
        dispatch: impl FnMut(&Arc<RequestRing<M>>, Group) + Send + 'static,
        finish: impl FnOnce() + Send + 'static,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let poller = Poller {
            ring,
            config,
            stop: stop.clone(),
            stats: stats.clone(),
            trace,
        };
        let poller = std::thread::Builder::new()
            .name("lookahead-uvm-poller".into())
            .spawn(move || {
                poller.run(dispatch);
                finish();
            })
            .map_err(|source| Error::Io {
                what: "spawning the prefetch service's poller".into(),
                source,
            })?;
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

    /// Stops the service after handing out what is still in the ring, waits until every
    /// group handed out is done (flags written), and returns the final counters.
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

/// Prefetches `group` on the worker's stream, then writes its requests' flags on the same
/// stream (fallen back when the prefetch failed). Returns whether all went well.
fn prefetch_and_mark(
    w: &Worker<'_>,
    ring: &RequestRing<GpuMemory>,
    group: &Group,
    to: Location,
    config: &ServiceConfig,
) -> bool {
    let stream = w.stream();
    // The driver validates the ranges; a bad one (a kernel's bug) fails the call and its
    // requests fall back.
    let ok = group.range.len == 0 || {
        let pieces = pieces(group.range, config.piece_bytes);
        let issued = if config.batch {
            lookahead::prefetch::prefetch_ranges(w.gpu(), &pieces, to, stream, true)
        } else {
            lookahead::prefetch::prefetch_ranges_unchecked(&pieces, to, stream)
        };
        issued.is_ok()
    };
    let mut written = true;
    for r in &group.requests {
        let value = if ok {
            r.generation
        } else {
            r.generation | FALLBACK_BIT
        };
        written &= write_flag(stream, ring, r, value).is_ok();
    }
    ok && written
}

fn write_flag(
    stream: &cudarc::driver::CudaStream,
    ring: &RequestRing<GpuMemory>,
    r: &Request,
    value: u32,
) -> Result<()> {
    if r.flag >= ring.num_flags() {
        return Ok(());
    }
    // SAFETY: the flag address lies in the ring's device allocation, alive while the service
    // holds the ring; the write is ordered after earlier work on this stream.
    unsafe {
        sys::cuStreamWriteValue32_v2(
            stream.cu_stream(),
            ring.ready_flag_address(r.flag),
            value,
            0,
        )
    }
    .result()
    .during("cuStreamWriteValue32")
}

/// The poller: drains the ring, groups what it finds and hands the groups on.
struct Poller<M: TargetMemory> {
    ring: Arc<RequestRing<M>>,
    config: ServiceConfig,
    stop: Arc<AtomicBool>,
    stats: Arc<ServiceStats>,
    trace: Option<Arc<Trace>>,
}

impl<M: TargetMemory> Poller<M> {
    fn run(self, mut dispatch: impl FnMut(&Arc<RequestRing<M>>, Group)) {
        let mut last_request = Instant::now();
        loop {
            // Read the stop flag before draining, so requests published before `stop()` are
            // always handed out by the final pass.
            let stopping = self.stop.load(Ordering::Acquire);
            let requests = self.ring.drain(self.config.max_drain.max(1));
            if requests.is_empty() {
                if stopping {
                    return;
                }
                if last_request.elapsed() < self.config.spin {
                    std::hint::spin_loop();
                } else {
                    std::thread::sleep(self.config.poll_interval);
                }
                continue;
            }
            last_request = Instant::now();
            if let Some(t) = &self.trace {
                t.drained(requests.len());
            }
            self.stats.drained(&requests);
            let total = requests.iter().map(|r| r.bytes).sum::<u64>();
            for g in group(&requests, batch_bytes(total, &self.config)) {
                dispatch(&self.ring, g);
            }
        }
    }
}
