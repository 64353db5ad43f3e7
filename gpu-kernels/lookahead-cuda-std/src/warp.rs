//! Warp-level operations (`cuda_std::warp`): `sync_warp`, `lane_id`, `activemask`, and the
//! shuffles (of 8- to 128-bit integers and floats) and votes of Rust-CUDA's main branch,
//! with its signatures (a member mask first; shuffles return the value and whether the
//! source lane was in range).

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

/// Values a shuffle moves, as 32-bit words: one `shfl.sync` for 8-, 16- and 32-bit
/// values, two for 64-bit ones, four for 128-bit ones.
pub trait WarpShuffleValue: Copy {
    #[doc(hidden)]
    fn to_words(self) -> [u32; 4];
    #[doc(hidden)]
    fn from_words(w: [u32; 4]) -> Self;
    #[doc(hidden)]
    const WORDS: usize;
}

/// `WarpShuffleValue` for integer types, through their unsigned form of the same width.
macro_rules! shuffle_int {
    ($($t:ty, $u:ty, $words:literal;)*) => {$(
        impl WarpShuffleValue for $t {
            const WORDS: usize = $words;
            #[inline(always)]
            fn to_words(self) -> [u32; 4] {
                let v = self as $u as u128;
                [v as u32, (v >> 32) as u32, (v >> 64) as u32, (v >> 96) as u32]
            }
            #[inline(always)]
            fn from_words(w: [u32; 4]) -> Self {
                let v = w[0] as u128 | (w[1] as u128) << 32 | (w[2] as u128) << 64 | (w[3] as u128) << 96;
                v as $u as $t
            }
        }
    )*};
}

shuffle_int! {
    u8, u8, 1; i8, u8, 1; u16, u16, 1; i16, u16, 1; u32, u32, 1; i32, u32, 1;
    u64, u64, 2; i64, u64, 2; u128, u128, 4; i128, u128, 4;
}

/// `WarpShuffleValue` for floats, through their bits.
macro_rules! shuffle_float {
    ($($t:ty, $bits:ty;)*) => {$(
        impl WarpShuffleValue for $t {
            const WORDS: usize = <$bits as WarpShuffleValue>::WORDS;
            #[inline(always)]
            fn to_words(self) -> [u32; 4] {
                self.to_bits().to_words()
            }
            #[inline(always)]
            fn from_words(w: [u32; 4]) -> Self {
                <$t>::from_bits(<$bits>::from_words(w))
            }
        }
    )*};
}

shuffle_float! { f32, u32; f64, u64; }

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
                let (mut out, mut ok) = ([0; 4], false);
                // Every word comes from the same source lane, so each says the same `ok`.
                for (o, word) in out.iter_mut().zip(w).take(T::WORDS) {
                    (*o, ok) = shfl_word!($mode, word, arg, c, mask);
                }
                (T::from_words(out), ok)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                let _ = (mask, width);
                let mut out = [0; 4];
                for (o, word) in out.iter_mut().zip(w).take(T::WORDS) {
                    *o = lookahead_device::warp::$emu(word, arg);
                }
                (T::from_words(out), true)
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
