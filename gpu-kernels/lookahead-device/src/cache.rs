//! A software cache in device memory over data in host memory, driven by the GPU: the GPU
//! half of `lookahead-cache`.
//!
//! The data lives in pinned host memory mapped for the GPU; the cache is `slots` pages of
//! device memory. A warp that needs a page *acquires* it: if the page is resident it pins
//! its slot (a hit); if not, the warp claims the page, takes a victim slot (CLOCK: a slot
//! used since the hand last passed gets a second chance; a pinned slot is never taken),
//! copies the page over the interconnect with the whole warp, and publishes it (a miss).
//! Warps that want a page another warp is loading wait for it, so concurrent misses on one
//! page load it once. The warp reads the slot, then *releases* it.
//!
//! The tables, all `u32` in device memory, updated atomically by one lane per warp:
//!
//! | table | per | holds |
//! | --- | --- | --- |
//! | `page_slot` | page | [`ABSENT`], [`LOADING`] (claimed by a warp that is filling it), or the slot |
//! | `slot_page` | slot | the page it holds, or [`ABSENT`] (never filled) |
//! | `slot_pins` | slot | warps using it; [`LOCKED`] added while a warp refills it |
//! | `slot_used` | slot | the CLOCK count: uses since the hand last passed, up to `max_uses` |
//!
//! Why it is safe to read a slot while pinned: a victim is taken only by a CAS of its pins
//! from 0 to [`LOCKED`]; a warp pins by adding 1 and, if the old value had [`LOCKED`], backs
//! off. So a slot is refilled only when no warp holds it, and a warp that pinned a slot
//! checks that it still holds its page (`slot_page`) before reading. Data visibility: the
//! filling warp fences after its copy and releases `page_slot`; every lane of a reading warp
//! acquires `page_slot` itself after the pin.
//!
//! Rules for kernels: every acquire is warp-collective (all 32 lanes, the same page), and a
//! warp holds at most one page at a time (release before acquiring the next), so a warp
//! waiting for a victim never holds a slot another waiting warp needs: with at least one
//! slot, every acquire ends.

use crate::atomic::{AtomicAdd, AtomicCas, AtomicExchange};
use crate::index::{block_idx_x, lane_id, thread_idx_x};
use crate::memory::{load_acquire_gpu, load_relaxed_gpu};
use crate::sync::{fence_gpu, nanosleep};
use crate::uvm::pull::copy_words;
use crate::warp;

/// `page_slot`: the page is not in the cache. `slot_page`: the slot was never filled.
pub const ABSENT: u32 = u32::MAX;
/// `page_slot`: a warp is filling the page.
pub const LOADING: u32 = u32::MAX - 1;
/// Added to `slot_pins` while a warp refills the slot.
pub const LOCKED: u32 = 1 << 31;

/// Copies of [`CacheCounters`] the warps add to (the host sums them).
pub const COUNTER_STRIPES: usize = 32;

/// Counters the cache keeps in device memory (one lane per warp adds to them, in one of
/// [`COUNTER_STRIPES`] copies).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Acquires that found their page resident.
    pub hits: u64,
    /// Acquires that loaded their page.
    pub misses: u64,
    /// Pages dropped to make room.
    pub evictions: u64,
    /// Bytes copied from host memory.
    pub bytes_loaded: u64,
    /// Acquires that waited: for a page another warp was loading, or for a free slot.
    pub waits: u64,
}

/// The addresses and sizes a [`HostCached`] is made of (see [`HostCached::from_raw_parts`]).
#[derive(Debug, Clone, Copy)]
pub struct CacheParts<T> {
    /// The data, in host memory mapped for the GPU (its device address), `len` elements.
    pub backing: *const T,
    /// Elements of the data.
    pub len: usize,
    /// The slots: `slots << page_shift` elements of device memory.
    pub data: *mut T,
    /// Per page of the data: [`ABSENT`], [`LOADING`] or its slot.
    pub page_slot: *mut u32,
    /// Per slot: its page, or [`ABSENT`].
    pub slot_page: *mut u32,
    /// Per slot: pins, plus [`LOCKED`] while refilled.
    pub slot_pins: *mut u32,
    /// Per slot: the CLOCK count.
    pub slot_used: *mut u32,
    /// The CLOCK hand (one `u32`).
    pub hand: *mut u32,
    /// The counters: [`COUNTER_STRIPES`] copies.
    pub counters: *mut CacheCounters,
    /// log2 of the elements per page.
    pub page_shift: u32,
    /// Slots in the cache (at least 1).
    pub slots: u32,
    /// The most uses a slot's CLOCK count keeps: 0 evicts in the order slots were filled
    /// (FIFO), 1 is CLOCK (a slot used since the hand last passed gets a second chance), `n`
    /// counts up to `n` uses, each pass of the hand taking one (a page used often survives
    /// several passes).
    pub max_uses: u32,
}

