//! The typed pipeline: `STAGES` buffers of `LEN` elements in shared memory, filled
//! asynchronously ahead of the block's use of them.

use core::cell::Cell;
use core::marker::PhantomData;
use core::mem::size_of;

use super::kind::CopyKind;
use super::mbarrier::MBarrier;
use crate::param::DeviceCopy;
use crate::sync::sync_threads;
use crate::SharedArray;

/// The calling thread's rank in its block and the block's thread count.
#[inline(always)]
pub(super) fn rank_and_size() -> (u32, u32) {
    use crate::index::*;
    let (dx, dy) = (block_dim_x(), block_dim_y());
    let rank = thread_idx_x() + dx * (thread_idx_y() + dy * thread_idx_z());
    (rank, dx * dy * block_dim_z())
}

/// A block-wide pipeline of `STAGES` shared-memory buffers ("stages") of `LEN` elements of
/// `T`, filled by asynchronous copies of kind `K` while the block computes on an earlier
/// one. Make one with [`crate::pipeline!`]; every thread of the block calls every method,
/// in the same order (they contain block barriers).
///
/// ```ignore
/// let mut p = pipeline!(f32; 1024, stages = 3, copy = CpAsync);
/// for s in 0..2 { p.issue(|c| c.slice(0, chunk(s))); }   // prologue: stages 0 and 1
/// for s in 0..chunks {
///     let stage = p.wait();                  // stage s is in shared memory
///     stage.refill(|c| c.slice(0, chunk(s + 2)));   // stage s + 2 into the freed buffer
///     sum += stage.data()[i];                 // read stage s
/// }
/// ```
///
/// What the types guarantee: a stage's data is only reachable through the [`Ready`] that
/// [`Pipeline::wait`] returns, so it is never read before its copies completed; no copy is
/// issued into a buffer a [`Ready`] (or a thread still reading the last one) can read, which
/// counters check at run time; and a [`Ready`] borrows the pipeline, so the next wait (which
/// lets the buffer be refilled) needs it dropped. Sizes are checked at compile time (`LEN`
/// elements of `T` a multiple of 16 bytes, 2 to 8 stages).
pub struct Pipeline<T, const LEN: usize, const STAGES: usize, K: CopyKind> {
    stages: SharedArray<[T; LEN], STAGES>,
    barriers: SharedArray<u64, STAGES>,
    /// Stages issued so far (the next one to fill is `issued % STAGES`).
    issued: Cell<u32>,
    /// Stages waited for so far.
    consumed: u32,
    _kind: PhantomData<K>,
}

