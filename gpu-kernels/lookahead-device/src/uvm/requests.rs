//! GPU-driven migration requests, the device half.
//!
//! In-kernel prefetch instructions do not migrate Unified Memory pages on the H100 (driver
//! 580.159.04; `docs/unified-memory.md`), so a kernel that knows what it will read next asks
//! the host instead: it publishes `(pointer, bytes, flag)` into a ring in pinned host memory, a
//! host service prefetches the range with `cuMemPrefetchAsync` and, on the same stream right
//! after the prefetch, writes the request's ready flag in device memory
//! (`cuStreamWriteValue32`). The kernel waits on that flag before touching the range, or goes
//! ahead on the fault path.
//!
//! Nothing here can lose a request or hang a kernel:
//! - a full ring (or a queue with capacity 0) makes [`RequestQueue::request`] return
//!   [`Requested::Fallback`] and marks the flag "go ahead", so waiters do not wait;
//! - [`RequestQueue::wait_ready`] gives up after the queue's time bound (a stopped, slow or
//!   never-started service), and the data is then read through the fault path;
//! - only residency depends on the service: the values read are the same either way.
//!
//! Protocol (all counters wrap): `head` (device memory) counts claimed slots, `tail` (pinned
//! host memory, written by the host) counts consumed ones. A producer claims slot `h` by a
//! compare-and-swap on `head` only while `h - tail < capacity`, writes the slot's fields,
//! fences at system scope, then publishes `seq = h + 1` with a release store. The host
//! consumes slots in order, reading slot `t` once its `seq == t + 1`, and then stores
//! `tail = t + 1`. Flags carry the launch's `generation`, so they never need resetting.
//!
//! The same code runs on the host (the memory operations of [`crate::memory`] are `std`
//! atomics there), which is how the protocol is tested without a GPU.

use crate::atomic::{AtomicCas, AtomicExchange};
use crate::memory::{
    load_acquire_system, load_relaxed_gpu, store_release_system, store_volatile_u32,
    store_volatile_u64,
};
use crate::sync::{globaltimer_ns, nanosleep};
use crate::DeviceCopy;

/// One request in the ring: 32 bytes, written by the GPU, read by the host.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestSlot {
    /// `h + 1` once slot `h` is complete; anything else means "not yet".
    pub seq: u32,
    /// Index of the ready flag to set when the range has arrived.
    pub flag: u32,
    /// The generation of the launch that asked; the host writes it into the flag.
    pub generation: u32,
    /// Keeps `ptr` 8-byte aligned.
    pub reserved: u32,
    /// Start of the range (a managed-memory address).
    pub ptr: u64,
    /// Length of the range in bytes.
    pub bytes: u64,
}

/// High bit of a ready flag: "do not wait, read through the fault path".
pub const FALLBACK_BIT: u32 = 0x8000_0000;

/// First and longest pause between two polls of a ready flag, nanoseconds.
const MIN_POLL_NS: u32 = 500;
const MAX_POLL_NS: u32 = 8000;

/// Largest generation number; generations are 31 bits so [`FALLBACK_BIT`] stays free.
pub const MAX_GENERATION: u32 = FALLBACK_BIT - 1;

/// Where a request ring lives: what the host allocated for it (see
/// `lookahead_uvm::RequestRing`).
#[derive(Debug, Clone, Copy)]
pub struct RingMemory {
    /// `capacity` slots in pinned, device-mapped host memory.
    pub slots: *mut RequestSlot,
    /// Slots consumed by the host (pinned host memory).
    pub tail: *const u32,
    /// Slots claimed by producers (device memory).
    pub head: *mut u32,
    /// Per flag: the generation that last requested it (device memory), for de-duplication.
    pub requested: *mut u32,
    /// Per flag: the generation whose range has arrived, possibly with [`FALLBACK_BIT`].
    pub ready: *mut u32,
    /// Number of slots; 0 disables requests (every call falls back).
    pub capacity: u32,
    /// Number of flags.
    pub num_flags: u32,
}

