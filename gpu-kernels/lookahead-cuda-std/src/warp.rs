//! Warp-level operations (`cuda_std::warp`): 0.2.2's `sync_warp` and `lane_id`, and the
//! shuffles, votes and `activemask` of Rust-CUDA's main branch, with its signatures (a
//! member mask first; shuffles return the value and whether the source lane was in range).

/// `__syncwarp(mask)`: waits until every lane of `mask` is here (`bar.warp.sync`).
///
/// # Safety
/// Every lane of `mask` must call it, and the calling lane must be in `mask`; a lane of
/// `mask` that exited makes it undefined.
#[inline(always)]
pub unsafe fn sync_warp(mask: u32) {
    #[cfg(target_arch = "nvptx64")]
    core::arch::asm!("bar.warp.sync {m};", m = in(reg32) mask, options(nostack));
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = mask;
        lookahead_device::warp::sync();
    }
}

/// The calling thread's lane in its warp, 0 to 31 (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    lookahead_device::index::lane_id()
}

/// The lanes of the warp executing this together (`activemask.b32`).
#[inline(always)]
pub fn activemask() -> u32 {
    lookahead_device::warp::active_mask()
}

macro_rules! vote {
    ($(#[$doc:meta])* $name:ident, $mode:literal, $out:ty, $conv:expr, $host:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Every lane of `mask` must call it with the same `mask`, from the calling lane.
        #[inline(always)]
        pub unsafe fn $name(mask: u32, predicate: bool) -> $out {
            #[cfg(target_arch = "nvptx64")]
            let r: u32 = {
                let r: u32;
                core::arch::asm!(
                    concat!("{{ .reg .pred p; setp.ne.u32 p, {v}, 0; ", $mode, " }}"),
                    v = in(reg32) predicate as u32, m = in(reg32) mask, r = out(reg32) r,
                    options(nostack)
                );
                r
            };
            #[cfg(not(target_arch = "nvptx64"))]
            let r: u32 = {
                let _ = mask;
                ($host)(lookahead_device::warp::ballot(predicate), lookahead_device::warp::active_mask())
            };
            ($conv)(r)
        }
    };
}

vote!(
    /// `__all_sync(mask, predicate)`: whether `predicate` holds in every lane of `mask`.
    warp_vote_all,
    "{{ .reg .pred q; vote.sync.all.pred q, p, {m}; selp.u32 {r}, 1, 0, q; }}",
    bool,
    |r: u32| r != 0,
    |ballot: u32, active: u32| (ballot == active) as u32
);
vote!(
    /// `__any_sync(mask, predicate)`: whether `predicate` holds in any lane of `mask`.
    warp_vote_any,
    "{{ .reg .pred q; vote.sync.any.pred q, p, {m}; selp.u32 {r}, 1, 0, q; }}",
    bool,
    |r: u32| r != 0,
    |ballot: u32, _active: u32| (ballot != 0) as u32
);
vote!(
    /// `__ballot_sync(mask, predicate)`: the lanes of `mask` where `predicate` holds.
    warp_vote_ballot,
    "vote.sync.ballot.b32 {r}, p, {m};",
    u32,
    |r: u32| r,
    |ballot: u32, _active: u32| ballot
);

/// Values a shuffle moves: 32-bit ones in one `shfl.sync`, 64-bit ones in two.
pub trait WarpShuffleValue: Copy {
    #[doc(hidden)]
    fn to_words(self) -> [u32; 2];
    #[doc(hidden)]
    fn from_words(w: [u32; 2]) -> Self;
    #[doc(hidden)]
    const WORDS: usize;
}

macro_rules! shuffle_value {
    ($($t:ty: $words:literal, $to:expr, $from:expr;)*) => {$(
        impl WarpShuffleValue for $t {
            const WORDS: usize = $words;
            #[inline(always)]
            fn to_words(self) -> [u32; 2] {
                ($to)(self)
            }
            #[inline(always)]
            fn from_words(w: [u32; 2]) -> Self {
                ($from)(w)
            }
        }
    )*};
}

shuffle_value! {
    u32: 1, |v: u32| [v, 0], |w: [u32; 2]| w[0];
    i32: 1, |v: i32| [v as u32, 0], |w: [u32; 2]| w[0] as i32;
    f32: 1, |v: f32| [v.to_bits(), 0], |w: [u32; 2]| f32::from_bits(w[0]);
    u64: 2, |v: u64| [v as u32, (v >> 32) as u32], |w: [u32; 2]| w[0] as u64 | (w[1] as u64) << 32;
    i64: 2, |v: i64| [v as u32, (v as u64 >> 32) as u32], |w: [u32; 2]| (w[0] as u64 | (w[1] as u64) << 32) as i64;
    f64: 2, |v: f64| { let b = v.to_bits(); [b as u32, (b >> 32) as u32] }, |w: [u32; 2]| f64::from_bits(w[0] as u64 | (w[1] as u64) << 32);
}

/// One 32-bit `shfl.sync` of mode `$mode`: (value, whether the source lane was in range).
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_macros))]
macro_rules! shfl_word {
    ($mode:literal, $value:expr, $arg:expr, $c:expr, $mask:expr) => {{
        let (r, ok): (u32, u32);
        core::arch::asm!(
            concat!("{{ .reg .pred p; shfl.sync.", $mode, ".b32 {r}|p, {v}, {a}, {c}, {m}; selp.u32 {ok}, 1, 0, p; }}"),
            r = out(reg32) r, ok = out(reg32) ok, v = in(reg32) $value, a = in(reg32) $arg,
            c = in(reg32) $c, m = in(reg32) $mask, options(nostack)
        );
        (r, ok != 0)
    }};
}

