//! Prefetch instructions. They are hints: no fault, no result, no effect on correctness.
//!
//! | function | PTX | needs |
//! | --- | --- | --- |
//! | [`prefetch_l1`] | `prefetch.global.L1` | any |
//! | [`prefetch_l2`] | `prefetch.global.L2` | any |
//! | [`prefetch_l2_evict_last`] | `prefetch.global.L2::evict_last` | sm_80 |
//! | [`prefetch_l2_evict_normal`] | `prefetch.global.L2::evict_normal` | sm_80 |
//! | [`apply_priority_evict_normal`] | `applypriority.global.L2::evict_normal` | sm_80 |
//! | [`bulk_prefetch_l2`] (raw) / [`bulk_prefetch_slice`] | `cp.async.bulk.prefetch.L2.global` | sm_90 |
//! | [`bulk_prefetch_slice_portable`] | bulk on sm_90, one `prefetch.global.L2` per 128-byte line below | any |
//!
//! Calling a function the target architecture lacks is a compile error naming the
//! architecture needed ("needs sm_90 (Hopper) or newer"), raised when the call is compiled
//! for that architecture; the `_portable` forms fall back instead.
//!
//! **Managed memory.** On the H100 (driver 580.159.04) none of these instructions migrates
//! Unified Memory pages (`docs/unified-memory.md`). The prefetch helpers
//! for [`MemoryKind::Managed`] views (used by `#[prefetch_next]`) therefore emit the plain
//! `prefetch.global.L2` whatever level was asked for: it is cheap and harmless (a bulk
//! prefetch of non-resident pages can stall), but it does not move pages to the GPU. What
//! does is a request to the host: with `#[prefetch_next(queue = q)]` the loop publishes the
//! range iteration `i + distance` reads on a [`crate::uvm::RequestQueue`] and waits for the
//! current iteration's range instead ([`crate::uvm::loops`]).
//!
//! **Ranges.** [`PrefetchPart::part`] / [`PrefetchPart::at`] name a sub-range of a slice or
//! view that keeps its [`MemoryKind`], for `#[prefetch_next(of(...))]` targets such as
//! `of(lists.part(a..b))`.

use crate::view::{DeviceSlice, DeviceSliceMut, ManagedSlice, ManagedSliceMut, MemoryKind};

/// Bytes per cache line, the step of per-line prefetch loops.
pub const LINE_BYTES: usize = 128;

// The prefetch `asm!` blocks are not marked `readonly`: with it LLVM may schedule the loop's
// own loads above the prefetch (both only read), so the hint is issued after the data it should
// overlap (measured 18% slower on `reduce_bulk_d4`, see docs/rust-vs-cuda.md). Without it the
// asm is ordered against memory accesses, as `asm volatile` is in CUDA C++.
#[cfg(not(target_arch = "nvptx64"))]
pub(crate) use lookahead_emu::{hooks, Instruction};

macro_rules! prefetch_insn {
    ($(#[$doc:meta])* $name:ident, $insn:literal, $emu:ident $(, needs $feature:literal, $msg:literal)?) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name<T>(ptr: *const T) {
            $(needs_arch!($feature, $msg);)?
            gpu_or_host!(
                // SAFETY: a prefetch of any address is a hint and cannot fault.
                unsafe {
                    core::arch::asm!(concat!($insn, " [{p}];"), p = in(reg64) ptr, options(nostack, preserves_flags))
                },
                hooks::prefetch(Instruction::$emu, ptr as usize, 1)
            )
        }
    };
}

prefetch_insn!(
    /// Brings the line holding `ptr` into L1 (`prefetch.global.L1`, any architecture).
    prefetch_l1, "prefetch.global.L1", L1
);
prefetch_insn!(
    /// Brings the line holding `ptr` into L2 (`prefetch.global.L2`, any architecture).
    prefetch_l2, "prefetch.global.L2", L2
);
prefetch_insn!(
    /// Brings the line into L2 with the evict-last priority (`prefetch.global.L2::evict_last`).
    prefetch_l2_evict_last, "prefetch.global.L2::evict_last", L2EvictLast,
    needs "sm_80", "prefetch_l2_evict_last (prefetch.global.L2::evict_last) needs sm_80 (Ampere) or newer; use prefetch_l2 on older GPUs"
);
prefetch_insn!(
    /// Brings the line into L2 with the normal eviction priority (`prefetch.global.L2::evict_normal`).
    prefetch_l2_evict_normal, "prefetch.global.L2::evict_normal", L2EvictNormal,
    needs "sm_80", "prefetch_l2_evict_normal (prefetch.global.L2::evict_normal) needs sm_80 (Ampere) or newer; use prefetch_l2 on older GPUs (normal priority is what it gives anyway)"
);