/// A kernel's view of a cached host array of `T`: pass it by value (it is `DeviceCopy`),
/// read through [`HostCached::get`], [`HostCached::with_page`] or
/// [`HostCached::for_range`]. Built by the host (`lookahead_cache::HostCache::view`).
#[repr(C)]
#[derive(Debug)]
pub struct HostCached<T> {
    backing: *const T,
    data: *mut T,
    page_slot: *mut u32,
    slot_page: *mut u32,
    slot_pins: *mut u32,
    slot_used: *mut u32,
    hand: *mut u32,
    counters: *mut CacheCounters,
    len: u64,
    page_shift: u32,
    slots: u32,
    max_uses: u32,
    // Keeps the struct free of padding (a multiple of its 8-byte alignment).
    _reserved: u32,
}

impl<T> Clone for HostCached<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for HostCached<T> {}

// SAFETY: `#[repr(C)]` of pointers and integers, 8-byte fields then four u32: no padding;
// the same layout on the host and the GPU.
unsafe impl<T: 'static> crate::DeviceCopy for HostCached<T> {}
// SAFETY: as above.
unsafe impl<T: 'static> crate::KernelParam for HostCached<T> {}
// SAFETY: plain data with a fixed layout: cudarc may copy it byte for byte.
#[cfg(not(target_arch = "nvptx64"))]
unsafe impl<T> cudarc::driver::DeviceRepr for HostCached<T> {}
// SAFETY: the cache is a bundle of addresses shared by design between GPU threads and the
// host; every access to the tables is atomic or ordered by the protocol above.
unsafe impl<T> Send for HostCached<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for HostCached<T> {}

/// `f()` on lane 0, its result on every lane (lane 0 alone touches the tables).
#[inline(always)]
fn on_lane0(f: impl FnOnce() -> u32) -> u32 {
    let v = if lane_id() == 0 { f() } else { 0 };
    warp::shfl_idx_u32(v, 0)
}

impl<T: Copy> HostCached<T> {
    /// A view of the cache `parts` describes.
    ///
    /// # Safety
    /// Every pointer of `parts` must be valid for what its field says, in memory the GPU
    /// (or, on the emulator, the host) can access atomically, for as long as kernels use
    /// the view; the tables must start consistent (every page [`ABSENT`], every slot
    /// [`ABSENT`] with 0 pins), be used by no other protocol, and `backing` must not change
    /// while pages of it are cached. `page_shift` must make a page a multiple of 16 bytes.
    pub unsafe fn from_raw_parts(parts: CacheParts<T>) -> Self {
        HostCached {
            backing: parts.backing,
            data: parts.data,
            page_slot: parts.page_slot,
            slot_page: parts.slot_page,
            slot_pins: parts.slot_pins,
            slot_used: parts.slot_used,
            hand: parts.hand,
            counters: parts.counters,
            len: parts.len as u64,
            page_shift: parts.page_shift,
            slots: parts.slots.max(1),
            max_uses: parts.max_uses,
            _reserved: 0,
        }
    }

    /// Elements of the data.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the data is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements per page.
    pub fn page_elems(&self) -> usize {
        1 << self.page_shift
    }

    /// The data itself, in host memory: reads cross the interconnect every time and touch
    /// no cache state (zero-copy).
    pub fn uncached(&self) -> &[T] {
        // SAFETY: `backing` holds `len` elements, mapped for the GPU, not written while the
        // view is in use (`from_raw_parts`).
        unsafe { core::slice::from_raw_parts(self.backing, self.len()) }
    }

