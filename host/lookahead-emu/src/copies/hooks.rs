//! What `lookahead-device`'s asynchronous-copy and mbarrier functions call on the host
//! (re-exported by [`crate::hooks`]).

use super::AsyncReport;
use crate::hooks::when;
use crate::thread::{expect_current, suspend, Suspend, ThreadCtx};

/// Unwinds the calling kernel thread with `r` (reported by the launch).
fn raise<R: std::any::Any + Send>(r: R) -> ! {
    std::panic::resume_unwind(Box::new(r) as Box<dyn std::any::Any + Send>)
}

/// Gives the race detector the bulk copies whose phase completed: initialised memory.
fn settle(t: &ThreadCtx<'_>) {
    let done = t.block.copies.borrow_mut().take_completed();
    if done.is_empty() {
        return;
    }
    let mut shared = t.block.shared.borrow_mut();
    for (dst, bytes) in done {
        shared.async_write_lands(dst, bytes, None, when(t));
    }
}

/// Runs `f` on the calling thread's copies, raising its report; `what` names the
/// instruction for the panic outside a launch.
fn with_copies<R>(
    what: &str,
    f: impl FnOnce(&ThreadCtx<'_>, &mut super::AsyncCopies) -> Result<R, AsyncReport>,
) -> R {
    let r = expect_current(what, |t| {
        let r = f(t, &mut t.block.copies.borrow_mut());
        settle(t);
        r
    });
    r.unwrap_or_else(|e| raise(e))
}

/// An asynchronous copy of `bytes` bytes from `src` into this block's shared memory at
/// `dst`, of which the first `src_bytes` are read and the rest zero-filled; a bulk copy
/// completes on the mbarrier `barrier`, a `cp.async` on its thread's commit group.
fn issue(
    what: &str,
    dst: *mut u8,
    src: *const u8,
    bytes: usize,
    src_bytes: usize,
    barrier: Option<usize>,
) {
    with_copies(what, |t, copies| {
        let (dst, src) = (dst as usize, src as usize);
        if !t.block.shared.borrow().holds(dst, bytes) {
            panic!("{what}: the destination {dst:#x}..{:#x} is not shared memory of this block (a shared_array! or a pipeline stage)", dst + bytes);
        }
        if t.block.launch.race_check {
            let started =
                (t.block.shared.borrow_mut()).async_write_starts(dst, bytes, t.linear, when(t));
            if let Err(r) = started {
                raise(r);
            }
        }
        copies.issue(t.linear, dst, src, bytes, src_bytes.min(bytes), barrier)
    })
}

/// `cp.async.{ca,cg}.shared.global [dst], [src], bytes, src_bytes`.
pub fn cp_async(dst: *mut u8, src: *const u8, bytes: usize, src_bytes: usize) {
    issue("cp.async", dst, src, bytes, src_bytes, None)
}

/// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], bytes,
/// [barrier]`.
pub fn cp_async_bulk(dst: *mut u8, src: *const u8, bytes: usize, barrier: *mut u64) {
    issue(
        "cp.async.bulk",
        dst,
        src,
        bytes,
        bytes,
        Some(barrier as usize),
    )
}

/// `cp.async.commit_group`.
pub fn cp_async_commit() {
    with_copies("cp.async.commit_group", |t, copies| {
        copies.commit(t.linear);
        Ok(())
    })
}

/// `cp.async.wait_group pending` (`None`: `cp.async.wait_all`): the calling thread's copies
/// in older groups land and are visible to it.
pub fn cp_async_wait(pending: Option<u64>) {
    with_copies("cp.async.wait_group", |t, copies| {
        let landed = copies.wait_group(t.linear, pending);
        let mut shared = t.block.shared.borrow_mut();
        for (dst, bytes) in landed {
            shared.async_write_lands(dst, bytes, Some(t.linear), when(t));
        }
        Ok(())
    })
}

/// `mbarrier.init.shared.b64 [barrier], count`.
pub fn mbarrier_init(barrier: *mut u64, count: u32) {
    with_copies("pipeline::mbarrier::MBarrier::init", |_, copies| {
        copies.init(barrier as usize, count);
        Ok(())
    })
}

/// `mbarrier.inval.shared.b64 [barrier]`.
pub fn mbarrier_inval(barrier: *mut u64) {
    with_copies("pipeline::mbarrier::MBarrier::inval", |_, copies| {
        copies.inval(barrier as usize);
        Ok(())
    })
}

/// `mbarrier.arrive` (with `bytes > 0`: `mbarrier.arrive.expect_tx`), or with `arrive`
/// false `mbarrier.expect_tx`; returns the phase arrived on (the state token).
pub fn mbarrier_arrive(barrier: *mut u64, bytes: u32, arrive: bool) -> u64 {
    with_copies("pipeline::mbarrier::MBarrier::arrive", |t, copies| {
        copies.arrive(t.linear, barrier as usize, bytes, arrive)
    })
}

/// `mbarrier.try_wait.parity`: whether the phase of parity `parity` is complete. A spin
/// point: a thread polling in a loop lets the rest of its block run.
pub fn mbarrier_try_wait(barrier: *mut u64, parity: u32) -> bool {
    let done = with_copies(
        "pipeline::mbarrier::MBarrier::try_wait_parity",
        |t, copies| copies.poll(t.linear, barrier as usize, parity),
    );
    if !done {
        crate::hooks::spin_point();
    }
    done
}

/// Waits until the phase of parity `parity` of `barrier` completes (the loop over
/// `mbarrier.try_wait.parity`): the thread sleeps until then; a phase that cannot complete
/// is reported as a deadlock (or a wrong byte count) when nothing else can run.
pub fn mbarrier_wait(barrier: *mut u64, parity: u32) {
    let what = "pipeline::mbarrier::MBarrier::wait_parity";
    loop {
        let done = with_copies(what, |t, copies| {
            copies.poll(t.linear, barrier as usize, parity)
        });
        if done {
            return;
        }
        expect_current(what, |t| {
            t.mbarrier_wait.set(Some((barrier as usize, parity)))
        });
        suspend(what, Suspend::MBarrier);
    }
}
