//! A panic on the GPU (an out-of-bounds index, an overflow in a debug build) traps: the
//! launch fails with an error the host reports, instead of silently continuing.

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no preconditions.
    unsafe { core::arch::nvptx::trap() }
}