    /// Pages of the data (the last may be shorter).
    pub fn pages(&self) -> usize {
        self.len().div_ceil(self.page_elems())
    }

    /// Slots of the cache.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// The elements of `page` (all of it but for the last page).
    fn page_len(&self, page: usize) -> usize {
        (self.len() - (page << self.page_shift)).min(self.page_elems())
    }

    /// Warp-collective (all 32 lanes, the same `page`): `f` of the page's elements, read
    /// from the cache (loaded first on a miss). Do not acquire another page inside `f`.
    ///
    /// # Panics
    /// When `page` is not below [`HostCached::pages`].
    pub fn with_page<R>(&self, page: usize, f: impl FnOnce(&[T]) -> R) -> R {
        assert!(page < self.pages(), "HostCached: page out of range");
        let slot = self.acquire(page as u32);
        // SAFETY: the slot is pinned and holds `page` (acquire), whose data every lane sees.
        let elems = unsafe {
            core::slice::from_raw_parts(
                self.data.add((slot as usize) << self.page_shift),
                self.page_len(page),
            )
        };
        let r = f(elems);
        self.release(slot);
        r
    }

    /// Warp-collective (all 32 lanes, the same `range`): `f(first, elems)` for each page's
    /// part of `range`, in order, `first` being the index of `elems[0]`.
    ///
    /// # Panics
    /// When `range` is not inside the data.
    pub fn for_range(&self, range: core::ops::Range<usize>, mut f: impl FnMut(usize, &[T])) {
        assert!(range.end <= self.len(), "HostCached: range out of bounds");
        let mut at = range.start;
        while at < range.end {
            let page = at >> self.page_shift;
            let base = page << self.page_shift;
            let end = range.end.min(base + self.page_elems());
            self.with_page(page, |elems| f(at, &elems[at - base..end - base]));
            at = end;
        }
    }

    /// Warp-collective (all 32 lanes, each its own `index`): element `index` of the data,
    /// read from the cache. The warp acquires the distinct pages its lanes name one after
    /// another, so lanes that share pages share the loads.
    ///
    /// # Panics
    /// When `index` is not below [`HostCached::len`].
    pub fn get(&self, index: usize) -> T {
        assert!(index < self.len(), "HostCached: index out of bounds");
        let page = (index >> self.page_shift) as u32;
        let mut value = core::mem::MaybeUninit::<T>::uninit();
        let mut pending = warp::ballot(true);
        while pending != 0 {
            let leader = pending.trailing_zeros();
            let p = warp::shfl_idx_u32(page, leader);
            let mine = page == p && (pending >> lane_id()) & 1 == 1;
            self.with_page(p as usize, |elems| {
                if mine {
                    value.write(elems[index - ((p as usize) << self.page_shift)]);
                }
            });
            pending &= !warp::ballot(mine);
        }
        // SAFETY: every lane's page was served: the loop ends when no lane is pending.
        unsafe { value.assume_init() }
    }

    /// Warp-collective: loads `page` into the cache if it is not there, without keeping it
    /// pinned (a later acquire finds it, unless evicted meanwhile).
    pub fn load(&self, page: usize) {
        assert!(page < self.pages(), "HostCached: page out of range");
        let slot = self.acquire(page as u32);
        self.release(slot);
    }

    /// Warp-collective (all 32 lanes, the same `range`): starts bringing the elements
    /// `range` (clamped to the data) of the pages that are not in the cache into the GPU's
    /// L2, with `prefetch.global.L2` over their host memory, the lanes splitting the lines;
    /// a later miss then copies them from the L2. Resident pages cost one table read each.
    /// `#[prefetch_next(cache = c, of(a..b))]` calls it for a later iteration's range.
    pub fn prefetch(&self, range: core::ops::Range<usize>) {
        let end = range.end.min(self.len());
        let mut at = range.start;
        let (lane, elem) = (lane_id() as usize, core::mem::size_of::<T>());
        while at < end {
            let page = at >> self.page_shift;
            let page_end = end.min((page + 1) << self.page_shift);
            // SAFETY: `page` is below `pages()`: `at < len`.
            let state = unsafe { load_relaxed_gpu(self.page_slot.add(page)) };
            if state == ABSENT {
                let (first, bytes) = (self.backing as usize + at * elem, (page_end - at) * elem);
                let lines = (first % 128 + bytes).div_ceil(128);
                let mut k = lane;
                while k < lines {
                    crate::prefetch::prefetch_l2(((first & !127) + k * 128) as *const u8);
                    k += 32;
                }
            }
            at = page_end;
        }
    }

