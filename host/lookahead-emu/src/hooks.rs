//! What `lookahead-device`'s intrinsics call when compiled for the host. Kernel code does
//! not call these directly; they are public so the device crate can.

use std::sync::atomic::Ordering;

use crate::thread::{expect_current, suspend, with_current, Suspend};
use crate::trace::{Instruction, PrefetchRecord};
use crate::warp::WarpOp;

pub use crate::copies::hooks::*;

/// The coordinates of the calling emulated thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coords {
    /// `%tid`.
    pub thread_idx: [u32; 3],
    /// `%ctaid`.
    pub block_idx: [u32; 3],
    /// `%ntid`.
    pub block_dim: [u32; 3],
    /// `%nctaid`.
    pub grid_dim: [u32; 3],
}

/// The calling thread's coordinates; `what` names the intrinsic for the panic outside a launch.
pub fn coords(what: &str) -> Coords {
    expect_current(what, |t| Coords {
        thread_idx: t.thread_idx,
        block_idx: t.block.block_idx,
        block_dim: t.block.launch.block_dim,
        grid_dim: t.block.launch.grid_dim,
    })
}

/// Whether the caller is an emulated kernel thread.
pub fn in_launch() -> bool {
    with_current(|_| ()).is_some()
}

/// `bar.sync 0`: waits for every thread of the block. The caller's line is the barrier's
/// identity: threads waiting at different lines are a [`crate::EmuError::BarrierDivergence`].
#[track_caller]
pub fn sync_threads() {
    let site = std::panic::Location::caller();
    expect_current("sync::sync_threads", |t| t.barrier_site.set(Some(site)));
    suspend("sync::sync_threads", Suspend::Barrier);
}

/// Spin-prone operations (ordered loads, atomics) a thread runs before it lets the rest of
/// its block run.
const SPINS_PER_TURN: u32 = 32;

/// An ordered load or an atomic operation: what spin-waits are made of. On a GPU the threads
/// of a block run concurrently, so a thread waiting for another one's write gets it; here
/// every 32nd such operation lets the block's other threads run first. A
/// thread that keeps spinning while nothing else in its block progresses for the watchdog's
/// time unwinds with a [`crate::EmuError::Hang`] report.
pub fn spin_point() {
    take_turn(SPINS_PER_TURN);
}

/// Counts a spin-prone operation; every `every`-th one lets the block's other threads run,
/// or unwinds with a hang report when the block has made no progress for the watchdog's
/// time.
fn take_turn(every: u32) {
    let turn = with_current(|t| {
        let n = t.spins.get() + 1;
        if n < every {
            t.spins.set(n);
            return Turn::Keep;
        }
        t.spins.set(0);
        let (launch, block) = (t.block.launch, t.block);
        launch.progress.fetch_add(1, Ordering::Relaxed);
        let (seen, since) = block.watched.get();
        let now = std::time::Instant::now();
        if block.events.get() != seen {
            block.watched.set((block.events.get(), now));
            return Turn::Yield;
        }
        let idle = now - since;
        if idle >= launch.watchdog {
            Turn::Hang(idle.as_secs_f64())
        } else {
            Turn::Yield
        }
    });
    match turn {
        Some(Turn::Yield) => suspend("sync::nanosleep", Suspend::Sleep),
        Some(Turn::Hang(seconds)) => {
            let report = HangReport { seconds };
            std::panic::resume_unwind(Box::new(report) as Box<dyn std::any::Any + Send>)
        }
        Some(Turn::Keep) | None => {}
    }
}

/// What [`spin_point`] does for the calling thread.
enum Turn {
    Keep,
    Yield,
    Hang(f64),
}

/// A hang found by [`spin_point`], raised as the thread's unwind payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HangReport {
    pub seconds: f64,
}

/// A plain read-modify-write of a global-memory element (`y[i] += v` in a kernel body:
/// `#[kernel]` reports each one here). Two threads of a block updating one element between
/// the same two barriers is a [`crate::EmuError::GlobalRace`]: on a GPU their updates race.
pub fn global_update(address: usize, place: &'static str, op: &'static str) {
    let race = with_current(|t| {
        if !t.block.launch.race_check {
            return None;
        }
        let (serial, epoch) = (t.block.serial, t.block.epoch.get());
        UPDATES.with(|u| {
            let mut table = u.borrow_mut();
            if table.is_empty() {
                table.resize(UPDATE_SLOTS, Update::default());
            }
            // Neighbouring elements in neighbouring slots: threads of a block update
            // neighbouring elements, so the table is walked in order, not at random.
            let slot = &mut table[(address >> 2) % UPDATE_SLOTS];
            let same = slot.address == address && slot.serial == serial && slot.epoch == epoch;
            if same && slot.thread != t.linear {
                return Some(GlobalRaceReport {
                    place,
                    op,
                    address,
                    other: slot.thread,
                });
            }
            *slot = Update {
                address,
                serial,
                epoch,
                thread: t.linear,
            };
            None
        })
    });
    if let Some(Some(r)) = race {
        std::panic::resume_unwind(Box::new(r) as Box<dyn std::any::Any + Send>);
    }
}

/// Recent global-memory updates of the blocks a host thread runs, by address: a
/// direct-mapped table, so a race between updates far apart may go unseen, but one that is
/// reported is real.
const UPDATE_SLOTS: usize = 1 << 13;

