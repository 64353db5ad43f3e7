//! Thread, block and grid coordinates.

use core::arch::nvptx;

/// Thread index within its block, x dimension (`%tid.x`).
#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reads a special register; always valid inside a kernel.
    unsafe { nvptx::_thread_idx_x() as u32 }
}

/// Block index within the grid, x dimension (`%ctaid.x`).
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_x() as u32 }
}

/// Threads per block, x dimension (`%ntid.x`).
#[inline(always)]
pub fn block_dim_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_dim_x() as u32 }
}

/// Blocks per grid, x dimension (`%nctaid.x`).
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_grid_dim_x() as u32 }
}

/// This thread's index in a 1-D grid: `block_idx_x * block_dim_x + thread_idx_x`.
#[inline(always)]
pub fn global_index_x() -> usize {
    block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize
}

/// Total threads in a 1-D grid, the step of a grid-stride loop.
#[inline(always)]
pub fn grid_stride_x() -> usize {
    grid_dim_x() as usize * block_dim_x() as usize
}

/// Lane index within the warp (0..32).
#[inline(always)]
pub fn lane_id() -> u32 {
    thread_idx_x() % 32
}