/// Resets the L2 eviction priority of the 128-byte line at `ptr` to normal
/// (`applypriority.global.L2::evict_normal`, sm_80 and later), undoing an earlier
/// `evict_last`.
#[inline(always)]
pub fn apply_priority_evict_normal<T>(ptr: *const T) {
    needs_arch!(
        "sm_80",
        "apply_priority_evict_normal (applypriority) needs sm_80 (Ampere) or newer; older GPUs have no eviction priorities to reset, so leave the call out there (`#[cfg(target_feature = \"sm_80\")]`)"
    );
    // SAFETY: a cache-priority hint cannot fault.
    gpu_or_host!(
        unsafe {
            core::arch::asm!("applypriority.global.L2::evict_normal [{p}], 128;", p = in(reg64) ptr, options(nostack, preserves_flags))
        },
        // A cache-priority change has no meaning on the host.
        {
            let _ = ptr;
        }
    )
}

/// Asks the bulk-copy engine to prefetch `bytes` bytes at `ptr` into L2
/// (`cp.async.bulk.prefetch.L2.global`, sm_90 and later). Prefer [`bulk_prefetch_slice`].
///
/// # Safety
/// `ptr` must be 16-byte aligned and `bytes` a non-zero multiple of 16; the range must
/// lie in global memory.
#[inline(always)]
pub unsafe fn bulk_prefetch_l2<T>(ptr: *const T, bytes: u32) {
    needs_arch!(
        "sm_90",
        "bulk_prefetch_l2 (cp.async.bulk.prefetch.L2.global) needs sm_90 (Hopper) or newer; use bulk_prefetch_slice_portable to fall back to per-line prefetches"
    );
    gpu_or_host!(
        core::arch::asm!("cp.async.bulk.prefetch.L2.global [{p}], {n};", p = in(reg64) ptr, n = in(reg32) bytes, options(nostack, preserves_flags)),
        hooks::prefetch(Instruction::BulkL2, ptr as usize, bytes as usize)
    )
}

/// The 16-byte-aligned cover `[start, end)` of `bytes` bytes at `addr`: the bulk prefetch
/// needs an aligned address and a size that is a multiple of 16, so the range is widened
/// to whole 16-byte units (which never leaves the pages the range touches).
#[inline(always)]
pub const fn bulk_cover(addr: usize, bytes: usize) -> (usize, usize) {
    (addr & !15, (addr + bytes + 15) & !15)
}

/// Largest piece one `cp.async.bulk.prefetch` is given (a multiple of 16 that fits in u32).
pub const BULK_PIECE: usize = 1 << 30;

#[inline(always)]
fn bulk_bytes(addr: usize, bytes: usize) {
    if bytes == 0 {
        return;
    }
    let (mut start, end) = bulk_cover(addr, bytes);
    while start < end {
        let n = if end - start < BULK_PIECE {
            end - start
        } else {
            BULK_PIECE
        };
        // SAFETY: aligned to 16, a non-zero multiple of 16, inside the pages of the range.
        unsafe { bulk_prefetch_l2(start as *const u8, n as u32) };
        start += n;
    }
}

/// One per-line prefetch for every 128-byte line `[addr, addr + bytes)` touches: the first at
/// `addr` itself, the others at the start of each following line, so every address issued
/// lies inside the range.
#[inline(always)]
fn lines(addr: usize, bytes: usize, each: impl Fn(*const u8)) {
    if bytes == 0 {
        return;
    }
    each(addr as *const u8);
    let mut line = (addr & !(LINE_BYTES - 1)) + LINE_BYTES;
    let end = addr + bytes;
    while line < end {
        each(line as *const u8);
        line += LINE_BYTES;
    }
}

