//! Barriers, memory fences and sleeping.

/// Waits until every thread of the block reaches this barrier (`bar.sync 0`).
/// Every thread of the block must call it, or the block deadlocks.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a barrier has no memory-safety preconditions.
    on_gpu!("sync::sync_threads", [], unsafe {
        core::arch::nvptx::_syncthreads()
    })
}

/// Orders this thread's memory accesses as seen by the threads of its block (`fence.acq_rel.cta`).
#[inline(always)]
pub fn fence_block() {
    // SAFETY: a fence has no preconditions.
    on_gpu!("sync::fence_block", [], unsafe {
        core::arch::asm!("fence.acq_rel.cta;", options(nostack))
    })
}

/// Orders this thread's memory accesses as seen by all threads of the GPU (`fence.acq_rel.gpu`).
#[inline(always)]
pub fn fence_gpu() {
    // SAFETY: a fence has no preconditions.
    on_gpu!("sync::fence_gpu", [], unsafe {
        core::arch::asm!("fence.acq_rel.gpu;", options(nostack))
    })
}

/// Orders this thread's memory accesses as seen by the host and peers (`fence.acq_rel.sys`).
#[inline(always)]
pub fn fence_system() {
    // SAFETY: a fence has no preconditions.
    on_gpu!("sync::fence_system", [], unsafe {
        core::arch::asm!("fence.acq_rel.sys;", options(nostack))
    })
}

/// Suspends the thread for about `ns` nanoseconds (`nanosleep.u32`, sm_70 and later; the
/// hardware may sleep anywhere in `0..=2*ns`, capped at about 1 ms).
#[inline(always)]
pub fn nanosleep(ns: u32) {
    // SAFETY: sleeping has no preconditions.
    on_gpu!("sync::nanosleep", [ns], unsafe {
        core::arch::asm!("nanosleep.u32 {t};", t = in(reg32) ns, options(nostack))
    })
}
