//! Bulk asynchronous copies (sm_90 and later): one thread copies a whole range of global
//! memory into shared memory with the copy engine
//! (`cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`), which reports the
//! bytes it delivered to an [`MBarrier`]; the barrier's phase completes once they match the
//! bytes announced with [`MBarrier::arrive_expect_tx`].
//!
//! The copy engine is the *async proxy*: shared memory the block's threads wrote (the
//! generic proxy) and then hand to it must be fenced first ([`fence_proxy_async_shared`]).

use super::mbarrier::MBarrier;

/// The alignment, in bytes, of a bulk copy's addresses and the granule of its size.
pub const BULK_ALIGN: usize = 16;

/// Copies `BYTES` bytes from `src` to `dst` with the copy engine, completing on `barrier`
/// (`cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`, sm_90). `BYTES`
/// must be a non-zero multiple of 16 below 2^20: a compile error otherwise.
///
/// # Safety
/// As [`copy_bulk_dyn`] with `bytes = BYTES`.
#[inline(always)]
pub unsafe fn copy_bulk<const BYTES: u32>(dst: *mut u8, src: *const u8, barrier: MBarrier) {
    const {
        assert!(
            BYTES > 0 && BYTES % 16 == 0 && BYTES < 1 << 20,
            "copy_bulk::<BYTES>: a bulk copy's size is a non-zero multiple of 16 bytes below 1 MiB (the mbarrier counts at most 2^20 - 1 transaction bytes)"
        )
    };
    copy_bulk_dyn(dst, src, BYTES, barrier)
}

/// [`copy_bulk`] with a size known at run time (checked: a trap on the GPU, a panic on the
/// emulator, when it is not a non-zero multiple of 16 below 2^20 or an address is not
/// 16-byte aligned).
///
/// # Safety
/// `dst` must be the generic address of `bytes` bytes of this block's shared memory that
/// nothing reads or writes until `barrier`'s current phase completes, and `src` of `bytes`
/// bytes of global memory that nothing writes until then; `barrier` must be initialised, and
/// the bytes announced to it for this phase ([`MBarrier::arrive_expect_tx`]) must count these.
#[inline(always)]
pub unsafe fn copy_bulk_dyn(dst: *mut u8, src: *const u8, bytes: u32, barrier: MBarrier) {
    needs_arch!(
        "sm_90",
        "copy_bulk (cp.async.bulk.shared::cluster.global) needs sm_90 (Hopper) or newer; use the cp_async copies (sm_80) instead"
    );
    let aligned = (dst as usize | src as usize | bytes as usize) % BULK_ALIGN == 0;
    assert!(
        aligned && bytes > 0 && bytes < 1 << 20,
        "a bulk copy needs 16-byte-aligned addresses and a non-zero size that is a multiple of 16 bytes below 1 MiB"
    );
    gpu_or_host!(
        core::arch::asm!(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
            d = in(reg32) super::cp_async::shared_window(dst),
            s = in(reg64) src,
            n = in(reg32) bytes,
            b = in(reg32) super::cp_async::shared_window(barrier.as_ptr()),
            options(nostack, preserves_flags)
        ),
        lookahead_emu::hooks::cp_async_bulk(dst, src, bytes as usize, barrier.as_ptr())
    )
}

/// Orders this thread's earlier accesses to shared memory before later accesses by the
/// copy engine (`fence.proxy.async.shared::cta`, sm_90): after initialising an mbarrier
/// that bulk copies complete on, or writing shared memory a bulk copy will overwrite.
#[inline(always)]
pub fn fence_proxy_async_shared() {
    needs_arch!(
        "sm_90",
        "fence_proxy_async_shared (fence.proxy.async.shared::cta) needs sm_90 (Hopper) or newer"
    );
    gpu_or_host!(
        // SAFETY: a fence.
        unsafe {
            core::arch::asm!(
                "fence.proxy.async.shared::cta;",
                options(nostack, preserves_flags)
            )
        },
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst)
    )
}