/// The one or two lines of one element of at most a line: no loop, so a hint on one
/// element costs an instruction or two, not a line loop's dozens.
#[inline(always)]
fn element_lines(addr: usize, bytes: usize, each: impl Fn(*const u8)) {
    if bytes == 0 {
        return;
    }
    each(addr as *const u8);
    let last = addr + bytes - 1;
    if last / LINE_BYTES != addr / LINE_BYTES {
        each((last & !(LINE_BYTES - 1)) as *const u8);
    }
}

/// Prefetches all of `data` into L2 with `cp.async.bulk.prefetch.L2.global` (sm_90 and
/// later), widening the range to 16-byte alignment and splitting pieces larger than
/// [`BULK_PIECE`] itself.
#[inline(always)]
pub fn bulk_prefetch_slice<T>(data: &[T]) {
    needs_arch!(
        "sm_90",
        "bulk_prefetch_slice (cp.async.bulk.prefetch.L2.global) needs sm_90 (Hopper) or newer; use bulk_prefetch_slice_portable to fall back to per-line prefetches"
    );
    bulk_bytes(data.as_ptr() as usize, core::mem::size_of_val(data))
}

/// [`bulk_prefetch_slice`] on sm_90 and later; one `prefetch.global.L2` per 128-byte line on
/// older architectures.
#[inline(always)]
pub fn bulk_prefetch_slice_portable<T>(data: &[T]) {
    region_l2_bulk_portable(data.as_ptr() as usize, core::mem::size_of_val(data));
}

#[inline(always)]
fn region_l2_bulk_portable(addr: usize, bytes: usize) {
    // The emulator (host) models an sm_90 GPU.
    #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
    bulk_bytes(addr, bytes);
    #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_90")))]
    lines(addr, bytes, prefetch_l2);
}

/// Prefetch levels `#[prefetch_next]` can ask for, in the order a `level = auto` kernel
/// lists its entries and the host's tuner its candidates. The variants, their names,
/// instructions and codes come from the table of levels in `lookahead-macros`, which
/// `#[prefetch_next]` parses with: the one list of them.
#[lookahead_macros::prefetch_levels]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {}

/// Something `#[prefetch_next]` can prefetch from: a slice or one of the [`crate::view`]
/// types. `KIND` says which memory it is in, so managed memory gets its own mechanism.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not data `#[prefetch_next]` can fetch ahead",
    label = "not a slice or view of GPU-visible memory",
    note = "prefetch targets are the kernel's slices and views (`&[T]`, `&mut [T]`, `DeviceSlice<T>`, `ManagedSlice<T>`...) or parts of them (`x.part(a..b)`, `x.at(k)`); a local array or value lives in registers or the thread's stack and has nothing to fetch"
)]
pub trait PrefetchSource {
    /// Which memory the data lives in.
    const KIND: MemoryKind;
    /// Whether the region is at most one element ([`PrefetchPart::at`]): a prefetch of it
    /// needs no loop over cache lines.
    const AT_MOST_ONE: bool = false;
    /// The alignment of the elements' addresses: an element whose size is a power of two no
    /// larger than its alignment never straddles two cache lines.
    const ELEM_ALIGN: usize = 1;
    /// (first element's address, number of elements, bytes per element).
    fn region(&self) -> (usize, usize, usize);

    /// [`prefetch_index`] as a method: `#[prefetch_next]` calls these, so a target that is
    /// not a `PrefetchSource` gets this trait's message and nothing about the function.
    #[doc(hidden)]
    #[inline(always)]
    fn prefetch_element(&self, index: usize, level: Level) {
        prefetch_index(self, index, level)
    }

    /// [`prefetch_all`] as a method (see [`PrefetchSource::prefetch_element`]).
    #[doc(hidden)]
    #[inline(always)]
    fn prefetch_whole(&self, level: Level) {
        prefetch_all(self, level)
    }
}

// Not listed under an unmet bound: the trait's note says what a target may be.
#[diagnostic::do_not_recommend]
impl<T> PrefetchSource for [T] {
    const KIND: MemoryKind = MemoryKind::Device;
    const ELEM_ALIGN: usize = core::mem::align_of::<T>();
    #[inline(always)]
    fn region(&self) -> (usize, usize, usize) {
        (
            self.as_ptr() as usize,
            self.len(),
            core::mem::size_of::<T>(),
        )
    }
}