/// One launch's use of a ring.
#[derive(Debug, Clone, Copy)]
pub struct QueueSettings {
    /// This launch's generation, 1..=[`MAX_GENERATION`].
    pub generation: u32,
    /// Compare-and-swap attempts before a contended claim gives up and falls back.
    pub claim_attempts: u32,
    /// How long [`RequestQueue::wait_ready`] waits, in nanoseconds; 0 = never wait.
    pub wait_ns: u64,
    /// Ranges that arrived in a generation from `resident_since` up to (not including) this
    /// launch's are still resident (the host moved nothing back since): see
    /// [`RequestQueue::arrived_earlier`]. 0: nothing counts as resident.
    pub resident_since: u32,
}

/// What a kernel needs to publish requests and wait for them: built by the host
/// (`lookahead_uvm::RequestRing::queue`) and passed to the kernel by value, an ordinary
/// [`DeviceCopy`] parameter. Its fields are private: a queue is either
/// [`RequestQueue::disabled`] or made by [`RequestQueue::from_raw_parts`], whose caller
/// promises the ring's memory, so the safe methods below can rely on it.
#[repr(C)]
#[derive(Debug, Clone, Copy, DeviceCopy)]
pub struct RequestQueue {
    slots: *mut RequestSlot,
    tail: *const u32,
    head: *mut u32,
    requested: *mut u32,
    ready: *mut u32,
    capacity: u32,
    num_flags: u32,
    generation: u32,
    claim_attempts: u32,
    wait_ns: u64,
    resident_since: u32,
    // Keeps the size a multiple of 8 bytes (no padding).
    reserved: u32,
}

// SAFETY: the queue is a bundle of addresses shared by design between GPU threads and the
// host; every access through it is atomic or ordered by the protocol above.
unsafe impl Send for RequestQueue {}
unsafe impl Sync for RequestQueue {}

/// What [`RequestQueue::request`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// Published; the host will set the flag once the range is resident.
    Queued,
    /// Another thread already requested this flag in this generation.
    AlreadyRequested,
    /// Not published (ring full or disabled); the flag says "go ahead on the fault path".
    Fallback,
}

/// What [`RequestQueue::wait_ready`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// The host reported the range resident.
    Arrived,
    /// The request fell back (or the queue does not wait): read through the fault path.
    GoAhead,
    /// The time bound passed first: read through the fault path.
    TimedOut,
}

impl RequestQueue {
    /// A queue that publishes nothing and never waits: every request falls back to the
    /// fault path. Kernels take the same code path with or without a service.
    pub const fn disabled() -> Self {
        RequestQueue {
            slots: core::ptr::null_mut(),
            tail: core::ptr::null(),
            head: core::ptr::null_mut(),
            requested: core::ptr::null_mut(),
            ready: core::ptr::null_mut(),
            capacity: 0,
            num_flags: 0,
            generation: 0,
            claim_attempts: 0,
            wait_ns: 0,
            resident_since: 0,
            reserved: 0,
        }
    }

    /// A queue over `ring` for one launch.
    ///
    /// # Safety
    /// Unless `ring.capacity` is 0: `slots` points to `capacity` slots and `tail` to a word,
    /// both in memory the host reads and the GPU writes (pinned, device-mapped host memory);
    /// `head` to a word and `requested` and `ready` to `num_flags` words each, in memory the
    /// GPU updates atomically; all valid until every kernel using the queue has finished.
    pub unsafe fn from_raw_parts(ring: RingMemory, launch: QueueSettings) -> Self {
        RequestQueue {
            slots: ring.slots,
            tail: ring.tail,
            head: ring.head,
            requested: ring.requested,
            ready: ring.ready,
            capacity: ring.capacity,
            num_flags: ring.num_flags,
            generation: launch.generation,
            claim_attempts: launch.claim_attempts,
            wait_ns: launch.wait_ns,
            resident_since: launch.resident_since,
            reserved: 0,
        }
    }

