//! What `lookahead-device`'s intrinsics call when compiled for the host. Kernel code does
//! not call these directly; they are public so the device crate can.

use crate::thread::{expect_current, suspend, with_current, Suspend};
use crate::trace::{Instruction, PrefetchRecord};
use crate::warp::WarpOp;

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

/// `bar.sync 0`: waits for every thread of the block.
pub fn sync_threads() {
    suspend("sync::sync_threads", Suspend::Barrier);
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
        suspend("sync::nanosleep", Suspend::Sleep);
    } else {
        std::thread::yield_now();
    }
}

/// The calling block's array for the `shared_array!` call site `symbol` (declared at
/// `site`), `bytes` long and aligned to `align`.
pub fn shared_array(
    symbol: &'static str,
    site: &'static str,
    bytes: usize,
    align: usize,
) -> *mut u8 {
    expect_current("shared_array!", |t| {
        t.block.shared.borrow_mut().get(symbol, site, bytes, align)
    })
}

/// Records an access to element `index` of the `len`-element shared array at `base` for the
/// race detector; a race unwinds the thread (the launch reports [`crate::EmuError::DataRace`]).
pub fn shared_access(base: *const u8, len: usize, index: usize, write: bool) {
    let race = with_current(|t| {
        if !t.block.launch.race_check {
            return Ok(());
        }
        let epoch = t.block.epoch.get();
        t.block
            .shared
            .borrow_mut()
            .access(base, len, index, write, t.linear, epoch)
    });
    if let Some(Err(r)) = race {
        std::panic::resume_unwind(Box::new(r) as Box<dyn std::any::Any + Send>);
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