// Not listed under an unmet bound: the trait's note says what a target may be.
#[diagnostic::do_not_recommend]
impl<S: PrefetchSource + ?Sized> PrefetchSource for &S {
    const KIND: MemoryKind = S::KIND;
    const AT_MOST_ONE: bool = S::AT_MOST_ONE;
    const ELEM_ALIGN: usize = S::ELEM_ALIGN;
    #[inline(always)]
    fn region(&self) -> (usize, usize, usize) {
        (**self).region()
    }
}

// Not listed under an unmet bound: the trait's note says what a target may be.
#[diagnostic::do_not_recommend]
impl<S: PrefetchSource + ?Sized> PrefetchSource for &mut S {
    const KIND: MemoryKind = S::KIND;
    const AT_MOST_ONE: bool = S::AT_MOST_ONE;
    const ELEM_ALIGN: usize = S::ELEM_ALIGN;
    #[inline(always)]
    fn region(&self) -> (usize, usize, usize) {
        (**self).region()
    }
}

macro_rules! view_source {
    ($($t:ident),*) => {$(
        // Not listed under an unmet bound: the trait's note says what a target may be.
        #[diagnostic::do_not_recommend]
        impl<T> PrefetchSource for $t<T> {
            const KIND: MemoryKind = $t::<T>::KIND;
            const ELEM_ALIGN: usize = core::mem::align_of::<T>();
            #[inline(always)]
            fn region(&self) -> (usize, usize, usize) {
                (self.as_ptr() as usize, self.len(), core::mem::size_of::<T>())
            }
        }
    )*};
}
view_source!(DeviceSlice, DeviceSliceMut, ManagedSlice, ManagedSliceMut);

/// The address range of elements `[first, first + count)` of `src`, clamped to its length;
/// `None` when nothing of it is inside. Never points past the data.
#[inline(always)]
pub fn clamp_range<S: PrefetchSource + ?Sized>(
    src: &S,
    first: usize,
    count: usize,
) -> Option<(usize, usize)> {
    let (addr, len, size) = src.region();
    if first >= len || count == 0 || size == 0 {
        return None;
    }
    let count = if count > len - first {
        len - first
    } else {
        count
    };
    Some((addr + first * size, count * size))
}

/// Prefetches elements `[first, first + count)` of `src` (clamped to its length) at
/// `level`; `portable` allows falling back on architectures without the level's
/// instruction (`#[prefetch_next]` rejects non-portable requests for them at compile time).
/// Managed memory always gets `prefetch.global.L2` (see the module docs).
#[inline(always)]
pub fn prefetch_range<S: PrefetchSource + ?Sized>(
    src: &S,
    first: usize,
    count: usize,
    level: Level,
) {
    let Some((addr, bytes)) = clamp_range(src, first, count) else {
        return;
    };
    let (_, _, size) = src.region();
    let lines = |addr: usize, bytes: usize, each: fn(*const u8)| {
        if S::AT_MOST_ONE && size.is_power_of_two() && size <= S::ELEM_ALIGN.min(LINE_BYTES) {
            // One aligned element of at most a line: one line.
            if bytes > 0 {
                each(addr as *const u8)
            }
        } else if S::AT_MOST_ONE && size <= LINE_BYTES {
            element_lines(addr, bytes, each)
        } else {
            lines(addr, bytes, each)
        }
    };
    if matches!(S::KIND, MemoryKind::Managed) {
        // Unified Memory: the in-kernel instructions do not migrate pages on the H100 (see
        // the module docs), so whatever the level, the cheap and harmless plain L2 hint.
        lines(addr, bytes, prefetch_l2);
        return;
    }
    match level {
        Level::L1 => lines(addr, bytes, prefetch_l1),
        Level::L2 => lines(addr, bytes, prefetch_l2),
        Level::L2EvictLast => {
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
            lines(addr, bytes, prefetch_l2_evict_last);
            #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_80")))]
            lines(addr, bytes, prefetch_l2);
        }
        Level::L2EvictNormal => {
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
            lines(addr, bytes, prefetch_l2_evict_normal);
            #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_80")))]
            lines(addr, bytes, prefetch_l2);
        }
        Level::Bulk => region_l2_bulk_portable(addr, bytes),
    }
}

