//! Per-block shared memory (`shared_array!`) and its race detector.
//!
//! Each `shared_array!` call site is one allocation per block, made the first time a thread
//! of the block reaches it. Each element has a shadow recording the last writer and the
//! readers of the current barrier epoch; two different threads touching an element in one
//! epoch, at least one of them writing, is a data race (the program needs a `sync_threads`
//! between them), unless both are lanes of one warp with a `warp::sync` between the two
//! accesses (`bar.warp.sync` orders the memory accesses of the warp's lanes).

use std::alloc::{alloc, dealloc, Layout};

/// A race found by [`SharedMemory::access`], raised as the kernel thread's unwind payload
/// and turned into [`crate::EmuError::DataRace`] by the scheduler.
#[derive(Debug, Clone)]
pub(crate) struct RaceReport {
    pub site: &'static str,
    pub index: usize,
    pub kind: &'static str,
    /// Linear index of the other thread (`None`: several threads read it).
    pub other: Option<u32>,
}

/// A read of an element no thread of the block had written, turned into
/// [`crate::EmuError::UninitializedRead`].
#[derive(Debug, Clone)]
pub(crate) struct UninitReport {
    pub site: &'static str,
    pub index: usize,
    /// Linear index of the reading thread.
    pub reader: u32,
}

/// What an access to shared memory can reveal.
#[derive(Debug, Clone)]
pub(crate) enum SharedReport {
    Race(RaceReport),
    Uninit(UninitReport),
}

#[derive(Clone, Copy, Default)]
struct Shadow {
    /// Written by an asynchronous copy that completed on an mbarrier: initialised, with no
    /// thread as its writer (its readers are ordered after it by their wait).
    filled: bool,
    writer: u32, // linear thread + 1; 0 = none
    write_epoch: u64,
    /// The writer's warp's `warp::sync` count at the write.
    write_sync: u64,
    reader: u32, // linear thread + 1; 0 = none; SEVERAL = more than one
    read_epoch: u64,
    /// The readers' warp (`MIXED`: readers of several warps) and its `warp::sync` count at
    /// the last read.
    read_warp: u32,
    read_sync: u64,
}

const SEVERAL: u32 = u32::MAX;
const MIXED: u32 = u32::MAX;

/// When an access happens: the block's barrier epoch and the accessing warp's `warp::sync`
/// count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct When {
    pub epoch: u64,
    pub warp_sync: u64,
}

/// Whether an earlier access by warp `warp` at its sync count `sync` is ordered before an
/// access of thread `me` now: the same warp, with a `warp::sync` passed since.
fn warp_ordered(warp: u32, sync: u64, me: u32, now: When) -> bool {
    warp == me / 32 && now.warp_sync > sync
}

struct Allocation {
    symbol: &'static str,
    site: &'static str,
    ptr: *mut u8,
    layout: Layout,
    /// Bytes per element (0 for zero-sized elements).
    elem: usize,
    shadow: Vec<Shadow>,
}

