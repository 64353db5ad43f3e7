//! Prefetch instructions. They are hints: no fault, no result, no effect on correctness.
//!
//! On the lent H100 (driver 580) none of them migrates Unified Memory pages; see the
//! project's measurements before relying on them for managed memory.

use core::arch::asm;

/// Brings the cache line holding `ptr` into L2 (`prefetch.global.L2`, any architecture).
#[inline(always)]
pub fn prefetch_l2<T>(ptr: *const T) {
    // SAFETY: a prefetch of any address is a hint and cannot fault.
    unsafe { asm!("prefetch.global.L2 [{p}];", p = in(reg64) ptr, options(nostack, readonly, preserves_flags)) }
}

/// Brings the line into L2 with the evict-last priority (`prefetch.global.L2::evict_last`,
/// sm_80 and later).
#[cfg(target_feature = "sm_80")]
#[inline(always)]
pub fn prefetch_l2_evict_last<T>(ptr: *const T) {
    // SAFETY: a prefetch is a hint and cannot fault.
    unsafe { asm!("prefetch.global.L2::evict_last [{p}];", p = in(reg64) ptr, options(nostack, readonly, preserves_flags)) }
}

/// Asks the bulk-copy engine to prefetch `bytes` bytes at `ptr` into L2
/// (`cp.async.bulk.prefetch.L2.global`, sm_90 and later).
///
/// # Safety
/// `ptr` must be 16-byte aligned and `bytes` a non-zero multiple of 16; the range must
/// lie in global memory.
#[cfg(target_feature = "sm_90")]
#[inline(always)]
pub unsafe fn bulk_prefetch_l2<T>(ptr: *const T, bytes: u32) {
    asm!("cp.async.bulk.prefetch.L2.global [{p}], {n};", p = in(reg64) ptr, n = in(reg32) bytes, options(nostack, readonly, preserves_flags));
}