    /// This launch's generation (0 for a disabled queue).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Asks the host to make `bytes` bytes at `ptr` resident on this GPU and to set
    /// `flag` when they are. Any thread may call it; requests for a flag already
    /// requested in this generation are dropped as duplicates.
    pub fn request<T>(&self, flag: u32, ptr: *const T, bytes: usize) -> Requested {
        if self.capacity == 0 || flag >= self.num_flags {
            return Requested::Fallback;
        }
        // SAFETY: `flag < num_flags`; the host allocated `requested`/`ready` with
        // `num_flags` entries and `slots` with `capacity` entries.
        unsafe {
            let gen = self.generation;
            if u32::atomic_exchange_ptr(self.requested.add(flag as usize), gen) == gen {
                return Requested::AlreadyRequested;
            }
            for _ in 0..self.claim_attempts.max(1) {
                // Tail first: the host only moves it up to slots already claimed, so a head
                // read afterwards is never behind it. (Read the other way round, producers
                // and the host can move both in between, and `h - t` wraps to "full".)
                let t = load_acquire_system(self.tail);
                let h = load_relaxed_gpu(self.head);
                if h.wrapping_sub(t) >= self.capacity {
                    break; // full
                }
                if u32::atomic_cas_ptr(self.head, h, h.wrapping_add(1)) != h {
                    // Another producer took slot `h` (progress was made); back off briefly.
                    nanosleep(MIN_POLL_NS);
                    continue;
                }
                let slot = self.slots.add((h % self.capacity) as usize);
                store_volatile_u32(core::ptr::addr_of_mut!((*slot).flag), flag);
                store_volatile_u32(core::ptr::addr_of_mut!((*slot).generation), gen);
                store_volatile_u64(core::ptr::addr_of_mut!((*slot).ptr), ptr as u64);
                store_volatile_u64(core::ptr::addr_of_mut!((*slot).bytes), bytes as u64);
                store_release_system(core::ptr::addr_of_mut!((*slot).seq), h.wrapping_add(1));
                return Requested::Queued;
            }
            store_release_system(self.ready.add(flag as usize), gen | FALLBACK_BIT);
            Requested::Fallback
        }
    }