/// Prefetches all of `src` at `level` (a `#[prefetch_next(of(...))]` target that names the
/// whole range an iteration reads, such as `of(x.part(a..b))`).
#[inline(always)]
pub fn prefetch_all<S: PrefetchSource + ?Sized>(src: &S, level: Level) {
    let (_, len, _) = src.region();
    prefetch_range(src, 0, len, level);
}

/// The elements `(first, count)` of chunk `chunk` of `len` elements cut into chunks of `size`
/// (as `chunks(size)`, or `chunks_exact(size)` when `exact`, which leaves the remainder out),
/// or `None` when that chunk is not iterated.
#[inline(always)]
pub fn chunk_bounds(chunk: usize, size: usize, len: usize, exact: bool) -> Option<(usize, usize)> {
    let first = chunk.checked_mul(size)?;
    if size == 0 || first >= len {
        return None;
    }
    let rest = len - first;
    if rest >= size {
        Some((first, size))
    } else if exact {
        None
    } else {
        Some((first, rest))
    }
}

/// Prefetches chunk `chunk` of `src` cut into chunks of `size` elements (see
/// [`chunk_bounds`]); nothing when that chunk is not iterated.
#[inline(always)]
pub fn prefetch_chunk<S: PrefetchSource + ?Sized>(
    src: &S,
    chunk: usize,
    size: usize,
    exact: bool,
    level: Level,
) {
    let (_, len, _) = src.region();
    if let Some((first, count)) = chunk_bounds(chunk, size, len, exact) {
        prefetch_range(src, first, count, level);
    }
}

/// Prefetches element `index` of `src` at `level` (one instruction at the element's
/// address), or nothing when `index` is past its end.
#[inline(always)]
pub fn prefetch_index<S: PrefetchSource + ?Sized>(src: &S, index: usize, level: Level) {
    let (addr, len, size) = src.region();
    if index >= len || size == 0 {
        return;
    }
    let p = (addr + index * size) as *const u8;
    if matches!(S::KIND, MemoryKind::Managed) {
        // See `prefetch_range`: managed memory gets the plain L2 hint.
        prefetch_l2(p);
        return;
    }
    match level {
        Level::L1 => prefetch_l1(p),
        Level::L2 => prefetch_l2(p),
        Level::L2EvictLast => {
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
            prefetch_l2_evict_last(p);
            #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_80")))]
            prefetch_l2(p);
        }
        Level::L2EvictNormal => {
            #[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_80"))]
            prefetch_l2_evict_normal(p);
            #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_80")))]
            prefetch_l2(p);
        }
        Level::Bulk => region_l2_bulk_portable(p as usize, size),
    }
}

/// Integer types a `#[prefetch_next]` range loop can count with; [`index_like`] converts
/// the `usize` index of a later iteration back to the loop variable's type.
#[doc(hidden)]
pub trait LoopIndex: Copy {
    /// `v` as this type (`as` conversion: `v` is a value the loop itself reaches).
    fn from_usize(v: usize) -> Self;
}

macro_rules! loop_index {
    ($($t:ty),*) => {$(
        impl LoopIndex for $t {
            #[inline(always)]
            fn from_usize(v: usize) -> Self {
                v as $t
            }
        }
    )*};
}
loop_index!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// `v` in the type of `like` (the loop variable's): how `#[prefetch_next]` evaluates an
/// `of(expr)` target that mentions the loop variable for iteration `i + distance`.
#[doc(hidden)]
#[inline(always)]
pub fn index_like<T: LoopIndex>(v: usize, like: &T) -> T {
    let _ = like;
    T::from_usize(v)
}

// ---------------------------------------------------------------------------------------

