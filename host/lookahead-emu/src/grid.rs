//! [`Emulator`]: runs a grid of blocks on host threads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::block::{run_block, Failure, StackPool};
use crate::copies::Landing;
use crate::error::EmuError;
use crate::thread::LaunchCtx;
use crate::trace::PrefetchRecord;
use crate::watchdog::WorkerSlot;

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
    config: Config,
    trace: Mutex<Vec<PrefetchRecord>>,
    pools: Mutex<Vec<StackPool>>,
}

/// What the builder methods set.
#[derive(Debug, Clone, Copy)]
struct Config {
    workers: usize,
    stack_size: usize,
    race_check: bool,
    trace_on: bool,
    watchdog: Duration,
    landing: Landing,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.inner.config;
        f.debug_struct("Emulator")
            .field("workers", &c.workers)
            .field("stack_size", &c.stack_size)
            .field("race_detection", &c.race_check)
            .field("prefetch_trace", &c.trace_on)
            .field("watchdog", &c.watchdog)
            .field("async_copy_landing", &c.landing)
            .finish()
    }
}

impl Default for Emulator {
    fn default() -> Self {
        Self::new()
    }
}

/// Default stack per emulated GPU thread: a GPU thread may have up to 512 KiB of local
/// memory (large local arrays), and debug builds keep every local on the stack. Stacks are
/// mapped lazily, so only the pages a thread touches cost memory.
pub const DEFAULT_STACK_SIZE: usize = 1024 * 1024;

/// The least stack per emulated GPU thread a launch accepts. A thread's stack also holds the
/// emulator's own frames, and debug builds keep every local of a kernel on it, so a stack
/// of a few pages (or none) would overflow in almost any kernel.
pub const MIN_STACK_SIZE: usize = 64 * 1024;

/// Default time a block may go without progress (no thread returning, no barrier or warp
/// operation passing) before the launch is reported as hanging; `LOOKAHEAD_EMU_WATCHDOG_S`
/// sets another.
pub const DEFAULT_WATCHDOG: Duration = Duration::from_secs(60);

