//! Barriers, memory fences, sleeping and the clock.

/// Waits until every thread of the block reaches this barrier (`bar.sync 0`).
/// Every thread of the block must call it, or the block deadlocks; and every thread must
/// call the same one (the emulator reports threads waiting at different lines).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn sync_threads() {
    // SAFETY: a barrier has no memory-safety preconditions.
    gpu_or_host!(
        unsafe { core::arch::nvptx::_syncthreads() },
        lookahead_emu::hooks::sync_threads()
    )
}

/// Orders this thread's memory accesses as seen by the threads of its block (`fence.acq_rel.cta`).
#[inline(always)]
pub fn fence_block() {
    // SAFETY: a fence has no preconditions.
    gpu_or_host!(
        unsafe { core::arch::asm!("fence.acq_rel.cta;", options(nostack)) },
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst)
    )
}

/// Orders this thread's memory accesses as seen by all threads of the GPU (`fence.acq_rel.gpu`).
#[inline(always)]
pub fn fence_gpu() {
    // SAFETY: a fence has no preconditions.
    gpu_or_host!(
        unsafe { core::arch::asm!("fence.acq_rel.gpu;", options(nostack)) },
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst)
    )
}

/// Orders this thread's memory accesses as seen by the host and peers (`fence.acq_rel.sys`).
#[inline(always)]
pub fn fence_system() {
    // SAFETY: a fence has no preconditions.
    gpu_or_host!(
        unsafe { core::arch::asm!("fence.acq_rel.sys;", options(nostack)) },
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst)
    )
}

/// Suspends the thread for about `ns` nanoseconds (`nanosleep.u32`, sm_70 and later; the
/// hardware may sleep anywhere in `0..=2*ns`, capped at about 1 ms).
#[inline(always)]
pub fn nanosleep(ns: u32) {
    // SAFETY: sleeping has no preconditions.
    gpu_or_host!(
        unsafe { core::arch::asm!("nanosleep.u32 {t};", t = in(reg32) ns, options(nostack)) },
        {
            // The emulator lets the block's other threads run instead of sleeping.
            let _ = ns;
            lookahead_emu::hooks::sleep()
        }
    )
}

/// The GPU's global nanosecond clock (`%globaltimer`), comparable across SMs (on the host
/// emulator: nanoseconds since the Unix epoch).
#[inline(always)]
pub fn globaltimer_ns() -> u64 {
    gpu_or_host!(
        {
            let t: u64;
            // SAFETY: reads the global timer register.
            unsafe {
                core::arch::asm!(
                    "mov.u64 {t}, %globaltimer;",
                    t = out(reg64) t,
                    options(nostack, nomem)
                )
            };
            t
        },
        {
            extern crate std;
            std::time::UNIX_EPOCH
                .elapsed()
                .map_or(0, |d| d.as_nanos() as u64)
        }
    )
}
