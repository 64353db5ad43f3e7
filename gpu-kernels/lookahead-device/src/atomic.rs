//! Atomic read-modify-write operations (`atom.*` on generic addresses, so they work on
//! global, managed and shared memory alike).
//!
//! The safe functions ([`atomic_add`], [`atomic_max`], [`atomic_cas`]) take `&mut T`: a
//! kernel's `&mut [T]` parameter is shared by every thread of the launch, and these are the
//! operations that make concurrent updates of one element well defined. The `unsafe`
//! pointer forms are for shared memory and other raw addresses.

/// Types with an atomic add (`atom.add`): `f32`, `u32`, `u64`.
pub trait AtomicAdd: Copy {
    /// Atomically adds `value` to `*ptr`, returning the previous value.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes and aligned; other threads may only access
    /// it atomically while this runs.
    unsafe fn atomic_add_ptr(ptr: *mut Self, value: Self) -> Self;
}

/// Types with an atomic maximum (`atom.max`): `u32`, `i32`, `u64`, `i64`.
pub trait AtomicMax: Copy {
    /// Atomically stores `max(*ptr, value)`, returning the previous value.
    ///
    /// # Safety
    /// As [`AtomicAdd::atomic_add_ptr`].
    unsafe fn atomic_max_ptr(ptr: *mut Self, value: Self) -> Self;
}

/// Types with an atomic compare-and-swap (`atom.cas`): `u32`, `u64`.
pub trait AtomicCas: Copy {
    /// Atomically replaces `*ptr` by `new` if it equals `expected`; returns the previous value
    /// (equal to `expected` exactly when the swap happened).
    ///
    /// # Safety
    /// As [`AtomicAdd::atomic_add_ptr`].
    unsafe fn atomic_cas_ptr(ptr: *mut Self, expected: Self, new: Self) -> Self;
}

// On the host (the emulator) each operation is the `core::sync::atomic` one on the same
// address: blocks run on several host threads, so these must be real atomics there too.
#[cfg(not(target_arch = "nvptx64"))]
use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering::SeqCst};

macro_rules! atom {
    ($tr:ident, $method:ident, $ty:ty, $instr:literal, $reg:ident, $host:expr) => {
        impl $tr for $ty {
            #[inline(always)]
            unsafe fn $method(ptr: *mut Self, value: Self) -> Self {
                gpu_or_host!(
                    {
                        let old: $ty;
                        core::arch::asm!(
                            concat!($instr, " {old}, [{ptr}], {v};"),
                            old = out($reg) old,
                            ptr = in(reg64) ptr,
                            v = in($reg) value,
                            options(nostack)
                        );
                        old
                    },
                    {
                        lookahead_emu::hooks::spin_point();
                        ($host)(ptr, value)
                    }
                )
            }
        }
    };
}

atom!(
    AtomicAdd,
    atomic_add_ptr,
    f32,
    "atom.add.f32",
    reg32,
    |p: *mut f32, v: f32| {
        let a = AtomicU32::from_ptr(p as *mut u32);
        let mut old = a.load(SeqCst);
        loop {
            let new = (f32::from_bits(old) + v).to_bits();
            match a.compare_exchange_weak(old, new, SeqCst, SeqCst) {
                Ok(_) => break f32::from_bits(old),
                Err(seen) => old = seen,
            }
        }
    }
);
atom!(
    AtomicAdd,
    atomic_add_ptr,
    u32,
    "atom.add.u32",
    reg32,
    |p, v| AtomicU32::from_ptr(p).fetch_add(v, SeqCst)
);
atom!(
    AtomicAdd,
    atomic_add_ptr,
    u64,
    "atom.add.u64",
    reg64,
    |p, v| AtomicU64::from_ptr(p).fetch_add(v, SeqCst)
);
atom!(
    AtomicMax,
    atomic_max_ptr,
    u32,
    "atom.max.u32",
    reg32,
    |p, v| AtomicU32::from_ptr(p).fetch_max(v, SeqCst)
);
atom!(
    AtomicMax,
    atomic_max_ptr,
    i32,
    "atom.max.s32",
    reg32,
    |p, v| AtomicI32::from_ptr(p).fetch_max(v, SeqCst)
);
atom!(
    AtomicMax,
    atomic_max_ptr,
    u64,
    "atom.max.u64",
    reg64,
    |p, v| AtomicU64::from_ptr(p).fetch_max(v, SeqCst)
);
atom!(
    AtomicMax,
    atomic_max_ptr,
    i64,
    "atom.max.s64",
    reg64,
    |p, v| AtomicI64::from_ptr(p).fetch_max(v, SeqCst)
);