impl<T: DeviceCopy + Copy, const LEN: usize, const STAGES: usize, K: CopyKind>
    Pipeline<T, LEN, STAGES, K>
{
    /// A pipeline on these buffers and mbarrier words (what [`crate::pipeline!`] declares).
    /// Block-wide: thread 0 initialises the mbarriers of a bulk pipeline, and every thread
    /// waits at a block barrier.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn new(stages: SharedArray<[T; LEN], STAGES>, barriers: SharedArray<u64, STAGES>) -> Self {
        const {
            assert!(
                LEN * size_of::<T>() % 16 == 0 && LEN > 0,
                "a pipeline stage must hold a non-zero multiple of 16 bytes (LEN * size_of::<T>()), so every stage starts 16-byte aligned for cp.async.cg and bulk copies"
            );
            assert!(
                STAGES >= 2 && STAGES <= 8,
                "a pipeline has 2 to 8 stages (one is read while the others are in flight; cp.async.wait_group counts up to 7)"
            );
        }
        if rank_and_size().0 == 0 {
            K::init(barriers);
        }
        sync_threads();
        Pipeline {
            stages,
            barriers,
            issued: Cell::new(0),
            consumed: 0,
            _kind: PhantomData,
        }
    }

    /// Stages issued so far.
    #[inline(always)]
    pub fn issued(&self) -> u32 {
        self.issued.get()
    }

    /// Stages waited for so far.
    #[inline(always)]
    pub fn consumed(&self) -> u32 {
        self.consumed
    }

    /// Issues the next stage: every thread runs `fill`, whose [`Copier`] copies this
    /// thread's share of what the stage holds. Panics (traps on the GPU) when every buffer
    /// is in flight or may still be read: at most `STAGES` stages ahead of the last wait,
    /// `STAGES - 1` once a stage was waited for (its buffer is free after the next wait).
    #[inline(always)]
    pub fn issue(&mut self, fill: impl FnOnce(&mut Copier<'_, T, LEN, K>)) {
        let room = if self.consumed == 0 {
            STAGES
        } else {
            STAGES - 1
        } as u32;
        assert!(
            self.issued.get() - self.consumed < room,
            "Pipeline::issue: every stage buffer is in flight or still being read; wait for a stage first"
        );
        self.fill(fill);
    }

    /// Waits for the oldest stage issued and not yet waited for: its copies are complete
    /// and visible to every thread of the block (`cp.async.wait_group` or the stage's
    /// mbarrier, then a block barrier, after which the buffer of the stage before it is free
    /// to refill). Panics (traps) when no stage is in flight.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn wait(&mut self) -> Ready<'_, T, LEN, STAGES, K> {
        let (c, issued) = (self.consumed, self.issued.get());
        assert!(
            issued > c,
            "Pipeline::wait: no stage is in flight; issue one first"
        );
        let slot = c as usize % STAGES;
        let parity = (c / STAGES as u32) & 1;
        // At most `STAGES` stages are in flight (`issue`), so the stages still allowed to
        // be pending number below `STAGES`: said with `min`, LLVM keeps only those cases of
        // `wait_group_dyn` (a compare or two, not an indirect branch over eight).
        K::wait(
            MBarrier::in_shared(self.barriers, slot),
            parity,
            (issued - c - 1).min(STAGES as u32 - 1),
        );
        sync_threads();
        self.consumed = c + 1;
        Ready { pipe: self, slot }
    }

    /// Fills buffer `issued % STAGES` through `fill`, then commits (cp.async) or announces
    /// the bytes (bulk), and counts the stage.
    #[inline(always)]
    fn fill(&self, fill: impl FnOnce(&mut Copier<'_, T, LEN, K>)) {
        let n = self.issued.get();
        let slot = n as usize % STAGES;
        let (rank, threads) = rank_and_size();
        let barrier = MBarrier::in_shared(self.barriers, slot);
        let mut copier = Copier {
            // SAFETY: `slot < STAGES`.
            stage: unsafe { self.stages.as_ptr().add(slot) } as *mut T,
            barrier,
            rank,
            threads,
            bytes: 0,
            _p: PhantomData,
        };
        K::begin_fill(rank);
        fill(&mut copier);
        K::end_fill(barrier, rank, copier.bytes);
        self.issued.set(n + 1);
    }
}

/// A stage whose copies are complete: the only way to its data. Returned by
/// [`Pipeline::wait`]; it borrows the pipeline, so the buffer is not refilled while it lives.
pub struct Ready<'a, T, const LEN: usize, const STAGES: usize, K: CopyKind> {
    pipe: &'a mut Pipeline<T, LEN, STAGES, K>,
    slot: usize,
}

