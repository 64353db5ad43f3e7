//! Warp-level data exchange (`shfl.sync`) and votes (`vote.sync`). Every lane named in the
//! mask must call the same operation; the functions without a mask use [`FULL_MASK`].

/// All 32 lanes of the warp.
pub const FULL_MASK: u32 = 0xffff_ffff;

#[cfg(not(target_arch = "nvptx64"))]
use lookahead_emu::{hooks, ShuffleMode, WarpOp};

macro_rules! shfl {
    ($(#[$doc:meta])* $name:ident, $mode:literal, $clamp:literal, $emu_mode:ident) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(value: u32, lane_arg: u32) -> u32 {
            gpu_or_host!(
                {
                    let out: u32;
                    // SAFETY: a register exchange between the lanes of a full warp.
                    unsafe {
                        core::arch::asm!(
                            concat!(
                                "shfl.sync.",
                                $mode,
                                ".b32 {out}, {v}, {d}, ",
                                $clamp,
                                ", {m};"
                            ),
                            out = out(reg32) out,
                            v = in(reg32) value,
                            d = in(reg32) lane_arg,
                            m = in(reg32) FULL_MASK,
                            options(nostack)
                        );
                    }
                    out
                },
                hooks::warp_op(
                    concat!("warp::", stringify!($name)),
                    WarpOp::Shuffle { mode: ShuffleMode::$emu_mode, value, arg: lane_arg },
                )
            )
        }
    };
}

shfl!(
    /// `value` from lane `lane_id + delta`; lanes past the end keep their own
    /// (`shfl.sync.down.b32`).
    shfl_down_u32, "down", "0x1f", Down
);
shfl!(
    /// `value` from lane `lane_id - delta`; lanes before 0 keep their own (`shfl.sync.up.b32`).
    shfl_up_u32, "up", "0", Up
);
shfl!(
    /// `value` from lane `lane_id ^ mask` (`shfl.sync.bfly.b32`), the butterfly of reductions.
    shfl_xor_u32, "bfly", "0x1f", Xor
);
shfl!(
    /// `value` from lane `src` (`shfl.sync.idx.b32`), a broadcast when all lanes pass the same
    /// `src`.
    shfl_idx_u32, "idx", "0x1f", Idx
);

/// [`shfl_down_u32`] for `f32`.
#[inline(always)]
pub fn shfl_down_f32(value: f32, delta: u32) -> f32 {
    f32::from_bits(shfl_down_u32(value.to_bits(), delta))
}

/// [`shfl_up_u32`] for `f32`.
#[inline(always)]
pub fn shfl_up_f32(value: f32, delta: u32) -> f32 {
    f32::from_bits(shfl_up_u32(value.to_bits(), delta))
}

/// [`shfl_xor_u32`] for `f32`.
#[inline(always)]
pub fn shfl_xor_f32(value: f32, mask: u32) -> f32 {
    f32::from_bits(shfl_xor_u32(value.to_bits(), mask))
}

/// [`shfl_idx_u32`] for `f32`.
#[inline(always)]
pub fn shfl_idx_f32(value: f32, src: u32) -> f32 {
    f32::from_bits(shfl_idx_u32(value.to_bits(), src))
}

/// [`shfl_idx_u32`] for `u64` (two shuffles).
#[inline(always)]
pub fn shfl_idx_u64(value: u64, src: u32) -> u64 {
    let lo = shfl_idx_u32(value as u32, src) as u64;
    let hi = shfl_idx_u32((value >> 32) as u32, src) as u64;
    lo | hi << 32
}

/// Sum of `value` over the 32 lanes of a full warp; the result is valid in lane 0.
#[inline(always)]
pub fn warp_sum_f32(mut value: f32) -> f32 {
    let mut delta = 16;
    while delta > 0 {
        value += shfl_down_f32(value, delta);
        delta /= 2;
    }
    value
}

macro_rules! vote_pred {
    ($(#[$doc:meta])* $name:ident, $mode:literal, $emu_op:ident) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(predicate: bool) -> bool {
            gpu_or_host!({
                let out: u32;
                // SAFETY: a warp vote over a full warp.
                unsafe {
                    core::arch::asm!(
                        "{{ .reg .pred p, q;",
                        "setp.ne.u32 p, {pin}, 0;",
                        concat!("vote.sync.", $mode, ".pred q, p, {m};"),
                        "selp.u32 {out}, 1, 0, q; }}",
                        out = out(reg32) out,
                        pin = in(reg32) predicate as u32,
                        m = in(reg32) FULL_MASK,
                        options(nostack)
                    );
                }
                out != 0
            },
            hooks::warp_op(concat!("warp::", stringify!($name)), WarpOp::$emu_op(predicate)) != 0)
        }
    };
}

vote_pred!(
    /// Whether `predicate` holds in every lane of the warp (`vote.sync.all.pred`).
    vote_all, "all", All
);
vote_pred!(
    /// Whether `predicate` holds in any lane of the warp (`vote.sync.any.pred`).
    vote_any, "any", Any
);

/// Bit `k` set when `predicate` holds in lane `k` (`vote.sync.ballot.b32`).
#[inline(always)]
pub fn ballot(predicate: bool) -> u32 {
    gpu_or_host!(
        {
            let out: u32;
            // SAFETY: a warp vote over a full warp.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred p;",
                    "setp.ne.u32 p, {pin}, 0;",
                    "vote.sync.ballot.b32 {out}, p, {m}; }}",
                    out = out(reg32) out,
                    pin = in(reg32) predicate as u32,
                    m = in(reg32) FULL_MASK,
                    options(nostack)
                );
            }
            out
        },
        hooks::warp_op("warp::ballot", WarpOp::Ballot(predicate))
    )
}

/// Waits until every lane of the warp gets here, and orders the memory accesses each lane
/// made before it for the others (`bar.warp.sync`).
///
/// It does not make a split warp run together afterwards: `ptxas` compiles it, like a
/// shuffle, to a collective that the parts of a split warp join and then leave, each on its
/// own path again (the SASS; for shuffles, ncu's per-instruction thread counts on the
/// H100). To keep lanes together, avoid branches that only some lanes take, such as
/// `if lane == 0 { .. }` in a loop ([`crate::atomic::warp_fetch_add`]).
#[inline(always)]
pub fn sync() {
    gpu_or_host!(
        // SAFETY: a barrier over the full warp; every lane calls it.
        unsafe {
            core::arch::asm!("bar.warp.sync {m};", m = in(reg32) FULL_MASK, options(nostack))
        },
        {
            hooks::warp_op("warp::sync", WarpOp::Sync);
        }
    )
}

/// The lanes currently executing this instruction together (`activemask.b32`).
#[inline(always)]
pub fn active_mask() -> u32 {
    gpu_or_host!(
        {
            let out: u32;
            // SAFETY: reads the active-lane mask.
            unsafe {
                core::arch::asm!("activemask.b32 {out};", out = out(reg32) out, options(nostack))
            };
            out
        },
        // The emulator's lanes are converged at every instruction: the lanes not exited.
        hooks::active_mask()
    )
}