/// Sub-ranges of a slice or view that keep its [`MemoryKind`], for `#[prefetch_next]`
/// targets: `of(lists.part(a..b))` prefetches (or, with `queue`, requests) elements `a..b`
/// of `lists` for iteration `i + distance`, evaluating `a` and `b` for that iteration.
/// (`&lists[a..b]` would also work, but is a plain `[T]`: managed memory would not be
/// recognised.) Implemented for every [`PrefetchSource`].
pub trait PrefetchPart: PrefetchSource {
    /// Elements `range` of `self`, clamped to its length (an empty or reversed range is an
    /// empty part, which nothing is prefetched from).
    #[inline(always)]
    fn part(&self, range: core::ops::Range<usize>) -> Snapshot<Self> {
        let (addr, len, size) = self.region();
        let start = if range.start < len { range.start } else { len };
        let end = if range.end < start {
            start
        } else if range.end > len {
            len
        } else {
            range.end
        };
        Snapshot {
            region: (addr + start * size, end - start, size),
            _source: core::marker::PhantomData,
        }
    }

    /// Element `index` of `self` alone (empty when `index` is past the end). Its prefetch
    /// touches the one or two lines the element lies in, with no loop.
    #[inline(always)]
    fn at(&self, index: usize) -> Element<Self> {
        Element(self.part(index..index.saturating_add(1)))
    }
}

/// One element of a slice or view ([`PrefetchPart::at`]), or none when the index is past its
/// end: a [`PrefetchSource`] whose prefetch needs no loop over cache lines.
#[derive(Debug)]
pub struct Element<S: ?Sized>(Snapshot<S>);

impl<S: ?Sized> Clone for Element<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: ?Sized> Copy for Element<S> {}

#[diagnostic::do_not_recommend]
impl<S: PrefetchSource + ?Sized> PrefetchSource for Element<S> {
    const KIND: MemoryKind = S::KIND;
    const AT_MOST_ONE: bool = true;
    const ELEM_ALIGN: usize = S::ELEM_ALIGN;
    #[inline(always)]
    fn region(&self) -> (usize, usize, usize) {
        self.0.region()
    }
}

impl<S: PrefetchSource + ?Sized> PrefetchPart for S {}

/// The address range of a slice or view, or of a part of one ([`PrefetchPart::part`]), taken
/// before a loop borrows it (for `iter_mut`/`chunks_mut` loops); prefetches and requests
/// through it keep the source's [`MemoryKind`].
#[derive(Debug)]
pub struct Snapshot<S: ?Sized> {
    region: (usize, usize, usize),
    _source: core::marker::PhantomData<*const S>,
}

impl<S: ?Sized> Clone for Snapshot<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: ?Sized> Copy for Snapshot<S> {}

impl<S: PrefetchSource + ?Sized> Snapshot<S> {
    /// Records where `src`'s data is.
    #[inline(always)]
    pub fn of(src: &S) -> Self {
        Snapshot {
            region: src.region(),
            _source: core::marker::PhantomData,
        }
    }
}

#[diagnostic::do_not_recommend]
impl<S: PrefetchSource + ?Sized> PrefetchSource for Snapshot<S> {
    const KIND: MemoryKind = S::KIND;
    const ELEM_ALIGN: usize = S::ELEM_ALIGN;
    #[inline(always)]
    fn region(&self) -> (usize, usize, usize) {
        self.region
    }
}

/// Marks the `#[prefetch_next]` loop iteration a thread is running, for the emulator's
/// prefetch trace (`#[prefetch_next]` creates one per iteration). On the GPU it is an empty
/// value that compiles to nothing.
#[doc(hidden)]
#[must_use]
pub struct IterationScope {
    #[cfg(not(target_arch = "nvptx64"))]
    previous: Option<usize>,
}

impl IterationScope {
    /// Enters iteration `i` until the returned scope is dropped.
    #[inline(always)]
    pub fn enter(i: usize) -> Self {
        gpu_or_host!(
            {
                let _ = i;
                IterationScope {}
            },
            IterationScope {
                previous: hooks::set_iteration(Some(i)),
            }
        )
    }
}

impl IterationScope {
    /// Marks code of a `#[prefetch_next]` loop that runs outside its iterations (the requests
    /// for the first `distance` iterations, made before the loop starts): the trace shows
    /// them with no iteration.
    #[inline(always)]
    pub fn outside() -> Self {
        gpu_or_host!(
            IterationScope {},
            IterationScope {
                previous: hooks::set_iteration(None),
            }
        )
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl Drop for IterationScope {
    fn drop(&mut self) {
        hooks::set_iteration(self.previous);
    }
}
