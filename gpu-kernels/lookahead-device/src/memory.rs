//! Loads and stores with PTX ordering and cache qualifiers: what protocols between GPU
//! threads, and between the GPU and the host, are built from ([`crate::uvm`]). On the host
//! (the emulator, and host-side tests of those protocols) each is the `core::sync::atomic`
//! operation with the same guarantees.
//!
//! | function | PTX |
//! | --- | --- |
//! | [`load_relaxed_gpu`] | `ld.relaxed.gpu.u32` |
//! | [`load_acquire_gpu`] | `ld.acquire.gpu.global.u32` |
//! | [`load_acquire_system`] | `ld.acquire.sys.u32` |
//! | [`store_release_system`] | `fence.sc.sys; st.release.sys.u32` |
//! | [`store_volatile_u32`], [`store_volatile_u64`] | `st.volatile.u32` / `.u64` |
//! | [`load_streaming`], [`load_streaming_v4`] | `ld.global.cs.u32` / `.v4.u32` |
//! | [`store_v4`] | `st.global.v4.u32` |
//!
//! All take raw addresses and are `unsafe`: the caller guarantees the address is valid and
//! aligned for the access, and (for the `global` forms) in global memory.

#[cfg(not(target_arch = "nvptx64"))]
use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Reads `*p` with no ordering, as other GPU threads may be updating it atomically.
///
/// # Safety
/// `p` is valid and 4-byte aligned.
#[inline(always)]
pub unsafe fn load_relaxed_gpu(p: *const u32) -> u32 {
    gpu_or_host!(
        {
            let v: u32;
            core::arch::asm!(
                "ld.relaxed.gpu.u32 {v}, [{p}];",
                v = out(reg32) v,
                p = in(reg64) p,
                options(nostack)
            );
            v
        },
        {
            // A spin-wait is made of these: the emulator lets the block's other threads run.
            lookahead_emu::hooks::spin_point();
            AtomicU32::from_ptr(p as *mut u32).load(Ordering::Relaxed)
        }
    )
}

/// Reads `*p` with acquire ordering at GPU scope: what other GPU threads wrote before their
/// release of it is visible after.
///
/// # Safety
/// `p` is valid, 4-byte aligned, in global memory.
#[inline(always)]
pub unsafe fn load_acquire_gpu(p: *const u32) -> u32 {
    gpu_or_host!(
        {
            let v: u32;
            core::arch::asm!(
                "ld.acquire.gpu.global.u32 {v}, [{p}];",
                v = out(reg32) v,
                p = in(reg64) p,
                options(nostack)
            );
            v
        },
        {
            lookahead_emu::hooks::spin_point();
            AtomicU32::from_ptr(p as *mut u32).load(Ordering::Acquire)
        }
    )
}

/// Reads `*p` with acquire ordering at system scope (the host's writes included).
///
/// # Safety
/// `p` is valid and 4-byte aligned.
#[inline(always)]
pub unsafe fn load_acquire_system(p: *const u32) -> u32 {
    gpu_or_host!(
        {
            let v: u32;
            core::arch::asm!(
                "ld.acquire.sys.u32 {v}, [{p}];",
                v = out(reg32) v,
                p = in(reg64) p,
                options(nostack)
            );
            v
        },
        {
            lookahead_emu::hooks::spin_point();
            AtomicU32::from_ptr(p as *mut u32).load(Ordering::Acquire)
        }
    )
}

/// Writes `v` to `*p` after a full system-scope fence, with release ordering: every earlier
/// store of this thread is visible to whoever (the host included) acquires `*p` and sees `v`.
///
/// # Safety
/// `p` is valid and 4-byte aligned.
#[inline(always)]
pub unsafe fn store_release_system(p: *mut u32, v: u32) {
    gpu_or_host!(
        core::arch::asm!(
            "fence.sc.sys;",
            "st.release.sys.u32 [{p}], {v};",
            p = in(reg64) p,
            v = in(reg32) v,
            options(nostack)
        ),
        {
            fence(Ordering::SeqCst);
            AtomicU32::from_ptr(p).store(v, Ordering::Release)
        }
    )
}

/// Writes `v` to `*p` as a volatile store (not cached, not reordered with other volatile
/// accesses; ordered for others by a later release).
///
/// # Safety
/// `p` is valid and 4-byte aligned.
#[inline(always)]
pub unsafe fn store_volatile_u32(p: *mut u32, v: u32) {
    gpu_or_host!(
        core::arch::asm!(
            "st.volatile.u32 [{p}], {v};",
            p = in(reg64) p,
            v = in(reg32) v,
            options(nostack)
        ),
        AtomicU32::from_ptr(p).store(v, Ordering::Relaxed)
    )
}

/// [`store_volatile_u32`] for a `u64`.
///
/// # Safety
/// `p` is valid and 8-byte aligned.
#[inline(always)]
pub unsafe fn store_volatile_u64(p: *mut u64, v: u64) {
    gpu_or_host!(
        core::arch::asm!(
            "st.volatile.u64 [{p}], {v};",
            p = in(reg64) p,
            v = in(reg64) v,
            options(nostack)
        ),
        AtomicU64::from_ptr(p).store(v, Ordering::Relaxed)
    )
}

/// Reads `*p` with the streaming cache hint (`ld.global.cs`): the data is read once, so it
/// should not displace what the caches hold.
///
/// # Safety
/// `p` is valid, 4-byte aligned, in global memory, and not written while read.
#[inline(always)]
pub unsafe fn load_streaming(p: *const u32) -> u32 {
    gpu_or_host!(
        {
            let v: u32;
            core::arch::asm!(
                "ld.global.cs.u32 {v}, [{p}];",
                v = out(reg32) v,
                p = in(reg64) p,
                options(nostack, readonly, preserves_flags)
            );
            v
        },
        *p
    )
}

/// [`load_streaming`] of four words at once (one 16-byte load).
///
/// # Safety
/// As [`load_streaming`], with `p` 16-byte aligned and four words valid.
#[inline(always)]
pub unsafe fn load_streaming_v4(p: *const u32) -> [u32; 4] {
    gpu_or_host!(
        {
            let (a, b, c, d): (u32, u32, u32, u32);
            core::arch::asm!(
                "ld.global.cs.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];",
                a = out(reg32) a,
                b = out(reg32) b,
                c = out(reg32) c,
                d = out(reg32) d,
                p = in(reg64) p,
                options(nostack, readonly, preserves_flags)
            );
            [a, b, c, d]
        },
        [*p, *p.add(1), *p.add(2), *p.add(3)]
    )
}

/// Writes four words at once (one 16-byte store).
///
/// # Safety
/// `p` is valid for four words, 16-byte aligned, in global memory.
#[inline(always)]
pub unsafe fn store_v4(p: *mut u32, v: [u32; 4]) {
    gpu_or_host!(
        core::arch::asm!(
            "st.global.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};",
            p = in(reg64) p,
            a = in(reg32) v[0],
            b = in(reg32) v[1],
            c = in(reg32) v[2],
            d = in(reg32) v[3],
            options(nostack, preserves_flags)
        ),
        for (i, x) in v.into_iter().enumerate() {
            *p.add(i) = x;
        }
    )
}
