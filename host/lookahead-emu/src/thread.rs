//! The state one emulated GPU thread, its block and its launch share, and how a running
//! kernel body finds it: a thread-local pointer the block scheduler sets before resuming
//! each thread's coroutine.

use std::cell::{Cell, RefCell};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

use corosensei::Yielder;

use crate::copies::AsyncCopies;
use crate::shared::SharedMemory;
use crate::trace::PrefetchRecord;
use crate::warp::WarpOp;

/// Why a thread's coroutine handed control back to the block scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// At `sync_threads`.
    Barrier,
    /// At a warp shuffle or vote (the operation is in `ThreadCtx::warp_op`).
    Warp,
    /// At `nanosleep`: runnable again at once, after the others had a turn.
    Sleep,
    /// Waiting for an mbarrier phase (the barrier and parity are in
    /// `ThreadCtx::mbarrier_wait`).
    MBarrier,
}

/// What every block of a launch shares (read from several host threads).
pub(crate) struct LaunchCtx {
    pub kernel: &'static str,
    pub grid_dim: [u32; 3],
    pub block_dim: [u32; 3],
    pub race_check: bool,
    pub trace: bool,
    /// When asynchronous copies land.
    pub landing: crate::copies::Landing,
    /// Set when a block failed: the other workers stop taking blocks.
    pub abort: AtomicBool,
    /// How long a block may go without progress before it is reported as hanging.
    pub watchdog: Duration,
    /// Bumped at every sign of life (a thread returning, a barrier, a warp operation, a
    /// spin-wait's load): the process-wide watchdog ends a launch whose count stops.
    pub progress: AtomicU64,
    /// What each host thread of the launch is running, for the watchdog's message.
    pub slots: Vec<crate::watchdog::WorkerSlot>,
    /// Bytes of stack per emulated thread, for the stack-overflow report.
    pub stack_size: usize,
    /// Bytes of dynamic shared memory per block.
    pub dynamic_shared: usize,
}

/// One block's state; lives on the stack of the host thread that runs the block.
pub(crate) struct BlockCtx<'l> {
    pub launch: &'l LaunchCtx,
    pub block_idx: [u32; 3],
    /// Barrier generation: bumped each time the whole block passes `sync_threads`.
    pub epoch: Cell<u64>,
    /// Per warp, how many `warp::sync` barriers its lanes have passed together: accesses of
    /// one warp's lanes to shared memory with one of these between them are ordered.
    pub warp_syncs: RefCell<Vec<u64>>,
    pub shared: RefCell<SharedMemory>,
    /// Asynchronous copies in flight and mbarriers.
    pub copies: RefCell<AsyncCopies>,
    pub trace: RefCell<Vec<PrefetchRecord>>,
    /// This run of the block, unique in the process (tags its global-memory updates).
    pub serial: u64,
    /// Events that show the block progresses: a thread returning, a barrier or a warp
    /// operation passing (a count: reading the clock for each would cost more than the event).
    pub events: Cell<u64>,
    /// The event count when a spinning thread last looked, and since when it is unchanged.
    pub watched: Cell<(u64, Instant)>,
}

/// One thread's state.
pub(crate) struct ThreadCtx<'b> {
    pub block: &'b BlockCtx<'b>,
    pub thread_idx: [u32; 3],
    /// `x + y * dim.x + z * dim.x * dim.y`: the thread's rank in its block (and warp order).
    pub linear: u32,
    pub yielder: Cell<*const Yielder<(), Suspend>>,
    pub warp_op: Cell<Option<WarpOp>>,
    pub warp_result: Cell<u32>,
    /// The `#[prefetch_next]` loop iteration being executed, if any.
    pub iteration: Cell<Option<usize>>,
    /// Where the thread waits at `sync_threads` (the caller's line).
    pub barrier_site: Cell<Option<&'static Location<'static>>>,
    /// Spin-prone operations (ordered loads, atomics) since the thread last let others run.
    pub spins: Cell<u32>,
    /// The mbarrier (address) and phase parity the thread waits for.
    pub mbarrier_wait: Cell<Option<(usize, u32)>>,
}

thread_local! {
    static CURRENT: Cell<*const ThreadCtx<'static>> = const { Cell::new(std::ptr::null()) };
    /// The lowest usable address of the running coroutine's stack (its guard page is just
    /// below), for the stack-overflow report.
    static STACK_LIMIT: Cell<usize> = const { Cell::new(0) };
}

/// Records the running coroutine's stack limit (0: none running).
pub(crate) fn set_stack_limit(limit: usize) {
    STACK_LIMIT.with(|c| c.set(limit));
}

/// The running coroutine's stack limit and thread, read by the stack-overflow handler (a
/// signal handler: it only reads these two plain cells).
pub(crate) fn overflow_context() -> (usize, *const ThreadCtx<'static>) {
    (STACK_LIMIT.with(|c| c.get()), CURRENT.with(|c| c.get()))
}

/// Makes `t` the thread the hooks see (the scheduler calls this around each resume).
pub(crate) fn set_current(t: Option<&ThreadCtx<'_>>) {
    // Erases the lifetime: the pointer is cleared before the context goes away.
    let p = t.map_or(std::ptr::null(), |t| {
        (t as *const ThreadCtx<'_>).cast::<ThreadCtx<'static>>()
    });
    CURRENT.with(|c| c.set(p));
}

/// Runs `f` on the current emulated thread, or returns `None` outside a launch.
pub(crate) fn with_current<R>(f: impl FnOnce(&ThreadCtx<'_>) -> R) -> Option<R> {
    let p = CURRENT.with(|c| c.get());
    if p.is_null() {
        None
    } else {
        // SAFETY: the scheduler sets the pointer only while the thread's context (owned by
        // `block::run_block`, which outlives every resume) is alive, and clears it after.
        Some(f(unsafe { &*p }))
    }
}

/// Like [`with_current`], but a kernel-only operation called outside a launch panics.
pub(crate) fn expect_current<R>(what: &str, f: impl FnOnce(&ThreadCtx<'_>) -> R) -> R {
    with_current(f).unwrap_or_else(|| {
        panic!(
            "lookahead_device::{what} was called outside a kernel launch; on the host, kernels \
             run through the emulator (`kernel::launch(&lookahead::emu::Emulator::new(), ...)`)"
        )
    })
}

/// Suspends the current thread's coroutine with `why`.
pub(crate) fn suspend(what: &str, why: Suspend) {
    let y = expect_current(what, |t| t.yielder.get());
    // SAFETY: the yielder belongs to the coroutine running on this host thread right now
    // (set at the coroutine's start, valid until it returns).
    unsafe { (*y).suspend(why) };
}