macro_rules! shuffle {
    ($(#[$doc:meta])* $name:ident, $mode:literal, $clamp:expr, $emu:ident) => {
        $(#[$doc])*
        ///
        /// `width` (a power of two up to 32) splits the warp into groups that shuffle among
        /// themselves. Returns the value and whether the source lane was in range.
        ///
        /// # Safety
        /// Every lane of `mask` must call it with the same `mask`, from the calling lane.
        #[inline(always)]
        pub unsafe fn $name<T: WarpShuffleValue>(mask: u32, value: T, arg: u32, width: u32) -> (T, bool) {
            let w = value.to_words();
            #[cfg(target_arch = "nvptx64")]
            {
                // CUDA's encoding: the segment mask above bit 8, the clamp lane below.
                let c = ((32 - width.clamp(1, 32)) << 8) | $clamp;
                let (lo, ok) = shfl_word!($mode, w[0], arg, c, mask);
                let hi = if T::WORDS == 2 { shfl_word!($mode, w[1], arg, c, mask).0 } else { 0 };
                (T::from_words([lo, hi]), ok)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                let _ = (mask, width);
                let lo = lookahead_device::warp::$emu(w[0], arg);
                let hi = if T::WORDS == 2 { lookahead_device::warp::$emu(w[1], arg) } else { 0 };
                (T::from_words([lo, hi]), true)
            }
        }
    };
}

shuffle!(
    /// `__shfl_down_sync(mask, value, delta, width)`: the value of lane `lane + delta`.
    warp_shuffle_down, "down", 0x1f, shfl_down_u32
);
shuffle!(
    /// `__shfl_up_sync(mask, value, delta, width)`: the value of lane `lane - delta`.
    warp_shuffle_up, "up", 0, shfl_up_u32
);
shuffle!(
    /// `__shfl_sync(mask, value, src, width)`: the value of lane `src`.
    warp_shuffle_idx, "idx", 0x1f, shfl_idx_u32
);
shuffle!(
    /// `__shfl_xor_sync(mask, value, lane_mask, width)`: the value of lane `lane ^ lane_mask`.
    warp_shuffle_xor, "bfly", 0x1f, shfl_xor_u32
);
