//! What `#[prefetch_next(queue = q)]` loops call: for a target in managed memory, a request
//! on the queue for the range a later iteration reads and a wait for the current one's; for a
//! target in device memory, the loop's prefetch hint (the queue is not used).

use super::requests::{Readiness, RequestQueue, Requested};
use crate::prefetch::{
    chunk_bounds, clamp_range, prefetch_index, prefetch_range, Level, PrefetchSource,
};
#[cfg(not(target_arch = "nvptx64"))]
use crate::prefetch::{hooks, Instruction};
use crate::view::MemoryKind;

/// The ready flag of target `target` (of `targets`) in the iteration whose index is `index`
/// (the loop value of a range loop, the position in an `iter()`/`chunks()` loop):
/// `index * targets + target`, so with one target the flag is the iteration's index. An index
/// too large for a `u32` flag gives `u32::MAX`, which no queue has: the request falls back to
/// the fault path.
#[inline(always)]
pub fn flag(index: usize, targets: usize, target: usize) -> u32 {
    index
        .checked_mul(targets)
        .and_then(|v| v.checked_add(target))
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(u32::MAX)
}

#[inline(always)]
fn request_bytes(queue: &RequestQueue, flag: u32, addr: usize, bytes: usize) -> Requested {
    #[cfg(not(target_arch = "nvptx64"))]
    hooks::prefetch(Instruction::Request { flag }, addr, bytes);
    queue.request(flag, addr as *const u8, bytes)
}

/// For managed memory, asks the host (through `queue`, under ready flag `flag`) to make
/// elements `[first, first + count)` of `src` (clamped to its length) resident; for device
/// memory, prefetches them at `level` as [`prefetch_range`] does. Returns what the queue did,
/// or `None` when nothing was requested (device memory, or nothing of the range inside).
#[inline(always)]
pub fn request_range<S: PrefetchSource + ?Sized>(
    queue: &RequestQueue,
    flag: u32,
    src: &S,
    first: usize,
    count: usize,
    level: Level,
) -> Option<Requested> {
    if !matches!(S::KIND, MemoryKind::Managed) {
        prefetch_range(src, first, count, level);
        return None;
    }
    let (addr, bytes) = clamp_range(src, first, count)?;
    Some(request_bytes(queue, flag, addr, bytes))
}

/// [`request_range`] of element `index` alone.
#[inline(always)]
pub fn request_index<S: PrefetchSource + ?Sized>(
    queue: &RequestQueue,
    flag: u32,
    src: &S,
    index: usize,
    level: Level,
) -> Option<Requested> {
    if !matches!(S::KIND, MemoryKind::Managed) {
        prefetch_index(src, index, level);
        return None;
    }
    request_range(queue, flag, src, index, 1, level)
}

/// [`request_range`] of all of `src`.
#[inline(always)]
pub fn request_all<S: PrefetchSource + ?Sized>(
    queue: &RequestQueue,
    flag: u32,
    src: &S,
    level: Level,
) -> Option<Requested> {
    let (_, len, _) = src.region();
    request_range(queue, flag, src, 0, len, level)
}

/// [`request_range`] of chunk `chunk` (see [`chunk_bounds`]); `None` when that chunk is not
/// iterated.
#[inline(always)]
pub fn request_chunk<S: PrefetchSource + ?Sized>(
    queue: &RequestQueue,
    flag: u32,
    src: &S,
    chunk: usize,
    size: usize,
    exact: bool,
    level: Level,
) -> Option<Requested> {
    let (_, len, _) = src.region();
    let (first, count) = chunk_bounds(chunk, size, len, exact)?;
    request_range(queue, flag, src, first, count, level)
}

/// For managed memory, waits (within the queue's time bound) until the range requested
/// under `flag` has arrived, and returns what it saw; for device memory returns `None` at
/// once. Whatever it returns, the caller reads the data next: on `TimedOut` or `GoAhead`
/// through the fault path, with the same values.
#[inline(always)]
pub fn wait_ready<S: PrefetchSource + ?Sized>(
    queue: &RequestQueue,
    flag: u32,
    _src: &S,
) -> Option<Readiness> {
    if !matches!(S::KIND, MemoryKind::Managed) {
        return None;
    }
    #[cfg(not(target_arch = "nvptx64"))]
    hooks::prefetch(Instruction::WaitReady { flag }, 0, 0);
    Some(queue.wait_ready(flag))
}

/// [`wait_ready`] for a target given as an expression of the loop variable: only its type
/// matters (`target` is never called), so the expression is not evaluated.
#[inline(always)]
pub fn wait_ready_for<S: PrefetchSource, F: FnOnce() -> S>(
    queue: &RequestQueue,
    flag: u32,
    target: F,
) -> Option<Readiness> {
    if !matches!(S::KIND, MemoryKind::Managed) {
        return None;
    }
    let _ = target;
    #[cfg(not(target_arch = "nvptx64"))]
    hooks::prefetch(Instruction::WaitReady { flag }, 0, 0);
    Some(queue.wait_ready(flag))
}
