//! A pool of host threads, each with its own CUDA stream, that run prefetch jobs from one
//! first-in, first-out queue: the engine's shares of a prefetch and the request service's
//! groups of GPU-driven requests run on the same threads when they share a pool.
//!
//! Why threads at all: the driver does most of a managed-memory prefetch's work inside the
//! issuing call (about 80-120 us of host time per call, H100, driver 580.159.04), so
//! scattered ranges reach the interconnect's rate only with many calls in flight at once.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use cudarc::driver::CudaStream;

use crate::error::{DriverContext, Error, Result};
use crate::gpu::Gpu;

/// What a job runs with: the pool's GPU (current on the thread) and the thread's own stream.
#[derive(Debug)]
pub struct Worker<'a> {
    gpu: &'a Gpu,
    stream: &'a Arc<CudaStream>,
    index: usize,
}

impl<'a> Worker<'a> {
    /// The GPU; its context is current on this thread.
    pub fn gpu(&self) -> &'a Gpu {
        self.gpu
    }
    /// This thread's stream: what a job queues stays in order on it.
    pub fn stream(&self) -> &'a Arc<CudaStream> {
        self.stream
    }
    /// The thread's number in the pool, from 0.
    pub fn index(&self) -> usize {
        self.index
    }
}

type Job = Box<dyn FnOnce(&Worker<'_>) + Send>;

#[derive(Default)]
struct Queue {
    state: Mutex<(VecDeque<Job>, bool)>,
    ready: Condvar,
}

impl Queue {
    /// The next job, or `None` once the queue is closed and empty.
    fn pop(&self) -> Option<Job> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(j) = st.0.pop_front() {
                return Some(j);
            }
            if st.1 {
                return None;
            }
            st = self.ready.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Host threads with a stream each, taking jobs in submission order. Dropping the pool runs
/// the jobs still queued, then joins the threads.
pub struct PrefetchPool {
    gpu: Gpu,
    queue: Arc<Queue>,
    handles: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for PrefetchPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefetchPool")
            .field("threads", &self.handles.len())
            .finish()
    }
}

impl PrefetchPool {
    /// Starts `threads` threads (at least 1) on `gpu`, each with a new stream.
    pub fn new(gpu: &Gpu, threads: usize) -> Result<Self> {
        let queue = Arc::new(Queue::default());
        let mut handles = Vec::new();
        for index in 0..threads.max(1) {
            let stream = gpu.context().new_stream().during("cuStreamCreate")?;
            let (gpu, queue) = (gpu.clone(), queue.clone());
            let handle = std::thread::Builder::new()
                .name(format!("lookahead-prefetch-{index}"))
                .spawn(move || work(&gpu, &stream, index, &queue))
                .map_err(|source| Error::Io {
                    what: "spawning a prefetch thread".into(),
                    source,
                })?;
            handles.push(handle);
        }
        Ok(PrefetchPool {
            gpu: gpu.clone(),
            queue,
            handles,
        })
    }

    /// The GPU the threads work for.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Number of threads.
    pub fn threads(&self) -> usize {
        self.handles.len()
    }

    /// Queues `job`; the first idle thread runs it.
    pub fn submit(&self, job: impl FnOnce(&Worker<'_>) + Send + 'static) {
        let mut st = self.queue.state.lock().unwrap_or_else(|p| p.into_inner());
        st.0.push_back(Box::new(job));
        self.queue.ready.notify_one();
    }
}

fn work(gpu: &Gpu, stream: &Arc<CudaStream>, index: usize, queue: &Queue) {
    // A failure here shows in the jobs' own driver calls, which report it.
    let _ = gpu.bind_to_thread();
    let worker = Worker { gpu, stream, index };
    while let Some(job) = queue.pop() {
        job(&worker);
    }
    let _ = stream.synchronize();
}

impl Drop for PrefetchPool {
    fn drop(&mut self) {
        self.queue.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.queue.ready.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
