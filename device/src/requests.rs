//! GPU-driven migration requests, the device half.
//!
//! In-kernel prefetch instructions do not migrate Unified Memory pages on the H100s we
//! measured, so a kernel that knows what it will read next asks the host instead: it
//! publishes `(pointer, bytes, flag)` into a ring in pinned host memory, a host service
//! prefetches the range with `cuMemPrefetchAsync` and, on the same stream right after the
//! prefetch, writes the request's ready flag in device memory (`cuStreamWriteValue32`).
//! The kernel waits on that flag before touching the range, or goes ahead on the fault path.
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
//! The same code runs on the host (with `std` atomics), which is how the protocol is
//! tested without a GPU.

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

/// Largest generation number; generations are 31 bits so [`FALLBACK_BIT`] stays free.
pub const MAX_GENERATION: u32 = FALLBACK_BIT - 1;

/// What a kernel needs to publish requests and wait for them: built by the host
/// (`lookahead_uvm::RequestRing::queue`) and passed to the kernel by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RequestQueue {
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
    /// This launch's generation, 1..=[`MAX_GENERATION`].
    pub generation: u32,
    /// Compare-and-swap attempts before a contended claim gives up and falls back.
    pub claim_attempts: u32,
    /// How long [`RequestQueue::wait_ready`] waits, in nanoseconds; 0 = never wait.
    pub wait_ns: u64,
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
        }
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
            if mem::exchange(self.requested.add(flag as usize), gen) == gen {
                return Requested::AlreadyRequested;
            }
            for _ in 0..self.claim_attempts.max(1) {
                let h = mem::load_relaxed(self.head);
                let t = mem::load_acquire_system(self.tail);
                if h.wrapping_sub(t) >= self.capacity {
                    break; // full
                }
                if mem::compare_exchange(self.head, h, h.wrapping_add(1)) != h {
                    // Another producer took slot `h` (progress was made); back off briefly.
                    mem::pause();
                    continue;
                }
                let slot = self.slots.add((h % self.capacity) as usize);
                mem::store_volatile_u32(core::ptr::addr_of_mut!((*slot).flag), flag);
                mem::store_volatile_u32(core::ptr::addr_of_mut!((*slot).generation), gen);
                mem::store_volatile_u64(core::ptr::addr_of_mut!((*slot).ptr), ptr as u64);
                mem::store_volatile_u64(core::ptr::addr_of_mut!((*slot).bytes), bytes as u64);
                mem::store_release_system(core::ptr::addr_of_mut!((*slot).seq), h.wrapping_add(1));
                return Requested::Queued;
            }
            mem::store_release_system(self.ready.add(flag as usize), gen | FALLBACK_BIT);
            Requested::Fallback
        }
    }

    /// Waits until `flag`'s range has arrived, the request fell back, or the queue's time
    /// bound passes. Call it from one thread of a block, then `sync_threads()`.
    pub fn wait_ready(&self, flag: u32) -> Readiness {
        if self.capacity == 0 || self.wait_ns == 0 || flag >= self.num_flags {
            return Readiness::GoAhead;
        }
        let start = mem::now_ns();
        loop {
            // SAFETY: `flag < num_flags`.
            let v = unsafe { mem::load_acquire_system(self.ready.add(flag as usize)) };
            if v == self.generation {
                return Readiness::Arrived;
            }
            if v == self.generation | FALLBACK_BIT {
                return Readiness::GoAhead;
            }
            if mem::now_ns().wrapping_sub(start) >= self.wait_ns {
                return Readiness::TimedOut;
            }
            mem::pause();
        }
    }
}

/// The memory operations of the protocol, as PTX on the GPU and `std` atomics on the host.
#[cfg(target_arch = "nvptx64")]
mod mem {
    use core::arch::asm;

    #[inline(always)]
    pub unsafe fn load_relaxed(p: *const u32) -> u32 {
        let v: u32;
        asm!("ld.relaxed.gpu.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(nostack));
        v
    }
    #[inline(always)]
    pub unsafe fn load_acquire_system(p: *const u32) -> u32 {
        let v: u32;
        asm!("ld.acquire.sys.u32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(nostack));
        v
    }
    #[inline(always)]
    pub unsafe fn exchange(p: *mut u32, new: u32) -> u32 {
        let old: u32;
        asm!("atom.exch.b32 {o}, [{p}], {n};", o = out(reg32) old, p = in(reg64) p, n = in(reg32) new, options(nostack));
        old
    }
    #[inline(always)]
    pub unsafe fn compare_exchange(p: *mut u32, expected: u32, new: u32) -> u32 {
        let old: u32;
        asm!("atom.cas.b32 {o}, [{p}], {e}, {n};", o = out(reg32) old, p = in(reg64) p, e = in(reg32) expected, n = in(reg32) new, options(nostack));
        old
    }
    #[inline(always)]
    pub unsafe fn store_volatile_u32(p: *mut u32, v: u32) {
        asm!("st.volatile.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack));
    }
    #[inline(always)]
    pub unsafe fn store_volatile_u64(p: *mut u64, v: u64) {
        asm!("st.volatile.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v, options(nostack));
    }
    /// Orders every earlier store of this thread before `v` at system scope (the host
    /// reads the slot fields only after it sees the sequence number).
    #[inline(always)]
    pub unsafe fn store_release_system(p: *mut u32, v: u32) {
        asm!("fence.sc.sys;", "st.release.sys.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack));
    }
    #[inline(always)]
    pub fn now_ns() -> u64 {
        let t: u64;
        // SAFETY: reads the global nanosecond timer.
        unsafe { asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nostack, nomem)) };
        t
    }
    #[inline(always)]
    pub fn pause() {
        // SAFETY: sleeps this thread briefly (sm_70+).
        unsafe { asm!("nanosleep.u32 500;", options(nostack, nomem)) };
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod mem {
    extern crate std;
    use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

    pub unsafe fn load_relaxed(p: *const u32) -> u32 {
        AtomicU32::from_ptr(p as *mut u32).load(Ordering::Relaxed)
    }
    pub unsafe fn load_acquire_system(p: *const u32) -> u32 {
        AtomicU32::from_ptr(p as *mut u32).load(Ordering::Acquire)
    }
    pub unsafe fn exchange(p: *mut u32, new: u32) -> u32 {
        AtomicU32::from_ptr(p).swap(new, Ordering::AcqRel)
    }
    pub unsafe fn compare_exchange(p: *mut u32, expected: u32, new: u32) -> u32 {
        match AtomicU32::from_ptr(p).compare_exchange(
            expected,
            new,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(v) | Err(v) => v,
        }
    }
    pub unsafe fn store_volatile_u32(p: *mut u32, v: u32) {
        AtomicU32::from_ptr(p).store(v, Ordering::Relaxed)
    }
    pub unsafe fn store_volatile_u64(p: *mut u64, v: u64) {
        AtomicU64::from_ptr(p).store(v, Ordering::Relaxed)
    }
    pub unsafe fn store_release_system(p: *mut u32, v: u32) {
        fence(Ordering::SeqCst);
        AtomicU32::from_ptr(p).store(v, Ordering::Release)
    }
    pub fn now_ns() -> u64 {
        use std::sync::OnceLock;
        use std::time::Instant;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
    pub fn pause() {
        // In an emulated kernel, let the block's other threads run; else yield the thread.
        lookahead_emu::hooks::sleep();
    }
}