    /// Pins the slot holding `page`, loading it first if needed; every lane sees its data.
    fn acquire(&self, page: u32) -> u32 {
        let mut sleep = 32;
        let mut waited = false;
        loop {
            // SAFETY (all table accesses): the pointers are valid by `from_raw_parts`, `page`
            // is below `pages()` and slots below `slots`.
            let state = on_lane0(|| unsafe { load_acquire_gpu(self.page_slot.add(page as usize)) });
            if state < LOADING {
                if self.pin(state, page) {
                    // Each lane synchronises with the filling warp's release itself.
                    // SAFETY: as above; the pin keeps `page_slot[page]` at `state`.
                    let _ = unsafe { load_acquire_gpu(self.page_slot.add(page as usize)) };
                    self.count_hit(waited, page, state);
                    return state;
                }
                continue;
            }
            if state == ABSENT {
                let won = on_lane0(|| unsafe {
                    u32::atomic_cas_ptr(self.page_slot.add(page as usize), ABSENT, LOADING)
                });
                if won == ABSENT {
                    return self.fill(page, waited);
                }
                continue;
            }
            waited = true;
            nanosleep(sleep);
            sleep = (sleep * 2).min(2048);
        }
    }

    /// Pins `slot` if it is not being refilled and still holds `page`.
    fn pin(&self, slot: u32, page: u32) -> bool {
        let pins = unsafe { self.slot_pins.add(slot as usize) };
        let held = on_lane0(|| unsafe {
            let old = u32::atomic_add_ptr(pins, 1);
            fence_gpu();
            let ok =
                old & LOCKED == 0 && load_relaxed_gpu(self.slot_page.add(slot as usize)) == page;
            if ok {
                self.count_use(slot);
            } else {
                u32::atomic_add_ptr(pins, u32::MAX); // minus one
            }
            ok as u32
        });
        held == 1
    }

    /// Lane 0: one more use of `slot` in its CLOCK count, up to `max_uses`.
    ///
    /// # Safety
    /// `slot` is below `slots`.
    unsafe fn count_use(&self, slot: u32) {
        let used = self.slot_used.add(slot as usize);
        let uses = load_relaxed_gpu(used);
        if uses < self.max_uses {
            // A lost race counts one use less: the count is a hint, not a tally.
            u32::atomic_cas_ptr(used, uses, uses + 1);
        }
    }

    /// Loads `page` (claimed: `page_slot[page] == LOADING`) into a victim slot; returns the
    /// slot, pinned once.
    fn fill(&self, page: u32, waited: bool) -> u32 {
        let (slot, waited) = self.victim(waited);
        let evicted = on_lane0(|| unsafe {
            let old = u32::atomic_exchange_ptr(self.slot_page.add(slot as usize), page);
            if old != ABSENT {
                u32::atomic_exchange_ptr(self.page_slot.add(old as usize), ABSENT);
            }
            trace(Event::Evict, old, slot, self);
            (old != ABSENT) as u32
        });
        let elems = self.page_len(page as usize);
        let bytes = elems * core::mem::size_of::<T>();
        // SAFETY: the page lies inside the data, the slot inside the cache, and the slot is
        // locked: no other warp reads or writes it.
        unsafe {
            copy_words(
                self.backing.add((page as usize) << self.page_shift) as *const u32,
                self.data.add((slot as usize) << self.page_shift) as *mut u32,
                bytes.div_ceil(4),
            );
        }
        // Every lane's stores, then the slot's release and the page's publication.
        fence_gpu();
        warp::sync();
        on_lane0(|| unsafe {
            u32::atomic_add_ptr(self.slot_pins.add(slot as usize), 1u32.wrapping_sub(LOCKED));
            u32::atomic_exchange_ptr(self.slot_used.add(slot as usize), self.max_uses.min(1));
            fence_gpu();
            u32::atomic_exchange_ptr(self.page_slot.add(page as usize), slot);
            trace(Event::Miss, page, slot, self);
            0
        });
        let c = self.stripe();
        on_lane0(|| unsafe {
            u64::atomic_add_ptr(core::ptr::addr_of_mut!((*c).misses), 1);
            u64::atomic_add_ptr(core::ptr::addr_of_mut!((*c).bytes_loaded), bytes as u64);
            if evicted != 0 {
                u64::atomic_add_ptr(core::ptr::addr_of_mut!((*c).evictions), 1);
            }
            if waited {
                u64::atomic_add_ptr(core::ptr::addr_of_mut!((*c).waits), 1);
            }
            0
        });
        slot
    }

