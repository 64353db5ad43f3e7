//! [`Emulator`]: runs a grid of blocks on host threads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::block::{run_block, Failure, StackPool};
use crate::error::EmuError;
use crate::thread::LaunchCtx;
use crate::trace::PrefetchRecord;

/// A CPU "device" that runs kernels with GPU semantics (see the crate docs). Cheap to
/// clone: clones share the configuration and the prefetch trace.
///
/// ```
/// let emu = lookahead_emu::Emulator::new().workers(2).prefetch_trace(true);
/// assert_eq!(emu.worker_count(), 2);
/// ```
#[derive(Clone)]
pub struct Emulator {
    inner: Arc<Inner>,
}

struct Inner {
    workers: usize,
    stack_size: usize,
    race_check: bool,
    trace_on: bool,
    trace: Mutex<Vec<PrefetchRecord>>,
    pools: Mutex<Vec<StackPool>>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("workers", &self.inner.workers)
            .field("stack_size", &self.inner.stack_size)
            .field("race_detection", &self.inner.race_check)
            .field("prefetch_trace", &self.inner.trace_on)
            .finish()
    }
}

impl Default for Emulator {
    fn default() -> Self {
        Self::new()
    }
}

/// Default coroutine stack per emulated thread: kernel bodies are small, but debug builds
/// keep every local on the stack.
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

impl Emulator {
    /// An emulator using every host core, with race detection on and no prefetch trace.
    pub fn new() -> Self {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        Emulator::build(workers, DEFAULT_STACK_SIZE, true, false)
    }

    fn build(workers: usize, stack_size: usize, race_check: bool, trace_on: bool) -> Self {
        Emulator {
            inner: Arc::new(Inner {
                workers: workers.max(1),
                stack_size,
                race_check,
                trace_on,
                trace: Mutex::new(Vec::new()),
                pools: Mutex::new(Vec::new()),
            }),
        }
    }

    fn with(&self, f: impl FnOnce(&mut (usize, usize, bool, bool))) -> Self {
        let i = &self.inner;
        let mut c = (i.workers, i.stack_size, i.race_check, i.trace_on);
        f(&mut c);
        Emulator::build(c.0, c.1, c.2, c.3)
    }

    /// Runs blocks on `n` host threads (1: every block on the launching thread, in order).
    pub fn workers(self, n: usize) -> Self {
        self.with(|c| c.0 = n.max(1))
    }

    /// Stack size of each emulated GPU thread (default [`DEFAULT_STACK_SIZE`]).
    pub fn stack_size(self, bytes: usize) -> Self {
        self.with(|c| c.1 = bytes)
    }

    /// Turns shared-memory race detection on or off (on by default).
    pub fn race_detection(self, on: bool) -> Self {
        self.with(|c| c.2 = on)
    }

    /// Records every prefetch instruction of later launches (see [`Emulator::take_prefetch_trace`]).
    pub fn prefetch_trace(self, on: bool) -> Self {
        self.with(|c| c.3 = on)
    }

    /// Host threads blocks run on.
    pub fn worker_count(&self) -> usize {
        self.inner.workers
    }

    /// The prefetches recorded since the last call, ordered by block (linear index), then by
    /// issue order within the block.
    pub fn take_prefetch_trace(&self) -> Vec<PrefetchRecord> {
        std::mem::take(&mut *self.inner.trace.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Runs `entry` once per thread of a `grid_dim` x `block_dim` grid and returns when every
    /// thread has returned. A deadlock or data race is an `Err`; a panicking kernel thread
    /// panics here with the kernel, block and thread named. `#[kernel]` launchers call this;
    /// `entry` reads its coordinates through the `lookahead_device` intrinsics.
    pub fn run(
        &self,
        kernel: &'static str,
        grid_dim: [u32; 3],
        block_dim: [u32; 3],
        entry: &(dyn Fn() + Sync),
    ) -> Result<(), EmuError> {
        let blocks = grid_dim.iter().map(|&d| d as u64).product::<u64>();
        if blocks == 0 || block_dim.contains(&0) {
            return Ok(());
        }
        let launch = LaunchCtx {
            kernel,
            grid_dim,
            block_dim,
            race_check: self.inner.race_check,
            trace: self.inner.trace_on,
            abort: AtomicBool::new(false),
        };
        let next = AtomicU64::new(0);
        // (block linear index, its failure or its prefetch records)
        type Outcome = (u64, Result<Vec<PrefetchRecord>, Failure>);
        let outcomes: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
        let worker = |pool: &mut StackPool| loop {
            if launch.abort.load(Ordering::Relaxed) {
                break;
            }
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= blocks {
                break;
            }
            let (gx, gy) = (grid_dim[0] as u64, grid_dim[1] as u64);
            let idx = [
                (b % gx) as u32,
                (b / gx % gy) as u32,
                (b / (gx * gy)) as u32,
            ];
            let r = run_block(&launch, idx, entry, pool);
            if r.is_err() {
                launch.abort.store(true, Ordering::Relaxed);
            }
            if r.is_err() || self.inner.trace_on {
                outcomes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((b, r));
            }
        };
        let workers = (self.inner.workers as u64).min(blocks) as usize;
        let mut pools =
            std::mem::take(&mut *self.inner.pools.lock().unwrap_or_else(|p| p.into_inner()));
        pools.resize_with(workers.max(pools.len()), || {
            StackPool::new(self.inner.stack_size)
        });
        if workers == 1 {
            worker(&mut pools[0]);
        } else {
            std::thread::scope(|s| {
                for pool in pools.iter_mut().take(workers) {
                    s.spawn(|| worker(pool));
                }
            });
        }
        *self.inner.pools.lock().unwrap_or_else(|p| p.into_inner()) = pools;

        let mut outcomes = outcomes.into_inner().unwrap_or_else(|p| p.into_inner());
        outcomes.sort_by_key(|(b, _)| *b);
        let mut records = Vec::new();
        for (_, r) in outcomes {
            match r {
                Ok(rs) => records.extend(rs),
                Err(Failure::Error(e)) => return Err(*e),
                Err(Failure::Panic(msg)) => panic!("{msg}"),
            }
        }
        if self.inner.trace_on {
            self.inner
                .trace
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(records);
        }
        Ok(())
    }
}
