//! Thread, block and grid coordinates (PTX special registers) and global-index helpers.

macro_rules! special_register {
    ($(#[$doc:meta] $name:ident => $intr:ident, $field:ident[$d:literal];)*) => {$(
        #[$doc]
        #[inline(always)]
        pub fn $name() -> u32 {
            gpu_or_host!(
                // SAFETY: reads a special register; always valid inside a kernel.
                unsafe { core::arch::nvptx::$intr() as u32 },
                lookahead_emu::hooks::coords(concat!("index::", stringify!($name))).$field[$d]
            )
        }
    )*};
}

special_register! {
    /// Thread index within its block, x dimension (`%tid.x`).
    thread_idx_x => _thread_idx_x, thread_idx[0];
    /// Thread index within its block, y dimension (`%tid.y`).
    thread_idx_y => _thread_idx_y, thread_idx[1];
    /// Thread index within its block, z dimension (`%tid.z`).
    thread_idx_z => _thread_idx_z, thread_idx[2];
    /// Block index within the grid, x dimension (`%ctaid.x`).
    block_idx_x => _block_idx_x, block_idx[0];
    /// Block index within the grid, y dimension (`%ctaid.y`).
    block_idx_y => _block_idx_y, block_idx[1];
    /// Block index within the grid, z dimension (`%ctaid.z`).
    block_idx_z => _block_idx_z, block_idx[2];
    /// Threads per block, x dimension (`%ntid.x`).
    block_dim_x => _block_dim_x, block_dim[0];
    /// Threads per block, y dimension (`%ntid.y`).
    block_dim_y => _block_dim_y, block_dim[1];
    /// Threads per block, z dimension (`%ntid.z`).
    block_dim_z => _block_dim_z, block_dim[2];
    /// Blocks per grid, x dimension (`%nctaid.x`).
    grid_dim_x => _grid_dim_x, grid_dim[0];
    /// Blocks per grid, y dimension (`%nctaid.y`).
    grid_dim_y => _grid_dim_y, grid_dim[1];
    /// Blocks per grid, z dimension (`%nctaid.z`).
    grid_dim_z => _grid_dim_z, grid_dim[2];
}

/// Threads per warp.
pub const WARP_SIZE: u32 = 32;

/// This thread's index in a 1-D grid: `block_idx_x * block_dim_x + thread_idx_x`.
#[inline(always)]
pub fn global_index_x() -> usize {
    block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize
}

/// This thread's y coordinate in a 2-D grid: `block_idx_y * block_dim_y + thread_idx_y`.
#[inline(always)]
pub fn global_index_y() -> usize {
    block_idx_y() as usize * block_dim_y() as usize + thread_idx_y() as usize
}

/// This thread's z coordinate in a 3-D grid.
#[inline(always)]
pub fn global_index_z() -> usize {
    block_idx_z() as usize * block_dim_z() as usize + thread_idx_z() as usize
}

/// Total threads in a 1-D grid, the step of a grid-stride loop.
#[inline(always)]
pub fn grid_stride_x() -> usize {
    grid_dim_x() as usize * block_dim_x() as usize
}

/// Lane index within the warp (0..32), for 1-D blocks.
#[inline(always)]
pub fn lane_id() -> u32 {
    thread_idx_x() % WARP_SIZE
}

/// Warp index within the block, for 1-D blocks.
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_idx_x() / WARP_SIZE
}

/// The SM this thread runs on (`%smid`; not necessarily below the SM count, and a block
/// keeps its SM for its whole run). In the emulator every block has an SM of its own:
/// the block's linear index.
#[inline(always)]
pub fn sm_id() -> u32 {
    gpu_or_host!(
        {
            let id: u32;
            // SAFETY: reads a special register.
            unsafe {
                core::arch::asm!(
                    "mov.u32 {id}, %smid;",
                    id = out(reg32) id,
                    options(nostack, nomem)
                )
            };
            id
        },
        {
            let c = lookahead_emu::hooks::coords("index::sm_id");
            c.block_idx[0] + c.grid_dim[0] * (c.block_idx[1] + c.grid_dim[1] * c.block_idx[2])
        }
    )
}