    /// A slot with no pins, locked for refilling (CLOCK); waits while every slot is pinned.
    fn victim(&self, mut waited: bool) -> (u32, bool) {
        let mut sleep = 64;
        loop {
            for _ in 0..2 * self.slots {
                let slot = on_lane0(|| unsafe {
                    let v = u32::atomic_add_ptr(self.hand, 1) % self.slots;
                    let used = self.slot_used.add(v as usize);
                    let uses = load_relaxed_gpu(used);
                    if uses != 0 {
                        // A pass of the hand takes one use (a lost race: another chance).
                        u32::atomic_cas_ptr(used, uses, uses - 1);
                        return ABSENT;
                    }
                    match u32::atomic_cas_ptr(self.slot_pins.add(v as usize), 0, LOCKED) {
                        0 => v,
                        _ => ABSENT,
                    }
                });
                if slot != ABSENT {
                    fence_gpu();
                    return (slot, waited);
                }
            }
            waited = true;
            nanosleep(sleep);
            sleep = (sleep * 2).min(4096);
        }
    }

    /// Unpins `slot` once every lane is done reading it.
    fn release(&self, slot: u32) {
        warp::sync();
        on_lane0(|| unsafe {
            fence_gpu();
            u32::atomic_add_ptr(self.slot_pins.add(slot as usize), u32::MAX) // minus one
        });
    }

    /// Counts a hit of `page` in `slot` (and a wait).
    fn count_hit(&self, waited: bool, page: u32, slot: u32) {
        let c = self.stripe();
        on_lane0(|| unsafe {
            u64::atomic_add_ptr(core::ptr::addr_of_mut!((*c).hits), 1);
            if waited {
                u64::atomic_add_ptr(core::ptr::addr_of_mut!((*c).waits), 1);
            }
            trace(Event::Hit, page, slot, self);
            0
        });
    }

    /// This warp's stripe of the counters: warps spread their additions over
    /// [`COUNTER_STRIPES`] copies (one address updated by every warp serialises them all).
    fn stripe(&self) -> *mut CacheCounters {
        let warp = block_idx_x() as usize * 61 + (thread_idx_x() / 32) as usize;
        self.counters.wrapping_add(warp % COUNTER_STRIPES)
    }
}

/// What the emulator's trace records of an acquire.
#[derive(Clone, Copy)]
enum Event {
    Hit,
    Miss,
    Evict,
}

/// On the emulator, records a cache event in the launch's trace, with the page's host
/// address and size (nothing on the GPU).
#[inline(always)]
fn trace<T: Copy>(event: Event, page: u32, slot: u32, cache: &HostCached<T>) {
    #[cfg(not(target_arch = "nvptx64"))]
    if page != ABSENT {
        use lookahead_emu::{hooks, Instruction};
        let bytes = cache.page_elems() * core::mem::size_of::<T>();
        let address = cache.backing as usize + page as usize * bytes;
        let instruction = match event {
            Event::Hit => Instruction::CacheHit { page, slot },
            Event::Miss => Instruction::CacheMiss { page, slot },
            Event::Evict => Instruction::CacheEvict { page, slot },
        };
        hooks::prefetch(instruction, address, bytes);
    }
    #[cfg(target_arch = "nvptx64")]
    let _ = (event, page, slot, cache);
}
