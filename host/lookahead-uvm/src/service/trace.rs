//! The service's optional timeline (`LOOKAHEAD_UVM_TRACE`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{sys, CudaEvent, CudaStream};
use lookahead::Gpu;

/// A timeline of what the service did, kept when `LOOKAHEAD_UVM_TRACE` is set and printed
/// to stderr when the service stops: when each group was handed to a worker, how long its
/// prefetch calls took on the host, and when the GPU executed its flag write (a CUDA event
/// recorded right after the write, timed against one recorded at start-up).
pub(super) struct Trace {
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
    /// A trace when `LOOKAHEAD_UVM_TRACE` is set, timed from an event recorded on `stream`.
    pub(super) fn new(gpu: &Gpu, stream: &CudaStream) -> Option<Arc<Self>> {
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

    /// Notes a drain of `requests` requests.
    pub(super) fn drained(&self, requests: usize) {
        let now = self.now_us();
        lock(&self.drains).push((now, requests));
    }

    /// Notes a group that worker `worker` received at `received_us` and has just issued on
    /// `stream` (an event recorded now marks when the GPU gets to its flag writes).
    pub(super) fn group_issued(
        &self,
        worker: usize,
        group: &super::group::Group,
        received_us: f64,
        stream: &CudaStream,
    ) {
        let issued_us = self.now_us();
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let flags_done =
            (stream.context().new_event(flags).ok()).filter(|e| e.record(stream).is_ok());
        lock(&self.groups).push(TracedGroup {
            worker,
            first_flag: group.requests.first().map_or(u32::MAX, |r| r.flag),
            requests: group.requests.len(),
            bytes: group.range.len,
            received_us,
            issued_us,
            flags_done,
        });
    }

    /// Microseconds since the service started.
    pub(super) fn now_us(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1e6
    }

    /// Prints the timeline to stderr.
    pub(super) fn print(&self) {
        let drains = lock(&self.drains);
        let mut groups = lock(&self.groups);
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
                "uvm trace: worker={} flag={} requests={} bytes={} received={:.0} \
                 prefetch_returned={:.0} flags_on_gpu={}",
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
