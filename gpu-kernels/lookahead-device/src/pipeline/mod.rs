//! Asynchronous copies from global into shared memory, and the pipelines made of them:
//! while the block computes on one stage of data in shared memory, the next stages are
//! already on their way (CUDA's `cuda::memcpy_async` / `cuda::pipeline`, CUTLASS's
//! multistage pipelines, Triton's `num_stages`).
//!
//! | item | PTX | needs |
//! | --- | --- | --- |
//! | [`cp_async::copy_ca`] (4, 8, 16 bytes) / [`cp_async::copy_cg`] (16) | `cp.async.{ca,cg}.shared.global` | sm_80 |
//! | [`cp_async::copy_cg_zfill`] | `cp.async.cg.shared.global` with a source size | sm_80 |
//! | [`cp_async::commit_group`], [`cp_async::wait_group`], [`cp_async::wait_all`] | `cp.async.commit_group`, `cp.async.wait_group N`, `cp.async.wait_all` | sm_80 |
//! | [`mbarrier::MBarrier`] | `mbarrier.{init,arrive,test_wait,inval}` (sm_80), `mbarrier.{arrive.expect_tx,expect_tx,try_wait}` (sm_90) | sm_80 / sm_90 |
//! | [`bulk::copy_bulk`] | `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes` | sm_90 |
//! | [`bulk::fence_proxy_async_shared`] | `fence.proxy.async.shared::cta` | sm_90 |
//! | [`Pipeline`] with [`CpAsync`] / [`Bulk`] / [`BulkPortable`] | the above, typed | sm_80 / sm_90 / both |
//! | [`Pipeline`] with [`LoadStore`] | `ld.global`, `st.shared`, `bar.sync` | any |
//!
//! As with the prefetch instructions, calling one on a GPU architecture that lacks it is a
//! compile error naming the architecture needed ("needs sm_90 (Hopper) or newer").
//!
//! **Prefer the typed [`Pipeline`]** (declared with [`crate::pipeline!`]): its stages can only
//! be read through the token the wait returns, copies never target a buffer that can still be
//! read, and sizes are checked at compile time. The raw instructions are `unsafe` where the
//! hardware leaves the ordering to the program. On the CPU emulator every copy is modelled:
//! its bytes land at its wait (or at a random earlier point, `Emulator::async_copy_landing`),
//! and a read of a staged buffer before its wait, a write to one in flight, a wrong
//! `expect_tx` byte count and an mbarrier phase missing an arrival are reported naming the
//! kernel, block and thread.
//!
//! **A hint or a pipeline?** A prefetch hint ([`crate::prefetch`]) asks the memory system to
//! start loading early and costs one instruction, but guarantees nothing and needs the
//! registers to hold what the loads bring. A pipeline moves the data into shared memory
//! itself, several stages ahead, so many bytes are in flight without registers holding them:
//! it pays where a block reads a tile that all its threads use (a GEMM's k-tiles, a stencil's
//! halo tile, gathered rows), or where a loop's loads cannot be issued early enough by the
//! threads themselves (see `docs/guide.md`).

pub mod bulk;
pub mod cp_async;
mod kind;
pub mod mbarrier;
mod source;
mod stage;

#[doc(hidden)]
pub use kind::RowCopy;
pub use kind::{Bulk, BulkPortable, CopyKind, CpAsync, LoadStore};
pub use mbarrier::MBarrier;
#[doc(hidden)]
pub use source::{range_count, stage_in, staged};
pub use source::{GatherRows, Rows, StageRows, StageSource};
pub use stage::{Copier, Pipeline, Ready};

/// `pipeline!(T; LEN, stages = S, copy = K)`: a block-wide [`Pipeline`] of `S` stages of
/// `LEN` elements of `T` in static shared memory (`S * LEN * size_of::<T>()` bytes, at most
/// 48 KiB with the rest of the block's `shared_array!`s), filled by copies of kind `K`
/// ([`CpAsync`], [`Bulk`], [`BulkPortable`] or [`LoadStore`]). Every thread of the block must reach it (it
/// ends with a block barrier). Each call site is one pipeline.
///
/// ```ignore
/// let mut p = pipeline!(f32; 1024, stages = 3, copy = CpAsync);
/// ```
#[macro_export]
macro_rules! pipeline {
    ($t:ty; $len:expr, stages = $stages:expr, copy = $kind:ty) => {
        $crate::pipeline::Pipeline::<$t, { $len }, { $stages }, $kind>::new(
            $crate::shared_array!([$t; $len]; $stages),
            $crate::shared_array!(u64; $stages),
        )
    };
}