macro_rules! cas {
    ($ty:ty, $instr:literal, $reg:ident, $atomic:ident) => {
        impl AtomicCas for $ty {
            #[inline(always)]
            unsafe fn atomic_cas_ptr(ptr: *mut Self, expected: Self, new: Self) -> Self {
                gpu_or_host!(
                    {
                        let old: $ty;
                        core::arch::asm!(
                            concat!($instr, " {old}, [{ptr}], {e}, {n};"),
                            old = out($reg) old,
                            ptr = in(reg64) ptr,
                            e = in($reg) expected,
                            n = in($reg) new,
                            options(nostack)
                        );
                        old
                    },
                    {
                        lookahead_emu::hooks::spin_point();
                        let atomic = $atomic::from_ptr(ptr);
                        match atomic.compare_exchange(expected, new, SeqCst, SeqCst) {
                            Ok(v) | Err(v) => v,
                        }
                    }
                )
            }
        }
    };
}

cas!(u32, "atom.cas.b32", reg32, AtomicU32);
cas!(u64, "atom.cas.b64", reg64, AtomicU64);

/// Types with an atomic exchange (`atom.exch`): `u32`, `u64`.
pub trait AtomicExchange: Copy {
    /// Atomically replaces `*ptr` by `value`, returning the previous value.
    ///
    /// # Safety
    /// As [`AtomicAdd::atomic_add_ptr`].
    unsafe fn atomic_exchange_ptr(ptr: *mut Self, value: Self) -> Self;
}

atom!(
    AtomicExchange,
    atomic_exchange_ptr,
    u32,
    "atom.exch.b32",
    reg32,
    |p, v| AtomicU32::from_ptr(p).swap(v, SeqCst)
);
atom!(
    AtomicExchange,
    atomic_exchange_ptr,
    u64,
    "atom.exch.b64",
    reg64,
    |p, v| AtomicU64::from_ptr(p).swap(v, SeqCst)
);

/// Atomically adds `value` to `*slot` and returns the previous value (`atom.add.{f32,u32,u64}`).
#[inline(always)]
pub fn atomic_add<T: AtomicAdd>(slot: &mut T, value: T) -> T {
    // SAFETY: a reference is valid and aligned; atomicity is the point.
    unsafe { T::atomic_add_ptr(slot, value) }
}

/// Atomically stores `max(*slot, value)` and returns the previous value (`atom.max`).
#[inline(always)]
pub fn atomic_max<T: AtomicMax>(slot: &mut T, value: T) -> T {
    // SAFETY: as in `atomic_add`.
    unsafe { T::atomic_max_ptr(slot, value) }
}

/// Atomically replaces `*slot` by `new` if it equals `expected`; returns the previous value
/// (`atom.cas`).
#[inline(always)]
pub fn atomic_cas<T: AtomicCas>(slot: &mut T, expected: T, new: T) -> T {
    // SAFETY: as in `atomic_add`.
    unsafe { T::atomic_cas_ptr(slot, expected, new) }
}

/// Atomically replaces `*slot` by `value` and returns the previous value (`atom.exch`).
#[inline(always)]
pub fn atomic_exchange<T: AtomicExchange>(slot: &mut T, value: T) -> T {
    // SAFETY: as in `atomic_add`.
    unsafe { T::atomic_exchange_ptr(slot, value) }
}

