//! Atomic read-modify-write operations on global or shared memory (generic addresses).

use core::arch::asm;

/// Atomically adds `value` to `*ptr` and returns the previous value (`atom.add.f32`).
///
/// # Safety
/// `ptr` must be valid for reads and writes, aligned, and only accessed atomically by
/// other threads while this runs.
#[inline(always)]
pub unsafe fn atomic_add_f32(ptr: *mut f32, value: f32) -> f32 {
    let old: f32;
    asm!("atom.add.f32 {old}, [{ptr}], {v};", old = out(reg32) old, ptr = in(reg64) ptr, v = in(reg32) value, options(nostack));
    old
}

/// Atomically adds `value` to `*ptr` and returns the previous value (`atom.add.u32`).
///
/// # Safety
/// As [`atomic_add_f32`].
#[inline(always)]
pub unsafe fn atomic_add_u32(ptr: *mut u32, value: u32) -> u32 {
    let old: u32;
    asm!("atom.add.u32 {old}, [{ptr}], {v};", old = out(reg32) old, ptr = in(reg64) ptr, v = in(reg32) value, options(nostack));
    old
}

/// Atomically adds `value` to `*ptr` and returns the previous value (`atom.add.u64`).
///
/// # Safety
/// As [`atomic_add_f32`].
#[inline(always)]
pub unsafe fn atomic_add_u64(ptr: *mut u64, value: u64) -> u64 {
    let old: u64;
    asm!("atom.add.u64 {old}, [{ptr}], {v};", old = out(reg64) old, ptr = in(reg64) ptr, v = in(reg64) value, options(nostack));
    old
}
