//! `mbarrier`: a barrier object in a 64-bit word of shared memory, whose phases complete
//! when the expected number of threads arrived and (sm_90) the expected transaction bytes
//! of the asynchronous copies completing on it landed.
//!
//! | method | PTX | needs |
//! | --- | --- | --- |
//! | [`MBarrier::init`] | `mbarrier.init.shared::cta.b64` | sm_80 |
//! | [`MBarrier::arrive`] | `mbarrier.arrive.shared::cta.b64` | sm_80 |
//! | [`MBarrier::test_wait_parity`] | `mbarrier.test_wait.parity.shared::cta.b64` | sm_80 |
//! | [`MBarrier::inval`] | `mbarrier.inval.shared::cta.b64` | sm_80 |
//! | [`MBarrier::arrive_expect_tx`] | `mbarrier.arrive.expect_tx.shared::cta.b64` | sm_90 |
//! | [`MBarrier::expect_tx`] | `mbarrier.expect_tx.shared::cta.b64` | sm_90 |
//! | [`MBarrier::try_wait_parity`] | `mbarrier.try_wait.parity.shared::cta.b64` | sm_90 |
//! | [`MBarrier::wait_parity`] | a loop over `try_wait` (sm_90) or `test_wait` (sm_80) | sm_80 |
//!
//! Phases alternate parity: the first phase has parity 0. A thread that knows which phase
//! it waits for (the `k`-th use of a stage waits for phase `k`) waits for parity `k & 1`.

#[cfg(target_arch = "nvptx64")]
use super::cp_async::shared_window;
use crate::SharedArray;

/// A handle to an mbarrier: one 8-byte-aligned `u64` of the block's shared memory. Copy it
/// freely; every copy names the same barrier.
#[derive(Debug, Clone, Copy)]
pub struct MBarrier {
    word: *mut u64,
}

impl MBarrier {
    /// The barrier in element `i` of a shared array of `u64` (bounds-checked).
    #[inline(always)]
    pub fn in_shared<const N: usize>(words: SharedArray<u64, N>, i: usize) -> Self {
        assert!(i < N, "mbarrier index out of bounds of its shared array");
        // SAFETY: element `i` of a shared array of u64: shared memory, 8-byte aligned.
        unsafe { Self::from_ptr(words.as_ptr().add(i)) }
    }

    /// The barrier at `word`.
    ///
    /// # Safety
    /// `word` must be the generic address of an 8-byte-aligned `u64` in this block's shared
    /// memory, which nothing else reads or writes while it is used as an mbarrier.
    #[inline(always)]
    pub unsafe fn from_ptr(word: *mut u64) -> Self {
        MBarrier { word }
    }

    /// The generic address of the barrier's word.
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut u64 {
        self.word
    }

    /// Initialises the barrier for `count` arrivals per phase, its first phase of parity 0
    /// (`mbarrier.init`, sm_80). One thread initialises it; the others use it after a block
    /// barrier (and, for bulk copies, [`super::bulk::fence_proxy_async_shared`] first).
    #[inline(always)]
    pub fn init(&self, count: u32) {
        needs_arch!(
            "sm_80",
            "MBarrier::init (mbarrier.init) needs sm_80 (Ampere) or newer"
        );
        gpu_or_host!(
            // SAFETY: the word is shared memory (the constructors' contract).
            unsafe {
                core::arch::asm!("mbarrier.init.shared::cta.b64 [{b}], {n};", b = in(reg32) shared_window(self.word), n = in(reg32) count, options(nostack, preserves_flags))
            },
            lookahead_emu::hooks::mbarrier_init(self.word, count)
        )
    }

    /// Arrives on the current phase (`mbarrier.arrive`, sm_80); returns the barrier's state
    /// before the arrival (an opaque token).
    #[inline(always)]
    pub fn arrive(&self) -> u64 {
        needs_arch!(
            "sm_80",
            "MBarrier::arrive (mbarrier.arrive) needs sm_80 (Ampere) or newer"
        );
        gpu_or_host!(
            {
                let state: u64;
                // SAFETY: as in `init`.
                unsafe {
                    core::arch::asm!("mbarrier.arrive.shared::cta.b64 {s}, [{b}];", s = out(reg64) state, b = in(reg32) shared_window(self.word), options(nostack, preserves_flags))
                };
                state
            },
            lookahead_emu::hooks::mbarrier_arrive(self.word, 0, true)
        )
    }