impl Allocation {
    /// Whether `[addr, addr + bytes)` lies inside this array.
    fn holds(&self, addr: usize, bytes: usize) -> bool {
        let start = self.ptr as usize;
        addr >= start && addr + bytes <= start + self.layout.size()
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: allocated in `SharedMemory::get` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

#[derive(Default)]
pub(crate) struct SharedMemory {
    allocations: Vec<Allocation>,
    /// Reads of elements no thread had written yet, in this barrier interval: a write by
    /// another thread before the next barrier makes one a data race, otherwise it is an
    /// uninitialised read ([`SharedMemory::uninitialised_read`]).
    pending: Vec<UninitReport>,
}

impl SharedMemory {
    /// The block's array for the `shared_array!` call site `symbol` (allocated on first use).
    pub fn get(
        &mut self,
        symbol: &'static str,
        site: &'static str,
        bytes: usize,
        align: usize,
        elem: usize,
    ) -> *mut u8 {
        if let Some(a) = self.allocations.iter().find(|a| a.symbol == symbol) {
            return a.ptr;
        }
        let layout = Layout::from_size_align(bytes.max(1), align.max(16))
            .expect("shared_array! size and alignment form a valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(layout) };
        assert!(
            !ptr.is_null(),
            "out of host memory for shared_array! ({bytes} bytes)"
        );
        // Zeros: a valid value of every element type (a `bool` from 0xff bytes would be
        // undefined behaviour here); reading an element before any write is reported.
        // SAFETY: `ptr` is valid for `layout.size()` bytes.
        unsafe { ptr.write_bytes(0, layout.size()) };
        self.allocations.push(Allocation {
            symbol,
            site,
            ptr,
            layout,
            elem,
            shadow: Vec::new(),
        });
        ptr
    }

    /// The byte range of element `index` of the array at `base`, or `None` when `base` is
    /// not one of this block's `shared_array!`s.
    pub fn element_bytes(&self, base: *const u8, index: usize) -> Option<(usize, usize)> {
        let a = (self.allocations.iter()).find(|a| std::ptr::eq(a.ptr, base))?;
        let start = a.ptr as usize + index * a.elem;
        Some((start, start + a.elem))
    }

    /// Whether `[addr, addr + bytes)` lies inside one of this block's `shared_array!`s.
    pub fn holds(&self, addr: usize, bytes: usize) -> bool {
        self.allocations.iter().any(|a| a.holds(addr, bytes))
    }

    /// An asynchronous copy by thread `me` into `[addr, addr + bytes)` starts: it writes
    /// the elements it covers whole, so a read or write of them by another thread in this
    /// barrier interval is a race (the check of [`SharedMemory::access`]). Elements it covers
    /// in part (a stage of a typed pipeline is one element, filled by many threads) are not
    /// checked.
    pub fn async_write_starts(
        &mut self,
        addr: usize,
        bytes: usize,
        me: u32,
        now: When,
    ) -> Result<(), SharedReport> {
        let Some((base, len, whole, _)) = self.covered(addr, bytes) else {
            return Ok(());
        };
        for index in whole {
            self.access(base, len, index, true, me, now)?;
        }
        Ok(())
    }

    /// An asynchronous copy into `[addr, addr + bytes)` is complete for its readers: the
    /// elements it covers are initialised, written by `writer` at `now` (a `cp.async`, which
    /// other threads see after a barrier) or by no thread (a bulk copy, whose readers wait on
    /// its mbarrier).
    pub fn async_write_lands(&mut self, addr: usize, bytes: usize, writer: Option<u32>, now: When) {
        let Some((base, len, whole, touched)) = self.covered(addr, bytes) else {
            return;
        };
        for index in touched {
            let Some((_, s)) = self.shadow(base, len, index) else {
                continue;
            };
            s.filled = true;
            match writer {
                Some(w) if whole.contains(&index) => {
                    s.writer = w + 1;
                    s.write_epoch = now.epoch;
                    s.write_sync = now.warp_sync;
                }
                _ => s.writer = 0,
            }
        }
    }

    /// The array holding `[addr, addr + bytes)`: its base, its length, the elements the
    /// range covers whole and those it touches.
    #[allow(clippy::type_complexity)]
    fn covered(
        &self,
        addr: usize,
        bytes: usize,
    ) -> Option<(
        *const u8,
        usize,
        std::ops::Range<usize>,
        std::ops::Range<usize>,
    )> {
        let a = self.allocations.iter().find(|a| a.holds(addr, bytes))?;
        if a.elem == 0 || bytes == 0 {
            return None;
        }
        let (off, len) = (addr - a.ptr as usize, a.layout.size() / a.elem);
        let whole = off.div_ceil(a.elem)..(off + bytes) / a.elem;
        let touched = off / a.elem..(off + bytes).div_ceil(a.elem);
        Some((a.ptr as *const u8, len, whole, touched))
    }

    /// Records that thread `me` (linear index) reads or writes element `index` of the
    /// `len`-element array at `base`, at `now`.
    pub fn access(
        &mut self,
        base: *const u8,
        len: usize,
        index: usize,
        write: bool,
        me: u32,
        now: When,
    ) -> Result<(), SharedReport> {
        let epoch = now.epoch;
        let Some((site, s)) = self.shadow(base, len, index) else {
            return Ok(()); // not a shared_array! allocation of this block
        };
        let me1 = me + 1;
        let never_written = !write && s.writer == 0 && !s.filled;
        let race = |kind, other: u32| {
            SharedReport::Race(RaceReport {
                site,
                index,
                kind,
                other: (other != SEVERAL).then(|| other - 1),
            })
        };
        let write_ordered =
            s.writer != 0 && warp_ordered((s.writer - 1) / 32, s.write_sync, me, now);
        if s.write_epoch == epoch && s.writer != 0 && s.writer != me1 && !write_ordered {
            return Err(race(
                if write {
                    "write after write"
                } else {
                    "read after write"
                },
                s.writer,
            ));
        }
        if write {
            let reads_ordered = warp_ordered(s.read_warp, s.read_sync, me, now);
            if s.read_epoch == epoch && s.reader != 0 && s.reader != me1 && !reads_ordered {
                return Err(race("write after read", s.reader));
            }
            s.writer = me1;
            s.write_epoch = epoch;
            s.write_sync = now.warp_sync;
        } else if s.read_epoch != epoch {
            s.reader = me1;
            s.read_epoch = epoch;
            s.read_warp = me / 32;
            s.read_sync = now.warp_sync;
        } else {
            if s.reader != me1 {
                s.reader = SEVERAL;
            }
            if s.read_warp != me / 32 {
                s.read_warp = MIXED;
            }
            s.read_sync = now.warp_sync;
        }
        if never_written {
            self.pending.push(UninitReport {
                site,
                index,
                reader: me,
            });
        }
        Ok(())
    }

    /// At a barrier or the block's end: the first read of an element that no thread had
    /// written (and no other thread wrote before this point, which would have been a race).
    pub fn uninitialised_read(&mut self) -> Option<UninitReport> {
        let first = self.pending.first().cloned();
        self.pending.clear();
        first
    }

    /// An atomic operation on element `index`: it reads the element, which must have been
    /// written (atomics do not race, so nothing else is recorded).
    pub fn atomic(
        &mut self,
        base: *const u8,
        len: usize,
        index: usize,
        me: u32,
    ) -> Result<(), SharedReport> {
        let Some((site, s)) = self.shadow(base, len, index) else {
            return Ok(());
        };
        if s.writer == 0 && !s.filled {
            return Err(SharedReport::Uninit(UninitReport {
                site,
                index,
                reader: me,
            }));
        }
        Ok(())
    }

    /// The declaration site and shadow of element `index` of the array at `base`, or `None`
    /// when `base` is not one of this block's `shared_array!`s.
    fn shadow(
        &mut self,
        base: *const u8,
        len: usize,
        index: usize,
    ) -> Option<(&'static str, &mut Shadow)> {
        let a = (self.allocations.iter_mut()).find(|a| std::ptr::eq(a.ptr, base))?;
        if a.shadow.len() < len {
            a.shadow.resize(len, Shadow::default());
        }
        let site = a.site;
        a.shadow.get_mut(index).map(|s| (site, s))
    }
}
