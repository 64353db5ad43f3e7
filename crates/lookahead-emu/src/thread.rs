//! The state one emulated GPU thread, its block and its launch share, and how a running
//! kernel body finds it: a thread-local pointer the block scheduler sets before resuming
//! each thread's coroutine.

use std::cell::{Cell, RefCell};
use std::sync::atomic::AtomicBool;

use corosensei::Yielder;

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
}

/// What every block of a launch shares (read from several host threads).
pub(crate) struct LaunchCtx {
    pub kernel: &'static str,
    pub grid_dim: [u32; 3],
    pub block_dim: [u32; 3],
    pub race_check: bool,
    pub trace: bool,
    /// Set when a block failed: the other workers stop taking blocks.
    pub abort: AtomicBool,
}

/// One block's state; lives on the stack of the host thread that runs the block.
pub(crate) struct BlockCtx<'l> {
    pub launch: &'l LaunchCtx,
    pub block_idx: [u32; 3],
    /// Barrier generation: bumped each time the whole block passes `sync_threads`.
    pub epoch: Cell<u64>,
    pub shared: RefCell<SharedMemory>,
    pub trace: RefCell<Vec<PrefetchRecord>>,
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
}

thread_local! {
    static CURRENT: Cell<*const ThreadCtx<'static>> = const { Cell::new(std::ptr::null()) };
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