    /// Announces `bytes` more transaction bytes for the current phase and arrives
    /// (`mbarrier.arrive.expect_tx`, sm_90): the phase completes once every arrival is in and
    /// the asynchronous copies completing on it delivered exactly the bytes announced.
    #[inline(always)]
    pub fn arrive_expect_tx(&self, bytes: u32) -> u64 {
        needs_arch!(
            "sm_90",
            "MBarrier::arrive_expect_tx (mbarrier.arrive.expect_tx) needs sm_90 (Hopper) or newer; on sm_80 complete a cp.async pipeline with cp_async::wait_group instead"
        );
        gpu_or_host!(
            {
                let state: u64;
                // SAFETY: as in `init`.
                unsafe {
                    core::arch::asm!("mbarrier.arrive.expect_tx.shared::cta.b64 {s}, [{b}], {n};", s = out(reg64) state, b = in(reg32) shared_window(self.word), n = in(reg32) bytes, options(nostack, preserves_flags))
                };
                state
            },
            lookahead_emu::hooks::mbarrier_arrive(self.word, bytes, true)
        )
    }

    /// Announces `bytes` more transaction bytes for the current phase without arriving
    /// (`mbarrier.expect_tx`, sm_90).
    #[inline(always)]
    pub fn expect_tx(&self, bytes: u32) {
        needs_arch!(
            "sm_90",
            "MBarrier::expect_tx (mbarrier.expect_tx) needs sm_90 (Hopper) or newer"
        );
        gpu_or_host!(
            // SAFETY: as in `init`.
            unsafe {
                core::arch::asm!("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{b}], {n};", b = in(reg32) shared_window(self.word), n = in(reg32) bytes, options(nostack, preserves_flags))
            },
            {
                lookahead_emu::hooks::mbarrier_arrive(self.word, bytes, false);
            }
        )
    }

    /// Whether the phase of parity `parity` has completed, waiting a while in hardware first
    /// (`mbarrier.try_wait.parity`, sm_90). Parity 0 is the first phase, 1 the second, 0
    /// the third...
    #[inline(always)]
    pub fn try_wait_parity(&self, parity: u32) -> bool {
        needs_arch!(
            "sm_90",
            "MBarrier::try_wait_parity (mbarrier.try_wait.parity) needs sm_90 (Hopper) or newer; use test_wait_parity on sm_80"
        );
        gpu_or_host!(
            {
                let done: u32;
                // SAFETY: as in `init`.
                unsafe {
                    core::arch::asm!(
                        "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {k}; selp.u32 {d}, 1, 0, p; }}",
                        d = out(reg32) done, b = in(reg32) shared_window(self.word), k = in(reg32) parity,
                        options(nostack, preserves_flags)
                    )
                };
                done != 0
            },
            lookahead_emu::hooks::mbarrier_try_wait(self.word, parity)
        )
    }

    /// Whether the phase of parity `parity` has completed, without waiting
    /// (`mbarrier.test_wait.parity`, sm_80).
    #[inline(always)]
    pub fn test_wait_parity(&self, parity: u32) -> bool {
        needs_arch!(
            "sm_80",
            "MBarrier::test_wait_parity (mbarrier.test_wait.parity) needs sm_80 (Ampere) or newer"
        );
        gpu_or_host!(
            {
                let done: u32;
                // SAFETY: as in `init`.
                unsafe {
                    core::arch::asm!(
                        "{{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [{b}], {k}; selp.u32 {d}, 1, 0, p; }}",
                        d = out(reg32) done, b = in(reg32) shared_window(self.word), k = in(reg32) parity,
                        options(nostack, preserves_flags)
                    )
                };
                done != 0
            },
            lookahead_emu::hooks::mbarrier_try_wait(self.word, parity)
        )
    }

    /// Waits until the phase of parity `parity` has completed (a loop over
    /// `mbarrier.try_wait.parity` on sm_90, `mbarrier.test_wait.parity` on sm_80). On the
    /// emulator a phase that can never complete is reported as a deadlock.
    #[inline(always)]
    pub fn wait_parity(&self, parity: u32) {
        #[cfg(all(target_arch = "nvptx64", target_feature = "sm_90"))]
        while !self.try_wait_parity(parity) {}
        #[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_90")))]
        while !self.test_wait_parity(parity) {}
        #[cfg(not(target_arch = "nvptx64"))]
        lookahead_emu::hooks::mbarrier_wait(self.word, parity);
    }

    /// Ends the barrier's use as an mbarrier (`mbarrier.inval`, sm_80): its word may then be
    /// reused as plain shared memory or initialised again.
    #[inline(always)]
    pub fn inval(&self) {
        needs_arch!(
            "sm_80",
            "MBarrier::inval (mbarrier.inval) needs sm_80 (Ampere) or newer"
        );
        gpu_or_host!(
            // SAFETY: as in `init`.
            unsafe {
                core::arch::asm!("mbarrier.inval.shared::cta.b64 [{b}];", b = in(reg32) shared_window(self.word), options(nostack, preserves_flags))
            },
            lookahead_emu::hooks::mbarrier_inval(self.word)
        )
    }
}
