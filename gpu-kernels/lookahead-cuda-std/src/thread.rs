//! The CUDA thread model: where the calling thread is in its block and grid, and block-wide
//! synchronisation (`cuda_std::thread`).

use lookahead_device::index as ix;
use lookahead_device::sync;

use glam::{UVec2, UVec3};

macro_rules! coords {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> u32 {
            ix::$name()
        }
    )*};
}

coords!(
    /// `threadIdx.x`.
    thread_idx_x,
    /// `threadIdx.y`.
    thread_idx_y,
    /// `threadIdx.z`.
    thread_idx_z,
    /// `blockIdx.x`.
    block_idx_x,
    /// `blockIdx.y`.
    block_idx_y,
    /// `blockIdx.z`.
    block_idx_z,
    /// `blockDim.x`.
    block_dim_x,
    /// `blockDim.y`.
    block_dim_y,
    /// `blockDim.z`.
    block_dim_z,
    /// `gridDim.x`.
    grid_dim_x,
    /// `gridDim.y`.
    grid_dim_y,
    /// `gridDim.z`.
    grid_dim_z,
);

/// `threadIdx`.
#[inline(always)]
pub fn thread_idx() -> UVec3 {
    UVec3::new(thread_idx_x(), thread_idx_y(), thread_idx_z())
}

/// `blockIdx`.
#[inline(always)]
pub fn block_idx() -> UVec3 {
    UVec3::new(block_idx_x(), block_idx_y(), block_idx_z())
}

/// `blockDim`: threads per block in each direction.
#[inline(always)]
pub fn block_dim() -> UVec3 {
    UVec3::new(block_dim_x(), block_dim_y(), block_dim_z())
}

/// `gridDim`: blocks per grid in each direction.
#[inline(always)]
pub fn grid_dim() -> UVec3 {
    UVec3::new(grid_dim_x(), grid_dim_y(), grid_dim_z())
}

/// The thread's index in the whole grid, unique under a 1d, 2d or 3d launch: the block's
/// linear index times the block's size, plus the thread's linear index in its block.
#[inline(always)]
pub fn index() -> u32 {
    let (b, d, t) = (block_idx(), block_dim(), thread_idx());
    let g = grid_dim();
    let block = b.x + b.y * g.x + b.z * g.x * g.y;
    block * d.element_product() + t.z * d.x * d.y + t.y * d.x + t.x
}

/// `threadIdx.x + blockIdx.x * blockDim.x`.
#[inline(always)]
pub fn index_1d() -> u32 {
    thread_idx_x() + block_idx_x() * block_dim_x()
}

/// The global (x, y) index of a 2d launch.
#[inline(always)]
pub fn index_2d() -> UVec2 {
    UVec2::new(
        thread_idx_x() + block_idx_x() * block_dim_x(),
        thread_idx_y() + block_idx_y() * block_dim_y(),
    )
}

/// The global (x, y, z) index of a 3d launch.
#[inline(always)]
pub fn index_3d() -> UVec3 {
    UVec3::new(
        thread_idx_x() + block_idx_x() * block_dim_x(),
        thread_idx_y() + block_idx_y() * block_dim_y(),
        thread_idx_z() + block_idx_z() * block_dim_z(),
    )
}

/// Whether this is thread 0 of block 0 (true in exactly one thread of a launch).
#[inline(always)]
pub fn first() -> bool {
    block_idx() == UVec3::ZERO && thread_idx() == UVec3::ZERO
}

/// Threads per warp (32).
#[inline(always)]
pub fn warp_size() -> u32 {
    32
}

/// `__syncthreads()`: waits until every thread of the block is here.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn sync_threads() {
    sync::sync_threads()
}

/// A block barrier that reduces every thread's `predicate` (`bar.red`), on the GPU only.
macro_rules! barrier_reduction {
    ($(#[$doc:meta])* $name:ident, $reduce:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(predicate: u32) -> u32 {
            #[cfg(target_arch = "nvptx64")]
            {
                let r: u32;
                // SAFETY: a block barrier with a reduction; every thread of the block calls it.
                unsafe {
                    core::arch::asm!(
                        concat!("{{ .reg .pred p, q; setp.ne.u32 p, {v}, 0; ", $reduce, " }}"),
                        v = in(reg32) predicate, r = out(reg32) r, options(nostack)
                    )
                };
                r
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                let _ = predicate;
                unimplemented!(concat!("`", stringify!($name), "` can only be used on the GPU"))
            }
        }
    };
}

barrier_reduction!(
    /// `__syncthreads_count(predicate)`: a barrier that returns how many threads of the
    /// block passed a non-zero `predicate` (`bar.red.popc`).
    sync_threads_count,
    "bar.red.popc.u32 {r}, 0, p;"
);
barrier_reduction!(
    /// `__syncthreads_and(predicate)`: a barrier that returns 1 when every thread's
    /// `predicate` was non-zero (`bar.red.and`).
    sync_threads_and,
    "bar.red.and.pred q, 0, p; selp.u32 {r}, 1, 0, q;"
);
barrier_reduction!(
    /// `__syncthreads_or(predicate)`: a barrier that returns 1 when any thread's
    /// `predicate` was non-zero (`bar.red.or`).
    sync_threads_or,
    "bar.red.or.pred q, 0, p; selp.u32 {r}, 1, 0, q;"
);

/// A memory fence at grid scope (every thread of the launch): `fence.acq_rel.gpu`.
#[inline(always)]
pub fn grid_fence() {
    sync::fence_gpu()
}

/// A memory fence at device scope: `fence.acq_rel.gpu`.
#[inline(always)]
pub fn device_fence() {
    sync::fence_gpu()
}

/// A memory fence at system scope (the host and other devices): `fence.acq_rel.sys`.
#[inline(always)]
pub fn system_fence() {
    sync::fence_system()
}

/// `__nanosleep(ns)`.
#[inline(always)]
pub fn nanosleep(ns: u32) {
    sync::nanosleep(ns)
}