#[derive(Debug, Clone, Copy, Default)]
struct Update {
    address: usize,
    serial: u64,
    epoch: u64,
    thread: u32,
}

thread_local! {
    static UPDATES: std::cell::RefCell<Vec<Update>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A race found by [`global_update`], raised as the thread's unwind payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GlobalRaceReport {
    pub place: &'static str,
    pub op: &'static str,
    pub address: usize,
    pub other: u32,
}

/// A warp shuffle or vote: waits for every lane of the warp and returns this lane's result
/// (the shuffled value, the vote as 0/1, or the ballot mask).
pub fn warp_op(what: &str, op: WarpOp) -> u32 {
    expect_current(what, |t| t.warp_op.set(Some(op)));
    suspend(what, Suspend::Warp);
    expect_current(what, |t| t.warp_result.get())
}

/// `activemask`: the lanes of the caller's warp that reach it together (every lane of the
/// warp that is not exited, waiting at a barrier or at another warp operation).
pub fn active_mask() -> u32 {
    warp_op("warp::active_mask", WarpOp::ActiveMask)
}

/// `nanosleep`: lets the other threads of the block run first. Outside a launch it yields
/// the host thread.
pub fn sleep() {
    if in_launch() {
        take_turn(1);
    } else {
        std::thread::yield_now();
    }
}

/// The calling block's dynamic shared memory, first used at `site` as elements of `elem`
/// bytes: its address and its size in bytes (the launch's).
pub fn dynamic_shared(site: &'static str, elem: usize) -> (*mut u8, usize) {
    expect_current("dynamic_shared", |t| {
        let bytes = t.block.launch.dynamic_shared;
        let ptr = (t.block.shared.borrow_mut()).get(DYNAMIC_SHARED, site, bytes, 16, elem);
        (ptr, bytes)
    })
}

/// The name the block's dynamic shared memory goes by among its shared arrays.
const DYNAMIC_SHARED: &str = "dynamic shared memory";

/// The calling block's array for the `shared_array!` call site `symbol` (declared at
/// `site`), `bytes` long, aligned to `align`, of elements of `elem` bytes.
pub fn shared_array(
    symbol: &'static str,
    site: &'static str,
    bytes: usize,
    align: usize,
    elem: usize,
) -> *mut u8 {
    expect_current("shared_array!", |t| {
        t.block
            .shared
            .borrow_mut()
            .get(symbol, site, bytes, align, elem)
    })
}

/// An atomic operation on element `index` of the `len`-element shared array at `base`: it
/// reads the element, so the element must have been written (atomics do not race).
pub fn shared_atomic(base: *const u8, len: usize, index: usize) {
    let uninit = with_current(|t| {
        if !t.block.launch.race_check {
            return Ok(());
        }
        t.block
            .shared
            .borrow_mut()
            .atomic(base, len, index, t.linear)
    });
    if let Some(Err(r)) = uninit {
        std::panic::resume_unwind(Box::new(r) as Box<dyn std::any::Any + Send>);
    }
    spin_point();
}

/// Records an access to element `index` of the `len`-element shared array at `base` for the
/// race detector; a race, or a read of an element nothing wrote, unwinds the thread (the
/// launch reports [`crate::EmuError::DataRace`] or [`crate::EmuError::UninitializedRead`]).
pub fn shared_access(base: *const u8, len: usize, index: usize, write: bool) {
    let race = with_current(|t| {
        if !t.block.launch.race_check {
            return Ok(());
        }
        let mut copies = t.block.copies.borrow_mut();
        if !copies.is_quiet() {
            let shared = t.block.shared.borrow();
            if let Some((start, end)) = shared.element_bytes(base, index) {
                if let Err(r) = copies.access(t.linear, start, end, write) {
                    std::panic::resume_unwind(Box::new(r) as Box<dyn std::any::Any + Send>);
                }
            }
        }
        t.block
            .shared
            .borrow_mut()
            .access(base, len, index, write, t.linear, when(t))
    });
    if let Some(Err(r)) = race {
        std::panic::resume_unwind(Box::new(r) as Box<dyn std::any::Any + Send>);
    }
}

/// When thread `t` accesses shared memory now, for the race detector.
pub(crate) fn when(t: &crate::thread::ThreadCtx<'_>) -> crate::shared::When {
    crate::shared::When {
        epoch: t.block.epoch.get(),
        warp_sync: t.block.warp_syncs.borrow()[t.linear as usize / 32],
    }
}

/// Records a prefetch instruction in the launch's trace (when tracing is on). Outside a
/// launch, or with tracing off, a prefetch does nothing, as on a GPU.
pub fn prefetch(instruction: Instruction, address: usize, bytes: usize) {
    with_current(|t| {
        if t.block.launch.trace {
            t.block.trace.borrow_mut().push(PrefetchRecord {
                instruction,
                address,
                bytes,
                block: t.block.block_idx,
                thread: t.thread_idx,
                iteration: t.iteration.get(),
            });
        }
    });
}

/// Sets the `#[prefetch_next]` loop iteration the calling thread is in; returns the previous
/// one (restored when the iteration ends).
pub fn set_iteration(iteration: Option<usize>) -> Option<usize> {
    with_current(|t| t.iteration.replace(iteration)).flatten()
}
