//! Warp-level data exchange.

use core::arch::asm;

/// All 32 lanes of the warp.
pub const FULL_MASK: u32 = 0xffff_ffff;

/// Returns `value` from lane `lane_id + delta` of the warp (`shfl.sync.down.b32`); lanes
/// past the end get their own value back. Every lane in `FULL_MASK` must call it.
#[inline(always)]
pub fn shfl_down_f32(value: f32, delta: u32) -> f32 {
    let out: f32;
    // SAFETY: a register-to-register exchange; all lanes of a full warp take part.
    unsafe {
        asm!("shfl.sync.down.b32 {out}, {v}, {d}, 0x1f, {m};", out = out(reg32) out, v = in(reg32) value, d = in(reg32) delta, m = in(reg32) FULL_MASK, options(nostack));
    }
    out
}

/// Sum of `value` over the 32 lanes of a full warp; the result is valid in lane 0.
#[inline(always)]
pub fn warp_sum_f32(mut value: f32) -> f32 {
    let mut delta = 16;
    while delta > 0 {
        value += shfl_down_f32(value, delta);
        delta /= 2;
    }
    value
}
