//! Barriers and memory fences.

/// Waits until every thread of the block reaches this barrier (`bar.sync 0`).
/// Every thread of the block must call it, or the block deadlocks.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a barrier has no memory-safety preconditions.
    unsafe { core::arch::nvptx::_syncthreads() }
}

/// Orders this thread's memory accesses as seen by all threads of the GPU (`fence.acq_rel.gpu`).
#[inline(always)]
pub fn fence_gpu() {
    // SAFETY: a fence has no preconditions.
    unsafe { core::arch::asm!("fence.acq_rel.gpu;", options(nostack)) }
}

/// Orders this thread's memory accesses as seen by the host and peers (`fence.acq_rel.sys`).
#[inline(always)]
pub fn fence_system() {
    // SAFETY: a fence has no preconditions.
    unsafe { core::arch::asm!("fence.acq_rel.sys;", options(nostack)) }
}
