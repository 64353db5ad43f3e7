//! What fits no other module (`cuda_std::misc`): stopping a kernel, and the clocks.

/// Stops the kernel with an error (`trap`): the launch fails with
/// `CUDA_ERROR_LAUNCH_FAILED` and the context can no longer be used.
#[inline(always)]
pub fn trap() -> ! {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: `trap` only ends the kernel.
    unsafe {
        core::arch::asm!("trap;", options(noreturn, nostack))
    }
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("cuda_std::misc::trap called on the host")
}

/// Ends the calling thread normally (`exit`), as if it had returned from the kernel.
#[inline(always)]
pub fn exit() -> ! {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: `exit` only ends the thread.
    unsafe {
        core::arch::asm!("exit;", options(noreturn, nostack))
    }
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("cuda_std::misc::exit called on the host")
}

/// Stops at a debugger's breakpoint (`brkpt`); without a debugger the launch fails.
#[inline(always)]
pub fn breakpoint() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: `brkpt` only suspends the thread.
    unsafe {
        core::arch::asm!("brkpt;", options(nostack))
    }
}

/// The SM's cycle counter, low 32 bits (`%clock`).
#[inline(always)]
pub fn clock() -> u32 {
    crate::sreg32!("%clock", 0)
}

/// The SM's 64-bit cycle counter (`%clock64`).
#[inline(always)]
pub fn clock64() -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let t: u64;
        // SAFETY: reads a special register.
        unsafe {
            core::arch::asm!("mov.u64 {t}, %clock64;", t = out(reg64) t, options(nostack, nomem))
        };
        t
    }
    #[cfg(not(target_arch = "nvptx64"))]
    0
}

/// A nanosecond timer shared by the device's SMs (`%globaltimer`).
#[inline(always)]
pub fn global_timer() -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let t: u64;
        // SAFETY: reads a special register.
        unsafe {
            core::arch::asm!(
                "mov.u64 {t}, %globaltimer;",
                t = out(reg64) t,
                options(nostack, nomem)
            )
        };
        t
    }
    #[cfg(not(target_arch = "nvptx64"))]
    0
}