/// Atomically adds `value` to `*ptr` and returns the previous value (`atom.add.f32`).
///
/// # Safety
/// As [`AtomicAdd::atomic_add_ptr`].
#[inline(always)]
pub unsafe fn atomic_add_f32(ptr: *mut f32, value: f32) -> f32 {
    f32::atomic_add_ptr(ptr, value)
}

/// Atomically adds `value` to `*ptr` and returns the previous value (`atom.add.u32`).
///
/// # Safety
/// As [`AtomicAdd::atomic_add_ptr`].
#[inline(always)]
pub unsafe fn atomic_add_u32(ptr: *mut u32, value: u32) -> u32 {
    u32::atomic_add_ptr(ptr, value)
}

/// Atomically adds `value` to `*ptr` and returns the previous value (`atom.add.u64`).
///
/// # Safety
/// As [`AtomicAdd::atomic_add_ptr`].
#[inline(always)]
pub unsafe fn atomic_add_u64(ptr: *mut u64, value: u64) -> u64 {
    u64::atomic_add_ptr(ptr, value)
}

/// Types with a warp-wide fetch-and-add ([`warp_fetch_add`]): `u32`, `u64`.
pub trait WarpFetchAdd: AtomicAdd {
    /// Lane 0 adds `value` to `*ptr` atomically; every lane gets the previous value.
    ///
    /// # Safety
    /// As [`AtomicAdd::atomic_add_ptr`]; every lane of the warp calls it with the same `ptr`.
    unsafe fn warp_fetch_add_ptr(ptr: *mut Self, value: Self) -> Self;
}

macro_rules! warp_fetch_add {
    ($ty:ident, $reg:ident, $broadcast:path) => {
        impl WarpFetchAdd for $ty {
            #[inline(always)]
            unsafe fn warp_fetch_add_ptr(ptr: *mut Self, value: Self) -> Self {
                let old: $ty = gpu_or_host!(
                    {
                        // One predicated instruction instead of `if lane == 0 { .. }`, so the
                        // lanes never take different paths here.
                        let old: $ty;
                        core::arch::asm!(
                            "{{ .reg .pred p; .reg .u32 l;",
                            "mov.u32 l, %laneid;",
                            "setp.eq.u32 p, l, 0;",
                            concat!("mov.", stringify!($ty), " {old}, 0;"),
                            concat!("@p atom.add.", stringify!($ty), " {old}, [{ptr}], {v}; }}"),
                            old = out($reg) old,
                            ptr = in(reg64) ptr,
                            v = in($reg) value,
                            options(nostack)
                        );
                        old
                    },
                    if crate::index::lane_id() == 0 {
                        <$ty>::atomic_add_ptr(ptr, value)
                    } else {
                        0
                    }
                );
                $broadcast(old, 0)
            }
        }
    };
}

warp_fetch_add!(u32, reg32, crate::warp::shfl_idx_u32);
warp_fetch_add!(u64, reg64, crate::warp::shfl_idx_u64);

/// One atomic add for the whole warp: lane 0 adds `value` to `*slot`, and every lane gets
/// the previous value. Every lane of the warp must call it, with the same `slot`.
///
/// The same as `if lane == 0 { old = atomic_add(slot, value) }` and a broadcast, but without
/// the branch. Why: in a loop, the compiler may join such a lane-0 branch with the next
/// lane-0 branch instead of with the other lanes, and the warp then stays split in two for
/// the rest of the loop (measured on the H100: a copy loop ran twice, once for lane 0 and
/// once for lanes 1-31, at 90% of the bandwidth; `docs/unified-memory.md`).
///
/// ```ignore
/// // Hand out work items to warps, one at a time.
/// let item = warp_fetch_add(&mut next[0], 1u32);
/// ```
#[inline(always)]
pub fn warp_fetch_add<T: WarpFetchAdd>(slot: &mut T, value: T) -> T {
    // SAFETY: a reference is valid and aligned; atomicity is the point.
    unsafe { T::warp_fetch_add_ptr(slot, value) }
}
