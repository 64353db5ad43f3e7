//! `cp.async` (sm_80 and later): asynchronous copies of 4, 8 or 16 bytes from global into
//! shared memory, each thread copying its own, tracked per thread in commit groups.
//!
//! A thread issues copies, closes them into a group with [`commit_group`], and waits with
//! [`wait_group`]`::<N>()` until at most `N` of its groups are still in flight (or
//! [`wait_all`]). The wait covers the calling thread's copies only: before other threads
//! read what it copied, the block needs a barrier (`sync_threads`). The typed
//! [`super::Pipeline`] does all of this for a block; these are the instructions.

/// A copy size in bytes, for [`copy_ca`].
#[derive(Debug, Clone, Copy)]
pub struct Bytes<const N: usize>;

/// The sizes `cp.async.ca` copies: 4, 8 and 16 bytes.
#[diagnostic::on_unimplemented(
    message = "`cp.async` copies 4, 8 or 16 bytes, not the size in `{Self}`",
    label = "not a cp.async size",
    note = "copy a larger range as several 16-byte copies (`copy_cg`), or use the typed `Pipeline`, which splits a range into the largest copies its alignment allows"
)]
pub trait CopySize {}
impl CopySize for Bytes<4> {}
impl CopySize for Bytes<8> {}
impl CopySize for Bytes<16> {}

/// The address of `p` in the shared-memory window (`cvta.to.shared`), as the `cp.async`
/// and `mbarrier` instructions take it.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn shared_window<T>(p: *const T) -> u32 {
    let a: u64;
    // SAFETY: an address conversion; no memory access.
    unsafe {
        core::arch::asm!("cvta.to.shared.u64 {a}, {p};", a = out(reg64) a, p = in(reg64) p, options(pure, nomem, nostack, preserves_flags))
    };
    a as u32
}

/// Copies `N` bytes (4, 8 or 16) from `src` to `dst` asynchronously, through L1 and L2
/// (`cp.async.ca.shared.global`, sm_80 and later).
///
/// # Safety
/// `dst` must be the generic address of `N` bytes of this block's shared memory and `src`
/// of `N` bytes of global memory, each aligned to `N`. Until the copy is waited for
/// ([`wait_group`]), nothing may read or write `dst` and nothing may write `src`.
#[inline(always)]
pub unsafe fn copy_ca<const N: usize>(dst: *mut u8, src: *const u8)
where
    Bytes<N>: CopySize,
{
    needs_arch!(
        "sm_80",
        "copy_ca (cp.async.ca.shared.global) needs sm_80 (Ampere) or newer; on older GPUs load and store through registers"
    );
    gpu_or_host!(
        core::arch::asm!(
            "cp.async.ca.shared.global [{d}], [{s}], {n};",
            d = in(reg32) shared_window(dst), s = in(reg64) src, n = const N,
            options(nostack, preserves_flags)
        ),
        lookahead_emu::hooks::cp_async(dst, src, N, N)
    )
}

/// Copies 16 bytes from `src` to `dst` asynchronously, through L2 only
/// (`cp.async.cg.shared.global`, sm_80 and later; `.cg` takes only 16 bytes).
///
/// # Safety
/// As [`copy_ca`] with `N = 16`.
#[inline(always)]
pub unsafe fn copy_cg(dst: *mut u8, src: *const u8) {
    needs_arch!(
        "sm_80",
        "copy_cg (cp.async.cg.shared.global) needs sm_80 (Ampere) or newer; on older GPUs load and store through registers"
    );
    gpu_or_host!(
        core::arch::asm!(
            "cp.async.cg.shared.global [{d}], [{s}], 16;",
            d = in(reg32) shared_window(dst), s = in(reg64) src,
            options(nostack, preserves_flags)
        ),
        lookahead_emu::hooks::cp_async(dst, src, 16, 16)
    )
}

/// Copies the first `src_bytes` (0 to 16) of the 16 bytes at `src` to `dst` and fills the
/// rest of `dst`'s 16 bytes with zeros, asynchronously (`cp.async.cg.shared.global` with a
/// source size, sm_80 and later): the ragged end of a range, without reading past it.
///
/// # Safety
/// `dst` as for [`copy_cg`]; `src` must be 16-byte aligned and its first `src_bytes` bytes
/// global memory (none is read when `src_bytes` is 0). `src_bytes <= 16`.
#[inline(always)]
pub unsafe fn copy_cg_zfill(dst: *mut u8, src: *const u8, src_bytes: u32) {
    needs_arch!(
        "sm_80",
        "copy_cg_zfill (cp.async.cg.shared.global) needs sm_80 (Ampere) or newer; on older GPUs load and store through registers"
    );
    gpu_or_host!(
        core::arch::asm!(
            "cp.async.cg.shared.global [{d}], [{s}], 16, {n};",
            d = in(reg32) shared_window(dst), s = in(reg64) src, n = in(reg32) src_bytes,
            options(nostack, preserves_flags)
        ),
        lookahead_emu::hooks::cp_async(dst, src, 16, src_bytes as usize)
    )
}

/// Closes the calling thread's copies issued since the last commit into a group
/// (`cp.async.commit_group`, sm_80 and later). A commit with no copies makes an empty
/// group, which keeps the group counts of threads that copied nothing in step.
#[inline(always)]
pub fn commit_group() {
    needs_arch!(
        "sm_80",
        "commit_group (cp.async.commit_group) needs sm_80 (Ampere) or newer"
    );
    gpu_or_host!(
        // SAFETY: no operands.
        unsafe { core::arch::asm!("cp.async.commit_group;", options(nostack, preserves_flags)) },
        lookahead_emu::hooks::cp_async_commit()
    )
}

/// Waits until at most `N` of the calling thread's commit groups are in flight
/// (`cp.async.wait_group N`, sm_80 and later): the copies of older groups are in shared
/// memory, visible to this thread (others need a block barrier after it).
#[inline(always)]
pub fn wait_group<const N: u32>() {
    needs_arch!(
        "sm_80",
        "wait_group (cp.async.wait_group) needs sm_80 (Ampere) or newer"
    );
    gpu_or_host!(
        // SAFETY: a wait; it orders the thread's later accesses after the copies.
        unsafe {
            core::arch::asm!("cp.async.wait_group {n};", n = const N, options(nostack, preserves_flags))
        },
        lookahead_emu::hooks::cp_async_wait(Some(N as u64))
    )
}

/// [`wait_group`] with the count known only at run time (0 to 7; more waits for 7).
#[inline(always)]
pub fn wait_group_dyn(pending: u32) {
    match pending {
        0 => wait_group::<0>(),
        1 => wait_group::<1>(),
        2 => wait_group::<2>(),
        3 => wait_group::<3>(),
        4 => wait_group::<4>(),
        5 => wait_group::<5>(),
        6 => wait_group::<6>(),
        _ => wait_group::<7>(),
    }
}

/// Waits for every copy the calling thread issued, committed or not (`cp.async.wait_all`,
/// sm_80 and later).
#[inline(always)]
pub fn wait_all() {
    needs_arch!(
        "sm_80",
        "wait_all (cp.async.wait_all) needs sm_80 (Ampere) or newer"
    );
    gpu_or_host!(
        // SAFETY: a wait.
        unsafe { core::arch::asm!("cp.async.wait_all;", options(nostack, preserves_flags)) },
        lookahead_emu::hooks::cp_async_wait(None)
    )
}
