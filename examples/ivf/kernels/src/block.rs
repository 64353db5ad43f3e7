//! Block-wide prefix sums, for the single-block planning kernel.

use lookahead_device::prelude::*;

/// Shared words [`exclusive_sum`] needs: one per warp of a 1024-thread block.
pub const SCRATCH_WORDS: usize = 32;

/// A value [`exclusive_sum`] adds up: 32-bit counts, or 64-bit ones where a batch's total
/// may pass `u32::MAX`.
pub trait ScanValue: Copy + core::ops::Add<Output = Self> + core::ops::Sub<Output = Self> {
    /// Zero.
    const ZERO: Self;
    /// The value of lane `lane - delta` (`shfl.sync.up`).
    fn shfl_up(self, delta: u32) -> Self;
}

impl ScanValue for u32 {
    const ZERO: Self = 0;
    #[inline(always)]
    fn shfl_up(self, delta: u32) -> Self {
        warp::shfl_up_u32(self, delta)
    }
}

impl ScanValue for u64 {
    const ZERO: Self = 0;
    #[inline(always)]
    fn shfl_up(self, delta: u32) -> Self {
        let lo = warp::shfl_up_u32(self as u32, delta) as u64;
        let hi = warp::shfl_up_u32((self >> 32) as u32, delta) as u64;
        lo | hi << 32
    }
}

/// The exclusive prefix sum of `value` over the threads of the block, and the block's
/// total. Every thread of the block must call it (it has barriers); the block must be a
/// whole number of warps, at most 1024 threads. `scratch` is block-shared and reused by the
/// next call (the last barrier guards it).
#[inline(always)]
pub fn exclusive_sum<T: ScanValue>(value: T, scratch: SharedArray<T, SCRATCH_WORDS>) -> (T, T) {
    let lane = lane_id();
    let warp = thread_idx_x() as usize / 32;
    let warps = (block_dim_x() as usize).div_ceil(32);
    let x = warp_inclusive_sum(value, lane);
    if lane == 31 {
        scratch.set(warp, x);
    }
    sync_threads();
    if warp == 0 {
        let w = if (lane as usize) < warps {
            scratch.get(lane as usize)
        } else {
            T::ZERO
        };
        let w = warp_inclusive_sum(w, lane);
        if (lane as usize) < warps {
            scratch.set(lane as usize, w);
        }
    }
    sync_threads();
    let before = if warp > 0 {
        scratch.get(warp - 1)
    } else {
        T::ZERO
    };
    let total = scratch.get(warps - 1);
    sync_threads();
    (before + x - value, total)
}

/// The sum of `value` over lanes `0..=lane` of the warp (every lane must call it).
#[inline(always)]
fn warp_inclusive_sum<T: ScanValue>(value: T, lane: u32) -> T {
    let mut x = value;
    let mut off = 1;
    while off < 32 {
        let y = x.shfl_up(off);
        if lane >= off {
            x = x + y;
        }
        off *= 2;
    }
    x
}
