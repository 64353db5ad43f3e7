//! The copy kinds of a [`super::Pipeline`]: how a stage is filled and waited for. Each
//! kind's operations are its own trait methods, so a build only instantiates the
//! instructions of the kinds its kernels use (a `CpAsync` pipeline in an sm_80 build never
//! meets the sm_90 instructions).

use core::mem::size_of;

use super::bulk;
use super::cp_async;
use super::mbarrier::MBarrier;
use crate::SharedArray;

mod sealed {
    pub trait Sealed {}
}

/// Rows to copy into a stage, packed from `dst`, and who copies.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct RowCopy {
    pub dst: usize,
    pub row_bytes: usize,
    pub rows: usize,
    /// Every row's source starts on 16 bytes.
    pub aligned: bool,
    pub rank: u32,
    pub threads: u32,
    pub barrier: MBarrier,
}

/// How a [`super::Pipeline`] fills its stages: [`CpAsync`], [`Bulk`], [`BulkPortable`] or
/// [`LoadStore`].
/// Sealed; its methods are the pipeline's.
pub trait CopyKind: sealed::Sealed {
    /// Thread 0, before the pipeline's first use: initialises what the waits use.
    #[doc(hidden)]
    fn init<const S: usize>(barriers: SharedArray<u64, S>);
    /// Every thread, before a fill.
    #[doc(hidden)]
    fn begin_fill(rank: u32);
    /// Every thread, after a fill that copied `bytes` bytes in the whole block.
    #[doc(hidden)]
    fn end_fill(barrier: MBarrier, rank: u32, bytes: u32);
    /// Every thread: waits for a stage (its `barrier` at `parity`, or until at most
    /// `pending` later stages are in flight), before the block barrier.
    #[doc(hidden)]
    fn wait(barrier: MBarrier, parity: u32, pending: u32);
    /// This thread's share of `c`, row `r` read from `row(r)`; returns the bytes the whole
    /// block copies.
    ///
    /// # Safety
    /// Every row lies in global memory and in the stage being filled, which nothing reads
    /// before the stage's wait.
    #[doc(hidden)]
    unsafe fn copy_rows<T>(c: RowCopy, row: impl Fn(usize) -> *const T) -> u32;
}

/// Every thread copies its share of a stage with `cp.async` (16 bytes where the
/// alignment allows, else 8 or 4), closes it into a commit group, and the wait is
/// `cp.async.wait_group` then a block barrier. sm_80 and later.
#[derive(Debug, Clone, Copy)]
pub struct CpAsync;

/// Lanes of warp 0 copy a stage's rows with the copy engine (`cp.async.bulk`), thread 0
/// announces the bytes to the stage's mbarrier, and the wait is on the mbarrier's phase then
/// a block barrier. Rows must be 16-byte aligned and a multiple of 16 bytes long (a trap
/// otherwise). sm_90 and later: a compile error naming the architecture in a build for
/// older GPUs.
#[derive(Debug, Clone, Copy)]
pub struct Bulk;

/// [`Bulk`] on sm_90 and later (and on the emulator, which models an sm_90 GPU),
/// [`CpAsync`] on older GPUs.
#[derive(Debug, Clone, Copy)]
pub struct BulkPortable;

/// Every thread copies its share of a stage with ordinary loads and stores, through
/// registers, and the wait is a block barrier: nothing is in flight while the block computes.
/// Any architecture. The baseline a `stages = auto` kernel's plain entry uses, and a way to
/// keep a pipelined loop on GPUs older than sm_80.
#[derive(Debug, Clone, Copy)]
pub struct LoadStore;

impl sealed::Sealed for LoadStore {}
impl sealed::Sealed for CpAsync {}
impl sealed::Sealed for Bulk {}
impl sealed::Sealed for BulkPortable {}