    /// Whether requests can be published at all (a disabled queue has no ring).
    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.capacity != 0
    }

    /// Claims up to `n` consecutive slots for one producer that publishes many requests at
    /// once (a kernel that knows every range it will read, say after a planning step):
    /// returns `(first, granted)`, `granted <= n`, fewer when the ring has less room (0 when
    /// it is full or disabled). The caller (or the threads it hands the range to) must then
    /// fill every slot `first + k`, `k < granted`, with [`RequestQueue::publish`], and mark
    /// the requests that did not fit with [`RequestQueue::fall_back`], so no waiter waits
    /// for them. One compare-and-swap claims the whole batch, so a grid of producers does
    /// not contend slot by slot.
    pub fn claim(&self, n: u32) -> (u32, u32) {
        if self.capacity == 0 || n == 0 {
            return (0, 0);
        }
        // SAFETY: `head` and `tail` are the ring's counters (see the protocol above).
        unsafe {
            for _ in 0..self.claim_attempts.max(1) {
                // Tail before head, as in `request`.
                let t = load_acquire_system(self.tail);
                let h = load_relaxed_gpu(self.head);
                let used = h.wrapping_sub(t);
                if used >= self.capacity {
                    return (h, 0);
                }
                let granted = if n < self.capacity - used {
                    n
                } else {
                    self.capacity - used
                };
                if u32::atomic_cas_ptr(self.head, h, h.wrapping_add(granted)) == h {
                    return (h, granted);
                }
                nanosleep(MIN_POLL_NS);
            }
            (0, 0)
        }
    }

    /// Fills slot `slot` (claimed with [`RequestQueue::claim`]) with a request for `bytes`
    /// bytes at `ptr`, to be marked in `flag`, and publishes it to the host. Any thread may
    /// publish any claimed slot, in any order; the host consumes them in slot order.
    ///
    /// # Safety
    /// `slot` must have been claimed by this launch and not published yet; `flag <
    /// num_flags` (checked: an out-of-range flag publishes a zero-byte request).
    pub unsafe fn publish<T>(&self, slot: u32, flag: u32, ptr: *const T, bytes: usize) {
        let (flag, bytes) = if flag < self.num_flags {
            (flag, bytes)
        } else {
            (u32::MAX, 0)
        };
        if flag != u32::MAX {
            // Later `request` calls for this flag in this generation are duplicates.
            u32::atomic_exchange_ptr(self.requested.add(flag as usize), self.generation);
        }
        let s = self.slots.add((slot % self.capacity) as usize);
        store_volatile_u32(core::ptr::addr_of_mut!((*s).flag), flag);
        store_volatile_u32(core::ptr::addr_of_mut!((*s).generation), self.generation);
        store_volatile_u64(core::ptr::addr_of_mut!((*s).ptr), ptr as u64);
        store_volatile_u64(core::ptr::addr_of_mut!((*s).bytes), bytes as u64);
        store_release_system(core::ptr::addr_of_mut!((*s).seq), slot.wrapping_add(1));
    }

    /// Marks `flag` "go ahead on the fault path" for this launch: what a producer does for
    /// a request that found no room in the ring.
    pub fn fall_back(&self, flag: u32) {
        if self.capacity == 0 || flag >= self.num_flags {
            return;
        }
        // SAFETY: `flag < num_flags`.
        unsafe {
            store_release_system(
                self.ready.add(flag as usize),
                self.generation | FALLBACK_BIT,
            )
        };
    }

    /// Whether `flag`'s range arrived by request in an earlier launch whose data the host
    /// has not moved back since (its generation is at least `resident_since`), so this
    /// launch need not ask again: mark it with [`RequestQueue::mark_arrived`] instead. A range
    /// the driver evicted anyway is still read correctly, through the fault path.
    #[inline(always)]
    pub fn arrived_earlier(&self, flag: u32) -> bool {
        if self.capacity == 0 || self.resident_since == 0 || flag >= self.num_flags {
            return false;
        }
        // SAFETY: `flag < num_flags`.
        let v = unsafe { load_acquire_system(self.ready.add(flag as usize)) };
        v & FALLBACK_BIT == 0 && v >= self.resident_since && v < self.generation
    }

    /// Marks `flag` arrived for this launch without a request (its range is known to be
    /// resident, see [`RequestQueue::arrived_earlier`]).
    pub fn mark_arrived(&self, flag: u32) {
        if self.capacity == 0 || flag >= self.num_flags {
            return;
        }
        // SAFETY: `flag < num_flags`.
        unsafe {
            u32::atomic_exchange_ptr(self.requested.add(flag as usize), self.generation);
            store_release_system(self.ready.add(flag as usize), self.generation);
        }
    }

    /// Waits until `flag`'s range has arrived, the request fell back, or the queue's time
    /// bound passes. Call it from one thread of a block, then `sync_threads()`.
    pub fn wait_ready(&self, flag: u32) -> Readiness {
        if self.capacity == 0 || self.wait_ns == 0 || flag >= self.num_flags {
            return Readiness::GoAhead;
        }
        let start = globaltimer_ns();
        // Back off exponentially up to `MAX_POLL_NS`: a whole grid may wait on the same few
        // flags while the data they announce is being written, and polling them every half
        // microsecond from thousands of warps is traffic on exactly those cache lines. Data
        // takes milliseconds to arrive, so a few microseconds of extra latency cost nothing.
        let mut sleep_ns = MIN_POLL_NS;
        loop {
            // SAFETY: `flag < num_flags`.
            let v = unsafe { load_acquire_system(self.ready.add(flag as usize)) };
            if v == self.generation {
                return Readiness::Arrived;
            }
            if v == self.generation | FALLBACK_BIT {
                return Readiness::GoAhead;
            }
            if globaltimer_ns().wrapping_sub(start) >= self.wait_ns {
                return Readiness::TimedOut;
            }
            nanosleep(sleep_ns);
            sleep_ns = if sleep_ns < MAX_POLL_NS / 2 {
                sleep_ns * 2
            } else {
                MAX_POLL_NS
            };
        }
    }
}