impl<T: DeviceCopy + Copy, const LEN: usize, const STAGES: usize, K: CopyKind>
    Ready<'_, T, LEN, STAGES, K>
{
    /// The stage's elements.
    #[inline(always)]
    pub fn data(&self) -> &[T; LEN] {
        // SAFETY: the stage's copies completed and are visible to every thread (the wait);
        // no copy writes this buffer while `self` lives (the pipeline is borrowed, and
        // `refill` targets another buffer), and nothing else writes it.
        unsafe { &*self.pipe.stages.as_ptr().add(self.slot) }
    }

    /// Which of the `STAGES` buffers this stage is in.
    #[inline(always)]
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Issues the next stage (as [`Pipeline::issue`]) into the buffer freed by this wait,
    /// never this stage's own: at most `STAGES - 1` stages ahead of this one.
    #[inline(always)]
    pub fn refill(&self, fill: impl FnOnce(&mut Copier<'_, T, LEN, K>)) {
        let p = &*self.pipe;
        assert!(
            p.issued.get() - p.consumed < STAGES as u32 - 1,
            "Ready::refill: the next buffer is this stage's own; wait for the next stage first"
        );
        p.fill(fill);
    }
}

/// Copies into the stage being issued, each thread its share (`cp.async`) or lanes of
/// warp 0 row by row (bulk). Destinations are element offsets in the stage; sources are
/// bounds-checked slices.
pub struct Copier<'a, T, const LEN: usize, K> {
    stage: *mut T,
    barrier: MBarrier,
    rank: u32,
    threads: u32,
    /// Bytes copied by the whole block into the stage (the same in every thread).
    bytes: u32,
    _p: PhantomData<(&'a mut [T; LEN], K)>,
}

impl<T: DeviceCopy + Copy, const LEN: usize, K: CopyKind> Copier<'_, T, LEN, K> {
    /// Copies `src` to elements `at..at + src.len()` of the stage.
    #[inline(always)]
    pub fn slice(&mut self, at: usize, src: &[T]) {
        let aligned = aligned16(src.as_ptr(), 0);
        // SAFETY: the one row is `src`, aligned as just checked.
        unsafe { self.rows_at(at, src.len(), 1, |_| src.as_ptr(), aligned) }
    }

    /// Copies `rows` rows of `row_len` elements, row `r` from `src[start(r)..][..row_len]`,
    /// to the stage packed from element `at` (row `r` at `at + r * row_len`). Panics (traps)
    /// when a row is outside `src` or the rows outside the stage.
    #[inline(always)]
    pub fn rows(
        &mut self,
        at: usize,
        row_len: usize,
        rows: usize,
        src: &[T],
        start: impl Fn(usize) -> usize,
    ) {
        let row = |r: usize| checked_row(src, start(r), row_len);
        // SAFETY: `checked_row` keeps each row inside `src`; alignment is checked piece by
        // piece.
        unsafe { self.rows_at(at, row_len, rows, row, false) }
    }

    /// As [`Copier::rows`], row `r` read from `row(r)`; `aligned` says every row starts on
    /// 16 bytes (the sources know it from their base and stride, so the `cp.async` pieces
    /// need no alignment check, nor the fallback that would sit beside each copy).
    ///
    /// # Safety
    /// Each `row(r)` for `r < rows` must be valid for reads of `row_len` elements until the
    /// stage's wait, and 16-byte aligned when `aligned`.
    #[inline(always)]
    pub(crate) unsafe fn rows_at(
        &mut self,
        at: usize,
        row_len: usize,
        rows: usize,
        row: impl Fn(usize) -> *const T,
        aligned: bool,
    ) {
        assert!(
            rows == 0 || (at <= LEN && row_len <= (LEN - at) / rows),
            "Copier::rows: the rows do not fit in the stage"
        );
        let row_bytes = row_len * size_of::<T>();
        // SAFETY: `at <= LEN`.
        let dst = unsafe { self.stage.add(at) } as usize;
        let copy = super::kind::RowCopy {
            dst,
            row_bytes,
            rows,
            aligned,
            rank: self.rank,
            threads: self.threads,
            barrier: self.barrier,
        };
        // SAFETY: the rows are readable (the caller) and lie in the stage (checked above),
        // whose buffer no thread reads before this stage's wait.
        self.bytes += unsafe { K::copy_rows(copy, row) };
    }
}

/// The address of `src[s..s + len]`, which must lie in `src` (else a panic: a trap on the
/// GPU).
#[inline(always)]
pub(crate) fn checked_row<T>(src: &[T], s: usize, len: usize) -> *const T {
    assert!(
        s <= src.len() && len <= src.len() - s,
        "Copier::rows: a row is outside the source slice"
    );
    // SAFETY: checked just above.
    unsafe { src.as_ptr().add(s) }
}

/// Whether element `first` of the slice at `base` starts on 16 bytes.
#[inline(always)]
pub(crate) fn aligned16<T>(base: *const T, first: usize) -> bool {
    (base as usize + first * size_of::<T>()) % 16 == 0
}