impl CopyKind for LoadStore {
    #[inline(always)]
    fn init<const S: usize>(_: SharedArray<u64, S>) {}
    #[inline(always)]
    fn begin_fill(_: u32) {}
    #[inline(always)]
    fn end_fill(_: MBarrier, _: u32, _: u32) {}
    #[inline(always)]
    fn wait(_: MBarrier, _: u32, _: u32) {}
    #[inline(always)]
    unsafe fn copy_rows<T>(c: RowCopy, row: impl Fn(usize) -> *const T) -> u32 {
        sync_rows(c, row);
        (c.rows * c.row_bytes) as u32
    }
}

impl CopyKind for CpAsync {
    #[inline(always)]
    fn init<const S: usize>(_: SharedArray<u64, S>) {
        needs_arch!(
            "sm_80",
            "a Pipeline with copy = CpAsync (cp.async) needs sm_80 (Ampere) or newer; on older GPUs load tiles through registers into a shared_array!"
        );
    }
    #[inline(always)]
    fn begin_fill(_: u32) {}
    #[inline(always)]
    fn end_fill(_: MBarrier, _: u32, _: u32) {
        cp_async::commit_group();
    }
    #[inline(always)]
    fn wait(_: MBarrier, _: u32, pending: u32) {
        cp_async::wait_group_dyn(pending);
    }
    #[inline(always)]
    unsafe fn copy_rows<T>(c: RowCopy, row: impl Fn(usize) -> *const T) -> u32 {
        cp_async_rows(c, row);
        (c.rows * c.row_bytes) as u32
    }
}

impl CopyKind for Bulk {
    #[inline(always)]
    fn init<const S: usize>(barriers: SharedArray<u64, S>) {
        needs_arch!(
            "sm_90",
            "a Pipeline with copy = Bulk (cp.async.bulk) needs sm_90 (Hopper) or newer; use copy = BulkPortable to fall back to cp.async on sm_80"
        );
        for s in 0..S {
            MBarrier::in_shared(barriers, s).init(1);
        }
        bulk::fence_proxy_async_shared();
    }
    #[inline(always)]
    fn begin_fill(rank: u32) {
        if rank < 32 {
            // The block's earlier accesses to the buffer (ordered by the wait's barrier)
            // come before the copy engine's writes.
            bulk::fence_proxy_async_shared();
        }
    }
    #[inline(always)]
    fn end_fill(barrier: MBarrier, rank: u32, bytes: u32) {
        if rank == 0 {
            barrier.arrive_expect_tx(bytes);
        }
    }
    #[inline(always)]
    fn wait(barrier: MBarrier, parity: u32, _: u32) {
        barrier.wait_parity(parity);
    }
    #[inline(always)]
    unsafe fn copy_rows<T>(c: RowCopy, row: impl Fn(usize) -> *const T) -> u32 {
        bulk_rows(c, row);
        (c.rows * c.row_bytes) as u32
    }
}

/// The kind [`BulkPortable`] is in this build.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
type PortableAs = Bulk;
#[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_90")))]
type PortableAs = CpAsync;

impl CopyKind for BulkPortable {
    #[inline(always)]
    fn init<const S: usize>(barriers: SharedArray<u64, S>) {
        PortableAs::init(barriers)
    }
    #[inline(always)]
    fn begin_fill(rank: u32) {
        PortableAs::begin_fill(rank)
    }
    #[inline(always)]
    fn end_fill(barrier: MBarrier, rank: u32, bytes: u32) {
        PortableAs::end_fill(barrier, rank, bytes)
    }
    #[inline(always)]
    fn wait(barrier: MBarrier, parity: u32, pending: u32) {
        PortableAs::wait(barrier, parity, pending)
    }
    #[inline(always)]
    unsafe fn copy_rows<T>(c: RowCopy, row: impl Fn(usize) -> *const T) -> u32 {
        PortableAs::copy_rows(c, row)
    }
}