impl Emulator {
    /// An emulator using every host core, with its checks on (races, uninitialised shared
    /// memory, barrier divergence, the watchdog) and no prefetch trace.
    pub fn new() -> Self {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let watchdog = std::env::var("LOOKAHEAD_EMU_WATCHDOG_S")
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| *s > 0.0)
            .map_or(DEFAULT_WATCHDOG, Duration::from_secs_f64);
        Emulator::build(Config {
            workers,
            stack_size: DEFAULT_STACK_SIZE,
            race_check: true,
            trace_on: false,
            watchdog,
            landing: Landing::AtWait,
        })
    }

    fn build(config: Config) -> Self {
        Emulator {
            inner: Arc::new(Inner {
                config: Config {
                    workers: config.workers.max(1),
                    ..config
                },
                trace: Mutex::new(Vec::new()),
                pools: Mutex::new(Vec::new()),
            }),
        }
    }

    fn with(&self, f: impl FnOnce(&mut Config)) -> Self {
        let mut c = self.inner.config;
        f(&mut c);
        Emulator::build(c)
    }

    /// Runs blocks on `n` host threads (1: every block on the launching thread, in order).
    pub fn workers(self, n: usize) -> Self {
        self.with(|c| c.workers = n.max(1))
    }

    /// Stack size of each emulated GPU thread (default [`DEFAULT_STACK_SIZE`]). A thread that
    /// overflows it ends the process with a message naming the kernel, block and thread; a
    /// launch with less than [`MIN_STACK_SIZE`] is refused ([`EmuError::StackTooSmall`]).
    pub fn stack_size(self, bytes: usize) -> Self {
        self.with(|c| c.stack_size = bytes)
    }

    /// Turns the memory checks on or off (on by default): data races on shared memory and
    /// plain read-modify-writes of global memory, and reads of shared memory nothing wrote.
    pub fn race_detection(self, on: bool) -> Self {
        self.with(|c| c.race_check = on)
    }

    /// Records every prefetch instruction of later launches (see
    /// [`Emulator::take_prefetch_trace`]).
    pub fn prefetch_trace(self, on: bool) -> Self {
        self.with(|c| c.trace_on = on)
    }

    /// How long a block may go without progress before its launch is reported as hanging
    /// (default [`DEFAULT_WATCHDOG`]): an [`EmuError::Hang`] when its threads spin through
    /// ordered loads, atomics or `nanosleep`, the end of the process with a message when they
    /// spin without any.
    pub fn watchdog(self, time: Duration) -> Self {
        self.with(|c| c.watchdog = time)
    }

    /// When the bytes of asynchronous copies (`cp.async`, bulk copies) land in shared
    /// memory: at their wait ([`Landing::AtWait`], the default), or at a random point
    /// between issue and wait ([`Landing::Early`], seeded), which shakes out kernels whose
    /// results depend on the order (reading a stage is checked either way).
    pub fn async_copy_landing(self, landing: Landing) -> Self {
        self.with(|c| c.landing = landing)
    }

    /// Host threads blocks run on.
    pub fn worker_count(&self) -> usize {
        self.inner.config.workers
    }

    /// The prefetches recorded since the last call, ordered by block (linear index), then by
    /// issue order within the block.
    pub fn take_prefetch_trace(&self) -> Vec<PrefetchRecord> {
        std::mem::take(&mut *self.inner.trace.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Runs `entry` once per thread of a `grid_dim` x `block_dim` grid and returns when every
    /// thread has returned. A deadlock, data race, barrier divergence, uninitialised read or
    /// hang is an `Err`; a panicking kernel thread panics here with the kernel, block and
    /// thread named. `#[kernel]` launchers call this; `entry` reads its coordinates through
    /// the `lookahead_device` intrinsics.
    // The report is large (a deadlock lists who waits at each kind of barrier); launches
    // return it once, and `lookahead::Error::Emulator` boxes it.
    #[allow(clippy::result_large_err)]
    pub fn run(
        &self,
        kernel: &'static str,
        grid_dim: [u32; 3],
        block_dim: [u32; 3],
        entry: &(dyn Fn() + Sync),
    ) -> Result<(), EmuError> {
        self.run_with_dynamic_shared(kernel, grid_dim, block_dim, 0, entry)
    }

    /// [`Emulator::run`] with `dynamic_shared` bytes of dynamic shared memory per block
    /// (what `LaunchConfig::with_shared_mem` asks of the GPU).
    #[allow(clippy::result_large_err)]
    pub fn run_with_dynamic_shared(
        &self,
        kernel: &'static str,
        grid_dim: [u32; 3],
        block_dim: [u32; 3],
        dynamic_shared: usize,
        entry: &(dyn Fn() + Sync),
    ) -> Result<(), EmuError> {
        let bytes = self.inner.config.stack_size;
        if bytes < MIN_STACK_SIZE {
            return Err(EmuError::StackTooSmall {
                kernel,
                bytes,
                min: MIN_STACK_SIZE,
            });
        }
        let blocks = grid_dim.iter().map(|&d| d as u64).product::<u64>();
        if blocks == 0 || block_dim.contains(&0) {
            return Ok(());
        }
        let config = self.inner.config;
        crate::fault::install();
        let workers = (config.workers as u64).min(blocks) as usize;
        let launch = Arc::new(LaunchCtx {
            kernel,
            grid_dim,
            block_dim,
            race_check: config.race_check,
            trace: config.trace_on,
            landing: config.landing,
            abort: AtomicBool::new(false),
            watchdog: config.watchdog,
            progress: AtomicU64::new(0),
            slots: (0..workers).map(|_| WorkerSlot::default()).collect(),
            stack_size: config.stack_size,
            dynamic_shared,
        });
        let watched = crate::watchdog::watch(&launch);
        let outcomes = self.run_blocks(&launch, blocks, entry);
        drop(watched);
        self.collect(outcomes)
    }

    /// Runs the blocks on the workers; returns the failures and, with the trace on, every
    /// block's prefetch records.
    fn run_blocks(
        &self,
        launch: &LaunchCtx,
        blocks: u64,
        entry: &(dyn Fn() + Sync),
    ) -> Vec<Outcome> {
        let config = self.inner.config;
        let next = AtomicU64::new(0);
        let outcomes: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
        let worker = |slot: &WorkerSlot, pool: &mut StackPool| loop {
            if launch.abort.load(Ordering::Relaxed) {
                break;
            }
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= blocks {
                break;
            }
            let (gx, gy) = (launch.grid_dim[0] as u64, launch.grid_dim[1] as u64);
            let idx = [
                (b % gx) as u32,
                (b / gx % gy) as u32,
                (b / (gx * gy)) as u32,
            ];
            slot.block.store(b + 1, Ordering::Relaxed);
            let r = run_block(launch, idx, entry, pool, slot);
            slot.block.store(0, Ordering::Relaxed);
            if r.is_err() {
                launch.abort.store(true, Ordering::Relaxed);
            }
            if r.is_err() || config.trace_on {
                let mut o = outcomes.lock().unwrap_or_else(|p| p.into_inner());
                o.push((b, r));
            }
        };
        let workers = launch.slots.len();
        let mut pools =
            std::mem::take(&mut *self.inner.pools.lock().unwrap_or_else(|p| p.into_inner()));
        pools.resize_with(workers.max(pools.len()), || {
            StackPool::new(config.stack_size)
        });
        if workers == 1 {
            worker(&launch.slots[0], &mut pools[0]);
        } else {
            std::thread::scope(|s| {
                for (pool, slot) in pools.iter_mut().zip(&launch.slots) {
                    s.spawn(|| worker(slot, pool));
                }
            });
        }
        *self.inner.pools.lock().unwrap_or_else(|p| p.into_inner()) = pools;
        outcomes.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    /// The launch's result from its blocks' outcomes, in block order; keeps the trace.
    #[allow(clippy::result_large_err)]
    fn collect(&self, mut outcomes: Vec<Outcome>) -> Result<(), EmuError> {
        outcomes.sort_by_key(|(b, _)| *b);
        let mut records = Vec::new();
        for (_, r) in outcomes {
            match r {
                Ok(rs) => records.extend(rs),
                Err(Failure::Error(e)) => return Err(*e),
                Err(Failure::Panic(msg)) => panic!("{msg}"),
            }
        }
        if self.inner.config.trace_on {
            self.inner
                .trace
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(records);
        }
        Ok(())
    }
}

/// A block's linear index and its failure or prefetch records.
type Outcome = (u64, Result<Vec<PrefetchRecord>, Failure>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_too_small_to_run_a_thread_is_refused() {
        // Boxed as `lookahead::Error::Emulator` boxes it: the report is large.
        let run = |bytes| {
            Emulator::new()
                .stack_size(bytes)
                .run("k", [2, 1, 1], [32, 1, 1], &|| {})
                .map_err(Box::new)
        };
        let e = run(0).unwrap_err();
        assert!(
            matches!(
                *e,
                EmuError::StackTooSmall {
                    bytes: 0,
                    min: MIN_STACK_SIZE,
                    ..
                }
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("kernel `k` not run")
                && text.contains("is 0 bytes (`Emulator::stack_size`)")
                && text.contains(&format!("the {MIN_STACK_SIZE} bytes")),
            "{text}"
        );
        assert!(run(MIN_STACK_SIZE - 1).is_err());
        run(MIN_STACK_SIZE).unwrap();
    }
}