/// Bulk: lane `l` of warp 0 copies rows `l`, `l + 32`... with one bulk copy each.
#[inline(always)]
unsafe fn bulk_rows<T>(c: RowCopy, row: impl Fn(usize) -> *const T) {
    if c.row_bytes == 0 || c.rank >= 32 {
        return;
    }
    let mut r = c.rank as usize;
    while r < c.rows {
        // Thread 0 announces these bytes for the stage's phase after the fill.
        bulk::copy_bulk_dyn(
            (c.dst + r * c.row_bytes) as *mut u8,
            row(r) as *const u8,
            c.row_bytes as u32,
            c.barrier,
        );
        r += 32;
    }
}

/// `cp.async`: the rows cut into copies of the largest size the destination and the row
/// length allow (16, 8 or 4 bytes), spread over the block's threads; a source not aligned
/// to that size is copied in 4-byte pieces, or element by element.
#[inline(always)]
unsafe fn cp_async_rows<T>(c: RowCopy, row: impl Fn(usize) -> *const T) {
    let unit = match (c.dst | c.row_bytes) % 16 {
        0 => 16,
        8 => 8,
        4 | 12 => 4,
        _ => return sync_rows(c, row),
    };
    if c.aligned && unit == 16 {
        // Every piece aligned: one `cp.async.cg` each, no check and no fallback beside it
        // (which `ptxas` would predicate into every iteration).
        return for_each_piece(&c, 16, &row, |d, s| cp_async::copy_cg(d, s as *const u8));
    }
    for_each_piece(&c, unit, &row, |d, s| {
        // `d` is aligned to `unit`; the source is checked here.
        if s % unit == 0 {
            match unit {
                16 => cp_async::copy_cg(d, s as *const u8),
                8 => cp_async::copy_ca::<8>(d, s as *const u8),
                _ => cp_async::copy_ca::<4>(d, s as *const u8),
            }
        } else if s % 4 == 0 {
            let mut b = 0;
            while b < unit {
                cp_async::copy_ca::<4>(d.add(b), (s + b) as *const u8);
                b += 4;
            }
        } else {
            for e in 0..unit / size_of::<T>() {
                (d as *mut T).add(e).write((s as *const T).add(e).read());
            }
        }
    });
}

/// Calls `copy(destination, source)` for each of this thread's `unit`-byte pieces of the
/// rows: piece `i` of the block is the thread's when `i % threads == rank`.
#[inline(always)]
unsafe fn for_each_piece<T>(
    c: &RowCopy,
    unit: usize,
    row: impl Fn(usize) -> *const T,
    copy: impl Fn(*mut u8, usize),
) {
    // A piece's row and column advance by the block's size each step: the 64-bit division
    // of an index by the pieces per row is done once here, not for every piece.
    let per_row = (c.row_bytes / unit) as u32;
    if per_row == 0 {
        return;
    }
    let (rows, step) = (c.rows as u32, c.threads);
    let (step_r, step_k) = (step / per_row, step % per_row);
    let (mut r, mut k) = (c.rank / per_row, c.rank % per_row);
    while r < rows {
        let s = row(r as usize) as usize + k as usize * unit;
        copy(
            (c.dst + r as usize * c.row_bytes + k as usize * unit) as *mut u8,
            s,
        );
        r += step_r;
        k += step_k;
        if k >= per_row {
            k -= per_row;
            r += 1;
        }
    }
}

/// Rows whose length or destination is not a multiple of 4 bytes: plain loads and stores,
/// element by element, spread over the block's threads (visible after the stage's wait,
/// which ends with a block barrier).
#[inline(always)]
unsafe fn sync_rows<T>(c: RowCopy, row: impl Fn(usize) -> *const T) {
    let row_len = c.row_bytes / size_of::<T>().max(1);
    let total = c.rows * row_len;
    let mut e = c.rank as usize;
    while e < total {
        let (r, k) = (e / row_len, e % row_len);
        (c.dst as *mut T)
            .add(r * row_len + k)
            .write(row(r).add(k).read());
        e += c.threads as usize;
    }
}
